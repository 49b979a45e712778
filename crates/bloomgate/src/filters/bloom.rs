//! The one bit filter: [`Bloom<L>`] over a [`BitLayout`] policy. It owns what every layout
//! shares — storage, sizing, key hashing, batching and prefetching, the parallel build, union /
//! intersection, estimates and the file format — and asks the policy only how a hash marks and
//! checks bits. [`BloomFilter`](super::BloomFilter) and
//! [`BlockedBloomFilter`](super::BlockedBloomFilter) are this type over the classic and blocked
//! policies.

use std::thread;

use super::layout::{BitLayout, Geometry, StorageUnit};
use super::prefetch::rolling;
use super::ConcurrentBloom;
use crate::codec::{BodyReader, FilterCodec, FilterKind};
use crate::error::Result;
use crate::hash::{KeyHash, DEFAULT_SEED};
use crate::params::{self, Params};

/// A Bloom filter whose bits are laid out by the policy `L`.
#[derive(Clone)]
pub struct Bloom<L: BitLayout> {
    params: Params,
    seed: u64,
    store: <L::Unit as StorageUnit>::Store,
    len: u64,
    geometry: Geometry,
    layout: L,
}

impl<L: BitLayout> std::fmt::Debug for Bloom<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(L::TYPE_NAME)
            .field("params", &self.params)
            .field("seed", &self.seed)
            .field("len", &self.len)
            .field("kernel", &self.layout)
            .finish()
    }
}

/// Equal parameters, seed, count and bits (the kernel choice is not part of the value).
impl<L: BitLayout> PartialEq for Bloom<L> {
    fn eq(&self, other: &Self) -> bool {
        self.params == other.params
            && self.seed == other.seed
            && self.len == other.len
            && self.units() == other.units()
    }
}

impl<L: BitLayout> Eq for Bloom<L> {}

impl<L: BitLayout> Bloom<L> {
    /// A filter for `items` keys at false-positive rate `fpr`, seed [`DEFAULT_SEED`], sized with
    /// the layout's exact model.
    pub fn new(items: u64, fpr: f64) -> Result<Self> {
        Self::with_params(Params::for_items(L::LAYOUT, items, fpr)?, DEFAULT_SEED)
    }

    /// An empty filter with explicit parameters (which must be of this layout). Its bits are
    /// lazily zeroed (pages become resident as they are written);
    /// [`Error::OutOfMemory`](crate::Error::OutOfMemory) if they do not fit the memory left or the
    /// allocator refuses them (never an abort).
    pub fn with_params(params: Params, seed: u64) -> Result<Self> {
        params.validate_for(L::LAYOUT, L::TYPE_NAME)?;
        crate::memory::ensure_fits(params.bytes())?;
        let units = Geometry::of(&params, L::Unit::WORDS).units as usize;
        Ok(Self::from_store(
            params,
            seed,
            L::Unit::try_zeroed(units)?,
            0,
        ))
    }

    /// Assembles a filter from validated parts; the kernel is chosen here, once.
    pub(crate) fn from_store(
        params: Params,
        seed: u64,
        store: <L::Unit as StorageUnit>::Store,
        len: u64,
    ) -> Self {
        let geometry = Geometry::of(&params, L::Unit::WORDS);
        debug_assert_eq!(L::Unit::units(&store).len() as u64, geometry.units);
        Bloom {
            params,
            seed,
            store,
            len,
            geometry,
            layout: L::select(),
        }
    }

    /// The parts, for a conversion that keeps the allocation.
    pub(crate) fn into_parts(self) -> (Params, u64, <L::Unit as StorageUnit>::Store, u64) {
        (self.params, self.seed, self.store, self.len)
    }

    pub(crate) fn store(&self) -> &<L::Unit as StorageUnit>::Store {
        &self.store
    }

    /// Offers the bit array's buffer to a host that moves allocations (one slot; see
    /// [`crate::relocate`]).
    pub fn relocate(&mut self, walk: &mut crate::relocate::Walk<'_>) {
        L::Unit::relocate(&mut self.store, walk);
    }

    fn units(&self) -> &[L::Unit] {
        L::Unit::units(&self.store)
    }

    /// The bit array as u64 words (bit i = word i/64, bit i%64; a block is consecutive words):
    /// what a host that dumps the filter in its own format reads.
    pub fn words(&self) -> &[u64] {
        L::Unit::words(self.units())
    }

    /// The bit array as mutable u64 words, for a host restoring a dump of [`Self::words`] in its
    /// own format (any bit pattern is a valid filter; [`Self::len`] is not changed).
    pub fn words_mut(&mut self) -> &mut [u64] {
        L::Unit::words_mut(L::Unit::units_mut(&mut self.store))
    }

    /// Hash of `key` with this filter's seed (for `insert_hash` / `contains_hash`).
    #[inline]
    pub fn hash(&self, key: impl AsRef<[u8]>) -> KeyHash {
        KeyHash::of(key.as_ref(), self.seed)
    }

    /// Adds `key`; returns true if it was possibly present already (all its bits were set).
    #[inline]
    pub fn insert(&mut self, key: impl AsRef<[u8]>) -> bool {
        self.insert_hash(self.hash(key))
    }

    /// "Maybe present" (true) or "definitely absent" (false).
    #[inline]
    pub fn contains(&self, key: impl AsRef<[u8]>) -> bool {
        self.contains_hash(self.hash(key))
    }

    /// [`Self::insert`] of a precomputed hash.
    #[inline]
    pub fn insert_hash(&mut self, h: KeyHash) -> bool {
        let (layout, g) = (self.layout, self.geometry);
        let present = layout.insert(L::Unit::units_mut(&mut self.store), g, h);
        // Saturating: `len` comes from the file for a loaded filter (a fuzz regression).
        self.len = self.len.saturating_add(u64::from(!present));
        present
    }

    /// [`Self::contains`] of a precomputed hash.
    #[inline]
    pub fn contains_hash(&self, h: KeyHash) -> bool {
        self.layout.contains(self.units(), self.geometry, h)
    }

    /// Inserts every key, hashing and prefetching ahead.
    pub fn insert_batch(&mut self, keys: &[impl AsRef<[u8]>]) {
        let (seed, layout, g) = (self.seed, self.layout, self.geometry);
        let units = L::Unit::units_mut(&mut self.store);
        let base = L::Unit::words(units).as_ptr();
        let mut added = 0u64;
        rolling(
            keys.len(),
            L::lines(g),
            |i| KeyHash::of(keys[i].as_ref(), seed),
            |h| layout.prefetch(base, g, h),
            |h| added += u64::from(!layout.insert(units, g, h)),
        );
        self.len = self.len.saturating_add(added);
    }

    /// Appends `contains` of every key to `out`, hashing and prefetching ahead.
    pub fn contains_batch(&self, keys: &[impl AsRef<[u8]>], out: &mut Vec<bool>) {
        let seed = self.seed;
        self.layout.contains_batch(
            self.units(),
            self.geometry,
            keys.len(),
            |i| KeyHash::of(keys[i].as_ref(), seed),
            out,
        );
    }

    /// Appends `contains_hash` of every hash to `out`, prefetching like `contains_batch`.
    pub fn contains_batch_hashes(&self, hashes: &[KeyHash], out: &mut Vec<bool>) {
        self.layout.contains_batch(
            self.units(),
            self.geometry,
            hashes.len(),
            |i| hashes[i],
            out,
        );
    }

    /// Requests the cache lines an insert or query of `h` touches, when the array is big
    /// enough for that to pay (the layout's batch threshold): for callers that insert in their
    /// own order and prefetch ahead themselves.
    #[inline]
    pub fn prefetch_hash(&self, h: KeyHash) {
        let units = self.units();
        if std::mem::size_of_val(units) >= L::PREFETCH_MIN_BYTES {
            let base = L::Unit::words(units).as_ptr();
            self.layout.prefetch(base, self.geometry, h);
        }
    }

    /// Sets `found[i]` for each hash not found yet that this filter may contain, querying
    /// only those, batched and prefetching like [`Self::contains_batch_hashes`]: a query over
    /// several filters (a scalable filter's links, a windowed filter's generations) asks each
    /// one only about the keys the others have not answered.
    pub fn mark_batch_hashes(&self, hashes: &[KeyHash], found: &mut [bool]) {
        let pending: Vec<usize> = (0..hashes.len()).filter(|&i| !found[i]).collect();
        let mut hits = Vec::with_capacity(pending.len());
        self.layout.contains_batch(
            self.units(),
            self.geometry,
            pending.len(),
            |r| hashes[pending[r]],
            &mut hits,
        );
        for (&i, hit) in pending.iter().zip(hits) {
            found[i] |= hit;
        }
    }

    /// Parallel bulk build over every core (see [`Self::insert_parallel`]).
    pub fn build_parallel<K: AsRef<[u8]> + Sync>(
        params: Params,
        seed: u64,
        keys: &[K],
    ) -> Result<Self> {
        let mut filter = Self::with_params(params, seed)?;
        filter.insert_parallel(keys);
        Ok(filter)
    }

    /// Inserts `keys` over every core; call it once per chunk to load a key set too large to
    /// hold in memory at once. Layouts that keep a key in one unit ([`BitLayout::LOCAL`]) hash
    /// in parallel and hand each hash to the thread owning its unit range, which writes with
    /// plain stores (`len` exact); others insert through the concurrent filter's atomic
    /// `fetch_or` without copying the bits (`len` may over-count the rare duplicate key
    /// inserted by two threads at once).
    pub fn insert_parallel<K: AsRef<[u8]> + Sync>(&mut self, keys: &[K]) {
        let threads = thread::available_parallelism().map_or(1, |n| n.get());
        if threads == 1 || keys.len() < 1 << 16 {
            self.insert_batch(keys);
        } else if L::LOCAL {
            self.insert_partitioned(keys, threads);
        } else {
            // Never observed: replaced by the result below.
            let placeholder = Bloom {
                store: L::Unit::zeroed(0),
                ..*self
            };
            let shared = ConcurrentBloom::from(std::mem::replace(self, placeholder));
            thread::scope(|s| {
                for part in keys.chunks(keys.len().div_ceil(threads)) {
                    let shared = &shared;
                    s.spawn(move || shared.insert_batch(part));
                }
            });
            *self = shared.into_inner();
        }
    }

    /// The partitioned build of [`Self::insert_parallel`] for local layouts.
    fn insert_partitioned<K: AsRef<[u8]> + Sync>(&mut self, keys: &[K], threads: usize) {
        let (seed, layout, g) = (self.seed, self.layout, self.geometry);
        let nunits = g.units;
        // Region r holds units starts[r]..starts[r + 1].
        let starts: Vec<usize> = (0..=threads)
            .map(|r| (r as u128 * u128::from(nunits) / threads as u128) as usize)
            .collect();
        let region_of = |unit: usize| starts[1..threads].partition_point(|&s| s <= unit);
        const ROUND_PER_THREAD: usize = 1 << 20;
        let mut buckets: Vec<Vec<Vec<KeyHash>>> = vec![vec![Vec::new(); threads]; threads];
        for round in keys.chunks(ROUND_PER_THREAD * threads) {
            thread::scope(|s| {
                let per = round.len().div_ceil(threads);
                for (part, mine) in round.chunks(per).zip(buckets.iter_mut()) {
                    let region_of = &region_of;
                    s.spawn(move || {
                        mine.iter_mut().for_each(Vec::clear);
                        for key in part {
                            let h = KeyHash::of(key.as_ref(), seed);
                            mine[region_of(L::home(g, h))].push(h);
                        }
                    });
                }
            });
            let buckets = &buckets;
            let units = L::Unit::units_mut(&mut self.store);
            let added: u64 = thread::scope(|s| {
                let mut rest = units;
                let mut workers = Vec::with_capacity(threads);
                for r in 0..threads {
                    let (region, tail) = rest.split_at_mut(starts[r + 1] - starts[r]);
                    rest = tail;
                    let offset = starts[r];
                    workers.push(s.spawn(move || {
                        let mut added = 0;
                        // The region seen as a filter of its own: a key's home unit u is unit
                        // u - offset of the region, with the whole array's geometry.
                        let base = L::Unit::words(region)
                            .as_ptr()
                            .wrapping_sub(offset * L::Unit::WORDS);
                        for from in buckets {
                            let mine = &from[r];
                            rolling(
                                mine.len(),
                                L::lines(g),
                                |i| mine[i],
                                |h| layout.prefetch(base, g, h),
                                |h| {
                                    let home = L::home(g, h) - offset;
                                    let unit = std::slice::from_mut(&mut region[home]);
                                    let local = Geometry { units: 1, ..g };
                                    added += u64::from(!layout.insert(unit, local, h));
                                },
                            );
                        }
                        added
                    }));
                }
                workers
                    .into_iter()
                    .map(|w| w.join().expect("build worker panicked"))
                    .sum()
            });
            self.len = self.len.saturating_add(added);
        }
    }

    /// Number of inserts that set at least one new bit (RedisBloom's count semantics): a
    /// repeated key, or a new key whose bits were all set already (a false positive), is not
    /// counted.
    pub fn len(&self) -> u64 {
        self.len
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

    /// Clears every bit and the count.
    pub fn clear(&mut self) {
        self.words_mut().fill(0);
        self.len = 0;
    }

    /// Number of set bits.
    pub fn count_ones(&self) -> u64 {
        self.words().iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// Fraction of bits set.
    pub fn fill_ratio(&self) -> f64 {
        self.count_ones() as f64 / self.params.bits as f64
    }

    /// Swamidass–Baldi estimate of the number of distinct keys from the fill.
    pub fn estimated_len(&self) -> f64 {
        params::estimate_items(self.params.bits, self.params.hashes, self.count_ones())
    }

    /// FPR of the filter as it is now, from its actual bits (the layout's exact model).
    pub fn estimated_fpr(&self) -> f64 {
        L::estimated_fpr(self.units(), self.geometry)
    }

    /// Bytes of the filter: the struct and its bit array.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + std::mem::size_of_val(self.words())
    }

    /// `self |= other`. `len` becomes the fill-based estimate clamped to [max, sum] of the
    /// two.
    pub fn union(&mut self, other: &Self) -> Result<()> {
        params::check_compatible(&self.params, self.seed, &other.params, other.seed)?;
        for (x, y) in self.words_mut().iter_mut().zip(other.words()) {
            *x |= y;
        }
        let (low, high) = (self.len.max(other.len), self.len.saturating_add(other.len));
        self.len = (self.estimated_len().round() as u64).clamp(low, high);
        Ok(())
    }

    /// `self &= other`. `len` becomes the fill-based estimate capped at the smaller of the
    /// two.
    pub fn intersect(&mut self, other: &Self) -> Result<()> {
        params::check_compatible(&self.params, self.seed, &other.params, other.seed)?;
        for (x, y) in self.words_mut().iter_mut().zip(other.words()) {
            *x &= y;
        }
        self.len = (self.estimated_len().round() as u64).min(self.len.min(other.len));
        Ok(())
    }
}

/// Body: bits u64, hashes u32, design items u64, len u64, then bits/64 little-endian words
/// (for the blocked layout, block b = words 8b..8b+8). The same for every layout; the header's
/// kind id ([`BitLayout::KIND`]) says which layout the words are in.
impl<L: BitLayout> FilterCodec for Bloom<L> {
    fn body_len_hint(&self) -> usize {
        // Its parameters and arrays: at least the encoded body.
        self.memory_bytes()
    }

    const KIND: FilterKind = L::KIND;

    fn hash_seed(&self) -> u64 {
        self.seed
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        params::encode_body_params(&self.params, self.len, out);
        crate::codec::put_words(out, self.words());
    }

    fn decode_body(body: &mut BodyReader<'_>, seed: u64) -> Result<Self> {
        let (params, len) = params::decode_body_params(body, L::LAYOUT)?;
        // Read (bounds-checked against the input) before allocating the array.
        let bytes = body.bytes(params.bytes())?;
        let mut filter = Self::with_params(params, seed)?;
        for (word, b) in filter.words_mut().iter_mut().zip(bytes.chunks_exact(8)) {
            *word = u64::from_le_bytes(b.try_into().expect("8 bytes"));
        }
        filter.len = len;
        Ok(filter)
    }
}
