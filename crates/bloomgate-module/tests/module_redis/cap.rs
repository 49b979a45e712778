//! `bloom-memory-usage-limit` in Redis: unprefixed on Redis 8, `bf.bloom-memory-usage-limit`
//! on Redis 7 and Valkey, a load argument too; the shared checks at a 1 MB cap; and data Redis
//! replays — a full sync, replicated commands and RESTOREs, DEBUG RELOAD, a restart — loading
//! keys over the cap.

use bloomgate_testkit::cap_replies::{memory_cap_replies, three_mb_filter, ERR_CAP};
use bloomgate_testkit::replies::{cmd, error_of, int};
use redis::Value;

use super::support::{have_redis, temp_dir, Redis};
use super::{digest, info_field, redis_major};

/// The cap's config name on this server: prefixed with the module's `bf.` before Redis 8.
fn cap_name(c: &mut redis::Connection) -> &'static str {
    if redis_major(c) >= 8 {
        "bloom-memory-usage-limit"
    } else {
        "bf.bloom-memory-usage-limit"
    }
}

fn cap_of(c: &mut redis::Connection) -> String {
    let name = cap_name(c);
    let pair: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(c).unwrap();
    assert_eq!(pair.len(), 2, "CONFIG GET {name}");
    pair[1].clone()
}

#[test]
fn memory_cap_replies_match_bloomgate_serve() {
    if !have_redis("memory_cap_replies_match_bloomgate_serve") {
        return;
    }
    let server = Redis::start(&temp_dir("cap"), &[], &[]);
    let name = cap_name(&mut server.conn());
    // Redis answers its own error for any value a module type refuses to load.
    memory_cap_replies(server.port, name, "ERR Bad data format");
}

/// Adds `n` items `prefix{i}` to `key` through the master in bounded batches.
fn grow(c: &mut redis::Connection, key: &str, prefix: &str, n: u32) {
    for batch in 0..n / 5_000 {
        let mut madd = redis::cmd("BF.MADD");
        madd.arg(key);
        for i in 0..5_000 {
            madd.arg(format!("{prefix}{}", batch * 5_000 + i));
        }
        let _: Value = madd.query(c).unwrap();
    }
}

fn memory_usage(c: &mut redis::Connection, key: &str) -> i64 {
    let Value::Int(bytes) = cmd(c, &format!("MEMORY USAGE {key}")) else {
        panic!("MEMORY USAGE {key}")
    };
    bytes
}

#[test]
fn replicas_reloads_and_restarts_load_keys_over_the_cap() {
    if !have_redis("replicas_reloads_and_restarts_load_keys_over_the_cap") {
        return;
    }
    let master_dir = temp_dir("cap-master");
    let master = Redis::start(&master_dir, &[], &[]);
    let m = &mut master.conn();
    let name = cap_name(m);
    // Reaches the replica by full sync (its RDB load).
    three_mb_filter(m, name, "synced");

    // The replica runs with a 1 MB cap, set by load argument.
    let master_port = master.port.to_string();
    let replica_dir = temp_dir("cap-replica");
    let replica = Redis::start(
        &replica_dir,
        &["bloom-memory-usage-limit", "1mb"],
        &["--replicaof", "127.0.0.1", &master_port],
    );
    let r = &mut replica.conn();
    assert_eq!(cap_of(r), "1048576");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while info_field(r, "replication", "master_link_status") != "up" {
        assert!(std::time::Instant::now() < deadline, "replica did not sync");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Reaches it as replicated commands: a reserve, a RESTORE, growth past the cap.
    three_mb_filter(m, name, "reserved");
    let Value::BulkString(payload) = cmd(m, "DUMP synced") else {
        panic!("DUMP")
    };
    let _: Value = redis::cmd("RESTORE")
        .arg("restored")
        .arg(0)
        .arg(&payload)
        .query(m)
        .unwrap();
    assert_eq!(
        cmd(m, "BF.RESERVE grown 0.01 1000 EXPANSION 2"),
        Value::Okay
    );
    grow(m, "grown", "g", 400_000);
    assert_eq!(cmd(m, "WAIT 1 30000"), int(1));
    let keys = ["synced", "reserved", "restored", "grown"];
    for key in keys {
        assert_eq!(digest(r, key), digest(m, key), "{key} on the replica");
        assert!(memory_usage(r, key) > 1 << 20, "{key}");
    }
    assert_eq!(cmd(r, "BF.EXISTS grown g399999"), int(1));
    // The replica logged what it kept over its cap: values loaded (the full sync, the
    // RESTORE) and replicated commands.
    let log =
        std::fs::read_to_string(replica_dir.join(format!("redis-{}.log", replica.port))).unwrap();
    assert!(
        log.contains("a value past bloom-memory-usage-limit was loaded"),
        "{log}"
    );
    assert!(
        log.contains("a replicated or loaded value is past bloom-memory-usage-limit"),
        "{log}"
    );
    // The replica reloads its own RDB with the keys over its cap.
    assert_eq!(cmd(r, "DEBUG RELOAD"), Value::Okay);
    for key in keys {
        assert_eq!(digest(r, key), digest(m, key), "{key} after DEBUG RELOAD");
    }
    drop(replica);

    // The master, capped now: clients are refused, DEBUG RELOAD and a restart load every key.
    assert_eq!(cmd(m, &format!("CONFIG SET {name} 1mb")), Value::Okay);
    assert_eq!(error_of(m, "BF.RESERVE new 0.001 1700000"), ERR_CAP);
    let before: Vec<String> = keys.iter().map(|k| digest(m, k)).collect();
    assert_eq!(cmd(m, "DEBUG RELOAD"), Value::Okay);
    assert_eq!(keys.map(|k| digest(m, k)).to_vec(), before);
    assert_eq!(cmd(m, "SAVE"), Value::Okay);
    master.shutdown(false);
    let master = Redis::start(&master_dir, &["bloom-memory-usage-limit", "1mb"], &[]);
    let m = &mut master.conn();
    assert_eq!(cap_of(m), "1048576");
    assert_eq!(keys.map(|k| digest(m, k)).to_vec(), before);
    assert_eq!(cmd(m, "BF.EXISTS restored b"), int(1));
}
