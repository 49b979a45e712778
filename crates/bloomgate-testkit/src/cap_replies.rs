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
