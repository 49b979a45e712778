//! Counting Bloom filter (Fan, Cao, Almeida, Broder 2000): a classic Bloom filter whose bits are
//! 4-bit counters, so keys can be removed.
//!
//! Counters are packed 16 per `u64` word (two per byte; counter `i` is nibble `i % 16` of word
//! `i / 16`, i.e. the low nibble of byte `i / 2` for even `i` in the little-endian image). A key
//! touches exactly the positions a [`BloomFilter`] with the same [`Params`] and seed would
//! ([`KeyHash::classic_probes`]), so [`CountingBloomFilter::to_bloom`] is exact.
//!
//! Saturation: a counter stops at 15 and a saturated counter is never decremented (its true count
//! is unknown, so decrementing could reach 0 while keys still map there — a false negative).
//! With the optimal k a counter reaches 16 with probability ≤ 1.37e-15 per counter (Fan et al.),
//! so saturation matters only for adversarial or heavily duplicated input.
//!
//! `remove` first checks that every probe counter can be decremented (non-zero, or saturated); a
//! key that is definitely absent is refused with [`Error::NotPresent`] and nothing changes.
//! Removing a key that was never inserted but happens to be a false positive corrupts other keys'
//! counts — the inherent limit of counting filters: only remove what you inserted.
//!
//! Memory: 4 bits per counter, so 4× the classic filter: 38.3 bits/key at 1%.

use crate::bits::BitArray;
use crate::codec::{corrupt, BodyReader, FilterCodec, FilterKind};
use crate::error::{Error, Result};
use crate::filters::BloomFilter;
use crate::hash::{KeyHash, DEFAULT_SEED};
use crate::params::{Layout, Params};

/// Largest value of a 4-bit counter; a counter at this value is saturated and frozen.
pub const COUNTER_MAX: u8 = 15;

const COUNTERS_PER_WORD: u64 = 16;

/// A Bloom filter with 4-bit counters instead of bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountingBloomFilter {
    params: Params,
    seed: u64,
    /// Inserts minus successful removes.
    len: u64,
    counters: Vec<u64>,
}

impl CountingBloomFilter {
    /// Sized like a classic filter for `items` at `fpr` (one counter per classic bit).
    pub fn new(items: u64, fpr: f64) -> Result<Self> {
        Self::with_params(
            Params::for_items(Layout::Classic, items, fpr)?,
            DEFAULT_SEED,
        )
    }

    /// `params.bits` counters and `params.hashes` probes; the layout must be classic.
    pub fn with_params(params: Params, seed: u64) -> Result<Self> {
        let words = counter_words(&params)?;
        crate::memory::ensure_fits(words as u64 * 8)?;
        Ok(Self {
            params,
            seed,
            len: 0,
            counters: vec![0; words],
        })
    }

    /// The key's hash with this filter's seed.
    pub fn hash(&self, key: impl AsRef<[u8]>) -> KeyHash {
        KeyHash::of(key.as_ref(), self.seed)
    }

    /// Adds the key; returns whether it was possibly present already.
    pub fn insert(&mut self, key: impl AsRef<[u8]>) -> bool {
        self.insert_hash(self.hash(key))
    }

    /// [`Self::insert`] of a precomputed hash.
    pub fn insert_hash(&mut self, h: KeyHash) -> bool {
        let mut was_present = true;
        for i in h.classic_probes(self.params.bits, self.params.hashes) {
            let c = self.counter(i);
            was_present &= c > 0;
            if c < COUNTER_MAX {
                self.set_counter(i, c + 1);
            }
        }
        // Saturating: `len` comes from the file for a loaded filter (a fuzz regression).
        self.len = self.len.saturating_add(1);
        was_present
    }

    /// "Maybe present" (true: every probe counter is non-zero) or "definitely absent".
    pub fn contains(&self, key: impl AsRef<[u8]>) -> bool {
        self.contains_hash(self.hash(key))
    }

    /// [`Self::contains`] of a precomputed hash.
    pub fn contains_hash(&self, h: KeyHash) -> bool {
        h.classic_probes(self.params.bits, self.params.hashes)
            .all(|i| self.counter(i) > 0)
    }

    /// Removes one insertion of the key. [`Error::NotPresent`] (nothing changed) if the key is
    /// definitely absent.
    pub fn remove(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.remove_hash(self.hash(key))
    }

    /// [`Self::remove`] of a precomputed hash.
    pub fn remove_hash(&mut self, h: KeyHash) -> Result<()> {
        if !self.can_remove_hash(h) {
            return Err(Error::NotPresent);
        }
        for i in h.classic_probes(self.params.bits, self.params.hashes) {
            let c = self.counter(i);
            if c < COUNTER_MAX {
                self.set_counter(i, c - 1);
            }
        }
        self.len = self.len.saturating_sub(1);
        Ok(())
    }

    /// Whether [`remove_hash`](Self::remove_hash) would succeed: every probe counter holds at
    /// least as many increments as this key's probes put there (a key whose k probes hit one
    /// counter twice added 2 to it), or is saturated. Lets a caller validate a batch first.
    pub fn can_remove_hash(&self, h: KeyHash) -> bool {
        let probes: Vec<u64> = h
            .classic_probes(self.params.bits, self.params.hashes)
            .collect();
        probes.iter().all(|&i| {
            let c = self.counter(i);
            let needed = probes.iter().filter(|&&j| j == i).count();
            c == COUNTER_MAX || usize::from(c) >= needed
        })
    }

    /// Minimum counter over the key's probes: an upper bound on how many times it was inserted
    /// (0 = definitely absent).
    pub fn count_estimate(&self, key: impl AsRef<[u8]>) -> u8 {
        self.count_estimate_hash(self.hash(key))
    }

    /// [`Self::count_estimate`] of a precomputed hash.
    pub fn count_estimate_hash(&self, h: KeyHash) -> u8 {
        h.classic_probes(self.params.bits, self.params.hashes)
            .map(|i| self.counter(i))
            .min()
            .unwrap_or(0)
    }

    /// Number of counters stuck at [`COUNTER_MAX`].
    pub fn saturated_counters(&self) -> u64 {
        self.nibbles().filter(|&c| c == COUNTER_MAX).count() as u64
    }

    /// Number of non-zero counters (the bits a plain filter would have set).
    pub fn nonzero_counters(&self) -> u64 {
        self.nibbles().filter(|&c| c > 0).count() as u64
    }

    /// Inserts minus successful removes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the filter counts no items.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Zeroes every counter and the count.
    pub fn clear(&mut self) {
        self.counters.fill(0);
        self.len = 0;
    }

    /// FPR from the fraction of non-zero counters: `(nonzero / m)^k`.
    pub fn estimated_fpr(&self) -> f64 {
        let fill = self.nonzero_counters() as f64 / self.params.bits as f64;
        fill.powi(self.params.hashes as i32)
    }

    /// Bytes of the filter: the struct and its counters.
    pub fn memory_bytes(&self) -> usize {
        self.counters.len() * 8
    }

    /// The filter's parameters (the classic layout it mirrors).
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The seed keys are hashed with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The plain Bloom filter with a bit set wherever a counter is non-zero: same params and
    /// seed, answers `contains` exactly like this filter, 1/4 of the memory, no removal.
    pub fn to_bloom(&self) -> BloomFilter {
        let mut words = vec![0u64; self.params.words()];
        for (w, chunk) in words.iter_mut().zip(self.counters.chunks(4)) {
            // 4 counter words = 64 counters = one bit word.
            for (c, &counters) in chunk.iter().enumerate() {
                for nibble in 0..COUNTERS_PER_WORD {
                    if (counters >> (nibble * 4)) & 0xf != 0 {
                        *w |= 1 << (c as u64 * COUNTERS_PER_WORD + nibble);
                    }
                }
            }
        }
        BloomFilter::from_bits(
            self.params,
            self.seed,
            BitArray::from_words(words),
            self.len,
        )
    }

    /// [`to_bloom`](Self::to_bloom), consuming the counting filter.
    pub fn into_bloom(self) -> BloomFilter {
        self.to_bloom()
    }

    #[inline]
    fn counter(&self, i: u64) -> u8 {
        ((self.counters[(i / COUNTERS_PER_WORD) as usize] >> ((i % COUNTERS_PER_WORD) * 4)) & 0xf)
            as u8
    }

    #[inline]
    fn set_counter(&mut self, i: u64, value: u8) {
        let shift = (i % COUNTERS_PER_WORD) * 4;
        let word = &mut self.counters[(i / COUNTERS_PER_WORD) as usize];
        *word = (*word & !(0xf << shift)) | (u64::from(value) << shift);
    }

    fn nibbles(&self) -> impl Iterator<Item = u8> + '_ {
        self.counters
            .iter()
            .flat_map(|&w| (0..COUNTERS_PER_WORD).map(move |n| ((w >> (n * 4)) & 0xf) as u8))
    }
}

#[cfg(feature = "serde")]
crate::codec::serde_as_file_image!(CountingBloomFilter);

/// Validates params for a counting filter and returns the number of counter words (4 per bit word).
fn counter_words(params: &Params) -> Result<usize> {
    params.validate()?;
    if params.layout != Layout::Classic {
        return Err(Error::InvalidParameter(
            "a counting filter uses the classic layout".into(),
        ));
    }
    params
        .words()
        .checked_mul(4)
        .filter(|&w| w as u64 <= crate::params::MAX_BYTES / 8)
        .ok_or_else(|| Error::TooLarge(format!("{} counters exceed the size limit", params.bits)))
}

/// Body: bits u64 (number of counters), hashes u32, items u64, len u64, counter words.
impl FilterCodec for CountingBloomFilter {
    const KIND: FilterKind = FilterKind::Counting;

    fn hash_seed(&self) -> u64 {
        self.seed
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.params.bits.to_le_bytes());
        out.extend_from_slice(&self.params.hashes.to_le_bytes());
        out.extend_from_slice(&self.params.items.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        crate::codec::put_words(out, &self.counters);
    }

    fn decode_body(body: &mut BodyReader<'_>, seed: u64) -> Result<Self> {
        let params = Params {
            layout: Layout::Classic,
            bits: body.u64()?,
            hashes: body.u32()?,
            items: body.u64()?,
        };
        let len = body.u64()?;
        let words = counter_words(&params).map_err(|e| corrupt(format!("counting params: {e}")))?;
        let counters = body.words(words as u64)?;
        Ok(Self {
            params,
            seed,
            len,
            counters,
        })
    }
}
