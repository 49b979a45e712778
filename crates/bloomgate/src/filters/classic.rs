//! Classic Bloom filter: k probes spread over the whole bit array. The most space-efficient bit
//! filter (9.59 bits/key at 1%) and the layout RedisBloom-style tools expect; a query touches up
//! to k cache lines, so the blocked filter is faster when memory is not the constraint.
//!
//! Probe positions: `KeyHash::classic_probe` (double hashing with a nonlinear remix, see
//! `crate::hash`). `contains` stops at the first clear bit, so an absent key usually costs
//! one or two memory reads.

use std::thread;

use crate::bits::BitArray;
use crate::codec::{put_words, BodyReader, FilterCodec, FilterKind};
use crate::error::Result;
use crate::hash::{KeyHash, DEFAULT_SEED};
use crate::params::{self, Layout, Params};

use super::blocked::{advise_huge_pages, prefetch, rolling};
use super::ConcurrentBloomFilter;

/// Below this size the array sits in L2/L3 and prefetching costs more than it saves.
const PREFETCH_MIN_BYTES: usize = 8 << 20;

/// Prefetches the cache lines of a key's k probes in the word array at `base`.
#[inline(always)]
pub(crate) fn prefetch_probes<T>(base: *const T, h: KeyHash, bits: u64, hashes: u32) {
    for position in h.classic_probes(bits, hashes) {
        prefetch(base.wrapping_add((position >> 6) as usize));
    }
}

/// A classic Bloom filter over packed little-endian u64 words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BloomFilter {
    params: Params,
    seed: u64,
    bits: BitArray,
    len: u64,
}

impl BloomFilter {
    key_operations!(mut);
    plain_bit_filter_bookkeeping!();

    /// A filter for `items` keys at false-positive rate `fpr`, seed [`DEFAULT_SEED`].
    pub fn new(items: u64, fpr: f64) -> Result<Self> {
        Self::with_params(
            Params::for_items(Layout::Classic, items, fpr)?,
            DEFAULT_SEED,
        )
    }

    /// An empty filter with explicit parameters (must be of the classic layout).
    pub fn with_params(params: Params, seed: u64) -> Result<Self> {
        params.validate_for(Layout::Classic, "BloomFilter")?;
        // vec![0; n] comes from alloc_zeroed: pages stay untouched until the first insert.
        let mut bits = BitArray::zeroed(params.words());
        advise_huge_pages(bits.words_mut().as_mut_ptr(), bits.len_bytes());
        Ok(Self::from_bits(params, seed, bits, 0))
    }

    pub(crate) fn from_bits(params: Params, seed: u64, bits: BitArray, len: u64) -> Self {
        debug_assert_eq!(bits.len_bits(), params.bits);
        BloomFilter {
            params,
            seed,
            bits,
            len,
        }
    }

    pub(crate) fn into_bits(self) -> (Params, u64, BitArray, u64) {
        (self.params, self.seed, self.bits, self.len)
    }

    /// The bit array (bit i = word i/64, bit i%64).
    pub fn bits(&self) -> &BitArray {
        &self.bits
    }

    fn words(&self) -> &[u64] {
        self.bits.words()
    }

    fn words_mut(&mut self) -> &mut [u64] {
        self.bits.words_mut()
    }

    /// Parallel bulk build over every core: threads insert disjoint slices of `keys` into a
    /// shared [`ConcurrentBloomFilter`] (atomic `fetch_or`), which is then unwrapped without a
    /// copy. `len` may over-count by the rare duplicate keys inserted by two threads at once.
    pub fn build_parallel<K: AsRef<[u8]> + Sync>(
        params: Params,
        seed: u64,
        keys: &[K],
    ) -> Result<Self> {
        let mut filter = Self::with_params(params, seed)?;
        let threads = thread::available_parallelism().map_or(1, |n| n.get());
        if threads == 1 || keys.len() < 1 << 16 {
            filter.insert_batch(keys);
            return Ok(filter);
        }
        let shared = ConcurrentBloomFilter::from(filter);
        thread::scope(|s| {
            for part in keys.chunks(keys.len().div_ceil(threads)) {
                let shared = &shared;
                s.spawn(move || shared.insert_batch(part));
            }
        });
        Ok(shared.into_inner())
    }

    #[inline]
    pub fn insert_hash(&mut self, h: KeyHash) -> bool {
        let mut present = true;
        for position in h.classic_probes(self.params.bits, self.params.hashes) {
            present &= self.bits.set(position);
        }
        // Saturating: `len` comes from the file for a loaded filter (a fuzz regression).
        self.len = self.len.saturating_add(u64::from(!present));
        present
    }

    #[inline]
    pub fn contains_hash(&self, h: KeyHash) -> bool {
        h.classic_probes(self.params.bits, self.params.hashes)
            .all(|position| self.bits.get(position))
    }

    /// Inserts every key, prefetching the k lines of the key `PREFETCH_DISTANCE` ahead.
    pub fn insert_batch(&mut self, keys: &[impl AsRef<[u8]>]) {
        let (seed, bits, hashes) = (self.seed, self.params.bits, self.params.hashes);
        let base = self.bits.words().as_ptr();
        rolling(
            keys.len(),
            |i| KeyHash::of(keys[i].as_ref(), seed),
            |h| prefetch_probes(base, h, bits, hashes),
            |h| {
                self.insert_hash(h);
            },
        );
    }

    /// The batch queries' engine: out of cache (arrays of at least [`PREFETCH_MIN_BYTES`]) the k
    /// lines of the key `PREFETCH_DISTANCE` ahead are prefetched so their misses overlap; in cache
    /// the probes are cheaper than computing them twice.
    fn contains_batch_with(
        &self,
        count: usize,
        hash_at: impl Fn(usize) -> KeyHash,
        out: &mut Vec<bool>,
    ) {
        out.reserve(count);
        if self.memory_bytes() < PREFETCH_MIN_BYTES {
            out.extend((0..count).map(|i| self.contains_hash(hash_at(i))));
            return;
        }
        let (bits, hashes) = (self.params.bits, self.params.hashes);
        let base = self.bits.words().as_ptr();
        rolling(
            count,
            hash_at,
            |h| prefetch_probes(base, h, bits, hashes),
            |h| out.push(self.contains_hash(h)),
        );
    }

    /// FPR of the filter as it is now: fill^k (exact for independent uniform probes).
    pub fn estimated_fpr(&self) -> f64 {
        self.fill_ratio().powi(self.params.hashes as i32)
    }
}

/// Body: bits u64, hashes u32, design items u64, len u64, then bits/64 little-endian words.
impl FilterCodec for BloomFilter {
    const KIND: FilterKind = FilterKind::Classic;

    fn hash_seed(&self) -> u64 {
        self.seed
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        params::encode_body_params(&self.params, self.len, out);
        put_words(out, self.bits.words());
    }

    fn decode_body(body: &mut BodyReader<'_>, seed: u64) -> Result<Self> {
        let (params, len) = params::decode_body_params(body, Layout::Classic)?;
        let words = body.words(params.bits / 64)?;
        Ok(Self::from_bits(
            params,
            seed,
            BitArray::from_words(words),
            len,
        ))
    }
}
