//! The gate's remote mode against a real `bloomgate serve`: one WF.* filter per scope, probed
//! and written with the gate's own (simulated) clock, evicted beyond the memory budget — and no
//! item a scope was shown ever answers "unseen" within the retention, before or after eviction.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use bloomgate_gate::{
    FilterMode, Gate, GateConfig, LifecycleConfig, Policy, SqliteStore, Timeouts,
};
use bloomgate_testkit::server::Server;
use bloomgate_testkit::temp_dir;

fn gate(port: u16, dir: &std::path::Path, memory_budget_bytes: u64, policy: Policy) -> Gate {
    gate_with(port, dir, memory_budget_bytes, policy, Timeouts::default())
}

fn gate_with(
    port: u16,
    dir: &std::path::Path,
    memory_budget_bytes: u64,
    policy: Policy,
    timeouts: Timeouts,
) -> Gate {
    let store = SqliteStore::open(dir.join("seen.db")).unwrap();
    let filters = FilterMode::Remote {
        url: format!("resp://127.0.0.1:{port}?pending=local"),
        key_prefix: "seen:".into(),
    };
    let lifecycle = LifecycleConfig {
        fpr_budget: 0.05,
        memory_budget_bytes,
        ..LifecycleConfig::new(10_000, 3)
    };
    let config = GateConfig {
        cache_capacity: 0,
        trust_sample_every: 0,
        timeouts,
        ..GateConfig::new(policy, filters, lifecycle)
    };
    Gate::new(Box::new(store), config).unwrap()
}

#[test]
fn shown_items_stay_seen_through_eviction_and_expire_after_retention() {
    let dir = temp_dir("gate-remote");
    let server = Server::binary(
        env!("CARGO_BIN_EXE_bloomgate"),
        &dir,
        &["--appendfsync", "always"],
    );
    // A budget of a few scopes' filters: the 30 scopes below force evictions.
    let g = gate(server.port, &dir, 5_000, Policy::Trust);
    let scopes = 30u64;
    let mut now = 1_000_000u64;
    for round in 0..80u64 {
        for scope in 0..scopes {
            let items = [round * 1000 + scope, round * 1000 + scope + 500];
            g.unseen(scope, &items, now).unwrap(); // a request: loads the scope's filter
            g.record(scope, &items, now).unwrap();
        }
        now += 50;
    }
    g.flush().unwrap();
    let evictions = g
        .metrics()
        .evictions
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(evictions > 0, "the budget evicted nothing");
    // The scope's filter is a WF value on the server (a request loads it first: the budget
    // may have evicted it in any batch, depending on how the recorder's batches fell).
    g.unseen(29, &[], now).unwrap();
    let mut con = server.conn();
    let kind: String = redis::cmd("TYPE").arg("seen:{29}").query(&mut con).unwrap();
    assert_eq!(kind, "BGwindowF");
    // Every shown item still reads as seen (trust mode: the filter alone decides), whether its
    // scope's filter stayed on the server or was evicted and is reloaded from the store now.
    for scope in 0..scopes {
        let items: Vec<u64> = (0..80u64)
            .flat_map(|round| [round * 1000 + scope, round * 1000 + scope + 500])
            .collect();
        let unseen = g.unseen(scope, &items, now).unwrap();
        assert!(
            unseen.iter().all(|u| !u),
            "scope {scope}: a shown item reads unseen"
        );
    }
    // Past the retention (plus a window), the filter no longer holds them.
    let later = now + 10_000 + 5_000 + 1;
    let unseen = g.unseen(29, &[29, 529], later).unwrap();
    assert_eq!(unseen, [true, true]);
    drop(g);
    server.kill9();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The filter server stops answering (open connections, no replies): every request falls back
/// to the exact path after the read timeout — exact answers under verify and trust, counted as
/// filter errors — and writes that timed out make their scopes reload from the store once the
/// server answers again, so nothing recorded meanwhile is ever answered "unseen".
#[test]
fn a_hung_filter_server_sends_requests_to_the_store() {
    let dir = temp_dir("gate-remote-hung");
    let server = Server::binary(env!("CARGO_BIN_EXE_bloomgate"), &dir, &[]);
    let proxy = bloomgate_testkit::FreezableProxy::start(([127, 0, 0, 1], server.port).into());
    let timeouts = Timeouts {
        connect: Duration::from_millis(500),
        io: Duration::from_millis(200),
    };
    for (i, policy) in [Policy::Verify, Policy::Trust].into_iter().enumerate() {
        let scope = i as u64 + 1; // a key of its own: the server keeps the other's
        let dir = dir.join(format!("{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let g = gate_with(proxy.port, &dir, 1 << 30, policy, timeouts);
        g.record(scope, &[10, 11], 1_000).unwrap();
        g.flush().unwrap();
        assert_eq!(
            g.unseen(scope, &[10, 11, 12], 1_000).unwrap(),
            [false, false, true]
        );
        proxy.freeze(true);
        // Answered by the store; the items recorded now reach the store, not the filter.
        assert_eq!(
            g.unseen(scope, &[10, 11, 12], 1_100).unwrap(),
            [false, false, true]
        );
        g.record(scope, &[12], 1_100).unwrap();
        g.flush().unwrap();
        assert_eq!(
            g.unseen(scope, &[10, 12, 13], 1_200).unwrap(),
            [false, false, true]
        );
        assert!(g.metrics().filter_errors.load(Relaxed) >= 2, "{policy:?}");
        proxy.freeze(false);
        // The scope whose write timed out is reloaded from the store: 12 reads seen.
        assert_eq!(
            g.unseen(scope, &[10, 12, 13], 1_300).unwrap(),
            [false, false, true]
        );
        let errors = g.metrics().filter_errors.load(Relaxed);
        assert_eq!(g.unseen(scope, &[11, 14], 1_300).unwrap(), [false, true]);
        assert_eq!(
            g.metrics().filter_errors.load(Relaxed),
            errors,
            "{policy:?}: server back"
        );
    }
    drop(proxy);
    server.kill9();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Several request threads on a few scopes with remote filters: writes trail the requests
/// (batched by the recorder), a tiny memory budget evicts filters under probes in flight, and
/// yet an item whose `record` returned before a request started is never shown by it.
#[test]
fn concurrent_requests_on_remote_filters_never_show_an_item_recorded_before_them() {
    use bloomgate_testkit::gate::{checked_request, Shown};
    use rand::{rngs::SmallRng, RngExt, SeedableRng};
    use std::sync::atomic::AtomicU64;

    let dir = temp_dir("gate-remote-concurrent");
    let server = Server::binary(env!("CARGO_BIN_EXE_bloomgate"), &dir, &[]);
    for (i, policy) in [Policy::Verify, Policy::Trust].into_iter().enumerate() {
        let dir = dir.join(format!("{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        // Keys of their own per policy: the server keeps the other run's.
        let g = gate_with(server.port, &dir, 600, policy, Timeouts::default());
        let base = 100 * i as u64;
        let clock = AtomicU64::new(1_000_000);
        let truth = Shown::default();
        std::thread::scope(|threads| {
            for thread in 0..4u64 {
                let (g, clock, truth) = (&g, &clock, &truth);
                threads.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(thread);
                    for request in 0..300 {
                        let now = clock.fetch_add(rng.random_range(0..3), Relaxed);
                        let scope = base + rng.random_range(0..6u64);
                        let candidates = (0..12).map(|_| rng.random_range(0..40u64)).collect();
                        checked_request(
                            g,
                            g,
                            truth,
                            scope,
                            candidates,
                            now,
                            format_args!("{policy:?}: thread {thread} request {request}"),
                        );
                    }
                });
            }
        });
        assert!(
            g.metrics().evictions.load(Relaxed) > 0,
            "{policy:?}: no eviction"
        );
    }
    server.kill9();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The local and the remote filters age items the same way: the same records at the same
/// (simulated) times answer the same at every later probe, through every item's expiry (both
/// are the core's windowed filter: aligned slots of W, G generations).
#[test]
fn local_and_remote_filters_age_items_the_same_way() {
    let dir = temp_dir("gate-aging");
    let server = Server::binary(env!("CARGO_BIN_EXE_bloomgate"), &dir, &[]);
    let make = |name: &str, filters: FilterMode| {
        let store = SqliteStore::open(dir.join(format!("{name}.db"))).unwrap();
        let lifecycle = LifecycleConfig {
            retention_ms: 10_000,
            generations: 3,
            fpr: 1e-6,
            fpr_budget: 1e-3,
            headroom: 1.5,
            min_items_per_generation: 64,
            memory_budget_bytes: 1 << 30,
        };
        let config = GateConfig {
            cache_capacity: 0,
            trust_sample_every: 0,
            ..GateConfig::new(Policy::Trust, filters, lifecycle)
        };
        Gate::new(Box::new(store), config).unwrap()
    };
    let local = make("local", FilterMode::Local);
    let remote = make(
        "remote",
        FilterMode::Remote {
            url: format!("resp://127.0.0.1:{}?pending=local", server.port),
            key_prefix: "aging:".into(),
        },
    );
    let (scope, start) = (7u64, 1_000_123u64);
    // The local filter is built before the records, so every record goes into it live.
    for g in [&local, &remote] {
        g.unseen(scope, &[u64::MAX], start).unwrap();
        g.flush().unwrap();
    }
    let mut items = Vec::new();
    let mut now = start;
    for step in 0..60u64 {
        let batch: Vec<u64> = (0..4).map(|i| step * 10 + i).collect();
        for g in [&local, &remote] {
            g.record(scope, &batch, now).unwrap();
        }
        items.extend(batch);
        now += 400;
    }
    for g in [&local, &remote] {
        g.flush().unwrap();
    }
    let mut expired_seen = false;
    for probe in (now..now + 20_000).step_by(250) {
        let a = local.unseen(scope, &items, probe).unwrap();
        let b = remote.unseen(scope, &items, probe).unwrap();
        assert_eq!(a, b, "local and remote differ at {probe}");
        expired_seen |= a.iter().any(|&u| u) && a.iter().any(|&u| !u);
    }
    assert!(expired_seen, "the probes crossed some items' expiry");
    let last = local.unseen(scope, &items, now + 20_000).unwrap();
    assert!(last.iter().all(|&u| u), "all expired after G windows");
    drop((local, remote));
    server.kill9();
    let _ = std::fs::remove_dir_all(&dir);
}
