//! An acknowledged `GATE.RECORD` is kept: `bloomgate serve` over a real PostgreSQL, killed with
//! -9 right after (or two seconds after) its last reply, answers every acknowledged item as seen
//! after the restart — with the store up throughout, stopped during the records and started only
//! after the kill, under `appendfsync always` and `everysec`. Rows the store has not confirmed
//! are carried from log generation to log generation by snapshots (also through a start without
//! a gate) and committed when the store answers; committed rows stop being replayed.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use bloomgate_testkit::postgres::Postgres;
use bloomgate_testkit::server::Server;
use bloomgate_testkit::temp_dir;
use redis::Value;

/// The server child of these tests (see `bloomgate_testkit::server`).
#[test]
fn serve_child() {
    bloomgate_testkit::server::serve_child();
}

/// Items per `GATE.RECORD`, and scopes the records go round.
const BATCH: usize = 100;
const SCOPES: usize = 20;

/// The `n`-th record of a run tagged `tag`: its scope and items.
fn batch(tag: &str, n: usize) -> (String, Vec<String>) {
    let scope = format!("user:{}", n % SCOPES);
    let items = (0..BATCH).map(|i| format!("{tag}:{n}:{i}")).collect();
    (scope, items)
}

/// Records batches `range` of `tag`; every reply must say all items were taken.
fn record(con: &mut redis::Connection, tag: &str, range: std::ops::Range<usize>) {
    for n in range {
        let (scope, items) = batch(tag, n);
        let taken: i64 = redis::cmd("GATE.RECORD")
            .arg(&scope)
            .arg(&items)
            .query(con)
            .unwrap();
        assert_eq!(taken, BATCH as i64, "record {n} of {tag}");
    }
}

/// Asks GATE.UNSEEN for batches `range` of `tag` (retrying while the store comes back); returns
/// how many of their items read "not seen" (lost).
fn lost(con: &mut redis::Connection, tag: &str, range: std::ops::Range<usize>) -> usize {
    let mut lost = 0;
    for n in range {
        let (scope, items) = batch(tag, n);
        let deadline = Instant::now() + Duration::from_secs(30);
        let verdict: Vec<i64> = loop {
            match redis::cmd("GATE.UNSEEN").arg(&scope).arg(&items).query(con) {
                Ok(verdict) => break verdict,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("GATE.UNSEEN while the store comes back: {e}");
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => panic!("GATE.UNSEEN kept failing: {e}"),
            }
        };
        lost += verdict.iter().filter(|&&unseen| unseen == 1).count();
    }
    lost
}

/// GATE.INFO's counters.
fn info(con: &mut redis::Connection) -> HashMap<String, i64> {
    let flat: Vec<Value> = redis::cmd("GATE.INFO").query(con).unwrap();
    flat.chunks(2)
        .filter_map(|pair| {
            let name: String = redis::from_redis_value(pair[0].clone()).ok()?;
            let value: i64 = redis::from_redis_value(pair[1].clone()).ok()?;
            Some((name, value))
        })
        .collect()
}

/// Waits until the gate's backlog is committed; GATE.INFO then.
fn committed(con: &mut redis::Connection) -> HashMap<String, i64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let fields = info(con);
        if fields["record_backlog"] == 0 {
            return fields;
        }
        assert!(
            Instant::now() < deadline,
            "backlog not committed: {fields:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn serve(dir: &Path, fsync: &str, store: &str) -> Server {
    Server::process(dir, &["--appendfsync", fsync, "--gate-store", store])
}

/// `--appendfsync always`, PostgreSQL up: 20,000 items in 100-item records, kill -9 at once
/// after the last reply, restart: every one reads as seen.
#[test]
fn always_keeps_every_acknowledged_record_across_kill9() {
    let Some(pg) = Postgres::start("always_keeps_every_acknowledged_record_across_kill9") else {
        return;
    };
    let dir = temp_dir("gate-durable-always");
    let server = serve(&dir, "always", &pg.url);
    record(&mut server.conn(), "a", 0..200);
    server.kill9();
    let server = serve(&dir, "always", &pg.url);
    let mut con = server.conn();
    assert_eq!(lost(&mut con, "a", 0..200), 0);
    let fields = committed(&mut con);
    assert!(fields["record_replayed"] <= 20_000, "{fields:?}");
    drop(con);
    server.shutdown();
}

/// PostgreSQL stopped during the records (they are acknowledged from the log, the store has
/// none of them) and started only after the kill: nothing lost, under `always` (kill at once)
/// and `everysec` (kill two seconds after the last record); the restarted gate commits them.
#[test]
fn a_store_outage_then_kill9_loses_nothing() {
    let Some(mut pg) = Postgres::start("a_store_outage_then_kill9_loses_nothing") else {
        return;
    };
    for (fsync, pause) in [("always", 0), ("everysec", 2)] {
        let dir = temp_dir(&format!("gate-durable-outage-{fsync}"));
        let server = serve(&dir, fsync, &pg.url);
        let mut con = server.conn();
        assert_eq!(
            lost(&mut con, fsync, 0..1),
            BATCH,
            "a fresh scope's items are unseen"
        );
        pg.stop();
        record(&mut con, fsync, 0..200);
        assert_eq!(
            info(&mut con)["record_backlog"],
            20_000,
            "nothing reached the store"
        );
        std::thread::sleep(Duration::from_secs(pause));
        drop(con);
        server.kill9();
        pg.restart();
        let server = serve(&dir, fsync, &pg.url);
        let mut con = server.conn();
        assert_eq!(lost(&mut con, fsync, 0..200), 0, "{fsync}");
        let fields = committed(&mut con);
        assert_eq!(fields["record_replayed"], 20_000, "{fsync}: {fields:?}");
        assert!(fields["recorded_rows"] >= 20_000, "{fsync}: {fields:?}");
        drop(con);
        server.shutdown();
    }
}

/// The log stays bounded: a snapshot drops the log generations it covers, and with them the
/// rows the store has; the rows it does not have yet (PostgreSQL stopped) start the next
/// generation, also through a start without a gate (which keeps them for one). After the kill,
/// exactly the uncommitted rows are replayed, and every acknowledged item reads as seen.
#[test]
fn snapshots_carry_only_the_uncommitted_rows() {
    let Some(mut pg) = Postgres::start("snapshots_carry_only_the_uncommitted_rows") else {
        return;
    };
    let dir = temp_dir("gate-durable-carry");
    let server = serve(&dir, "always", &pg.url);
    let mut con = server.conn();
    record(&mut con, "up", 0..50);
    committed(&mut con);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    pg.stop();
    record(&mut con, "down", 0..50);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let logs = || {
        std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().starts_with("appendonly.")
            })
            .count()
    };
    assert_eq!(logs(), 1, "the snapshot dropped the generations it covers");
    record(&mut con, "down", 50..100);
    drop(con);
    server.kill9();

    // Without a gate the rows wait in the log, across a snapshot of their own.
    let plain = Server::start(&dir, &["--appendfsync", "always"]);
    let _: () = redis::cmd("SAVE").query(&mut plain.conn()).unwrap();
    plain.shutdown();

    pg.restart();
    let server = serve(&dir, "always", &pg.url);
    let mut con = server.conn();
    assert_eq!(lost(&mut con, "up", 0..50), 0);
    assert_eq!(lost(&mut con, "down", 0..100), 0);
    let fields = committed(&mut con);
    assert_eq!(
        fields["record_replayed"], 10_000,
        "only the rows the store lacked: {fields:?}"
    );
    drop(con);
    server.shutdown();
}
