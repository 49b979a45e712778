//! Every value's heap buffers can be moved (as Redis' active defragmentation moves them) in a
//! walk that pauses and resumes, and the value dumps to the same bytes and answers the same
//! afterwards; a buffer a clone shares is reported, not moved.

use bloomgate::relocate::{CopyingRelocator, Walk};
use bloomgate_dialect::commands::testing::Harness;
use bloomgate_dialect::reply::Reply;
use bloomgate_dialect::Value;

/// A keyspace with one value of every kind, each holding data, some with many allocations.
fn keyspace() -> Harness {
    let mut h = Harness::new();
    for line in [
        "BF.RESERVE bf 0.01 4 EXPANSION 1",
        "BF.RESERVE bk 0.01 4 EXPANSION 1 LAYOUT blocked",
        "CF.RESERVE cf 8 BUCKETSIZE 2 EXPANSION 1",
        "CMS.INITBYDIM cms 50 4",
        "TOPK.RESERVE topk 100 50 4 0.9",
        "TDIGEST.CREATE td COMPRESSION 50",
        "WF.RESERVE wf 0.01 200 60000 3",
        "CBF.RESERVE cbf 0.01 200",
    ] {
        let reply = h.run(line);
        assert!(!matches!(reply, Reply::Error(_)), "{line}: {reply:?}");
    }
    for i in 0..150 {
        for line in [
            "BF.ADD bf",
            "BF.ADD bk",
            "CF.ADD cf",
            "CMS.INCRBY cms {} 1",
            "TOPK.ADD topk",
            "WF.ADD wf",
            "CBF.ADD cbf",
        ] {
            let line = match line.contains("{}") {
                true => line.replace("{}", &format!("item{i}")),
                false => format!("{line} item{i}"),
            };
            let reply = h.run(&line);
            assert!(!matches!(reply, Reply::Error(_)), "{line}: {reply:?}");
        }
        h.run(&format!("TDIGEST.ADD td {}", i * 7 % 101));
    }
    assert_eq!(h.keys.len(), 8);
    h
}

/// Each key's dump bytes and a few answers.
fn answers(h: &mut Harness) -> Vec<String> {
    let mut keys: Vec<Vec<u8>> = h.keys.keys().cloned().collect();
    keys.sort();
    let mut out: Vec<String> = keys
        .iter()
        .map(|k| format!("{:?}", h.keys[k].dump_stream().collect::<Vec<_>>()))
        .collect();
    for line in [
        "BF.EXISTS bf item7",
        "BF.EXISTS bk item149",
        "CF.EXISTS cf item3",
        "CMS.QUERY cms item9",
        "TOPK.LIST topk",
        "TDIGEST.QUANTILE td 0.5 0.9",
        "WF.EXISTS wf item5",
        "CBF.COUNT cbf item5",
    ] {
        out.push(format!("{:?}", h.run(line)));
    }
    out
}

/// Walks every value to the end, pausing every `stop_every` slots; the number of walks.
fn relocate_all(h: &mut Harness, r: &mut CopyingRelocator) -> u64 {
    let mut walks = 0;
    for value in h.keys.values_mut() {
        let mut start = 0;
        loop {
            walks += 1;
            let mut walk = Walk::new(r, start);
            value.relocate(&mut walk);
            match walk.finish() {
                Some(next) => start = next,
                None => break,
            }
        }
    }
    walks
}

#[test]
fn every_kind_moves_and_answers_as_before() {
    let mut h = keyspace();
    let before = answers(&mut h);
    let mut slots: u64 = h.keys.values_mut().map(Value::allocation_count).sum();
    assert!(slots > 8 * 2, "{slots} slots");
    // A Top-K's heap items are one allocation each: its box, buckets, heap, then k items.
    let topk = h.keys.get_mut(&b"topk"[..]).unwrap().allocation_count();
    assert_eq!(topk, 3 + 100);
    let mut r = CopyingRelocator {
        stop_every: 3,
        ..Default::default()
    };
    let walks = relocate_all(&mut h, &mut r);
    assert!(walks > 8, "the walks paused and resumed ({walks} walks)");
    assert!(r.moved > 8 * 2, "{} moved of {slots} slots", r.moved);
    assert_eq!(r.shared, 0);
    assert_eq!(answers(&mut h), before);
    // Writes after the move reach the moved buffers, and a second pass moves them again.
    h.run("BF.ADD bf later");
    h.run("TOPK.ADD topk later");
    h.run("TDIGEST.ADD td 5");
    let moved = r.moved;
    relocate_all(&mut h, &mut r);
    assert!(r.moved > moved);
    assert_eq!(h.run("BF.EXISTS bf later"), h.run("BF.EXISTS bf item1"));
    slots = h.keys.values_mut().map(Value::allocation_count).sum();
    assert!(slots > 0);
}

#[test]
fn a_shared_buffer_is_reported_and_stays() {
    let mut h = keyspace();
    let snapshot: Vec<(Vec<u8>, Value)> =
        h.keys.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let before = answers(&mut h);
    let mut r = CopyingRelocator::default();
    relocate_all(&mut h, &mut r);
    assert!(r.shared > 0, "the snapshot's arrays are shared");
    assert_eq!(answers(&mut h), before);
    for (key, value) in snapshot {
        assert_eq!(
            format!("{:?}", value.dump_stream().collect::<Vec<_>>()),
            format!("{:?}", h.keys[&key].dump_stream().collect::<Vec<_>>()),
        );
    }
}
