//! What the harness needs from a filter under test, and the generic measurement of one contender
//! at one size. Measurement is monomorphised per contender (no `dyn` call in a timed loop: at
//! 2–5 ns per query a virtual call would be a visible share of the cost).

use crate::keys::{for_each_chunk, Key, Stream};
use crate::report::{Row, Summary};
use crate::timing::{ns_per_op, BlockTimes, BLOCK};
use std::hint::black_box;
use std::time::Instant;

/// How a contender is sized at one point of the run.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
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

/// A filter under test.
pub trait Contender: Sized {
    /// Contender name as it appears in the JSON (`bloomgate-blocked`, `fastbloom`, ...).
    const NAME: &'static str;

    /// Builds a filter holding present keys `0..plan.items`, returning it and the time spent
    /// per block of inserts (key generation excluded; sizing and allocation in block 0).
    fn build(plan: &Plan) -> Result<(Self, BlockTimes), String>;

    /// Memory the build would need, to skip sizes that cannot fit.
    fn memory_estimate(plan: &Plan) -> u64 {
        plan.bits / 8
    }

    /// How it was set up: sizing rule, hasher, k, layout.
    fn config(&self) -> String;

    /// Bytes actually allocated for the structure.
    fn memory_bytes(&self) -> usize;

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

/// Query keys for one size: a sample of present keys and ≥ 1M absent keys.
pub struct Probes {
    pub hit: Vec<Key>,
    pub miss: Vec<Key>,
    pub reps: u32,
    pub build_reps: u32,
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
    let mut best_build = BlockTimes::default();
    let mut filter = None;
    for _ in 0..probes.build_reps.max(1) {
        drop(filter.take()); // free the previous copy before building the next
        let (f, times) = C::build(plan)?;
        best_build.merge_min(&times);
        filter = Some(f);
    }
    let best_build = best_build.total();
    let filter = filter.expect("at least one build");
    let items = plan.items;
    let bits_per_item = filter.memory_bytes() as f64 * 8.0 / items as f64;
    let insert_ns = best_build.as_nanos() as f64 / items as f64;

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

    let config = filter.config();
    let row = |op: &'static str, ns: f64, fpr: Option<f64>| Row {
        filter: C::NAME.to_string(),
        config: config.clone(),
        op,
        items,
        bits_per_item,
        ns_per_op: ns,
        fpr,
    };
    let mut rows = vec![
        row("insert", insert_ns, None),
        row("query_hit", hit_ns, None),
        row("query_miss", miss_ns, Some(fpr)),
    ];
    if let Some(ns) = batch_ns {
        rows.push(row("query_miss_batch", ns, Some(fpr)));
    }
    let summary = Summary {
        filter: C::NAME,
        config,
        bytes: filter.memory_bytes() as u64,
        bits_per_item,
        build_s: best_build.as_secs_f64(),
        insert_ns,
        hit_ns,
        miss_ns,
        batch_ns,
        fpr,
        model_fpr: filter.model_fpr(items),
    };
    Ok((rows, summary))
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
        };
        let (rows, _) = measure::<ours::Blocked>(&plan, &probes).expect("blocked");
        assert!(rows.iter().any(|r| r.op == "query_miss_batch"));
        let (rows, _) = measure::<peers::SbbfRs>(&plan, &probes).expect("sbbf");
        assert!(!rows.iter().any(|r| r.op == "query_miss_batch"));
    }
}
