//! What the harness needs from a filter under test, and the generic measurement of one contender
//! at one size. Measurement is monomorphised per contender (no `dyn` call in a timed loop: at
//! 2–5 ns per query a virtual call would be a visible share of the cost). Filters too large to
//! build key by key in the time budget are filled untimed (in parallel where copies merge) and
//! `insert` is timed on a sample of further keys ([`Sampled`]).

use crate::keys::{for_each_chunk, Key, Stream};
use crate::results::{Row, Summary};
use crate::timing::{ns_per_op, BlockTimes, BLOCK};
use std::hint::black_box;
use std::ops::Range;
use std::time::Instant;

/// How a contender is sized at one point of the run.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Keys inserted.
    pub items: u64,
    /// Filter size in bits for contenders that take a size; the others get `target_fpr`.
    pub bits: u64,
    /// `bits / items`, for contenders sized in bits per key.
    pub bits_per_item: f64,
    /// The classic-Bloom model FPR at `bits_per_item` with the best k: the equal-accuracy target
    /// for contenders that can only be sized by FPR.
    pub target_fpr: f64,
}

impl Plan {
    /// `items` keys at `bits_per_item` bits each.
    pub fn at_bits(items: u64, bits_per_item: f64) -> Plan {
        Plan::sized(items, (items as f64 * bits_per_item).ceil() as u64)
    }

    /// `items` keys in exactly `bits` bits (e.g. a power of two).
    pub fn sized(items: u64, bits: u64) -> Plan {
        let bits_per_item = bits as f64 / items as f64;
        let k = crate::model::classic_best_k(bits_per_item);
        Plan {
            items,
            bits,
            bits_per_item,
            target_fpr: crate::model::classic(bits_per_item, k, 1.0),
        }
    }
}

/// How a contender's filter comes to hold its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// Built once from the whole key set ([`Contender::build`] only; `empty`/`insert` refuse).
    Whole,
    /// Key by key with [`Contender::insert`].
    Insert,
    /// Key by key, and copies of one size built from different keys merge with
    /// [`Contender::union`], so large filters can be filled by several threads.
    Merge,
}

/// A filter under test.
pub trait Contender: Sized + Send {
    /// Contender name as it appears in the JSON (`bloomgate-blocked`, `fastbloom`, ...).
    const NAME: &'static str;

    /// How the contender can be filled (key by key by default).
    const FILL: Fill = Fill::Insert;

    /// An empty filter sized for `plan`.
    fn empty(plan: &Plan) -> Result<Self, String>;

    /// Adds one key the way a user adds one: the operation timed as `insert`.
    fn insert(&mut self, key: &Key);

    /// Adds a chunk of keys by the fastest single-thread path the contender allows (its batch API,
    /// or hashing ahead and prefetching). Only fills large filters before measuring; never timed.
    fn insert_chunk(&mut self, keys: &[Key]) {
        keys.iter().for_each(|key| self.insert(key));
    }

    /// ORs `other` (same plan, other keys) into `self`; only called when `FILL` is `Merge`.
    fn union(&mut self, _other: &Self) -> Result<(), String> {
        Err(format!("{} cannot merge filters", Self::NAME))
    }

    /// Builds a filter holding present keys `0..plan.items`, returning it and the time spent
    /// per block of inserts (key generation excluded; sizing and allocation in block 0).
    fn build(plan: &Plan) -> Result<(Self, BlockTimes), String> {
        build_by_insert(plan.items, || Self::empty(plan), Self::insert)
    }

    /// Memory the build would need, to skip sizes that cannot fit.
    fn memory_estimate(plan: &Plan) -> u64 {
        plan.bits / 8
    }

    /// How it was set up: sizing rule, hasher, k, layout.
    fn config(&self) -> String;

    /// Bytes actually allocated for the structure.
    fn memory_bytes(&self) -> usize;

    /// Whether the filter says it holds `key`: the operation timed as `query_hit` / `query_miss`.
    fn contains(&self, key: &Key) -> bool;

    /// Batched membership of `keys` into `out`; `false` when the contender has no batch API.
    fn contains_batch(&self, _keys: &[Key], _out: &mut Vec<bool>) -> bool {
        false
    }

    /// Model FPR of this configuration with `items` keys inserted, when there is a model.
    fn model_fpr(&self, items: u64) -> Option<f64>;
}

/// Builds a filter with `make`, then inserts present keys `0..items` chunk by chunk; the times
/// cover `make` (block 0) and the inserts per [`BLOCK`] keys, not key generation.
pub fn build_by_insert<F>(
    items: u64,
    make: impl FnOnce() -> Result<F, String>,
    mut insert: impl FnMut(&mut F, &Key),
) -> Result<(F, BlockTimes), String> {
    let mut times = BlockTimes::default();
    let start = Instant::now();
    let mut filter = make()?;
    times.record(0, start.elapsed());
    let mut index = 1;
    for_each_chunk(Stream::Present, 0..items, |chunk| {
        for block in chunk.chunks(BLOCK) {
            let start = Instant::now();
            for key in block {
                insert(&mut filter, key);
            }
            times.record(index, start.elapsed());
            index += 1;
        }
    });
    Ok((filter, times))
}

/// How a large filter is built: all but the last `2 × sample` keys are filled untimed by
/// [`fill`]; the rest are inserted one `insert` at a time in two halves whose blocks are timed,
/// keeping each block's faster half (the best-per-block rule with fresh keys in each half).
#[derive(Clone, Copy, Debug)]
pub struct Sampled {
    /// Keys in each of the two timed halves.
    pub sample: u64,
    /// Threads that fill the untimed part, for contenders that can merge copies.
    pub threads: usize,
}

/// A filter holding present keys `range`, filled as fast as `C` allows: for `Fill::Merge`,
/// `threads` threads each fill their own copy from their share of the keys with `insert_chunk`
/// and the copies are unioned into the first; otherwise one thread fills one filter.
/// Returns the filter and the threads used.
pub fn fill<C: Contender>(
    plan: &Plan,
    range: Range<u64>,
    threads: usize,
) -> Result<(C, usize), String> {
    let threads = if C::FILL == Fill::Merge {
        threads.max(1)
    } else {
        1
    };
    let share = (range.end - range.start).div_ceil(threads as u64);
    let copies: Vec<Result<C, String>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads as u64)
            .map(|t| {
                let from = (range.start + t * share).min(range.end);
                let to = (from + share).min(range.end);
                scope.spawn(move || {
                    let mut filter = C::empty(plan)?;
                    for_each_chunk(Stream::Present, from..to, |chunk| {
                        filter.insert_chunk(chunk)
                    });
                    Ok(filter)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err("fill thread panicked".into()))
            })
            .collect()
    });
    let mut copies = copies.into_iter();
    let mut filter = copies.next().ok_or("no fill thread")??;
    for copy in copies {
        filter.union(&copy?)?;
    }
    Ok((filter, threads))
}

/// Builds `C` for `plan` the [`Sampled`] way: returns the filter, ns per timed insert (best per
/// block over the two halves of the sample) and a note for `config`.
fn build_sampled<C: Contender>(plan: &Plan, sampled: Sampled) -> Result<(C, f64, String), String> {
    let sample = sampled.sample.min(plan.items / 4);
    let filled = plan.items - 2 * sample;
    let start = Instant::now();
    let (mut filter, threads) = fill::<C>(plan, 0..filled, sampled.threads)?;
    let fill_s = start.elapsed().as_secs_f64();
    let mut times = BlockTimes::default();
    for half in 0..2 {
        let from = filled + half * sample;
        let mut index = 0;
        for_each_chunk(Stream::Present, from..from + sample, |chunk| {
            for block in chunk.chunks(BLOCK) {
                let start = Instant::now();
                for key in block {
                    filter.insert(key);
                }
                times.record(index, start.elapsed());
                index += 1;
            }
        });
    }
    let how = if threads > 1 {
        format!("{threads} threads, one copy each, unioned")
    } else {
        "1 thread".to_string()
    };
    let note = format!(
        "filled untimed ({how}) with {filled} keys in {fill_s:.1} s wall; insert = best per block of 2 × {sample} further keys, one insert each"
    );
    let insert_ns = times.total().as_nanos() as f64 / sample.max(1) as f64;
    Ok((filter, insert_ns, note))
}

/// Query keys for one size: a sample of present keys and ≥ 1M absent keys.
pub struct Probes {
    /// Present keys, for the hit queries.
    pub hit: Vec<Key>,
    /// Absent keys, for the miss queries and the FPR.
    pub miss: Vec<Key>,
    /// Repetitions of each timed query pass (best per block kept).
    pub reps: u32,
    /// Builds per contender (the fastest kept).
    pub build_reps: u32,
    /// Build large filters the [`Sampled`] way (contenders that can be filled key by key).
    pub sampled: Option<Sampled>,
}

/// Best-per-block ns per query of `contains` over `keys`.
pub fn query_ns<C: Contender>(filter: &C, keys: &[Key], reps: u32) -> f64 {
    ns_per_op(reps, keys.len(), |_, r| count_contained(filter, &keys[r]))
}

/// Best-per-block ns per query of `contains_batch` over `keys` (batches of one block).
pub fn batch_ns(reps: u32, keys: &[Key], mut batch: impl FnMut(&[Key], &mut Vec<bool>)) -> f64 {
    let mut out = Vec::with_capacity(BLOCK);
    ns_per_op(reps, keys.len(), |_, r| {
        out.clear();
        batch(&keys[r], &mut out);
        out.iter().filter(|&&b| b).count() as u64
    })
}

/// How many of `keys` `filter` says it contains (each key through `black_box`).
pub fn count_contained<C: Contender>(filter: &C, keys: &[Key]) -> u64 {
    let mut found = 0u64;
    for key in keys {
        found += filter.contains(black_box(key)) as u64;
    }
    found
}

/// Builds `C` for `plan` (best of `build_reps`), then times hit, miss and batched-miss queries
/// and measures the FPR on the absent keys. Returns the JSON rows and the table summary.
pub fn measure<C: Contender>(plan: &Plan, probes: &Probes) -> Result<(Vec<Row>, Summary), String> {
    let (filter, insert_ns, build_s, note) = match probes.sampled {
        Some(sampled) if C::FILL != Fill::Whole => {
            let start = Instant::now();
            let (filter, insert_ns, note) = build_sampled::<C>(plan, sampled)?;
            (filter, insert_ns, start.elapsed().as_secs_f64(), Some(note))
        }
        _ => {
            let mut best_build = BlockTimes::default();
            let mut filter = None;
            for _ in 0..probes.build_reps.max(1) {
                drop(filter.take()); // free the previous copy before building the next
                let (f, times) = C::build(plan)?;
                best_build.merge_min(&times);
                filter = Some(f);
            }
            let best = best_build.total();
            let filter = filter.expect("at least one build");
            let insert_ns = best.as_nanos() as f64 / plan.items as f64;
            (filter, insert_ns, best.as_secs_f64(), None)
        }
    };
    let items = plan.items;
    let bits_per_item = filter.memory_bytes() as f64 * 8.0 / items as f64;

    let hits = count_contained(&filter, &probes.hit);
    if hits != probes.hit.len() as u64 {
        return Err(format!(
            "FALSE NEGATIVES: {} of {} present keys not found",
            probes.hit.len() as u64 - hits,
            probes.hit.len()
        ));
    }
    let hit_ns = query_ns(&filter, &probes.hit, probes.reps);
    let false_positives = count_contained(&filter, &probes.miss);
    let fpr = false_positives as f64 / probes.miss.len() as f64;
    let miss_ns = query_ns(&filter, &probes.miss, probes.reps);
    let mut out = Vec::with_capacity(probes.miss.len());
    let batch_ns = if filter.contains_batch(&probes.miss, &mut out) {
        let batch_fp = out.iter().filter(|&&b| b).count() as u64;
        if batch_fp != false_positives || out.len() != probes.miss.len() {
            return Err(format!(
                "batch answers differ: {batch_fp} vs {false_positives} positives"
            ));
        }
        Some(batch_ns(probes.reps, &probes.miss, |keys, out| {
            filter.contains_batch(keys, out);
        }))
    } else {
        None
    };

    let config = match note {
        Some(note) => format!("{}; {note}", filter.config()),
        None => filter.config(),
    };
    let summary = Summary {
        filter: C::NAME,
        config,
        bytes: filter.memory_bytes() as u64,
        bits_per_item,
        build_s,
        insert_ns,
        hit_ns,
        miss_ns,
        batch_ns,
        fpr,
        model_fpr: filter.model_fpr(items),
    };
    Ok((summary.rows(items), summary))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{keys, present_sample};
    use crate::{ours, peers};

    /// Measures `C` on 20K keys: no false negative, an FPR near its model, every op present.
    fn check<C: Contender>() {
        let plan = Plan::at_bits(20_000, 10.0);
        let probes = Probes {
            hit: present_sample(plan.items, 20_000),
            miss: keys(Stream::Absent, 0, 200_000),
            reps: 1,
            build_reps: 2,
            sampled: None,
        };
        let (rows, summary) =
            measure::<C>(&plan, &probes).unwrap_or_else(|e| panic!("{}: {e}", C::NAME));
        let ops: Vec<&str> = rows.iter().map(|r| r.op).collect();
        assert_eq!(
            &ops[..3],
            ["insert", "query_hit", "query_miss"],
            "{}",
            C::NAME
        );
        if let Some(model) = summary.model_fpr.filter(|&m| m > 0.0) {
            // 200K probes: 5 standard errors plus 10% of model slack.
            let sigma = (model / 200_000.0).sqrt();
            assert!(
                summary.fpr <= model * 1.1 + 5.0 * sigma,
                "{}: {} vs model {model}",
                C::NAME,
                summary.fpr
            );
        }
        assert!(summary.bits_per_item > 0.0 && summary.insert_ns > 0.0);
    }

    #[test]
    fn every_contender_measures_without_false_negatives() {
        check::<ours::Classic>();
        check::<ours::Blocked>();
        check::<ours::Concurrent>();
        check::<ours::Counting>();
        check::<ours::Scalable>();
        check::<ours::Cuckoo>();
        check::<peers::Fastbloom>();
        check::<peers::FastbloomSameHash>();
        check::<peers::Bloomfilter>();
        check::<peers::SbbfRs>();
        check::<peers::XorfBinaryFuse8>();
        check::<peers::Cuckoofilter>();
        check::<peers::Qfilter>();
        check::<peers::StdHashSet>();
    }

    #[test]
    fn batch_rows_only_where_there_is_a_batch_api() {
        let plan = Plan::at_bits(10_000, 10.0);
        let probes = Probes {
            hit: present_sample(plan.items, 10_000),
            miss: keys(Stream::Absent, 0, 50_000),
            reps: 1,
            build_reps: 1,
            sampled: None,
        };
        let (rows, _) = measure::<ours::Blocked>(&plan, &probes).expect("blocked");
        assert!(rows.iter().any(|r| r.op == "query_miss_batch"));
        let (rows, _) = measure::<peers::SbbfRs>(&plan, &probes).expect("sbbf");
        assert!(!rows.iter().any(|r| r.op == "query_miss_batch"));
    }

    /// A filter filled by two threads and unioned answers exactly as one built key by key.
    fn merged_equals_serial<C: Contender>() {
        let plan = Plan::at_bits(50_000, 10.0);
        let (serial, _) = C::build(&plan).unwrap_or_else(|e| panic!("{}: {e}", C::NAME));
        let (merged, threads) =
            fill::<C>(&plan, 0..plan.items, 2).unwrap_or_else(|e| panic!("{}: {e}", C::NAME));
        assert_eq!(threads, 2, "{}", C::NAME);
        let absent = keys(Stream::Absent, 0, 100_000);
        let differ = absent
            .iter()
            .filter(|k| serial.contains(k) != merged.contains(k))
            .count();
        assert_eq!(differ, 0, "{}", C::NAME);
        assert!(keys(Stream::Present, 0, 50_000)
            .iter()
            .all(|k| merged.contains(k)));
    }

    #[test]
    fn merged_fills_match_serial_builds() {
        merged_equals_serial::<ours::Classic>();
        merged_equals_serial::<ours::Blocked>();
        merged_equals_serial::<peers::Fastbloom>();
        merged_equals_serial::<peers::FastbloomSameHash>();
        merged_equals_serial::<peers::SbbfRs>();
    }

    #[test]
    fn sampled_builds_time_the_sample_and_say_so() {
        let plan = Plan::at_bits(40_000, 10.0);
        let probes = Probes {
            hit: present_sample(plan.items, 40_000),
            miss: keys(Stream::Absent, 0, 100_000),
            reps: 1,
            build_reps: 1,
            sampled: Some(Sampled {
                sample: 5_000,
                threads: 2,
            }),
        };
        let (_, summary) = measure::<ours::Classic>(&plan, &probes).expect("classic");
        assert!(summary.config.contains("2 threads"), "{}", summary.config);
        assert!(summary.config.contains("2 × 5000 further keys"));
        let (_, summary) = measure::<ours::Counting>(&plan, &probes).expect("counting");
        assert!(summary.config.contains("(1 thread)"), "{}", summary.config);
        // A static filter cannot be sampled: it is built whole, and says nothing of a sample.
        let (_, summary) = measure::<peers::XorfBinaryFuse8>(&plan, &probes).expect("xorf");
        assert!(!summary.config.contains("sample"));
    }
}
