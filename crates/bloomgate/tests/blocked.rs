//! BlockedBloomFilter: no false negatives (proptest), FPR against the Poisson-mixture model with
//! a stated tolerance, batched = single answers, union/intersect, file round trips.

mod core_fpr;

use bloomgate::{BlockedBloomFilter, Error, FilterCodec, KeyHash, Layout, Params};
use core_fpr::{
    absent_key, assert_fpr_across_sizes, assert_fpr_within_tolerance, batched_false_positives,
    exact_blocked_fpr, present_key,
};
use proptest::prelude::*;

/// The false positives of `trials` filters (see `core_fpr::batched_false_positives`).
fn false_positives(params: Params, trials: u64, queries_each: u64) -> u64 {
    batched_false_positives::<bloomgate::Blocked>(params, trials, queries_each)
}

/// Model FPR: exact binomial-load model for k ≤ 8 when blocks are few (Poisson is then loose),
/// the library's Poisson-mixture model otherwise.
fn model(params: Params) -> f64 {
    if params.hashes <= 8 && params.bits / 512 < 1000 {
        exact_blocked_fpr(params.bits, params.hashes, params.items)
    } else {
        params.fpr()
    }
}

/// FPR within tolerance (`core_fpr::assert_fpr_within_tolerance`: max(4σ + 3, 5%)) of the model,
/// for several n and bits per key, including k = 16 (two probes per word) at 24 bits/key.
#[test]
fn fpr_matches_model_across_sizes() {
    assert_fpr_across_sizes(
        "blocked",
        Layout::Blocked,
        &[
            (1_000, 10, 100),
            (100_000, 6, 2),
            (100_000, 16, 4),
            (1_000_000, 10, 1),
            (100_000, 24, 8),
        ],
        false_positives,
        model,
    );
}

/// The headline number: 10 bits/key, k = 8 — about 1.05%, below split-block's 1.26%.
#[test]
fn ten_bits_per_key_beats_split_block() {
    let n = 1_000_000;
    let params = Params::for_bits(Layout::Blocked, 10 * n, n).unwrap();
    assert_eq!(params.hashes, 8);
    let fp = false_positives(params, 1, 4_000_000);
    assert_fpr_within_tolerance("blocked 10 bits/key", fp, 4_000_000, params.fpr());
    assert!((fp as f64 / 4e6) < 0.0115);
}

/// Every k from 1 to 8, with a power-of-two number of blocks.
#[test]
fn every_k_with_power_of_two_blocks() {
    for k in 1..=8u32 {
        let params = Params::new(Layout::Blocked, 512 << 10, k, 40_000).unwrap();
        let fp = false_positives(params, 2, 500_000);
        assert_fpr_within_tolerance(
            &format!("blocked 2^10 blocks k={k}"),
            fp,
            1_000_000,
            model(params),
        );
    }
}

/// n = 1..=10 at 1%: one-block filters, many seeds, against the exact model.
#[test]
fn tiny_filters() {
    for n in 1..=10u64 {
        let params = Params::for_items(Layout::Blocked, n, 0.01).unwrap();
        let fp = false_positives(params, 2_000, 1_000);
        let label = format!(
            "blocked tiny n={n} bits={} k={}",
            params.bits, params.hashes
        );
        assert_fpr_within_tolerance(&label, fp, 2_000_000, model(params));
        assert!(model(params) <= 0.01);
    }
}

/// ≥10M items (a few seconds at opt-level 3).
#[test]
fn ten_million_items() {
    let n = 10_000_000u64;
    let mut f = BlockedBloomFilter::new(n, 0.01).unwrap();
    let keys: Vec<[u8; 16]> = (0..n).map(present_key).collect();
    f.insert_batch(&keys);
    let mut out = Vec::new();
    f.contains_batch(&keys, &mut out);
    assert!(out.iter().all(|&b| b));
    let q = 5_000_000;
    let fp = (0..q).filter(|&i| f.contains(absent_key(i))).count() as u64;
    assert_fpr_within_tolerance("blocked 10M at 1%", fp, q, f.params().fpr());
    assert!(fp as f64 / q as f64 <= 0.0105);
    let relative = (f.estimated_len() - n as f64).abs() / n as f64;
    assert!(relative < 0.02, "estimated_len {}", f.estimated_len());
    assert!(
        (f.estimated_fpr() - f.params().fpr()).abs() < 0.0005,
        "{}",
        f.estimated_fpr()
    );
}

#[test]
fn batched_and_prehashed_answers_equal_single_ones() {
    let mut f = BlockedBloomFilter::new(5_000, 0.05).unwrap();
    let present: Vec<[u8; 16]> = (0..5_000).map(present_key).collect();
    for k in &present[..2_500] {
        f.insert(k);
    }
    f.insert_batch(&present[2_500..]);
    let probe: Vec<[u8; 16]> = (0..20_000)
        .map(|i| {
            if i % 3 == 0 {
                present_key(i)
            } else {
                absent_key(i)
            }
        })
        .collect();
    let single: Vec<bool> = probe.iter().map(|k| f.contains(k)).collect();
    let mut batched = Vec::new();
    f.contains_batch(&probe, &mut batched);
    assert_eq!(batched, single);
    let hashes: Vec<KeyHash> = probe.iter().map(|k| f.hash(k)).collect();
    let mut prehashed = Vec::new();
    f.contains_batch_hashes(&hashes, &mut prehashed);
    assert_eq!(prehashed, single);
    assert!(hashes
        .iter()
        .zip(&single)
        .all(|(h, &s)| f.contains_hash(*h) == s));
    // Short and empty batches (fewer keys than the prefetch distance).
    let mut out = Vec::new();
    f.contains_batch(&probe[..3], &mut out);
    f.contains_batch(&probe[..0], &mut out);
    assert_eq!(out, single[..3]);
}

plain_bit_filter_tests!(BlockedBloomFilter, Layout::Blocked, bloomgate::BloomFilter);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any k in 1..=64 keeps every key (several rounds of salts, bit-identical kernels).
    #[test]
    fn no_false_negatives_any_k(k in 1u32..=64, n in 1u64..200, seed in any::<u64>()) {
        let params = Params::new(Layout::Blocked, 512 * (n / 4 + 1), k, n).unwrap();
        let mut f = BlockedBloomFilter::with_params(params, seed).unwrap();
        for i in 0..n {
            f.insert(present_key(i));
        }
        for i in 0..n {
            prop_assert!(f.contains(present_key(i)));
        }
    }
}
