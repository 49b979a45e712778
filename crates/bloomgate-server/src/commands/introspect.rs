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

/// The one key spec of a dialect command: its key at argument 1. Commands RedisBloom registers
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
        Reply::Map(vec![
            (s("type"), s("index")),
            (
                s("spec"),
                Reply::Map(vec![(s("index"), Reply::Int(i64::from(info.first_key)))]),
            ),
        ]),
    ));
    spec.push((
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
    ));
    Reply::Array(vec![Reply::Map(spec)])
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

/// Redis' argument list: name, type, key_spec_index (keys), token, flags, nested arguments.
fn arguments(args: &[Arg]) -> Reply {
    Reply::Array(
        args.iter()
            .map(|a| {
                let mut m = vec![(s("name"), s(a.name)), (s("type"), s(a.kind.name()))];
                if a.kind == bloomgate_dialect::commands::ArgKind::Key {
                    m.push((s("key_spec_index"), Reply::Int(0)));
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
