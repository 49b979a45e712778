//! WF.* (time-windowed filters) against a server process with the real clock: items
//! age out after their windows, and a restart — snapshot, and the log replayed after every
//! window has passed — rebuilds the same bytes, because writes are logged with their time.

use std::time::Duration;

use bloomgate_testkit::server::Server;
use bloomgate_testkit::temp_dir;
use redis::Value;

/// The server child of these tests (see `bloomgate_testkit::server`).
#[test]
fn serve_child() {
    bloomgate_testkit::server::serve_child();
}

fn run(con: &mut redis::Connection, args: &[&str]) -> Value {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con).unwrap()
}

/// The whole SCANDUMP sequence of `key`.
fn dump(con: &mut redis::Connection, key: &str) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut iter = 0i64;
    loop {
        let (next, data): (i64, Vec<u8>) = redis::cmd("WF.SCANDUMP")
            .arg(key)
            .arg(iter)
            .query(con)
            .unwrap();
        if next == 0 {
            return out;
        }
        out.push((next, data));
        iter = next;
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn items_age_out_and_restarts_rebuild_the_same_bytes() {
    let dir = temp_dir("age");
    let server = Server::process(&dir, &["--appendfsync", "always"]);
    let mut con = server.conn();
    // Windows of 400 ms, 2 generations: an item lives between 400 and 800 ms.
    let window = 400u64;
    // Start just after a slot boundary so the whole first phase stays in one slot.
    let start = now_ms();
    std::thread::sleep(Duration::from_millis(window - start % window + 5));
    assert_eq!(
        run(
            &mut con,
            &["WF.RESERVE", "seen", "0.01", "1000", "400", "2"]
        ),
        Value::Okay
    );
    let items: Vec<String> = (0..200).map(|i| format!("item-{i}")).collect();
    let mut madd = redis::cmd("WF.MADD");
    madd.arg("seen").arg(&items);
    let added: Vec<i64> = madd.query(&mut con).unwrap();
    assert!(added.iter().all(|&a| a == 1));
    let added_at = now_ms();
    let mut mexists = redis::cmd("WF.MEXISTS");
    mexists.arg("seen").arg(&items);
    let found: Vec<i64> = mexists.query(&mut con).unwrap();
    assert!(found.iter().all(|&f| f == 1), "no false negative");
    let card: i64 = redis::cmd("WF.CARD").arg("seen").query(&mut con).unwrap();
    assert_eq!(card, 200);
    let before = dump(&mut con, "seen");
    assert_eq!(before.len(), 2, "header + one generation");

    // kill -9: the log replays the adds with their times, into the same bytes.
    server.kill9();
    let server = Server::process(&dir, &["--appendfsync", "always"]);
    let mut con = server.conn();
    assert_eq!(dump(&mut con, "seen"), before);

    // After G windows the items are gone for readers...
    let gone_at = added_at - added_at % window + 2 * window + 20;
    std::thread::sleep(Duration::from_millis(gone_at.saturating_sub(now_ms())));
    let found: Vec<i64> = mexists.query(&mut con).unwrap();
    assert!(found.iter().filter(|&&f| f == 1).count() < 10, "{found:?}");
    let card: i64 = redis::cmd("WF.CARD").arg("seen").query(&mut con).unwrap();
    assert_eq!(card, 0);
    // ...yet a replay long after still rebuilds the very same bytes (nothing re-evaluated
    // against the replaying clock), and a snapshot keeps them too.
    assert_eq!(dump(&mut con, "seen"), before);
    server.kill9();
    let server = Server::process(&dir, &["--appendfsync", "always"]);
    let mut con = server.conn();
    assert_eq!(dump(&mut con, "seen"), before);
    assert_eq!(run(&mut con, &["SAVE"]), Value::Okay);
    server.kill9();
    let server = Server::process(&dir, &["--appendfsync", "always"]);
    let mut con = server.conn();
    assert_eq!(dump(&mut con, "seen"), before);
    // The next write drops the dead generation.
    assert_eq!(run(&mut con, &["WF.ADD", "seen", "fresh"]), Value::Int(1));
    let after = dump(&mut con, "seen");
    assert_eq!(after.len(), 2);
    assert_ne!(after, before);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
