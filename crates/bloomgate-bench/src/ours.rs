//! bloomgate's own filters as contenders, sized with `Params::for_bits` (the same bits per item as
//! the peers, best k for the layout) and hashed with XXH3-128 (seed 0).

use crate::contender::{
    batch_ns, build_by_insert, count_contained, query_ns, Contender, Plan, Probes,
};
use crate::keys::{for_each_chunk, Key, Stream};
use crate::report::{Row, Summary};
use crate::timing::BlockTimes;
use bloomgate::{
    BlockedBloomFilter, BloomFilter, ConcurrentBlockedBloomFilter, ConcurrentBloomFilter,
    CountingBloomFilter, CuckooFilter, Layout, Params, ScalableBloomFilter,
};
use std::time::{Duration, Instant};

fn params(layout: Layout, plan: &Plan) -> Result<Params, String> {
    Params::for_bits(layout, plan.bits, plan.items).map_err(|e| e.to_string())
}

fn describe(p: &Params) -> String {
    let layout = match p.layout {
        Layout::Classic => "classic",
        Layout::Blocked => "blocked 512-bit",
    };
    format!("same bits/item; XXH3-128 seed 0; k={}; {layout}", p.hashes)
}

/// `bloomgate::BloomFilter`: classic layout.
pub struct Classic(BloomFilter);

impl Contender for Classic {
    const NAME: &'static str = "bloomgate-classic";

    fn build(plan: &Plan) -> Result<(Self, BlockTimes), String> {
        let p = params(Layout::Classic, plan)?;
        build_by_insert(
            plan.items,
            || {
                BloomFilter::with_params(p, bloomgate::hash::DEFAULT_SEED)
                    .map_err(|e| e.to_string())
            },
            |f, key| {
                f.insert(key);
            },
        )
        .map(|(f, t)| (Classic(f), t))
    }

    fn config(&self) -> String {
        describe(self.0.params())
    }

    fn memory_bytes(&self) -> usize {
        self.0.memory_bytes()
    }

    fn contains(&self, key: &Key) -> bool {
        self.0.contains(key)
    }

    fn contains_batch(&self, keys: &[Key], out: &mut Vec<bool>) -> bool {
        self.0.contains_batch(keys, out);
        true
    }

    fn model_fpr(&self, items: u64) -> Option<f64> {
        Some(self.0.params().fpr_at(items))
    }
}

/// `bloomgate::BlockedBloomFilter`: one 512-bit block per key; batched queries prefetch.
pub struct Blocked(BlockedBloomFilter);

impl Contender for Blocked {
    const NAME: &'static str = "bloomgate-blocked";

    fn build(plan: &Plan) -> Result<(Self, BlockTimes), String> {
        let p = params(Layout::Blocked, plan)?;
        build_by_insert(
            plan.items,
            || {
                BlockedBloomFilter::with_params(p, bloomgate::hash::DEFAULT_SEED)
                    .map_err(|e| e.to_string())
            },
            |f, key| {
                f.insert(key);
            },
        )
        .map(|(f, t)| (Blocked(f), t))
    }

    fn config(&self) -> String {
        describe(self.0.params())
    }

    fn memory_bytes(&self) -> usize {
        self.0.memory_bytes()
    }

    fn contains(&self, key: &Key) -> bool {
        self.0.contains(key)
    }

    fn contains_batch(&self, keys: &[Key], out: &mut Vec<bool>) -> bool {
        self.0.contains_batch(keys, out);
        true
    }

    fn model_fpr(&self, items: u64) -> Option<f64> {
        Some(self.0.params().fpr_at(items))
    }
}

/// `bloomgate::ConcurrentBloomFilter` (classic layout, atomic words), driven from one thread
/// here: the cost of the atomics against the plain classic filter.
pub struct Concurrent(ConcurrentBloomFilter);

impl Contender for Concurrent {
    const NAME: &'static str = "bloomgate-concurrent";

    fn build(plan: &Plan) -> Result<(Self, BlockTimes), String> {
        let p = params(Layout::Classic, plan)?;
        build_by_insert(
            plan.items,
            || {
                BloomFilter::with_params(p, bloomgate::hash::DEFAULT_SEED)
                    .map(ConcurrentBloomFilter::from)
                    .map_err(|e| e.to_string())
            },
            |f, key| {
                f.insert(key);
            },
        )
        .map(|(f, t)| (Concurrent(f), t))
    }

    fn config(&self) -> String {
        format!("{}; atomic words, 1 thread", describe(self.0.params()))
    }

    fn memory_bytes(&self) -> usize {
        self.0.params().bytes() as usize
    }

    fn contains(&self, key: &Key) -> bool {
        self.0.contains(key)
    }

    fn model_fpr(&self, items: u64) -> Option<f64> {
        Some(self.0.params().fpr_at(items))
    }
}

/// `bloomgate::CountingBloomFilter`: one 4-bit counter per classic bit (same m and k as
/// bloomgate-classic, so the same FPR at 4× the memory).
pub struct Counting(CountingBloomFilter);

impl Contender for Counting {
    const NAME: &'static str = "bloomgate-counting";

    fn build(plan: &Plan) -> Result<(Self, BlockTimes), String> {
        let p = params(Layout::Classic, plan)?;
        build_by_insert(
            plan.items,
            || {
                CountingBloomFilter::with_params(p, bloomgate::hash::DEFAULT_SEED)
                    .map_err(|e| e.to_string())
            },
            |f, key| {
                f.insert(key);
            },
        )
        .map(|(f, t)| (Counting(f), t))
    }

    fn memory_estimate(plan: &Plan) -> u64 {
        plan.bits / 2
    }

    fn config(&self) -> String {
        format!(
            "{}; 4-bit counters (m counters = classic m)",
            describe(self.0.params())
        )
    }

    fn memory_bytes(&self) -> usize {
        self.0.memory_bytes()
    }

    fn contains(&self, key: &Key) -> bool {
        self.0.contains(key)
    }

    fn model_fpr(&self, items: u64) -> Option<f64> {
        Some(self.0.params().fpr_at(items))
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

    fn build(plan: &Plan) -> Result<(Self, BlockTimes), String> {
        let initial = (plan.items / SCALABLE_START_FRACTION).max(1);
        build_by_insert(
            plan.items,
            || ScalableBloomFilter::new(initial, plan.target_fpr).map_err(|e| e.to_string()),
            |f, key| {
                // Err only past the size limit, far beyond any plan here.
                let _ = f.insert(key);
            },
        )
        .map(|(f, t)| (Scalable(f), t))
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

    fn build(plan: &Plan) -> Result<(Self, BlockTimes), String> {
        build_by_insert(
            plan.items,
            || {
                CuckooFilter::new(plan.items, plan.target_fpr)
                    .map(|filter| Cuckoo {
                        filter,
                        failed_inserts: 0,
                    })
                    .map_err(|e| e.to_string())
            },
            |f, key| {
                if f.filter.insert(key).is_err() {
                    f.failed_inserts += 1;
                }
            },
        )
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

/// The primer's 1B-keys case: a blocked filter sized for `items` at `fpr`, built by `threads`
/// threads inserting disjoint index ranges into a `ConcurrentBlockedBloomFilter`, each generating
/// its keys in chunks (a 1B-key set never sits in memory). Build time = the slowest thread's time
/// inside inserts (key generation excluded); the wall time with generation is in `config`.
/// Queries then run on the plain filter (`into_inner`, no copy).
pub fn parallel_blocked(
    items: u64,
    fpr: f64,
    threads: usize,
    probes: &Probes,
) -> Result<(Vec<Row>, Summary), String> {
    let params = Params::for_items(Layout::Blocked, items, fpr).map_err(|e| e.to_string())?;
    let wall = Instant::now();
    let filter = ConcurrentBlockedBloomFilter::with_params(params, bloomgate::hash::DEFAULT_SEED)
        .map_err(|e| e.to_string())?;
    let per_thread = items.div_ceil(threads as u64);
    let build = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads as u64)
            .map(|t| {
                let filter = &filter;
                scope.spawn(move || {
                    let range = (t * per_thread).min(items)..((t + 1) * per_thread).min(items);
                    let mut spent = Duration::ZERO;
                    for_each_chunk(Stream::Present, range, |chunk| {
                        let start = Instant::now();
                        for key in chunk {
                            filter.insert(key);
                        }
                        spent += start.elapsed();
                    });
                    spent
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Duration::MAX))
            .max()
            .unwrap_or_default()
    });
    let wall = wall.elapsed();
    let filter = filter.into_inner();

    let filter = Blocked(filter);
    if count_contained(&filter, &probes.hit) != probes.hit.len() as u64 {
        return Err("FALSE NEGATIVES after the parallel build".into());
    }
    let false_positives = count_contained(&filter, &probes.miss);
    let fpr_measured = false_positives as f64 / probes.miss.len() as f64;
    let hit_ns = query_ns(&filter, &probes.hit, probes.reps);
    let miss_ns = query_ns(&filter, &probes.miss, probes.reps);
    let batch_ns = batch_ns(probes.reps, &probes.miss, |keys, out| {
        filter.0.contains_batch(keys, out)
    });
    let bytes = filter.0.memory_bytes() as u64;
    let bits_per_item = bytes as f64 * 8.0 / items as f64;
    let insert_ns = build.as_nanos() as f64 / items as f64;
    let config = format!(
        "Params::for_items(Blocked, {items}, {fpr}); XXH3-128 seed 0; k={}; blocked 512-bit; parallel build on {threads} threads (ConcurrentBlockedBloomFilter), {:.1} s inserting, {:.1} s wall with key generation; ns/insert = build time / items",
        params.hashes,
        build.as_secs_f64(),
        wall.as_secs_f64()
    );
    let row = |op: &'static str, ns: f64, fpr: Option<f64>| Row {
        filter: Blocked::NAME.to_string(),
        config: config.clone(),
        op,
        items,
        bits_per_item,
        ns_per_op: ns,
        fpr,
    };
    let rows = vec![
        row("insert", insert_ns, None),
        row("query_hit", hit_ns, None),
        row("query_miss", miss_ns, Some(fpr_measured)),
        row("query_miss_batch", batch_ns, Some(fpr_measured)),
    ];
    let summary = Summary {
        filter: Blocked::NAME,
        config,
        bytes,
        bits_per_item,
        build_s: build.as_secs_f64(),
        insert_ns,
        hit_ns,
        miss_ns,
        batch_ns: Some(batch_ns),
        fpr: fpr_measured,
        model_fpr: Some(params.fpr_at(items)),
    };
    Ok((rows, summary))
}
