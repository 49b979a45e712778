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

use std::mem::{align_of, size_of, ManuallyDrop};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::blocked::{rolling, Block, Kernel};
use super::classic::prefetch_probes;
use super::{BlockedBloomFilter, BloomFilter};
use crate::bits::BitArray;
use crate::error::Result;
use crate::hash::{KeyHash, BLOCK_BITS, BLOCK_WORDS};
use crate::params::{Layout, Params};

/// One 512-bit block of atomics; same size, alignment and bit layout as `Block`.
#[repr(C, align(64))]
struct AtomicBlock([AtomicU64; BLOCK_WORDS]);

const _: () = assert!(size_of::<AtomicBlock>() == size_of::<Block>());
const _: () = assert!(align_of::<AtomicBlock>() == align_of::<Block>());

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

/// Reinterprets words as atomics without copying where `AtomicU64` and `u64` share alignment
/// (every 64-bit platform); copies elsewhere.
fn into_atomic_words(words: Vec<u64>) -> Vec<AtomicU64> {
    if align_of::<AtomicU64>() != align_of::<u64>() {
        return words.into_iter().map(AtomicU64::new).collect();
    }
    let mut words = ManuallyDrop::new(words);
    // SAFETY: AtomicU64 has the same size and bit validity as u64 (std docs) and, checked above,
    // the same alignment, so the allocation's layout is identical for both element types; the
    // original Vec is never dropped, so ownership moves to the new Vec exactly once.
    unsafe {
        Vec::from_raw_parts(
            words.as_mut_ptr().cast::<AtomicU64>(),
            words.len(),
            words.capacity(),
        )
    }
}

fn from_atomic_words(words: Vec<AtomicU64>) -> Vec<u64> {
    if align_of::<AtomicU64>() != align_of::<u64>() {
        return words.into_iter().map(AtomicU64::into_inner).collect();
    }
    let mut words = ManuallyDrop::new(words);
    // SAFETY: as in `into_atomic_words`; we own the Vec, so no other thread can access the atomics.
    unsafe {
        Vec::from_raw_parts(
            words.as_mut_ptr().cast::<u64>(),
            words.len(),
            words.capacity(),
        )
    }
}

/// A classic Bloom filter with insert/contains through `&self`. `Send + Sync`.
pub struct ConcurrentBloomFilter {
    params: Params,
    seed: u64,
    words: Vec<AtomicU64>,
    len: StripedLen,
}

impl ConcurrentBloomFilter {
    key_operations!();

    /// A filter for `items` keys at false-positive rate `fpr`, seed `DEFAULT_SEED`.
    pub fn new(items: u64, fpr: f64) -> Result<Self> {
        BloomFilter::new(items, fpr).map(Self::from)
    }

    pub fn with_params(params: Params, seed: u64) -> Result<Self> {
        BloomFilter::with_params(params, seed).map(Self::from)
    }

    #[inline]
    pub fn insert_hash(&self, h: KeyHash) -> bool {
        let mut present = true;
        for position in h.classic_probes(self.params.bits, self.params.hashes) {
            let word = &self.words[(position >> 6) as usize];
            let bit = 1u64 << (position & 63);
            // Skip the locked RMW (and the cache-line ownership it needs) if the bit is set.
            if word.load(Relaxed) & bit == 0 {
                present &= word.fetch_or(bit, Relaxed) & bit != 0;
            }
        }
        if !present {
            self.len.add_one(h);
        }
        present
    }

    /// Inserts every key, prefetching the k lines of the key `PREFETCH_DISTANCE` ahead (so the
    /// atomic `fetch_or`s mostly hit L1 instead of each waiting for DRAM).
    pub fn insert_batch(&self, keys: &[impl AsRef<[u8]>]) {
        let (bits, hashes) = (self.params.bits, self.params.hashes);
        rolling(
            keys.len(),
            |i| self.hash(&keys[i]),
            |h| prefetch_probes(self.words.as_ptr(), h, bits, hashes),
            |h| {
                self.insert_hash(h);
            },
        );
    }

    #[inline]
    pub fn contains_hash(&self, h: KeyHash) -> bool {
        h.classic_probes(self.params.bits, self.params.hashes)
            .all(|p| self.words[(p >> 6) as usize].load(Relaxed) & (1u64 << (p & 63)) != 0)
    }

    /// Inserts that set at least one new bit (see the module comment for races).
    pub fn len(&self) -> u64 {
        self.len.total()
    }

    pub fn count_ones(&self) -> u64 {
        self.words
            .iter()
            .map(|w| u64::from(w.load(Relaxed).count_ones()))
            .sum()
    }

    /// Back to a plain filter, without copying bits.
    pub fn into_inner(self) -> BloomFilter {
        let len = self.len.total();
        let bits = BitArray::from_words(from_atomic_words(self.words));
        BloomFilter::from_bits(self.params, self.seed, bits, len)
    }
}

impl From<BloomFilter> for ConcurrentBloomFilter {
    /// Without copying bits.
    fn from(filter: BloomFilter) -> Self {
        let (params, seed, bits, len) = filter.into_bits();
        ConcurrentBloomFilter {
            params,
            seed,
            words: into_atomic_words(bits.into_words()),
            len: StripedLen::starting_at(len),
        }
    }
}

/// A blocked Bloom filter with insert/contains through `&self`. `Send + Sync`.
pub struct ConcurrentBlockedBloomFilter {
    params: Params,
    seed: u64,
    blocks: Vec<AtomicBlock>,
    len: StripedLen,
    kernel: Kernel,
}

impl ConcurrentBlockedBloomFilter {
    key_operations!();

    /// A filter for `items` keys at false-positive rate `fpr`, seed `DEFAULT_SEED`.
    pub fn new(items: u64, fpr: f64) -> Result<Self> {
        BlockedBloomFilter::new(items, fpr).map(Self::from)
    }

    pub fn with_params(params: Params, seed: u64) -> Result<Self> {
        BlockedBloomFilter::with_params(params, seed).map(Self::from)
    }

    #[inline]
    pub fn insert_hash(&self, h: KeyHash) -> bool {
        let block = &self.blocks[h.block_index(self.blocks.len() as u64) as usize];
        let mask = self.kernel.mask(h.hi, self.params.hashes);
        let mut missing = 0;
        for (word, m) in block.0.iter().zip(mask) {
            let mut old = word.load(Relaxed);
            if m & !old != 0 {
                old = word.fetch_or(m, Relaxed);
            }
            missing |= m & !old;
        }
        if missing != 0 {
            self.len.add_one(h);
        }
        missing == 0
    }

    #[inline]
    pub fn contains_hash(&self, h: KeyHash) -> bool {
        let block = &self.blocks[h.block_index(self.blocks.len() as u64) as usize];
        let mask = self.kernel.mask(h.hi, self.params.hashes);
        let missing = block
            .0
            .iter()
            .zip(mask)
            .fold(0, |acc, (word, m)| acc | (m & !word.load(Relaxed)));
        missing == 0
    }

    /// Inserts that set at least one new bit (see the module comment for races).
    pub fn len(&self) -> u64 {
        self.len.total()
    }

    pub fn count_ones(&self) -> u64 {
        self.blocks
            .iter()
            .flat_map(|b| &b.0)
            .map(|w| u64::from(w.load(Relaxed).count_ones()))
            .sum()
    }

    /// Back to a plain filter, without copying bits.
    pub fn into_inner(self) -> BlockedBloomFilter {
        let len = self.len.total();
        let mut blocks = ManuallyDrop::new(self.blocks);
        // SAFETY: AtomicBlock and Block have the same size and alignment (asserted at compile
        // time) and AtomicU64 has the bit validity of u64, so the allocation is a valid
        // Vec<Block>; the atomic Vec is never dropped and we own it (no other thread can access).
        let blocks = unsafe {
            Vec::from_raw_parts(
                blocks.as_mut_ptr().cast::<Block>(),
                blocks.len(),
                blocks.capacity(),
            )
        };
        debug_assert_eq!(self.params.layout, Layout::Blocked);
        debug_assert_eq!(blocks.len() as u64 * BLOCK_BITS, self.params.bits);
        BlockedBloomFilter::from_blocks(self.params, self.seed, blocks, len)
    }
}

impl From<BlockedBloomFilter> for ConcurrentBlockedBloomFilter {
    /// Without copying bits.
    fn from(filter: BlockedBloomFilter) -> Self {
        let (params, seed, blocks, len) = filter.into_blocks();
        let mut blocks = ManuallyDrop::new(blocks);
        // SAFETY: same size/alignment (asserted above) and u64 → AtomicU64 is a valid
        // reinterpretation; the plain Vec is never dropped, so ownership moves exactly once.
        let blocks = unsafe {
            Vec::from_raw_parts(
                blocks.as_mut_ptr().cast::<AtomicBlock>(),
                blocks.len(),
                blocks.capacity(),
            )
        };
        ConcurrentBlockedBloomFilter {
            params,
            seed,
            blocks,
            len: StripedLen::starting_at(len),
            kernel: Kernel::detect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The conversions reuse the allocation (no copy) and keep every bit.
    #[test]
    fn conversions_keep_the_allocation_and_bits() {
        let mut plain = BloomFilter::new(1000, 0.01).unwrap();
        plain.insert(b"a");
        let before = plain.bits().words().as_ptr() as usize;
        let snapshot = plain.clone();
        let shared = ConcurrentBloomFilter::from(plain);
        assert_eq!(shared.words.as_ptr() as usize, before);
        let back = shared.into_inner();
        assert_eq!(back.bits().words().as_ptr() as usize, before);
        assert_eq!(back, snapshot);

        let mut plain = BlockedBloomFilter::new(1000, 0.01).unwrap();
        plain.insert(b"a");
        let before = plain.words().as_ptr() as usize;
        let snapshot = plain.clone();
        let shared = ConcurrentBlockedBloomFilter::from(plain);
        assert_eq!(shared.blocks.as_ptr() as usize, before);
        let back = shared.into_inner();
        assert_eq!(back.words().as_ptr() as usize, before);
        assert_eq!(back, snapshot);
    }
}
