//! The in-process LRU cache in front of the exact store, as real services have: it remembers
//! exact answers (seen at time t, or not seen) per (scope, item).
//!
//! It is coherent for the process that writes through it (every `record` updates it), which is
//! how the gate uses it; answers depend on the retention window only through the stored time, so
//! entries never go stale as the clock moves. Sharded so request threads rarely contend.

use std::num::NonZeroUsize;
use std::sync::Mutex;

use lru::LruCache;

const SHARDS: usize = 16;

/// What the cache knows about one (scope, item): last seen at this time, or known unseen.
type Entry = Option<u64>;

/// Sharded LRU of exact answers.
pub struct SeenCache {
    shards: Vec<Mutex<LruCache<(u64, u64), Entry>>>,
}

impl SeenCache {
    /// A cache holding at most `capacity` (scope, item) answers (at least one per shard).
    pub fn new(capacity: usize) -> Self {
        let per_shard =
            NonZeroUsize::new(capacity.div_ceil(SHARDS).max(1)).expect("max(1) is non-zero");
        SeenCache {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(LruCache::new(per_shard)))
                .collect(),
        }
    }

    fn shard(&self, scope: u64, item: u64) -> &Mutex<LruCache<(u64, u64), Entry>> {
        // Mix both ids so one heavy scope spreads over every shard.
        let mixed = (scope ^ item.rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        &self.shards[(mixed >> 60) as usize % SHARDS]
    }

    /// `Some(seen)` if the cache knows whether `scope` saw `item` at or after `since_ms`.
    pub fn lookup(&self, scope: u64, item: u64, since_ms: u64) -> Option<bool> {
        let mut shard = self
            .shard(scope, item)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        shard
            .get(&(scope, item))
            .map(|entry| entry.is_some_and(|at| at >= since_ms))
    }

    /// Remembers that `scope` saw `item` at `at_ms` (keeping a later time already known).
    pub fn put_seen(&self, scope: u64, item: u64, at_ms: u64) {
        let mut shard = self
            .shard(scope, item)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let newest = match shard.peek(&(scope, item)) {
            Some(Some(known)) => (*known).max(at_ms),
            _ => at_ms,
        };
        shard.put((scope, item), Some(newest));
    }

    /// Remembers that `scope` has not seen `item` within the window the store was asked about.
    /// A known sighting is never overwritten: it stays the better answer.
    pub fn put_unseen(&self, scope: u64, item: u64) {
        let mut shard = self
            .shard(scope, item)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if !matches!(shard.peek(&(scope, item)), Some(Some(_))) {
            shard.put((scope, item), None);
        }
    }
}
