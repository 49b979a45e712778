//! The peer filters, each configured fairly: the same bits per item where its API takes a size,
//! otherwise the equal-accuracy target FPR (`Plan::target_fpr`); `config` says which, and which
//! hasher, k and layout. Keys are the same 16-byte keys for everyone; contenders whose API takes a
//! pre-computed u64 hash get the low word of XXH3-128 (our hash), others hash as their users do.
//! fastbloom and sbbf-rs can merge copies, so large ones are filled by several threads; their
//! untimed fill also hashes ahead and prefetches (`insert_chunk`), while the timed `insert` is
//! always the plain per-key call users make.

use crate::contender::{Contender, Fill, Plan};
use crate::floor::prefetch;
use crate::keys::{for_each_chunk, Key, Stream};
use crate::model;
use crate::timing::BlockTimes;
use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::time::Instant;
use xxhash_rust::xxh3::xxh3_128_with_seed;

/// Low 64 bits of XXH3-128 with seed 0: what `bloomgate::KeyHash::of(key, 0).lo` is.
pub fn xxh3_lo(key: &[u8]) -> u64 {
    xxh3_128_with_seed(key, 0) as u64
}

/// Hands fastbloom XXH3-128 (low word) through its hasher API. A `[u8; 16]` key reaches the
/// hasher as a length prefix (ignored: all keys have one length) and one `write` of its bytes.
/// `COUNTED` picks the contender: with it, the timed insert keeps an exact count of new keys
/// (`fastbloom-samehash-counted`, see [`FastbloomFlavour::COUNTS`]).
#[derive(Clone, Copy, Default)]
pub struct Xxh3Build<const COUNTED: bool = false>;

/// The hasher behind [`Xxh3Build`]: chains XXH3-128 over each written byte run.
#[derive(Default)]
pub struct Xxh3Hasher(u64);

impl Hasher for Xxh3Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxh3_128_with_seed(bytes, self.0) as u64;
    }
    fn write_usize(&mut self, _length_prefix: usize) {}
    fn finish(&self) -> u64 {
        self.0
    }
}

impl<const COUNTED: bool> BuildHasher for Xxh3Build<COUNTED> {
    type Hasher = Xxh3Hasher;
    fn build_hasher(&self) -> Xxh3Hasher {
        Xxh3Hasher(0)
    }
}

/// What differs between the fastbloom contenders: the hasher, how k is chosen, and whether the
/// timed insert uses its "was it there" answer.
pub trait FastbloomFlavour: BuildHasher + Send + Sized {
    /// The contender name.
    const NAME: &'static str;
    /// The timed insert counts the keys fastbloom reports as new, as an exact item count needs
    /// (bloomgate's filters keep one: `len()`); otherwise the answer is dropped, as most users
    /// do, and the compiler skips reading the probed words.
    const COUNTS: bool = false;
    /// An empty fastbloom filter for `plan`, with this hasher.
    fn make(plan: &Plan) -> fastbloom::BloomFilter<Self>;
    /// `config` text for k hashes.
    fn describe(k: u32) -> String;
}

/// A `fastbloom::BloomFilter` contender with hasher `S`, and the keys it reported as new (when
/// `S::COUNTS`).
pub struct Fastbloom<S = fastbloom::DefaultHasher>(fastbloom::BloomFilter<S>, u64);

/// `fastbloom` with our hash and our classic filter's m and k, to compare the filter cores alone.
pub type FastbloomSameHash = Fastbloom<Xxh3Build>;

/// [`FastbloomSameHash`] whose insert keeps an exact count of new keys, as bloomgate's does.
pub type FastbloomSameHashCounted = Fastbloom<Xxh3Build<true>>;

/// One random SipHash key per run: every copy of a fill shares it, so the copies can be unioned.
fn run_seed() -> u128 {
    static SEED: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    *SEED.get_or_init(|| {
        let state = std::collections::hash_map::RandomState::new();
        (u128::from(state.hash_one(1u8)) << 64) | u128::from(state.hash_one(2u8))
    })
}

/// `fastbloom` as users get it: `with_num_bits(m).expected_items(n)` (k chosen by fastbloom),
/// default hasher (SipHash-1-3 with a random key: one per run, set with `seed`).
impl FastbloomFlavour for fastbloom::DefaultHasher {
    const NAME: &'static str = "fastbloom";
    fn make(plan: &Plan) -> fastbloom::BloomFilter<Self> {
        fastbloom::BloomFilter::with_num_bits(plan.bits as usize)
            .seed(&run_seed())
            .expected_items(plan.items as usize)
    }
    fn describe(k: u32) -> String {
        format!("same bits/item; default hasher SipHash-1-3 (random key per run); k={k}; classic")
    }
}

/// The same-hash contenders: fastbloom with our hash and our classic filter's m and k.
impl<const COUNTED: bool> FastbloomFlavour for Xxh3Build<COUNTED> {
    const NAME: &'static str = if COUNTED {
        "fastbloom-samehash-counted"
    } else {
        "fastbloom-samehash"
    };
    const COUNTS: bool = COUNTED;
    fn make(plan: &Plan) -> fastbloom::BloomFilter<Self> {
        fastbloom::BloomFilter::with_num_bits(plan.bits as usize)
            .hasher(Self)
            .hashes(model::classic_best_k(plan.bits_per_item))
    }
    fn describe(k: u32) -> String {
        if COUNTED {
            format!("as fastbloom-samehash (k={k}), the timed insert counting the keys reported new (an exact item count, as bloomgate-classic keeps); classic")
        } else {
            format!("same bits/item; XXH3-128 low word via hasher API; k={k} (as bloomgate-classic); classic")
        }
    }
}

impl<S: FastbloomFlavour> Contender for Fastbloom<S> {
    const NAME: &'static str = S::NAME;
    const FILL: Fill = Fill::Merge;

    fn empty(plan: &Plan) -> Result<Self, String> {
        Ok(Fastbloom(S::make(plan), 0))
    }

    fn insert(&mut self, key: &Key) {
        let present = self.0.insert(key);
        if S::COUNTS {
            self.1 += u64::from(!present);
        }
    }

    /// Hashes ahead and prefetches the k words fastbloom 0.17 will set (its double hashing:
    /// h2 = h1·0x517C_C1B7_2722_0A95, next = rotl(h, 5) + h2, bit = ⌊h·m / 2^64⌋), then inserts
    /// by `insert_hash`. Only a hint: were the scheme to change, the fill would be slower, not
    /// different.
    fn insert_chunk(&mut self, keys: &[Key]) {
        insert_ahead(
            &mut self.0,
            keys,
            |f, key| f.source_hash(key),
            |f, hash| {
                let bits = f.num_bits() as u128;
                let words = f.as_slice().as_ptr();
                let word = |h: u64| ((h as u128 * bits) >> 70) as usize;
                let (mut h, step) = (hash, hash.wrapping_mul(0x517C_C1B7_2722_0A95));
                prefetch(words.wrapping_add(word(h)));
                for _ in 1..f.num_hashes() {
                    h = h.rotate_left(5).wrapping_add(step);
                    prefetch(words.wrapping_add(word(h)));
                }
            },
            |f, hash| {
                f.insert_hash(hash);
            },
        );
    }

    fn union(&mut self, other: &Self) -> Result<(), String> {
        self.0.union(&other.0);
        Ok(())
    }

    fn config(&self) -> String {
        S::describe(self.0.num_hashes())
    }

    fn memory_bytes(&self) -> usize {
        self.0.num_bits() / 8
    }

    fn contains(&self, key: &Key) -> bool {
        self.0.contains(key)
    }

    fn model_fpr(&self, items: u64) -> Option<f64> {
        Some(model::classic(
            self.0.num_bits() as f64,
            self.0.num_hashes(),
            items as f64,
        ))
    }
}

/// Inserts `keys` hashing each one `AHEAD` keys early and calling `prefetch_for` on that hash, so
/// many cache misses overlap. For filling large peer filters only (never in a timed insert).
fn insert_ahead<F>(
    filter: &mut F,
    keys: &[Key],
    hash: impl Fn(&F, &Key) -> u64,
    prefetch_for: impl Fn(&F, u64),
    mut insert: impl FnMut(&mut F, u64),
) {
    const AHEAD: usize = 16;
    let hashes: Vec<u64> = keys.iter().map(|key| hash(filter, key)).collect();
    for (i, &h) in hashes.iter().enumerate() {
        if let Some(&next) = hashes.get(i + AHEAD) {
            prefetch_for(filter, next);
        }
        insert(filter, h);
    }
}

/// `bloomfilter` 3: `Bloom::new(bytes, n)` (k chosen by the crate), SipHash-1-3 with a random seed.
pub struct Bloomfilter(bloomfilter::Bloom<[u8]>);

impl Contender for Bloomfilter {
    const NAME: &'static str = "bloomfilter";

    fn empty(plan: &Plan) -> Result<Self, String> {
        bloomfilter::Bloom::new((plan.bits / 8) as usize, plan.items as usize)
            .map(Bloomfilter)
            .map_err(str::to_string)
    }

    fn insert(&mut self, key: &Key) {
        self.0.set(&key[..]);
    }

    fn config(&self) -> String {
        format!(
            "same bits/item; SipHash-1-3 x2, random seed; k={}; classic",
            self.0.number_of_hash_functions()
        )
    }

    fn memory_bytes(&self) -> usize {
        (self.0.len() / 8) as usize
    }

    fn contains(&self, key: &Key) -> bool {
        self.0.check(&key[..])
    }

    fn model_fpr(&self, items: u64) -> Option<f64> {
        Some(model::classic(
            self.0.len() as f64,
            self.0.number_of_hash_functions(),
            items as f64,
        ))
    }
}

/// `sbbf-rs-safe`: Parquet split-block filter (256-bit blocks, k = 8), sized by whole bits per key.
pub struct SbbfRs(sbbf_rs_safe::Filter);

impl Contender for SbbfRs {
    const NAME: &'static str = "sbbf-rs";

    const FILL: Fill = Fill::Merge;

    fn empty(plan: &Plan) -> Result<Self, String> {
        Ok(SbbfRs(sbbf_rs_safe::Filter::new(
            plan.bits_per_item.round() as usize,
            plan.items as usize,
        )))
    }

    fn insert(&mut self, key: &Key) {
        self.0.insert_hash(xxh3_lo(key));
    }

    /// Hashes ahead and prefetches the 32-byte bucket the Parquet spec assigns to each hash,
    /// ⌊(hash >> 32) · buckets / 2^32⌋ (a hint only), then inserts by `insert_hash`.
    fn insert_chunk(&mut self, keys: &[Key]) {
        insert_ahead(
            &mut self.0,
            keys,
            |_, key| xxh3_lo(key),
            |f, hash| {
                let bytes = f.as_bytes();
                let bucket = ((hash >> 32) * (bytes.len() as u64 / 32)) >> 32;
                prefetch(bytes.as_ptr().wrapping_add(bucket as usize * 32));
            },
            |f, hash| {
                f.insert_hash(hash);
            },
        );
    }

    fn union(&mut self, other: &Self) -> Result<(), String> {
        let (mine, theirs) = (self.0.as_bytes_mut(), other.0.as_bytes());
        if mine.len() != theirs.len() {
            return Err("sbbf-rs: union of filters of different sizes".into());
        }
        mine.iter_mut().zip(theirs).for_each(|(a, b)| *a |= b);
        Ok(())
    }

    fn config(&self) -> String {
        "same bits/item (whole bits); XXH3-128 low word; k=8; split block 256-bit (Parquet), SIMD"
            .into()
    }

    fn memory_bytes(&self) -> usize {
        self.0.as_bytes().len()
    }

    fn contains(&self, key: &Key) -> bool {
        self.0.contains_hash(xxh3_lo(key))
    }

    fn model_fpr(&self, items: u64) -> Option<f64> {
        Some(model::split_block(
            self.memory_bytes() as f64 * 8.0,
            items as f64,
        ))
    }
}

/// `xorf::BinaryFuse8`: static, built once from all keys' XXH3-128 low words (hashing included in
/// the build time); 8-bit fingerprints, ≈9 bits/item, FPR ≈ 2^-8.
pub struct XorfBinaryFuse8(xorf::BinaryFuse8);

impl Contender for XorfBinaryFuse8 {
    const NAME: &'static str = "xorf-binaryfuse8";
    const FILL: Fill = Fill::Whole;

    fn empty(_plan: &Plan) -> Result<Self, String> {
        Err("xorf-binaryfuse8 is static: built from the whole key set at once".into())
    }

    fn insert(&mut self, _key: &Key) {
        unreachable!("FILL = Whole: built only by build(), and empty() refuses")
    }

    fn build(plan: &Plan) -> Result<(Self, BlockTimes), String> {
        // Block 0: hashing every key; block 1: the construction (one indivisible step).
        let mut times = BlockTimes::default();
        let mut hashes = Vec::with_capacity(plan.items as usize);
        let mut hashing = std::time::Duration::ZERO;
        for_each_chunk(Stream::Present, 0..plan.items, |chunk| {
            let start = Instant::now();
            hashes.extend(chunk.iter().map(|k| xxh3_lo(k)));
            hashing += start.elapsed();
        });
        times.record(0, hashing);
        let start = Instant::now();
        let filter = xorf::BinaryFuse8::try_from(&hashes).map_err(str::to_string)?;
        times.record(1, start.elapsed());
        Ok((XorfBinaryFuse8(filter), times))
    }

    fn memory_estimate(plan: &Plan) -> u64 {
        // hash list + fingerprints + construction arrays (≈ 3 words per key while building).
        plan.items * (8 + 2 + 24)
    }

    fn config(&self) -> String {
        "static (fixed 8-bit fingerprints); XXH3-128 low word; binary fuse, 3 probes".into()
    }

    fn memory_bytes(&self) -> usize {
        self.0.fingerprints.len() + std::mem::size_of::<xorf::BinaryFuse8>()
    }

    fn contains(&self, key: &Key) -> bool {
        use xorf::Filter;
        self.0.contains(&xxh3_lo(key))
    }

    fn model_fpr(&self, _items: u64) -> Option<f64> {
        Some(1.0 / 256.0)
    }
}

/// `cuckoofilter` 0.5: `with_capacity(n)` (4-slot buckets, 8-bit fingerprints, power-of-two
/// bucket count), std SipHash-1-3 (its only hasher). No size or FPR knob.
pub struct Cuckoofilter {
    filter: cuckoofilter::CuckooFilter<std::collections::hash_map::DefaultHasher>,
    failed_inserts: u64,
}

impl Contender for Cuckoofilter {
    const NAME: &'static str = "cuckoofilter";

    fn empty(plan: &Plan) -> Result<Self, String> {
        Ok(Cuckoofilter {
            filter: cuckoofilter::CuckooFilter::with_capacity(plan.items as usize),
            failed_inserts: 0,
        })
    }

    fn insert(&mut self, key: &Key) {
        if self.filter.add(key).is_err() {
            self.failed_inserts += 1;
        }
    }

    fn config(&self) -> String {
        let mut config =
            "with_capacity(n), no size knob; SipHash-1-3; 4-slot buckets, 8-bit fingerprints"
                .to_string();
        if self.failed_inserts > 0 {
            config += &format!("; {} inserts FAILED (filter full)", self.failed_inserts);
        }
        config
    }

    fn memory_bytes(&self) -> usize {
        self.filter.memory_usage()
    }

    fn contains(&self, key: &Key) -> bool {
        self.filter.contains(key)
    }

    fn model_fpr(&self, items: u64) -> Option<f64> {
        // p ≈ 1 − (1 − 2^-8)^(2b·load) for b = 4 slots per bucket, two candidate buckets.
        let slots = self.filter.memory_usage() as f64;
        let load = (items as f64 / slots).min(1.0);
        Some(1.0 - (1.0 - 1.0 / 256.0f64).powf(8.0 * load))
    }
}

/// `qfilter` 0.3: quotient filter sized by FPR (`Filter::new(n, target_fpr)`), its stable hasher.
pub struct Qfilter(qfilter::Filter);

impl Contender for Qfilter {
    const NAME: &'static str = "qfilter";

    fn empty(plan: &Plan) -> Result<Self, String> {
        qfilter::Filter::new(plan.items, plan.target_fpr)
            .map(Qfilter)
            .map_err(|e| format!("{e:?}"))
    }

    fn insert(&mut self, key: &Key) {
        // Err only when full; sized for n it is not.
        let _ = self.0.insert(key);
    }

    fn config(&self) -> String {
        format!("same target FPR; qfilter stable hasher (XXH3-64); {}-bit fingerprints; quotient filter (RSQF)", self.0.fingerprint_size())
    }

    fn memory_bytes(&self) -> usize {
        self.0.memory_usage()
    }

    fn contains(&self, key: &Key) -> bool {
        self.0.contains(key)
    }

    fn model_fpr(&self, _items: u64) -> Option<f64> {
        Some(self.0.current_error_ratio())
    }
}

/// `std::collections::HashSet<[u8; 16]>`, default hasher, presized: the exact baseline.
pub struct StdHashSet(HashSet<Key>);

impl Contender for StdHashSet {
    const NAME: &'static str = "hashset";

    fn empty(plan: &Plan) -> Result<Self, String> {
        Ok(StdHashSet(HashSet::with_capacity(plan.items as usize)))
    }

    fn insert(&mut self, key: &Key) {
        self.0.insert(*key);
    }

    fn memory_estimate(plan: &Plan) -> u64 {
        plan.items * 17 * 8 / 7 * 2
    }

    fn config(&self) -> String {
        "exact; std RandomState (SipHash-1-3); swiss table of 16-byte keys".into()
    }

    fn memory_bytes(&self) -> usize {
        // hashbrown: a power-of-two bucket count with capacity = buckets·7/8, each bucket holding
        // the key plus one control byte, plus one trailing group of control bytes.
        let buckets = (self.0.capacity() * 8 / 7).next_power_of_two();
        buckets * (std::mem::size_of::<Key>() + 1) + 16
    }

    fn contains(&self, key: &Key) -> bool {
        self.0.contains(key)
    }

    fn model_fpr(&self, _items: u64) -> Option<f64> {
        Some(0.0)
    }
}
