//! The dialect's command table (every family's specs, each command declared once in its
//! family's file), lookups by name, and its own ACL categories.

use super::flags::{ACL_CATEGORIES, FAST};
use super::host::speaks_valkey_bloom;
use super::info::CommandInfo;
use super::{
    bloom, bloom_merge, bloom_valkey, counting, countmin, cuckoo, tdigest, topk, windowed,
};
use crate::config::{Dialect, ValkeyFlavour};

/// Every dialect command.
pub fn table() -> &'static [CommandInfo] {
    static TABLE: std::sync::OnceLock<Vec<CommandInfo>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut all = bloom::commands();
        all.extend(bloom_merge::commands());
        all.extend(cuckoo::commands());
        all.extend(windowed::commands());
        all.extend(tdigest::commands());
        all.extend(countmin::commands());
        all.extend(topk::commands());
        all.extend(counting::commands());
        all
    })
}

/// Every dialect command as `dialect` registers it: [`table`], in the same order, with
/// valkey-bloom's commands in its dialect as valkey-bloom registers them — no command info (so
/// the server shows arity -1 and derives the key spec from the first/last/step keys; the
/// table's arity is still checked by [`execute`](super::execute), with the command named as
/// registered), every one `fast`, and `BF.INSERT` from 2 arguments (valkey-bloom 1.0 creates a
/// filter without items; 0.1.0's handler asks for 4); 1.0's also with the commands only it has
/// (`BF.LOAD`), last.
pub fn table_for(dialect: Dialect) -> &'static [CommandInfo] {
    use std::sync::OnceLock;
    static VALKEY_0_1: OnceLock<Vec<CommandInfo>> = OnceLock::new();
    static VALKEY_1_0: OnceLock<Vec<CommandInfo>> = OnceLock::new();
    let (cell, only_1_0) = match dialect.valkey() {
        None => return table(),
        Some(ValkeyFlavour::V0_1) => (&VALKEY_0_1, false),
        Some(ValkeyFlavour::V1_0) => (&VALKEY_1_0, true),
    };
    cell.get_or_init(|| {
        let mut all: Vec<CommandInfo> = table()
            .iter()
            .map(|info| {
                let mut info = info.clone();
                if speaks_valkey_bloom(dialect, info.name) {
                    info.docs = None;
                    info.flags |= FAST;
                    if info.name == "BF.INSERT" {
                        info.arity = -2;
                    }
                }
                info
            })
            .collect();
        if only_1_0 {
            all.extend(bloom_valkey::commands());
        }
        all
    })
}

/// The dialect's own ACL categories (those not Redis' own), in the order the table first
/// names them: what a module registers with `RedisModule_AddACLCategory`.
pub fn categories() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for c in table()
        .iter()
        .flat_map(|info| info.category.split_ascii_whitespace())
    {
        if !ACL_CATEGORIES.contains(&c) && !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// The dialect command called `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static CommandInfo> {
    table()
        .iter()
        .find(|c| c.name.as_bytes().eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::super::flags::WRITE;
    use super::super::testing::*;
    use super::table;

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

    /// A write is declared only through its `Access`, with its event: `WRITE` among the other
    /// flags is refused as the table is built.
    #[test]
    #[should_panic(expected = "WRITE and READONLY come from its Access")]
    fn a_write_flag_without_its_event_is_refused() {
        crate::commands::spec(
            "X.SET",
            crate::commands::READ,
            |_, _| crate::reply::Reply::ok(),
            WRITE,
            "x",
            2,
            None,
        );
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
