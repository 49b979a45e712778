//! The in-process LRU cache in front of the exact store, as real services have: it remembers
//! exact answers per (scope, item) so repeated lookups skip the store.
//!
//! An entry never claims more than was observed, so it stays right however the clock moves
//! and whoever writes concurrently:
//! - `Seen(t)`: a sighting at `t` is known (a record, or a store row read by a history load —
//!   the latter may be older than the latest sighting). It answers "seen" for windows starting
//!   at or before `t`; for later windows it answers nothing and the caller asks the overlay and
//!   the store. (Answering "unseen" from it was a bug: a history load could put back an older
//!   row after the newer record's entry had been evicted, and a seen item read "unseen".)
//! - `Unseen(s)`: the store had no sighting at or after `s`, and none was recorded here since.
//!   It answers "unseen" for windows starting at or after `s`.
//!
//! "None recorded since" is enforced with per-stripe write counters: [`SeenCache::lookup`]
//! returns a ticket, the caller asks the overlay and the store, and [`SeenCache::put_unseen`]
//! stores the answer only if no sighting of that stripe was put meanwhile — otherwise a request
//! racing a concurrent `record` could cache "unseen" over a fresh sighting. Sharded so request
//! threads rarely contend.

use std::num::NonZeroUsize;
use std::sync::{Mutex, MutexGuard};

use lru::LruCache;

use crate::Seen;

const SHARDS: usize = 16;
/// Write counters per shard: a put_unseen is dropped when any item of its stripe was seen in
/// the meantime, so more stripes mean fewer needlessly dropped answers.
const STRIPES: usize = 64;

/// What the cache knows about one (scope, item).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    /// A sighting at this time (not necessarily the latest).
    Seen(u64),
    /// No sighting at or after this time, as of the store check, and none recorded since.
    Unseen(u64),
}

struct Shard {
    entries: LruCache<(u64, u64), Entry>,
    /// Sightings put per stripe (wrapping); compared by [`SeenCache::put_unseen`].
    writes: [u64; STRIPES],
}

impl Shard {
    /// A sighting of `item` at `at_ms`: one hash lookup (the entry is found or made, then
    /// updated), keeping a later sighting already known; an `Unseen` entry is replaced.
    fn put_seen(&mut self, scope: u64, item: u64, at_ms: u64) {
        let stripe = stripe(scope, item);
        self.writes[stripe] = self.writes[stripe].wrapping_add(1);
        let entry = self
            .entries
            .get_or_insert_mut((scope, item), || Entry::Seen(at_ms));
        *entry = match *entry {
            Entry::Seen(known) => Entry::Seen(known.max(at_ms)),
            Entry::Unseen(_) => Entry::Seen(at_ms),
        };
    }
}

/// Sharded LRU of exact answers.
pub struct SeenCache {
    shards: Vec<Mutex<Shard>>,
}

/// Proof of what the cache had seen when a lookup missed; see [`SeenCache::put_unseen`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket(u64);

fn mix(scope: u64, item: u64) -> u64 {
    // Mix both ids so one heavy scope spreads over every shard.
    (scope ^ item.rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn shard_index(scope: u64, item: u64) -> usize {
    (mix(scope, item) >> 60) as usize % SHARDS
}

fn stripe(scope: u64, item: u64) -> usize {
    (mix(scope, item) >> 32) as usize % STRIPES
}

impl SeenCache {
    /// A cache holding at most `capacity` (scope, item) answers (at least one per shard).
    pub fn new(capacity: usize) -> Self {
        let per_shard =
            NonZeroUsize::new(capacity.div_ceil(SHARDS).max(1)).expect("max(1) is non-zero");
        SeenCache {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        entries: LruCache::new(per_shard),
                        writes: [0; STRIPES],
                    })
                })
                .collect(),
        }
    }

    fn shard(&self, scope: u64, item: u64) -> MutexGuard<'_, Shard> {
        self.shards[shard_index(scope, item)]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// `Ok(seen)` if the cache knows whether `scope` saw `item` at or after `since_ms`;
    /// otherwise a ticket for [`SeenCache::put_unseen`] once the store has answered.
    pub fn lookup(&self, scope: u64, item: u64, since_ms: u64) -> Result<bool, Ticket> {
        let mut shard = self.shard(scope, item);
        match shard.entries.get(&(scope, item)) {
            Some(&Entry::Seen(at)) if at >= since_ms => Ok(true),
            Some(&Entry::Unseen(from)) if since_ms >= from => Ok(false),
            _ => Err(Ticket(shard.writes[stripe(scope, item)])),
        }
    }

    /// Remembers that `scope` saw `item` at `at_ms` (keeping a later time already known).
    pub fn put_seen(&self, scope: u64, item: u64, at_ms: u64) {
        self.shard(scope, item).put_seen(scope, item, at_ms);
    }

    /// [`SeenCache::put_seen`] of every row of one scope, taking each shard's lock once (a
    /// filter build's history: hundreds of rows). Within a shard the rows go in in their order
    /// (a stable sort), so a history given oldest first leaves its newest rows the most recently
    /// used, as one-by-one puts would.
    pub fn put_seen_many(&self, scope: u64, rows: &[Seen]) {
        let mut by_shard: Vec<(usize, Seen)> = rows
            .iter()
            .map(|&seen| (shard_index(scope, seen.item), seen))
            .collect();
        by_shard.sort_by_key(|&(shard, _)| shard);
        for run in by_shard.chunk_by(|a, b| a.0 == b.0) {
            let mut shard = self.shards[run[0].0]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            for &(_, seen) in run {
                shard.put_seen(scope, seen.item, seen.at_ms);
            }
        }
    }

    /// Remembers that the store had no sighting of `item` by `scope` at or after `since_ms`,
    /// unless a sighting of the item's stripe was put after `ticket` was issued (the store's
    /// answer may predate it). The caller must have consulted the pending overlay and the store
    /// after taking the ticket.
    pub fn put_unseen(&self, scope: u64, item: u64, since_ms: u64, ticket: Ticket) {
        let mut shard = self.shard(scope, item);
        if shard.writes[stripe(scope, item)] != ticket.0 {
            return;
        }
        let keep = match shard.entries.peek(&(scope, item)) {
            Some(&Entry::Seen(at)) => at >= since_ms,
            Some(&Entry::Unseen(from)) => from <= since_ms,
            None => false,
        };
        if !keep {
            shard.entries.put((scope, item), Entry::Unseen(since_ms));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_sighting_never_answers_unseen() {
        let cache = SeenCache::new(64);
        cache.put_seen(1, 7, 60);
        assert_eq!(cache.lookup(1, 7, 50), Ok(true));
        // A window starting after the known sighting: unknown, not "unseen".
        assert!(cache.lookup(1, 7, 147).is_err());
    }

    #[test]
    fn unseen_answers_only_windows_it_covers() {
        let cache = SeenCache::new(64);
        let ticket = cache.lookup(1, 7, 100).unwrap_err();
        cache.put_unseen(1, 7, 100, ticket);
        assert_eq!(cache.lookup(1, 7, 100), Ok(false));
        assert_eq!(cache.lookup(1, 7, 150), Ok(false));
        assert!(
            cache.lookup(1, 7, 90).is_err(),
            "an earlier window was not checked"
        );
        cache.put_seen(1, 7, 160);
        assert_eq!(cache.lookup(1, 7, 150), Ok(true));
    }

    #[test]
    fn a_sighting_after_the_ticket_wins_over_a_late_unseen() {
        let cache = SeenCache::new(1); // one entry per shard: the sighting is evicted at once
        let ticket = cache.lookup(1, 7, 100).unwrap_err();
        // Meanwhile a concurrent request records the item, and its entry is evicted.
        cache.put_seen(1, 7, 120);
        for other in 0..1_000 {
            cache.put_seen(2, other, 1);
        }
        cache.put_unseen(1, 7, 100, ticket);
        assert_ne!(cache.lookup(1, 7, 100), Ok(false));
    }

    /// A history's rows put at once answer as the same rows put one by one: the latest time of
    /// a repeated item wins, an `Unseen` entry is replaced, and the stripes' write counters move
    /// (a ticket taken before is refused).
    #[test]
    fn many_rows_at_once_match_one_by_one() {
        let rows: Vec<Seen> = (0..500u64)
            .map(|i| Seen {
                item: i % 180,
                at_ms: (i * 37) % 1_000,
            })
            .collect();
        let (one, many) = (SeenCache::new(10_000), SeenCache::new(10_000));
        let mut tickets = Vec::new();
        for cache in [&one, &many] {
            let ticket = cache.lookup(3, 5, 10).unwrap_err();
            cache.put_unseen(3, 5, 10, ticket);
            tickets.push(cache.lookup(3, 6, 10).unwrap_err());
        }
        for seen in &rows {
            one.put_seen(3, seen.item, seen.at_ms);
        }
        many.put_seen_many(3, &rows);
        for item in 0..200 {
            for since in [0, 400, 900, 999, 1_000] {
                assert_eq!(
                    one.lookup(3, item, since).ok(),
                    many.lookup(3, item, since).ok(),
                    "item {item} since {since}"
                );
            }
        }
        assert_eq!(many.lookup(3, 5, 10).ok(), Some(true), "Unseen replaced");
        for (cache, ticket) in [&one, &many].into_iter().zip(tickets) {
            cache.put_unseen(3, 6, 10, ticket);
            assert_eq!(cache.lookup(3, 6, 10).ok(), Some(true));
        }
    }
}
