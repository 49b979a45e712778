//! The gate's promises: never shows an item seen within the retention window (whatever the
//! history, rotations and rebuilds), trust mode over-filters at the filter's FPR,
//! and a failing store is an error, never "unseen".

mod common;

use common::lifecycle;

use std::collections::HashMap;

use bloomgate_gate::{
    ExactStore, FilterMode, Gate, GateConfig, LifecycleConfig, Persistence, Policy, Seen,
    SqliteStore,
};
use bloomgate_testkit::gate::{Call, HookedStore};
use proptest::prelude::*;

fn gate(store: Box<dyn ExactStore>, policy: Policy, lifecycle: LifecycleConfig) -> Gate {
    let config = GateConfig {
        cache_capacity: 64,
        trust_sample_every: 3,
        ..GateConfig::new(policy, FilterMode::Local, lifecycle)
    };
    Gate::new(store, config).expect("valid config")
}

/// `PROPTEST_CASES` when set (to run the property tests longer), else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Clone, Debug)]
struct Step {
    advance_ms: u64,
    scope: u64,
    candidates: Vec<u64>,
    show: usize,
    expire: bool,
    /// Wait for queued filter builds and store writes first, so the step runs on the built
    /// filter and the committed store (without it, on whatever the background threads reached).
    flush: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (
        0u64..40,
        0u64..4,
        prop::collection::hash_set(0u64..60, 1..25),
        0usize..12,
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.5),
    )
        .prop_map(
            |(advance_ms, scope, candidates, show, expire, flush)| Step {
                advance_ms,
                scope,
                candidates: candidates.into_iter().collect(),
                show,
                expire,
                flush,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    /// Random histories (initial rows, then requests whose shown items are recorded), with time
    /// jumps that rotate generations, tiny capacities that force rebuilds and a tiny memory
    /// budget that evicts filters between and during builds: verify answers exactly,
    /// trust never lets a seen item through.
    #[test]
    fn gate_never_shows_a_seen_item(
        initial in prop::collection::vec((0u64..4, 0u64..60, 0u64..100), 0..80),
        steps in prop::collection::vec(step(), 1..60),
        generations in 2usize..5,
        min_capacity in 1u64..6,
        tiny_budget in any::<bool>(),
        trust in any::<bool>(),
    ) {
        let retention_ms = 100;
        let (_dir, store) = common::sqlite_store();
        let mut truth: HashMap<(u64, u64), u64> = HashMap::new();
        for &(scope, item, at) in &initial {
            store.record(scope, &[Seen { item, at_ms: at }]).unwrap();
            let last = truth.entry((scope, item)).or_insert(at);
            *last = (*last).max(at);
        }
        let budget = if tiny_budget { 1 } else { 1 << 30 };
        let policy = if trust { Policy::Trust } else { Policy::Verify };
        let gate = gate(Box::new(store), policy, lifecycle(retention_ms, generations, min_capacity, budget));
        let mut now = 100;
        for step in steps {
            now += step.advance_ms;
            if step.flush {
                gate.flush().unwrap();
            }
            if step.expire {
                gate.expire(now).unwrap();
            }
            let since = now - retention_ms;
            let verdict = gate.unseen(step.scope, &step.candidates, now).unwrap();
            let mut shown = Vec::new();
            for (&item, &may_show) in step.candidates.iter().zip(&verdict) {
                let seen = truth.get(&(step.scope, item)).is_some_and(|&at| at >= since);
                prop_assert!(!(seen && may_show), "seen item {} of scope {} shown at {}", item, step.scope, now);
                if policy == Policy::Verify {
                    prop_assert_eq!(may_show, !seen, "verify must be exact");
                }
                if may_show && shown.len() < step.show {
                    shown.push(item);
                }
            }
            gate.record(step.scope, &shown, now).unwrap();
            for item in shown {
                truth.insert((step.scope, item), now);
            }
        }
    }
}

/// How a step restarts the gate (on the same filter directory).
#[derive(Clone, Copy, Debug)]
enum Restart {
    None,
    /// Close (snapshot at shutdown) and reopen on the same store.
    Clean,
    /// A crash after a periodic snapshot: the snapshot on disk is the one taken at the last
    /// `Snapshot` step, the store has everything recorded since.
    Crash,
    /// Take a periodic snapshot now (the state a later `Crash` comes back to).
    Snapshot,
    /// Close, flip one byte of the snapshot, reopen: the file is refused, filters rebuilt.
    Damaged,
    /// Close and reopen on a new store (another identity) holding the same rows plus sightings
    /// the snapshot never saw: the snapshot is refused.
    NewStore,
}

fn restart() -> impl Strategy<Value = Restart> {
    prop_oneof![
        12 => Just(Restart::None),
        2 => Just(Restart::Clean),
        2 => Just(Restart::Snapshot),
        2 => Just(Restart::Crash),
        1 => Just(Restart::Damaged),
        1 => Just(Restart::NewStore),
    ]
}

fn persistent_gate(
    path: &std::path::Path,
    dir: &std::path::Path,
    policy: Policy,
    lifecycle: LifecycleConfig,
) -> Gate {
    let store = SqliteStore::open(path).unwrap();
    let config = GateConfig {
        cache_capacity: 64,
        trust_sample_every: 3,
        build_threads: 2,
        persistence: Some(Persistence {
            every: None,
            // The test's clock only moves forward: no slack, so the catch-up reads exactly what
            // came after each filter's high-water mark.
            clock_slack_ms: 0,
            ..Persistence::new(dir)
        }),
        ..GateConfig::new(policy, FilterMode::Local, lifecycle)
    };
    Gate::new(Box::new(store), config).expect("valid config")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(32), ..ProptestConfig::default() })]

    /// As `gate_never_shows_a_seen_item`, with the gate restarted at random steps on the same
    /// store and filter directory — cleanly, after a crash that loses everything since the last
    /// periodic snapshot (the store keeps it), with the snapshot damaged, or on a different store
    /// holding sightings the snapshot never saw: verify answers exactly, trust never lets a seen
    /// item through, whatever the snapshot on disk.
    #[test]
    fn gate_never_shows_a_seen_item_across_restarts(
        initial in prop::collection::vec((0u64..4, 0u64..60, 0u64..100), 0..60),
        steps in prop::collection::vec((step(), restart()), 1..50),
        generations in 2usize..5,
        min_capacity in 1u64..6,
        tiny_budget in any::<bool>(),
        trust in any::<bool>(),
    ) {
        let retention_ms = 100;
        let root = tempfile::tempdir().unwrap();
        let filters = root.path().join("filters");
        let mut stores = 0;
        let mut path = root.path().join("seen-0.db");
        let store = SqliteStore::open(&path).unwrap();
        let mut truth: HashMap<(u64, u64), u64> = HashMap::new();
        for &(scope, item, at) in &initial {
            store.record(scope, &[Seen { item, at_ms: at }]).unwrap();
            let last = truth.entry((scope, item)).or_insert(at);
            *last = (*last).max(at);
        }
        drop(store);
        let budget = if tiny_budget { 1 } else { 1 << 30 };
        let policy = if trust { Policy::Trust } else { Policy::Verify };
        let life = lifecycle(retention_ms, generations, min_capacity, budget);
        let mut gate = Some(persistent_gate(&path, &filters, policy, life.clone()));
        let snapshot = filters.join("filters.snapshot");
        let mut periodic: Option<Vec<u8>> = None;
        let mut now = 100;
        for (step, restart) in steps {
            now += step.advance_ms;
            match restart {
                Restart::None => {}
                Restart::Snapshot => {
                    gate.as_ref().unwrap().persist().unwrap();
                    periodic = std::fs::read(&snapshot).ok();
                }
                Restart::Clean | Restart::Crash | Restart::Damaged => {
                    gate.take().unwrap().close().unwrap();
                    match (restart, &periodic) {
                        (Restart::Crash, Some(bytes)) => std::fs::write(&snapshot, bytes).unwrap(),
                        (Restart::Damaged, _) => {
                            if let Ok(mut bytes) = std::fs::read(&snapshot) {
                                let at = (now as usize * 7919) % bytes.len();
                                bytes[at] ^= 0x10;
                                std::fs::write(&snapshot, bytes).unwrap();
                            }
                        }
                        _ => {}
                    }
                    gate = Some(persistent_gate(&path, &filters, policy, life.clone()));
                }
                Restart::NewStore => {
                    gate.take().unwrap().close().unwrap();
                    stores += 1;
                    path = root.path().join(format!("seen-{stores}.db"));
                    let store = SqliteStore::open(&path).unwrap();
                    // The same sightings, plus some the old store (and so the snapshot) never had.
                    for item in 60..63 {
                        let at = now.saturating_sub(item - 59);
                        truth.insert((step.scope, item), at);
                    }
                    for (&(scope, item), &at) in &truth {
                        store.record(scope, &[Seen { item, at_ms: at }]).unwrap();
                    }
                    gate = Some(persistent_gate(&path, &filters, policy, life.clone()));
                }
            }
            let g = gate.as_ref().unwrap();
            if step.flush {
                g.flush().unwrap();
            }
            if step.expire {
                g.expire(now).unwrap();
            }
            let since = now - retention_ms;
            let mut candidates = step.candidates.clone();
            candidates.extend(60..63);
            let verdict = g.unseen(step.scope, &candidates, now).unwrap();
            let mut shown = Vec::new();
            for (&item, &may_show) in candidates.iter().zip(&verdict) {
                let seen = truth.get(&(step.scope, item)).is_some_and(|&at| at >= since);
                prop_assert!(!(seen && may_show), "seen item {} of scope {} shown at {} ({:?})", item, step.scope, now, restart);
                if policy == Policy::Verify {
                    prop_assert_eq!(may_show, !seen, "verify must be exact ({:?})", restart);
                }
                if may_show && shown.len() < step.show && item < 60 {
                    shown.push(item);
                }
            }
            g.record(step.scope, &shown, now).unwrap();
            for item in shown {
                truth.insert((step.scope, item), now);
            }
        }
    }
}

/// A restarted gate answers from its snapshot at once: no history load beyond one catch-up
/// per scope, every restored filter caught up, and the snapshot refused (rebuilt from the store)
/// when the store is not the one it was written for.
#[test]
fn restart_restores_filters_and_refuses_another_stores_snapshot() {
    let root = tempfile::tempdir().unwrap();
    let (path, filters) = (root.path().join("seen.db"), root.path().join("filters"));
    let life = lifecycle(10_000, 3, 16, 1 << 30);
    let gate = persistent_gate(&path, &filters, Policy::Verify, life.clone());
    for scope in 0..20u64 {
        gate.record(scope, &[scope, scope + 100], 1_000).unwrap();
        gate.unseen(scope, &[1, 2, 3], 1_000).unwrap();
    }
    gate.close().unwrap();
    // Recorded by someone else after the snapshot (a crash window): the catch-up finds it.
    SqliteStore::open(&path)
        .unwrap()
        .record(
            5,
            &[Seen {
                item: 777,
                at_ms: 1_500,
            }],
        )
        .unwrap();
    let gate = persistent_gate(&path, &filters, Policy::Verify, life.clone());
    gate.flush().unwrap(); // the builders catch every restored filter up
    let m = gate.metrics();
    let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(count(&m.restored_filters), 20);
    assert_eq!(count(&m.catch_ups), 20);
    assert_eq!(count(&m.snapshots_refused), 0);
    assert_eq!(
        gate.unseen(5, &[5, 105, 777, 9], 2_000).unwrap(),
        [false, false, false, true]
    );
    // Only the "maybe" answers went to the exact path: the filter answered at once.
    assert_eq!(count(&m.exact_lookups), 3);
    gate.close().unwrap();

    // Another store (same rows and more) under the same directory: refused whole.
    let other = root.path().join("other.db");
    let store = SqliteStore::open(&other).unwrap();
    store
        .record(
            5,
            &[
                Seen {
                    item: 5,
                    at_ms: 1_000,
                },
                Seen {
                    item: 105,
                    at_ms: 1_000,
                },
                Seen {
                    item: 888,
                    at_ms: 900,
                },
            ],
        )
        .unwrap();
    drop(store);
    let gate = persistent_gate(&other, &filters, Policy::Trust, life);
    let m = gate.metrics();
    assert_eq!(count(&m.snapshots_refused), 1);
    assert_eq!(count(&m.restored_filters), 0);
    assert_eq!(
        gate.unseen(5, &[5, 105, 888, 9], 2_000).unwrap(),
        [false, false, false, true]
    );
}

/// Trust mode drops unseen items at the filter's false-positive rate, within sampling error,
/// and the gate's own sampled estimate agrees.
#[test]
fn trust_over_filter_rate_matches_filter_fpr() {
    let (_dir, store) = common::sqlite_store();
    // 20,000 rows in one window, capacity exactly that (headroom 1): that generation is full,
    // so the scope's FPR is about its per-generation rate (the others are empty).
    let history: Vec<Seen> = (0..20_000u64)
        .map(|item| Seen { item, at_ms: 1_000 })
        .collect();
    store.record(7, &history).unwrap();
    let lifecycle = LifecycleConfig {
        retention_ms: 10_000,
        generations: 2,
        fpr: 0.02,
        fpr_budget: 0.5,
        headroom: 1.0,
        min_items_per_generation: 1,
        memory_budget_bytes: 1 << 30,
    };
    let gate = gate(Box::new(store), Policy::Trust, lifecycle);
    let now = 2_000;
    // The first request queues the scope's filter build; wait for it so every request below is
    // answered by the filter, not the exact path.
    gate.unseen(7, &[], now).unwrap();
    gate.flush().unwrap();
    let mut dropped = 0u64;
    let mut unseen = 0u64;
    for request in 0..2_500u64 {
        let candidates: Vec<u64> = (0..120).map(|i| 1_000_000 + request * 120 + i).collect();
        let verdict = gate.unseen(7, &candidates, now).unwrap();
        dropped += verdict.iter().filter(|&&show| !show).count() as u64;
        unseen += candidates.len() as u64;
    }
    let rate = dropped as f64 / unseen as f64;
    let fpr = gate.scope_filter_fpr(7).expect("resident filter");
    // Binomial sampling error over 300,000 unseen candidates: σ = √(p(1−p)/n) ≈ 2.3e-4 at 1.6%;
    // allow 4σ plus 10% for the fill-based FPR estimate's own error.
    let sigma = (fpr * (1.0 - fpr) / unseen as f64).sqrt();
    assert!(
        fpr > 0.005 && fpr < 0.03,
        "filter FPR {fpr} out of the configured range"
    );
    assert!(
        (rate - fpr).abs() <= 4.0 * sigma + 0.1 * fpr,
        "over-filter rate {rate} vs filter FPR {fpr}"
    );
    let estimate = gate.metrics().trust_over_filter_estimate();
    // The estimate samples a third of the requests: 100,000 candidates.
    let sample_sigma = (fpr * (1.0 - fpr) / (unseen as f64 / 3.0)).sqrt();
    assert!(
        (estimate - rate).abs() <= 5.0 * sample_sigma,
        "sampled estimate {estimate} vs measured {rate}"
    );
}

/// A store that fails every call.
struct BrokenStore;

impl ExactStore for BrokenStore {
    fn contains(&self, _: u64, _: &[u64], _: u64, _: &mut Vec<bool>) -> bloomgate_gate::Result<()> {
        Err(bloomgate_gate::Error::InvalidConfig("store down".into()))
    }
    fn record(&self, _: u64, _: &[Seen]) -> bloomgate_gate::Result<()> {
        Err(bloomgate_gate::Error::InvalidConfig("store down".into()))
    }
    fn load(&self, _: u64, _: u64, _: &mut Vec<Seen>) -> bloomgate_gate::Result<()> {
        Err(bloomgate_gate::Error::InvalidConfig("store down".into()))
    }
    fn expire(&self, _: u64) -> bloomgate_gate::Result<u64> {
        Err(bloomgate_gate::Error::InvalidConfig("store down".into()))
    }
}

#[test]
fn store_errors_surface_as_errors_not_unseen() {
    for policy in [Policy::Exact, Policy::Verify, Policy::Trust] {
        let gate = gate(Box::new(BrokenStore), policy, lifecycle(100, 3, 8, 1 << 20));
        assert!(
            gate.unseen(1, &[1, 2, 3], 1_000).is_err(),
            "{policy:?}: lookup on a broken store"
        );
        // Recording is asynchronous: the failed commit surfaces at flush; it is not sticky (the
        // rows stay queued for the next attempt, and later records are still taken).
        assert_eq!(gate.record(1, &[1], 1_000).unwrap(), 1);
        assert!(gate.flush().is_err(), "{policy:?}: flush on a broken store");
        assert_eq!(gate.record(1, &[2], 1_000).unwrap(), 1);
        assert_eq!(
            gate.record_backlog(),
            2,
            "{policy:?}: both rows wait for the store"
        );
    }
    // A real SQLite failure mid-run: the table disappears under the gate.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seen.db");
    let store = bloomgate_gate::SqliteStore::open(&path).unwrap();
    store
        .record(
            1,
            &[Seen {
                item: 5,
                at_ms: 900,
            }],
        )
        .unwrap();
    let gate = gate(
        Box::new(store),
        Policy::Verify,
        lifecycle(1_000, 3, 8, 1 << 20),
    );
    assert_eq!(gate.unseen(1, &[5, 6], 1_000).unwrap(), vec![false, true]);
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("DROP TABLE seen")
        .unwrap();
    // Item 6 is a filter "definitely not"; item 5 is cached. A new scope needs a history load.
    assert!(
        gate.unseen(2, &[5], 1_000).is_err(),
        "load from a dropped table must fail"
    );
    gate.record(1, &[7], 1_000).unwrap();
    assert!(
        gate.flush().is_err(),
        "a commit into a dropped table must fail"
    );
}

#[test]
fn metrics_render_as_prometheus_text() {
    let (_dir, store) = common::sqlite_store();
    let gate = gate(
        Box::new(store),
        Policy::Verify,
        lifecycle(100, 3, 8, 1 << 20),
    );
    gate.record(1, &[1, 2], 10).unwrap();
    // First use on a cold gate (no costs measured yet): the request builds its scope's filter,
    // and only the filter's two "maybe" answers go to the exact path.
    gate.unseen(1, &[1, 2, 3], 20).unwrap();
    gate.flush().unwrap();
    gate.unseen(1, &[1, 2, 3], 20).unwrap();
    let text = gate.render_metrics();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (name, value) = line.rsplit_once(' ').expect("name value");
        assert!(
            !name.is_empty() && value.parse::<f64>().is_ok(),
            "bad sample line {line:?}"
        );
    }
    assert!(text.contains("bloomgate_gate_requests_total 2"));
    assert!(text.contains("bloomgate_gate_exact_lookups_total 4"));
    // The request builds its filter, or waits for a builder thread that claimed it first.
    let sample = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} sample"))
    };
    assert_eq!(
        sample("bloomgate_gate_builds_inline_total") + sample("bloomgate_gate_build_waits_total"),
        1.0
    );
    assert!(text.contains("bloomgate_gate_recorded_rows_total 2"));
    assert!(text.contains("bloomgate_gate_history_loads_total 1"));
    assert!(text.contains("bloomgate_gate_request_duration_seconds_bucket{le=\"+Inf\"} 2"));
    assert!(text.contains("bloomgate_gate_filters_resident 1"));
}

/// A SQLite store whose commits of served items wait until released: models a store that
/// falls behind the request path.
fn held_store(inner: bloomgate_gate::SqliteStore, held: Hold) -> impl ExactStore {
    HookedStore {
        inner,
        before: move |call| {
            if call == Call::Commit {
                let (held, released) = &*held;
                let mut held = held.lock().unwrap();
                while *held {
                    held = released.wait(held).unwrap();
                }
            }
            Ok(())
        },
    }
}

type Hold = std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>;

fn release(held: &Hold) {
    *held.0.lock().unwrap_or_else(|e| e.into_inner()) = false;
    held.1.notify_all();
}

struct Release(Hold);

impl Drop for Release {
    fn drop(&mut self) {
        release(&self.0);
    }
}

/// An item served is hidden from the scope's next request at once, while its store write is
/// still queued: through the cache, the pending overlay, filter builds from the overlay, and
/// rebuilds after eviction (a budget of one byte evicts every built filter).
#[test]
fn served_items_stay_hidden_before_their_commit() {
    for policy in [Policy::Exact, Policy::Verify, Policy::Trust] {
        let (_dir, inner) = common::sqlite_store();
        let held = std::sync::Arc::new((std::sync::Mutex::new(true), std::sync::Condvar::new()));
        let store = held_store(inner, held.clone());
        let config = GateConfig {
            cache_capacity: 1, // the cache forgets almost at once: the overlay must answer
            trust_sample_every: 2,
            ..GateConfig::new(policy, FilterMode::Local, lifecycle(1_000, 3, 4, 1))
        };
        let gate = Gate::new(Box::new(store), config).unwrap();
        // Dropped before the gate, also when an assertion fails: the gate's drop waits for
        // the recorder, which waits for the store.
        let _release = Release(held.clone());
        let mut now = 100;
        let mut shown: Vec<u64> = Vec::new();
        for round in 0..40u64 {
            let candidates: Vec<u64> = (0..30).collect();
            let verdict = gate.unseen(1, &candidates, now).unwrap();
            for (&item, &may_show) in candidates.iter().zip(&verdict) {
                assert!(
                    !(may_show && shown.contains(&item)),
                    "{policy:?}: item {item} shown again in round {round} before its commit"
                );
            }
            let next = (round % 30, (round * 7 + 3) % 30);
            let fresh: Vec<u64> = [next.0, next.1]
                .into_iter()
                .filter(|item| !shown.contains(item))
                .collect();
            gate.record(1, &fresh, now).unwrap();
            shown.extend(fresh);
            now += 3;
            std::thread::sleep(std::time::Duration::from_millis(1)); // let builds land
        }
        // Release the store: everything commits, and the answers stay the same.
        release(&held);
        gate.flush().unwrap();
        let candidates: Vec<u64> = (0..30).collect();
        let verdict = gate.unseen(1, &candidates, now).unwrap();
        for (&item, &may_show) in candidates.iter().zip(&verdict) {
            assert!(
                !(may_show && shown.contains(&item)),
                "{policy:?}: item {item} after commit"
            );
        }
        assert_eq!(
            gate.metrics()
                .recorded_rows
                .load(std::sync::atomic::Ordering::Relaxed),
            shown.len() as u64
        );
    }
}

/// Several request threads on the same few scopes, with background builds, rebuilds, evictions,
/// group commits and a cache small enough to evict constantly: an item whose `record` returned
/// before a request started is never shown by that request (verify and trust). Bounded: 4
/// threads × 400 requests per policy. (No expiry here: `expire` must not pass a time later
/// than every in-flight request's, which the demo ensures and this test would not.)
#[test]
fn concurrent_requests_never_show_an_item_recorded_before_them() {
    use rand::{rngs::SmallRng, RngExt, SeedableRng};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    for policy in [Policy::Verify, Policy::Trust] {
        let (_dir, store) = common::sqlite_store();
        let config = GateConfig {
            cache_capacity: 16,
            trust_sample_every: 0,
            ..GateConfig::new(policy, FilterMode::Local, lifecycle(100, 2, 2, 1))
        };
        let gate = Gate::new(Box::new(store), config).expect("valid config");
        let clock = AtomicU64::new(100);
        let truth: Mutex<HashMap<(u64, u64), u64>> = Mutex::new(HashMap::new());
        std::thread::scope(|threads| {
            for thread in 0..4u64 {
                let (gate, clock, truth) = (&gate, &clock, &truth);
                threads.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(thread);
                    for request in 0..400 {
                        let now = clock.fetch_add(rng.random_range(0..3), Ordering::SeqCst);
                        let scope = rng.random_range(0..3u64);
                        let candidates: Vec<u64> = {
                            let mut set: Vec<u64> =
                                (0..12).map(|_| rng.random_range(0..40u64)).collect();
                            set.sort_unstable();
                            set.dedup();
                            set
                        };
                        let known = truth.lock().unwrap().clone();
                        let verdict = gate.unseen(scope, &candidates, now).unwrap();
                        let since = now.saturating_sub(100);
                        let mut shown = Vec::new();
                        for (&item, &may_show) in candidates.iter().zip(&verdict) {
                            let seen = known.get(&(scope, item)).is_some_and(|&at| at >= since);
                            assert!(
                                !(seen && may_show),
                                "{policy:?}: thread {thread} request {request}: item {item} of \
                                 scope {scope} recorded at {:?} shown at {now}",
                                known.get(&(scope, item))
                            );
                            if may_show && shown.len() < 3 {
                                shown.push(item);
                            }
                        }
                        gate.record(scope, &shown, now).unwrap();
                        let mut truth = truth.lock().unwrap();
                        for item in shown {
                            let at = truth.entry((scope, item)).or_insert(now);
                            *at = (*at).max(now);
                        }
                    }
                });
            }
        });
    }
}

/// `stats` names the counters `GATE.INFO` and Python report: under verify every candidate is a
/// filter negative or a store lookup, and the policy reads back.
#[test]
fn stats_count_filter_negatives_and_store_lookups() {
    let (_dir, store) = common::sqlite_store();
    let gate = gate(
        Box::new(store),
        Policy::Verify,
        lifecycle(1_000_000, 3, 64, 1 << 20),
    );
    assert_eq!(gate.policy(), Policy::Verify);
    assert_eq!("verify".parse::<Policy>().unwrap(), Policy::Verify);
    assert_eq!(
        Policy::Trust.name().parse::<Policy>().unwrap(),
        Policy::Trust
    );
    assert!("Verify".parse::<Policy>().is_err());
    gate.record(1, &[1, 2, 3], 10).unwrap();
    gate.flush().unwrap();
    let candidates: Vec<u64> = (0..50).collect();
    for now in [20, 30] {
        gate.unseen(1, &candidates, now).unwrap();
        gate.flush().unwrap(); // the second request runs on the built filter
    }
    gate.flush().unwrap();
    let stats: HashMap<&str, u64> = gate.stats().into_iter().collect();
    assert_eq!(stats["requests"], 2);
    assert_eq!(stats["candidates"], 100);
    assert!(stats["store_lookups"] >= 6, "{stats:?}");
    // Under verify every candidate is one or the other, filtered or not.
    assert_eq!(
        stats["filter_negatives"] + stats["store_lookups"],
        stats["candidates"],
        "{stats:?}"
    );
    assert!(stats["filter_negatives"] >= 40, "{stats:?}");
    assert_eq!(stats["recorded_rows"], 3);
    let names: Vec<&str> = gate.stats().into_iter().map(|(name, _)| name).collect();
    assert_eq!(
        names[..4],
        [
            "requests",
            "candidates",
            "store_lookups",
            "filter_negatives"
        ]
    );
}
