//! Shared helpers of the classic/blocked/concurrent tests: disjoint key sets, exact small-filter
//! models and the stated FPR tolerance.
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
