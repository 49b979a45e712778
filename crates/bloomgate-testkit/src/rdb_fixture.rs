//! The RedisBloom RDB fixture (`tests/fixtures/redisbloom-rdb`: an RDB file and DUMP payloads
//! from a live Redis 7.0.15 + RedisBloom 2.4.23, with every answer recorded) and the checks that
//! a server holding its keys answers exactly as RedisBloom did — shared by the server's RESTORE
//! tests and the CLI's `import-rdb` tests — plus a plain `redis-server` to move data from.

use std::path::PathBuf;

use redis::Value;

use crate::{redis_server, temp_dir, Process};

/// The fixture directory (made by a live Redis 7.0.15 + RedisBloom 2.4.23).
pub const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/redisbloom-rdb"
);

/// `expected.json`: every key's replies as RedisBloom gave them.
pub fn fixture() -> serde_json::Value {
    let text = std::fs::read_to_string(format!("{FIXTURE}/expected.json")).expect("fixture");
    serde_json::from_str(&text).expect("json")
}

/// Bytes from hex digits.
pub fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A reply as the fixture records it.
pub fn to_json(v: &Value) -> serde_json::Value {
    match v {
        Value::Int(n) => (*n).into(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned().into(),
        Value::SimpleString(s) => s.clone().into(),
        Value::Array(items) => items.iter().map(to_json).collect(),
        Value::Nil => serde_json::Value::Null,
        other => panic!("unexpected reply {other:?}"),
    }
}

/// Runs `cmd`, panicking on an error.
pub fn query(con: &mut redis::Connection, cmd: &mut redis::Cmd) -> Value {
    cmd.query(con).unwrap_or_else(|e| panic!("{e}"))
}

/// Every reply of `key` that the fixture records equals RedisBloom's.
pub fn check_key(con: &mut redis::Connection, key: &str, expected: &serde_json::Value) {
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

/// Hex digits of bytes.
pub fn hex_of(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every key of the fixture answers as in RedisBloom, and nothing else is there.
pub fn check_all(con: &mut redis::Connection) {
    let fixture = fixture();
    let keys = fixture["keys"].as_object().unwrap();
    for (key, expected) in keys {
        check_key(con, key, expected);
    }
    let dbsize: i64 = redis::cmd("DBSIZE").query(con).unwrap();
    assert_eq!(dbsize, keys.len() as i64);
}

/// A real `redis-server` (no module) on a free port with its own directory, removed on drop.
pub struct RedisServer {
    /// The process.
    pub process: Process,
    /// Its directory.
    pub dir: PathBuf,
}

impl RedisServer {
    /// Starts it in a scratch directory named after `name`.
    pub fn start(name: &str) -> RedisServer {
        let dir = temp_dir(name);
        let process = redis_server(&dir, |_| {}).unwrap_or_else(|log| {
            panic!("redis-server did not start (.ci/setup installs it): {log}")
        });
        RedisServer { process, dir }
    }

    /// A connection.
    pub fn conn(&self) -> redis::Connection {
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
