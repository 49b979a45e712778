//! bloomgate's own filters as contenders, sized with `Params::for_bits` (the same bits per item as
//! the peers, best k for the layout) and hashed with XXH3-128 (seed 0). The four Bloom filters
//! share one generic adapter ([`Ours`]); the scalable and cuckoo filters, sized by FPR, have
//! their own. Also the headline builds: 100M usernames and 1B keys in parallel.

use crate::contender::{Contender, Fill, Plan, Probes};
use crate::keys::{for_each_chunk, Key, Stream, Username, CHUNK};
use crate::results::{Row, Summary};
use crate::timing::ns_per_op;
use bloomgate::{
    BitLayout, BlockedBloomFilter, Bloom, BloomFilter, ConcurrentBloom, ConcurrentBloomFilter,
    CountingBloomFilter, CuckooFilter, FastLocalBloomFilter, Layout, Params, ScalableBloomFilter,
};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn describe(p: &Params) -> String {
    let layout = match p.layout {
        Layout::Classic => "classic",
        Layout::Blocked => "blocked 512-bit",
        Layout::FastLocal => "FastLocal 512-bit",
    };
    format!("same bits/item; XXH3-128 seed 0; k={}; {layout}", p.hashes)
}

/// What [`Ours`] needs from a bloomgate Bloom filter sized by [`Params`].
pub trait Native: Sized + Send {
    /// The contender name.
    const NAME: &'static str;
    /// The layout it is sized for with `Params::for_bits`.
    const LAYOUT: Layout;
    /// Appended to the shared `config` text.
    const NOTE: &'static str = "";
    /// `Fill::Merge` when the filter has `union`.
    const FILL: Fill = Fill::Insert;
    /// An empty filter with these parameters.
    fn make(p: Params) -> bloomgate::Result<Self>;
    /// Generic over the key type (not `&[u8]`), as every peer's adapter is, so that a
    /// fixed-size key reaches the hash with its length known at compile time in both.
    fn add<K: AsRef<[u8]> + ?Sized>(&mut self, key: &K);
    /// The batch insert, where there is one.
    fn add_batch<K: AsRef<[u8]>>(&mut self, keys: &[K]) {
        keys.iter().for_each(|key| self.add(key));
    }
    /// Whether the filter says it holds `key`.
    fn has<K: AsRef<[u8]> + ?Sized>(&self, key: &K) -> bool;
    /// `false` without a batch query.
    fn has_batch<K: AsRef<[u8]>>(&self, _keys: &[K], _out: &mut Vec<bool>) -> bool {
        false
    }
    /// ORs `other` into `self`; an error for filters without `union`.
    fn merge(&mut self, _other: &Self) -> bloomgate::Result<()> {
        Err(bloomgate::Error::InvalidParameter(format!(
            "{} has no union",
            Self::NAME
        )))
    }
    /// The filter's parameters.
    fn params(&self) -> &Params;
    /// Bytes of memory the filter uses.
    fn bytes(&self) -> usize;
    /// Memory the build would need, to skip sizes that cannot fit.
    fn memory_estimate(plan: &Plan) -> u64 {
        plan.bits / 8
    }
}

/// A bloomgate Bloom filter as a contender.
pub struct Ours<F>(pub F);

/// `bloomgate::BloomFilter`: classic layout.
pub type Classic = Ours<BloomFilter>;
/// `bloomgate::BlockedBloomFilter`: one 512-bit block per key; batched queries prefetch.
pub type Blocked = Ours<BlockedBloomFilter>;
/// `bloomgate::FastLocalBloomFilter`: one 512-bit block per key, probes anywhere in it.
pub type FastLocal = Ours<FastLocalBloomFilter>;
/// `bloomgate::ConcurrentBloomFilter` (classic layout, atomic words), driven from one thread
/// here: the cost of the atomics against the plain classic filter.
pub type Concurrent = Ours<ConcurrentBloomFilter>;
/// `bloomgate::CountingBloomFilter`: one 4-bit counter per classic bit (same m and k as
/// bloomgate-classic, so the same FPR at 4× the memory).
pub type Counting = Ours<CountingBloomFilter>;

impl<F: Native> Contender for Ours<F> {
    const NAME: &'static str = F::NAME;
    const FILL: Fill = F::FILL;

    fn empty(plan: &Plan) -> Result<Self, String> {
        let p = Params::for_bits(F::LAYOUT, plan.bits, plan.items).map_err(|e| e.to_string())?;
        F::make(p).map(Ours).map_err(|e| e.to_string())
    }

    fn insert(&mut self, key: &Key) {
        self.0.add(key);
    }

    fn insert_chunk(&mut self, keys: &[Key]) {
        self.0.add_batch(keys);
    }

    fn union(&mut self, other: &Self) -> Result<(), String> {
        self.0.merge(&other.0).map_err(|e| e.to_string())
    }

    fn memory_estimate(plan: &Plan) -> u64 {
        F::memory_estimate(plan)
    }

    fn config(&self) -> String {
        format!("{}{}", describe(self.0.params()), F::NOTE)
    }

    fn memory_bytes(&self) -> usize {
        self.0.bytes()
    }

    fn contains(&self, key: &Key) -> bool {
        self.0.has(key)
    }

    fn contains_batch(&self, keys: &[Key], out: &mut Vec<bool>) -> bool {
        self.0.has_batch(keys, out)
    }

    fn model_fpr(&self, items: u64) -> Option<f64> {
        Some(self.0.params().fpr_at(items))
    }
}

/// The contender names of a layout's filters: the one line a new layout adds here.
pub trait Named: BitLayout {
    /// Name of the plain filter, `Bloom<Self>`.
    const PLAIN: &'static str;
    /// Name of the concurrent filter, `ConcurrentBloom<Self>`.
    const CONCURRENT: &'static str;
}

impl Named for bloomgate::Classic {
    const PLAIN: &'static str = "bloomgate-classic";
    const CONCURRENT: &'static str = "bloomgate-concurrent";
}

impl Named for bloomgate::Blocked {
    const PLAIN: &'static str = "bloomgate-blocked";
    const CONCURRENT: &'static str = "bloomgate-concurrent-blocked";
}

impl Named for bloomgate::FastLocal {
    const PLAIN: &'static str = "bloomgate-fastlocal";
    const CONCURRENT: &'static str = "bloomgate-concurrent-fastlocal";
}

/// The [`Native`] methods each bloomgate filter below forwards to its own methods of the same
/// meaning: the constructor with the default seed, insert, contains and the parameters.
macro_rules! forward_native {
    () => {
        fn make(p: Params) -> bloomgate::Result<Self> {
            Self::with_params(p, bloomgate::hash::DEFAULT_SEED)
        }
        #[inline]
        fn add<K: AsRef<[u8]> + ?Sized>(&mut self, key: &K) {
            self.insert(key);
        }
        #[inline]
        fn has<K: AsRef<[u8]> + ?Sized>(&self, key: &K) -> bool {
            self.contains(key)
        }
        fn params(&self) -> &Params {
            self.params()
        }
    };
}

/// Every layout's plain filter: one generic adapter over the library's generic filter.
impl<L: Named> Native for Bloom<L> {
    const NAME: &'static str = L::PLAIN;
    const LAYOUT: Layout = L::LAYOUT;
    const FILL: Fill = Fill::Merge;
    forward_native!();
    fn add_batch<K: AsRef<[u8]>>(&mut self, keys: &[K]) {
        self.insert_batch(keys);
    }
    fn has_batch<K: AsRef<[u8]>>(&self, keys: &[K], out: &mut Vec<bool>) -> bool {
        self.contains_batch(keys, out);
        true
    }
    fn merge(&mut self, other: &Self) -> bloomgate::Result<()> {
        self.union(other)
    }
    fn bytes(&self) -> usize {
        self.memory_bytes()
    }
}

/// Every layout's concurrent filter, driven from one thread: the cost of the atomics.
impl<L: Named> Native for ConcurrentBloom<L> {
    const NAME: &'static str = L::CONCURRENT;
    const LAYOUT: Layout = L::LAYOUT;
    const NOTE: &'static str = "; atomic words, 1 thread";
    forward_native!();
    fn add_batch<K: AsRef<[u8]>>(&mut self, keys: &[K]) {
        self.insert_batch(keys);
    }
    fn bytes(&self) -> usize {
        self.params().bytes() as usize
    }
}

impl Native for CountingBloomFilter {
    const NAME: &'static str = "bloomgate-counting";
    const LAYOUT: Layout = Layout::Classic;
    const NOTE: &'static str = "; 4-bit counters (m counters = classic m)";
    forward_native!();
    fn bytes(&self) -> usize {
        self.memory_bytes()
    }
    fn memory_estimate(plan: &Plan) -> u64 {
        plan.bits / 2
    }
}

/// Initial capacity of the scalable contender as a fraction of the items: it grows through
/// several links (1/8 with growth 2 → 4 links), which is what a scalable filter is for.
const SCALABLE_START_FRACTION: u64 = 8;

/// `bloomgate::ScalableBloomFilter` starting at n/8 and growing to n, at the equal-accuracy
/// target FPR (its bound p0/(1−r) is held to that target).
pub struct Scalable(ScalableBloomFilter);

impl Contender for Scalable {
    const NAME: &'static str = "bloomgate-scalable";

    fn empty(plan: &Plan) -> Result<Self, String> {
        let initial = (plan.items / SCALABLE_START_FRACTION).max(1);
        ScalableBloomFilter::new(initial, plan.target_fpr)
            .map(Scalable)
            .map_err(|e| e.to_string())
    }

    fn insert(&mut self, key: &Key) {
        // Err only past the size limit, far beyond any plan here.
        let _ = self.0.insert(key);
    }

    fn memory_estimate(plan: &Plan) -> u64 {
        plan.bits / 8 * 3
    }

    fn config(&self) -> String {
        format!(
            "same target FPR {:.3}%; XXH3-128 seed 0; classic links; start n/{SCALABLE_START_FRACTION}, growth {}, tightening {}, {} links",
            self.0.target_fpr() * 100.0,
            self.0.growth(),
            self.0.tightening(),
            self.0.links()
        )
    }

    fn memory_bytes(&self) -> usize {
        self.0.memory_bytes()
    }

    fn contains(&self, key: &Key) -> bool {
        self.0.contains(key)
    }

    fn model_fpr(&self, _items: u64) -> Option<f64> {
        Some(self.0.estimated_fpr())
    }
}

/// `bloomgate::CuckooFilter` at the equal-accuracy target FPR.
pub struct Cuckoo {
    filter: CuckooFilter,
    failed_inserts: u64,
}

impl Contender for Cuckoo {
    const NAME: &'static str = "bloomgate-cuckoo";

    fn empty(plan: &Plan) -> Result<Self, String> {
        CuckooFilter::new(plan.items, plan.target_fpr)
            .map(|filter| Cuckoo {
                filter,
                failed_inserts: 0,
            })
            .map_err(|e| e.to_string())
    }

    fn insert(&mut self, key: &Key) {
        if self.filter.insert(key).is_err() {
            self.failed_inserts += 1;
        }
    }

    fn config(&self) -> String {
        let mut config = format!(
            "same target FPR; XXH3-128 seed 0; 4-slot buckets, {}-bit fingerprints, load {:.1}%",
            self.filter.fingerprint_bits(),
            self.filter.load_factor() * 100.0
        );
        if self.failed_inserts > 0 {
            config += &format!("; {} inserts FAILED (Full)", self.failed_inserts);
        }
        config
    }

    fn memory_bytes(&self) -> usize {
        self.filter.memory_bytes()
    }

    fn contains(&self, key: &Key) -> bool {
        self.filter.contains(key)
    }

    fn model_fpr(&self, _items: u64) -> Option<f64> {
        Some(self.filter.estimated_fpr())
    }
}

/// Single, missing and batched-missing query costs and the FPR of one built filter, on keys of
/// any type; fails on a false negative.
struct Queries {
    hit_ns: f64,
    miss_ns: f64,
    batch_ns: f64,
    fpr: f64,
}

fn queries<K>(
    hit: &[K],
    miss: &[K],
    reps: u32,
    contains: impl Fn(&K) -> bool,
    contains_batch: impl Fn(&[K], &mut Vec<bool>),
) -> Result<Queries, String> {
    let count = |keys: &[K]| keys.iter().filter(|k| contains(black_box(k))).count() as u64;
    let found = count(hit);
    if found != hit.len() as u64 {
        return Err(format!(
            "FALSE NEGATIVES: {} of {} present keys not found",
            hit.len() as u64 - found,
            hit.len()
        ));
    }
    let fpr = count(miss) as f64 / miss.len() as f64;
    let mut out = Vec::with_capacity(miss.len());
    contains_batch(miss, &mut out);
    let batch_fp = out.iter().filter(|&&b| b).count() as f64 / miss.len() as f64;
    if batch_fp != fpr {
        return Err(format!("batch answers differ: FPR {batch_fp} vs {fpr}"));
    }
    Ok(Queries {
        hit_ns: ns_per_op(reps, hit.len(), |_, r| count(&hit[r])),
        miss_ns: ns_per_op(reps, miss.len(), |_, r| count(&miss[r])),
        batch_ns: ns_per_op(reps, miss.len(), |_, r| {
            out.clear();
            contains_batch(&miss[r], &mut out);
            out.iter().filter(|&&b| b).count() as u64
        }),
        fpr,
    })
}

/// The JSON rows and table line of one headline filter.
fn headline_rows(
    name: &'static str,
    config: String,
    params: &Params,
    items: u64,
    build: Duration,
    q: Queries,
) -> (Vec<Row>, Summary) {
    let bytes = params.bytes();
    let bits_per_item = bytes as f64 * 8.0 / items as f64;
    let insert_ns = build.as_nanos() as f64 / items as f64;
    let summary = Summary {
        filter: name,
        config,
        bytes,
        bits_per_item,
        build_s: build.as_secs_f64(),
        insert_ns,
        hit_ns: q.hit_ns,
        miss_ns: q.miss_ns,
        batch_ns: Some(q.batch_ns),
        fpr: q.fpr,
        model_fpr: Some(params.fpr_at(items)),
    };
    (summary.rows(items), summary)
}

/// Present and absent usernames to query a username filter with.
pub struct NameProbes {
    /// Present usernames, for the hit queries.
    pub hit: Vec<Username>,
    /// Absent usernames, for the miss queries and the FPR.
    pub miss: Vec<Username>,
    /// Repetitions of each timed query pass (best per block kept).
    pub reps: u32,
}

/// The first headline for one layout: `items` usernames (`user_123`-like strings of
/// varied length, [`Username`]) at `fpr`, sized by `Params::for_items`, built on one thread with the
/// batch insert over 1M-name chunks (name generation excluded from the build time).
pub fn usernames<F: Native>(
    items: u64,
    fpr: f64,
    probes: &NameProbes,
) -> Result<(Vec<Row>, Summary), String> {
    let params = Params::for_items(F::LAYOUT, items, fpr).map_err(|e| e.to_string())?;
    let wall = Instant::now();
    let mut build = Duration::ZERO;
    let start = Instant::now();
    let mut filter = F::make(params).map_err(|e| e.to_string())?;
    build += start.elapsed();
    let mut chunk = Vec::with_capacity(CHUNK);
    let mut next = 0;
    while next < items {
        let len = (items - next).min(CHUNK as u64);
        chunk.clear();
        chunk.extend((next..next + len).map(|i| Username::new(Stream::Present, i)));
        let start = Instant::now();
        filter.add_batch(&chunk);
        build += start.elapsed();
        next += len;
    }
    let wall = wall.elapsed();
    let q = queries(
        &probes.hit,
        &probes.miss,
        probes.reps,
        |k| filter.has(k),
        |keys, out| {
            filter.has_batch(keys, out);
        },
    )?;
    let config = format!(
        "Params::for_items({:?}, {items}, {fpr}); XXH3-128 seed 0; k={}; usernames like user_123, anna.86, night_owl2468 (varied length); built on 1 thread with insert_batch per 1M names: {:.1} s inserting, {:.1} s wall with name generation; ns/insert = build time / items",
        F::LAYOUT,
        params.hashes,
        build.as_secs_f64(),
        wall.as_secs_f64()
    );
    Ok(headline_rows(F::NAME, config, &params, items, build, q))
}

/// The second headline: a blocked filter sized for `items` at `fpr`, built over every
/// core by `BlockedBloomFilter::insert_parallel` (hash in parallel, each thread writes its own
/// block range) fed 1M-key chunks generated on the fly (a 1B-key set never sits in memory).
/// Build time = time inside `insert_parallel` (key generation excluded); the wall time with
/// generation is in `config`.
pub fn parallel_blocked(
    items: u64,
    fpr: f64,
    probes: &Probes,
) -> Result<(Vec<Row>, Summary), String> {
    let params = Params::for_items(Layout::Blocked, items, fpr).map_err(|e| e.to_string())?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let wall = Instant::now();
    let mut build = Duration::ZERO;
    let start = Instant::now();
    let mut filter = BlockedBloomFilter::with_params(params, bloomgate::hash::DEFAULT_SEED)
        .map_err(|e| e.to_string())?;
    build += start.elapsed();
    for_each_chunk(Stream::Present, 0..items, |chunk| {
        let start = Instant::now();
        filter.insert_parallel(chunk);
        build += start.elapsed();
    });
    let wall = wall.elapsed();
    let q = queries(
        &probes.hit,
        &probes.miss,
        probes.reps,
        |k| filter.contains(k),
        |keys, out| filter.contains_batch(keys, out),
    )?;
    let config = format!(
        "Params::for_items(Blocked, {items}, {fpr}); XXH3-128 seed 0; k={}; blocked 512-bit; built by insert_parallel on {threads} threads per 1M-key chunk: {:.1} s inserting, {:.1} s wall with key generation; ns/insert = build time / items",
        params.hashes,
        build.as_secs_f64(),
        wall.as_secs_f64()
    );
    Ok(headline_rows(
        <BlockedBloomFilter as Native>::NAME,
        config,
        &params,
        items,
        build,
        q,
    ))
}
