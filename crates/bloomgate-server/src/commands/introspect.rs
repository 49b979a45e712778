//! COMMAND INFO / COMMAND DOCS replies from the table's metadata: BF.*, CF.* and WF.* with
//! RedisBloom 8.2's arity, flags, ACL categories, key specs and documentation, shaped as Redis
//! shapes a module command's; the server's own commands likewise from their entries.

use bloomgate_dialect::commands::{flags, Arg, Docs, MODULE_NAME};

use super::host::ServerCommand;
use crate::resp::Reply;

fn s(text: &str) -> Reply {
    Reply::bulk(text.as_bytes().to_vec())
}

fn statuses<'a>(names: impl IntoIterator<Item = &'a str>) -> Reply {
    Reply::Array(names.into_iter().map(|n| Reply::Simple(n.into())).collect())
}

/// Whether `info` is a module command (the dialect's).
fn is_module(info: &ServerCommand) -> bool {
    info.flags.contains(flags::MODULE)
}

/// One `COMMAND INFO` entry: name, arity, flags, first/last/step, ACL categories, tips, key
/// specs, subcommands.
pub fn command_info(spec: &ServerCommand) -> Reply {
    let categories = spec
        .acl_categories()
        .into_iter()
        .map(|c| format!("@{c}"))
        .collect::<Vec<_>>();
    let flags = spec.flag_names();
    let key_specs = if is_module(spec) {
        key_specs(spec)
    } else {
        Reply::Array(vec![])
    };
    Reply::Array(vec![
        s(&spec.name.to_lowercase()),
        Reply::Int(i64::from(spec.arity)),
        statuses(flags),
        Reply::Int(i64::from(spec.first_key)),
        Reply::Int(i64::from(spec.last_key)),
        Reply::Int(i64::from(spec.step)),
        statuses(categories.iter().map(String::as_str)),
        Reply::Array(vec![]),
        key_specs,
        Reply::Array(vec![]),
    ])
}

/// `COMMAND GETKEYS` / `GETKEYSANDFLAGS` (`with_flags`) of `args` (the command's name first) for
/// the command `info` names, with Redis' errors: the keys the table's key specs find
/// ([`CommandInfo::key_positions`](bloomgate_dialect::commands::CommandInfo::key_positions)),
/// each with its key spec's flags.
pub fn get_keys(info: Option<&ServerCommand>, args: &[&[u8]], with_flags: bool) -> Reply {
    let Some(info) = info else {
        return Reply::error("ERR Invalid command specified");
    };
    if !info.arity_ok(args.len()) {
        return Reply::error("ERR Invalid number of arguments specified for command");
    }
    let Some(keys) = info.key_positions(args) else {
        return Reply::error("ERR Invalid arguments specified for command");
    };
    if keys.is_empty() {
        return Reply::error("ERR The command has no key arguments");
    }
    let flags = |rw: bool| -> &'static [&'static str] {
        match (&info.docs, rw) {
            (None, _) if is_module(info) => &["RW", "access", "update"],
            (_, true) => &["RW"],
            (_, false) => &["RO"],
        }
    };
    Reply::Array(
        keys.into_iter()
            .map(|(at, rw)| {
                let key = Reply::bulk(args[at].to_vec());
                if with_flags {
                    Reply::Array(vec![key, statuses(flags(rw).iter().copied())])
                } else {
                    key
                }
            })
            .collect(),
    )
}

/// The key specs of a dialect command: its key at argument 1, then (a merge's) the read-only
/// sources counted by the integer at [`Docs::numkeys_at`]. Commands RedisBloom registers
/// without documentation keep the spec Redis derives from first/last/step.
fn key_specs(info: &ServerCommand) -> Reply {
    let (notes, flags): (Option<&str>, &[&str]) = match &info.docs {
        Some(d) => (Some(d.key_notes), if d.key_rw { &["RW"] } else { &["RO"] }),
        None => (None, &["RW", "access", "update"]),
    };
    let mut spec = Vec::new();
    if let Some(notes) = notes.filter(|n| !n.is_empty()) {
        spec.push((s("notes"), s(notes)));
    }
    spec.push((s("flags"), statuses(flags.iter().copied())));
    spec.push((
        s("begin_search"),
        search("index", &[("index", i64::from(info.first_key))]),
    ));
    spec.push((
        s("find_keys"),
        search("range", &[("lastkey", 0), ("keystep", 1), ("limit", 0)]),
    ));
    let mut specs = vec![Reply::Map(spec)];
    if let Some(at) = info.docs.as_ref().and_then(|d| d.numkeys_at) {
        specs.push(Reply::Map(vec![
            (s("flags"), statuses(["RO"])),
            (
                s("begin_search"),
                search("index", &[("index", i64::from(at))]),
            ),
            (
                s("find_keys"),
                search(
                    "keynum",
                    &[("keynumidx", 0), ("firstkey", 1), ("keystep", 1)],
                ),
            ),
        ]));
    }
    Reply::Array(specs)
}

/// A key spec's `begin_search` or `find_keys`: its type and its integer fields.
fn search(kind: &str, fields: &[(&str, i64)]) -> Reply {
    let fields = fields
        .iter()
        .map(|&(name, value)| (s(name), Reply::Int(value)))
        .collect();
    Reply::Map(vec![(s("type"), s(kind)), (s("spec"), Reply::Map(fields))])
}

/// One `COMMAND DOCS` entry (the value under the command's name).
pub fn command_docs(info: &ServerCommand) -> Reply {
    if let (false, Some(docs)) = (is_module(info), &info.docs) {
        // A server command with documentation of its own (GATE.*).
        return Reply::Map(vec![
            (s("summary"), s(docs.summary)),
            (s("since"), s(docs.since)),
            (s("group"), s("server")),
            (s("complexity"), s(docs.complexity)),
            (s("arguments"), arguments(docs.args)),
        ]);
    }
    if !is_module(info) {
        return Reply::Map(vec![
            (s("summary"), s(&info.name.to_lowercase())),
            (s("since"), s("1.0.0")),
            (s("group"), s("generic")),
        ]);
    }
    let mut doc = Vec::new();
    let Some(Docs {
        summary,
        complexity,
        since,
        args,
        history,
        ..
    }) = &info.docs
    else {
        return Reply::Map(vec![
            (s("group"), s("module")),
            (s("module"), s(MODULE_NAME)),
        ]);
    };
    doc.push((s("summary"), s(summary)));
    doc.push((s("since"), s(since)));
    doc.push((s("group"), s("module")));
    doc.push((s("complexity"), s(complexity)));
    doc.push((s("module"), s(MODULE_NAME)));
    if !history.is_empty() {
        let entries = history
            .iter()
            .map(|(version, change)| Reply::Array(vec![s(version), s(change)]))
            .collect();
        doc.push((s("history"), Reply::Array(entries)));
    }
    doc.push((s("arguments"), arguments(args)));
    Reply::Map(doc)
}

/// Redis' argument list: name, type, key_spec_index (keys: the n-th key argument is the n-th
/// key spec's), token, flags, nested arguments.
fn arguments(args: &[Arg]) -> Reply {
    let mut key_spec = 0;
    Reply::Array(
        args.iter()
            .map(|a| {
                let mut m = vec![(s("name"), s(a.name)), (s("type"), s(a.kind.name()))];
                if a.kind == bloomgate_dialect::commands::ArgKind::Key {
                    m.push((s("key_spec_index"), Reply::Int(key_spec)));
                    key_spec += 1;
                }
                if let Some(token) = a.token {
                    m.push((s("token"), s(token)));
                }
                let flags: Vec<&str> = [(a.optional, "optional"), (a.multiple, "multiple")]
                    .into_iter()
                    .filter(|(on, _)| *on)
                    .map(|(_, n)| n)
                    .collect();
                if !flags.is_empty() {
                    m.push((s("flags"), statuses(flags)));
                }
                if !a.sub.is_empty() {
                    m.push((s("arguments"), arguments(a.sub)));
                }
                Reply::Map(m)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::s;
    use crate::commands::dispatch::testing::Harness;
    use crate::resp::Reply;

    fn statuses(names: &[&str]) -> Reply {
        Reply::Array(names.iter().map(|n| Reply::Simple((*n).into())).collect())
    }

    /// COMMAND INFO bf.add as RedisBloom 8.2 registers it.
    #[test]
    fn command_info_of_a_dialect_command() {
        let mut h = Harness::new();
        let key_spec = Reply::Map(vec![
            (
                s("notes"),
                s("is key name for a Bloom filter to add the item to."),
            ),
            (s("flags"), statuses(&["RW"])),
            (
                s("begin_search"),
                Reply::Map(vec![
                    (s("type"), s("index")),
                    (s("spec"), Reply::Map(vec![(s("index"), Reply::Int(1))])),
                ]),
            ),
            (
                s("find_keys"),
                Reply::Map(vec![
                    (s("type"), s("range")),
                    (
                        s("spec"),
                        Reply::Map(vec![
                            (s("lastkey"), Reply::Int(0)),
                            (s("keystep"), Reply::Int(1)),
                            (s("limit"), Reply::Int(0)),
                        ]),
                    ),
                ]),
            ),
        ]);
        let want = Reply::Array(vec![Reply::Array(vec![
            s("bf.add"),
            Reply::Int(3),
            statuses(&["write", "denyoom", "module"]),
            Reply::Int(1),
            Reply::Int(1),
            Reply::Int(1),
            statuses(&["@write", "@slow", "@bloom"]),
            Reply::Array(vec![]),
            Reply::Array(vec![key_spec]),
            Reply::Array(vec![]),
        ])]);
        assert_eq!(h.run("COMMAND INFO bf.add"), want);
        let Reply::Array(info) = h.run("COMMAND INFO cf.exists nosuch") else {
            panic!()
        };
        assert_eq!(info[1], Reply::Nil);
        let Reply::Array(fields) = &info[0] else {
            panic!()
        };
        assert_eq!(fields[1], Reply::Int(3));
        assert_eq!(fields[6], statuses(&["@read", "@fast", "@cuckoo"]));
    }

    /// COMMAND DOCS: summary, since, group, complexity, module, arguments.
    #[test]
    fn command_docs_of_dialect_commands() {
        let mut h = Harness::new();
        let Reply::Map(docs) = h.run("COMMAND DOCS bf.card bf.debug") else {
            panic!()
        };
        assert_eq!(docs[0].0, s("bf.card"));
        assert_eq!(
            docs[0].1,
            Reply::Map(vec![
                (s("summary"), s("Returns the cardinality of a Bloom filter")),
                (s("since"), s("2.4.4")),
                (s("group"), s("module")),
                (s("complexity"), s("O(1)")),
                (s("module"), s("bf")),
                (
                    s("arguments"),
                    Reply::Array(vec![Reply::Map(vec![
                        (s("name"), s("key")),
                        (s("type"), s("key")),
                        (s("key_spec_index"), Reply::Int(0)),
                    ])])
                ),
            ])
        );
        assert_eq!(
            docs[1].1,
            Reply::Map(vec![(s("group"), s("module")), (s("module"), s("bf"))])
        );
        let Reply::Map(docs) = h.run("COMMAND DOCS bf.reserve") else {
            panic!()
        };
        let Reply::Map(fields) = &docs[0].1 else {
            panic!()
        };
        let Reply::Array(args) = &fields[5].1 else {
            panic!()
        };
        assert_eq!(
            args[4],
            Reply::Map(vec![
                (s("name"), s("nonscaling")),
                (s("type"), s("pure-token")),
                (s("token"), s("NONSCALING")),
                (s("flags"), statuses(&["optional"])),
            ])
        );
    }

    /// COMMAND GETKEYS / GETKEYSANDFLAGS from the key specs, with Redis' errors (as Redis 8.2
    /// answers them for RedisBloom's TDIGEST.MERGE), and BF.MERGE's two key specs.
    #[test]
    fn getkeys_from_the_key_specs() {
        let mut h = Harness::new();
        let keys = |names: &[&str]| Reply::Array(names.iter().map(|n| s(n)).collect());
        assert_eq!(
            h.run("COMMAND GETKEYS BF.MERGE d 2 a b OVERRIDE"),
            keys(&["d", "a", "b"])
        );
        assert_eq!(
            h.run("COMMAND GETKEYSANDFLAGS bf.merge d 1 a"),
            Reply::Array(vec![
                Reply::Array(vec![s("d"), statuses(&["RW"])]),
                Reply::Array(vec![s("a"), statuses(&["RO"])]),
            ])
        );
        assert_eq!(h.run("COMMAND GETKEYS bf.madd k a b"), keys(&["k"]));
        assert_eq!(
            h.run("COMMAND GETKEYS tdigest.merge d 1 s"),
            keys(&["d", "s"])
        );
        assert_eq!(h.run("COMMAND GETKEYS del a b c"), keys(&["a", "b", "c"]));
        for (line, error) in [
            (
                "COMMAND GETKEYS BF.MERGE d 3 a b",
                "ERR Invalid arguments specified for command",
            ),
            (
                "COMMAND GETKEYS BF.MERGE d x a b",
                "ERR Invalid arguments specified for command",
            ),
            ("COMMAND GETKEYS nosuch a", "ERR Invalid command specified"),
            (
                "COMMAND GETKEYS bf.add k",
                "ERR Invalid number of arguments specified for command",
            ),
            (
                "COMMAND GETKEYS ping",
                "ERR The command has no key arguments",
            ),
            (
                "COMMAND GETKEYS",
                "ERR wrong number of arguments for 'command|getkeys' command",
            ),
        ] {
            assert_eq!(h.run(line), Reply::error(error), "{line}");
        }
        let Reply::Array(info) = h.run("COMMAND INFO bf.merge") else {
            panic!()
        };
        let Reply::Array(fields) = &info[0] else {
            panic!()
        };
        assert_eq!(
            fields[2],
            statuses(&["write", "denyoom", "module", "movablekeys"])
        );
        let Reply::Array(specs) = &fields[8] else {
            panic!()
        };
        assert_eq!(specs.len(), 2);
        let Reply::Map(sources) = &specs[1] else {
            panic!()
        };
        assert_eq!(sources[0], (s("flags"), statuses(&["RO"])));
        let Reply::Map(find_keys) = &sources[2].1 else {
            panic!()
        };
        assert_eq!(find_keys[0], (s("type"), s("keynum")));
    }

    #[test]
    fn command_count_and_list_include_the_dialect() {
        let mut h = Harness::new();
        let Reply::Int(count) = h.run("COMMAND COUNT") else {
            panic!()
        };
        let Reply::Array(list) = h.run("COMMAND LIST") else {
            panic!()
        };
        assert_eq!(count as usize, list.len());
        assert!(list.contains(&s("cf.loadchunk")) && list.contains(&s("acl")));
    }
}
