//! One item identity everywhere: how a scope or item given as bytes becomes the 64-bit integer
//! the gate, its filters and its stores key on.
//!
//! A canonical decimal integer that fits in 64 bits (`0`, `42`, `18446744073709551615`: ASCII
//! digits, no sign, no leading zero) is used as is, so services that already number their users
//! and items see those numbers in the store. Any other bytes (`user:42`, a URL, `007`, `-1`) are
//! hashed with XXH3-64 and the fixed seed [`ID_SEED`]. Serve's `GATE.*`, the Python `Gate`, the
//! CLI and the Rust API all call [`item_id`], so the same bytes are the same row whichever door
//! they came through. PostgreSQL stores the id in a `BIGINT` as the same 64 bits
//! (`u64 as i64`).
//!
//! Collisions: two different non-integer strings share an id with probability 2⁻⁶⁴; among n
//! distinct strings of one scope the chance of any collision is about n²/2⁶⁵ (10⁹ items:
//! 3·10⁻²). A collision makes the gate report one item as seen when its twin was, never the
//! reverse, so it can only over-filter.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The XXH3-64 seed for non-integer ids. Fixed forever: changing it would re-key every store.
pub const ID_SEED: u64 = 0x6267_6174_655f_6964; // "bgate_id"

/// The 64-bit id of a scope or item given as bytes (see the module docs for the rule).
pub fn item_id(bytes: &[u8]) -> u64 {
    decimal_u64(bytes).unwrap_or_else(|| xxh3_64_with_seed(bytes, ID_SEED))
}

/// `bytes` as a canonical decimal `u64`, if it is one.
fn decimal_u64(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || bytes.len() > 20 || (bytes.len() > 1 && bytes[0] == b'0') {
        return None;
    }
    bytes.iter().try_fold(0u64, |acc, &b| {
        if b.is_ascii_digit() {
            acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_integers_are_themselves() {
        assert_eq!(item_id(b"0"), 0);
        assert_eq!(item_id(b"42"), 42);
        assert_eq!(item_id(b"18446744073709551615"), u64::MAX);
    }

    #[test]
    fn everything_else_is_hashed_with_the_fixed_seed() {
        for s in [
            &b"18446744073709551616"[..],
            b"007",
            b"-1",
            b"+1",
            b"",
            b"user:42",
            b"4 2",
        ] {
            assert_eq!(item_id(s), xxh3_64_with_seed(s, ID_SEED), "{s:?}");
        }
        // Pinned: the ids a store already holds must never change.
        assert_eq!(item_id(b"user:42"), 12_794_323_151_418_912_396);
        assert_ne!(item_id(b"user:42"), item_id(b"user:43"));
    }
}
