//! Migration on real files: an RDB written by Redis 7.0.15 + RedisBloom 2.4.23
//! (`tests/fixtures/redisbloom-rdb/`, see its README) loads into Debian's redis-server with this
//! module, and every answer equals RedisBloom's: INFO, DEBUG, the SCANDUMP byte sequence, which
//! of 20,000 absent probes answer 1, MEMORY USAGE, and the DUMP payload itself (so RedisBloom
//! can load what we save). Every fixture DUMP payload RESTOREs; after SAVE and a restart the
//! answers are unchanged.

mod support;

use std::path::Path;

use redis::Value;
use serde_json::Value as Json;
use support::{have_redis, temp_dir, Redis};

const PROBES: usize = 20_000;

fn fixture_dir() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/redisbloom-rdb"
    ))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// A reply as the fixture's JSON writes it (labels and lines as strings, nil as null).
fn to_json(v: &Value) -> Json {
    match v {
        Value::SimpleString(s) => Json::from(s.as_str()),
        Value::BulkString(b) => Json::from(String::from_utf8_lossy(b).into_owned()),
        Value::Int(n) => Json::from(*n),
        Value::Nil => Json::Null,
        Value::Array(items) => Json::Array(items.iter().map(to_json).collect()),
        other => panic!("unexpected reply {other:?}"),
    }
}

/// The family prefix (`BF` or `CF`) of a fixture key.
fn family(key: &str) -> &'static str {
    if key.starts_with("bf:") {
        "BF"
    } else {
        "CF"
    }
}

fn scandump(c: &mut redis::Connection, fam: &str, key: &str) -> Vec<(i64, String)> {
    bloomgate_testkit::replies::scandump_stream(c, fam, key)
        .into_iter()
        .map(|(next, data)| (next, hex(&data)))
        .collect()
}

/// Indices of `absent-{i}` probes that answer 1.
fn absent_hits(c: &mut redis::Connection, fam: &str, key: &str) -> Vec<u64> {
    let mut hits = Vec::new();
    for start in (0..PROBES).step_by(5_000) {
        let mut q = redis::cmd(&format!("{fam}.MEXISTS"));
        q.arg(key);
        for i in start..start + 5_000 {
            q.arg(format!("absent-{i}"));
        }
        let answers: Vec<i64> = q.query(c).unwrap();
        hits.extend(
            answers
                .iter()
                .enumerate()
                .filter(|(_, &a)| a == 1)
                .map(|(i, _)| (start + i) as u64),
        );
    }
    hits
}

/// Every fixture answer, checked against the server on `c`.
fn check_all(c: &mut redis::Connection, expected: &Json) {
    // MEMORY USAGE is the host's key overhead plus the module's mem_usage. Redis 7.0 has
    // RedisBloom's host overhead (the fixture's); Valkey 8 embeds the key in its object (an
    // allocation rounded to a size class), so there the host part may differ by a few words.
    let server: String = redis::cmd("INFO").arg("server").query(c).unwrap();
    let valkey = server.contains("valkey_version");
    let host_slack = if valkey { 16 } else { 0 };
    for (key, want) in expected["keys"].as_object().unwrap() {
        let fam = family(key);
        let info: Value = redis::cmd(&format!("{fam}.INFO"))
            .arg(key)
            .query(c)
            .unwrap();
        assert_eq!(to_json(&info), want["info"], "{key} INFO");
        let debug: Value = redis::cmd(&format!("{fam}.DEBUG"))
            .arg(key)
            .query(c)
            .unwrap();
        assert_eq!(to_json(&debug), want["debug"], "{key} DEBUG");
        let want_dump: Vec<(i64, String)> = want["scandump"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_i64().unwrap(), p[1].as_str().unwrap().to_string()))
            .collect();
        assert!(
            scandump(c, fam, key) == want_dump,
            "{key} SCANDUMP bytes differ"
        );
        let want_hits: Vec<u64> = want["absent_answering_1"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap())
            .collect();
        assert_eq!(absent_hits(c, fam, key), want_hits, "{key} false positives");
        // No false negative: every inserted item not deleted again answers 1.
        let items = want["items"].as_u64().unwrap();
        let deleted = want["deleted_range"].as_array().unwrap();
        let (del_from, del_to) = match deleted.as_slice() {
            [a, b] => (a.as_u64().unwrap(), b.as_u64().unwrap()),
            _ => (0, 0),
        };
        let mut q = redis::cmd(&format!("{fam}.MEXISTS"));
        q.arg(key);
        for i in (0..items).filter(|i| !(del_from..del_to).contains(i)) {
            q.arg(format!("{key}/item-{i}"));
        }
        let answers: Vec<i64> = q.query(c).unwrap();
        assert!(answers.iter().all(|&a| a == 1), "{key}: a false negative");
        let usage: i64 = redis::cmd("MEMORY").arg("USAGE").arg(key).query(c).unwrap();
        let want_usage = want["memory_usage"].as_i64().unwrap();
        assert!(
            (usage - want_usage).abs() <= host_slack,
            "{key} MEMORY USAGE {usage}, RedisBloom's {want_usage}"
        );
        let dump: Vec<u8> = redis::cmd("DUMP").arg(key).query(c).unwrap();
        let want_dump = want["dump_payload_hex"].as_str().unwrap();
        // The footer is the host's: RDB version (Redis 7.0: 10, Valkey 8: 11) and CRC-64. On
        // Redis all bytes must match; on Valkey the module's bytes before the footer.
        let (got, want_dump) = if valkey {
            (
                hex(&dump[..dump.len() - 10]),
                &want_dump[..want_dump.len() - 20],
            )
        } else {
            (hex(&dump), want_dump)
        };
        assert_eq!(
            got, want_dump,
            "{key}: DUMP payload differs from RedisBloom's"
        );
    }
    let s: String = redis::cmd("GET").arg("plain:string").query(c).unwrap();
    assert_eq!(s, "hello");
    let mut members: Vec<String> = redis::cmd("SMEMBERS").arg("plain:set").query(c).unwrap();
    members.sort();
    assert_eq!(members, ["a", "b", "c"]);
}

#[test]
fn redisbloom_rdb_loads_with_every_answer_equal_and_survives_save() {
    if !have_redis("redisbloom_rdb_loads_with_every_answer_equal_and_survives_save") {
        return;
    }
    let expected: Json = serde_json::from_str(
        &std::fs::read_to_string(fixture_dir().join("expected.json")).unwrap(),
    )
    .unwrap();
    let dir = temp_dir("fixture");
    std::fs::copy(fixture_dir().join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    let args = ["--dbfilename", "dump.rdb"];

    let server = Redis::start(&dir, &[], &args);
    let c = &mut server.conn();
    check_all(c, &expected);

    // Every DUMP payload RESTOREs into a fresh key with the same answers.
    for (key, want) in expected["keys"].as_object().unwrap() {
        let fam = family(key);
        let copy = format!("restored:{key}");
        let payload = unhex(want["dump_payload_hex"].as_str().unwrap());
        let ok: Value = redis::cmd("RESTORE")
            .arg(&copy)
            .arg(0)
            .arg(payload)
            .query(c)
            .unwrap();
        assert_eq!(ok, Value::Okay, "{key}");
        let a: Value = redis::cmd(&format!("{fam}.DEBUG"))
            .arg(&copy)
            .query(c)
            .unwrap();
        let b: Value = redis::cmd(&format!("{fam}.DEBUG"))
            .arg(key)
            .query(c)
            .unwrap();
        assert_eq!(a, b, "{key}");
        let digests: Vec<Option<String>> = redis::cmd("DEBUG")
            .arg("DIGEST-VALUE")
            .arg(key)
            .arg(&copy)
            .query(c)
            .unwrap();
        assert_eq!(digests[0], digests[1], "{key}");
        let _: i64 = redis::cmd("DEL").arg(&copy).query(c).unwrap();
    }

    // SAVE with the module's encoder, restart on the new file: the same answers.
    let _: Value = redis::cmd("SAVE").query(c).unwrap();
    server.shutdown(false);
    let server = Redis::start(&dir, &[], &args);
    check_all(&mut server.conn(), &expected);
}

#[test]
fn corrupt_value_in_the_rdb_refuses_to_start_cleanly() {
    if !have_redis("corrupt_value_in_the_rdb_refuses_to_start_cleanly") {
        return;
    }
    let expected: Json = serde_json::from_str(
        &std::fs::read_to_string(fixture_dir().join("expected.json")).unwrap(),
    )
    .unwrap();
    // bf:auto's value as it sits in the file: module id, then UINT items (100), UINT nfilters (1).
    let payload = unhex(
        expected["keys"]["bf:auto"]["dump_payload_hex"]
            .as_str()
            .unwrap(),
    );
    let value = &payload[1..payload.len() - 10];
    let mut rdb = std::fs::read(fixture_dir().join("dump.rdb")).unwrap();
    let at = rdb
        .windows(value.len())
        .position(|w| w == value)
        .expect("bf:auto in the RDB");
    let nfilters = at + 9 + 3 + 1; // id (9), items (opcode + 2-byte length), nfilters' opcode
    assert_eq!(rdb[nfilters], 1);
    rdb[nfilters] = 0; // a chain with no links: RedisBloom's loader refuses it, so must we
    let dir = temp_dir("corrupt-rdb");
    std::fs::write(dir.join("dump.rdb"), &rdb).unwrap();
    let log = Redis::try_start(&dir, &[], &["--dbfilename", "dump.rdb"])
        .err()
        .expect("a corrupt value must stop the load");
    assert!(log.contains("MBbloom--: invalid module value"), "{log}");
    assert!(!log.contains("crashed by signal"), "{log}");
}
