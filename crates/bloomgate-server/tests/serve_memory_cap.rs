//! `bloom-memory-usage-limit` in `bloomgate serve`: CONFIG GET/SET, the config file and the
//! `--bloom-memory-usage-limit` flag; the shared checks at a 1 MB cap (too-big reserves, the
//! RESTORE of a 3 MB filter and scaling past the cap refused, the capped filter keeping its
//! items); and what is replayed — a snapshot, the append-only log, DEBUG RELOAD — loading keys
//! over the cap.

use bloomgate_testkit::cap_replies::{
    memory_cap_replies, partial_dumps, partial_writes, three_mb_filter, ERR_CAP,
};
use bloomgate_testkit::replies::{cmd, error_of, int};
use bloomgate_testkit::server::Server;
use bloomgate_testkit::temp_dir;
use redis::Value;

const NAME: &str = "bloom-memory-usage-limit";

/// The server child of the tests that kill it (see `bloomgate_testkit::server`).
#[test]
fn serve_child() {
    bloomgate_testkit::server::serve_child();
}

#[test]
fn the_cap_refuses_reserves_restore_and_growth() {
    let server = Server::start(&temp_dir("cap-replies"), &[]);
    memory_cap_replies(server.port, NAME, ERR_CAP);
}

#[test]
fn the_cap_comes_from_the_flag_the_config_file_and_config_set() {
    let dir = temp_dir("cap-config");
    let file = dir.join("serve.conf");
    std::fs::write(&file, "bloom-memory-usage-limit 2mb\n").unwrap();
    let server = Server::start(&dir, &["--config", file.to_str().unwrap()]);
    let mut c = server.conn();
    let get = |c: &mut redis::Connection| cmd(c, &format!("CONFIG GET {NAME}"));
    let pair = |v: &str| {
        Value::Array(vec![
            Value::BulkString(NAME.as_bytes().to_vec()),
            Value::BulkString(v.as_bytes().to_vec()),
        ])
    };
    assert_eq!(get(&mut c), pair("2097152"));
    assert_eq!(cmd(&mut c, &format!("CONFIG SET {NAME} 5000")), Value::Okay);
    assert_eq!(get(&mut c), pair("5000"));
    assert!(error_of(&mut c, &format!("CONFIG SET {NAME} -1")).contains("memory value"));
    assert!(
        error_of(&mut c, &format!("CONFIG SET {NAME} 9223372036854775808"))
            .contains("must be in the range [0, 9223372036854775807]")
    );
    server.shutdown();

    let server = Server::start(&dir, &["--bloom-memory-usage-limit", "1kb"]);
    let mut c = server.conn();
    assert_eq!(get(&mut c), pair("1024"));
    assert_eq!(error_of(&mut c, "BF.RESERVE b 0.01 10000"), ERR_CAP);
}

#[test]
fn keys_over_the_cap_load_from_the_snapshot_the_log_and_debug_reload() {
    let dir = temp_dir("cap-replay");
    // Written with no cap: a 3 MB filter, kept by the final snapshot.
    let server = Server::start(&dir, &[]);
    three_mb_filter(&mut server.conn(), NAME, "snap");
    server.shutdown();
    // Then, in the log only (the server is killed before a snapshot).
    let server = Server::process(&dir, &["--appendfsync", "always"]);
    let mut c = server.conn();
    three_mb_filter(&mut c, NAME, "logged");
    assert_eq!(
        cmd(&mut c, "BF.RESERVE grown 0.01 1000 EXPANSION 2"),
        Value::Okay
    );
    for batch in 0..80 {
        let mut madd = redis::cmd("BF.MADD");
        madd.arg("grown");
        for i in 0..5_000 {
            madd.arg(format!("g{}", batch * 5_000 + i));
        }
        let _: Value = madd.query(&mut c).unwrap();
    }
    server.kill9();

    let server = Server::start(
        &dir,
        &[
            "--bloom-memory-usage-limit",
            "1mb",
            "--enable-debug-command",
            "yes",
        ],
    );
    let mut c = server.conn();
    let check = |c: &mut redis::Connection| {
        for key in ["snap", "logged"] {
            assert_eq!(cmd(c, &format!("BF.EXISTS {key} b")), int(1), "{key}");
        }
        assert_eq!(cmd(c, "BF.EXISTS grown g399999"), int(1));
        let Value::Int(size) = cmd(c, "MEMORY USAGE grown") else {
            panic!("MEMORY USAGE")
        };
        assert!(size > 1 << 20, "{size}");
    };
    check(&mut c);
    assert_eq!(cmd(&mut c, "DEBUG RELOAD"), Value::Okay);
    check(&mut c);
    // Clients are refused growth past the cap (once the newest link is full), and a new key
    // over it.
    let refused = (0..100).find_map(|batch| {
        let mut madd = redis::cmd("BF.MADD");
        madd.arg("grown");
        for i in 0..5_000 {
            madd.arg(format!("new{}", batch * 5_000 + i));
        }
        madd.query::<Value>(&mut c).err()
    });
    let refused = refused.expect("growth past the cap is refused");
    assert_eq!(bloomgate_testkit::replies::wire_error(&refused), ERR_CAP);
    assert_eq!(
        error_of(&mut c, "BF.RESERVE another 0.001 1700000"),
        ERR_CAP
    );
}

/// Writes over items that cross the cap part-way (1M-item BF.MADDs, classic and blocked, a
/// CF.INSERT, a CBF.MADD, a WF.MADD) are logged as the items they applied: killed with -9
/// under `appendfsync always`, serve restarts holding exactly what it held, no refused item
/// added by the log's replay (which the cap never refuses).
#[test]
fn partly_refused_writes_are_logged_as_applied() {
    let dir = temp_dir("cap-applied");
    let cap = ["--bloom-memory-usage-limit", "1mb"];
    let server = Server::process(&dir, &[&cap[..], &["--appendfsync", "always"]].concat());
    let mut c = server.conn();
    partial_writes(&mut c);
    let before = partial_dumps(&mut c);
    server.kill9();
    let server = Server::start(&dir, &cap);
    assert!(
        partial_dumps(&mut server.conn()) == before,
        "the log replayed other items"
    );
}
