//! The exact store behind the gate: the source of truth for "scope saw item at time t".
//!
//! Filters are only an accelerator in front of it: they are built and rebuilt from `load`, and a
//! "maybe" is verified with `contains`. Served items reach it through the gate's background
//! recorder (`record_batch`, group commit); until their commit they sit in the gate's pending
//! overlay, which every exact answer and every filter build reads before the store, so neither a
//! filter nor an answer ever knows less than the store plus the overlay about the recent past.

pub(crate) mod postgres;
pub(crate) mod postgres_client;
pub(crate) mod postgres_partitions;
pub(crate) mod redis;
pub(crate) mod redis_pool;
pub(crate) mod sqlite;

use std::time::Duration;

use crate::Result;

/// One membership fact: the scope saw `item` at `at_ms` (milliseconds on the caller's clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    /// The item's id.
    pub item: u64,
    /// When it was (last) seen.
    pub at_ms: u64,
}

/// A store of (scope, item, last-seen time) rows. Implementations are shared by all request
/// threads (`&self`), so they pool their own connections.
pub trait ExactStore: Send + Sync {
    /// Appends to `out`, for each of `items`, whether `scope` saw it at or after `since` (ms).
    /// One round trip (one batch) per call.
    fn contains(&self, scope: u64, items: &[u64], since: u64, out: &mut Vec<bool>) -> Result<()>;
    /// Records that `scope` saw each item at its time; a later time replaces an earlier one, an
    /// earlier one never replaces a later one.
    fn record(&self, scope: u64, seen: &[Seen]) -> Result<()>;
    /// Records rows of many scopes at once (the gate's group commit): one transaction or one
    /// pipelined round trip per call where the store allows. Rows come sorted by (scope, item).
    fn record_batch(&self, rows: &[(u64, Seen)]) -> Result<()> {
        for run in rows.chunk_by(|a, b| a.0 == b.0) {
            let seen: Vec<Seen> = run.iter().map(|&(_, s)| s).collect();
            self.record(run[0].0, &seen)?;
        }
        Ok(())
    }
    /// Appends to `out` every item `scope` saw at or after `since_ms`, oldest first.
    fn load(&self, scope: u64, since_ms: u64, out: &mut Vec<Seen>) -> Result<()>;
    /// Drops every row last seen before `before_ms` (the retention schedule); returns how many.
    fn expire(&self, before_ms: u64) -> Result<u64>;
    /// A token that names this store's data: the same for as long as the data lives, different
    /// for a store created (or cleared) anew. Persisted filters are only trusted by a store with
    /// the identity they were written for; `None` (the default) means they never are.
    fn identity(&self) -> Result<Option<String>> {
        Ok(None)
    }
}

/// A token no other store will draw: 128 random bits from the standard library's per-process
/// random hasher keys, the time and the process id.
pub(crate) fn random_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let half = |salt: u64| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(now);
        h.write_u32(std::process::id());
        h.write_u64(salt);
        h.finish()
    };
    format!("{:016x}{:016x}", half(1), half(2))
}

/// A store that waits a fixed time before each call, to model a networked store's round trip
/// on top of a local one (`--store-latency-us`).
pub struct LatencyStore {
    inner: Box<dyn ExactStore>,
    delay: Duration,
}

impl LatencyStore {
    /// `inner`, with every call delayed by `delay` first.
    pub fn new(inner: Box<dyn ExactStore>, delay: Duration) -> Self {
        LatencyStore { inner, delay }
    }

    fn wait(&self) {
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
    }
}

impl ExactStore for LatencyStore {
    fn contains(&self, scope: u64, items: &[u64], since: u64, out: &mut Vec<bool>) -> Result<()> {
        self.wait();
        self.inner.contains(scope, items, since, out)
    }
    fn record(&self, scope: u64, seen: &[Seen]) -> Result<()> {
        self.wait();
        self.inner.record(scope, seen)
    }
    fn record_batch(&self, rows: &[(u64, Seen)]) -> Result<()> {
        self.wait();
        self.inner.record_batch(rows)
    }
    fn load(&self, scope: u64, since_ms: u64, out: &mut Vec<Seen>) -> Result<()> {
        self.wait();
        self.inner.load(scope, since_ms, out)
    }
    fn expire(&self, before_ms: u64) -> Result<u64> {
        self.wait();
        self.inner.expire(before_ms)
    }
    fn identity(&self) -> Result<Option<String>> {
        self.inner.identity()
    }
}
