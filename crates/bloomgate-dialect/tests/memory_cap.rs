//! The per-key cap `bloom-memory-usage-limit` on every path that creates or grows a value:
//! refused with valkey-bloom's error before anything is allocated, the capped value keeping
//! every item it had, and replayed data never refused (kept, with a warning).

use bloomgate_dialect::budget::KeyCap;
use bloomgate_dialect::commands::testing::*;
use bloomgate_dialect::encoding::rdb_format::{
    dump_payload, restore_capped, PayloadError, Restored,
};
use bloomgate_dialect::reply::Reply;
use bloomgate_dialect::{ERR_CAP, ERR_OOM};

fn capped(limit: &str) -> Harness {
    let mut h = Harness::new();
    assert_eq!(
        h.config.set("bloom-memory-usage-limit", limit),
        Ok(true),
        "{limit}"
    );
    h
}

fn cap_error() -> Reply {
    err(ERR_CAP)
}

#[test]
fn reserves_over_the_cap_are_refused_and_create_nothing() {
    let mut h = capped("1mb");
    for (command, key) in [
        ("BF.RESERVE b 0.001 10000000", "b"),
        ("BF.RESERVE b 0.001 10000000 LAYOUT blocked", "b"),
        ("CF.RESERVE c 10000000", "c"),
        ("CMS.INITBYDIM m 1000000 10", "m"),
        ("CMS.INITBYPROB m 0.000001 0.001", "m"),
        ("TOPK.RESERVE t 10 1000000 10 0.9", "t"),
        ("CBF.RESERVE n 0.001 10000000", "n"),
    ] {
        assert_eq!(h.run(command), cap_error(), "{command}");
        assert!(!h.keys.contains_key(key.as_bytes()), "{command}");
    }
    // Under the cap, the same commands create.
    for command in [
        "BF.RESERVE b 0.01 1000",
        "CF.RESERVE c 1000",
        "CMS.INITBYDIM m 1000 5",
        "TOPK.RESERVE t 10 100 5 0.9",
        "CBF.RESERVE n 0.01 1000",
        "TDIGEST.CREATE d",
    ] {
        assert_eq!(h.run(command), Reply::ok(), "{command}");
    }
    // A t-digest's arrays over a smaller cap.
    let mut h = capped("1000");
    assert_eq!(h.run("TDIGEST.CREATE d COMPRESSION 1000"), cap_error());
    // Auto-creation with large defaults is refused the same way.
    let mut h = capped("100kb");
    h.config.bf_initial_size = 10_000_000;
    assert_eq!(h.run("BF.ADD a x"), cap_error());
    assert_eq!(h.run("BF.MADD a x y"), cap_error());
    h.config.cf_initial_size = 10_000_000;
    assert_eq!(h.run("CF.ADD a x"), cap_error());
    assert!(h.keys.is_empty());
}

#[test]
fn the_memory_budget_is_judged_before_the_cap() {
    let mut h = capped("1mb");
    h.memory_limit = 1000;
    assert_eq!(h.run("BF.RESERVE b 0.001 10000000"), err(ERR_OOM));
}

/// Adds `n` items to a scaling filter until the cap stops one: returns the items added.
fn fill_until_capped(h: &mut Harness, command: &str) -> Vec<String> {
    let mut added = Vec::new();
    for batch in 0..200 {
        let items: Vec<String> = (0..100).map(|i| format!("item-{batch}-{i}")).collect();
        let line = format!("{command} {}", items.join(" "));
        let Reply::Array(replies) = h.run(&line) else {
            panic!("{command} answers an array");
        };
        for (item, reply) in items.iter().zip(&replies) {
            match reply {
                Reply::Bool(_) => added.push(item.clone()),
                other => {
                    assert_eq!(other, &cap_error(), "{command}");
                    return added;
                }
            }
        }
    }
    panic!("{command}: the cap never stopped the filter");
}

#[test]
fn a_scaling_bloom_filter_stops_at_the_cap_and_keeps_its_items() {
    for layout in ["", " LAYOUT blocked"] {
        let mut h = capped("16kb");
        assert_eq!(
            h.run(&format!("BF.RESERVE s 0.01 1000 EXPANSION 2{layout}")),
            Reply::ok()
        );
        let added = fill_until_capped(&mut h, "BF.MADD s");
        assert!(added.len() > 1000, "{layout}: it grew before the cap");
        let size = h.keys[b"s".as_slice()].memory();
        assert!(size <= 16 << 10, "{layout}: {size} bytes");
        // The error takes the place of the item that hit it; every earlier item stays.
        for item in &added {
            assert_eq!(
                h.run(&format!("BF.EXISTS s {item}")),
                Reply::Bool(true),
                "{layout}"
            );
        }
        assert_eq!(h.run("BF.ADD s brand-new-item"), cap_error(), "{layout}");
        assert_eq!(
            h.run(&format!("BF.ADD s {}", added[0])),
            Reply::Bool(false),
            "{layout}: a known item still answers"
        );
        let Reply::Array(replies) = h.run("BF.INSERT s ITEMS another-new-one") else {
            panic!("BF.INSERT answers an array");
        };
        assert_eq!(replies, vec![cap_error()], "{layout}");
        // Raising the cap lets it grow again.
        h.config.set("bloom-memory-usage-limit", "0").unwrap();
        assert_eq!(h.run("BF.ADD s brand-new-item"), Reply::Bool(true));
    }
}

#[test]
fn a_growing_cuckoo_filter_answers_the_cap_error_per_item() {
    let mut h = capped("4kb");
    assert_eq!(h.run("CF.RESERVE c 1024 EXPANSION 2"), Reply::ok());
    let mut added = Vec::new();
    let mut refused = false;
    'fill: for batch in 0..100 {
        let items: Vec<String> = (0..100).map(|i| format!("c-{batch}-{i}")).collect();
        let Reply::Array(replies) = h.run(&format!("CF.INSERT c ITEMS {}", items.join(" "))) else {
            panic!("CF.INSERT answers an array");
        };
        for (item, reply) in items.iter().zip(&replies) {
            if reply == &cap_error() {
                refused = true;
                break 'fill;
            }
            assert_eq!(reply, &Reply::Bool(true));
            added.push(item.clone());
        }
    }
    assert!(refused && added.len() > 1024);
    for item in &added {
        assert_eq!(h.run(&format!("CF.EXISTS c {item}")), Reply::Bool(true));
    }
    // CF.ADD of new items goes on while kicks find room, then answers the cap's error.
    let answers: Vec<Reply> = (0..2000)
        .map(|i| h.run(&format!("CF.ADD c more-{i}")))
        .collect();
    assert!(answers.contains(&cap_error()));
    assert!(answers
        .iter()
        .all(|r| r == &cap_error() || r == &Reply::Bool(true)));
}

#[test]
fn a_windowed_filter_generation_over_the_cap_is_refused() {
    let mut h = capped("10kb");
    assert_eq!(h.run("WF.RESERVE w 0.01 100000 1000 3"), Reply::ok());
    assert_eq!(h.run("WF.ADD w a"), cap_error());
    h.config.set("bloom-memory-usage-limit", "10mb").unwrap();
    assert_eq!(h.run("WF.ADD w a"), Reply::Bool(true));
}

#[test]
fn loadchunk_and_restore_over_the_cap_are_refused_but_replay_is_not() {
    let mut h = Harness::new();
    assert_eq!(h.run("BF.RESERVE big 0.001 300000"), Reply::ok());
    assert_eq!(h.run("CF.RESERVE cbig 300000"), Reply::ok());
    // (SCANDUMP of an empty cuckoo filter has nothing to say, as RedisBloom's.)
    assert_eq!(h.run("CF.ADD cbig x"), Reply::Bool(true));
    let bloom = h.scandump("BF", "big");
    let cuckoo = h.scandump("CF", "cbig");
    let payload = dump_payload(&h.keys[b"big".as_slice()]);
    assert!(h.keys[b"big".as_slice()].memory() > 256 << 10);

    let mut capped = capped("256kb");
    for (command, chunks) in [("BF.LOADCHUNK", &bloom), ("CF.LOADCHUNK", &cuckoo)] {
        let (iter, header) = &chunks[0];
        let args = vec![
            command.as_bytes().to_vec(),
            b"copy".to_vec(),
            iter.to_string().into_bytes(),
            header.clone(),
        ];
        assert_eq!(capped.run_args(&args), cap_error(), "{command}");
        assert!(capped.keys.is_empty(), "{command}");
        // Replayed (a replica, an AOF load), the same header loads, with a warning.
        capped.replaying = true;
        assert_eq!(capped.run_args(&args), Reply::ok(), "{command}");
        capped.replaying = false;
        assert_eq!(capped.warnings.len(), 1, "{command}: {:?}", capped.warnings);
        capped.warnings.clear();
        capped.keys.clear();
    }

    let cap = KeyCap {
        limit: 256 << 10,
        replaying: false,
    };
    assert_eq!(
        restore_capped(&payload, u64::MAX, cap).unwrap_err(),
        PayloadError::OverCap
    );
    let replayed = KeyCap {
        replaying: true,
        ..cap
    };
    assert!(matches!(
        restore_capped(&payload, u64::MAX, replayed),
        Ok(Restored::Dialect(_))
    ));
    let roomy = KeyCap {
        limit: 1 << 20,
        replaying: false,
    };
    assert!(restore_capped(&payload, u64::MAX, roomy).is_ok());
}

#[test]
fn replayed_writes_pass_the_cap_with_a_warning() {
    let mut h = capped("16kb");
    h.replaying = true;
    assert_eq!(h.run("BF.RESERVE b 0.001 1000000"), Reply::ok());
    assert_eq!(h.warnings.len(), 1);
    assert_eq!(h.run("BF.RESERVE s 0.01 1000 EXPANSION 2"), Reply::ok());
    let items: Vec<String> = (0..20_000).map(|i| format!("r{i}")).collect();
    let Reply::Array(replies) = h.run(&format!("BF.MADD s {}", items.join(" "))) else {
        panic!("BF.MADD answers an array");
    };
    assert!(replies.iter().all(|r| matches!(r, Reply::Bool(_))));
    assert!(h.keys[b"s".as_slice()].memory() > 16 << 10);
    assert_eq!(h.warnings.len(), 2, "{:?}", h.warnings);
}

#[test]
fn merge_into_a_new_destination_over_the_cap_is_refused() {
    let mut h = Harness::new();
    assert_eq!(h.run("BF.RESERVE a 0.001 100000"), Reply::ok());
    assert_eq!(h.run("BF.RESERVE b 0.001 100000"), Reply::ok());
    h.config.set("bloom-memory-usage-limit", "64kb").unwrap();
    assert_eq!(h.run("BF.MERGE d 2 a b"), cap_error());
    assert!(!h.keys.contains_key(b"d".as_slice()));
}
