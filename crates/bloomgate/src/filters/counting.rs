//! Counting Bloom filter (Fan, Cao, Almeida, Broder 2000): a classic Bloom filter whose bits are
//! counters, so keys can be removed. Counters are 4 bits wide (the default) or 8 bits
//! ([`CountingBloomFilter::with_counter_bits`]), for inputs with many duplicates.
//!
//! 4-bit counters are packed 16 per `u64` word (two per byte; counter `i` is nibble `i % 16` of
//! word `i / 16`, i.e. the low nibble of byte `i / 2` for even `i` in the little-endian image);
//! 8-bit counters 8 per word (counter `i` is byte `i` of the little-endian image). A key
//! touches exactly the positions a [`BloomFilter`] with the same [`Params`] and seed would
//! ([`KeyHash::classic_probes`]), so [`CountingBloomFilter::to_bloom`] is exact.
//!
//! Saturation: a counter stops at its maximum (15, or 255 for 8-bit counters) and a saturated
//! counter is never decremented (its true count is unknown, so decrementing could reach 0 while
//! keys still map there — a false negative). With the optimal k a 4-bit counter reaches 16 with
//! probability ≤ 1.37e-15 per counter (Fan et al.), so saturation matters only for adversarial
//! or heavily duplicated input.
//!
//! `remove` first checks that every probe counter can be decremented (non-zero, or saturated); a
//! key that is definitely absent is refused with [`Error::NotPresent`] and nothing changes.
//! Removing a key that was never inserted but happens to be a false positive corrupts other keys'
//! counts — the inherent limit of counting filters: only remove what you inserted.
//!
//! Memory: 4 bits per counter, so 4× the classic filter: 38.3 bits/key at 1% (8× with 8-bit
//! counters).

use crate::bits::BitArray;
use crate::codec::{corrupt, BodyReader, FilterCodec, FilterKind};
use crate::error::{Error, Result};
use crate::filters::BloomFilter;
use crate::hash::{KeyHash, DEFAULT_SEED};
use crate::params::{Layout, Params};

/// Largest value of a 4-bit counter; a counter at this value is saturated and frozen.
pub const COUNTER_MAX: u8 = 15;

/// The counter widths a counting filter can have, in bits.
pub const COUNTER_BITS: [u32; 2] = [4, 8];

/// A Bloom filter with 4-bit counters instead of bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountingBloomFilter {
    params: Params,
    seed: u64,
    /// Bits per counter: 4 or 8.
    counter_bits: u32,
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

    /// `params.bits` 4-bit counters and `params.hashes` probes; the layout must be classic.
    pub fn with_params(params: Params, seed: u64) -> Result<Self> {
        Self::with_counter_bits(params, seed, 4)
    }

    /// [`Self::with_params`] with counters of `counter_bits` bits (4 or 8).
    pub fn with_counter_bits(params: Params, seed: u64, counter_bits: u32) -> Result<Self> {
        let words = counter_words(&params, counter_bits)?;
        crate::memory::ensure_fits(words as u64 * 8)?;
        let counters = crate::bits::zeroed_words(words).ok_or_else(|| {
            crate::Error::OutOfMemory(format!(
                "the allocator refused {} of counters",
                crate::memory::human_bytes(words as u64 * 8)
            ))
        })?;
        Ok(Self {
            params,
            seed,
            counter_bits,
            len: 0,
            counters,
        })
    }

    /// Offers the counters' buffer to a host that moves allocations (one slot; see
    /// [`crate::relocate`]).
    pub fn relocate(&mut self, walk: &mut crate::relocate::Walk<'_>) {
        walk.vec(&mut self.counters);
    }

    /// Bytes of the counters of a filter of `params` with `counter_bits`-bit counters, checked
    /// as [`Self::with_counter_bits`] checks them, without allocating.
    pub fn counter_bytes(params: &Params, counter_bits: u32) -> Result<u64> {
        Ok(counter_words(params, counter_bits)? as u64 * 8)
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
            if c < self.counter_max() {
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
            if c < self.counter_max() {
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
            c == self.counter_max() || usize::from(c) >= needed
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

    /// Number of counters stuck at their maximum ([`Self::counter_max`]).
    pub fn saturated_counters(&self) -> u64 {
        let max = self.counter_max();
        self.nibbles().filter(|&c| c == max).count() as u64
    }

    /// Bits per counter: 4 or 8.
    pub fn counter_bits(&self) -> u32 {
        self.counter_bits
    }

    /// Largest value of a counter ([`COUNTER_MAX`] for 4-bit counters, 255 for 8-bit ones); a
    /// counter at this value is saturated and never decremented.
    pub fn counter_max(&self) -> u8 {
        if self.counter_bits == 8 {
            u8::MAX
        } else {
            COUNTER_MAX
        }
    }

    /// The counter words, as the file image stores them (little-endian `u64`s).
    pub fn counter_words(&self) -> &[u64] {
        &self.counters
    }

    /// The counter words to overwrite (restoring a dump): any bit pattern is a valid set of
    /// counters. The count ([`Self::len`]) is the caller's to restore with [`Self::set_len`].
    pub fn counter_words_mut(&mut self) -> &mut [u64] {
        &mut self.counters
    }

    /// Sets the count of inserts minus removes (restoring a dump).
    pub fn set_len(&mut self, len: u64) {
        self.len = len;
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

    /// Bytes of the filter's counters.
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
    /// seed, answers `contains` exactly like this filter, 1/4 (or 1/8) of the memory, no
    /// removal.
    pub fn to_bloom(&self) -> BloomFilter {
        let mut words = vec![0u64; self.params.words()];
        let per_word = self.per_word();
        let chunk_words = (64 / per_word) as usize;
        let mask = self.mask();
        for (w, chunk) in words.iter_mut().zip(self.counters.chunks(chunk_words)) {
            // 4 (or 8) counter words = 64 counters = one bit word.
            for (c, &counters) in chunk.iter().enumerate() {
                for n in 0..per_word {
                    if (counters >> (n * u64::from(self.counter_bits))) & mask != 0 {
                        *w |= 1 << (c as u64 * per_word + n);
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

    /// Counters per `u64` word.
    #[inline]
    fn per_word(&self) -> u64 {
        64 / u64::from(self.counter_bits)
    }

    #[inline]
    fn mask(&self) -> u64 {
        (1 << self.counter_bits) - 1
    }

    #[inline]
    fn counter(&self, i: u64) -> u8 {
        let per_word = self.per_word();
        let shift = (i % per_word) * u64::from(self.counter_bits);
        ((self.counters[(i / per_word) as usize] >> shift) & self.mask()) as u8
    }

    #[inline]
    fn set_counter(&mut self, i: u64, value: u8) {
        let per_word = self.per_word();
        let shift = (i % per_word) * u64::from(self.counter_bits);
        let mask = self.mask();
        let word = &mut self.counters[(i / per_word) as usize];
        *word = (*word & !(mask << shift)) | (u64::from(value) << shift);
    }

    /// Every counter, in order (including the padding counters past `bits`, always 0).
    fn nibbles(&self) -> impl Iterator<Item = u8> + '_ {
        let (per_word, width, mask) = (self.per_word(), u64::from(self.counter_bits), self.mask());
        self.counters
            .iter()
            .flat_map(move |&w| (0..per_word).map(move |n| ((w >> (n * width)) & mask) as u8))
    }
}

#[cfg(feature = "serde")]
crate::codec::serde_as_file_image!(CountingBloomFilter);

/// Validates params and a counter width for a counting filter and returns the number of counter
/// words (4 per bit word for 4-bit counters, 8 for 8-bit ones).
fn counter_words(params: &Params, counter_bits: u32) -> Result<usize> {
    params.validate()?;
    if params.layout != Layout::Classic {
        return Err(Error::InvalidParameter(
            "a counting filter uses the classic layout".into(),
        ));
    }
    if !COUNTER_BITS.contains(&counter_bits) {
        return Err(Error::InvalidParameter(
            "counters are 4 or 8 bits wide".into(),
        ));
    }
    params
        .words()
        .checked_mul(counter_bits as usize)
        .filter(|&w| w as u64 <= crate::params::MAX_BYTES / 8)
        .ok_or_else(|| Error::TooLarge(format!("{} counters exceed the size limit", params.bits)))
}

/// Body: bits u64 (number of counters), hashes u32, items u64, len u64, counter words. The
/// counter width is implied by the body's length: `4 × words` counter words for 4-bit counters
/// (every file written before 8-bit counters existed), `8 × words` for 8-bit ones.
impl FilterCodec for CountingBloomFilter {
    fn body_len_hint(&self) -> usize {
        // Its parameters and arrays: at least the encoded body.
        self.memory_bytes()
    }

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
        let four =
            counter_words(&params, 4).map_err(|e| corrupt(format!("counting params: {e}")))?;
        // The width the remaining body holds: 8-bit counters take twice the words.
        let counter_bits = if body.remaining() as u64 == four as u64 * 16 {
            8
        } else {
            4
        };
        let words = counter_words(&params, counter_bits)
            .map_err(|e| corrupt(format!("counting params: {e}")))?;
        let counters = body.words(words as u64)?;
        Ok(Self {
            params,
            seed,
            counter_bits,
            len,
            counters,
        })
    }
}
