//! A write that refuses some of its items — the per-key cap, the memory budget, a full filter —
//! replicates and logs only the items it applied, so a replica (which never refuses replicated
//! data) and a log replay end with exactly what the master holds: for every family, the
//! propagated commands are checked word for word and replayed into a replaying host whose dump
//! must equal the master's.

use bloomgate_dialect::commands::testing::*;
use bloomgate_dialect::commands::Propagate;
use bloomgate_dialect::reply::Reply;
use bloomgate_dialect::{ERR_CAP, ERR_OOM};

fn capped(limit: &str) -> Harness {
    let mut h = Harness::new();
    assert_eq!(h.config.set("bloom-memory-usage-limit", limit), Ok(true));
    h
}

/// A replica: the same cap, but replaying (so it never refuses what it is sent).
fn replica_of(master: &Harness) -> Harness {
    let mut r = Harness::new();
    r.config = master.config.clone();
    r.replaying = true;
    r
}

/// What the last command propagated, one line per command (items are plain words here); a
/// header argument of a LOADCHUNK shows as `<header>`.
fn propagated(h: &Harness) -> Vec<Vec<Vec<u8>>> {
    match h.last.as_ref().map(|o| &o.propagate) {
        Some(Propagate::Nothing) => Vec::new(),
        Some(p) => p.clone().into_commands(&[] as &[&[u8]]),
        None => panic!("no command ran"),
    }
}

fn line(command: &[Vec<u8>]) -> String {
    command
        .iter()
        .map(|a| match std::str::from_utf8(a) {
            Ok(word) if word.bytes().all(|b| b.is_ascii_graphic()) => word.to_string(),
            _ => "<header>".to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `command` on `master`, then what it propagated on `replica`; returns the reply and
/// the propagated lines. A verbatim propagation shows as the command itself.
fn step(master: &mut Harness, replica: &mut Harness, command: &str) -> (Reply, Vec<String>) {
    let reply = master.run(command);
    let commands = match master.last.as_ref().unwrap().propagate.clone() {
        Propagate::Verbatim => vec![words(command)],
        _ => propagated(master),
    };
    for c in &commands {
        replica.run_args(c);
    }
    (reply, commands.iter().map(|c| line(c)).collect())
}

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// The replies of an item write: how many items went in (answered anything but an error) and
/// the errors.
fn applied(reply: &Reply) -> (Vec<usize>, Vec<String>) {
    let Reply::Array(replies) = reply else {
        panic!("{reply:?}")
    };
    let mut went_in = Vec::new();
    let mut errors = Vec::new();
    for (i, r) in replies.iter().enumerate() {
        match r {
            Reply::Error(e) => errors.push(e.clone()),
            Reply::Int(-1) => errors.push("-1".into()),
            _ => went_in.push(i),
        }
    }
    (went_in, errors)
}

fn same_dump(master: &mut Harness, replica: &mut Harness, family: &str, key: &str) {
    assert_eq!(
        master.scandump(family, key),
        replica.scandump(family, key),
        "{family} {key} on the replica"
    );
}

/// BF.MADD and BF.INSERT stop at the item the cap refuses: the items before it go out, after
/// the command's own head (an existing key) or the auto-create's explicit parameters, in
/// either layout.
#[test]
fn bloom_writes_propagate_the_items_before_the_refusal() {
    for layout in ["", " LAYOUT blocked"] {
        let mut m = capped("4kb");
        let mut r = replica_of(&m);
        let (reply, log) = step(&mut m, &mut r, &format!("BF.RESERVE k 0.01 1000{layout}"));
        assert_eq!((reply, log.len()), (Reply::ok(), 1));
        let all = items("a", 3000);
        let (reply, log) = step(&mut m, &mut r, &format!("BF.MADD k {}", all.join(" ")));
        let (went_in, errors) = applied(&reply);
        assert_eq!(errors, [ERR_CAP], "{layout}");
        assert!(went_in.len() >= 1000 && went_in.len() < 3000, "{layout}");
        let want = format!("BF.MADD k {}", all[..went_in.len()].join(" "));
        assert_eq!(log, [want], "{layout}");
        same_dump(&mut m, &mut r, "BF", "k");

        // Auto-created by BF.INSERT: the explicit parameters, then the items before the cap.
        let (reply, log) = step(
            &mut m,
            &mut r,
            &format!("BF.INSERT n CAPACITY 1000{layout} ITEMS {}", all.join(" ")),
        );
        let (went_in, errors) = applied(&reply);
        assert_eq!(errors, [ERR_CAP]);
        let want = format!(
            "BF.INSERT n CAPACITY 1000 ERROR 0.01 EXPANSION 2{layout} ITEMS {}",
            all[..went_in.len()].join(" ")
        );
        assert_eq!(log, [want], "{layout}");
        same_dump(&mut m, &mut r, "BF", "n");
        // Nothing more fits: a write of new items changes nothing and propagates nothing.
        let (reply, log) = step(&mut m, &mut r, "BF.MADD k zz1 zz2");
        assert_eq!(reply, Reply::Array(vec![err(ERR_CAP)]));
        assert!(log.is_empty());
        let (reply, log) = step(&mut m, &mut r, "BF.ADD k zz1");
        assert_eq!((reply, log.len()), (err(ERR_CAP), 0));
        // Items already there answer 0 and change nothing.
        let (_, log) = step(&mut m, &mut r, "BF.MADD k a1 a2");
        assert!(log.is_empty());
        same_dump(&mut m, &mut r, "BF", "k");
    }
    // A full non-scaling filter (no cap): the items before it, duplicates included.
    let mut m = Harness::new();
    let mut r = replica_of(&m);
    let (_, log) = step(
        &mut m,
        &mut r,
        "BF.INSERT f CAPACITY 2 NONSCALING ITEMS x y x z w",
    );
    assert_eq!(
        log,
        ["BF.INSERT f CAPACITY 2 ERROR 0.01 EXPANSION 2 NONSCALING ITEMS x y x"]
    );
    same_dump(&mut m, &mut r, "BF", "f");
    // Refused by the memory budget mid-batch.
    let mut m = Harness::new();
    let mut r = replica_of(&m);
    step(&mut m, &mut r, "BF.RESERVE b 0.01 2");
    m.memory_limit = m.keys.values().map(|v| v.memory()).sum::<u64>() + 1;
    let (reply, log) = step(&mut m, &mut r, "BF.INSERT b CAPACITY 5 ITEMS p q s t");
    assert_eq!(applied(&reply).1, [ERR_OOM]);
    assert_eq!(log, ["BF.INSERT b CAPACITY 5 ITEMS p q"]);
    same_dump(&mut m, &mut r, "BF", "b");
}

/// A cuckoo insert that finds no room undoes its kicks: the filter is as if it had never been
/// tried. CF.INSERT and CF.INSERTNX propagate the items that went in or were there, every
/// refused one left out wherever it was in the batch.
#[test]
fn cuckoo_writes_propagate_every_item_but_the_refused() {
    // A full filter that cannot grow: -1 for some items, later ones may still fit.
    let mut m = Harness::new();
    let mut r = replica_of(&m);
    step(&mut m, &mut r, "CF.RESERVE z 64 BUCKETSIZE 2 EXPANSION 0");
    let all = items("c", 200);
    let (reply, log) = step(
        &mut m,
        &mut r,
        &format!("CF.INSERT z ITEMS {}", all.join(" ")),
    );
    let (went_in, errors) = applied(&reply);
    assert!(!errors.is_empty() && errors.iter().all(|e| e == "-1"));
    let kept: Vec<&str> = went_in.iter().map(|&i| all[i].as_str()).collect();
    assert_eq!(log, [format!("CF.INSERT z ITEMS {}", kept.join(" "))]);
    same_dump(&mut m, &mut r, "CF", "z");
    // A refused item leaves every slot as it was.
    let before = m.scandump("CF", "z");
    let refused = all
        .iter()
        .zip(0..)
        .find(|(_, i)| !went_in.contains(i))
        .unwrap();
    assert_eq!(
        m.run(&format!("CF.ADD z {}", refused.0)),
        err("Filter is full")
    );
    assert_eq!(m.last.as_ref().unwrap().propagate, Propagate::Nothing);
    assert_eq!(m.scandump("CF", "z"), before);

    // Refused by the cap per item; INSERTNX keeps the items already there.
    let mut m = capped("2kb");
    let mut r = replica_of(&m);
    step(&mut m, &mut r, "CF.RESERVE c 1000");
    let (reply, log) = step(
        &mut m,
        &mut r,
        &format!("CF.INSERTNX c ITEMS {}", items("d", 3000).join(" ")),
    );
    let (went_in, errors) = applied(&reply);
    assert!(errors.iter().all(|e| e == ERR_CAP) && !errors.is_empty());
    let all = items("d", 3000);
    let kept: Vec<&str> = went_in.iter().map(|&i| all[i].as_str()).collect();
    assert_eq!(log, [format!("CF.INSERTNX c ITEMS {}", kept.join(" "))]);
    same_dump(&mut m, &mut r, "CF", "c");
    // CF.ADD refused by the cap: nothing changes, nothing is sent; one that fits goes out.
    let mut refused = 0;
    for item in items("e", 50) {
        let before = m.scandump("CF", "c");
        let (reply, log) = step(&mut m, &mut r, &format!("CF.ADD c {item}"));
        if reply == err(ERR_CAP) {
            refused += 1;
            assert!(log.is_empty());
            assert_eq!(m.scandump("CF", "c"), before);
        } else {
            assert_eq!(
                (reply, log),
                (Reply::Bool(true), vec![format!("CF.ADD c {item}")])
            );
        }
    }
    assert!(refused > 0);
    same_dump(&mut m, &mut r, "CF", "c");
}

/// CF.INSERT's CAPACITY is checked against `cf-bucket-size` even for an existing key: it goes
/// out as NOCREATE instead, so a replica with other settings takes the items; an auto-create
/// goes out as the empty filter's LOADCHUNK header, then the items. A replica whose
/// `cf-max-expansions` is lower still takes what the master took.
#[test]
fn cuckoo_inserts_replay_whatever_the_replicas_settings() {
    let mut m = Harness::new();
    m.config.cf_bucket_size = 1;
    let mut r = replica_of(&m);
    r.config.cf_bucket_size = 4;
    r.config.cf_max_expansions = 1;
    let (_, log) = step(&mut m, &mut r, "CF.INSERT c CAPACITY 2 ITEMS a b");
    assert_eq!(
        log,
        [
            "CF.LOADCHUNK c 1 <header>",
            "CF.INSERT c NOCREATE ITEMS a b"
        ]
    );
    let (_, log) = step(&mut m, &mut r, "CF.INSERTNX c CAPACITY 2 ITEMS a e");
    assert_eq!(log, ["CF.INSERTNX c NOCREATE ITEMS a e"]);
    // Past the replica's cf-max-expansions: the master grew, the replica follows.
    let (_, log) = step(
        &mut m,
        &mut r,
        &format!("CF.INSERT c ITEMS {}", items("g", 40).join(" ")),
    );
    assert_eq!(log.len(), 1);
    let filters = |h: &mut Harness| h.run("CF.INFO c NUMFILTERS");
    assert_ne!(filters(&mut m), Reply::Array(vec![Reply::Int(1)]));
    assert_eq!(filters(&mut m), filters(&mut r));
    same_dump(&mut m, &mut r, "CF", "c");
    let (_, log) = step(&mut m, &mut r, "CF.ADD c last");
    assert_eq!(log, ["CF.ADD c last"]);
    same_dump(&mut m, &mut r, "CF", "c");
}

/// CBF.MADD stops at a full filter: the adds before it go out (after the explicit CBF.RESERVE
/// of an auto-create).
#[test]
fn counting_writes_propagate_the_adds_before_the_full_filter() {
    let mut m = Harness::new();
    let mut r = replica_of(&m);
    step(&mut m, &mut r, "CBF.RESERVE n 0.01 3");
    let (reply, log) = step(&mut m, &mut r, "CBF.MADD n a b a c d");
    assert_eq!(applied(&reply).1.len(), 1);
    assert_eq!(log, ["CBF.MADD n a b a"]);
    same_dump(&mut m, &mut r, "CBF", "n");
    let (_, log) = step(&mut m, &mut r, "CBF.ADD n e");
    assert!(log.is_empty());
    let (_, log) = step(&mut m, &mut r, "CBF.MADD new a b");
    assert_eq!(log.len(), 2);
    assert!(log[0].starts_with("CBF.RESERVE new "), "{log:?}");
    assert_eq!(log[1], "CBF.MADD new a b");
    same_dump(&mut m, &mut r, "CBF", "new");
    // Nothing refused, nothing created: the command as sent.
    m.run("CBF.MADD new c");
    assert_eq!(m.last.as_ref().unwrap().propagate, Propagate::Verbatim);
}

/// WF.MADD refused by the memory budget when it needs a new link: the items before the
/// refusal go out with their time, the refused one not.
#[test]
fn windowed_writes_propagate_the_items_before_the_refusal() {
    let mut m = Harness::new();
    m.now_ms = 10_000;
    let mut r = replica_of(&m);
    r.now_ms = 10_000;
    step(&mut m, &mut r, "WF.RESERVE w 0.01 10 60000 2");
    step(&mut m, &mut r, "WF.MADD w first second");
    m.memory_limit = m.keys.values().map(|v| v.memory()).sum::<u64>() + 64;
    let all = items("w", 100);
    let (reply, log) = step(&mut m, &mut r, &format!("WF.MADD w {}", all.join(" ")));
    let (went_in, errors) = applied(&reply);
    assert_eq!(errors, [ERR_OOM]);
    assert!(!went_in.is_empty());
    assert_eq!(
        log,
        [format!(
            "WF.INSERT w AT 10000 ITEMS {}",
            all[..went_in.len()].join(" ")
        )]
    );
    same_dump(&mut m, &mut r, "WF", "w");
    // An auto-create: WF.RESERVE with the parameters, then the items.
    m.memory_limit = 0;
    let (_, log) = step(
        &mut m,
        &mut r,
        "WF.INSERT v WINDOW 1000 GENERATIONS 3 ITEMS a b",
    );
    assert_eq!(
        log,
        [
            "WF.RESERVE v 0.01 100 1000 3 EXPANSION 2",
            "WF.INSERT v AT 10000 ITEMS a b"
        ]
    );
    same_dump(&mut m, &mut r, "WF", "v");
    // Created, but its first item refused: the creation alone.
    m.memory_limit = m.keys.values().map(|v| v.memory()).sum::<u64>() + 1;
    let (reply, log) = step(
        &mut m,
        &mut r,
        "WF.INSERT u WINDOW 1000 GENERATIONS 3 ITEMS a",
    );
    assert_eq!(reply, Reply::Array(vec![err(ERR_OOM)]));
    assert_eq!(log, ["WF.RESERVE u 0.01 100 1000 3 EXPANSION 2"]);
    same_dump(&mut m, &mut r, "WF", "u");
}
