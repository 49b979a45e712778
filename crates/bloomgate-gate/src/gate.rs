//! The gate: one call per request answers, for each candidate item, "may this scope be shown
//! it?" (not seen within the retention window), using its filter back-end, the cache and the
//! exact store according to the policy, and counting everything the metrics report.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use crate::config::{Durability, FilterMode, GateConfig, Policy};
use crate::exact::core::Core;
use crate::exact::recorder::{Place, Recorder};
use crate::filters::lifecycle::LocalFilters;
use crate::filters::remote::RemoteFilters;
use crate::filters::{FilterBackend, NoFilters, Probe};
use crate::{ExactStore, Metrics, Result, Seen};

/// The membership gate over one exact store.
///
/// Owns background threads: the recorder (group commits of served items) and, with local
/// filters, the builders (history loads and filter builds) and the snapshot writer. Dropping the
/// gate commits what is queued, persists local filters where configured and stops them all;
/// [`Gate::close`] does the same and reports errors.
pub struct Gate {
    core: Arc<Core>,
    filters: Arc<dyn FilterBackend>,
    recorder: Option<Recorder>,
    policy: Policy,
    trust_sample_every: u64,
    requests_seen: AtomicU64,
    closed: bool,
}

impl Gate {
    /// A gate over `store`. With persisted local filters, loads the snapshot (if it matches the
    /// store and the lifecycle) and schedules each scope's catch-up with the store.
    pub fn new(store: Box<dyn ExactStore>, config: GateConfig) -> Result<Self> {
        config.lifecycle.validate()?;
        let metrics = Arc::new(Metrics::default());
        let core = Arc::new(Core::new(
            store,
            config.lifecycle.retention_ms,
            config.cache_capacity,
            metrics.clone(),
        ));
        let filters: Arc<dyn FilterBackend> = match (&config.policy, &config.filters) {
            (Policy::Exact, _) => Arc::new(NoFilters),
            (_, FilterMode::Local) => LocalFilters::start(&config, core.clone(), metrics)?,
            (_, FilterMode::Remote { url, key_prefix }) => Arc::new(RemoteFilters::connect(
                url,
                key_prefix,
                config.lifecycle.clone(),
                config.timeouts,
                core.clone(),
                metrics,
            )?),
        };
        if filters.shares_pending() {
            core.share_scopes();
        }
        Ok(Gate {
            recorder: Some(Recorder::start(core.clone(), filters.clone())),
            core,
            filters,
            policy: config.policy,
            trust_sample_every: config.trust_sample_every,
            requests_seen: AtomicU64::new(0),
            closed: false,
        })
    }

    /// The gate's counters and histograms.
    pub fn metrics(&self) -> &Metrics {
        self.core.metrics()
    }

    /// The policy the gate was opened with.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The gate's counters by name, in a fixed order: what `GATE.INFO` and the Python
    /// `Gate.stats()` report beside the policy and the store. `requests` and `candidates`
    /// (`unseen` calls and the candidates in them), `store_lookups` (candidates sent to the exact
    /// path: the cache, then the store), `filter_negatives` (candidates a filter answered "not
    /// seen" without it), then `filter_maybe`, `cache_hits`, `store_reads` (store checks plus
    /// history loads), `history_loads`, `recorded_rows`, `record_batches`, `filter_errors` and
    /// `filter_memory_bytes`.
    pub fn stats(&self) -> Vec<(&'static str, u64)> {
        let m = self.metrics();
        let counters = [
            ("requests", &m.requests),
            ("candidates", &m.candidates),
            ("store_lookups", &m.exact_lookups),
            ("filter_negatives", &m.filter_negatives),
            ("filter_maybe", &m.filter_maybe),
            ("cache_hits", &m.cache_hits),
            ("store_reads", &m.store_reads),
            ("history_loads", &m.history_loads),
            ("recorded_rows", &m.recorded_rows),
            ("record_batches", &m.record_batches),
            ("filter_errors", &m.filter_errors),
        ];
        let mut stats: Vec<(&'static str, u64)> = counters
            .into_iter()
            .map(|(name, counter)| (name, counter.load(Relaxed)))
            .collect();
        stats.push(("filter_memory_bytes", self.filter_memory_bytes()));
        stats
    }

    /// Bytes held by scope filters: local ones, or remote ones as last read from the server.
    pub fn filter_memory_bytes(&self) -> u64 {
        self.filters.gauges().memory_bytes
    }

    /// Estimated false-positive rate of a scope's local filter, from its fill (None if the
    /// scope has no built local filter).
    pub fn scope_filter_fpr(&self, scope: u64) -> Option<f64> {
        self.filters.estimated_fpr(scope)
    }

    /// The metrics in Prometheus text exposition format.
    pub fn render_metrics(&self) -> String {
        self.core.metrics().render(&self.filters.gauges())
    }

    /// For each candidate, whether it may be shown: `true` = not seen by `scope` within the
    /// retention window (under `Trust`, a filter false positive also reads `false`).
    /// Any store failure is returned as an error, never as "unseen"; a filter failure sends the
    /// request to the exact path.
    ///
    /// A scope without a filter yet gets one built before it is answered when that is cheaper
    /// than the exact path (see `lifecycle`); otherwise it is answered by the exact path, under
    /// every policy, while its filter is built in the background.
    pub fn unseen(&self, scope: u64, candidates: &[u64], now_ms: u64) -> Result<Vec<bool>> {
        let core = &*self.core;
        let metrics = core.metrics();
        let started = Instant::now();
        let mut verdict = vec![true; candidates.len()];
        let mut maybe = Vec::with_capacity(candidates.len());
        let probe = match self.filters.probe(scope, candidates, now_ms, &mut maybe) {
            Ok(probe) => probe,
            Err(err) if self.filters.shares_pending() => {
                // Other processes' uncommitted rows are known to the filter server only.
                metrics.filter_errors.fetch_add(1, Relaxed);
                return Err(err);
            }
            Err(_) => {
                metrics.filter_errors.fetch_add(1, Relaxed);
                maybe.clear();
                maybe.resize(candidates.len(), true);
                Probe::Unfiltered
            }
        };
        let (filtered, pending) = match probe {
            Probe::Filtered => (true, Vec::new()),
            Probe::Unfiltered => (false, Vec::new()),
            Probe::Pending { filtered, seen } => (filtered, seen),
        };
        for &i in &pending {
            maybe[i] = false;
            verdict[i] = false;
        }
        let maybe_at: Vec<usize> = (0..candidates.len()).filter(|&i| maybe[i]).collect();
        if filtered {
            let negatives = (candidates.len() - maybe_at.len() - pending.len()) as u64;
            metrics.filter_negatives.fetch_add(negatives, Relaxed);
        }
        let mut sample = false;
        if self.policy != Policy::Trust || !filtered {
            let items: Vec<u64> = maybe_at.iter().map(|&i| candidates[i]).collect();
            let seen = core.exact_seen(scope, &items, now_ms)?;
            metrics.exact_lookups.fetch_add(items.len() as u64, Relaxed);
            if filtered && self.policy == Policy::Verify {
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
            let every = self.trust_sample_every;
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

    /// Records that `scope` was shown `items` at `now_ms`; returns how many of them (a prefix of
    /// `items`) were taken. Before it returns, the items taken are in the pending overlay and the
    /// cache, and in the scope's filter (local filters), or pending on the filter server beside
    /// the scope's filter (remote filters: every gate process sharing them finds them there
    /// until the recorder writes them into the filter; with `pending=local`, in this process's
    /// overlay), so the scope's next request never shows them. With shared pending rows a
    /// filter server that fails is an error here, and nothing is queued (the items may be
    /// pending there anyway: recording them again is safe). The store write is queued for the
    /// background recorder's next group
    /// commit ([`Durability::Queued`]: a crash before that commit loses the rows; see
    /// [`Gate::record_with`] to wait for it). All are taken unless the recorder's queue is full:
    /// while the store is healthy this call waits for room (up to `recorder::ROOM_WAIT`); while
    /// the store is failing it takes what fits at once and the rest are not recorded (the count
    /// says so: they are neither remembered nor written, so the caller may record them again).
    pub fn record(&self, scope: u64, items: &[u64], now_ms: u64) -> Result<usize> {
        self.record_with(scope, items, now_ms, Durability::Queued)
    }

    /// [`Gate::record`], returning when `durability` says: [`Durability::Queued`] once the rows
    /// are queued, [`Durability::Commit`] once the group commit holding them succeeded (an
    /// error if a commit attempt fails meanwhile: the rows stay queued, hidden by this process,
    /// and are committed when the store answers; recording them again is safe).
    pub fn record_with(
        &self,
        scope: u64,
        items: &[u64],
        now_ms: u64,
        durability: Durability,
    ) -> Result<usize> {
        if items.is_empty() {
            return Ok(0);
        }
        let recorder = self.recorder();
        let taken = recorder.reserve(items.len());
        let items = &items[..taken];
        if items.is_empty() {
            return Ok(0);
        }
        let place = self.take(scope, items, now_ms, true)?;
        if durability == Durability::Commit {
            recorder.wait_committed(place)?;
        }
        Ok(taken)
    }

    /// Puts back rows that a durable log of the caller's accepted before a restart (serve's
    /// append-only log): `scope` was shown `items` at `at_ms`, their original time. As
    /// [`Gate::record`], except that the recorder's bound does not apply (they were taken once:
    /// refusing them now would lose them) and they are counted in `Metrics::replayed_rows`.
    /// Rows the store already holds are written again, which changes nothing (the store keeps
    /// a row's latest time).
    pub fn replay(&self, scope: u64, items: &[u64], at_ms: u64) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        self.take(scope, items, at_ms, false)?;
        let metrics = self.core.metrics();
        metrics.replayed_rows.fetch_add(items.len() as u64, Relaxed);
        Ok(())
    }

    /// The rows recorded and not yet committed to the store, oldest first, as (scope, row): what
    /// a caller that logs its records must keep when it drops log records holding them (serve
    /// writes them at the head of each new log generation).
    pub fn uncommitted(&self) -> Vec<(u64, Seen)> {
        self.recorder().uncommitted()
    }

    /// Remembers `items` (overlay, cache, filters) and queues them for the store; `admitted`:
    /// the recorder reserved room for them (else they are a replay).
    ///
    /// With shared pending rows the filter server takes them first: a record it refused is an
    /// error and leaves nothing behind in this process; a replay it refuses is committed all
    /// the same (the rows were pending on the server when they were first acknowledged).
    fn take(&self, scope: u64, items: &[u64], now_ms: u64, admitted: bool) -> Result<Place> {
        let recorder = self.recorder();
        let shared = self.filters.shares_pending();
        if !shared {
            self.core.remember(scope, items, now_ms);
        }
        if let Err(err) = self.filters.record(scope, items, now_ms) {
            if admitted {
                recorder.release(items.len());
                return Err(err);
            }
            if !shared {
                return Err(err);
            }
            let metrics = self.core.metrics();
            metrics.filter_errors.fetch_add(1, Relaxed);
        }
        if shared {
            self.core.remember(scope, items, now_ms);
        }
        let rows = items
            .iter()
            .map(|&item| Seen {
                item,
                at_ms: now_ms,
            })
            .collect();
        Ok(recorder.push(scope, rows, admitted))
    }

    /// Rows recorded and not yet committed to the store (they grow while the store is down).
    pub fn record_backlog(&self) -> usize {
        self.recorder().backlog()
    }

    fn recorder(&self) -> &Recorder {
        self.recorder
            .as_ref()
            .expect("the recorder lives until close")
    }

    /// Waits until every filter build queued so far is installed and every recorded item is
    /// committed to the store; returns the commit's error if an attempt fails meanwhile (the
    /// rows stay queued: the recorder retries them with backoff until the store takes them).
    pub fn flush(&self) -> Result<()> {
        self.filters.flush();
        self.recorder().flush()
    }

    /// Writes the local filters' snapshot now (a no-op without persistence).
    pub fn persist(&self) -> Result<()> {
        self.filters.persist()
    }

    /// Applies the retention schedule to the store: drops rows last seen more than R before
    /// `now_ms`. Returns how many rows went.
    pub fn expire(&self, now_ms: u64) -> Result<u64> {
        let core = &*self.core;
        core.timed(|| core.store().expire(core.since(now_ms)))
    }

    /// Shuts the gate down: commits every recorded item, stops the builders and writes the
    /// filters' snapshot (where configured). The first error is returned; everything is
    /// attempted.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        let flushed = self.flush();
        let stopped = self.filters.shutdown();
        // The recorder commits what is still queued and stops.
        drop(self.recorder.take());
        flushed.and(stopped)
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
