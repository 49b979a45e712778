//! False-positive-rate models per filter layout, used to draw the model curves and to judge each
//! measured point. Formulas:
//! - classic: p = (1 − e^(−kn/m))^k;
//! - blocked (block of B bits, one block per key): p = Σ_j Pois(j; n·B/m) · (1 − (1 − 1/B)^(k·j))^k —
//!   blocks load unevenly, so the classic formula is optimistic for them;
//! - split block (Parquet SBBF: 256-bit block = 8 words of 32 bits, one bit per word, k = 8):
//!   p = Σ_j Pois(j; n·256/m) · (1 − (1 − 1/32)^j)^8.

/// Classic Bloom filter: m bits, k probes, n keys.
pub fn classic(bits: f64, hashes: u32, items: f64) -> f64 {
    (1.0 - (-(hashes as f64) * items / bits).exp()).powi(hashes as i32)
}

/// The integer k nearest to (m/n)·ln 2, at least 1.
pub fn classic_best_k(bits_per_item: f64) -> u32 {
    ((bits_per_item * std::f64::consts::LN_2).round() as u32).max(1)
}

/// Σ_j Pois(j; lambda) · fpr_given(j), summed over the mass that matters.
fn poisson_mixture(lambda: f64, fpr_given: impl Fn(f64) -> f64) -> f64 {
    let hi = (lambda + 12.0 * lambda.sqrt() + 30.0).ceil() as u64;
    let mut log_pmf = -lambda; // ln Pois(0)
    let mut total = 0.0;
    for j in 0..=hi {
        if j > 0 {
            log_pmf += lambda.ln() - (j as f64).ln();
        }
        total += log_pmf.exp() * fpr_given(j as f64);
    }
    total
}

/// Blocked Bloom filter with `block_bits`-bit blocks, k probes inside one block per key.
pub fn blocked(block_bits: f64, bits: f64, hashes: u32, items: f64) -> f64 {
    let lambda = items * block_bits / bits;
    poisson_mixture(lambda, |j| {
        (1.0 - (1.0 - 1.0 / block_bits).powf(hashes as f64 * j)).powi(hashes as i32)
    })
}

/// The k in 1..=16 minimising the 512-bit blocked model at this many bits per item.
pub fn blocked512_best_k(bits_per_item: f64) -> u32 {
    (1..=16)
        .min_by(|&a, &b| {
            blocked(512.0, bits_per_item, a, 1.0).total_cmp(&blocked(512.0, bits_per_item, b, 1.0))
        })
        .unwrap_or(1)
}

/// Parquet split-block Bloom filter (sbbf-rs): 256-bit blocks of eight 32-bit words, k = 8.
pub fn split_block(bits: f64, items: f64) -> f64 {
    let lambda = items * 256.0 / bits;
    poisson_mixture(lambda, |j| (1.0 - (1.0 - 1.0 / 32.0f64).powf(j)).powi(8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_match_published_figures() {
        // classic optimal at 9.59 bits/key ≈ 1%.
        let p = classic(9.59, 7, 1.0);
        assert!((p - 0.01).abs() < 0.0006, "{p}");
        // RocksDB FastLocalBloom: 10 bits/key, k = 6, 512-bit blocks → 0.957% (blocked term).
        let p = blocked(512.0, 10.0, 6, 1.0);
        assert!((p - 0.00957).abs() < 0.0003, "{p}");
        // Parquet SBBF at 10 bits/key really gives ≈1.26% (its 256-bit blocks load unevenly),
        // not the 0.85% the classic formula gives at k = 8.
        let p = split_block(10.0, 1.0);
        assert!((p - 0.0126).abs() < 0.0008, "{p}");
        // The pure model's optimum at 10 bits/key is k = 7 (RocksDB's measured table picks 6:
        // the two are within 1% of each other here).
        let best = blocked512_best_k(10.0);
        assert_eq!(best, 7);
        assert!(blocked(512.0, 10.0, 6, 1.0) / blocked(512.0, 10.0, best, 1.0) < 1.01);
    }
}
