//! Local per-scope filters and their lifecycle: retention-aligned rotation, sizing from the
//! scope's history, rebuild on saturation, one memory budget for all scopes, builds on a pool of
//! threads ordered by demand, and snapshots that survive a restart.
//!
//! Retention: "seen" means seen within R. Each scope's filter keeps G generations of W with
//! (G−1)·W ≥ R, and the windowed filter guarantees a key stays present for ≥ (G−1)·W after its
//! insertion, so anything seen within R answers "maybe". A filter is (re)built by replaying the
//! store's rows of the last R in time order through a fresh filter, which reproduces the
//! generations a live filter would have had; items recorded after it exists are inserted live.
//!
//! The cold path: a scope's first use creates its build job and queues it for the builder pool
//! (`build_queue`; busiest scopes first: each request that finds the job still queued raises its
//! priority).
//! The request itself then builds the filter (or waits for the build already running) when the
//! build is cheaper than the exact-path lookups it saves (the rule and its measurements are in
//! `costs`); otherwise it takes the exact path and the pool builds. A rebuild (saturation,
//! growth) always runs in the pool, the old filter answering meanwhile.
//!
//! No item is lost to a build running beside requests: a served item is in the gate's pending
//! overlay before it reaches a filter, and a build's history is the overlay plus the store read
//! *after* the job was created; items recorded from the moment it is created go to the scope's
//! `recent` set, installed with the filter. So a concurrent `record` is always in the build's
//! history or in `recent`.
//!
//! Restarts (with [`Persistence`]): the filters are written to a snapshot (see `snapshot`)
//! periodically and at shutdown; at start each saved filter is loaded and must catch up — add
//! the store rows seen at or after its high-water mark minus the clock slack — before it
//! answers. Catch-ups are build jobs like any other (one store query each), queued busiest
//! scope first, and a request for a scope still waiting runs its catch-up itself.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use bloomgate::{FilterCodec, WindowConfig, WindowedBloomFilter};

use crate::config::{GateConfig, LifecycleConfig, Persistence};
use crate::exact::core::Core;
use crate::filters::build_queue::{BuildQueue, BuildSlot};
use crate::filters::snapshot::{self, Fingerprint};
use crate::filters::{FilterBackend, HistorySource, Probe};
use crate::metrics::{FilterGauges, Metrics, SATURATION_BOUNDS};
use crate::{Error, Result};

const SHARDS: usize = 64;

/// One scope's filter state.
struct ScopeFilter {
    /// The filter requests are answered from; `None` until the scope's first build (or its
    /// catch-up after a restart) is installed: until then its requests build or take the exact
    /// path.
    filter: Option<WindowedBloomFilter>,
    /// `Some` from the moment a (re)build is queued until its result is installed: the items
    /// recorded meanwhile, which the build's history snapshot may lack; probes consult it beside
    /// the old filter.
    recent: Option<HashMap<u64, u64>>,
    /// The queued or running (re)build, if any.
    build: Option<Arc<BuildSlot>>,
    /// A filter loaded from the snapshot and its high-water mark, waiting for its catch-up.
    restored: Option<(WindowedBloomFilter, u64)>,
    /// Bytes this entry counts in the memory total (its filter, or its restored one).
    bytes: u64,
    /// History rows the last build read (the cost estimate of the next one).
    rows: Option<u64>,
    /// The latest request time the filter is complete up to (the snapshot's high-water mark).
    high_water_ms: u64,
    /// The request time the filter was built for: it holds the rows seen at or after this
    /// minus R, so it cannot answer for an earlier request time (see `answer`).
    built_ms: u64,
    /// Probes of this scope (snapshot order of catch-ups); requests that found its build queued.
    uses: u64,
    demand: u64,
    last_used_ms: u64,
}

impl ScopeFilter {
    fn new(now_ms: u64, build: Arc<BuildSlot>) -> Self {
        ScopeFilter {
            filter: None,
            recent: Some(HashMap::new()),
            build: Some(build),
            restored: None,
            bytes: 0,
            rows: None,
            high_water_ms: now_ms,
            built_ms: now_ms,
            uses: 0,
            demand: 1,
            last_used_ms: now_ms,
        }
    }

    /// Built and no (re)build in flight: the only state in which dropping it loses nothing.
    fn idle(&self) -> bool {
        self.filter.is_some() && self.recent.is_none() && self.build.is_none()
    }

    /// Appends the filter's answers (with the items recorded since a rebuild was queued) and
    /// returns true — or returns false, appending nothing, when the filter cannot answer for
    /// `now_ms`: requests of one scope may run with clocks a little apart, and a filter built
    /// for a later time lacks the rows that only an earlier request still counts as seen, as one
    /// rotated by a later request may have dropped them. With G generations of W, a generation
    /// is dropped only once its items are older than newest start − (G−1)·W, so the filter
    /// holds every item seen within R of `now_ms` iff `now_ms` ≥ the time it was built for and
    /// `now_ms` ≥ its newest generation's start − ((G−1)·W − R). (Per-scope clocks that never
    /// go backwards always pass.)
    fn answer(
        &mut self,
        items: &[u64],
        now_ms: u64,
        out: &mut Vec<bool>,
        metrics: &Metrics,
        lifecycle: &LifecycleConfig,
    ) -> bool {
        let filter = self.filter.as_mut().expect("answer needs a filter");
        if filter.rotate_if_due(now_ms) {
            metrics.rotations.fetch_add(1, Relaxed);
        }
        let spare = (lifecycle.generations as u64 - 1) * lifecycle.generation_window_ms()
            - lifecycle.retention_ms;
        // The clock's slot start plays the newest generation's start (aligned slots).
        let newest_start = filter.slot_start_ms(filter.clock_slot());
        if now_ms < self.built_ms || now_ms + spare < newest_start {
            return false;
        }
        let filter = &*filter;
        match &self.recent {
            None => out.extend(items.iter().map(|item| filter.contains(item.to_le_bytes()))),
            Some(recent) => out.extend(
                items
                    .iter()
                    .map(|item| recent.contains_key(item) || filter.contains(item.to_le_bytes())),
            ),
        }
        true
    }
}

/// Persistence settings with the fingerprint snapshots are written and read with.
struct Persist {
    config: Persistence,
    fingerprint: Fingerprint,
    /// Tells the periodic snapshot thread to stop.
    stop: (Mutex<bool>, Condvar),
}

/// Every resident scope filter, sharded by scope (a request locks only its scope's shard).
pub(crate) struct LocalFilters {
    config: LifecycleConfig,
    shards: Vec<Mutex<HashMap<u64, ScopeFilter>>>,
    memory_bytes: AtomicU64,
    history: Arc<dyn HistorySource>,
    metrics: Arc<Metrics>,
    queue: BuildQueue,
    persist: Option<Persist>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl LocalFilters {
    /// The local filters of a gate: restores the snapshot (with persistence), then starts the
    /// builder pool and the periodic snapshot thread.
    pub fn start(gate: &GateConfig, core: Arc<Core>, metrics: Arc<Metrics>) -> Result<Arc<Self>> {
        let config = gate.lifecycle.clone();
        config.validate()?;
        let persist = match &gate.persistence {
            None => None,
            Some(persistence) => Some(Persist {
                fingerprint: Fingerprint::new(&config, core.store().identity()?),
                config: persistence.clone(),
                stop: (Mutex::new(false), Condvar::new()),
            }),
        };
        let filters = Arc::new(LocalFilters {
            config,
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            memory_bytes: AtomicU64::new(0),
            history: core,
            metrics,
            queue: BuildQueue::default(),
            persist,
            threads: Mutex::new(Vec::new()),
        });
        filters.restore();
        let threads = match gate.build_threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let spawn = |name: String, work: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name)
                .spawn(work)
                .map_err(|e| Error::InvalidConfig(format!("spawning a gate thread: {e}")))
        };
        let mut handles = Vec::new();
        for i in 0..threads {
            let pool = filters.clone();
            handles.push(spawn(
                format!("bloomgate-build-{i}"),
                Box::new(move || pool.run_builds()),
            )?);
        }
        if let Some(every) = filters.persist.as_ref().and_then(|p| p.config.every) {
            let writer = filters.clone();
            handles.push(spawn(
                "bloomgate-snapshot".into(),
                Box::new(move || writer.run_snapshots(every)),
            )?);
        }
        *filters.threads.lock().unwrap_or_else(|e| e.into_inner()) = handles;
        Ok(filters)
    }

    fn shard(&self, scope: u64) -> MutexGuard<'_, HashMap<u64, ScopeFilter>> {
        let index = (scope.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS;
        self.shards[index].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Loads the snapshot, if any: each filter waits for its catch-up, queued busiest first.
    fn restore(&self) {
        let Some(persist) = &self.persist else {
            return;
        };
        // A snapshot can hold at most what the memory budget lets the filters hold, plus the
        // framing; anything larger is not read.
        let max_bytes = self
            .config
            .memory_budget_bytes
            .saturating_mul(2)
            .saturating_add(64 << 20);
        let restored = match snapshot::read(&persist.config.dir, &persist.fingerprint, max_bytes) {
            Ok(Some((restored, _clean))) => restored,
            Ok(None) => return,
            Err(_refused) => {
                self.metrics.snapshots_refused.fetch_add(1, Relaxed);
                return;
            }
        };
        self.metrics
            .snapshots_refused
            .fetch_add(restored.refused, Relaxed);
        let mut saved = restored.filters;
        saved.sort_unstable_by_key(|s| std::cmp::Reverse(s.uses));
        let budget = self.config.memory_budget_bytes;
        for s in saved {
            let bytes = s.filter.memory_bytes() as u64;
            if self.memory_bytes.load(Relaxed) + bytes > budget {
                continue; // the busiest scopes fill the budget; the rest build on first use
            }
            self.memory_bytes.fetch_add(bytes, Relaxed);
            let slot = BuildSlot::new(s.scope, s.high_water_ms, None);
            let mut entry = ScopeFilter::new(s.high_water_ms, slot.clone());
            entry.restored = Some((s.filter, s.high_water_ms));
            entry.bytes = bytes;
            entry.rows = Some(0);
            entry.uses = s.uses;
            entry.demand = s.uses.max(1);
            self.shard(s.scope).insert(s.scope, entry);
            self.queue.push(&slot, s.uses.max(1), true);
            self.metrics.restored_filters.fetch_add(1, Relaxed);
        }
    }

    /// A builder thread: claims queued jobs, highest demand first, until stopped.
    fn run_builds(&self) {
        while let Some(slot) = self.queue.pop() {
            if slot.claim() {
                self.run_build(&slot);
            }
        }
    }

    /// Writes a snapshot every `every` until shutdown.
    fn run_snapshots(&self, every: std::time::Duration) {
        let Some(persist) = &self.persist else {
            return;
        };
        let (stopped, wake) = &persist.stop;
        let mut stop = stopped.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let (guard, _) = wake
                .wait_timeout(stop, every)
                .unwrap_or_else(|e| e.into_inner());
            stop = guard;
            if *stop {
                return;
            }
            // Errors surface at the shutdown snapshot; a periodic one failing just waits for the
            // next.
            let _ = self.write_snapshot(false);
        }
    }

    /// Runs a claimed job: builds (or catches up) outside every lock, installs the result with
    /// the items recorded meanwhile, and wakes whoever waits for it.
    fn run_build(&self, slot: &Arc<BuildSlot>) {
        let scope = slot.scope;
        let restored = self
            .shard(scope)
            .get_mut(&scope)
            .and_then(|entry| entry.restored.take());
        let started = Instant::now();
        let built = match restored {
            Some((filter, high_water_ms)) => self.catch_up(slot, filter, high_water_ms),
            None => self
                .build(scope, slot.now_ms, slot.previous_capacity)
                .map(|(filter, rows)| (filter, rows, false)),
        };
        if let Ok((_, rows, _)) = &built {
            self.metrics.costs.observe_build(*rows, started.elapsed());
        }
        self.install(slot, built);
        slot.finish();
        self.queue.finished();
        self.enforce_memory_budget();
    }

    /// A restored filter plus the store rows seen since its high-water mark (minus the clock
    /// slack); its generations grow as they need. One that cannot take them is rebuilt whole.
    fn catch_up(
        &self,
        slot: &BuildSlot,
        mut filter: WindowedBloomFilter,
        high_water_ms: u64,
    ) -> Result<(WindowedBloomFilter, u64, bool)> {
        let slack = self.persist.as_ref().map_or(0, |p| p.config.clock_slack_ms);
        let history = self
            .history
            .load_history(slot.scope, high_water_ms.saturating_sub(slack))?;
        let failed = history
            .iter()
            .any(|seen| filter.insert(seen.item.to_le_bytes(), seen.at_ms).is_err());
        if failed {
            let (filter, rows) = self.build(slot.scope, high_water_ms, None)?;
            return Ok((filter, rows, false));
        }
        Ok((filter, history.len() as u64, true))
    }

    /// Installs a finished job's filter (merging `recent`), or drops the scope if it failed.
    fn install(&self, slot: &Arc<BuildSlot>, built: Result<(WindowedBloomFilter, u64, bool)>) {
        let scope = slot.scope;
        let mut shard = self.shard(scope);
        let Some(entry) = shard.get_mut(&scope) else {
            return;
        };
        if !entry.build.as_ref().is_some_and(|b| Arc::ptr_eq(b, slot)) {
            return; // not this entry's job (cannot happen: entries with a job are never dropped)
        }
        let (mut filter, rows, caught_up) = match built {
            Ok(built) => built,
            Err(_) => {
                // The store failed (requests see the same failure on the exact path). Drop the
                // scope: its next use creates a fresh build.
                let bytes = entry.bytes;
                shard.remove(&scope);
                self.memory_bytes.fetch_sub(bytes, Relaxed);
                return;
            }
        };
        let recent = entry.recent.take().unwrap_or_default();
        let mut sorted: Vec<(u64, u64)> = recent.iter().map(|(&item, &at)| (at, item)).collect();
        sorted.sort_unstable();
        let mut high_water_ms = entry.high_water_ms.max(slot.now_ms);
        let mut failed = false;
        for &(at, item) in &sorted {
            failed |= filter.insert(item.to_le_bytes(), at).is_err();
            high_water_ms = high_water_ms.max(at);
        }
        if failed {
            // The filter cannot take them (a generation at its growth limit): build larger.
            let capacity = filter.config().items_per_generation;
            entry.recent = Some(recent);
            let next = BuildSlot::new(scope, slot.now_ms, Some(capacity));
            entry.build = Some(next.clone());
            let demand = entry.demand;
            drop(shard);
            self.queue.push(&next, demand, true);
            return;
        }
        let bytes = filter.memory_bytes() as u64;
        self.memory_bytes.fetch_add(bytes, Relaxed);
        self.memory_bytes.fetch_sub(entry.bytes, Relaxed);
        entry.bytes = bytes;
        entry.filter = Some(filter);
        entry.built_ms = slot.now_ms;
        entry.build = None;
        entry.rows = Some(rows);
        entry.high_water_ms = high_water_ms;
        entry.demand = 1;
        if slot.previous_capacity.is_some() {
            self.metrics.rebuilds.fetch_add(1, Relaxed);
        }
        if caught_up {
            self.metrics.catch_ups.fetch_add(1, Relaxed);
        }
    }

    /// A filter for `scope` holding its store rows of the last R, replayed in time order, and
    /// the rows read.
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
    ) -> Result<(WindowedBloomFilter, u64)> {
        let window_ms = self.config.generation_window_ms();
        // From the start of the oldest slot live now (at or before now − R): the rebuilt filter
        // holds what a live one (or the remote mode's) would.
        let oldest_live_slot =
            (now_ms / window_ms).saturating_sub(self.config.generations as u64 - 1);
        let since_ms =
            (oldest_live_slot * window_ms).min(now_ms.saturating_sub(self.config.retention_ms));
        let history = self.history.load_history(scope, since_ms)?;
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
        Ok((filter, history.len() as u64))
    }

    /// Brings `entry`'s share of the memory total up to date with its filter (which allocates
    /// as it takes items and frees generations as it rotates); returns the new total.
    fn account(&self, entry: &mut ScopeFilter) -> u64 {
        let bytes = match (&entry.filter, &entry.restored) {
            (Some(filter), _) | (None, Some((filter, _))) => filter.memory_bytes() as u64,
            (None, None) => 0,
        };
        let was = std::mem::replace(&mut entry.bytes, bytes);
        if bytes >= was {
            self.memory_bytes.fetch_add(bytes - was, Relaxed) + (bytes - was)
        } else {
            self.memory_bytes.fetch_sub(was - bytes, Relaxed) - (was - bytes)
        }
    }

    /// Drops the least recently used scopes' filters until memory is ≤ 90% of the budget
    /// (a tenth at a time keeps the O(scopes) sweep amortised). An evicted scope is rebuilt from
    /// the store on next use. A scope with a build in flight is never evicted: its `recent`
    /// set holds items the build's history may lack, and a stale build completing onto the
    /// scope's next entry would install a filter without them (a seen item answered "unseen").
    fn enforce_memory_budget(&self) {
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
                resident = self.memory_bytes.fetch_sub(evicted.bytes, Relaxed) - evicted.bytes;
                self.metrics.evictions.fetch_add(1, Relaxed);
            }
        }
    }

    /// Writes every filter (built, or restored and still waiting) to the snapshot. A filter
    /// with a rebuild in flight lacks the items in its `recent` set, so its high-water mark is
    /// lowered to the oldest of them: the next start's catch-up reads them back from the store.
    fn write_snapshot(&self, clean: bool) -> Result<()> {
        let Some(persist) = &self.persist else {
            return Ok(());
        };
        let mut entries = Vec::new();
        for shard in &self.shards {
            let shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            for (&scope, entry) in shard.iter() {
                let (filter, high_water_ms) = match (&entry.filter, &entry.restored) {
                    (Some(filter), _) => {
                        let oldest_recent = entry
                            .recent
                            .iter()
                            .flat_map(|recent| recent.values().copied())
                            .min()
                            .unwrap_or(u64::MAX);
                        (filter, entry.high_water_ms.min(oldest_recent))
                    }
                    (None, Some((filter, high_water_ms))) => (filter, *high_water_ms),
                    (None, None) => continue,
                };
                entries.push((scope, high_water_ms, entry.uses, filter.to_bytes()));
            }
        }
        snapshot::write(&persist.config.dir, &persist.fingerprint, clean, &entries)?;
        self.metrics.snapshot_writes.fetch_add(1, Relaxed);
        Ok(())
    }
}

impl FilterBackend for LocalFilters {
    /// A scope without a filter gets its build created (and queued) on first use; then this
    /// request builds it, waits for it, or — when the exact path is cheaper — answers
    /// [`Probe::Unfiltered`] and raises the queued build's priority.
    fn probe(&self, scope: u64, items: &[u64], now_ms: u64, out: &mut Vec<bool>) -> Result<Probe> {
        let mut shard = self.shard(scope);
        let entry = shard.entry(scope).or_insert_with(|| {
            let slot = BuildSlot::new(scope, now_ms, None);
            self.queue.push(&slot, 1, true);
            ScopeFilter::new(now_ms, slot)
        });
        entry.last_used_ms = now_ms;
        entry.uses += 1;
        if entry.filter.is_some() {
            let answered = entry.answer(items, now_ms, out, &self.metrics, &self.config);
            self.account(entry);
            return Ok(if answered {
                Probe::Filtered
            } else {
                out.resize(out.len() + items.len(), true);
                Probe::Unfiltered
            });
        }
        let slot = entry
            .build
            .clone()
            .expect("a scope without a filter has a build queued");
        let rows = if entry.restored.is_some() {
            Some(0) // a catch-up reads only what came after the snapshot
        } else {
            entry.rows
        };
        if !self
            .metrics
            .costs
            .build_pays(rows, items.len(), entry.demand - 1)
        {
            entry.demand += 1;
            let demand = entry.demand;
            drop(shard);
            self.queue.push(&slot, demand, false);
            out.resize(out.len() + items.len(), true);
            return Ok(Probe::Unfiltered);
        }
        drop(shard);
        if slot.claim() {
            self.metrics.builds_inline.fetch_add(1, Relaxed);
            self.run_build(&slot);
        } else {
            self.metrics.build_waits.fetch_add(1, Relaxed);
            slot.wait();
        }
        let mut shard = self.shard(scope);
        let answered = match shard.get_mut(&scope) {
            Some(entry) if entry.filter.is_some() => {
                let answered = entry.answer(items, now_ms, out, &self.metrics, &self.config);
                self.account(entry);
                answered
            }
            // The build failed (the exact path will meet the store's error) or was re-queued
            // larger.
            _ => false,
        };
        if answered {
            Ok(Probe::Filtered)
        } else {
            out.resize(out.len() + items.len(), true);
            Ok(Probe::Unfiltered)
        }
    }

    /// Adds items the scope was just shown (already in the pending overlay) to its filter, if
    /// resident, before the request replies. A scope whose estimated FPR passed the budget (or
    /// whose filter cannot grow further) gets a larger rebuild queued; until it is installed the
    /// old filter keeps answering, with the new items beside it.
    fn record(&self, scope: u64, items: &[u64], now_ms: u64) -> Result<()> {
        let mut shard = self.shard(scope);
        let Some(entry) = shard.get_mut(&scope) else {
            return Ok(()); // built from the overlay and the store, which have these rows, on next use
        };
        entry.last_used_ms = now_ms;
        if let Some(recent) = &mut entry.recent {
            for &item in items {
                recent.insert(item, now_ms);
            }
            return Ok(());
        }
        let filter = entry
            .filter
            .as_mut()
            .expect("a scope without a filter has a build queued");
        if filter.rotate_if_due(now_ms) {
            self.metrics.rotations.fetch_add(1, Relaxed);
        }
        // A generation that outgrows its capacity grows (the windowed filter never rotates
        // early), so retention holds under any load; a filter whose estimated FPR drifted past
        // the budget is rebuilt larger, as is one that cannot grow any further (the items wait
        // in `recent` for the rebuild).
        let capacity = filter.config().items_per_generation;
        let filled_before = filter.newest_len();
        let outgrown = items
            .iter()
            .any(|item| filter.insert(item.to_le_bytes(), now_ms).is_err());
        // The fill-based FPR estimate costs a Poisson mixture per generation (~13% of the demo's
        // CPU when done on every record), so it is checked each time the newest generation
        // passes another quarter of its capacity.
        let quarter = (capacity / 4).max(1);
        let check_fpr = filled_before / quarter != filter.newest_len() / quarter;
        let rebuild = outgrown || (check_fpr && filter.estimated_fpr() > self.config.fpr_budget);
        entry.high_water_ms = entry.high_water_ms.max(now_ms);
        // Inserts allocate (a new generation, a generation's next link): the total follows.
        let over_budget = self.account(entry) > self.config.memory_budget_bytes;
        if rebuild {
            entry.recent = Some(items.iter().map(|&item| (item, now_ms)).collect());
            let slot = BuildSlot::new(scope, now_ms, Some(capacity));
            entry.build = Some(slot.clone());
            drop(shard);
            self.queue.push(&slot, 1, true);
        } else {
            drop(shard);
        }
        if over_budget {
            self.enforce_memory_budget();
        }
        Ok(())
    }

    fn flush(&self) {
        self.queue.flush();
    }

    fn persist(&self) -> Result<()> {
        self.write_snapshot(false)
    }

    /// Stops the builders and the snapshot thread, then writes the last snapshot (marked clean).
    fn shutdown(&self) -> Result<()> {
        self.queue.stop();
        if let Some(persist) = &self.persist {
            *persist.stop.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
            persist.stop.1.notify_all();
        }
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for thread in threads {
            let _ = thread.join();
        }
        self.write_snapshot(true)
    }

    fn gauges(&self) -> FilterGauges {
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

    fn estimated_fpr(&self, scope: u64) -> Option<f64> {
        self.shard(scope)
            .get(&scope)
            .and_then(|entry| entry.filter.as_ref())
            .map(|filter| filter.estimated_fpr())
    }
}
