//! The module inside Debian's redis-server, driven by the `redis` crate: the same BF.*/CF.*
//! reply checks `bloomgate serve` passes (`bloomgate_testkit::replies`), then what only a module has —
//! registration (COMMAND INFO), module configs and load arguments, the data types (DUMP /
//! RESTORE, corrupt payloads refused, COPY, DEBUG DIGEST-VALUE, MEMORY USAGE, AOF rewrite),
//! the memory budget, and replication to a replica with different settings.
//!
//! One test binary in four files: this one holds the reply checks, registration and configs;
//! `values.rs` the data types through DUMP/RESTORE and the budget; `cap.rs` the per-key cap
//! `bloom-memory-usage-limit`; `persistence.rs` AOF, replicas,
//! windowed filters across restarts and RedisBloom 8's RDB; `memory.rs` the module's allocations.

#[path = "../support/mod.rs"]
mod support;

mod applied;
mod cap;
mod events;
mod memory;
mod persistence;
mod valkey;
mod values;

use bloomgate_testkit::replies::{self as dialect_replies, cmd, error_of, int};
use redis::Value;
use support::{have_redis, temp_dir, Redis};

#[test]
fn bf_replies_match_bloomgate_serve() {
    if !have_redis("bf_replies_match_bloomgate_serve") {
        return;
    }
    let server = Redis::start(&temp_dir("bf"), &[], &[]);
    dialect_replies::bf_replies(server.port);
}

#[test]
fn bf_merge_matches_bloomgate_serve() {
    if !have_redis("bf_merge_matches_bloomgate_serve") {
        return;
    }
    let server = Redis::start(&temp_dir("bf-merge"), &[], &[]);
    bloomgate_testkit::merge_replies::bf_merge_replies(server.port);
}

#[test]
fn bf_blocked_layout_replies_match_bloomgate_serve() {
    if !have_redis("bf_blocked_layout_replies_match_bloomgate_serve") {
        return;
    }
    let server = Redis::start(&temp_dir("bf-layout"), &[], &[]);
    dialect_replies::bf_layout_replies(server.port);
}

#[test]
fn cf_replies_match_bloomgate_serve() {
    if !have_redis("cf_replies_match_bloomgate_serve") {
        return;
    }
    let server = Redis::start(&temp_dir("cf"), &[], &[]);
    dialect_replies::cf_replies(server.port);
}

#[test]
fn cms_and_topk_replies_match_bloomgate_serve() {
    if !have_redis("cms_and_topk_replies_match_bloomgate_serve") {
        return;
    }
    let server = Redis::start(&temp_dir("sketches"), &[], &[]);
    dialect_replies::cms_replies(server.port);
    dialect_replies::topk_replies(server.port);
}

#[test]
fn cbf_replies_match_bloomgate_serve() {
    if !have_redis("cbf_replies_match_bloomgate_serve") {
        return;
    }
    let server = Redis::start(&temp_dir("cbf"), &[], &[]);
    dialect_replies::cbf_replies(server.port);
}

#[test]
fn tdigest_replies_match_bloomgate_serve() {
    if !have_redis("tdigest_replies_match_bloomgate_serve") {
        return;
    }
    let server = Redis::start(&temp_dir("tdigest"), &[], &[]);
    dialect_replies::tdigest_replies(server.port);
}

/// The server's major version as it reports it (`redis_version`: Valkey 8 says 7.2.4).
fn redis_major(c: &mut redis::Connection) -> u32 {
    info_field(c, "server", "redis_version")
        .split('.')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// `INFO <section>` as field → value.
fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> String {
    let text: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .trim()
        .to_string()
}

/// BGREWRITEAOF, waited for (at most a minute): the new base file's bytes under `dir`.
fn rewrite_aof(c: &mut redis::Connection, dir: &std::path::Path) -> Vec<u8> {
    cmd(c, "BGREWRITEAOF");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while info_field(c, "persistence", "aof_rewrite_in_progress") != "0"
        || info_field(c, "persistence", "aof_rewrite_scheduled") != "0"
    {
        assert!(
            std::time::Instant::now() < deadline,
            "rewrite did not finish"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let base = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".base.aof"))
        .expect("a base AOF");
    std::fs::read(base).unwrap()
}

fn digest(c: &mut redis::Connection, key: &str) -> String {
    let d: Vec<String> = redis::cmd("DEBUG")
        .arg("DIGEST-VALUE")
        .arg(key)
        .query(c)
        .unwrap();
    d[0].clone()
}

/// BF.DEBUG / CF.DEBUG, or a windowed or counting filter's dump header (WF.* and CBF.* have
/// no DEBUG).
fn debug(c: &mut redis::Connection, key: &str) -> Value {
    if key.starts_with("cbf") {
        return cmd(c, &format!("CBF.SCANDUMP {key} 0"));
    }
    match &key[..2] {
        "cf" => cmd(c, &format!("CF.DEBUG {key}")),
        "wf" => cmd(c, &format!("WF.SCANDUMP {key} 0")),
        _ => cmd(c, &format!("BF.DEBUG {key}")),
    }
}

#[test]
fn command_table_registration() {
    if !have_redis("command_table_registration") {
        return;
    }
    let server = Redis::start(&temp_dir("cmds"), &[], &[]);
    let c = &mut server.conn();
    for info in bloomgate_dialect::commands::table() {
        let reply = cmd(c, &format!("COMMAND INFO {}", info.name));
        let Value::Array(outer) = reply else {
            panic!("{reply:?}")
        };
        let Value::Array(entry) = &outer[0] else {
            panic!("{} is not registered: {outer:?}", info.name)
        };
        assert_eq!(
            entry[0],
            Value::BulkString(info.name.to_lowercase().into_bytes())
        );
        let Value::Array(flags) = &entry[2] else {
            panic!("{entry:?}")
        };
        let flags: Vec<String> = flags
            .iter()
            .map(|f| match f {
                Value::SimpleString(s) => s.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        for flag in info.flag_names() {
            assert!(flags.iter().any(|f| f == flag), "{}: {flags:?}", info.name);
        }
        // Arity, tips and key spec as `bloomgate serve` shows them (RedisModule_SetCommandInfo).
        assert_eq!(entry[1], int(i64::from(info.arity)), "{}", info.name);
        assert_eq!(entry[7], Value::Array(vec![]), "{}: no tips", info.name);
        let Value::Array(key_specs) = &entry[8] else {
            panic!("{entry:?}")
        };
        let key_spec = format!("{key_specs:?}");
        match &info.docs {
            Some(docs) => {
                let specs = 1 + usize::from(docs.numkeys_at.is_some());
                assert_eq!(key_specs.len(), specs, "{}", info.name);
                assert!(
                    key_spec.contains(docs.key_notes),
                    "{}: {key_spec}",
                    info.name
                );
                let flag = if docs.key_rw { "\"RW\"" } else { "\"RO\"" };
                assert!(key_spec.contains(flag), "{}: {key_spec}", info.name);
                let docs_reply = cmd(c, &format!("COMMAND DOCS {}", info.name));
                let docs_text = format!("{docs_reply:?}");
                for part in [docs.summary, docs.complexity, docs.since] {
                    assert!(docs_text.contains(part), "{}: {docs_text}", info.name);
                }
                for arg in docs.args {
                    assert!(docs_text.contains(arg.name), "{}: {docs_text}", info.name);
                }
            }
            None => assert!(!key_spec.contains("notes"), "{}: {key_spec}", info.name),
        }
        assert_eq!(
            (&entry[3], &entry[4], &entry[5]),
            (
                &int(info.first_key as i64),
                &int(info.last_key as i64),
                &int(info.step as i64)
            ),
            "{}",
            info.name
        );
    }
    // Cluster routing relies on the key positions: COMMAND GETKEYS finds the key.
    assert_eq!(
        cmd(c, "COMMAND GETKEYS BF.MADD k a b"),
        Value::Array(vec![Value::BulkString(b"k".to_vec())])
    );
}

#[test]
fn configs_and_load_arguments() {
    if !have_redis("configs_and_load_arguments") {
        return;
    }
    let dir = temp_dir("configs");
    // RedisBloom 2.x's argument names and ours.
    let server = Redis::start(
        &dir,
        &["ERROR_RATE", "0.001", "bf-initial-size", "200"],
        &[],
    );
    let c = &mut server.conn();
    // Redis 8 names module configs as RedisBloom 8 does (unprefixed); Redis 7 prefixes them.
    let major = redis_major(c);
    let prefix = if major >= 8 { "" } else { "bf." };
    let get = |c: &mut redis::Connection, name: &str| -> String {
        let name = name.replace("bf.", prefix);
        let pair: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(&name).query(c).unwrap();
        assert_eq!(pair.len(), 2, "CONFIG GET {name}");
        pair[1].clone()
    };
    let error_of =
        |c: &mut redis::Connection, line: &str| error_of(c, &line.replace("bf.", prefix));
    let cmd = |c: &mut redis::Connection, line: &str| cmd(c, &line.replace("bf.", prefix));
    assert_eq!(get(c, "bf.bf-error-rate"), "0.001");
    assert_eq!(get(c, "bf.bf-initial-size"), "200");
    assert_eq!(get(c, "bf.cf-bucket-size"), "2");
    cmd(c, "BF.ADD auto a");
    assert_eq!(
        cmd(c, "BF.INFO auto CAPACITY"),
        Value::Array(vec![int(200)])
    );

    let refused = error_of(c, "CONFIG SET bf.bf-error-rate 2");
    assert!(
        refused.contains("must be in the range (0.000000, 1.000000)"),
        "{refused}"
    );
    let refused = error_of(c, "CONFIG SET bf.cf-bucket-size 300");
    assert!(
        refused.contains("must be in the range [1, 255]"),
        "{refused}"
    );
    let refused = error_of(c, "CONFIG SET bf.cf-initial-size x");
    assert!(
        refused.contains("couldn't be parsed into an integer"),
        "{refused}"
    );
    assert_eq!(cmd(c, "CONFIG SET bf.bf-error-rate 0.5"), Value::Okay);
    assert_eq!(
        get(c, "bf.bf-error-rate"),
        "0.25",
        "capped as RedisBloom does"
    );
    assert_eq!(cmd(c, "CONFIG SET bf.cf-initial-size 64"), Value::Okay);
    cmd(c, "CF.ADD cauto a");
    let Value::BulkString(line) = cmd(c, "CF.DEBUG cauto") else {
        panic!("CF.DEBUG")
    };
    assert!(String::from_utf8(line).unwrap().contains(" buckets:32 "));
    drop(server);

    // A bad load argument refuses to load the module (and says why).
    let log = Redis::try_start(&dir, &["bf-error-rate", "5"], &[])
        .err()
        .expect("refused");
    assert!(
        log.contains(
            "bf-error-rate 5: Value for `bf-error-rate` must be in the range (0.000000, 1.000000)"
        ),
        "{log}"
    );
    let log = Redis::try_start(&dir, &["bf-error-rate"], &[])
        .err()
        .expect("refused");
    assert!(log.contains("setting/value pairs"), "{log}");

    // On Redis 8, RedisBloom 8's `--bf-error-rate` on the command line (as in redis.conf).
    if major >= 8 {
        let server = Redis::start(
            &dir,
            &[],
            &["--bf-error-rate", "0.02", "--cf-bucket-size", "4"],
        );
        let c = &mut server.conn();
        assert_eq!(get(c, "bf-error-rate"), "0.02");
        assert_eq!(get(c, "cf-bucket-size"), "4");
        assert_eq!(cmd(c, "CONFIG SET bf-error-rate 0.03"), Value::Okay);
        assert_eq!(get(c, "bf-error-rate"), "0.03");
    }
}
