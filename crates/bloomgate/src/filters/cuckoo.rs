//! Cuckoo filter (Fan, Andersen, Kaminsky, Mitzenmacher, CoNEXT 2014): a filter that supports
//! deletion and stays near the space of a Bloom filter at low false-positive rates.
//!
//! # Layout
//! `buckets` buckets of [`SLOTS_PER_BUCKET`] = 4 slots; a slot holds an `f`-bit fingerprint
//! (4 ≤ f ≤ 32), 0 meaning empty. Slots are bit-packed: slot `s` of bucket `b` occupies bits
//! `(4b + s)·f .. (4b + s + 1)·f` of a little-endian `u64` word array (two zero padding words at
//! the end let every read load a fixed window without a bounds branch).
//!
//! # Hashing (from the key's XXH3-128 [`KeyHash`])
//! - primary bucket `i1 = fast_range(lo, buckets)`;
//! - fingerprint `fp = fast_range(hi, 2^f − 1) + 1`, uniform over 1..2^f−1, never 0;
//!   `lo` and `hi` are independent, so the bucket and fingerprint of an absent key are too;
//! - alternate bucket `alt(i, fp) = (H(fp) − i) mod buckets` with `H(fp) = fast_range(mix(fp),
//!   buckets)`. `alt` is an involution for ANY bucket count (`H − (H − i) = i`), so the table
//!   is sized to the request instead of to a power of two (the xor scheme of the paper needs a
//!   power of two and wastes up to half the memory).
//!
//! # Sizing and accuracy
//! `f = ceil(log2(2·4 / p))` (the paper's bound p ≤ 2b/2^f), clamped to at least 4 bits; a target
//! below 8/2^32 ≈ 1.9e-9 needs more than 32 bits and is refused. The table gets
//! `b = ceil(n / (4 · SIZING_LOAD))` buckets plus `ceil(√b)` of slack. At load α a query compares
//! its fingerprint with the 8α occupied slots (on average) of its two buckets, so the model FPR
//! is `1 − (1 − 1/(2^f − 1))^(8α)`. At 1%: f = 10; 1M items → 1.318 bytes per item, load 94.8%,
//! model FPR 0.739%, measured 0.739% on 1M absent keys (`tests/cuckoo.rs`).
//!
//! # Insertion and `Full`
//! Random-walk cuckoo kicking, at most [`MAX_KICKS`] evictions. If the walk fails, it is replayed
//! backwards and every evicted fingerprint is put back exactly where it was, so the table is
//! bit-for-bit what it was before the call: **no previously inserted item is ever lost** (a walk
//! that gave up with a fingerprint in hand would drop it: a false negative); the caller gets
//! [`Error::Full`]. The eviction slot of step `j` is a pure function
//! of (`len`, `j`, seed), which is what lets the undo recompute the path without storing it.
//! With 500 kicks the table reaches ≥ 95% load before the first `Full` (tested).
//!
//! # Duplicates
//! Like the paper, `insert` always stores another copy of the fingerprint, `remove` deletes one
//! copy, and `count` reports how many copies (of this key or of colliding keys) are stored. A
//! bucket pair holds at most 8 copies of one fingerprint; the 9th insert of the same key is
//! `Full`. Removing a key that was never inserted but collides with a stored one removes that
//! other key's copy — the inherent limit of every deletable filter: only remove what you inserted.

use crate::codec::{corrupt, BodyReader, FilterCodec, FilterKind};
use crate::error::{Error, Result};
use crate::hash::{fast_range, KeyHash, DEFAULT_SEED};
use crate::params::MAX_BYTES;

/// Slots per bucket (b in the paper). 4 gives ~95% achievable load with 2 candidate buckets.
pub const SLOTS_PER_BUCKET: u64 = 4;

/// Longest eviction chain tried before an insert reports [`Error::Full`].
pub const MAX_KICKS: u32 = 500;

/// Narrowest and widest fingerprints supported.
pub const MIN_FINGERPRINT_BITS: u32 = 4;
/// Largest fingerprint accepted, in bits.
pub const MAX_FINGERPRINT_BITS: u32 = 32;

/// Load the table is sized for: the requested item count fills 95% of the slots (plus a
/// √buckets margin for small tables). The random walk reaches this load reliably (first `Full`
/// at 95.4–97.3% from 1k to 1M items, `tests/cuckoo.rs`); sizing tighter than the achievable
/// load would turn the requested capacity into a lie.
pub const SIZING_LOAD: f64 = 0.95;

/// Words of zero padding after the slots so a bucket read can always load three words.
const PADDING_WORDS: usize = 2;

/// A cuckoo filter with bit-packed fingerprints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CuckooFilter {
    buckets: u64,
    fingerprint_bits: u32,
    seed: u64,
    len: u64,
    slots: Vec<u64>,
}

impl CuckooFilter {
    /// A filter for `items` items at target false-positive rate `fpr`, seed [`DEFAULT_SEED`].
    pub fn new(items: u64, fpr: f64) -> Result<Self> {
        Self::with_seed(items, fpr, DEFAULT_SEED)
    }

    /// A filter for `items` items at target false-positive rate `fpr`.
    pub fn with_seed(items: u64, fpr: f64, seed: u64) -> Result<Self> {
        if items == 0 {
            return Err(Error::InvalidParameter("items must be at least 1".into()));
        }
        let bits = Self::fingerprint_bits_for(fpr)?;
        // The achievable load varies more in small tables (a 3-bucket table can be Full at 58%),
        // so add √buckets of slack: +0.2% memory at 1M items, and 40 seeds each of n = 10..100k
        // then all take n items (measured).
        let buckets = (items as f64 / (SLOTS_PER_BUCKET as f64 * SIZING_LOAD)).ceil();
        let buckets = buckets + buckets.sqrt().ceil();
        if buckets > u64::MAX as f64 {
            return Err(Error::TooLarge(format!(
                "{items} items exceed the size limit"
            )));
        }
        Self::with_dimensions(buckets as u64, bits, seed)
    }

    /// A filter with an explicit number of buckets and fingerprint width.
    pub fn with_dimensions(buckets: u64, fingerprint_bits: u32, seed: u64) -> Result<Self> {
        let words = slot_words(buckets, fingerprint_bits)?;
        crate::memory::ensure_fits(words as u64 * 8)?;
        Ok(Self {
            buckets,
            fingerprint_bits,
            seed,
            len: 0,
            slots: vec![0; words],
        })
    }

    /// Fingerprint width for a target FPR: `ceil(log2(8 / p))`, at least 4 bits.
    pub fn fingerprint_bits_for(fpr: f64) -> Result<u32> {
        if !(fpr > 0.0 && fpr < 1.0) {
            return Err(Error::InvalidParameter(format!(
                "fpr must be in (0, 1), got {fpr}"
            )));
        }
        let bits = (2.0 * SLOTS_PER_BUCKET as f64 / fpr).log2().ceil();
        if bits > f64::from(MAX_FINGERPRINT_BITS) {
            return Err(Error::InvalidParameter(format!(
                "fpr {fpr} needs {bits} fingerprint bits; at most {MAX_FINGERPRINT_BITS} are supported"
            )));
        }
        Ok((bits as u32).max(MIN_FINGERPRINT_BITS))
    }

    /// The key's hash with this filter's seed.
    pub fn hash(&self, key: impl AsRef<[u8]>) -> KeyHash {
        KeyHash::of(key.as_ref(), self.seed)
    }

    /// Stores one more copy of the key's fingerprint. [`Error::Full`] if no room was found
    /// (nothing changed).
    pub fn insert(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.insert_hash(self.hash(key))
    }

    /// [`Self::insert`] of a precomputed hash.
    pub fn insert_hash(&mut self, h: KeyHash) -> Result<()> {
        let (fp, i1) = self.locate(h);
        let i2 = self.alt(i1, fp);
        if self.put(i1, fp) || self.put(i2, fp) {
            self.len += 1;
            return Ok(());
        }
        let mut homeless = fp;
        let mut bucket = if self.kick_random(u64::from(MAX_KICKS)) & 1 == 0 {
            i1
        } else {
            i2
        };
        for kick in 0..MAX_KICKS {
            let slot = self.kick_slot(kick);
            let victim = self.slot(bucket, slot);
            self.set_slot(bucket, slot, homeless);
            homeless = victim;
            bucket = self.alt(bucket, homeless);
            if self.put(bucket, homeless) {
                self.len += 1;
                return Ok(());
            }
        }
        // Replay the walk backwards: `bucket` is where `homeless` failed to fit, so the bucket it
        // was evicted from is alt(bucket, homeless), at the slot chosen for that step.
        for kick in (0..MAX_KICKS).rev() {
            bucket = self.alt(bucket, homeless);
            let slot = self.kick_slot(kick);
            let placed = self.slot(bucket, slot);
            self.set_slot(bucket, slot, homeless);
            homeless = placed;
        }
        debug_assert_eq!(homeless, fp, "undo must end with the new fingerprint");
        Err(Error::Full)
    }

    /// Whether the key may be present.
    pub fn contains(&self, key: impl AsRef<[u8]>) -> bool {
        self.contains_hash(self.hash(key))
    }

    /// [`Self::contains`] of a precomputed hash.
    pub fn contains_hash(&self, h: KeyHash) -> bool {
        let (fp, i1) = self.locate(h);
        self.copies_in(i1, fp) > 0 || self.copies_in(self.alt(i1, fp), fp) > 0
    }

    /// Removes one copy of the key's fingerprint; [`Error::NotPresent`] (nothing changed) if
    /// the key is definitely absent.
    pub fn remove(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.remove_hash(self.hash(key))
    }

    /// [`Self::remove`] of a precomputed hash.
    pub fn remove_hash(&mut self, h: KeyHash) -> Result<()> {
        let (fp, i1) = self.locate(h);
        for bucket in [i1, self.alt(i1, fp)] {
            if let Some(slot) = (0..SLOTS_PER_BUCKET as u32).find(|&s| self.slot(bucket, s) == fp) {
                self.set_slot(bucket, slot, 0);
                self.len -= 1;
                return Ok(());
            }
        }
        Err(Error::NotPresent)
    }

    /// Number of stored copies of the key's fingerprint in its two buckets.
    pub fn count(&self, key: impl AsRef<[u8]>) -> u32 {
        self.count_hash(self.hash(key))
    }

    /// [`Self::count`] of a precomputed hash.
    pub fn count_hash(&self, h: KeyHash) -> u32 {
        let (fp, i1) = self.locate(h);
        let i2 = self.alt(i1, fp);
        let second = if i2 == i1 { 0 } else { self.copies_in(i2, fp) };
        self.copies_in(i1, fp) + second
    }

    /// Number of stored fingerprints (inserts minus removes).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the filter holds no fingerprints.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Removes everything.
    pub fn clear(&mut self) {
        self.slots.fill(0);
        self.len = 0;
    }

    /// Total number of slots.
    pub fn capacity(&self) -> u64 {
        self.buckets * SLOTS_PER_BUCKET
    }

    /// Fraction of slots in use.
    pub fn load_factor(&self) -> f64 {
        self.len as f64 / self.capacity() as f64
    }

    /// Number of buckets (each holds a fixed number of fingerprint slots).
    pub fn buckets(&self) -> u64 {
        self.buckets
    }

    /// Bits per stored fingerprint.
    pub fn fingerprint_bits(&self) -> u32 {
        self.fingerprint_bits
    }

    /// Model FPR at the current load: `1 − (1 − 1/(2^f − 1))^(8·load)`.
    pub fn estimated_fpr(&self) -> f64 {
        let fingerprints = ((1u64 << self.fingerprint_bits) - 1) as f64;
        let compared = 2.0 * SLOTS_PER_BUCKET as f64 * self.load_factor();
        -(compared * (-1.0 / fingerprints).ln_1p()).exp_m1()
    }

    /// Heap bytes of the slot array.
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * 8
    }

    /// The seed keys are hashed with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Fingerprint (never 0) and primary bucket of a key.
    #[inline]
    fn locate(&self, h: KeyHash) -> (u32, u64) {
        let fingerprints = (1u64 << self.fingerprint_bits) - 1;
        let fp = fast_range(h.hi, fingerprints) as u32 + 1;
        (fp, fast_range(h.lo, self.buckets))
    }

    /// The other bucket of a fingerprint stored in bucket `i`: `(H(fp) − i) mod buckets`.
    #[inline]
    fn alt(&self, i: u64, fp: u32) -> u64 {
        let h = fast_range(mix64(u64::from(fp)), self.buckets);
        if h >= i {
            h - i
        } else {
            h + self.buckets - i
        }
    }

    /// The four fingerprints of bucket `b`, packed in the low `4f` bits.
    #[inline]
    fn bucket_bits(&self, b: u64) -> u128 {
        let bit = b * SLOTS_PER_BUCKET * u64::from(self.fingerprint_bits);
        let word = (bit / 64) as usize;
        let shift = (bit % 64) as u32;
        let window = u128::from(self.slots[word]) | (u128::from(self.slots[word + 1]) << 64);
        let mut bits = window >> shift;
        if shift > 0 {
            bits |= u128::from(self.slots[word + 2]) << (128 - shift);
        }
        bits
    }

    #[inline]
    fn copies_in(&self, b: u64, fp: u32) -> u32 {
        let bits = self.bucket_bits(b);
        let f = self.fingerprint_bits;
        let mask = (1u128 << f) - 1;
        (0..SLOTS_PER_BUCKET as u32)
            .map(|s| u32::from((bits >> (s * f)) & mask == u128::from(fp)))
            .sum()
    }

    #[inline]
    fn slot_position(&self, b: u64, s: u32) -> (usize, u32) {
        let bit = (b * SLOTS_PER_BUCKET + u64::from(s)) * u64::from(self.fingerprint_bits);
        ((bit / 64) as usize, (bit % 64) as u32)
    }

    #[inline]
    fn slot(&self, b: u64, s: u32) -> u32 {
        let (word, shift) = self.slot_position(b, s);
        let window = u128::from(self.slots[word]) | (u128::from(self.slots[word + 1]) << 64);
        ((window >> shift) as u64 & ((1u64 << self.fingerprint_bits) - 1)) as u32
    }

    #[inline]
    fn set_slot(&mut self, b: u64, s: u32, fp: u32) {
        let (word, shift) = self.slot_position(b, s);
        let mask = ((1u128 << self.fingerprint_bits) - 1) << shift;
        let window = u128::from(self.slots[word]) | (u128::from(self.slots[word + 1]) << 64);
        let window = (window & !mask) | (u128::from(fp) << shift);
        self.slots[word] = window as u64;
        self.slots[word + 1] = (window >> 64) as u64;
    }

    /// Puts `fp` in an empty slot of bucket `b`; false (nothing changed) if the bucket is full.
    #[inline]
    fn put(&mut self, b: u64, fp: u32) -> bool {
        match (0..SLOTS_PER_BUCKET as u32).find(|&s| self.slot(b, s) == 0) {
            Some(s) => {
                self.set_slot(b, s, fp);
                true
            }
            None => false,
        }
    }

    /// Pseudo-random bits for eviction step `step` of the current insert; fixed while `len` is.
    fn kick_random(&self, step: u64) -> u64 {
        mix64(self.len ^ (step << 40) ^ self.seed.rotate_left(17))
    }

    fn kick_slot(&self, kick: u32) -> u32 {
        (self.kick_random(u64::from(kick)) % SLOTS_PER_BUCKET) as u32
    }
}

#[cfg(feature = "serde")]
crate::codec::serde_as_file_image!(CuckooFilter);

/// Words needed for `buckets` buckets of `fingerprint_bits`-bit slots, with validation.
fn slot_words(buckets: u64, fingerprint_bits: u32) -> Result<usize> {
    if !(MIN_FINGERPRINT_BITS..=MAX_FINGERPRINT_BITS).contains(&fingerprint_bits) {
        return Err(Error::InvalidParameter(format!(
            "fingerprint bits must be in {MIN_FINGERPRINT_BITS}..={MAX_FINGERPRINT_BITS}, got {fingerprint_bits}"
        )));
    }
    if buckets == 0 {
        return Err(Error::InvalidParameter(
            "a cuckoo filter needs at least one bucket".into(),
        ));
    }
    let too_large = || Error::TooLarge(format!("{buckets} buckets exceed the size limit"));
    let bits = buckets
        .checked_mul(SLOTS_PER_BUCKET * u64::from(fingerprint_bits))
        .filter(|&bits| bits <= MAX_BYTES * 8)
        .ok_or_else(too_large)?;
    usize::try_from(bits.div_ceil(64))
        .ok()
        .and_then(|w| w.checked_add(PADDING_WORDS))
        .ok_or_else(too_large)
}

/// MurmurHash3 fmix64: spreads a fingerprint over all 64 bits before `fast_range` takes the top.
#[inline]
fn mix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// Body: buckets u64, fingerprint_bits u32, len u64, then the slot words (padding included).
impl FilterCodec for CuckooFilter {
    fn body_len_hint(&self) -> usize {
        // Its parameters and arrays: at least the encoded body.
        self.memory_bytes()
    }

    const KIND: FilterKind = FilterKind::Cuckoo;

    fn hash_seed(&self) -> u64 {
        self.seed
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.buckets.to_le_bytes());
        out.extend_from_slice(&self.fingerprint_bits.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        crate::codec::put_words(out, &self.slots);
    }

    fn decode_body(body: &mut BodyReader<'_>, seed: u64) -> Result<Self> {
        let buckets = body.u64()?;
        let fingerprint_bits = body.u32()?;
        let len = body.u64()?;
        let words = slot_words(buckets, fingerprint_bits)
            .map_err(|e| corrupt(format!("cuckoo dimensions: {e}")))?;
        let slots = body.words(words as u64)?;
        let filter = Self {
            buckets,
            fingerprint_bits,
            seed,
            len,
            slots,
        };
        // Every non-empty slot is one stored item, and nothing may hide in the padding.
        let used_bits = buckets * SLOTS_PER_BUCKET * u64::from(fingerprint_bits);
        let tail = &filter.slots[(used_bits / 64) as usize..];
        if tail[0] >> (used_bits % 64) != 0 || tail[1..].iter().any(|&w| w != 0) {
            return Err(corrupt("cuckoo padding is not zero"));
        }
        let stored = (0..buckets)
            .map(|b| {
                (0..SLOTS_PER_BUCKET as u32)
                    .filter(|&s| filter.slot(b, s) != 0)
                    .count() as u64
            })
            .sum::<u64>();
        if stored != len {
            return Err(corrupt(format!(
                "cuckoo length {len} does not match {stored} stored fingerprints"
            )));
        }
        Ok(filter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternate_bucket_is_an_involution_for_any_bucket_count() {
        for buckets in [1u64, 2, 3, 7, 1000, 263_158, (1 << 40) + 13] {
            let filter = CuckooFilter {
                buckets,
                fingerprint_bits: 12,
                seed: 0,
                len: 0,
                slots: Vec::new(),
            };
            for i in 0..2000u64 {
                let bucket = mix64(i) % buckets;
                let fp = (mix64(!i) % 4095) as u32 + 1;
                let other = filter.alt(bucket, fp);
                assert!(other < buckets);
                assert_eq!(filter.alt(other, fp), bucket);
            }
        }
    }

    #[test]
    fn packed_slots_do_not_disturb_their_neighbours() {
        for bits in MIN_FINGERPRINT_BITS..=MAX_FINGERPRINT_BITS {
            let mut filter = CuckooFilter::with_dimensions(5, bits, 0).unwrap();
            let max = ((1u64 << bits) - 1) as u32;
            let value = |b: u64, s: u32| {
                ((b * 4 + u64::from(s)) as u32).wrapping_mul(0x9e37_79b9) % max + 1
            };
            for b in 0..5 {
                for s in 0..4 {
                    filter.set_slot(b, s, value(b, s));
                }
            }
            for b in 0..5 {
                let bits_of_bucket = filter.bucket_bits(b);
                for s in 0..4 {
                    assert_eq!(filter.slot(b, s), value(b, s), "f={bits} b={b} s={s}");
                    let mask = (1u128 << bits) - 1;
                    assert_eq!(
                        (bits_of_bucket >> (s * bits)) & mask,
                        u128::from(value(b, s))
                    );
                }
            }
            filter.set_slot(2, 1, 0);
            assert_eq!(filter.slot(2, 1), 0);
            assert_eq!(filter.slot(2, 0), value(2, 0));
            assert_eq!(filter.slot(2, 2), value(2, 2));
        }
    }
}
