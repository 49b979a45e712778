//! valkey-bloom's data on a real server: the RDB written by Valkey 8.0.1 + valkey-bloom 0.1.0
//! (`tests/fixtures/valkey-bloom-rdb/`, see its README) loads into Valkey with this module as
//! `bloomfltr` keys, every added item answers 1 and exactly valkey-bloom's false positives
//! among 5,000 absent probes answer 1; BF.CARD and BF.INFO's numbers are valkey-bloom's; after
//! SAVE (in the flavour's encoding) and a restart, the same. Valkey only: the file is RDB
//! version 11, which Redis 7.0 cannot read.

// The shared support file: this test uses only part of it.
#[allow(dead_code, unused_imports)]
mod support;

use std::process::Command;

use bloomgate_testkit::valkey_fixture::{self, hits, key_answers};
use serde_json::Value as Json;
use support::{temp_dir, Redis};

/// The Valkey server binary: `BLOOMGATE_REDIS_SERVER` if it is Valkey, else `valkey-server`.
fn valkey_binary() -> Option<String> {
    let env = bloomgate_testkit::redis_server_binary();
    [env, "valkey-server".to_owned()].into_iter().find(|bin| {
        Command::new(bin)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success() && o.stdout.starts_with(b"Valkey"))
    })
}

/// BF.INFO's label → integer pairs (nil as `None`).
fn info(c: &mut redis::Connection, key: &str) -> Vec<(String, Option<i64>)> {
    let reply: Vec<redis::Value> = redis::cmd("BF.INFO").arg(key).query(c).unwrap();
    reply
        .chunks(2)
        .map(|pair| {
            let label = match &pair[0] {
                redis::Value::SimpleString(s) => s.clone(),
                redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("label {other:?}"),
            };
            let value = match &pair[1] {
                redis::Value::Int(n) => Some(*n),
                _ => None,
            };
            (label, value)
        })
        .collect()
}

fn check(c: &mut redis::Connection, fixture: &Json, when: &str) {
    for (key, expected) in fixture["keys"].as_object().unwrap() {
        let answers = &expected["answers"];
        let kind: String = redis::cmd("TYPE").arg(key).query(c).unwrap();
        assert_eq!(kind, "bloomfltr", "{when} {key}: TYPE");
        let want = key_answers(fixture, key);
        if !want.present.is_empty() {
            let present: Vec<i64> = redis::cmd("BF.MEXISTS")
                .arg(key)
                .arg(&want.present)
                .query(c)
                .unwrap();
            assert!(
                present.iter().all(|&p| p == 1),
                "{when} {key}: item missing"
            );
        }
        let answered: Vec<i64> = redis::cmd("BF.MEXISTS")
            .arg(key)
            .arg(&want.probes)
            .query(c)
            .unwrap();
        let got = hits(answered.iter().map(|&a| a == 1));
        assert_eq!(got, want.false_positives, "{when} {key}: false positives");
        let card: i64 = redis::cmd("BF.CARD").arg(key).query(c).unwrap();
        assert_eq!(card, answers["BF.CARD"].as_i64().unwrap(), "{when} {key}");
        let ours = info(c, key);
        let theirs = answers["BF.INFO"].as_array().unwrap();
        for label in [
            "Capacity",
            "Number of filters",
            "Number of items inserted",
            "Expansion rate",
        ] {
            let at = theirs.iter().position(|v| v == label).unwrap();
            let got = ours.iter().find(|(l, _)| l == label).map(|(_, v)| *v);
            assert_eq!(got, Some(theirs[at + 1].as_i64()), "{when} {key}: {label}");
        }
    }
}

#[test]
fn valkey_bloom_rdb_loads_and_survives_save() {
    let test = "valkey_bloom_rdb_loads_and_survives_save";
    let Some(valkey) = valkey_binary() else {
        bloomgate_testkit::skip_or_fail(test, "valkey-server is not installed");
        return;
    };
    let fixture = valkey_fixture::fixture();
    let dir = temp_dir("valkey-bloom-rdb");
    std::fs::copy(valkey_fixture::dir().join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    let args = ["--dbfilename", "dump.rdb"];
    let server = Redis::try_start_at(&valkey, &dir, &[], &args).expect("Valkey loads the file");
    let mut c = server.conn();
    let keys: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(keys, 9);
    check(&mut c, &fixture, "loaded");
    server.shutdown(true);
    let server = Redis::try_start_at(&valkey, &dir, &[], &args).expect("our own save loads");
    check(&mut server.conn(), &fixture, "after SAVE");
    server.shutdown(false);
}
