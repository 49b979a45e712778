//! Moving RedisBloom data in through the server, end to end, on the fixture made by a live
//! Redis 7.0.15 + RedisBloom 2.4.23 (tests/fixtures/redisbloom-rdb): RESTORE of its DUMP
//! payloads (and a restart), MIGRATE from a real Redis. After each, every key's INFO and DEBUG
//! replies, SCANDUMP bytes, DUMP payload and the answers to its inserted items and 20,000 absent
//! probes equal RedisBloom's. Corrupt payloads are refused cleanly. (`import-rdb` is the CLI's:
//! `crates/bloomgate-cli/tests/import_rdb.rs`.)

use bloomgate_testkit::rdb_fixture::{check_all, fixture, hex, RedisServer};
use bloomgate_testkit::server::Server;
use bloomgate_testkit::temp_dir;
use redis::Value;

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

/// A payload with its CRC64 recomputed (so the damage reaches the decoder).
fn with_crc(mut body: Vec<u8>) -> Vec<u8> {
    body.truncate(body.len() - 8);
    // The dialect's CRC-64/Jones, checked against Redis' test vector and a bitwise reference
    // in its own tests.
    let crc = bloomgate_dialect::encoding::rdb_format::crc64(0, &body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
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

/// `MIGRATE` from a real Redis speaks to `bloomgate serve` (SELECT, then RESTORE with the
/// payload): a string lands (serve has strings); a value of a type serve does not host is
/// refused with Redis' wording and stays on the source.
#[test]
fn migrate_from_a_real_redis_reaches_restore() {
    let redis = RedisServer::start("migrate");
    let dir = temp_dir("migrate-target");
    let server = Server::start(&dir, &[]);
    let mut con = redis.conn();
    let migrate = |con: &mut redis::Connection, key: &str| {
        redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(server.port)
            .arg(key)
            .arg(0)
            .arg(5000)
            .query::<Value>(con)
    };
    redis::cmd("SET").arg("s").arg("v").exec(&mut con).unwrap();
    assert_eq!(migrate(&mut con, "s").unwrap(), Value::Okay);
    let got: String = redis::cmd("GET")
        .arg("s")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(got, "v");
    redis::cmd("RPUSH")
        .arg("l")
        .arg("v")
        .exec(&mut con)
        .unwrap();
    let err = migrate(&mut con, "l").unwrap_err();
    assert!(
        err.to_string()
            .contains("Target instance replied with error: ERR Bad data format"),
        "{err}"
    );
    let exists: i64 = redis::cmd("EXISTS").arg("l").query(&mut con).unwrap();
    assert_eq!(exists, 1);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
