//! GATE.* over RESP: `bloomgate serve --gate-store URL` answers a real client (the `redis`
//! crate) from the gate over SQLite and PostgreSQL, refuses GATE.* in MULTI and without a gate,
//! reports the gate in GATE.INFO, INFO and `/metrics`, and keeps serving other clients while a
//! store hangs or is down — and the gate works again once the store is back.

use std::collections::HashMap;
use std::time::Duration;

use bloomgate_testkit::postgres::Postgres;
use bloomgate_testkit::server::Server;
use bloomgate_testkit::{temp_dir, FreezableProxy};
use redis::Value;

/// GATE.UNSEEN's answer as 0/1 integers.
fn unseen(
    con: &mut redis::Connection,
    scope: &str,
    candidates: &[&str],
) -> redis::RedisResult<Vec<i64>> {
    redis::cmd("GATE.UNSEEN")
        .arg(scope)
        .arg(candidates)
        .query(con)
}

fn record(con: &mut redis::Connection, scope: &str, items: &[&str]) -> i64 {
    redis::cmd("GATE.RECORD")
        .arg(scope)
        .arg(items)
        .query(con)
        .unwrap()
}

/// GATE.INFO as a map of its fields (RESP2: a flat array).
fn info(con: &mut redis::Connection) -> HashMap<String, Value> {
    let flat: Vec<Value> = redis::cmd("GATE.INFO").query(con).unwrap();
    flat.chunks(2)
        .map(|pair| {
            let name: String = redis::from_redis_value(pair[0].clone()).unwrap();
            (name, pair[1].clone())
        })
        .collect()
}

fn counter(info: &HashMap<String, Value>, name: &str) -> i64 {
    redis::from_redis_value(info[name].clone()).unwrap()
}

/// GATE.UNSEEN's first answer, retried every 100 ms for up to 10 s while the store is away
/// (None if it never answered).
fn unseen_once_back(
    con: &mut redis::Connection,
    scope: &str,
    candidates: &[&str],
) -> Option<Vec<i64>> {
    for _ in 0..100 {
        match unseen(con, scope, candidates) {
            Ok(answer) => return Some(answer),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    None
}

/// GATE.INFO's `record_backlog` once it is 0, or after 10 s (polled every 100 ms).
fn backlog_after_commits(con: &mut redis::Connection) -> i64 {
    let mut backlog = i64::MAX;
    for _ in 0..100 {
        backlog = counter(&info(con), "record_backlog");
        if backlog == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    backlog
}

#[test]
fn gate_commands_over_sqlite() {
    let dir = temp_dir("gate-sqlite");
    let store = format!("sqlite:{}", dir.join("seen.db").display());
    let metrics_port = bloomgate_testkit::free_port().to_string();
    let server = Server::start(
        &dir.join("data"),
        &[
            "--gate-store",
            &store,
            "--gate-window",
            "1",
            "--metrics-addr",
            &metrics_port,
        ],
    );
    let mut con = server.conn();
    assert_eq!(
        unseen(&mut con, "user:1", &["a", "b", "42"]).unwrap(),
        vec![1, 1, 1]
    );
    assert_eq!(record(&mut con, "user:1", &["a", "42"]), 2);
    assert_eq!(
        unseen(&mut con, "user:1", &["a", "b", "42"]).unwrap(),
        vec![0, 1, 0]
    );
    assert_eq!(
        unseen(&mut con, "user:2", &["a"]).unwrap(),
        vec![1],
        "scopes are apart"
    );
    let expired: i64 = redis::cmd("GATE.EXPIRE").query(&mut con).unwrap();
    assert_eq!(expired, 0, "nothing is older than the window");

    let fields = info(&mut con);
    assert_eq!(
        redis::from_redis_value::<String>(fields["policy"].clone()).unwrap(),
        "verify"
    );
    assert_eq!(
        redis::from_redis_value::<String>(fields["store"].clone()).unwrap(),
        store
    );
    assert_eq!(counter(&fields, "requests"), 3);
    assert_eq!(counter(&fields, "candidates"), 7);
    for name in ["store_lookups", "filter_negatives", "filter_memory_bytes"] {
        assert!(counter(&fields, name) >= 0, "{name}");
    }

    // Refused inside MULTI, at queue time: the transaction is aborted.
    let _: () = redis::cmd("MULTI").query(&mut con).unwrap();
    let refused = unseen(&mut con, "user:1", &["a"]).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("not allowed inside a transaction"),
        "{refused}"
    );
    let exec: redis::RedisResult<Value> = redis::cmd("EXEC").query(&mut con);
    let aborted = exec.unwrap_err();
    assert!(format!("{aborted:?}").contains("discarded"), "{aborted:?}");

    // A pipeline: replies come back in order, deferred ones included.
    let (first, count, second): (Vec<i64>, i64, Vec<i64>) = redis::pipe()
        .cmd("GATE.UNSEEN")
        .arg("user:3")
        .arg("x")
        .cmd("GATE.RECORD")
        .arg("user:3")
        .arg("x")
        .cmd("GATE.UNSEEN")
        .arg("user:3")
        .arg("x")
        .query(&mut con)
        .unwrap();
    assert_eq!((first, count, second), (vec![1], 1, vec![0]));

    let memory: String = redis::cmd("INFO").arg("memory").query(&mut con).unwrap();
    assert!(memory.contains("used_memory_gate:"), "{memory}");
    let docs: Value = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg("GATE.UNSEEN")
        .query(&mut con)
        .unwrap();
    assert!(format!("{docs:?}").contains("candidate"), "{docs:?}");

    let metrics = http_get(&format!("127.0.0.1:{metrics_port}"), "/metrics");
    assert!(
        metrics.contains("bloomgate_gate_requests_total 5"),
        "{metrics}"
    );
    assert!(metrics.contains("bloomgate_commands_total"), "{metrics}");
    drop(con);
    server.shutdown();
}

#[test]
fn gate_commands_without_a_gate_say_how_to_configure_one() {
    let dir = temp_dir("gate-none");
    let server = Server::start(&dir, &[]);
    let mut con = server.conn();
    let err = unseen(&mut con, "u", &["a"]).unwrap_err();
    assert!(err.to_string().contains("--gate-store"), "{err}");
    let err: redis::RedisError = redis::cmd("GATE.INFO")
        .query::<Value>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("gate not configured"), "{err}");
}

/// A plain HTTP GET of `path`; the body.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // One write: the endpoint answers after its first read.
    let request = format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text
}

/// PostgreSQL behind a proxy that can freeze it (a store that stops answering) and then
/// stopped outright: GATE.UNSEEN for a scope the gate has not loaded answers an error (never
/// "not seen") while another client's PING is answered; what was recorded meanwhile is
/// committed once PostgreSQL is back, and the gate answers again without a restart.
#[test]
fn gate_over_postgres_survives_a_store_outage() {
    let Some(mut pg) = Postgres::start("gate_over_postgres_survives_a_store_outage") else {
        return;
    };
    let target = format!("127.0.0.1:{}", pg.port()).parse().unwrap();
    let proxy = FreezableProxy::start(target);
    let url = format!(
        "postgres://bloomgate@127.0.0.1:{}/postgres?connect_timeout=2&statement_timeout=2000",
        proxy.port
    );
    let dir = temp_dir("gate-pg");
    let server = Server::start(&dir, &["--gate-store", &url]);
    let mut con = server.conn();
    assert_eq!(unseen(&mut con, "1", &["10", "11"]).unwrap(), vec![1, 1]);
    assert_eq!(record(&mut con, "1", &["10"]), 1);
    assert_eq!(unseen(&mut con, "1", &["10", "11"]).unwrap(), vec![0, 1]);

    // A hanging store: the GATE.UNSEEN waits on a worker, PING on another connection does not.
    proxy.freeze(true);
    let waiting = {
        let mut con = server.conn();
        std::thread::spawn(move || unseen(&mut con, "2", &["10"]))
    };
    let mut other = server.conn();
    let pong: String = redis::cmd("PING").query(&mut other).unwrap();
    assert_eq!(pong, "PONG");
    assert!(
        !waiting.is_finished(),
        "the gate call should still be waiting for the store"
    );
    let answer = waiting.join().unwrap();
    assert!(
        answer.is_err(),
        "a hanging store must be an error, got {answer:?}"
    );
    proxy.freeze(false);

    // A stopped store: an error at once, and records are kept for later.
    pg.stop();
    let err = unseen(&mut con, "3", &["10"]).unwrap_err();
    assert!(err.to_string().contains("gate"), "{err}");
    assert_eq!(
        record(&mut con, "1", &["12"]),
        1,
        "kept for the store's return"
    );
    assert_eq!(
        unseen(&mut con, "1", &["12"]).unwrap(),
        vec![0],
        "hidden meanwhile"
    );
    pg.restart();

    // Back: a new scope loads, and the outage's record reaches the store.
    let back = unseen_once_back(&mut con, "3", &["10"]);
    assert_eq!(
        back,
        Some(vec![1]),
        "the gate answers again once the store is back"
    );
    assert_eq!(
        backlog_after_commits(&mut con),
        0,
        "the outage's records are committed"
    );
    drop(con);
    drop(other);
    server.shutdown();
    drop(proxy);
}

/// A frozen PostgreSQL (SIGSTOP: its connections stay open, nothing answers) holds no gate
/// worker for good: more GATE.UNSEEN than there are workers all answer an error, a GATE.RECORD
/// meanwhile — it needs a worker, not the store — is answered (with all the workers pinned it
/// would time out), and after the thaw the gate answers again without a restart and commits
/// what was recorded. The store's client-side timeouts are short here to keep the test short.
#[test]
fn a_frozen_postgres_does_not_pin_the_gate_workers() {
    let Some(mut pg) = Postgres::start("a_frozen_postgres_does_not_pin_the_gate_workers") else {
        return;
    };
    let url = format!("{}?connect_timeout=2&read_timeout=2000", pg.url);
    let dir = temp_dir("gate-pg-frozen");
    let server = Server::start(&dir, &["--gate-store", &url]);
    let mut con = server.conn();
    assert_eq!(unseen(&mut con, "1", &["10"]).unwrap(), vec![1]);
    pg.freeze();
    let askers: Vec<_> = (0..2 * bloomgate_server::gate::WORKERS)
        .map(|i| {
            let mut con = server.conn();
            std::thread::spawn(move || {
                let started = std::time::Instant::now();
                let answer = unseen(&mut con, &format!("new:{i}"), &["10"]);
                (answer, started.elapsed())
            })
        })
        .collect();
    for asker in askers {
        let (answer, took) = asker.join().unwrap();
        assert!(answer.is_err(), "a frozen store answered {answer:?}");
        let limit = bloomgate_server::gate::REPLY_TIMEOUT + Duration::from_secs(5);
        assert!(took < limit, "an error after {took:?}");
    }
    assert_eq!(record(&mut con, "1", &["11"]), 1, "a free worker took it");
    pg.thaw();
    let back = unseen_once_back(&mut con, "new:0", &["10"]);
    assert_eq!(back, Some(vec![1]), "the gate answers again after the thaw");
    assert_eq!(
        backlog_after_commits(&mut con),
        0,
        "the record made while frozen is committed"
    );
    assert_eq!(unseen(&mut con, "1", &["10", "11"]).unwrap(), vec![1, 0]);
    drop(con);
    server.shutdown();
}
