//! Acknowledged means kept, and refused means absent, everywhere: with the per-key cap at 1 MB
//! on a master (with an append-only file) and its replica, writes over items that cross the
//! cap part-way (`bloomgate_testkit::cap_replies::partial_writes`: 1M-item BF.MADDs, classic
//! and blocked, a CF.INSERT, a CBF.MADD, a WF.MADD) reach the replica, the master's AOF reload
//! and its restart as the items the master applied: `DEBUG DIGEST-VALUE` equal everywhere.

use bloomgate_testkit::cap_replies::{partial_writes, PARTIAL_KEYS};

use super::*;

#[test]
fn partly_refused_writes_replicate_and_reload_as_applied() {
    if !have_redis("partly_refused_writes_replicate_and_reload_as_applied") {
        return;
    }
    let cap = ["bloom-memory-usage-limit", "1mb"];
    let aof = ["--appendonly", "yes"];
    let master_dir = temp_dir("applied-master");
    let master = Redis::start(&master_dir, &cap, &aof);
    let m = &mut master.conn();
    let master_port = master.port.to_string();
    let replica = Redis::start(
        &temp_dir("applied-replica"),
        &cap,
        &[
            "--replicaof",
            "127.0.0.1",
            &master_port,
            "--appendonly",
            "yes",
        ],
    );
    let r = &mut replica.conn();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while info_field(r, "replication", "master_link_status") != "up" {
        assert!(std::time::Instant::now() < deadline, "replica did not sync");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    partial_writes(m);
    let digests = |c: &mut redis::Connection| -> Vec<String> {
        PARTIAL_KEYS.iter().map(|k| digest(c, k)).collect()
    };
    let on_master = digests(m);
    assert_eq!(cmd(m, "WAIT 1 60000"), int(1));
    assert_eq!(
        digests(r),
        on_master,
        "the replica holds what the master holds"
    );
    // Items the master refused are refused on the replica too (the last item of each write).
    for (key, command, item) in [
        ("bf", "BF.EXISTS", "a999999"),
        ("bk", "BF.EXISTS", "b999999"),
        ("cbf", "CBF.EXISTS", "e4999"),
    ] {
        let query = format!("{command} {key} {item}");
        assert_eq!(cmd(r, &query), cmd(m, &query), "{query}");
        assert_eq!(cmd(m, &query), int(0), "{query}");
    }
    drop(replica);

    assert_eq!(cmd(m, "DEBUG LOADAOF"), Value::Okay);
    assert_eq!(digests(m), on_master, "after DEBUG LOADAOF");
    master.shutdown(false);
    let master = Redis::start(&master_dir, &cap, &aof);
    let m = &mut master.conn();
    assert_eq!(digests(m), on_master, "after a restart");
}
