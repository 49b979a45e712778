//! Shared helpers of the classic/blocked/concurrent tests: disjoint key sets, exact small-filter
//! models, the stated FPR tolerance (and the across-sizes test built on it), and the API tests both plain bit filters must pass
//! ([`plain_bit_filter_tests!`]).
#![allow(dead_code)] // each test file uses a subset

/// Keys inserted by the tests: prefix 1.
pub fn present_key(i: u64) -> [u8; 16] {
    key(1, i)
}

/// Keys the filters never saw: prefix 2, so disjoint from `present_key` by construction.
pub fn absent_key(i: u64) -> [u8; 16] {
    key(2, i)
}

fn key(prefix: u64, i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&prefix.to_le_bytes());
    k[8..].copy_from_slice(&i.to_le_bytes());
    k
}

/// The stated tolerance of every statistical FPR test: the measured count of false positives
/// must lie within max(4σ + 3, 5% of expected) of the expected count, σ the binomial standard
/// deviation sqrt(q·p(1−p)) (+3 absorbs the discreteness when the expectation is tiny).
pub fn assert_fpr_within_tolerance(label: &str, false_positives: u64, queries: u64, model: f64) {
    let expected = queries as f64 * model;
    let sigma = (queries as f64 * model * (1.0 - model)).sqrt();
    let tolerance = (4.0 * sigma + 3.0).max(0.05 * expected);
    let measured = false_positives as f64 / queries as f64;
    eprintln!("{label}: measured {measured:.6} model {model:.6} ({false_positives} of {queries})");
    assert!(
        (false_positives as f64 - expected).abs() <= tolerance,
        "{label}: {false_positives} false positives, expected {expected:.1} ± {tolerance:.1} \
         (measured {measured:.6}, model {model:.6})"
    );
}

/// Builds `trials` filters of layout `L` (independent seeds) holding `params.items` present keys
/// (batch insert), checks that every one is found (batched and one by one), and queries
/// `queries_each` absent keys per filter batched and one by one, whose answers must agree;
/// returns the false positives.
pub fn batched_false_positives<L: bloomgate::BitLayout>(
    params: bloomgate::Params,
    trials: u64,
    queries_each: u64,
) -> u64 {
    let present: Vec<[u8; 16]> = (0..params.items).map(present_key).collect();
    let absent: Vec<[u8; 16]> = (0..queries_each).map(absent_key).collect();
    let mut fp = 0;
    let mut out = Vec::new();
    for trial in 0..trials {
        let mut f = bloomgate::Bloom::<L>::with_params(params, trial_seed(trial)).unwrap();
        f.insert_batch(&present);
        out.clear();
        f.contains_batch(&present, &mut out);
        assert!(out.iter().all(|&b| b), "false negative (batched)");
        assert!(present.iter().all(|k| f.contains(k)), "false negative");
        out.clear();
        f.contains_batch(&absent, &mut out);
        let batch = out.iter().filter(|&&b| b).count() as u64;
        let single = absent.iter().filter(|k| f.contains(k)).count() as u64;
        assert_eq!(batch, single, "batched and single answers differ");
        fp += batch;
    }
    fp
}

/// The FPR test of one layout across sizes: for each `(n, bits per key, trials)` case, sizes a
/// filter with `Params::for_bits`, counts the false positives of `trials` filters on
/// `2_000_000 / trials` absent keys each (`false_positives(params, trials, queries_each)`), and
/// holds them to [`assert_fpr_within_tolerance`] of `model(params)`.
pub fn assert_fpr_across_sizes(
    name: &str,
    layout: bloomgate::Layout,
    cases: &[(u64, u64, u64)],
    false_positives: impl Fn(bloomgate::Params, u64, u64) -> u64,
    model: impl Fn(bloomgate::Params) -> f64,
) {
    for &(n, bits_per_key, trials) in cases {
        let params = bloomgate::Params::for_bits(layout, n * bits_per_key, n).unwrap();
        let queries = 2_000_000 / trials;
        let fp = false_positives(params, trials, queries);
        let label = format!("{name} n={n} {bits_per_key} bits/key k={}", params.hashes);
        assert_fpr_within_tolerance(&label, fp, trials * queries, model(params));
    }
}

/// Distribution of the number of distinct positions hit by `draws` uniform draws from `m`.
fn occupancy(m: u64, draws: u64) -> Vec<f64> {
    let mut p = vec![1.0];
    for _ in 0..draws {
        let mut next = vec![0.0; p.len() + 1];
        for (x, &px) in p.iter().enumerate() {
            next[x] += px * x as f64 / m as f64;
            next[x + 1] += px * (m - x as u64) as f64 / m as f64;
        }
        p = next;
    }
    p
}

/// Exact classic FPR for independent uniform probes, without Bloom's approximation (which
/// ignores fill variance and coinciding query probes, both visible when m is small):
/// Σ_x P(x bits set) Σ_d P(d distinct query probes) · C(x, d) / C(m, d).
/// Use for k·n up to a few thousand.
pub fn exact_classic_fpr(m: u64, k: u32, n: u64) -> f64 {
    let set = occupancy(m, u64::from(k) * n);
    let query = occupancy(m, u64::from(k));
    let all_set = |x: usize, d: usize| {
        (0..d)
            .map(|t| (x as f64 - t as f64).max(0.0) / (m as f64 - t as f64))
            .product::<f64>()
    };
    set.iter()
        .enumerate()
        .map(|(x, px)| {
            px * query
                .iter()
                .enumerate()
                .map(|(d, pd)| pd * all_set(x, d))
                .sum::<f64>()
        })
        .sum()
}

/// Seeds for independent trials. Small consecutive seeds are NOT independent for XXH3 on short
/// inputs: seed s and s ^ 1 act like XOR-ing the input, so on sequential keys they produce the
/// same set of hashes (measured: seeds 0 and 1 gave identical filters' false-positive counts).
pub fn trial_seed(trial: u64) -> u64 {
    (trial + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Exact blocked FPR for k ≤ 8 (one probe per word): block loads are Binomial(n, 1/B) and each
/// word of a block with j keys has a bit set with probability 1 − (63/64)^j, independently.
pub fn exact_blocked_fpr(bits: u64, k: u32, n: u64) -> f64 {
    assert!(k <= 8);
    let blocks = (bits / 512) as f64;
    if blocks == 1.0 {
        return (1.0 - (63.0f64 / 64.0).powi(n as i32)).powi(k as i32);
    }
    let p = 1.0 / blocks;
    let mut total = 0.0;
    let mut pmf = (1.0 - p).powf(n as f64); // P(j = 0)
    for j in 0..=n {
        total += pmf * (1.0 - (63.0f64 / 64.0).powi(j as i32)).powi(k as i32);
        pmf *= (n - j) as f64 / (j + 1) as f64 * p / (1.0 - p);
        if pmf < 1e-300 && j as f64 > n as f64 * p {
            break;
        }
    }
    total
}

/// The tests every plain bit filter (`BloomFilter`, `BlockedBloomFilter`) must pass, generated
/// for `$filter` with parameters of `$layout`; `$other` is the other layout's filter type, whose
/// decoder must refuse this one's files. Needs `bloomgate::{Error, FilterCodec, Layout, Params}`
/// and `proptest::prelude::*` in scope.
#[macro_export]
macro_rules! plain_bit_filter_tests {
    ($filter:ty, $layout:expr, $other:ty) => {
        #[test]
        fn insert_reports_possible_presence_and_len_counts_new_bits() {
            let mut f = <$filter>::new(1000, 0.001).unwrap();
            assert!(f.is_empty());
            assert!(!f.insert(b"a"));
            assert!(f.insert(b"a"));
            assert_eq!(f.len(), 1);
            f.insert_batch(&[b"b", b"c", b"a"]);
            assert_eq!(f.len(), 3);
            let mut out = Vec::new();
            f.contains_batch(&[&b"a"[..], b"zzz", b"c"], &mut out);
            assert!(out[0] && out[2]);
            let h = f.hash(b"c");
            assert!(f.contains_hash(h));
            out.clear();
            f.contains_batch_hashes(&[h], &mut out);
            assert_eq!(out, [true]);
            assert!(f.count_ones() <= 3 * u64::from(f.params().hashes));
            assert!(f.memory_bytes() >= f.params().bytes() as usize);
            assert!(f.fill_ratio() > 0.0);
            f.clear();
            assert!(f.is_empty() && f.count_ones() == 0 && !f.contains(b"a"));
        }

        #[test]
        fn union_and_intersect_check_compatibility() {
            let params = Params::for_items($layout, 1000, 0.01).unwrap();
            let mut a = <$filter>::with_params(params, 1).unwrap();
            let mut b = <$filter>::with_params(params, 1).unwrap();
            a.insert(b"left");
            a.insert(b"both");
            b.insert(b"right");
            b.insert(b"both");
            let mut u = a.clone();
            u.union(&b).unwrap();
            assert!(u.contains(b"left") && u.contains(b"right") && u.contains(b"both"));
            assert_eq!(u.len(), 3);
            a.intersect(&b).unwrap();
            assert!(a.contains(b"both"));
            assert!(a.len() <= 2);

            let other_seed = <$filter>::with_params(params, 2).unwrap();
            assert!(matches!(u.union(&other_seed), Err(Error::Incompatible(_))));
            let other_size = <$filter>::new(50_000, 0.01).unwrap();
            assert!(matches!(
                u.intersect(&other_size),
                Err(Error::Incompatible(_))
            ));
            let other_k = Params {
                hashes: params.hashes - 1,
                ..params
            };
            let other_k = <$filter>::with_params(other_k, 1).unwrap();
            assert!(matches!(u.union(&other_k), Err(Error::Incompatible(_))));
        }

        /// Files round-trip; the other layout's decoder and constructor refuse them.
        #[test]
        fn codec_round_trip_and_layout_checks() {
            let mut f = <$filter>::new(100, 0.01).unwrap();
            f.insert(b"x");
            let bytes = f.to_bytes();
            assert_eq!(<$filter>::from_bytes(&bytes).unwrap(), f);
            assert!(<$other>::from_bytes(&bytes).is_err());
            assert!(<$other>::with_params(*f.params(), 0).is_err());
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            /// Every inserted key is found: single, batched, after a file round trip and after
            /// union.
            #[test]
            fn no_false_negatives(
                keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..300),
                others in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..100),
                fpr in 0.0001f64..0.5,
                seed in any::<u64>(),
            ) {
                let params = Params::for_items($layout, keys.len() as u64, fpr).unwrap();
                let mut f = <$filter>::with_params(params, seed).unwrap();
                f.insert_batch(&keys);
                for k in &keys {
                    prop_assert!(f.contains(k));
                }
                let g = <$filter>::from_bytes(&f.to_bytes()).unwrap();
                prop_assert_eq!(&g, &f);
                let mut h = <$filter>::with_params(params, seed).unwrap();
                for k in &others {
                    h.insert(k);
                }
                h.union(&g).unwrap();
                let mut out = Vec::new();
                h.contains_batch(&keys, &mut out);
                h.contains_batch(&others, &mut out);
                prop_assert!(out.iter().all(|&b| b));
            }
        }
    };
}
