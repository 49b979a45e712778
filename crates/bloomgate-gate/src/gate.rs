//! The gate: one call per request answers, for each candidate item, "may this scope be shown
//! it?" (not seen within the retention window), using filters, the cache and the exact store
//! according to the policy, and counting everything the metrics report.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use crate::lifecycle::{LifecycleConfig, LocalFilters};
use crate::metrics::{FilterGauges, Metrics, SATURATION_BOUNDS};
use crate::remote::RemoteFilters;
use crate::{ExactStore, Result, Seen, SeenCache};

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
    Local(LocalFilters),
    Remote(Box<RemoteFilters>),
}

/// The membership gate over one exact store.
pub struct Gate {
    config: GateConfig,
    store: Box<dyn ExactStore>,
    cache: SeenCache,
    filters: Filters,
    metrics: Metrics,
    requests_seen: AtomicU64,
}

impl Gate {
    pub fn new(store: Box<dyn ExactStore>, config: GateConfig) -> Result<Self> {
        config.lifecycle.validate()?;
        let filters = match (&config.policy, &config.filters) {
            (Policy::Exact, _) => Filters::None,
            (_, FilterMode::Local) => Filters::Local(LocalFilters::new(config.lifecycle.clone())?),
            (_, FilterMode::Remote { url, key_prefix }) => Filters::Remote(Box::new(
                RemoteFilters::connect(url, key_prefix, config.lifecycle.clone())?,
            )),
        };
        Ok(Gate {
            cache: SeenCache::new(config.cache_capacity),
            config,
            store,
            filters,
            metrics: Metrics::default(),
            requests_seen: AtomicU64::new(0),
        })
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Bytes held by local scope filters (0 for remote filters: they live on the server).
    pub fn filter_memory_bytes(&self) -> u64 {
        self.filter_gauges().memory_bytes
    }

    /// Estimated false-positive rate of a scope's local filter, from its fill (None if the
    /// scope has no resident local filter).
    pub fn scope_filter_fpr(&self, scope: u64) -> Option<f64> {
        match &self.filters {
            Filters::Local(local) => local.estimated_fpr(scope),
            Filters::None | Filters::Remote(_) => None,
        }
    }

    fn filter_gauges(&self) -> FilterGauges {
        match &self.filters {
            Filters::Local(local) => local.gauges(),
            Filters::None | Filters::Remote(_) => FilterGauges {
                resident_filters: 0,
                memory_bytes: 0,
                saturation: [0; SATURATION_BOUNDS.len() + 1],
            },
        }
    }

    /// The metrics in Prometheus text exposition format.
    pub fn render_metrics(&self) -> String {
        self.metrics.render(&self.filter_gauges())
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

    /// Loads a scope's rows of the last R for a filter build; the rows also warm the cache.
    fn load_history(&self, scope: u64, since_ms: u64) -> Result<Vec<Seen>> {
        let mut history = Vec::new();
        self.timed(|| self.store.load(scope, since_ms, &mut history))?;
        self.metrics.history_loads.fetch_add(1, Relaxed);
        self.metrics.store_reads.fetch_add(1, Relaxed);
        for seen in &history {
            self.cache.put_seen(scope, seen.item, seen.at_ms);
        }
        Ok(history)
    }

    fn probe_filters(
        &self,
        scope: u64,
        candidates: &[u64],
        now_ms: u64,
        maybe: &mut Vec<bool>,
    ) -> Result<()> {
        let load = |scope, since| self.load_history(scope, since);
        match &self.filters {
            Filters::Local(local) => {
                local.probe(scope, candidates, now_ms, maybe, &load, &self.metrics)
            }
            Filters::Remote(remote) => remote.probe(scope, candidates, now_ms, maybe, &load),
            Filters::None => {
                maybe.resize(candidates.len(), true);
                Ok(())
            }
        }
    }

    /// The exact path for `items`: cache first, the misses in one store batch. Returns, per
    /// item, whether the scope saw it within R.
    fn exact_seen(&self, scope: u64, items: &[u64], now_ms: u64) -> Result<Vec<bool>> {
        let since = self.since(now_ms);
        let mut seen = vec![false; items.len()];
        let mut missed = Vec::new(); // indices into items
        for (i, &item) in items.iter().enumerate() {
            match self.cache.lookup(scope, item, since) {
                Some(answer) => seen[i] = answer,
                None => missed.push(i),
            }
        }
        self.metrics
            .cache_hits
            .fetch_add((items.len() - missed.len()) as u64, Relaxed);
        if !missed.is_empty() {
            let batch: Vec<u64> = missed.iter().map(|&i| items[i]).collect();
            let mut answers = Vec::with_capacity(batch.len());
            self.timed(|| self.store.contains(scope, &batch, since, &mut answers))?;
            self.metrics
                .store_reads
                .fetch_add(batch.len() as u64, Relaxed);
            for (&i, answer) in missed.iter().zip(answers) {
                seen[i] = answer;
                if !answer {
                    self.cache.put_unseen(scope, items[i]);
                }
                // A "seen" answer is not cached here: the store did not say when, and the cache
                // needs the time to expire it. Sightings enter the cache from record and load.
            }
        }
        Ok(seen)
    }

    /// For each candidate, whether it may be shown: `true` = not seen by `scope` within the
    /// retention window (under `Trust`, a filter false positive also reads `false`).
    /// Any store or server failure is returned as an error, never as "unseen".
    pub fn unseen(&self, scope: u64, candidates: &[u64], now_ms: u64) -> Result<Vec<bool>> {
        let started = Instant::now();
        let mut verdict = vec![true; candidates.len()];
        let mut maybe = Vec::with_capacity(candidates.len());
        self.probe_filters(scope, candidates, now_ms, &mut maybe)?;
        let maybe_at: Vec<usize> = (0..candidates.len()).filter(|&i| maybe[i]).collect();
        let mut sample = false;
        match self.config.policy {
            Policy::Exact | Policy::Verify => {
                let items: Vec<u64> = maybe_at.iter().map(|&i| candidates[i]).collect();
                let seen = self.exact_seen(scope, &items, now_ms)?;
                self.metrics
                    .exact_lookups
                    .fetch_add(items.len() as u64, Relaxed);
                if self.config.policy == Policy::Verify {
                    self.metrics
                        .filter_maybe
                        .fetch_add(items.len() as u64, Relaxed);
                    let misses = seen.iter().filter(|&&s| !s).count() as u64;
                    self.metrics
                        .exact_misses_after_maybe
                        .fetch_add(misses, Relaxed);
                }
                for (&i, seen) in maybe_at.iter().zip(seen) {
                    verdict[i] = !seen;
                }
            }
            Policy::Trust => {
                self.metrics
                    .filter_maybe
                    .fetch_add(maybe_at.len() as u64, Relaxed);
                for &i in &maybe_at {
                    verdict[i] = false;
                }
                let every = self.config.trust_sample_every;
                sample = every > 0
                    && self
                        .requests_seen
                        .fetch_add(1, Relaxed)
                        .is_multiple_of(every);
            }
        }
        self.metrics.requests.fetch_add(1, Relaxed);
        self.metrics
            .candidates
            .fetch_add(candidates.len() as u64, Relaxed);
        self.metrics.request_latency.observe(started.elapsed());
        if sample {
            // Outside the request latency: a real service verifies its sample off the hot path.
            let items: Vec<u64> = maybe_at.iter().map(|&i| candidates[i]).collect();
            let seen = self.exact_seen(scope, &items, now_ms)?;
            let false_positives = seen.iter().filter(|&&s| !s).count() as u64;
            let unseen = (candidates.len() - maybe_at.len()) as u64 + false_positives;
            self.metrics
                .trust_sample_maybe
                .fetch_add(items.len() as u64, Relaxed);
            self.metrics
                .trust_sample_false_positives
                .fetch_add(false_positives, Relaxed);
            self.metrics.trust_sample_unseen.fetch_add(unseen, Relaxed);
        }
        Ok(verdict)
    }

    /// Records that `scope` was shown `items` at `now_ms`: store first, then cache and filter.
    pub fn record(&self, scope: u64, items: &[u64], now_ms: u64) -> Result<()> {
        let seen: Vec<Seen> = items
            .iter()
            .map(|&item| Seen {
                item,
                at_ms: now_ms,
            })
            .collect();
        self.timed(|| self.store.record(scope, &seen))?;
        for &item in items {
            self.cache.put_seen(scope, item, now_ms);
        }
        let load = |scope, since| self.load_history(scope, since);
        match &self.filters {
            Filters::Local(local) => local.record(scope, items, now_ms, &load, &self.metrics),
            Filters::Remote(remote) => remote.record(scope, items, now_ms, &load),
            Filters::None => Ok(()),
        }
    }

    /// Applies the retention schedule to the store: drops rows last seen more than R before
    /// `now_ms`. Returns how many rows went.
    pub fn expire(&self, now_ms: u64) -> Result<u64> {
        self.timed(|| self.store.expire(self.since(now_ms)))
    }
}
