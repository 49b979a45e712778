//! Shared test helpers: a throwaway SQLite store and a redis-server on a free local port.
#![allow(dead_code)] // each test binary uses a subset of the helpers

use bloomgate_gate::{ExactStore, Seen, SqliteStore};

pub fn sqlite_store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path().join("seen.db")).expect("open sqlite");
    (dir, store)
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

/// What a store call does: reads (`contains`, `load`), commits served items (`record`,
/// `record_batch`) or expires rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Read,
    Commit,
    Expire,
}

/// A SQLite store that runs `before` ahead of every call, which may fail it or hold it: a
/// store outage, or a store whose commits fall behind.
pub struct HookedStore<F> {
    pub inner: SqliteStore,
    pub before: F,
}

impl<F: Fn(Call) -> bloomgate_gate::Result<()> + Send + Sync> ExactStore for HookedStore<F> {
    fn contains(
        &self,
        scope: u64,
        items: &[u64],
        since: u64,
        out: &mut Vec<bool>,
    ) -> bloomgate_gate::Result<()> {
        (self.before)(Call::Read)?;
        self.inner.contains(scope, items, since, out)
    }
    fn record(&self, scope: u64, seen: &[Seen]) -> bloomgate_gate::Result<()> {
        (self.before)(Call::Commit)?;
        self.inner.record(scope, seen)
    }
    fn record_batch(&self, rows: &[(u64, Seen)]) -> bloomgate_gate::Result<()> {
        (self.before)(Call::Commit)?;
        self.inner.record_batch(rows)
    }
    fn load(&self, scope: u64, since: u64, out: &mut Vec<Seen>) -> bloomgate_gate::Result<()> {
        (self.before)(Call::Read)?;
        self.inner.load(scope, since, out)
    }
    fn expire(&self, before: u64) -> bloomgate_gate::Result<u64> {
        (self.before)(Call::Expire)?;
        self.inner.expire(before)
    }
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
