//! Local per-scope filters and their lifecycle: retention-aligned rotation, sizing from the
//! scope's history, rebuild on saturation, and one memory budget for all scopes.
//!
//! Retention: "seen" means seen within R. Each scope's filter keeps G generations of W with
//! (G−1)·W ≥ R, and the windowed filter guarantees a key stays present for ≥ (G−1)·W after its
//! insertion, so anything seen within R answers "maybe". A filter is (re)built by replaying the
//! store's rows of the last R in time order through a fresh filter, which reproduces the
//! generations a live filter would have had; items recorded after it exists are inserted live.
//!
//! Builds never run on the request path: a scope's first use (or a rebuild) is queued to one
//! background builder thread, and meanwhile its requests take the exact path (first use) or keep
//! the old filter (rebuild). A served item is in the gate's pending overlay before it reaches a
//! filter, and a build's history is the overlay plus the store read *after* the build was queued;
//! items recorded from the moment it is queued go to the scope's `recent` set, installed with the
//! filter. So a concurrent `record` is always in the build's history or in `recent`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Mutex};

use bloomgate::{WindowConfig, WindowedBloomFilter};

use crate::metrics::{FilterGauges, Metrics, SATURATION_BOUNDS};
use crate::{Error, Result, Seen};

const SHARDS: usize = 64;

/// How scope filters follow the product's retention rule and share memory.
#[derive(Clone, Debug)]
pub struct LifecycleConfig {
    /// R: an item counts as seen for this long after it was last seen (ms).
    pub retention_ms: u64,
    /// G ≥ 2 generations; the generation window is W = ⌈R / (G−1)⌉.
    pub generations: usize,
    /// Target false-positive rate of one scope's filter (all generations together).
    pub fpr: f64,
    /// Rebuild a filter from the store once its estimated FPR exceeds this.
    pub fpr_budget: f64,
    /// Capacity per generation = expected items per generation × headroom.
    pub headroom: f64,
    /// Floor on capacity per generation (new or quiet scopes).
    pub min_items_per_generation: u64,
    /// All scopes' filters together stay within this many bytes: the least recently used are
    /// dropped (local) or deleted (remote) and rebuilt from the store on next use.
    pub memory_budget_bytes: u64,
}

impl LifecycleConfig {
    /// W = ⌈R/(G−1)⌉, the smallest window with (G−1)·W ≥ R.
    pub fn generation_window_ms(&self) -> u64 {
        self.retention_ms.div_ceil(self.generations as u64 - 1)
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(Error::InvalidConfig(what.to_owned()));
        if self.generations < 2 {
            return bad("generations must be at least 2 (one is always being filled)");
        }
        if self.retention_ms == 0 {
            return bad("retention must be positive");
        }
        let rates_ok = self.fpr > 0.0 && self.fpr <= self.fpr_budget && self.fpr_budget < 1.0;
        if !rates_ok {
            return bad("need 0 < fpr <= fpr_budget < 1");
        }
        if !(self.headroom >= 1.0 && self.headroom.is_finite())
            || self.min_items_per_generation == 0
        {
            return bad("need headroom >= 1 and min_items_per_generation >= 1");
        }
        Ok(())
    }
}

/// One scope's filter state. `recent` is `Some` from the moment a (re)build is queued until
/// its result is installed: it holds the items recorded meanwhile, which the build's history
/// snapshot may lack; probes consult it beside the old filter.
struct ScopeFilter {
    /// `None` until the scope's first build is installed: its requests take the exact path.
    filter: Option<WindowedBloomFilter>,
    recent: Option<HashMap<u64, u64>>,
    last_used_ms: u64,
}

impl ScopeFilter {
    /// Built and no (re)build in flight: the only state in which dropping it loses nothing.
    fn idle(&self) -> bool {
        self.filter.is_some() && self.recent.is_none()
    }
}

/// Reads a scope's rows seen at or after a time (the store, with the gate's accounting).
pub(crate) type HistoryLoader<'a> = dyn Fn(u64, u64) -> Result<Vec<Seen>> + 'a;

/// A (re)build for the background builder.
pub(crate) struct BuildJob {
    scope: u64,
    now_ms: u64,
    previous_capacity: Option<u64>,
}

pub(crate) enum BuildMessage {
    Build(BuildJob),
    Flush(mpsc::Sender<()>),
    Stop,
}

/// Every resident scope filter, sharded by scope (a request locks only its scope's shard).
pub(crate) struct LocalFilters {
    config: LifecycleConfig,
    shards: Vec<Mutex<HashMap<u64, ScopeFilter>>>,
    memory_bytes: AtomicU64,
    builds: mpsc::Sender<BuildMessage>,
}

impl LocalFilters {
    /// The filters and the queue of builds that [`LocalFilters::run_builds`] must serve.
    pub fn new(config: LifecycleConfig) -> Result<(Self, mpsc::Receiver<BuildMessage>)> {
        config.validate()?;
        let (builds, queue) = mpsc::channel();
        let filters = LocalFilters {
            config,
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            memory_bytes: AtomicU64::new(0),
            builds,
        };
        Ok((filters, queue))
    }

    fn shard(&self, scope: u64) -> std::sync::MutexGuard<'_, HashMap<u64, ScopeFilter>> {
        let index = (scope.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS;
        self.shards[index].lock().unwrap_or_else(|e| e.into_inner())
    }

    fn queue_build(&self, scope: u64, now_ms: u64, previous_capacity: Option<u64>) {
        // The receiver lives as long as the gate; after it stops, builds are moot.
        let _ = self.builds.send(BuildMessage::Build(BuildJob {
            scope,
            now_ms,
            previous_capacity,
        }));
    }

    /// Appends to `out`, per item, whether the scope's filter says "maybe seen within R", and
    /// returns true. A scope without a built filter (first use, or after eviction) gets its
    /// build queued and returns false with every item "maybe": the caller must take the exact
    /// path for all of them — a request never waits for a history load.
    pub fn probe(
        &self,
        scope: u64,
        items: &[u64],
        now_ms: u64,
        out: &mut Vec<bool>,
        metrics: &Metrics,
    ) -> bool {
        let mut shard = self.shard(scope);
        let entry = shard.entry(scope).or_insert_with(|| {
            self.queue_build(scope, now_ms, None);
            ScopeFilter {
                filter: None,
                recent: Some(HashMap::new()),
                last_used_ms: now_ms,
            }
        });
        entry.last_used_ms = now_ms;
        let Some(filter) = entry.filter.as_mut() else {
            out.resize(out.len() + items.len(), true);
            return false;
        };
        if filter.rotate_if_due(now_ms) {
            metrics.rotations.fetch_add(1, Relaxed);
        }
        let filter = &*filter;
        match &entry.recent {
            None => out.extend(items.iter().map(|item| filter.contains(item.to_le_bytes()))),
            Some(recent) => out.extend(
                items
                    .iter()
                    .map(|item| recent.contains_key(item) || filter.contains(item.to_le_bytes())),
            ),
        }
        true
    }

    /// Adds items the scope was just shown (already in the pending overlay) to its filter, if
    /// resident, before the request replies. A scope about to outgrow its capacity, or whose
    /// estimated FPR passed the budget, gets a larger rebuild queued; until it is installed the
    /// old filter keeps answering, with the new items beside it.
    pub fn record(&self, scope: u64, items: &[u64], now_ms: u64, metrics: &Metrics) {
        let mut shard = self.shard(scope);
        let Some(entry) = shard.get_mut(&scope) else {
            return; // built from the overlay and the store, which have these rows, on next use
        };
        entry.last_used_ms = now_ms;
        if let Some(recent) = &mut entry.recent {
            for &item in items {
                recent.insert(item, now_ms);
            }
            return;
        }
        let filter = entry
            .filter
            .as_mut()
            .expect("a scope without a filter has a build queued");
        if filter.rotate_if_due(now_ms) {
            metrics.rotations.fetch_add(1, Relaxed);
        }
        // A generation that outgrows its capacity grows (the windowed filter never rotates
        // early), so retention holds under any load; a filter whose estimated FPR drifted past
        // the budget is rebuilt larger. An insert that cannot grow the filter any further is
        // treated the same way (the items are in `recent` until the rebuild lands).
        let capacity = filter.config().items_per_generation;
        let filled_before = filter.newest_len();
        let failed = items
            .iter()
            .any(|item| filter.insert(item.to_le_bytes(), now_ms).is_err());
        // The fill-based FPR estimate costs a Poisson mixture per generation (~13% of the demo's
        // CPU when done on every record), so it is checked each time the newest generation
        // passes another quarter of its capacity.
        let quarter = (capacity / 4).max(1);
        let check_fpr = filled_before / quarter != filter.newest_len() / quarter;
        if failed || (check_fpr && filter.estimated_fpr() > self.config.fpr_budget) {
            entry.recent = Some(items.iter().map(|&item| (item, now_ms)).collect());
            self.queue_build(scope, now_ms, Some(capacity));
        }
    }

    /// The builder thread's loop: serves queued builds until told to stop.
    pub fn run_builds(
        &self,
        queue: &mpsc::Receiver<BuildMessage>,
        load: &HistoryLoader<'_>,
        metrics: &Metrics,
    ) {
        while let Ok(message) = queue.recv() {
            match message {
                BuildMessage::Build(job) => self.complete_build(job, load, metrics),
                BuildMessage::Flush(done) => {
                    let _ = done.send(());
                }
                BuildMessage::Stop => return,
            }
        }
    }

    /// Waits until every build queued before this call is installed (or failed).
    pub fn flush_builds(&self) {
        let (done, wait) = mpsc::channel();
        if self.builds.send(BuildMessage::Flush(done)).is_ok() {
            let _ = wait.recv();
        }
    }

    pub fn stop_builds(&self) {
        let _ = self.builds.send(BuildMessage::Stop);
    }

    /// Builds outside every lock, then installs the filter with the items recorded meanwhile.
    fn complete_build(&self, job: BuildJob, load: &HistoryLoader<'_>, metrics: &Metrics) {
        let built = self.build(job.scope, job.now_ms, job.previous_capacity, load);
        let mut shard = self.shard(job.scope);
        let Some(entry) = shard.get_mut(&job.scope) else {
            return; // dropped meanwhile (a failed build): the next use queues a fresh one
        };
        let old_bytes = entry.filter.as_ref().map_or(0, |f| f.memory_bytes() as u64);
        let mut filter = match built {
            Ok(filter) => filter,
            Err(_) => {
                // The store failed (requests see the same failure on the exact path). Drop
                // the scope: its next use queues a fresh build.
                shard.remove(&job.scope);
                self.memory_bytes.fetch_sub(old_bytes, Relaxed);
                return;
            }
        };
        let mut recent: Vec<(u64, u64)> = entry
            .recent
            .take()
            .unwrap_or_default()
            .into_iter()
            .map(|(item, at)| (at, item))
            .collect();
        recent.sort_unstable();
        let failed = recent
            .iter()
            .any(|&(at, item)| filter.insert(item.to_le_bytes(), at).is_err());
        if failed {
            // The filter cannot take them: build larger still, keeping them in `recent`.
            let capacity = filter.config().items_per_generation;
            entry.recent = Some(recent.into_iter().map(|(at, item)| (item, at)).collect());
            self.queue_build(job.scope, job.now_ms, Some(capacity));
            return;
        }
        self.memory_bytes
            .fetch_add(filter.memory_bytes() as u64, Relaxed);
        self.memory_bytes.fetch_sub(old_bytes, Relaxed);
        entry.filter = Some(filter);
        if job.previous_capacity.is_some() {
            metrics.rebuilds.fetch_add(1, Relaxed);
        }
        drop(shard);
        self.enforce_memory_budget(metrics);
    }

    /// A filter for `scope` holding its store rows of the last R, replayed in time order.
    ///
    /// Capacity per generation: the busier of the fullest past window and the average window
    /// ((rows in R)/(G−1)), times the headroom; a rebuild at least doubles the previous capacity
    /// so a scope that outgrows its history is rebuilt O(log growth) times, not once per insert.
    /// Windows are the filter's aligned slots (⌊t/W⌋), as the remote mode counts them; a busier
    /// slot would only grow its generation.
    fn build(
        &self,
        scope: u64,
        now_ms: u64,
        previous_capacity: Option<u64>,
        load: &HistoryLoader<'_>,
    ) -> Result<WindowedBloomFilter> {
        let window_ms = self.config.generation_window_ms();
        // From the start of the oldest slot live now (at or before now − R): the rebuilt filter
        // holds what a live one (or the remote mode's) would.
        let oldest_live_slot =
            (now_ms / window_ms).saturating_sub(self.config.generations as u64 - 1);
        let since_ms =
            (oldest_live_slot * window_ms).min(now_ms.saturating_sub(self.config.retention_ms));
        let history = load(scope, since_ms)?;
        let start_ms = history.first().map_or(now_ms, |s| s.at_ms.min(now_ms));

        let mut fullest_window = 0u64;
        let mut run = (u64::MAX, 0u64); // (slot, rows in it); history is oldest first
        for seen in &history {
            let window = seen.at_ms.max(start_ms) / window_ms;
            run = if window == run.0 {
                (window, run.1 + 1)
            } else {
                (window, 1)
            };
            fullest_window = fullest_window.max(run.1);
        }
        let average_window = (history.len() as u64).div_ceil(self.config.generations as u64 - 1);
        let expected = fullest_window.max(average_window) as f64 * self.config.headroom;
        let capacity = (expected.ceil() as u64)
            .max(self.config.min_items_per_generation)
            .max(previous_capacity.map_or(0, |c| c.saturating_mul(2)));

        let config = WindowConfig::new(
            self.config.generations,
            capacity,
            self.config.fpr,
            Some(window_ms),
        );
        let mut filter = WindowedBloomFilter::new(config, start_ms)?;
        for seen in &history {
            filter.insert(seen.item.to_le_bytes(), seen.at_ms.max(start_ms))?;
        }
        filter.rotate_if_due(now_ms);
        Ok(filter)
    }

    /// Drops the least recently used scopes' filters until memory is ≤ 90% of the budget
    /// (a tenth at a time keeps the O(scopes) sweep amortised). An evicted scope is rebuilt from
    /// the store on next use. A scope with a build in flight is never evicted: its `recent`
    /// set holds items the build's history may lack, and a stale build completing onto the
    /// scope's next entry would install a filter without them (a seen item answered "unseen").
    fn enforce_memory_budget(&self, metrics: &Metrics) {
        let budget = self.config.memory_budget_bytes;
        if self.memory_bytes.load(Relaxed) <= budget {
            return;
        }
        let mut by_age: Vec<(u64, u64)> = Vec::new(); // (last used, scope)
        for shard in &self.shards {
            let shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            by_age.extend(
                shard
                    .iter()
                    .filter(|(_, f)| f.idle())
                    .map(|(&scope, f)| (f.last_used_ms, scope)),
            );
        }
        by_age.sort_unstable();
        let target = budget / 10 * 9;
        let mut resident = self.memory_bytes.load(Relaxed);
        for (_, scope) in by_age {
            if resident <= target {
                break;
            }
            let mut shard = self.shard(scope);
            // Re-checked under the lock: a build may have been queued since the sweep.
            if shard.get(&scope).is_some_and(ScopeFilter::idle) {
                let evicted = shard.remove(&scope).expect("checked above");
                let bytes = evicted.filter.map_or(0, |f| f.memory_bytes() as u64);
                resident = self.memory_bytes.fetch_sub(bytes, Relaxed) - bytes;
                metrics.evictions.fetch_add(1, Relaxed);
            }
        }
    }

    /// Estimated FPR of the scope's resident filter (None when not resident).
    pub fn estimated_fpr(&self, scope: u64) -> Option<f64> {
        self.shard(scope)
            .get(&scope)
            .and_then(|entry| entry.filter.as_ref())
            .map(|filter| filter.estimated_fpr())
    }

    pub fn gauges(&self) -> FilterGauges {
        let mut gauges = FilterGauges {
            resident_filters: 0,
            memory_bytes: self.memory_bytes.load(Relaxed),
            saturation: [0; SATURATION_BOUNDS.len() + 1],
        };
        for shard in &self.shards {
            let shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            for filter in shard.values().filter_map(|entry| entry.filter.as_ref()) {
                let saturation = filter.estimated_fpr() / self.config.fpr_budget;
                let slot = SATURATION_BOUNDS
                    .iter()
                    .position(|&b| saturation <= b)
                    .unwrap_or(SATURATION_BOUNDS.len());
                gauges.saturation[slot] += 1;
                gauges.resident_filters += 1;
            }
        }
        gauges
    }
}
