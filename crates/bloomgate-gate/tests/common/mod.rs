//! Shared test helpers: a throwaway SQLite store, a redis-server on a free local port, the
//! lifecycle of a test gate. The hooked store is the testkit's (`bloomgate_testkit::gate`).
#![allow(dead_code)] // each test binary uses a subset of the helpers

use bloomgate_gate::{ExactStore, LifecycleConfig, Seen, SqliteStore};

pub fn sqlite_store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path().join("seen.db")).expect("open sqlite");
    (dir, store)
}

/// Retention `retention_ms` in `generations` filters of at least `min_capacity` items each,
/// under a memory budget of `memory_budget_bytes`.
pub fn lifecycle(
    retention_ms: u64,
    generations: usize,
    min_capacity: u64,
    memory_budget_bytes: u64,
) -> LifecycleConfig {
    LifecycleConfig {
        min_items_per_generation: min_capacity,
        memory_budget_bytes,
        ..LifecycleConfig::new(retention_ms, generations)
    }
}

/// A redis-server child bound to 127.0.0.1 on a free port, killed on drop (then its
/// directory removed).
pub struct RedisServer {
    _process: bloomgate_testkit::Process,
    _dir: tempfile::TempDir,
    pub url: String,
}

/// Starts Debian's redis-server, or returns None (with a message) if it is not installed.
pub fn start_redis(test: &str) -> Option<RedisServer> {
    if !bloomgate_testkit::have_redis_server(test) {
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let process = bloomgate_testkit::redis_server(dir.path(), |_| {})
        .unwrap_or_else(|log| panic!("redis-server did not start: {log}"));
    Some(RedisServer {
        url: format!("redis://127.0.0.1:{}", process.port),
        _process: process,
        _dir: dir,
    })
}

/// `store.contains` of `items`, its answers.
pub fn contains(store: &dyn ExactStore, scope: u64, items: &[u64], since: u64) -> Vec<bool> {
    let mut out = Vec::new();
    store.contains(scope, items, since, &mut out).unwrap();
    out
}

/// `store.load` from `since`, sorted by time then item (equal times may come back in either
/// order).
pub fn load(store: &dyn ExactStore, scope: u64, since: u64) -> Vec<Seen> {
    let mut out = Vec::new();
    store.load(scope, since, &mut out).unwrap();
    out.sort_by_key(|s| (s.at_ms, s.item));
    out
}

/// 1 to 9 random rows, items below `items`, served up to `age` ms before `now`.
pub fn random_seen(rng: &mut impl rand::RngExt, now: u64, items: u64, age: u64) -> Vec<Seen> {
    (0..rng.random_range(1..10))
        .map(|_| Seen {
            item: rng.random_range(0..items),
            at_ms: now - rng.random_range(0..age),
        })
        .collect()
}
