//! `bloomgate import-rdb` end to end, on the fixture made by a live Redis 7.0.15 + RedisBloom
//! 2.4.23 (tests/fixtures/redisbloom-rdb): into a data directory then served, and `--to` a
//! running server; after each, every key answers as in RedisBloom. Damaged files are refused,
//! and every core Redis type in a real RDB is skipped and counted.

use std::process::Command;

use bloomgate_testkit::rdb_fixture::{check_all, RedisServer, FIXTURE};
use bloomgate_testkit::server::Server;
use bloomgate_testkit::temp_dir;
use redis::Value;

fn import(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bloomgate"))
        .arg("import-rdb")
        .args(args)
        .output()
        .unwrap()
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
