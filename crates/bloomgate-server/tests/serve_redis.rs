//! End-to-end tests of the server: started in this process on a free loopback port (as a child
//! process where a test kills it), driven by the `redis` crate (and raw sockets for protocol
//! limits). Covers BF.* replies and errors as
//! RedisBloom gives them, CF.* likewise (with kill -9 durability of adds and deletes), keyspace/server commands, transactions, pipelining, RESP3, restart
//! persistence, kill -9 with `appendfsync always`, torn-log repair and corrupt-snapshot refusal.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bloomgate_testkit::replies::{self as dialect_replies, cmd, error_of, int, raw_exchange};
use bloomgate_testkit::server::{refused, Server};
use bloomgate_testkit::temp_dir;
use redis::Value;

/// The server child of the tests that kill it (see `bloomgate_testkit::server`).
#[test]
fn serve_child() {
    bloomgate_testkit::server::serve_child();
}

#[test]
fn bf_commands_match_redisbloom() {
    let server = Server::start(&temp_dir("bf"), &[]);
    dialect_replies::bf_replies(server.port);
}

#[test]
fn bf_merge_unions_filters() {
    let server = Server::start(&temp_dir("bf-merge"), &[]);
    bloomgate_testkit::merge_replies::bf_merge_replies(server.port);
}

#[test]
fn bf_blocked_layout_commands() {
    let server = Server::start(&temp_dir("bf-layout"), &[]);
    dialect_replies::bf_layout_replies(server.port);
}

#[test]
fn cf_commands_match_redisbloom() {
    let server = Server::start(&temp_dir("cf"), &[]);
    dialect_replies::cf_replies(server.port);
}

#[test]
fn cms_and_topk_commands_match_redisbloom() {
    let server = Server::start(&temp_dir("sketches"), &[]);
    dialect_replies::cms_replies(server.port);
    dialect_replies::topk_replies(server.port);
}

#[test]
fn cbf_commands_answer_as_in_the_module() {
    let server = Server::start(&temp_dir("cbf"), &["--enable-debug-command", "yes"]);
    dialect_replies::cbf_replies(server.port);
}

#[test]
fn tdigest_commands_match_redisbloom() {
    let server = Server::start(&temp_dir("tdigest"), &[]);
    dialect_replies::tdigest_replies(server.port);
}

#[test]
fn keyspace_server_and_transactions() {
    let dir = temp_dir("keys");
    let server = Server::start(&dir, &[]);
    let mut con = server.conn();
    let c = &mut con;
    assert_eq!(cmd(c, "PING"), Value::SimpleString("PONG".into()));
    assert_eq!(cmd(c, "ECHO hi"), Value::BulkString(b"hi".to_vec()));
    assert_eq!(cmd(c, "SELECT 0"), Value::Okay);
    assert_eq!(error_of(c, "SELECT 1"), "ERR DB index is out of range");
    for k in ["a", "b", "c"] {
        cmd(c, &format!("BF.ADD {k} x"));
    }
    assert_eq!(cmd(c, "DBSIZE"), int(3));
    assert_eq!(cmd(c, "EXISTS a b nope a"), int(3));
    assert_eq!(cmd(c, "TYPE nope"), Value::SimpleString("none".into()));
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    keys.sort();
    assert_eq!(keys, ["a", "b", "c"]);
    // SCAN with COUNT 1 visits every key.
    let mut seen = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1)
            .query(c)
            .unwrap();
        seen.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    seen.sort();
    assert_eq!(seen, ["a", "b", "c"]);
    assert_eq!(cmd(c, "RENAME a a2"), Value::Okay);
    assert_eq!(error_of(c, "RENAME nope x"), "ERR no such key");
    assert_eq!(cmd(c, "BF.EXISTS a2 x"), int(1));
    assert_eq!(cmd(c, "TTL a2"), int(-1));
    assert_eq!(cmd(c, "EXPIRE a2 100"), int(1));
    assert_eq!(cmd(c, "TTL a2"), int(100));
    assert!(matches!(cmd(c, "PTTL a2"), Value::Int(ms) if ms > 99_000));
    assert_eq!(cmd(c, "PERSIST a2"), int(1));
    assert_eq!(cmd(c, "TTL nope"), int(-2));
    assert_eq!(cmd(c, "PEXPIRE b 50"), int(1));
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(cmd(c, "EXISTS b"), int(0));
    assert_eq!(
        error_of(c, "EXPIRE c x"),
        "ERR value is not an integer or out of range"
    );
    assert!(matches!(cmd(c, "MEMORY USAGE c"), Value::Int(n) if n > 240));
    assert_eq!(cmd(c, "MEMORY USAGE nope"), Value::Nil);
    assert_eq!(cmd(c, "DEL c nope"), int(1));
    assert_eq!(cmd(c, "UNLINK a2"), int(1));

    cmd(c, "BF.ADD d x");
    let info: String = redis::cmd("INFO").query(c).unwrap();
    for field in [
        "redis_version:",
        "used_memory:",
        "rdb_bgsave_in_progress:0",
        "aof_enabled:1",
        "connected_clients:",
        "db0:keys=",
    ] {
        assert!(info.contains(field), "{field} missing from INFO");
    }
    let persistence: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
    assert!(persistence.starts_with("# Persistence") && !persistence.contains("# Server"));

    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("bf-error-rate")
        .query(c)
        .unwrap();
    assert_eq!(got, ["bf-error-rate", "0.01"]);
    assert_eq!(cmd(c, "CONFIG SET bf-initial-size 1000"), Value::Okay);
    cmd(c, "BF.ADD big x");
    assert_eq!(
        cmd(c, "BF.INFO big CAPACITY"),
        Value::Array(vec![int(1000)])
    );
    assert!(error_of(c, "CONFIG SET bf-initial-size 0").starts_with("ERR CONFIG SET failed"));
    assert_eq!(cmd(c, "CLIENT SETNAME me"), Value::Okay);
    assert_eq!(cmd(c, "CLIENT GETNAME"), Value::BulkString(b"me".to_vec()));
    assert!(matches!(cmd(c, "CLIENT ID"), Value::Int(_)));
    assert!(matches!(cmd(c, "COMMAND COUNT"), Value::Int(n) if n > 40));
    assert!(matches!(cmd(c, "COMMAND INFO bf.add"), Value::Array(v) if v.len() == 1));
    assert_eq!(
        error_of(c, "NOPE"),
        "ERR unknown command 'NOPE', with args beginning with: "
    );

    // Client pipelines with transactions are MULTI/EXEC.
    let (added, exists): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("BF.ADD")
        .arg("t")
        .arg("x")
        .cmd("BF.EXISTS")
        .arg("t")
        .arg("x")
        .query(c)
        .unwrap();
    assert_eq!((added, exists), (1, 1));
    // WATCH: a concurrent change aborts EXEC (nil reply).
    cmd(c, "WATCH t");
    let mut other = server.conn();
    cmd(&mut other, "BF.ADD t y");
    cmd(c, "MULTI");
    cmd(c, "BF.ADD t z");
    assert_eq!(cmd(c, "EXEC"), Value::Nil);
    assert_eq!(cmd(c, "BF.EXISTS t z"), int(0));
    assert_eq!(error_of(c, "EXEC"), "ERR EXEC without MULTI");
    assert_eq!(cmd(c, "FLUSHDB"), Value::Okay);
    assert_eq!(cmd(c, "DBSIZE"), int(0));
}

/// RedisBloom 8.2's replies through the real binary and the `redis` crate —
/// registered arity first, range wording, command metadata, CONFIG SET wording and ACLs.
#[test]
fn redisbloom_82_metadata_errors_and_acl() {
    let dir = temp_dir("rb82");
    let server = Server::start(&dir, &[]);
    let mut con = server.conn();
    let c = &mut con;
    assert_eq!(
        error_of(c, "BF.RESERVE k 0.01 100 EXPANSION 2 EXPANSION 3"),
        "ERR wrong number of arguments for 'bf.reserve' command"
    );
    assert_eq!(
        error_of(c, "CF.RESERVE k 0"),
        "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]"
    );
    assert_eq!(error_of(c, "BF.SCANDUMP missing abc"), "ERR not found");
    assert_eq!(cmd(c, "BF.ADD b x"), int(1));
    assert_eq!(error_of(c, "CF.DEL b x"), "Not found");
    assert_eq!(error_of(c, "BF.RESERVE k 1e400 100"), "ERR bad error rate");
    assert_eq!(
        error_of(c, "CONFIG SET cf-bucket-size 0"),
        "ERR CONFIG SET failed (possibly related to argument 'cf-bucket-size') - Value for \
         `cf-bucket-size` must be in the range [1, 255]"
    );

    let Value::Array(info) = cmd(c, "COMMAND INFO bf.add") else {
        panic!()
    };
    let Value::Array(fields) = &info[0] else {
        panic!("{info:?}")
    };
    assert_eq!(fields[0], Value::BulkString(b"bf.add".to_vec()));
    assert_eq!(fields[1], int(3));
    let categories = |v: &Value| match v {
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::SimpleString(s) => s.clone(),
                other => panic!("{other:?}"),
            })
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(categories(&fields[2]), ["write", "denyoom", "module"]);
    assert_eq!(categories(&fields[6]), ["@write", "@slow", "@bloom"]);
    let docs: std::collections::HashMap<String, Value> = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg("bf.card")
        .query(c)
        .unwrap();
    let Value::Array(card) = &docs["bf.card"] else {
        panic!("{docs:?}")
    };
    let since = card
        .iter()
        .position(|v| *v == Value::BulkString(b"since".to_vec()));
    assert_eq!(
        since.map(|i| &card[i + 1]),
        Some(&Value::BulkString(b"2.4.4".to_vec()))
    );

    let bloom: Vec<String> = redis::cmd("ACL").arg("CAT").arg("bloom").query(c).unwrap();
    // RedisBloom's 11 and our BF.MERGE.
    assert_eq!(bloom.len(), 12);
    assert_eq!(
        cmd(c, "ACL SETUSER reader on >pw ~* &* +@bloom -@write"),
        Value::Okay
    );
    assert_eq!(cmd(c, "AUTH reader pw"), Value::Okay);
    assert_eq!(cmd(c, "BF.EXISTS b x"), int(1));
    assert_eq!(
        error_of(c, "BF.ADD b y"),
        "NOPERM User reader has no permissions to run the 'bf.add' command"
    );
    assert_eq!(
        error_of(c, "CF.EXISTS b x"),
        "NOPERM User reader has no permissions to run the 'cf.exists' command"
    );
    assert_eq!(
        error_of(c, "AUTH reader nope"),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
    assert_eq!(cmd(c, "AUTH default anything"), Value::Okay);
    assert_eq!(cmd(c, "BF.ADD b y"), int(1));
}

#[test]
fn pipelining_resp3_and_protocol_limits() {
    let dir = temp_dir("pipe");
    let server = Server::start(&dir, &[]);
    let mut con = server.conn();
    let mut pipe = redis::pipe();
    for i in 0..20_000 {
        pipe.cmd("BF.ADD").arg("p").arg(format!("item{i}"));
    }
    let added: Vec<i64> = pipe.query(&mut con).unwrap();
    assert_eq!(added.len(), 20_000);
    // One MEXISTS with 100k arguments.
    let mut mexists = redis::cmd("BF.MEXISTS");
    mexists.arg("p");
    for i in 0..100_000 {
        mexists.arg(format!("item{}", i % 20_000));
    }
    let found: Vec<i64> = mexists.query(&mut con).unwrap();
    assert!(found.iter().all(|&f| f == 1));

    // RESP3: booleans and maps.
    let mut con3 = redis::Client::open(format!("{}?protocol=resp3", server.url()))
        .unwrap()
        .get_connection()
        .unwrap();
    assert_eq!(cmd(&mut con3, "BF.EXISTS p item1"), Value::Boolean(true));
    assert!(matches!(cmd(&mut con3, "BF.INFO p"), Value::Map(m) if m.len() == 5));

    // Bulk longer than 512 MiB: protocol error, then the connection is closed.
    let out = raw_exchange(server.port, b"*2\r\n$4\r\nECHO\r\n$536870913\r\n");
    assert_eq!(out, b"-ERR Protocol error: invalid bulk length\r\n");
    let out = raw_exchange(server.port, b"*1\r\n:1\r\n");
    assert_eq!(out, b"-ERR Protocol error: expected '$', got ':'\r\n");
    // Inline commands work.
    let out = raw_exchange(server.port, b"PING\r\nECHO \"a b\"\r\nQUIT\r\n");
    assert_eq!(out, b"+PONG\r\n$3\r\na b\r\n+OK\r\n");
}

#[test]
fn restart_keeps_data_and_debug_reload() {
    let dir = temp_dir("restart");
    // DEBUG is off by default (Redis 7's enable-debug-command).
    let server = Server::start(&dir, &[]);
    assert!(error_of(&mut server.conn(), "DEBUG RELOAD").contains("DEBUG command not allowed"));
    server.shutdown();
    let server = Server::start(&dir, &["--enable-debug-command", "yes"]);
    let mut c = server.conn();
    cmd(&mut c, "BF.RESERVE r 0.001 1000");
    for i in 0..300 {
        cmd(&mut c, &format!("BF.ADD r k{i}"));
    }
    cmd(&mut c, "EXPIRE r 1000");
    cmd(&mut c, "CF.RESERVE cf 64 EXPANSION 2");
    for i in 0..300 {
        cmd(&mut c, &format!("CF.ADD cf k{i}"));
    }
    cmd(&mut c, "CF.DEL cf k0");
    let cuckoo = cmd(&mut c, "CF.DEBUG cf");
    assert_eq!(cmd(&mut c, "DEBUG RELOAD"), Value::Okay);
    assert_eq!(cmd(&mut c, "BF.EXISTS r k7"), int(1));
    assert_eq!(cmd(&mut c, "CF.DEBUG cf"), cuckoo);
    let before = cmd(&mut c, "BF.DEBUG r");
    cmd(&mut c, "BF.ADD r after-reload");
    assert_eq!(cmd(&mut c, "SAVE"), Value::Okay);
    cmd(&mut c, "BF.ADD r after-save");
    server.shutdown();

    let server = Server::start(&dir, &[]);
    let mut c = server.conn();
    for i in 0..300 {
        assert_eq!(cmd(&mut c, &format!("BF.EXISTS r k{i}")), int(1));
    }
    assert_eq!(cmd(&mut c, "BF.EXISTS r after-reload"), int(1));
    assert_eq!(cmd(&mut c, "BF.EXISTS r after-save"), int(1));
    assert!(matches!(cmd(&mut c, "TTL r"), Value::Int(t) if t > 900));
    assert_eq!(cmd(&mut c, "CF.DEBUG cf"), cuckoo);
    assert_eq!(cmd(&mut c, "CF.EXISTS cf k299"), int(1));
    assert_ne!(cmd(&mut c, "BF.DEBUG r"), before);
}

/// Runs `step(connection, worker, i, acknowledged)` for i = 0, 1, ... on `workers` threads
/// against a server started with `appendfsync always` in `dir`, kill -9s it once `target` items
/// are acknowledged (or after 20 s), and returns what the steps recorded as acknowledged. A step
/// returns false when a command failed (the server is gone).
fn acknowledged_before_kill9(
    dir: &Path,
    workers: usize,
    target: usize,
    step: fn(&mut redis::Connection, usize, usize, &Mutex<Vec<String>>) -> bool,
) -> Vec<String> {
    let server = Server::process(dir, &["--appendfsync", "always"]);
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..workers)
        .map(|w| {
            let (url, acked, stop) = (server.url(), acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let Ok(mut c) = redis::Client::open(url).unwrap().get_connection() else {
                    return;
                };
                for i in 0..100_000 {
                    if stop.load(Ordering::Relaxed) || !step(&mut c, w, i, &acked) {
                        return;
                    }
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while acked.lock().unwrap().len() < target && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    server.kill9();
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() >= 100,
        "only {} items acknowledged",
        acked.len()
    );
    acked
}

/// How many of `items` `command` (BF.MEXISTS / CF.MEXISTS) does not find at `key`.
fn missing(c: &mut redis::Connection, command: &str, key: &str, items: &[String]) -> usize {
    let mut check = redis::cmd(command);
    check.arg(key).arg(items);
    let found: Vec<i64> = check.query(c).unwrap();
    found.iter().filter(|&&f| f == 0).count()
}

#[test]
fn kill9_with_appendfsync_always_loses_no_acknowledged_add() {
    let dir = temp_dir("kill9");
    let acked = acknowledged_before_kill9(&dir, 4, 2_000, |c, w, i, acked| {
        let item = format!("w{w}-{i}");
        let added = redis::cmd("BF.ADD").arg("crash").arg(&item).query::<i64>(c);
        added.map(|_| acked.lock().unwrap().push(item)).is_ok()
    });
    let server = Server::start(&dir, &[]);
    let lost = missing(&mut server.conn(), "BF.MEXISTS", "crash", &acked);
    assert_eq!(lost, 0, "{lost} of {} acknowledged adds lost", acked.len());
}

/// kill -9 under `appendfsync always`: every acknowledged CF.ADD is present after restart and
/// acknowledged CF.DELs stay applied (the item count matches to within the in-flight commands).
#[test]
fn kill9_with_appendfsync_always_keeps_cuckoo_adds_and_deletes() {
    let dir = temp_dir("kill9cf");
    const WORKERS: usize = 3;
    let live = acknowledged_before_kill9(&dir, WORKERS, 1_500, |c, w, i, live| {
        let item = format!("w{w}-{i}");
        if redis::cmd("CF.ADD")
            .arg("crash")
            .arg(&item)
            .query::<i64>(c)
            .is_err()
        {
            return false;
        }
        live.lock().unwrap().push(item);
        if i % 3 != 2 {
            return true;
        }
        // Delete this worker's previous item. A delete in flight at the kill may or may not
        // have happened, so the item is no longer expected either way.
        let victim = format!("w{w}-{}", i - 1);
        let deleted = redis::cmd("CF.DEL")
            .arg("crash")
            .arg(&victim)
            .query::<i64>(c);
        live.lock().unwrap().retain(|x| *x != victim);
        deleted == Ok(1)
    });
    let server = Server::start(&dir, &[]);
    let mut c = server.conn();
    let lost = missing(&mut c, "CF.MEXISTS", "crash", &live);
    assert_eq!(lost, 0, "{lost} of {} acknowledged items lost", live.len());
    let Value::Array(info) = cmd(&mut c, "CF.INFO crash") else {
        panic!()
    };
    let Value::Int(items) = info[7] else { panic!() };
    let expected = live.len() as i64;
    assert!(
        (items - expected).abs() <= WORKERS as i64,
        "{items} items stored, {expected} acknowledged"
    );
}

#[test]
fn torn_log_tail_is_repaired_and_corrupt_snapshot_refused() {
    let dir = temp_dir("torn");
    let server = Server::process(&dir, &["--appendfsync", "always"]);
    let mut c = server.conn();
    for i in 0..50 {
        cmd(&mut c, &format!("BF.ADD t k{i}"));
    }
    server.kill9();
    // Simulate a crash in the middle of writing a record.
    let log = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "aof"))
        .unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(&[40, 0, 0, 0, 1, 2, 3])
        .unwrap();
    let server = Server::start(&dir, &[]);
    let mut c = server.conn();
    for i in 0..50 {
        assert_eq!(cmd(&mut c, &format!("BF.EXISTS t k{i}")), int(1));
    }
    server.shutdown();

    // Damage the snapshot: the server must refuse to start and say why.
    let snapshot = dir.join("dump.bgs");
    let mut bytes = std::fs::read(&snapshot).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0xff;
    std::fs::write(&snapshot, &bytes).unwrap();
    let stderr = refused(&dir, &[]);
    assert!(
        stderr.contains("dump.bgs") && stderr.contains("corrupt"),
        "{stderr}"
    );
}

#[test]
fn a_second_server_on_the_same_directory_is_refused() {
    let dir = temp_dir("lock");
    let server = Server::process(&dir, &[]);
    let stderr = refused(&dir, &[]);
    assert!(
        stderr.contains("in use by another bloomgate server"),
        "{stderr}"
    );
    let mut c = server.conn();
    assert_eq!(cmd(&mut c, "PING"), Value::SimpleString("PONG".into()));
    server.kill9();
    // The OS drops the lock with the process: a restart after kill -9 works.
    let server = Server::start(&dir, &[]);
    server.shutdown();
}
