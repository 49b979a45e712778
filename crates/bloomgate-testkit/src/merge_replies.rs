//! BF.MERGE's replies, shared by both hosts (`bloomgate serve` and redis-server with the
//! module): the union of two 100k filters, its errors, and the keys `COMMAND GETKEYS` finds
//! through its two key specs.

use redis::Value;

use crate::replies::{cmd, connect, error_of, int};

/// Adds `prefix{i}` for every `i` in `range` to `key`, in bounded batches.
fn add_range(c: &mut redis::Connection, key: &str, prefix: &str, range: std::ops::Range<u32>) {
    let items: Vec<u32> = range.collect();
    for batch in items.chunks(5_000) {
        let mut madd = redis::cmd("BF.MADD");
        madd.arg(key);
        for i in batch {
            madd.arg(format!("{prefix}{i}"));
        }
        let _: Value = madd.query(c).unwrap();
    }
}

/// How many of `prefix{i}`, `i` in `range`, `key` reports present.
fn present(
    c: &mut redis::Connection,
    key: &str,
    prefix: &str,
    range: std::ops::Range<u32>,
) -> usize {
    let items: Vec<u32> = range.collect();
    let mut found = 0;
    for batch in items.chunks(5_000) {
        let mut mexists = redis::cmd("BF.MEXISTS");
        mexists.arg(key);
        for i in batch {
            mexists.arg(format!("{prefix}{i}"));
        }
        let answers: Vec<i64> = mexists.query(c).unwrap();
        found += answers.iter().filter(|&&a| a == 1).count();
    }
    found
}

fn bulks(names: &[&str]) -> Value {
    Value::Array(
        names
            .iter()
            .map(|n| Value::BulkString(n.as_bytes().to_vec()))
            .collect(),
    )
}

/// BF.MERGE on the server at 127.0.0.1:`port`: two filters of 100k capacity holding items
/// 0–40k and 30k–70k merge into one that reports all 70k, at most 2% of 100k absent items,
/// and a BF.CARD within 5% of 70,000; then the errors and COMMAND GETKEYS.
pub fn bf_merge_replies(port: u16) {
    let c = &mut connect(port);
    let ok = Value::Okay;
    assert_eq!(cmd(c, "BF.RESERVE {m}a 0.01 100000"), ok);
    assert_eq!(cmd(c, "BF.RESERVE {m}b 0.01 100000"), ok);
    add_range(c, "{m}a", "item", 0..40_000);
    add_range(c, "{m}b", "item", 30_000..70_000);
    assert_eq!(cmd(c, "BF.MERGE {m}dest 2 {m}a {m}b"), ok);
    assert_eq!(present(c, "{m}dest", "item", 0..70_000), 70_000);
    let fp = present(c, "{m}dest", "absent", 0..100_000);
    assert!(fp <= 2_000, "{fp} of 100k absent items reported present");
    let Value::Int(card) = cmd(c, "BF.CARD {m}dest") else {
        panic!("BF.CARD")
    };
    assert!((card - 70_000).abs() <= 3_500, "BF.CARD {card}");
    assert_eq!(
        cmd(c, "BF.INFO {m}dest ITEMS"),
        Value::Array(vec![int(card)])
    );
    assert_eq!(cmd(c, "BF.CARD {m}a"), int(40_000));
    // OVERRIDE replaces the destination with the union of the sources alone.
    assert_eq!(cmd(c, "BF.MERGE {m}a 1 {m}b OVERRIDE"), ok);
    assert_eq!(cmd(c, "BF.EXISTS {m}a item10"), int(0));
    assert_eq!(cmd(c, "BF.EXISTS {m}a item60000"), int(1));

    assert_eq!(cmd(c, "BF.RESERVE {m}small 0.01 1000"), ok);
    assert_eq!(cmd(c, "SET {m}str x"), ok);
    assert_eq!(cmd(c, "CF.RESERVE {m}cf 1000"), ok);
    let shape =
        "ERR filters differ in shape (sub-filters, their bits, hashes, capacity or options)";
    for (line, want) in [
        ("BF.MERGE {m}d 2 {m}a {m}small", shape),
        ("BF.MERGE {m}small 1 {m}a", shape),
        (
            "BF.MERGE {m}d 2 {m}a {m}nosuch",
            "ERR source key does not exist",
        ),
        (
            "BF.MERGE {m}d 2 {m}a {m}str",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            "BF.MERGE {m}cf 1 {m}a",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        ("BF.MERGE {m}d 3 {m}a {m}b", "ERR numkeys out of range"),
        ("BF.MERGE {m}d 0 {m}a", "ERR numkeys out of range"),
        ("BF.MERGE {m}d x {m}a", "ERR bad numkeys"),
        ("BF.MERGE {m}d 1 {m}a {m}b", "ERR syntax error"),
    ] {
        assert_eq!(error_of(c, line), want, "{line}");
    }
    assert_eq!(cmd(c, "EXISTS {m}d"), int(0));

    assert_eq!(
        cmd(c, "COMMAND GETKEYS BF.MERGE {m}d 2 {m}a {m}b OVERRIDE"),
        bulks(&["{m}d", "{m}a", "{m}b"])
    );
    let flagged = |key: &str, flag: &str| {
        Value::Array(vec![
            Value::BulkString(key.as_bytes().to_vec()),
            Value::Array(vec![Value::SimpleString(flag.into())]),
        ])
    };
    assert_eq!(
        cmd(c, "COMMAND GETKEYSANDFLAGS BF.MERGE d 1 a"),
        Value::Array(vec![flagged("d", "RW"), flagged("a", "RO")])
    );
    assert_eq!(
        cmd(c, "COMMAND GETKEYS TDIGEST.MERGE d 2 a b"),
        bulks(&["d", "a", "b"])
    );
    assert_eq!(
        error_of(c, "COMMAND GETKEYS BF.MERGE d 3 a b"),
        "ERR Invalid arguments specified for command"
    );
}
