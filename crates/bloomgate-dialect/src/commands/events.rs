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
        let cases: &[(&str, &[(&str, &[u8])])] = &[
            ("BF.ADD b x", &[("bloom.add", b"b")]),
            ("BF.ADD b x", &[]),
            ("BF.EXISTS b x", &[]),
            ("BF.MADD b x y", &[("bloom.add", b"b")]),
            ("BF.RESERVE r 0.01 100", &[("bloom.reserve", b"r")]),
            ("BF.RESERVE r 0.01 100", &[]),
            ("BF.INSERT i ITEMS a", &[("bloom.add", b"i")]),
            ("CF.ADD c x", &[("cf.add", b"c")]),
            ("CF.DEL c x", &[("cf.del", b"c")]),
            ("CF.DEL c x", &[]),
            ("CMS.INITBYDIM m 10 5", &[("cms.initbydim", b"m")]),
            ("CMS.INCRBY m a 1", &[("cms.incrby", b"m")]),
            ("CMS.QUERY m a", &[]),
            ("TOPK.RESERVE t 3", &[("topk.reserve", b"t")]),
            ("TOPK.ADD t a", &[("topk.add", b"t")]),
            ("TDIGEST.CREATE d", &[("tdigest.create", b"d")]),
            ("TDIGEST.ADD d 1", &[("tdigest.add", b"d")]),
            ("TDIGEST.MIN d", &[]),
            ("WF.RESERVE w 0.01 100 1000 3", &[("wf.reserve", b"w")]),
            ("WF.ADD w a", &[("wf.add", b"w")]),
        ];
        for (line, want) in cases {
            h.events.clear();
            h.run(line);
            let want: Vec<(String, Vec<u8>)> = want
                .iter()
                .map(|(e, k)| (e.to_string(), k.to_vec()))
                .collect();
            assert_eq!(h.events, want, "{line}");
        }
    }
}
