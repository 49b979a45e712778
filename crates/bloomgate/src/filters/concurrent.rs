//! Concurrent classic and blocked Bloom filters: many threads insert and query through `&self`.
//!
//! Same bit layout as [`BloomFilter`] / [`BlockedBloomFilter`] (bits are `AtomicU64` words, set
//! with `fetch_or`), so a plain filter converts to a concurrent one and back without copying
//! bits. Memory ordering is `Relaxed` throughout: a filter only ever gains bits and no other data
//! is published through it, so the only guarantee needed is that an insert is visible to a query
//! ordered after it by some other synchronisation (thread join, channel, lock) — which Relaxed
//! atomics plus that synchronisation provide. A query racing with an insert of the same key may
//! see either answer.
//!
//! `len` is kept in cache-line-padded counter stripes chosen by hash bits, so threads inserting
//! different keys rarely write the same line. Two threads inserting the same new key at the same
//! moment may both count it (each set some bit first).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::layout::{BitLayout, Geometry, StorageUnit};
use super::prefetch::rolling;
use super::{Blocked, Bloom, Classic, FastLocal};
use crate::error::Result;
use crate::hash::KeyHash;
use crate::params::Params;

#[repr(align(64))]
#[derive(Default)]
struct PaddedCounter(AtomicU64);

/// Insert counter split over cache lines (see the module comment).
#[derive(Default)]
struct StripedLen([PaddedCounter; 8]);

impl StripedLen {
    fn starting_at(len: u64) -> Self {
        let counter = StripedLen::default();
        counter.0[0].0.store(len, Relaxed);
        counter
    }

    #[inline]
    fn add_one(&self, h: KeyHash) {
        self.0[(h.lo & 7) as usize].0.fetch_add(1, Relaxed);
    }

    fn total(&self) -> u64 {
        self.0
            .iter()
            .map(|c| c.0.load(Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

/// A Bloom filter of layout `L` with insert/contains through `&self`. `Send + Sync`.
pub struct ConcurrentBloom<L: BitLayout> {
    params: Params,
    seed: u64,
    units: <L::Unit as StorageUnit>::AtomicStore,
    len: StripedLen,
    geometry: Geometry,
    layout: L,
}

/// A classic Bloom filter with insert/contains through `&self`. `Send + Sync`.
pub type ConcurrentBloomFilter = ConcurrentBloom<Classic>;

/// A blocked Bloom filter with insert/contains through `&self`. `Send + Sync`.
pub type ConcurrentBlockedBloomFilter = ConcurrentBloom<Blocked>;

/// A FastLocal Bloom filter with insert/contains through `&self`. `Send + Sync`.
pub type ConcurrentFastLocalBloomFilter = ConcurrentBloom<FastLocal>;

impl<L: BitLayout> ConcurrentBloom<L> {
    /// A filter for `items` keys at false-positive rate `fpr`, seed `DEFAULT_SEED`.
    pub fn new(items: u64, fpr: f64) -> Result<Self> {
        Bloom::<L>::new(items, fpr).map(Self::from)
    }

    /// An empty filter with explicit parameters (which must be of this layout).
    pub fn with_params(params: Params, seed: u64) -> Result<Self> {
        Bloom::<L>::with_params(params, seed).map(Self::from)
    }

    fn words(&self) -> &[AtomicU64] {
        L::Unit::atomic_words(&self.units)
    }

    /// Hash of `key` with this filter's seed (for `insert_hash` / `contains_hash`).
    #[inline]
    pub fn hash(&self, key: impl AsRef<[u8]>) -> KeyHash {
        KeyHash::of(key.as_ref(), self.seed)
    }

    /// Adds `key`; returns true if it was possibly present already (all its bits were set).
    #[inline]
    pub fn insert(&self, key: impl AsRef<[u8]>) -> bool {
        self.insert_hash(self.hash(key))
    }

    /// "Maybe present" (true) or "definitely absent" (false).
    #[inline]
    pub fn contains(&self, key: impl AsRef<[u8]>) -> bool {
        self.contains_hash(self.hash(key))
    }

    /// [`Self::insert`] of a precomputed hash.
    #[inline]
    pub fn insert_hash(&self, h: KeyHash) -> bool {
        let words = self.words();
        let mut missing = false;
        self.layout.probes(self.geometry, h, |index, mask| {
            let word = &words[index];
            // Skip the locked RMW (and the cache-line ownership it needs) if the bits are set.
            if word.load(Relaxed) & mask != mask {
                missing |= word.fetch_or(mask, Relaxed) & mask != mask;
            }
            true
        });
        if missing {
            self.len.add_one(h);
        }
        !missing
    }

    /// [`Self::contains`] of a precomputed hash.
    #[inline]
    pub fn contains_hash(&self, h: KeyHash) -> bool {
        let words = self.words();
        self.layout.probes(self.geometry, h, |index, mask| {
            words[index].load(Relaxed) & mask == mask
        })
    }

    /// Inserts every key, prefetching the lines of the keys a few ahead (so the
    /// atomic `fetch_or`s mostly hit L1 instead of each waiting for DRAM).
    pub fn insert_batch(&self, keys: &[impl AsRef<[u8]>]) {
        let base = self.words().as_ptr().cast::<u64>();
        rolling(
            keys.len(),
            L::lines(self.geometry),
            |i| self.hash(&keys[i]),
            |h| self.layout.prefetch(base, self.geometry, h),
            |h| {
                self.insert_hash(h);
            },
        );
    }

    /// Inserts that set at least one new bit (see the module comment for races).
    pub fn len(&self) -> u64 {
        self.len.total()
    }

    /// Whether nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The filter's parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The seed keys are hashed with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Number of set bits.
    pub fn count_ones(&self) -> u64 {
        self.words()
            .iter()
            .map(|w| u64::from(w.load(Relaxed).count_ones()))
            .sum()
    }

    /// Back to a plain filter, without copying bits.
    pub fn into_inner(self) -> Bloom<L> {
        let len = self.len.total();
        Bloom::from_store(
            self.params,
            self.seed,
            L::Unit::from_atomic(self.units),
            len,
        )
    }
}

impl<L: BitLayout> From<Bloom<L>> for ConcurrentBloom<L> {
    /// Without copying bits.
    fn from(filter: Bloom<L>) -> Self {
        let (params, seed, store, len) = filter.into_parts();
        ConcurrentBloom {
            params,
            seed,
            units: L::Unit::into_atomic(store),
            len: StripedLen::starting_at(len),
            geometry: Geometry::of(&params, L::Unit::WORDS),
            layout: L::select(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BlockedBloomFilter, BloomFilter};

    /// The conversions reuse the allocation (no copy) and keep every bit.
    #[test]
    fn conversions_keep_the_allocation_and_bits() {
        let mut plain = BloomFilter::new(1000, 0.01).unwrap();
        plain.insert(b"a");
        let before = plain.bits().words().as_ptr() as usize;
        let snapshot = plain.clone();
        let shared = ConcurrentBloomFilter::from(plain);
        assert_eq!(shared.units.as_ptr() as usize, before);
        let back = shared.into_inner();
        assert_eq!(back.bits().words().as_ptr() as usize, before);
        assert_eq!(back, snapshot);

        let mut plain = BlockedBloomFilter::new(1000, 0.01).unwrap();
        plain.insert(b"a");
        let before = plain.words().as_ptr() as usize;
        let snapshot = plain.clone();
        let shared = ConcurrentBlockedBloomFilter::from(plain);
        assert_eq!(shared.units.as_ptr() as usize, before);
        let back = shared.into_inner();
        assert_eq!(back.words().as_ptr() as usize, before);
        assert_eq!(back, snapshot);
    }
}
