//! Local per-scope filters and their lifecycle: retention-aligned rotation, sizing from the
//! scope's history, rebuild on saturation, and one memory budget for all scopes.
//!
//! Retention: "seen" means seen within R. Each scope's filter keeps G generations of W with
//! (G−1)·W ≥ R, and the windowed filter guarantees a key stays present for ≥ (G−1)·W after its
//! insertion, so anything seen within R answers "maybe". A filter is (re)built by replaying the
//! store's rows of the last R in time order through a fresh filter, which reproduces the
//! generations a live filter would have had; items recorded after it exists are inserted live.
//! The store is written before the filter, and a build holds its shard lock across the store
//! load, so a concurrent `record` is either in the load or inserted after the build.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

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
    /// All resident filters together stay within this many bytes; idle scopes are evicted.
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

struct ScopeFilter {
    filter: WindowedBloomFilter,
    last_used_ms: u64,
}

/// Reads a scope's rows seen at or after a time (the store, with the gate's accounting).
pub(crate) type HistoryLoader<'a> = dyn Fn(u64, u64) -> Result<Vec<Seen>> + 'a;

/// Every resident scope filter, sharded by scope.
pub(crate) struct LocalFilters {
    config: LifecycleConfig,
    shards: Vec<Mutex<HashMap<u64, ScopeFilter>>>,
    memory_bytes: AtomicU64,
}

impl LocalFilters {
    pub fn new(config: LifecycleConfig) -> Result<Self> {
        config.validate()?;
        Ok(LocalFilters {
            config,
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            memory_bytes: AtomicU64::new(0),
        })
    }

    fn shard(&self, scope: u64) -> std::sync::MutexGuard<'_, HashMap<u64, ScopeFilter>> {
        let index = (scope.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS;
        self.shards[index].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends to `out`, per item, whether the scope's filter says "maybe seen within R".
    /// Builds the filter from the store on first use (or after eviction).
    pub fn probe(
        &self,
        scope: u64,
        items: &[u64],
        now_ms: u64,
        out: &mut Vec<bool>,
        load: &HistoryLoader<'_>,
        metrics: &Metrics,
    ) -> Result<()> {
        let built = {
            let mut shard = self.shard(scope);
            let built = !shard.contains_key(&scope);
            if built {
                let filter = self.build(scope, now_ms, None, load)?;
                self.memory_bytes
                    .fetch_add(filter.memory_bytes() as u64, Relaxed);
                shard.insert(
                    scope,
                    ScopeFilter {
                        filter,
                        last_used_ms: now_ms,
                    },
                );
            }
            let entry = shard
                .get_mut(&scope)
                .expect("present: found or just inserted");
            if entry.filter.rotate_if_due(now_ms) {
                metrics.rotations.fetch_add(1, Relaxed);
            }
            entry.last_used_ms = now_ms;
            out.extend(
                items
                    .iter()
                    .map(|item| entry.filter.contains(item.to_le_bytes())),
            );
            built
        };
        if built {
            self.enforce_memory_budget(metrics);
        }
        Ok(())
    }

    /// Inserts items the scope just saw (already written to the store) into its filter, if
    /// resident; rebuilds it, larger, when it would outgrow its capacity or its estimated FPR
    /// exceeds the budget.
    pub fn record(
        &self,
        scope: u64,
        items: &[u64],
        now_ms: u64,
        load: &HistoryLoader<'_>,
        metrics: &Metrics,
    ) -> Result<()> {
        let mut shard = self.shard(scope);
        let Some(entry) = shard.get_mut(&scope) else {
            return Ok(()); // built from the store, which already has these rows, on next use
        };
        if entry.filter.rotate_if_due(now_ms) {
            metrics.rotations.fetch_add(1, Relaxed);
        }
        entry.last_used_ms = now_ms;
        // The windowed filter rotates early once its newest generation holds its capacity, which
        // would cut retention below (G−1)·W. So a scope about to outgrow its capacity is rebuilt
        // larger from the store (which already holds `items`) instead; capacity rotation never
        // happens. Same for a filter whose estimated FPR has drifted past the budget.
        let capacity = entry.filter.config().items_per_generation;
        let filled_before = entry.filter.newest_len();
        let outgrown = filled_before + items.len() as u64 > capacity;
        if !outgrown {
            for item in items {
                entry.filter.insert(item.to_le_bytes(), now_ms);
            }
        }
        // The fill-based FPR estimate costs a Poisson mixture per generation (~13% of the demo's
        // CPU when done on every record), so it is checked each time the newest generation
        // passes another quarter of its capacity.
        let quarter = (capacity / 4).max(1);
        let check_fpr = filled_before / quarter != entry.filter.newest_len() / quarter;
        if outgrown || (check_fpr && entry.filter.estimated_fpr() > self.config.fpr_budget) {
            let old_bytes = entry.filter.memory_bytes() as u64;
            match self.build(scope, now_ms, Some(capacity), load) {
                Ok(rebuilt) => {
                    self.memory_bytes
                        .fetch_add(rebuilt.memory_bytes() as u64, Relaxed);
                    entry.filter = rebuilt;
                    metrics.rebuilds.fetch_add(1, Relaxed);
                }
                Err(err) => {
                    // The old filter may lack `items`: drop it so the next use rebuilds.
                    shard.remove(&scope);
                    self.memory_bytes.fetch_sub(old_bytes, Relaxed);
                    return Err(err);
                }
            }
            self.memory_bytes.fetch_sub(old_bytes, Relaxed);
        }
        Ok(())
    }

    /// A filter for `scope` holding its store rows of the last R, replayed in time order.
    ///
    /// Capacity per generation: the busier of the fullest past window and the average window
    /// ((rows in R)/(G−1)), times the headroom; a rebuild at least doubles the previous capacity
    /// so a scope that outgrows its history is rebuilt O(log growth) times, not once per insert.
    /// Capacity ≥ the fullest window, and windows are counted on the filter's own schedule
    /// (whole W steps from the first row), so the replay never triggers a capacity rotation.
    fn build(
        &self,
        scope: u64,
        now_ms: u64,
        previous_capacity: Option<u64>,
        load: &HistoryLoader<'_>,
    ) -> Result<WindowedBloomFilter> {
        let window_ms = self.config.generation_window_ms();
        let since_ms = now_ms.saturating_sub(self.config.retention_ms);
        let history = load(scope, since_ms)?;
        let start_ms = history.first().map_or(now_ms, |s| s.at_ms.min(now_ms));

        let mut fullest_window = 0u64;
        let mut run = (u64::MAX, 0u64); // (window index, rows in it); history is oldest first
        for seen in &history {
            let window = (seen.at_ms.max(start_ms) - start_ms) / window_ms;
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

        let config = WindowConfig {
            generations: self.config.generations,
            items_per_generation: capacity,
            fpr: self.config.fpr,
            generation_window_ms: Some(window_ms),
        };
        let mut filter = WindowedBloomFilter::new(config, start_ms)?;
        for seen in &history {
            filter.insert(seen.item.to_le_bytes(), seen.at_ms.max(start_ms));
        }
        filter.rotate_if_due(now_ms);
        Ok(filter)
    }

    /// Evicts the least recently used scopes' filters until memory is ≤ 90% of the budget
    /// (evicting a tenth at a time keeps the O(scopes) sweep amortised). Always safe: an evicted
    /// scope is rebuilt from the store on next use.
    fn enforce_memory_budget(&self, metrics: &Metrics) {
        let budget = self.config.memory_budget_bytes;
        if self.memory_bytes.load(Relaxed) <= budget {
            return;
        }
        let mut by_age: Vec<(u64, u64)> = Vec::new(); // (last used, scope)
        for shard in &self.shards {
            let shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            by_age.extend(shard.iter().map(|(&scope, f)| (f.last_used_ms, scope)));
        }
        by_age.sort_unstable();
        let target = budget / 10 * 9;
        let mut resident = self.memory_bytes.load(Relaxed);
        for (_, scope) in by_age {
            if resident <= target {
                break;
            }
            if let Some(evicted) = self.shard(scope).remove(&scope) {
                let bytes = evicted.filter.memory_bytes() as u64;
                resident = self.memory_bytes.fetch_sub(bytes, Relaxed) - bytes;
                metrics.evictions.fetch_add(1, Relaxed);
            }
        }
    }

    /// Estimated FPR of the scope's resident filter (None when not resident).
    pub fn estimated_fpr(&self, scope: u64) -> Option<f64> {
        self.shard(scope)
            .get(&scope)
            .map(|entry| entry.filter.estimated_fpr())
    }

    pub fn gauges(&self) -> FilterGauges {
        let mut gauges = FilterGauges {
            resident_filters: 0,
            memory_bytes: self.memory_bytes.load(Relaxed),
            saturation: [0; SATURATION_BOUNDS.len() + 1],
        };
        for shard in &self.shards {
            let shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            for entry in shard.values() {
                let saturation = entry.filter.estimated_fpr() / self.config.fpr_budget;
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
