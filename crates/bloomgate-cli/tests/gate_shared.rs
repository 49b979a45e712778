//! Remote filters with shared pending rows (`pending=shared`, the default) on a real
//! redis-server running the module: several gates over one store and one filter server — each
//! `Gate` with state of its own, as separate processes have — never show an item another one
//! recorded, before its group commit as after; a server that goes away makes requests fail
//! (never answer "unseen" without it) and, once it is back, the same gates work again; `wait=1`
//! fails a record no replica acknowledged; a server without Lua is refused with advice.
//!
//! Needs `redis-server` (Debian's, or `BLOOMGATE_REDIS_SERVER`) and the module built
//! (`cargo build -p bloomgate-module`, which `.ci/run` does first): without them each test is
//! skipped, or fails under `BLOOMGATE_NO_SKIP=1`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bloomgate_gate::{
    FilterMode, Gate, GateConfig, LifecycleConfig, Policy, SqliteStore, Timeouts,
};
use bloomgate_testkit::gate::{checked_request, Call, HookedStore, Shown};
use bloomgate_testkit::temp_dir;

/// The module built beside this test binary (`BLOOMGATE_MODULE` overrides).
fn module_path() -> PathBuf {
    if let Ok(path) = std::env::var("BLOOMGATE_MODULE") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .and_then(Path::parent)
        .unwrap()
        .join("libbloomgate_module.so")
}

/// Whether redis-server and the module are here; if not, `skip_or_fail` for `test` (a failure
/// under CI's `BLOOMGATE_NO_SKIP=1`).
fn ready(test: &str) -> bool {
    if !bloomgate_testkit::have_redis_server(test) {
        return false;
    }
    let module = module_path();
    if !module.exists() {
        bloomgate_testkit::skip_or_fail(
            test,
            &format!(
                "{} is missing (cargo build -p bloomgate-module)",
                module.display()
            ),
        );
        return false;
    }
    true
}

/// redis-server with the module on `port` (127.0.0.1, no persistence), killed on drop.
struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    fn start(dir: &Path, port: u16, extra: &[&str]) -> Redis {
        let child = Command::new(bloomgate_testkit::redis_server_binary())
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(dir)
            .arg("--logfile")
            .arg(dir.join(format!("redis-{port}.log")))
            .arg("--loadmodule")
            .arg(module_path())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (.ci/setup installs it)");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !bloomgate_testkit::ping(port, None) {
            assert!(
                Instant::now() < deadline,
                "redis-server on {port} did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Redis { child, port }
    }

    fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lifecycle(memory_budget_bytes: u64) -> LifecycleConfig {
    LifecycleConfig {
        fpr_budget: 0.05,
        memory_budget_bytes,
        ..LifecycleConfig::new(60_000, 3)
    }
}

/// A gate on the store file `db` and the filters at `url`, its commits taking `delay`.
fn gate(url: &str, db: &Path, policy: Policy, delay: Duration, budget: u64) -> Gate {
    let store = HookedStore {
        inner: SqliteStore::open(db).unwrap(),
        before: move |call| {
            if call == Call::Commit {
                std::thread::sleep(delay);
            }
            Ok(())
        },
    };
    let filters = FilterMode::Remote {
        url: url.to_owned(),
        key_prefix: "shared:".into(),
    };
    let config = GateConfig {
        cache_capacity: 10_000,
        trust_sample_every: 0,
        timeouts: Timeouts {
            connect: Duration::from_millis(500),
            io: Duration::from_millis(500),
        },
        ..GateConfig::new(policy, filters, lifecycle(budget))
    };
    Gate::new(Box::new(store), config).unwrap()
}

#[test]
fn a_record_on_one_gate_hides_the_item_on_every_gate_before_its_commit() {
    if !ready("a_record_on_one_gate_hides_the_item_on_every_gate_before_its_commit") {
        return;
    }
    let dir = temp_dir("gate-shared-pending");
    let redis = Redis::start(&dir, bloomgate_testkit::free_port(), &[]);
    let url = format!("resp://127.0.0.1:{}", redis.port);
    for (i, policy) in [Policy::Verify, Policy::Trust].into_iter().enumerate() {
        let db = dir.join(format!("seen-{i}.db"));
        let slow = gate(&url, &db, policy, Duration::from_millis(800), 1 << 30);
        let others = [
            gate(&url, &db, policy, Duration::ZERO, 1 << 30),
            gate(&url, &db, policy, Duration::ZERO, 1 << 30),
        ];
        let scope = 10 + i as u64;
        let now = 1_000_000;
        assert_eq!(others[0].unseen(scope, &[1, 2, 3], now).unwrap(), [true; 3]);
        assert_eq!(slow.record(scope, &[1, 2], now).unwrap(), 2);
        // The commit sleeps: the rows are pending on the server, where every gate finds them.
        let pending: u64 = redis::cmd("HLEN")
            .arg(format!("shared:{{{scope}}}:p"))
            .query(&mut redis.conn())
            .unwrap();
        assert_eq!(pending, 2, "{policy:?}");
        for g in &others {
            assert_eq!(
                g.unseen(scope, &[1, 2, 3], now + 1).unwrap(),
                [false, false, true]
            );
        }
        slow.flush().unwrap();
        // Committed: in the store and in the filter, out of the pending hash.
        let exists: u64 = redis::cmd("EXISTS")
            .arg(format!("shared:{{{scope}}}:p"))
            .query(&mut redis.conn())
            .unwrap();
        assert_eq!(exists, 0, "{policy:?}: the pending hash is emptied");
        for g in others.iter().chain([&slow]) {
            assert_eq!(
                g.unseen(scope, &[1, 2, 3], now + 2).unwrap(),
                [false, false, true]
            );
        }
        // A fresh gate finds the filter (no history load) and answers the same.
        let fresh = gate(&url, &db, policy, Duration::ZERO, 1 << 30);
        assert_eq!(
            fresh.unseen(scope, &[1, 2, 3], now + 3).unwrap(),
            [false, false, true]
        );
        assert_eq!(fresh.metrics().history_loads.load(Relaxed), 0, "{policy:?}");
    }
}

/// Threads send requests to three gates at random, with a tiny memory budget (scopes
/// forgotten and found again), commits that take a while and filters deleted under them (as
/// their expiry or the server's eviction would: built again by whichever gate comes next): an
/// item whose `record` returned before a request started is never shown by it.
#[test]
fn gates_sharing_filters_never_show_an_item_recorded_before_the_request() {
    if !ready("gates_sharing_filters_never_show_an_item_recorded_before_the_request") {
        return;
    }
    use rand::{rngs::SmallRng, RngExt, SeedableRng};
    use std::sync::atomic::AtomicU64;

    let dir = temp_dir("gate-shared-concurrent");
    let redis = Redis::start(&dir, bloomgate_testkit::free_port(), &[]);
    let url = format!("resp://127.0.0.1:{}", redis.port);
    for (i, policy) in [Policy::Verify, Policy::Trust].into_iter().enumerate() {
        let db = dir.join(format!("seen-{i}.db"));
        let gates: Vec<Gate> = (0..3)
            .map(|g| gate(&url, &db, policy, Duration::from_millis(g * 20), 600))
            .collect();
        let base = 100 * i as u64;
        let clock = AtomicU64::new(1_000_000);
        let truth = Shown::default();
        let running = std::sync::atomic::AtomicBool::new(true);
        let deleted = AtomicU64::new(0);
        std::thread::scope(|threads| {
            let (running, deleted, redis) = (&running, &deleted, &redis);
            threads.spawn(move || {
                let mut conn = redis.conn();
                let mut rng = SmallRng::seed_from_u64(99);
                while running.load(Relaxed) {
                    let key = format!("shared:{{{}}}", base + rng.random_range(0..6u64));
                    let gone: u64 = redis::cmd("DEL").arg(key).query(&mut conn).unwrap();
                    deleted.fetch_add(gone, Relaxed);
                    std::thread::sleep(Duration::from_millis(5));
                }
            });
            let mut workers = Vec::new();
            for thread in 0..4u64 {
                let (gates, clock, truth) = (&gates, &clock, &truth);
                workers.push(threads.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(thread + 10 * i as u64);
                    for request in 0..200 {
                        let now = clock.fetch_add(rng.random_range(0..3), Relaxed);
                        let scope = base + rng.random_range(0..6u64);
                        let ask = &gates[rng.random_range(0..3usize)];
                        let record_on = &gates[rng.random_range(0..3usize)];
                        let candidates = (0..12).map(|_| rng.random_range(0..60u64)).collect();
                        checked_request(
                            ask,
                            record_on,
                            truth,
                            scope,
                            candidates,
                            now,
                            format_args!("{policy:?}: thread {thread} request {request}"),
                        );
                    }
                }));
            }
            let results: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
            running.store(false, Relaxed);
            for result in results {
                if let Err(panic) = result {
                    std::panic::resume_unwind(panic);
                }
            }
        });
        let evictions: u64 = gates
            .iter()
            .map(|g| g.metrics().evictions.load(Relaxed))
            .sum();
        assert!(evictions > 0, "{policy:?}: no scope forgotten");
        assert!(deleted.load(Relaxed) > 0, "{policy:?}: no filter deleted");
        // Under verify, no answer is an over-filtered one: every "seen" was recorded.
        if policy == Policy::Verify {
            let now = clock.load(Relaxed);
            let truth = truth.lock().unwrap();
            for scope in base..base + 6 {
                let items: Vec<u64> = (0..60).collect();
                let verdict = gates[0].unseen(scope, &items, now).unwrap();
                for (item, unseen) in items.into_iter().zip(verdict) {
                    assert_eq!(
                        unseen,
                        !truth.contains_key(&(scope, item)),
                        "scope {scope} item {item}"
                    );
                }
            }
        }
    }
}

/// The filter server goes away: probes and records answer errors (the pending rows of the
/// other gates are there alone), nothing is answered "unseen" without it; when a server is
/// back on the address (empty: it kept nothing), the same gates build the filters again from
/// the store and answer exactly.
#[test]
fn a_filter_server_that_goes_away_answers_errors_and_works_again_when_back() {
    if !ready("a_filter_server_that_goes_away_answers_errors_and_works_again_when_back") {
        return;
    }
    let dir = temp_dir("gate-shared-outage");
    let port = bloomgate_testkit::free_port();
    let redis = Redis::start(&dir, port, &[]);
    let url = format!("resp://127.0.0.1:{port}");
    let db = dir.join("seen.db");
    let a = gate(&url, &db, Policy::Verify, Duration::ZERO, 1 << 30);
    let b = gate(&url, &db, Policy::Verify, Duration::ZERO, 1 << 30);
    assert_eq!(a.record(1, &[5, 6], 1_000).unwrap(), 2);
    a.flush().unwrap();
    assert_eq!(
        b.unseen(1, &[5, 6, 7], 1_001).unwrap(),
        [false, false, true]
    );
    drop(redis);
    assert!(
        b.unseen(1, &[5, 6, 7], 1_002).is_err(),
        "answered without the server"
    );
    assert!(
        a.record(1, &[7], 1_002).is_err(),
        "recorded without the server"
    );
    let errors = b.metrics().filter_errors.load(Relaxed);
    assert!(errors >= 1);
    let _back = Redis::start(&dir, port, &[]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let verdict = loop {
        match b.unseen(1, &[5, 6, 7, 8], 2_000) {
            Ok(verdict) => break verdict,
            Err(e) => assert!(Instant::now() < deadline, "still failing: {e}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(verdict, [false, false, true, true]);
    assert_eq!(a.record(1, &[7], 2_001).unwrap(), 1);
    assert_eq!(
        b.unseen(1, &[5, 7, 8], 2_002).unwrap(),
        [false, false, true]
    );
}

/// `wait=1`: a record is acknowledged once a replica has the pending rows; without a replica
/// it fails (the rows may still be on the master, hiding the items: a retry is harmless).
#[test]
fn wait_makes_a_record_fail_without_a_replica() {
    if !ready("wait_makes_a_record_fail_without_a_replica") {
        return;
    }
    let dir = temp_dir("gate-shared-wait");
    let master = Redis::start(&dir, bloomgate_testkit::free_port(), &[]);
    let replica_dir = dir.join("replica");
    std::fs::create_dir_all(&replica_dir).unwrap();
    let replica = Redis::start(
        &replica_dir,
        bloomgate_testkit::free_port(),
        &["--replicaof", "127.0.0.1", &master.port.to_string()],
    );
    let url = format!("resp://127.0.0.1:{}?wait=1&wait_timeout=300", master.port);
    let g = gate(
        &url,
        &dir.join("seen.db"),
        Policy::Verify,
        Duration::ZERO,
        1 << 30,
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while g.record(3, &[1], 1_000).is_err() {
        assert!(Instant::now() < deadline, "the replica never acknowledged");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(g.record(3, &[2], 1_001).unwrap(), 1);
    drop(replica);
    let err = g.record(3, &[3], 1_002).unwrap_err().to_string();
    assert!(err.contains("0 of 1 replicas"), "{err}");
    assert_eq!(
        g.unseen(3, &[1, 2, 3, 4], 1_003).unwrap(),
        [false, false, false, true]
    );
}

/// `bloomgate serve` runs no Lua: shared pending rows are refused there, with the way out.
#[test]
fn shared_pending_rows_need_a_server_with_scripts() {
    let dir = temp_dir("gate-shared-serve");
    let server =
        bloomgate_testkit::server::Server::binary(env!("CARGO_BIN_EXE_bloomgate"), &dir, &[]);
    let store = SqliteStore::open(dir.join("seen.db")).unwrap();
    let filters = FilterMode::Remote {
        url: format!("resp://127.0.0.1:{}", server.port),
        key_prefix: "x:".into(),
    };
    let Err(err) = Gate::new(
        Box::new(store),
        GateConfig::new(Policy::Verify, filters, lifecycle(1 << 20)),
    ) else {
        panic!("shared pending rows on a server without scripts");
    };
    assert!(err.to_string().contains("add pending=local"), "{err}");
    server.kill9();
}

/// Two `bloomgate serve --gate-filters resp://…` over one store: a `GATE.RECORD` on one is
/// answered seen by the other at once; `GATE.INFO` names the filters, and serve counts none of
/// their bytes as its own memory.
#[test]
fn two_serve_gates_share_their_filters() {
    if !ready("two_serve_gates_share_their_filters") {
        return;
    }
    let dir = temp_dir("gate-shared-serve-two");
    let redis = Redis::start(&dir, bloomgate_testkit::free_port(), &[]);
    let store = format!("sqlite:{}", dir.join("seen.db").display());
    let filters = format!("resp://127.0.0.1:{}", redis.port);
    let gates: Vec<_> = (0..2)
        .map(|i| {
            let d = dir.join(format!("gate-{i}"));
            std::fs::create_dir_all(&d).unwrap();
            bloomgate_testkit::server::Server::binary(
                env!("CARGO_BIN_EXE_bloomgate"),
                &d,
                &["--gate-store", &store, "--gate-filters", &filters],
            )
        })
        .collect();
    let (mut a, mut b) = (gates[0].conn(), gates[1].conn());
    let unseen = |c: &mut redis::Connection, items: &[&str]| -> Vec<i64> {
        redis::cmd("GATE.UNSEEN")
            .arg("user:1")
            .arg(items)
            .query(c)
            .unwrap()
    };
    assert_eq!(unseen(&mut b, &["a", "b", "c"]), [1, 1, 1]);
    let taken: i64 = redis::cmd("GATE.RECORD")
        .arg("user:1")
        .arg(&["a", "b"])
        .query(&mut a)
        .unwrap();
    assert_eq!(taken, 2);
    assert_eq!(unseen(&mut b, &["a", "b", "c"]), [0, 0, 1]);
    let info: Vec<redis::Value> = redis::cmd("GATE.INFO").query(&mut b).unwrap();
    let text: Vec<String> = info
        .iter()
        .map(|v| redis::from_redis_value::<String>(v.clone()).unwrap_or_default())
        .collect();
    let at = text.iter().position(|t| t == "filters").unwrap();
    assert_eq!(text[at + 1], filters);
    let memory: String = redis::cmd("INFO").arg("memory").query(&mut b).unwrap();
    assert!(memory.contains("used_memory_gate:0\r\n"), "{memory}");
    let kind: String = redis::cmd("TYPE")
        .arg(format!(
            "bloomgate:gate:bf:{{{}}}",
            bloomgate_gate::item_id(b"user:1")
        ))
        .query(&mut redis.conn())
        .unwrap();
    assert_eq!(kind, "BGwindowF");
    for gate in gates {
        gate.kill9();
    }
}
