//! Classic Bloom filter layout: k probes spread over the whole bit array. The most
//! space-efficient bit filter (9.59 bits/key at 1%) and the layout RedisBloom-style tools
//! expect; a query touches up to k cache lines, so the blocked filter is faster when memory is
//! not the constraint.
//!
//! Probe positions: `KeyHash::classic_probe` (double hashing with a nonlinear remix, see
//! `crate::hash`). `contains` stops at the first clear bit, so an absent key usually costs
//! one or two memory reads.

use std::mem::{align_of, ManuallyDrop};
use std::sync::atomic::AtomicU64;

use super::layout::{BitLayout, Geometry, StorageUnit};
use super::prefetch::{advise_huge_pages, prefetch};
use super::Bloom;
use crate::bits::BitArray;
use crate::codec::FilterKind;
use crate::hash::KeyHash;
use crate::params::{Layout, Params};

/// The classic layout policy: k independent probes over m bits (no kernel choice).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Classic;

/// A classic Bloom filter over packed little-endian u64 words.
pub type BloomFilter = Bloom<Classic>;

/// Plain words: the store is a [`BitArray`].
impl StorageUnit for u64 {
    type Store = BitArray;
    type Atomic = AtomicU64;
    const WORDS: usize = 1;

    fn zeroed(count: usize) -> BitArray {
        // vec![0; n] comes from alloc_zeroed: pages stay untouched until the first insert.
        let mut bits = BitArray::zeroed(count);
        advise_huge_pages(bits.words_mut().as_mut_ptr(), bits.len_bytes());
        bits
    }

    fn units(store: &BitArray) -> &[u64] {
        store.words()
    }

    fn units_mut(store: &mut BitArray) -> &mut [u64] {
        store.words_mut()
    }

    fn into_vec(store: BitArray) -> Vec<u64> {
        store.into_words()
    }

    fn from_vec(units: Vec<u64>) -> BitArray {
        BitArray::from_words(units)
    }

    fn words(units: &[u64]) -> &[u64] {
        units
    }

    fn words_mut(units: &mut [u64]) -> &mut [u64] {
        units
    }

    fn into_atomic(words: Vec<u64>) -> Vec<AtomicU64> {
        if align_of::<AtomicU64>() != align_of::<u64>() {
            return words.into_iter().map(AtomicU64::new).collect();
        }
        let mut words = ManuallyDrop::new(words);
        // SAFETY: AtomicU64 has the same size and bit validity as u64 (std docs) and, checked
        // above, the same alignment, so the allocation's layout is identical for both element
        // types; the original Vec is never dropped, so ownership moves to the new Vec once.
        unsafe {
            Vec::from_raw_parts(
                words.as_mut_ptr().cast::<AtomicU64>(),
                words.len(),
                words.capacity(),
            )
        }
    }

    fn from_atomic(words: Vec<AtomicU64>) -> Vec<u64> {
        if align_of::<AtomicU64>() != align_of::<u64>() {
            return words.into_iter().map(AtomicU64::into_inner).collect();
        }
        let mut words = ManuallyDrop::new(words);
        // SAFETY: as in `into_atomic`; we own the Vec, so no other thread can access the
        // atomics.
        unsafe {
            Vec::from_raw_parts(
                words.as_mut_ptr().cast::<u64>(),
                words.len(),
                words.capacity(),
            )
        }
    }

    fn atomic_words(units: &[AtomicU64]) -> &[AtomicU64] {
        units
    }
}

impl BitLayout for Classic {
    type Unit = u64;
    const LAYOUT: Layout = Layout::Classic;
    const KIND: FilterKind = FilterKind::Classic;
    const TYPE_NAME: &'static str = "BloomFilter";
    /// Below 8 MiB the array sits in L2/L3 and prefetching k lines costs more than it saves.
    const PREFETCH_MIN_BYTES: usize = 8 << 20;
    const LOCAL: bool = false;

    fn select() -> Self {
        Classic
    }

    #[inline]
    fn insert(self, words: &mut [u64], g: Geometry, h: KeyHash) -> bool {
        let mut present = true;
        for position in h.classic_probes(g.bits, g.hashes) {
            let word = &mut words[(position >> 6) as usize];
            let bit = 1u64 << (position & 63);
            present &= *word & bit != 0;
            *word |= bit;
        }
        present
    }

    #[inline]
    fn contains(self, words: &[u64], g: Geometry, h: KeyHash) -> bool {
        h.classic_probes(g.bits, g.hashes)
            .all(|position| words[(position >> 6) as usize] & (1u64 << (position & 63)) != 0)
    }

    #[inline]
    fn probes(self, g: Geometry, h: KeyHash, mut visit: impl FnMut(usize, u64) -> bool) -> bool {
        h.classic_probes(g.bits, g.hashes)
            .all(|position| visit((position >> 6) as usize, 1u64 << (position & 63)))
    }

    #[inline(always)]
    fn prefetch(self, words: *const u64, g: Geometry, h: KeyHash) {
        for position in h.classic_probes(g.bits, g.hashes) {
            prefetch(words.wrapping_add((position >> 6) as usize));
        }
    }

    fn home(_: Geometry, _: KeyHash) -> usize {
        unreachable!("the classic layout is not local (LOCAL = false)")
    }

    /// fill^k (exact for independent uniform probes).
    fn estimated_fpr(words: &[u64], g: Geometry) -> f64 {
        let ones: u64 = words.iter().map(|w| u64::from(w.count_ones())).sum();
        (ones as f64 / g.bits as f64).powi(g.hashes as i32)
    }
}

impl Bloom<Classic> {
    /// The bit array (bit i = word i/64, bit i%64).
    pub fn bits(&self) -> &BitArray {
        self.store()
    }

    pub(crate) fn from_bits(params: Params, seed: u64, bits: BitArray, len: u64) -> Self {
        Self::from_store(params, seed, bits, len)
    }
}
