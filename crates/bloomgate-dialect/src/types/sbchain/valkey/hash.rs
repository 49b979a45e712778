//! How valkey-bloom's filters (the `bloomfilter` crate) place an item's bits: the seed's two
//! SipHash-1-3 keys, the probe sequence, and the link sizing rules.

use siphasher::sip::SipHasher13;
use std::hash::{BuildHasher, Hash, Hasher};

/// valkey-bloom's fixed seed: every 0.1.0 filter's, and 1.0's with
/// `bf.bloom-use-random-seed no`.
pub const FIXED_SEED: [u8; 32] = [
    89, 15, 245, 34, 234, 120, 17, 218, 167, 20, 216, 9, 59, 62, 123, 217, 29, 137, 138, 115, 62,
    152, 136, 135, 48, 127, 151, 205, 40, 7, 51, 131,
];

/// The largest prime below 2^64, which the probe sequence reduces by.
const LARGEST_U64_PRIME: u64 = 0xFFFF_FFFF_FFFF_FFC5;

/// How a new link's probe count is derived from `m / n · ln 2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KRule {
    /// Rounded up (`bloomfilter` 1.0.x, valkey-bloom 0.1.0).
    Ceil,
    /// Rounded to nearest (`bloomfilter` 3.x, valkey-bloom 1.0).
    Round,
}

/// `(h0, h1)`: SipHash-1-3 of `item` (as a byte slice: its length as a little-endian `u64`,
/// then its bytes) under the seed's first and second 16 bytes.
pub fn sip_hash_pair(seed: &[u8; 32], item: &[u8]) -> (u64, u64) {
    let one = |key: &[u8]| {
        let mut sip = SipHasher13::new_with_key(key.try_into().expect("16 bytes"));
        item.hash(&mut sip);
        sip.finish()
    };
    (one(&seed[..16]), one(&seed[16..]))
}

/// Bit index of probe `i` of an item hashed as `h`, in a link of `bits` bits (> 0).
#[inline]
pub fn probe_index(h: (u64, u64), i: u32, bits: u64) -> u64 {
    let hash = match i {
        0 => h.0,
        1 => h.1,
        _ => h.0.wrapping_add(u64::from(i).wrapping_mul(h.1)) % LARGEST_U64_PRIME,
    };
    hash % bits
}

/// Bitmap bytes for `items` at error rate `fp`: `ceil(items · ln fp / (−8 · ln²2))`; `None`
/// when the arguments are out of range (no items, `fp` outside (0, 1), no byte, or over
/// [`super::MAX_LINK_BYTES`]).
pub fn bitmap_bytes(items: u64, fp: f64) -> Option<u64> {
    if items == 0 || !(fp > 0.0 && fp < 1.0) {
        return None;
    }
    let ln2 = std::f64::consts::LN_2;
    let bytes = ((items as f64) * fp.ln() / (-8.0 * ln2 * ln2)).ceil();
    (bytes >= 1.0 && bytes <= super::MAX_LINK_BYTES as f64).then_some(bytes as u64)
}

/// Probes for `bits` bits holding `items` items: `m / n · ln 2` by `rule`, at least 1.
pub fn hashes_for(bits: u64, items: u64, rule: KRule) -> u32 {
    let k = bits as f64 / items as f64 * std::f64::consts::LN_2;
    let k = match rule {
        KRule::Ceil => k.ceil(),
        KRule::Round => k.round(),
    };
    (k as u32).max(1)
}

/// 32 random bytes from the process' hash seeds (the operating system's randomness) and the
/// clock.
pub(super) fn random_seed() -> [u8; 32] {
    let state = std::collections::hash_map::RandomState::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut seed = [0u8; 32];
    for (i, chunk) in seed.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&state.hash_one((i, now)).to_le_bytes());
    }
    seed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixed seed's SipHash keys, as the notes list them.
    #[test]
    fn fixed_seed_gives_the_documented_keys() {
        let key = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap());
        assert_eq!(key(&FIXED_SEED[0..8]), 15713473521876537177);
        assert_eq!(key(&FIXED_SEED[8..16]), 15671187751654921383);
        assert_eq!(key(&FIXED_SEED[16..24]), 9766223185946773789);
        assert_eq!(key(&FIXED_SEED[24..32]), 9453907914610147120);
    }

    #[test]
    fn sizing_refuses_what_no_link_can_be() {
        assert_eq!(bitmap_bytes(0, 0.01), None);
        assert_eq!(bitmap_bytes(10, 1.0), None);
        assert_eq!(bitmap_bytes(10, f64::NAN), None);
        assert_eq!(bitmap_bytes(u64::MAX, 1e-300), None);
        assert_eq!(bitmap_bytes(1, 0.5), Some(1));
        assert_eq!(hashes_for(8, 1000, KRule::Ceil), 1);
        assert_ne!(random_seed(), random_seed());
    }
}
