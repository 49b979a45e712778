//! Keyspace notifications: the one place a dialect command's event name is declared
//! ([`Command::event`]). [`execute`](super::execute) signals it through
//! [`Host::notify`](super::Host::notify) once per write command that changed something, with the
//! command's key; hosts publish it (the module as a module event, class `d`; the server on its
//! own pub/sub).
//!
//! Names: the Bloom family uses valkey-bloom's (`bloom.reserve`, `bloom.add`), so subscribers
//! written for it keep working; every other family is the command's lower-case family prefix
//! and verb (`cf.add`, `cms.incrby`, `tdigest.merge`, …). Every command that adds items
//! (ADD, MADD, INSERT and their NX forms) signals `<family>.add`.

use super::info::Command;

impl Command {
    /// The keyspace event this command signals when it changes its key, `None` for a read.
    pub fn event(self) -> Option<&'static str> {
        use Command::*;
        Some(match self {
            BfReserve => "bloom.reserve",
            BfAdd | BfMadd | BfInsert => "bloom.add",
            BfLoadchunk => "bloom.loadchunk",
            BfMerge => "bloom.merge",
            CbfReserve => "cbf.reserve",
            CbfAdd | CbfMadd => "cbf.add",
            CbfDel => "cbf.del",
            CbfLoadchunk => "cbf.loadchunk",
            CfReserve => "cf.reserve",
            CfAdd | CfAddnx | CfInsert | CfInsertnx => "cf.add",
            CfDel => "cf.del",
            CfCompact => "cf.compact",
            CfLoadchunk => "cf.loadchunk",
            WfReserve => "wf.reserve",
            WfAdd | WfMadd | WfInsert => "wf.add",
            WfLoadchunk => "wf.loadchunk",
            TdCreate => "tdigest.create",
            TdReset => "tdigest.reset",
            TdAdd => "tdigest.add",
            TdMerge => "tdigest.merge",
            CmsInitbydim => "cms.initbydim",
            CmsInitbyprob => "cms.initbyprob",
            CmsIncrby => "cms.incrby",
            CmsMerge => "cms.merge",
            TopkReserve => "topk.reserve",
            TopkAdd => "topk.add",
            TopkIncrby => "topk.incrby",
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::flags::WRITE;
    use super::super::table;
    use super::super::testing::*;

    /// Every write command of the table declares an event, every read none, and each name is
    /// the family's lower-case prefix (valkey-bloom's `bloom` for BF) and a dot.
    #[test]
    fn every_write_command_has_an_event_of_its_family() {
        for info in table() {
            let event = info.command.event();
            assert_eq!(
                event.is_some(),
                info.flags.contains(WRITE),
                "{} and its event {event:?}",
                info.name
            );
            if let Some(event) = event {
                let family = info.name.split('.').next().unwrap().to_ascii_lowercase();
                let family = if family == "bf" {
                    "bloom".into()
                } else {
                    family
                };
                assert!(event.starts_with(&format!("{family}.")), "{event}");
            }
        }
    }

    /// One event per write that changed something, with the command's key; none for a read, a
    /// failed write or a write that changed nothing.
    #[test]
    fn a_write_that_changed_its_key_signals_one_event() {
        let mut h = Harness::new();
        let cases: &[(&str, Option<&str>)] = &[
            ("BF.ADD b x", Some("bloom.add")),
            ("BF.ADD b x", None),
            ("BF.EXISTS b x", None),
            ("BF.MADD b x y", Some("bloom.add")),
            ("BF.RESERVE r 0.01 100", Some("bloom.reserve")),
            ("BF.RESERVE r 0.01 100", None),
            ("BF.INSERT i ITEMS a", Some("bloom.add")),
            ("CF.ADD c x", Some("cf.add")),
            ("CF.DEL c x", Some("cf.del")),
            ("CF.DEL c x", None),
            ("CMS.INITBYDIM m 10 5", Some("cms.initbydim")),
            ("CMS.INCRBY m a 1", Some("cms.incrby")),
            ("CMS.QUERY m a", None),
            ("TOPK.RESERVE t 3", Some("topk.reserve")),
            ("TOPK.ADD t a", Some("topk.add")),
            ("TDIGEST.CREATE d", Some("tdigest.create")),
            ("TDIGEST.ADD d 1", Some("tdigest.add")),
            ("TDIGEST.MIN d", None),
            ("WF.RESERVE w 0.01 100 1000 3", Some("wf.reserve")),
            ("WF.ADD w a", Some("wf.add")),
        ];
        for (line, want) in cases {
            h.events.clear();
            h.run(line);
            let key = line.split(' ').nth(1).unwrap().as_bytes();
            let want: Vec<(String, Vec<u8>)> =
                want.iter().map(|e| (e.to_string(), key.to_vec())).collect();
            assert_eq!(h.events, want, "{line}");
        }
    }
}
