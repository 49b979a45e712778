//! What the request path, the filter back-ends and the background threads (recorder, builders)
//! share: the exact store, the LRU cache, the pending overlay and the metrics.
//!
//! [`Core`] is the one place that talks to the store. It answers the exact path
//! ([`Core::exact_seen`]), loads a scope's history for filter builds ([`HistorySource`]) and
//! commits the recorder's batches ([`Core::commit`]), keeping the cache and the overlay consistent
//! with the store and counting every call in the metrics.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use crate::exact::cache::{SeenCache, Ticket};
use crate::exact::pending::Pending;
use crate::filters::HistorySource;
use crate::{ExactStore, Metrics, Result, Seen};

/// The exact side of the gate: store, cache, overlay, metrics.
pub(crate) struct Core {
    retention_ms: u64,
    store: Box<dyn ExactStore>,
    cache: SeenCache,
    pending: Pending,
    metrics: Arc<Metrics>,
    /// Other processes record into the same scopes (filters that share pending rows): a
    /// "not seen" answer of the store may be wrong a moment later, so it is not cached.
    shared: AtomicBool,
}

impl Core {
    pub fn new(
        store: Box<dyn ExactStore>,
        retention_ms: u64,
        cache_capacity: usize,
        metrics: Arc<Metrics>,
    ) -> Self {
        Core {
            retention_ms,
            store,
            cache: SeenCache::new(cache_capacity),
            pending: Pending::new(),
            metrics,
            shared: AtomicBool::new(false),
        }
    }

    /// Other gate processes record into the same scopes from now on: the store's "not seen"
    /// answers are no longer cached.
    pub fn share_scopes(&self) {
        self.shared.store(true, Relaxed);
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn store(&self) -> &dyn ExactStore {
        &*self.store
    }

    /// Start of the retention window at `now_ms`.
    pub fn since(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.retention_ms)
    }

    /// Store call with its latency recorded.
    pub fn timed<T>(&self, call: impl FnOnce() -> Result<T>) -> Result<T> {
        let started = Instant::now();
        let result = call();
        self.metrics.store_latency.observe(started.elapsed());
        result
    }

    /// `scope` was just shown `items` at `now_ms`: into the overlay and the cache (before the
    /// rows are queued for the store).
    pub fn remember(&self, scope: u64, items: &[u64], now_ms: u64) {
        self.pending.add(scope, items, now_ms);
        for &item in items {
            self.cache.put_seen(scope, item, now_ms);
        }
    }

    /// The recorder's group commit: the rows go to the store, then `after` runs (the filter
    /// back-end's own write, if it has one), then the rows leave the overlay. On a failure the
    /// rows stay in the overlay (the recorder commits them again later).
    pub fn commit(
        &self,
        rows: &[(u64, Seen)],
        after: impl FnOnce(&[(u64, Seen)]) -> Result<()>,
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        let result = self.store.record_batch(rows).and_then(|()| after(rows));
        match &result {
            Ok(()) => {
                self.pending.committed(rows);
                self.metrics.record_batch(rows.len(), started.elapsed());
            }
            Err(_) => {
                self.metrics.record_failures.fetch_add(1, Relaxed);
                self.metrics.store_latency.observe(started.elapsed());
            }
        }
        result
    }

    /// The exact path for `items`: cache, then the pending overlay, then the misses in one store
    /// batch. Returns, per item, whether the scope saw it within R.
    pub fn exact_seen(&self, scope: u64, items: &[u64], now_ms: u64) -> Result<Vec<bool>> {
        let since = self.since(now_ms);
        let mut seen = vec![false; items.len()];
        let mut ask = vec![false; items.len()];
        // The items the cache could not answer, with the ticket of each lookup.
        let mut asked: Vec<(usize, Ticket)> = Vec::new();
        let mut hits = 0;
        for (i, &item) in items.iter().enumerate() {
            match self.cache.lookup(scope, item, since) {
                Ok(answer) => {
                    seen[i] = answer;
                    hits += 1;
                }
                Err(ticket) => {
                    ask[i] = true;
                    asked.push((i, ticket));
                }
            }
        }
        self.metrics.cache_hits.fetch_add(hits, Relaxed);
        if hits == items.len() as u64 {
            return Ok(seen);
        }
        self.pending
            .answer(scope, items, since, &mut ask, &mut seen);
        let missed: Vec<(usize, Ticket)> = asked.into_iter().filter(|&(i, _)| ask[i]).collect();
        if !missed.is_empty() {
            let batch: Vec<u64> = missed.iter().map(|&(i, _)| items[i]).collect();
            let mut answers = Vec::with_capacity(batch.len());
            let started = Instant::now();
            self.timed(|| self.store.contains(scope, &batch, since, &mut answers))?;
            self.metrics.exact_batch(batch.len(), started.elapsed());
            self.metrics
                .store_reads
                .fetch_add(batch.len() as u64, Relaxed);
            for (&(i, ticket), answer) in missed.iter().zip(answers) {
                seen[i] = answer;
                if !answer && !self.shared.load(Relaxed) {
                    self.cache.put_unseen(scope, items[i], since, ticket);
                }
                // A "seen" answer is not cached here: the store did not say when, and the cache
                // needs the time to expire it. Sightings enter the cache from record and load.
            }
        }
        Ok(seen)
    }
}

impl HistorySource for Core {
    /// A scope's rows seen at or after `since_ms`, oldest first, for a filter build: the pending
    /// overlay, then the store (in that order: a row leaves the overlay only once committed).
    /// The store's rows also warm the cache (as sightings that may be older than the latest:
    /// see `cache`).
    fn load_history(&self, scope: u64, since_ms: u64) -> Result<Vec<Seen>> {
        let mut history = Vec::new();
        self.pending.snapshot(scope, since_ms, &mut history);
        let uncommitted = history.len();
        self.timed(|| self.store.load(scope, since_ms, &mut history))?;
        self.metrics.history_loads.fetch_add(1, Relaxed);
        self.metrics.store_reads.fetch_add(1, Relaxed);
        self.cache.put_seen_many(scope, &history[uncommitted..]);
        history.sort_by_key(|s| s.at_ms);
        Ok(history)
    }

    fn overlay_seen(&self, scope: u64, items: &[u64], since_ms: u64, maybe: &mut [bool]) {
        let mut ask: Vec<bool> = maybe.iter().map(|&m| !m).collect();
        self.pending.answer(scope, items, since_ms, &mut ask, maybe);
    }
}
