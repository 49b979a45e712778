//! Served items on their way to the store: recorded by the gate, not yet committed by the
//! background recorder.
//!
//! The gate's promise is that an item served is never shown again, starting with the very next
//! request of its scope, while the store write happens later in a batch. Every exact answer and
//! every filter build therefore reads this overlay *before* the store: a row is added here before
//! it is queued and removed only after its batch commits, so at any moment it is in the overlay,
//! in the store, or both.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::Seen;

const SHARDS: usize = 64;

/// Uncommitted sightings per scope: item → latest time.
pub(crate) struct Pending {
    shards: Vec<Mutex<HashMap<u64, HashMap<u64, u64>>>>,
}

impl Pending {
    pub fn new() -> Self {
        Pending {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    fn shard(&self, scope: u64) -> MutexGuard<'_, HashMap<u64, HashMap<u64, u64>>> {
        let index = (scope.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS;
        self.shards[index].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `scope` saw `items` at `at_ms` (a later time already known is kept).
    pub fn add(&self, scope: u64, items: &[u64], at_ms: u64) {
        let mut shard = self.shard(scope);
        let rows = shard.entry(scope).or_default();
        for &item in items {
            let at = rows.entry(item).or_insert(at_ms);
            *at = (*at).max(at_ms);
        }
    }

    /// For each `items[i]` with `ask[i]` set, sets `seen[i]` (and clears `ask[i]`) when the
    /// overlay knows the scope saw it at or after `since_ms`.
    pub fn answer(
        &self,
        scope: u64,
        items: &[u64],
        since_ms: u64,
        ask: &mut [bool],
        seen: &mut [bool],
    ) {
        let shard = self.shard(scope);
        let Some(rows) = shard.get(&scope) else {
            return;
        };
        for (i, item) in items.iter().enumerate() {
            if ask[i] && rows.get(item).is_some_and(|&at| at >= since_ms) {
                seen[i] = true;
                ask[i] = false;
            }
        }
    }

    /// Appends the scope's uncommitted rows seen at or after `since_ms`.
    pub fn snapshot(&self, scope: u64, since_ms: u64, out: &mut Vec<Seen>) {
        if let Some(rows) = self.shard(scope).get(&scope) {
            out.extend(
                rows.iter()
                    .filter(|&(_, &at)| at >= since_ms)
                    .map(|(&item, &at_ms)| Seen { item, at_ms }),
            );
        }
    }

    /// Forgets committed rows (unless the item was seen again later, still uncommitted).
    pub fn committed(&self, rows: &[(u64, Seen)]) {
        for run in rows.chunk_by(|a, b| a.0 == b.0) {
            let scope = run[0].0;
            let mut shard = self.shard(scope);
            let Some(pending) = shard.get_mut(&scope) else {
                continue;
            };
            for (_, seen) in run {
                if pending.get(&seen.item) == Some(&seen.at_ms) {
                    pending.remove(&seen.item);
                }
            }
            if pending.is_empty() {
                shard.remove(&scope);
            }
        }
    }
}
