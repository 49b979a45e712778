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
use crate::error::{Error, Result};
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
    type AtomicStore = Vec<AtomicU64>;
    const WORDS: usize = 1;

    fn try_zeroed(count: usize) -> Result<BitArray> {
        // Lazily zeroed: pages stay untouched until the first insert.
        let mut bits = BitArray::try_zeroed(count).ok_or_else(|| {
            Error::OutOfMemory(format!(
                "the allocator refused {} for {count} words",
                crate::memory::human_bytes((count as u64).saturating_mul(8))
            ))
        })?;
        advise_huge_pages(bits.words_mut().as_mut_ptr(), bits.len_bytes());
        Ok(bits)
    }

    fn units(store: &BitArray) -> &[u64] {
        store.words()
    }

    fn units_mut(store: &mut BitArray) -> &mut [u64] {
        store.words_mut()
    }

    fn relocate(store: &mut BitArray, walk: &mut crate::relocate::Walk<'_>) {
        store.relocate(walk);
    }

    fn words(units: &[u64]) -> &[u64] {
        units
    }

    fn words_mut(units: &mut [u64]) -> &mut [u64] {
        units
    }

    fn into_atomic(store: BitArray) -> Vec<AtomicU64> {
        let words = store.into_words();
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

    fn from_atomic(words: Vec<AtomicU64>) -> BitArray {
        if align_of::<AtomicU64>() != align_of::<u64>() {
            return BitArray::from_words(words.into_iter().map(AtomicU64::into_inner).collect());
        }
        let mut words = ManuallyDrop::new(words);
        // SAFETY: as in `into_atomic`; we own the Vec, so no other thread can access the
        // atomics.
        BitArray::from_words(unsafe {
            Vec::from_raw_parts(
                words.as_mut_ptr().cast::<u64>(),
                words.len(),
                words.capacity(),
            )
        })
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

    /// One pass over the probes, the exact count's "was it new" test folded into it: each
    /// probe adds the bit's old value to a counter (`bt` + `adc` on x86-64: no compare, no
    /// flag-to-byte chain) and the key was present iff all k were set. A key is new iff one of
    /// its probes flips a clear bit, exactly as before (a probe repeated within the key sees
    /// its own earlier write, as it did). The shifts wrap at 64 (`position & 63`, which the
    /// x86 shift and bit-test instructions do for free).
    #[inline]
    fn insert(self, words: &mut [u64], g: Geometry, h: KeyHash) -> bool {
        // Every probe is < g.bits (fast_range; the wrap refuses bits = 0), so this one check,
        // hoisted out of the key loop by the compiler, bounds every probe's word index.
        assert!(
            g.bits.wrapping_sub(1) < 64 * words.len() as u64,
            "classic geometry exceeds its words"
        );
        let mut set_before = 0u32;
        for position in h.classic_probes(g.bits, g.hashes) {
            // SAFETY: position = fast_range(_, g.bits) < g.bits ≤ 64·words.len() (asserted
            // above), so position / 64 indexes `words`. Exercised by every classic test;
            // `tests::kernels_match_the_safe_probes` checks it against `probes`.
            let word = unsafe { words.get_unchecked_mut((position >> 6) as usize) };
            set_before += (word.wrapping_shr(position as u32) & 1) as u32;
            *word |= 1u64.wrapping_shl(position as u32);
        }
        set_before == g.hashes
    }

    #[inline]
    fn contains(self, words: &[u64], g: Geometry, h: KeyHash) -> bool {
        assert!(
            g.bits.wrapping_sub(1) < 64 * words.len() as u64,
            "classic geometry exceeds its words"
        );
        h.classic_probes(g.bits, g.hashes).all(|position| {
            // SAFETY: as in `insert`: position < g.bits ≤ 64·words.len() (asserted above).
            let word = unsafe { *words.get_unchecked((position >> 6) as usize) };
            word.wrapping_shr(position as u32) & 1 != 0
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The unchecked `insert` / `contains` kernels agree with a reference built on the safe
    /// `probes` path (the previous kernel: present iff every probe's bit was set before its own
    /// write), on tiny arrays where probes repeat within a key and on dense fills, for every k:
    /// same answers, same bits, so the same exact count.
    #[test]
    fn kernels_match_the_safe_probes() {
        for words_len in [1usize, 2, 3, 17] {
            for k in 1..=crate::params::MAX_HASHES {
                let g = Geometry {
                    bits: 64 * words_len as u64,
                    units: words_len as u64,
                    hashes: k,
                };
                let mut fast = vec![0u64; words_len];
                let mut reference = vec![0u64; words_len];
                let (mut fast_len, mut reference_len) = (0u64, 0u64);
                for i in 0..400u64 {
                    let h = KeyHash::of(&(i % 300).to_le_bytes(), u64::from(k));
                    let expected_hit = Classic.probes(g, h, |w, mask| reference[w] & mask != 0);
                    assert_eq!(Classic.contains(&fast, g, h), expected_hit, "k={k} i={i}");
                    let mut present = true;
                    Classic.probes(g, h, |w, mask| {
                        present &= reference[w] & mask != 0;
                        reference[w] |= mask;
                        true
                    });
                    let fast_present = Classic.insert(&mut fast, g, h);
                    assert_eq!(fast_present, present, "k={k} i={i} words={words_len}");
                    assert_eq!(fast, reference, "k={k} i={i}: different bits");
                    fast_len += u64::from(!fast_present);
                    reference_len += u64::from(!present);
                    assert!(Classic.contains(&fast, g, h));
                }
                assert_eq!(fast_len, reference_len);
            }
        }
    }
}
