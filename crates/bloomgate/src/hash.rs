//! Key hashing and probe positions: the one place that decides which bits a key touches.
//!
//! Filters are persisted, so this scheme is a file-format promise: it is pinned by golden
//! vectors in `tests/hashing.rs` and must never change for an existing hash-algorithm id.
//!
//! # Hash
//! `KeyHash::of(key, seed)` is XXH3-128 of the key bytes with a 64-bit seed; `lo` is the low
//! 64 bits of the `u128`, `hi` the high 64 bits. 128 bits keep the hash-collision floor
//! (≈ n / 2^hashbits false positives for a 64-bit hash, whatever the filter's size) out of
//! reach at billions of keys.
//!
//! # Classic layout (k probes over m bits)
//! `h1 = lo`, `h2 = hi | 1` (an odd step: on a power-of-two m an even one would revisit its
//! own probes early). Probe `i` is computed on its own (no chain
//! through earlier probes): `x = h1 + i·h2` (wrapping), then a nonlinear remix
//! `x ^= x >> 32; x *= 0xff51afd7ed558ccd`, then `fast_range(x, m)`.
//! Why the remix: with plain double hashing and multiply-shift reduction, `fast_range` keeps the
//! top bits, so every key with `h2 < 2^64 / m` maps all k probes onto one or two bits — an FPR
//! floor of about `1/(2m)` regardless of k. The xor-shift folds the low (fast-moving) half into
//! the high half before the multiply, so small steps still scatter. Tested with power-of-two m
//! and k = 1..=8 in `tests/classic.rs`.
//!
//! # Blocked layout (one 512-bit block = one 64-byte cache line = 8 × u64 words)
//! Block index = `fast_range(lo, blocks)` (uses the high bits of `lo`). In-block positions come
//! from `hi` only, so block choice and bit choice use disjoint hash bits (with shared bits, keys
//! of one block would crowd the same positions in it).
//! Probe `j` (0 ≤ j < k) lands in word `j % 8` at bit `(h_j · C_j mod 2^32) >> 26`, where
//! `h_j` is the low 32 bits of `hi` for `j % 8 < 4` and the high 32 bits otherwise, and `C_j` is
//! the j-th odd constant of [`BLOCK_SALTS`]. For k ≤ 8 each word gets at most one bit; k in
//! 9..=16 adds a second round with the next eight constants, and so on up to
//! [`crate::params::MAX_HASHES`]. The eight multiplies of a round are independent, which is what
//! lets the AVX2 kernel in `filters/blocked.rs` compute all of them with one `vpmulld`.
//! Measured at exactly 10 bits/key, k = 8: 1.055% false positives on 10M absent keys (model
//! 1.049%), vs 1.26% for the 256-bit split-block layout; sized for 1% (10.1
//! bits/key): 0.997% on 5M absent keys with 10M items (`tests/blocked.rs`).

//!
//! # FastLocal layout (one 512-bit block, probes anywhere in it)
//! The design of RocksDB's FastLocalBloom (util/bloom_impl.h), implemented from its published
//! math. Block index = `fast_range(lo, blocks)`, as for the blocked layout. Probe `j`
//! (0 ≤ j < k) comes from the low 32 bits of `lo`: `h_j = (lo as u32) · G^j mod 2^32`,
//! G = [`GOLDEN32`] (the 32-bit golden ratio, odd); its top 9 bits `p = h_j >> 23` are the bit
//! position in the block: word `p >> 6`, bit `p & 63` (the same bit as 32-bit word `p >> 5`, bit
//! `p & 31`, which the AVX2 kernel uses). Only `lo` is read, so a query needs just the low half
//! of the XXH3-128 hash and the compiler drops the rest. The block choice reads the high bits of
//! `lo`, the probes bits 0..32, so the two are disjoint up to 2^32 blocks (256 GiB); the 32-bit
//! probe hash sets an FPR floor of ≈ keys-per-block · 2^−32 (≤ 1.2e-8 at 10 bits/key), which
//! the model in `crate::params` includes. Measured at 10 bits/key, k = 7: 0.96% (blocked
//! layout: 1.06%).

/// XXH3-128 of the key bytes with a 64-bit seed, split into two 64-bit words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyHash {
    /// Low 64 bits of the XXH3-128 hash.
    pub lo: u64,
    /// High 64 bits of the XXH3-128 hash.
    pub hi: u64,
}

/// Seed used by `new` constructors. Persisted in the file header like any other seed.
pub const DEFAULT_SEED: u64 = 0;

/// Bits per block of the blocked layout (one 64-byte cache line).
pub const BLOCK_BITS: u64 = 512;

/// Words (u64) per block of the blocked layout.
pub const BLOCK_WORDS: usize = 8;

/// Odd 32-bit multipliers for the blocked layout's in-block positions: entry `j` serves probe `j`.
/// Generated once by SplitMix64 from the state `0x626C6F6F6D676174` ("bloomgat"), high 32 bits
/// of each output with the low bit forced to 1. Frozen: part of the file format.
pub const BLOCK_SALTS: [u32; 64] = [
    0xb843f28d, 0xbf520851, 0x44191ad1, 0x5380e15d, 0x7c1006a5, 0x966e0f47, 0x393056db, 0xad9afafd,
    0x528f565b, 0x76602cb1, 0xcc326fc5, 0x6adedf6b, 0xba5e6661, 0x27c87ce1, 0x81815f9f, 0xa52a2b77,
    0x5027fbb5, 0x8d346fd9, 0x2a2dfd51, 0x937002dd, 0x0f219a2b, 0xff9a85f1, 0xd315e35b, 0xce70367b,
    0x15dbfc3f, 0x96e30c7b, 0x06b00d19, 0x8f53b1fd, 0x5c6ae2d5, 0x2c59462b, 0x1d20cca5, 0xba0165ad,
    0x06febe65, 0x837eab91, 0xb0f2d785, 0x6b0c712d, 0x2ead459d, 0xdb374fc3, 0xc76c3c93, 0x5b52989f,
    0x2f7ceee1, 0xabc3f269, 0x38409b1f, 0x399902bf, 0xb31afce5, 0xfeb1bb4d, 0xf3621b59, 0x13fe50fd,
    0x3aced8fd, 0x7efd9343, 0x770344cf, 0xf3e01dd3, 0x929df9f5, 0xa26a4a63, 0xb4149587, 0xbeacd717,
    0xc980f537, 0x5cd9440d, 0xe0b9e8a3, 0xecdfa633, 0x6e65fd8f, 0x2fce35b3, 0x05391d17, 0xad968295,
];

/// The FastLocal layout's probe multiplier: ⌊2^32 / φ⌋ rounded to odd. Frozen: part of the file
/// format.
pub const GOLDEN32: u32 = 0x9e37_79b9;

/// `GOLDEN32^j mod 2^32` for j in 0..64: entry j turns the FastLocal probe hash into probe j.
pub const GOLDEN32_POWERS: [u32; 64] = {
    let mut powers = [1u32; 64];
    let mut j = 1;
    while j < 64 {
        powers[j] = powers[j - 1].wrapping_mul(GOLDEN32);
        j += 1;
    }
    powers
};

/// Odd multiplier of the classic layout's remix (MurmurHash3's fmix64 constant).
const CLASSIC_REMIX: u64 = 0xff51_afd7_ed55_8ccd;

impl KeyHash {
    /// XXH3-128 of `key` with `seed`.
    #[inline]
    pub fn of(key: &[u8], seed: u64) -> KeyHash {
        let h = xxhash_rust::xxh3::xxh3_128_with_seed(key, seed);
        KeyHash {
            lo: h as u64,
            hi: (h >> 64) as u64,
        }
    }

    /// Bit position of classic probe `i` in an array of `bits` bits.
    #[inline(always)]
    pub fn classic_probe(self, i: u32, bits: u64) -> u64 {
        let mut x = self.lo.wrapping_add(u64::from(i).wrapping_mul(self.hi | 1));
        x ^= x >> 32;
        x = x.wrapping_mul(CLASSIC_REMIX);
        fast_range(x, bits)
    }

    /// The `hashes` classic probe positions in an array of `bits` bits.
    #[inline]
    pub fn classic_probes(self, bits: u64, hashes: u32) -> impl Iterator<Item = u64> {
        (0..hashes).map(move |i| self.classic_probe(i, bits))
    }

    /// Index of this key's block among `blocks` blocks (blocked layout).
    #[inline(always)]
    pub fn block_index(self, blocks: u64) -> u64 {
        fast_range(self.lo, blocks)
    }

    /// The key's bits inside its block (blocked layout, portable reference): word `w` of the
    /// result has the bits this key sets in word `w` of the block.
    #[inline(always)]
    pub fn block_mask(self, hashes: u32) -> [u64; BLOCK_WORDS] {
        let halves = [self.hi as u32, (self.hi >> 32) as u32];
        let mut mask = [0u64; BLOCK_WORDS];
        let hashes = hashes as usize;
        let mut round = 0;
        while round * BLOCK_WORDS < hashes {
            for (w, word) in mask.iter_mut().enumerate() {
                let j = round * BLOCK_WORDS + w;
                if j < hashes {
                    let bit = halves[w / 4].wrapping_mul(BLOCK_SALTS[j]) >> 26;
                    *word |= 1u64 << bit;
                }
            }
            round += 1;
        }
        mask
    }
}

impl KeyHash {
    /// The key's bits inside its block (FastLocal layout, portable reference): word `w` of the
    /// result has the bits this key sets in word `w` of the block.
    #[inline(always)]
    pub fn local_mask(self, hashes: u32) -> [u64; BLOCK_WORDS] {
        let mut mask = [0u64; BLOCK_WORDS];
        let mut h = self.lo as u32;
        for _ in 0..hashes {
            let position = h >> 23;
            mask[(position >> 6) as usize] |= 1u64 << (position & 63);
            h = h.wrapping_mul(GOLDEN32);
        }
        mask
    }
}

/// Lemire's fast range: maps a uniform `x` to `[0, n)` by `(x · n) >> 64`, without `%`'s division
/// or its modulo bias. Uses the HIGH bits of `x`.
#[inline(always)]
pub fn fast_range(x: u64, n: u64) -> u64 {
    ((u128::from(x) * u128::from(n)) >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_range_stays_in_range() {
        for n in [1u64, 2, 3, 1000, u64::MAX] {
            for x in [0u64, 1, u64::MAX / 2, u64::MAX] {
                assert!(fast_range(x, n) < n);
            }
        }
        assert_eq!(fast_range(u64::MAX, 10), 9);
        assert_eq!(fast_range(0, 10), 0);
    }

    #[test]
    fn block_mask_sets_one_bit_per_word_up_to_eight_hashes() {
        let h = KeyHash::of(b"key", 7);
        for k in 1..=8u32 {
            let mask = h.block_mask(k);
            for (w, word) in mask.iter().enumerate() {
                assert_eq!(word.count_ones(), u32::from((w as u32) < k));
            }
        }
    }
}
