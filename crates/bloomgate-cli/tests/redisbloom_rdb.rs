//! Moving RedisBloom data in, end to end, on the fixture made by a live Redis 7.0.15 +
//! RedisBloom 2.4.23 (tests/fixtures/redisbloom-rdb): RESTORE of its DUMP payloads,
//! `import-rdb --dir` then `serve`, and `import-rdb --to` a running server. After each, every
//! key's INFO and DEBUG replies, SCANDUMP bytes, DUMP payload and the answers to its inserted
//! items and 20,000 absent probes equal RedisBloom's. Corrupt payloads are refused cleanly.

use std::path::PathBuf;
use std::process::Command;

use redis::Value;

mod common;
use common::{temp_dir, Server};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/redisbloom-rdb"
);

fn fixture() -> serde_json::Value {
    let text = std::fs::read_to_string(format!("{FIXTURE}/expected.json")).expect("fixture");
    serde_json::from_str(&text).expect("json")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn to_json(v: &Value) -> serde_json::Value {
    match v {
        Value::Int(n) => (*n).into(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned().into(),
        Value::SimpleString(s) => s.clone().into(),
        Value::Array(items) => items.iter().map(to_json).collect(),
        Value::Nil => serde_json::Value::Null,
        other => panic!("unexpected reply {other:?}"),
    }
}

fn query(con: &mut redis::Connection, cmd: &mut redis::Cmd) -> Value {
    cmd.query(con).unwrap_or_else(|e| panic!("{e}"))
}

/// Every reply of `key` that the fixture records equals RedisBloom's.
fn check_key(con: &mut redis::Connection, key: &str, expected: &serde_json::Value) {
    let family = if key.starts_with("bf:") { "BF" } else { "CF" };
    let info = query(con, redis::cmd(&format!("{family}.INFO")).arg(key));
    assert_eq!(to_json(&info), expected["info"], "{key}: INFO");
    let debug = query(con, redis::cmd(&format!("{family}.DEBUG")).arg(key));
    assert_eq!(to_json(&debug), expected["debug"], "{key}: DEBUG");
    let mut scandump = Vec::new();
    let mut iter = 0i64;
    loop {
        let (next, data): (i64, Option<Vec<u8>>) = redis::cmd(&format!("{family}.SCANDUMP"))
            .arg(key)
            .arg(iter)
            .query(con)
            .unwrap();
        if next == 0 {
            break;
        }
        scandump.push(serde_json::json!([next, hex_of(&data.unwrap_or_default())]));
        iter = next;
    }
    assert_eq!(
        serde_json::Value::Array(scandump),
        expected["scandump"],
        "{key}: SCANDUMP"
    );
    let payload: Vec<u8> = redis::cmd("DUMP").arg(key).query(con).unwrap();
    assert_eq!(
        hex_of(&payload),
        expected["dump_payload_hex"].as_str().unwrap(),
        "{key}: DUMP"
    );
    let items = expected["items"].as_u64().unwrap();
    let deleted = expected["deleted_range"].as_array().unwrap();
    let deleted = match deleted.as_slice() {
        [a, b] => a.as_u64().unwrap()..b.as_u64().unwrap(),
        _ => 0..0,
    };
    let present: Vec<String> = (0..items)
        .filter(|i| !deleted.contains(i))
        .map(|i| format!("{key}/item-{i}"))
        .collect();
    let answers: Vec<i64> = redis::cmd(&format!("{family}.MEXISTS"))
        .arg(key)
        .arg(&present)
        .query(con)
        .unwrap();
    assert!(answers.iter().all(|&a| a == 1), "{key}: a false negative");
    let absent: Vec<String> = (0..20_000).map(|i| format!("absent-{i}")).collect();
    let answers: Vec<i64> = redis::cmd(&format!("{family}.MEXISTS"))
        .arg(key)
        .arg(&absent)
        .query(con)
        .unwrap();
    let ones: Vec<u64> = (0..20_000u64)
        .filter(|&i| answers[i as usize] == 1)
        .collect();
    let want: Vec<u64> = expected["absent_answering_1"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(ones, want, "{key}: false positives");
}

fn hex_of(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fn check_all(con: &mut redis::Connection) {
    let fixture = fixture();
    let keys = fixture["keys"].as_object().unwrap();
    for (key, expected) in keys {
        check_key(con, key, expected);
    }
    let dbsize: i64 = redis::cmd("DBSIZE").query(con).unwrap();
    assert_eq!(dbsize, keys.len() as i64);
}

fn import(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bloomgate"))
        .arg("import-rdb")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn restored_payloads_answer_as_redisbloom_and_survive_a_restart() {
    let dir = temp_dir("restore");
    let fixture = fixture();
    {
        let server = Server::start(&dir, &[]);
        let mut con = server.conn();
        for (key, expected) in fixture["keys"].as_object().unwrap() {
            let payload = hex(expected["dump_payload_hex"].as_str().unwrap());
            let reply: String = redis::cmd("RESTORE")
                .arg(key)
                .arg(0)
                .arg(&payload)
                .query(&mut con)
                .unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_eq!(reply, "OK");
        }
        check_all(&mut con);
    }
    // The RESTOREs were logged: a restarted server answers the same.
    let server = Server::start(&dir, &[]);
    check_all(&mut server.conn());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn import_rdb_into_a_directory_then_serve() {
    let dir = temp_dir("import-dir");
    let rdb = format!("{FIXTURE}/dump.rdb");
    let out = import(&[&rdb, "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("imported 9 keys from RDB version 10 (MBbloom-- 5, MBbloomCF 4)"),
        "{stdout}"
    );
    assert!(stdout.contains("skipped: set 1, string 1"), "{stdout}");
    // A directory with data in it is not overwritten.
    let again = import(&[&rdb, "--dir", dir.to_str().unwrap()]);
    assert!(!again.status.success());
    let server = Server::start(&dir, &[]);
    check_all(&mut server.conn());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn import_rdb_to_a_running_server() {
    let dir = temp_dir("import-to");
    let server = Server::start(&dir, &[]);
    let url = format!("redis://127.0.0.1:{}", server.port);
    let rdb = format!("{FIXTURE}/dump.rdb");
    let out = import(&[&rdb, "--to", &url]);
    assert!(out.status.success(), "{out:?}");
    check_all(&mut server.conn());
    // Existing keys are reported (BUSYKEY) unless --replace is given.
    let busy = import(&[&rdb, "--to", &url]);
    assert!(!busy.status.success());
    assert!(String::from_utf8_lossy(&busy.stderr).contains("BUSYKEY"));
    let replaced = import(&[&rdb, "--to", &url, "--replace"]);
    assert!(replaced.status.success(), "{replaced:?}");
    check_all(&mut server.conn());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn damaged_rdb_files_are_refused() {
    let rdb = std::fs::read(format!("{FIXTURE}/dump.rdb")).unwrap();
    let dir = temp_dir("damaged");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", rdb[..rdb.len() / 2].to_vec()),
        ("flipped", {
            let mut d = rdb.clone();
            d[rdb.len() - 100] ^= 0x10;
            d
        }),
        ("version", {
            let mut d = rdb.clone();
            d[5..9].copy_from_slice(b"0013");
            d
        }),
    ];
    for (name, data) in cases {
        let path = dir.join(format!("{name}.rdb"));
        std::fs::write(&path, data).unwrap();
        let out = import(&[
            path.to_str().unwrap(),
            "--dir",
            dir.join(name).to_str().unwrap(),
        ]);
        assert!(!out.status.success(), "{name}");
        assert!(!dir.join(name).join("dump.bgs").exists(), "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A payload with its CRC64 recomputed (so the damage reaches the decoder).
fn with_crc(mut body: Vec<u8>) -> Vec<u8> {
    body.truncate(body.len() - 8);
    let crc = bloomgate_crc64(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

/// CRC-64/Jones (Redis'), bit by bit: independent of the implementation under test.
fn bloomgate_crc64(data: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &b in data {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5
            } else {
                crc >> 1
            };
        }
    }
    crc
}

#[test]
fn corrupt_payloads_are_refused_and_the_server_stays_up() {
    let dir = temp_dir("corrupt");
    let server = Server::start(&dir, &[]);
    let mut con = server.conn();
    let fixture = fixture();
    let restore_error = |con: &mut redis::Connection, payload: &[u8]| -> String {
        match redis::cmd("RESTORE")
            .arg("victim")
            .arg(0)
            .arg(payload)
            .query::<Value>(con)
        {
            Ok(v) => format!("accepted: {v:?}"),
            Err(e) => format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or("")),
        }
    };
    let checksum = "ERR DUMP payload version or checksum are wrong";
    let bad = "ERR Bad data format";
    for key in ["bf:scaled", "cf:grown"] {
        let payload = hex(fixture["keys"][key]["dump_payload_hex"].as_str().unwrap());
        let n = payload.len();
        // Flipped bytes and a wrong CRC: the checksum catches them.
        for at in [0, 1, 10, n / 2, n - 11, n - 1] {
            let mut p = payload.clone();
            p[at] ^= 0x01;
            assert_eq!(restore_error(&mut con, &p), checksum, "{key} flip at {at}");
        }
        // Truncations.
        for cut in [0, 5, 9, n / 3, n - 1] {
            assert_eq!(
                restore_error(&mut con, &payload[..cut]),
                checksum,
                "{key} cut {cut}"
            );
        }
        // Truncations and damage with a valid checksum.
        for cut in [1, 3, 11, 20, n / 3, n - 11] {
            let mut p = payload[..cut].to_vec();
            p.extend_from_slice(&payload[n - 10..]);
            assert_eq!(
                restore_error(&mut con, &with_crc(p)),
                bad,
                "{key} cut {cut}"
            );
        }
        // Wrong RDB type, unknown module type id.
        let mut p = payload.clone();
        p[0] = 0;
        assert_eq!(
            restore_error(&mut con, &with_crc(p)),
            bad,
            "{key} type byte"
        );
        let mut p = payload.clone();
        p[5] ^= 0x40;
        assert_eq!(restore_error(&mut con, &with_crc(p)), bad, "{key} type id");
        // Forged huge counts in the first fields (filter count / bucket count).
        let mut p = payload[..10].to_vec();
        for field in [1u64 << 40, 1 << 40, 1 << 40, 0, 2, 20, 1] {
            p.push(2);
            p.push(0x81);
            p.extend_from_slice(&field.to_be_bytes());
        }
        p.push(0);
        p.extend_from_slice(&payload[n - 10..]);
        assert_eq!(
            restore_error(&mut con, &with_crc(p)),
            bad,
            "{key} forged sizes"
        );
    }
    // A forged huge string length right after valid BF fields.
    let payload = hex(fixture["keys"]["bf:auto"]["dump_payload_hex"]
        .as_str()
        .unwrap());
    let at = payload
        .windows(3)
        .position(|w| w == [0x05, 0x40, 0x90])
        .unwrap();
    let mut p = payload[..at + 1].to_vec();
    p.push(0x81);
    p.extend_from_slice(&(1u64 << 62).to_be_bytes());
    p.extend_from_slice(&payload[payload.len() - 10..]);
    assert_eq!(
        restore_error(&mut con, &with_crc(p)),
        bad,
        "forged string length"
    );
    let exists: i64 = redis::cmd("EXISTS").arg("victim").query(&mut con).unwrap();
    assert_eq!(exists, 0);
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A real `redis-server` (no module) on a free port with its own directory, removed on drop.
struct RedisServer {
    process: bloomgate_testkit::Process,
    dir: PathBuf,
}

impl RedisServer {
    fn start(name: &str) -> RedisServer {
        let dir = temp_dir(name);
        let process = bloomgate_testkit::redis_server(&dir, |_| {}).unwrap_or_else(|log| {
            panic!("redis-server did not start (.ci/setup installs it): {log}")
        });
        RedisServer { process, dir }
    }

    fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.process.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.process.kill9();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An RDB file written by the machine's real Redis with every core type in each of its
/// encodings (small and large lists, sets, sorted sets and hashes, integer and compressible
/// strings, a stream with a consumer group and pending entries, a function library, an
/// expiry, a second database): all skipped by walking their encodings, counted per type.
#[test]
fn every_redis_type_in_a_real_rdb_is_skipped_and_counted() {
    let redis = RedisServer::start("real-rdb");
    let mut con = redis.conn();
    let run = |con: &mut redis::Connection, line: &str| {
        let mut words = line.split(' ');
        let mut cmd = redis::cmd(words.next().unwrap());
        for w in words {
            cmd.arg(w);
        }
        cmd.query::<Value>(con)
            .unwrap_or_else(|e| panic!("{line}: {e}"));
    };
    for line in [
        "SET s hello",
        "SET n 12345",
        "SET exp v PX 100000",
        "RPUSH l a b c",
        "SADD ints 1 2 3",
        "SADD small a b c",
        "ZADD z 1 a 2 b",
        "HSET h f v",
        "XADD st 1-1 f v",
        "XADD st 2-1 f v",
        "XADD st 3-1 f v",
        "XGROUP CREATE st g 0",
        "XREADGROUP GROUP g c1 COUNT 2 STREAMS st >",
    ] {
        run(&mut con, line);
    }
    let big = "a".repeat(5000);
    redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .exec(&mut con)
        .unwrap();
    let many: Vec<String> = (0..1000).map(|i| format!("member-{i}")).collect();
    redis::cmd("RPUSH")
        .arg("biglist")
        .arg(&many)
        .exec(&mut con)
        .unwrap();
    redis::cmd("SADD")
        .arg("bigset")
        .arg(&many)
        .exec(&mut con)
        .unwrap();
    let scored: Vec<(f64, &String)> = many
        .iter()
        .enumerate()
        .map(|(i, m)| (i as f64 + 0.5, m))
        .collect();
    redis::cmd("ZADD")
        .arg("bigz")
        .arg(&scored)
        .exec(&mut con)
        .unwrap();
    let fields: Vec<(&String, &String)> = many.iter().map(|m| (m, m)).collect();
    redis::cmd("HSET")
        .arg("bigh")
        .arg(&fields)
        .exec(&mut con)
        .unwrap();
    redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("#!lua name=lib\nredis.register_function('f', function() return 1 end)")
        .exec(&mut con)
        .unwrap();
    run(&mut con, "SELECT 1");
    run(&mut con, "SET other v");
    run(&mut con, "SAVE");
    let rdb = redis.dir.join("dump.rdb");
    let dir = temp_dir("real-rdb-import");
    let out = import(&[rdb.to_str().unwrap(), "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("imported 0 keys from RDB version 10\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("skipped: hash 2, list 2, set 3, stream 1, string 5, zset 2"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `MIGRATE` from a real Redis speaks to `bloomgate serve` (SELECT, then RESTORE with the
/// payload); a value that is not a RedisBloom type is refused with Redis' wording and stays
/// on the source.
#[test]
fn migrate_from_a_real_redis_reaches_restore() {
    let redis = RedisServer::start("migrate");
    let dir = temp_dir("migrate-target");
    let server = Server::start(&dir, &[]);
    let mut con = redis.conn();
    redis::cmd("SET").arg("s").arg("v").exec(&mut con).unwrap();
    let err = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(server.port)
        .arg("s")
        .arg(0)
        .arg(5000)
        .query::<Value>(&mut con)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Target instance replied with error: ERR Bad data format"),
        "{err}"
    );
    let exists: i64 = redis::cmd("EXISTS").arg("s").query(&mut con).unwrap();
    assert_eq!(exists, 1);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
