//! Shared helpers of the counting/cuckoo/scalable/windowed tests: disjoint key sets and the
//! binomial tolerance their statistical tests state.
#![allow(dead_code)] // each test file uses a subset

/// Keys inserted by the tests.
pub fn key(i: u64) -> [u8; 8] {
    i.to_le_bytes()
}

/// Keys disjoint from every `key(i)` with i < 2^63.
pub fn unseen(i: u64) -> [u8; 8] {
    (i | 1 << 63).to_le_bytes()
}

/// Four standard deviations of a rate `p` measured over `trials` samples.
pub fn four_sigma(p: f64, trials: u64) -> f64 {
    4.0 * (p * (1.0 - p) / trials as f64).sqrt()
}

/// Fraction of `trials` unseen keys that `contains` reports present.
pub fn measured_fpr(contains: impl Fn(&[u8]) -> bool, trials: u64) -> f64 {
    (0..trials).filter(|&i| contains(&unseen(i))).count() as f64 / trials as f64
}
