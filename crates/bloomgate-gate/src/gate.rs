//! The gate: one call per request answers, for each candidate item, "may this scope be shown
//! it?" (not seen within the retention window), using filters, the cache and the exact store
//! according to the policy, and counting everything the metrics report.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::cache::Ticket;
use crate::lifecycle::{LifecycleConfig, LocalFilters};
use crate::metrics::{FilterGauges, Metrics, SATURATION_BOUNDS};
use crate::pending::Pending;
use crate::recorder::Recorder;
use crate::remote::RemoteFilters;
use crate::{Error, ExactStore, Result, Seen, SeenCache};

/// What the gate does with a filter "maybe".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// No filter: every candidate goes to the exact path (cache, then store). The baseline.
    Exact,
    /// A "maybe" goes to the exact path; answers are exact.
    Verify,
    /// A "maybe" counts as seen: no exact lookups, over-filtering at the filter's FPR.
    Trust,
}

/// Where the scope filters live.
#[derive(Clone, Debug)]
pub enum FilterMode {
    /// In this process, within the lifecycle's memory budget.
    Local,
    /// On a bloomgate/RedisBloom server: `resp://HOST:PORT`, keys under the given prefix.
    Remote { url: String, key_prefix: String },
}

#[derive(Clone, Debug)]
pub struct GateConfig {
    pub policy: Policy,
    pub filters: FilterMode,
    pub lifecycle: LifecycleConfig,
    /// (scope, item) answers the LRU cache holds.
    pub cache_capacity: usize,
    /// Trust mode verifies every N-th request's "maybe" answers against the store to estimate
    /// over-filtering (0 = never).
    pub trust_sample_every: u64,
}

enum Filters {
    None,
    Local(Arc<LocalFilters>),
    Remote(Box<RemoteFilters>),
}

/// What the request path and the background threads (recorder, builder) share.
pub(crate) struct Core {
    config: GateConfig,
    pub(crate) store: Box<dyn ExactStore>,
    cache: SeenCache,
    pub(crate) pending: Pending,
    pub(crate) metrics: Metrics,
    /// Set once if a group commit fails; every later record and flush returns it.
    pub(crate) recording_failure: OnceLock<String>,
}

/// The membership gate over one exact store.
///
/// Owns two background threads: the recorder (group commits of served items) and, with local
/// filters, the builder (history loads and filter builds). Dropping the gate commits what is
/// queued and stops both.
pub struct Gate {
    core: Arc<Core>,
    filters: Filters,
    builder: Option<JoinHandle<()>>,
    recorder: Recorder,
    requests_seen: AtomicU64,
}

impl Gate {
    pub fn new(store: Box<dyn ExactStore>, config: GateConfig) -> Result<Self> {
        config.lifecycle.validate()?;
        let core = Arc::new(Core {
            cache: SeenCache::new(config.cache_capacity),
            config,
            store,
            pending: Pending::new(),
            metrics: Metrics::default(),
            recording_failure: OnceLock::new(),
        });
        let config = &core.config;
        let mut builder = None;
        let filters = match (&config.policy, &config.filters) {
            (Policy::Exact, _) => Filters::None,
            (_, FilterMode::Local) => {
                let (local, queue) = LocalFilters::new(config.lifecycle.clone())?;
                let local = Arc::new(local);
                let (filters, core) = (local.clone(), core.clone());
                builder = Some(
                    std::thread::Builder::new()
                        .name("bloomgate-builder".into())
                        .spawn(move || {
                            let load = |scope, since| core.load_history(scope, since);
                            filters.run_builds(&queue, &load, &core.metrics);
                        })
                        .map_err(|e| Error::InvalidConfig(format!("spawning the builder: {e}")))?,
                );
                Filters::Local(local)
            }
            (_, FilterMode::Remote { url, key_prefix }) => Filters::Remote(Box::new(
                RemoteFilters::connect(url, key_prefix, config.lifecycle.clone())?,
            )),
        };
        Ok(Gate {
            recorder: Recorder::start(core.clone()),
            core,
            filters,
            builder,
            requests_seen: AtomicU64::new(0),
        })
    }

    pub fn metrics(&self) -> &Metrics {
        &self.core.metrics
    }

    /// Bytes held by scope filters: local ones, or remote ones as last read from the server.
    pub fn filter_memory_bytes(&self) -> u64 {
        self.filter_gauges().memory_bytes
    }

    /// Estimated false-positive rate of a scope's local filter, from its fill (None if the
    /// scope has no built local filter).
    pub fn scope_filter_fpr(&self, scope: u64) -> Option<f64> {
        match &self.filters {
            Filters::Local(local) => local.estimated_fpr(scope),
            Filters::None | Filters::Remote(_) => None,
        }
    }

    fn filter_gauges(&self) -> FilterGauges {
        match &self.filters {
            Filters::Local(local) => local.gauges(),
            Filters::Remote(remote) => FilterGauges {
                resident_filters: 0,
                memory_bytes: remote.memory_bytes(),
                saturation: [0; SATURATION_BOUNDS.len() + 1],
            },
            Filters::None => FilterGauges {
                resident_filters: 0,
                memory_bytes: 0,
                saturation: [0; SATURATION_BOUNDS.len() + 1],
            },
        }
    }

    /// The metrics in Prometheus text exposition format.
    pub fn render_metrics(&self) -> String {
        self.core.metrics.render(&self.filter_gauges())
    }

    /// For each candidate, whether it may be shown: `true` = not seen by `scope` within the
    /// retention window (under `Trust`, a filter false positive also reads `false`).
    /// Any store or server failure is returned as an error, never as "unseen".
    ///
    /// A scope whose local filter is still being built (first use) is answered by the exact
    /// path, under every policy: nothing waits for a history load.
    pub fn unseen(&self, scope: u64, candidates: &[u64], now_ms: u64) -> Result<Vec<bool>> {
        let core = &*self.core;
        let metrics = &core.metrics;
        let started = Instant::now();
        let mut verdict = vec![true; candidates.len()];
        let mut maybe = Vec::with_capacity(candidates.len());
        let filtered = match &self.filters {
            Filters::Local(local) => local.probe(scope, candidates, now_ms, &mut maybe, metrics),
            Filters::Remote(remote) => {
                let load = |scope, since| core.load_history(scope, since);
                remote.probe(scope, candidates, now_ms, &mut maybe, &load)?;
                true
            }
            Filters::None => {
                maybe.resize(candidates.len(), true);
                false
            }
        };
        let maybe_at: Vec<usize> = (0..candidates.len()).filter(|&i| maybe[i]).collect();
        let mut sample = false;
        if core.config.policy != Policy::Trust || !filtered {
            let items: Vec<u64> = maybe_at.iter().map(|&i| candidates[i]).collect();
            let seen = core.exact_seen(scope, &items, now_ms)?;
            metrics.exact_lookups.fetch_add(items.len() as u64, Relaxed);
            if filtered && core.config.policy == Policy::Verify {
                metrics.filter_maybe.fetch_add(items.len() as u64, Relaxed);
                let misses = seen.iter().filter(|&&s| !s).count() as u64;
                metrics.exact_misses_after_maybe.fetch_add(misses, Relaxed);
            }
            for (&i, seen) in maybe_at.iter().zip(seen) {
                verdict[i] = !seen;
            }
        } else {
            metrics
                .filter_maybe
                .fetch_add(maybe_at.len() as u64, Relaxed);
            for &i in &maybe_at {
                verdict[i] = false;
            }
            let every = core.config.trust_sample_every;
            sample = every > 0
                && self
                    .requests_seen
                    .fetch_add(1, Relaxed)
                    .is_multiple_of(every);
        }
        metrics.requests.fetch_add(1, Relaxed);
        metrics
            .candidates
            .fetch_add(candidates.len() as u64, Relaxed);
        metrics.request_latency.observe(started.elapsed());
        if sample {
            // Outside the request latency: a real service verifies its sample off the hot path.
            let items: Vec<u64> = maybe_at.iter().map(|&i| candidates[i]).collect();
            let seen = core.exact_seen(scope, &items, now_ms)?;
            let false_positives = seen.iter().filter(|&&s| !s).count() as u64;
            let unseen = (candidates.len() - maybe_at.len()) as u64 + false_positives;
            metrics
                .trust_sample_maybe
                .fetch_add(items.len() as u64, Relaxed);
            metrics
                .trust_sample_false_positives
                .fetch_add(false_positives, Relaxed);
            metrics.trust_sample_unseen.fetch_add(unseen, Relaxed);
        }
        Ok(verdict)
    }

    /// Records that `scope` was shown `items` at `now_ms`. Before it returns, the items are in
    /// the pending overlay, the cache and the scope's filter, so the scope's next request never
    /// shows them; the store write is queued for the background recorder's next group commit
    /// (this call waits only when that queue is full). Returns the recorder's error if an
    /// earlier commit failed.
    pub fn record(&self, scope: u64, items: &[u64], now_ms: u64) -> Result<()> {
        let core = &*self.core;
        core.check_recording()?;
        if items.is_empty() {
            return Ok(());
        }
        core.pending.add(scope, items, now_ms);
        for &item in items {
            core.cache.put_seen(scope, item, now_ms);
        }
        let rows = items
            .iter()
            .map(|&item| Seen {
                item,
                at_ms: now_ms,
            })
            .collect();
        self.recorder.queue(scope, rows)?;
        match &self.filters {
            Filters::Local(local) => local.record(scope, items, now_ms, &core.metrics),
            Filters::Remote(remote) => {
                let load = |scope, since| core.load_history(scope, since);
                remote.record(scope, items, now_ms, &load, &core.metrics)?;
            }
            Filters::None => {}
        }
        Ok(())
    }

    /// Waits until every filter build queued so far is installed and every recorded item is
    /// committed to the store; returns the recorder's error if a commit failed.
    pub fn flush(&self) -> Result<()> {
        if let Filters::Local(local) = &self.filters {
            local.flush_builds();
        }
        self.recorder.flush()?;
        self.core.check_recording()
    }

    /// Applies the retention schedule to the store: drops rows last seen more than R before
    /// `now_ms`. Returns how many rows went.
    pub fn expire(&self, now_ms: u64) -> Result<u64> {
        let core = &*self.core;
        core.timed(|| core.store.expire(core.since(now_ms)))
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        if let Filters::Local(local) = &self.filters {
            local.stop_builds();
        }
        if let Some(builder) = self.builder.take() {
            let _ = builder.join();
        }
        // The recorder (a field) then commits what is queued and stops.
    }
}

impl Core {
    fn check_recording(&self) -> Result<()> {
        match self.recording_failure.get() {
            Some(failure) => Err(Error::Recording(failure.clone())),
            None => Ok(()),
        }
    }

    fn since(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.config.lifecycle.retention_ms)
    }

    /// Store call with its latency recorded.
    fn timed<T>(&self, call: impl FnOnce() -> Result<T>) -> Result<T> {
        let started = Instant::now();
        let result = call();
        self.metrics.store_latency.observe(started.elapsed());
        result
    }

    /// A scope's rows of the last R, oldest first, for a filter build: the pending overlay, then
    /// the store (in that order: a row leaves the overlay only once committed). The store's rows
    /// also warm the cache (as sightings that may be older than the latest: see `cache`).
    fn load_history(&self, scope: u64, since_ms: u64) -> Result<Vec<Seen>> {
        let mut history = Vec::new();
        self.pending.snapshot(scope, since_ms, &mut history);
        let uncommitted = history.len();
        self.timed(|| self.store.load(scope, since_ms, &mut history))?;
        self.metrics.history_loads.fetch_add(1, Relaxed);
        self.metrics.store_reads.fetch_add(1, Relaxed);
        for seen in &history[uncommitted..] {
            self.cache.put_seen(scope, seen.item, seen.at_ms);
        }
        history.sort_by_key(|s| s.at_ms);
        Ok(history)
    }

    /// The exact path for `items`: cache, then the pending overlay, then the misses in one store
    /// batch. Returns, per item, whether the scope saw it within R.
    fn exact_seen(&self, scope: u64, items: &[u64], now_ms: u64) -> Result<Vec<bool>> {
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
            self.timed(|| self.store.contains(scope, &batch, since, &mut answers))?;
            self.metrics
                .store_reads
                .fetch_add(batch.len() as u64, Relaxed);
            for (&(i, ticket), answer) in missed.iter().zip(answers) {
                seen[i] = answer;
                if !answer {
                    self.cache.put_unseen(scope, items[i], since, ticket);
                }
                // A "seen" answer is not cached here: the store did not say when, and the cache
                // needs the time to expire it. Sightings enter the cache from record and load.
            }
        }
        Ok(seen)
    }
}
