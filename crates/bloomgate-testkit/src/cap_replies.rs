//! The per-key memory cap's replies, shared by both hosts (`bloomgate serve` and redis-server
//! with the module): at a cap of 1 MB, too-big reserves and the RESTORE of a 3 MB filter are
//! refused, and a scaling filter stops growing at the cap while it keeps every item it had.

use redis::Value;

use crate::replies::{cmd, connect, error_of, int};

/// The cap's refusal (valkey-bloom's wording).
pub const ERR_CAP: &str = "ERR operation exceeds bloom object memory limit";

/// Sets the cap named `name` (`bloom-memory-usage-limit`, or `bf.bloom-memory-usage-limit` on a
/// server that prefixes module configs) to `value`.
pub fn set_cap(c: &mut redis::Connection, name: &str, value: &str) {
    assert_eq!(cmd(c, &format!("CONFIG SET {name} {value}")), Value::Okay);
}

/// Makes `key` a non-scaling Bloom filter of about 3 MB holding a few items, with no cap.
pub fn three_mb_filter(c: &mut redis::Connection, name: &str, key: &str) {
    set_cap(c, name, "0");
    assert_eq!(
        cmd(c, &format!("BF.RESERVE {key} 0.001 1700000 NONSCALING")),
        Value::Okay
    );
    let Value::Array(added) = cmd(c, &format!("BF.MADD {key} a b c")) else {
        panic!("BF.MADD answers an array");
    };
    assert_eq!(added.len(), 3);
}

/// The cap's checks against the server on `port`, whose config is `name`. `restore_refusal`:
/// how the host refuses a RESTORE over the cap (serve answers [`ERR_CAP`]; Redis answers its
/// own `ERR Bad data format` for any value a module type refuses to load). Leaves the cap at 0.
pub fn memory_cap_replies(port: u16, name: &str, restore_refusal: &str) {
    let c = &mut connect(port);
    let _: Value = redis::cmd("FLUSHALL").query(c).unwrap();
    // A DUMP of a 3 MB filter, made with no cap.
    three_mb_filter(c, name, "{cap}three");
    let Value::BulkString(payload) = cmd(c, "DUMP {cap}three") else {
        panic!("DUMP")
    };

    set_cap(c, name, "1mb");
    let Value::Array(got) = cmd(c, &format!("CONFIG GET {name}")) else {
        panic!("CONFIG GET")
    };
    assert_eq!(got[1], Value::BulkString(b"1048576".to_vec()));
    for (command, key) in [
        ("BF.RESERVE {cap}big 0.001 10000000", "{cap}big"),
        ("CF.RESERVE {cap}big 10000000", "{cap}big"),
        ("CMS.INITBYDIM {cap}big 1000000 10", "{cap}big"),
        ("TOPK.RESERVE {cap}big 10 1000000 10 0.9", "{cap}big"),
        ("CBF.RESERVE {cap}big 0.001 10000000", "{cap}big"),
    ] {
        assert_eq!(error_of(c, command), ERR_CAP, "{command}");
        assert_eq!(cmd(c, &format!("EXISTS {key}")), int(0), "{command}");
    }
    let restored: redis::RedisResult<Value> = redis::cmd("RESTORE")
        .arg("{cap}copy")
        .arg(0)
        .arg(&payload)
        .query(c);
    let refusal = crate::replies::wire_error(&restored.expect_err("RESTORE over the cap"));
    assert_eq!(refusal, restore_refusal);
    assert_eq!(cmd(c, "EXISTS {cap}copy"), int(0));
    // The filter made before the cap keeps answering.
    assert_eq!(cmd(c, "BF.EXISTS {cap}three b"), int(1));

    // A scaling filter grows until the cap stops it, then keeps answering for every item.
    assert_eq!(
        cmd(c, "BF.RESERVE {cap}s 0.01 10000 EXPANSION 2"),
        Value::Okay
    );
    let mut added = 0u32;
    let mut stopped = false;
    for batch in 0..400u32 {
        let mut madd = redis::cmd("BF.MADD");
        madd.arg("{cap}s");
        for i in 0..5_000 {
            madd.arg(format!("s{}", batch * 5_000 + i));
        }
        // The client reports a batch holding an error as that error: the items of the batches
        // before it are the ones known to be in.
        match madd.query::<Value>(c) {
            Ok(_) => added += 5_000,
            Err(e) => {
                assert_eq!(crate::replies::wire_error(&e), ERR_CAP);
                stopped = true;
            }
        }
        if stopped {
            break;
        }
    }
    assert!(stopped, "the cap never stopped the filter");
    assert!(added > 100_000, "{added} items before the cap");
    assert_eq!(error_of(c, "BF.ADD {cap}s one-more-new-item"), ERR_CAP);
    let items: Vec<u32> = (0..added).collect();
    for batch in items.chunks(5_000) {
        let mut mexists = redis::cmd("BF.MEXISTS");
        mexists.arg("{cap}s");
        for i in batch {
            mexists.arg(format!("s{i}"));
        }
        let found: Vec<i64> = mexists.query(c).unwrap();
        assert!(found.iter().all(|&f| f == 1), "an item was lost");
    }
    set_cap(c, name, "0");
    let _: Value = redis::cmd("FLUSHALL").query(c).unwrap();
}

/// The keys [`partial_writes`] writes.
pub const PARTIAL_KEYS: [&str; 6] = ["bf", "bk", "bi", "cf", "cbf", "wf"];

/// Every key of [`partial_writes`] as its family's SCANDUMP walks it (for a host without
/// `DEBUG DIGEST-VALUE`).
pub fn partial_dumps(c: &mut redis::Connection) -> Vec<Vec<(i64, Vec<u8>)>> {
    PARTIAL_KEYS
        .iter()
        .map(|&key| {
            let family = match key {
                "cf" => "CF",
                "cbf" => "CBF",
                "wf" => "WF",
                _ => "BF",
            };
            crate::replies::scandump_stream(c, family, key)
        })
        .collect()
}

/// `command key [head…] <prefix0 … prefix(n-1)>`: whether the server refused some items (an
/// error in an item's place, or a cuckoo filter's -1): the cap's error, or `also`.
fn refused_some(
    c: &mut redis::Connection,
    command: &str,
    head: &[&str],
    (prefix, n): (&str, usize),
    also: &str,
) -> bool {
    let mut request = redis::cmd(command);
    request.arg(head);
    for i in 0..n {
        request.arg(format!("{prefix}{i}"));
    }
    match request.query::<Value>(c) {
        // redis-rs answers an array holding an error reply as that error.
        Err(e) => {
            let error = crate::replies::wire_error(&e);
            assert!(error == ERR_CAP || error == also, "{command}: {error}");
            true
        }
        Ok(Value::Array(replies)) => {
            assert_eq!(replies.len(), n, "{command}");
            replies
                .iter()
                .any(|r| matches!(r, Value::ServerError(_) | Value::Int(-1)))
        }
        Ok(other) => panic!("{command}: {other:?}"),
    }
}

/// Writes over items that cross a per-key cap of 1 MB (set by the caller) part-way, one key per
/// family that refuses items, each refusing some: a 1M-item `BF.MADD` creating a classic
/// filter (`bf`), a 1M-item `BF.MADD` into a blocked one (`bk`), a `BF.INSERT … LAYOUT
/// blocked` creating one (`bi`), a `CF.INSERT` creating a cuckoo filter whose sub-filters
/// reach the cap (`cf`), a `CBF.MADD` past a counting filter's capacity (`cbf`) and a
/// `WF.MADD` (`wf`). What the host replicates and logs of them must rebuild exactly these
/// values ([`PARTIAL_KEYS`]).
pub fn partial_writes(c: &mut redis::Connection) {
    const MILLION: usize = 1_000_000;
    assert!(refused_some(c, "BF.MADD", &["bf"], ("a", MILLION), ERR_CAP));
    assert_eq!(
        cmd(c, "BF.RESERVE bk 0.01 1000 LAYOUT blocked"),
        Value::Okay
    );
    assert!(refused_some(c, "BF.MADD", &["bk"], ("b", MILLION), ERR_CAP));
    let head = ["bi", "CAPACITY", "1000", "LAYOUT", "blocked", "ITEMS"];
    assert!(refused_some(c, "BF.INSERT", &head, ("c", MILLION), ERR_CAP));
    let head = ["cf", "CAPACITY", "100000", "ITEMS"];
    assert!(refused_some(c, "CF.INSERT", &head, ("d", MILLION), ERR_CAP));
    assert_eq!(cmd(c, "CBF.RESERVE cbf 0.01 1000"), Value::Okay);
    let full = "ERR counting filter is full";
    assert!(refused_some(c, "CBF.MADD", &["cbf"], ("e", 5_000), full));
    assert_eq!(cmd(c, "WF.RESERVE wf 0.01 1000 600000 2"), Value::Okay);
    assert!(refused_some(c, "WF.MADD", &["wf"], ("f", MILLION), ERR_CAP));
    // Every key holds its first item.
    for (key, command, item) in [
        ("bf", "BF.EXISTS", "a0"),
        ("bk", "BF.EXISTS", "b0"),
        ("bi", "BF.EXISTS", "c0"),
        ("cf", "CF.EXISTS", "d0"),
        ("cbf", "CBF.EXISTS", "e0"),
        ("wf", "WF.EXISTS", "f0"),
    ] {
        assert_eq!(cmd(c, &format!("{command} {key} {item}")), int(1), "{key}");
    }
}
