//! MurmurHash64A (Austin Appleby's 64-bit MurmurHash2 variant), the hash RedisBloom's Bloom and
//! cuckoo layouts are built on. Implemented from the public algorithm description; bit-exactness
//! is pinned by published test vectors below.

const M: u64 = 0xc6a4a7935bd1e995;
const R: u32 = 47;

/// MurmurHash64A of `key` with `seed`: 8-byte little-endian blocks, then the 1..7 tail bytes
/// xored in from the highest to the lowest, then the final avalanche.
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut blocks = key.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes(block.try_into().expect("8-byte block"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        // Byte i of the tail goes to bits 8i..8i+8: the tail read as a little-endian word.
        let word = if key.len() >= 8 {
            // The last 8 bytes of the key, shifted down past the block bytes they repeat.
            let last = u64::from_le_bytes(key[key.len() - 8..].try_into().expect("8 bytes"));
            last >> (8 * (8 - tail.len()))
        } else {
            tail.iter()
                .rev()
                .fold(0u64, |word, &byte| (word << 8) | u64::from(byte))
        };
        h ^= word;
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// MurmurHash2, 32-bit (Austin Appleby's original, public domain), the hash RedisBloom's
/// Count-Min Sketch and Top-K index with (row `i` uses seed `i`; Top-K's fingerprint uses
/// seed 1919): 4-byte little-endian blocks, the 1..3 tail bytes, then the final mix.
pub fn murmur2(key: &[u8], seed: u32) -> u32 {
    const M2: u32 = 0x5bd1e995;
    // The length enters as a C `int`: only its low 32 bits matter.
    let mut h = seed ^ key.len() as u32;
    let mut blocks = key.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes(block.try_into().expect("4-byte block"));
        k = k.wrapping_mul(M2);
        k ^= k >> 24;
        k = k.wrapping_mul(M2);
        h = h.wrapping_mul(M2) ^ k;
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate().rev() {
            h ^= u32::from(byte) << (8 * i);
        }
        h = h.wrapping_mul(M2);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M2);
    h ^ (h >> 15)
}

#[cfg(test)]
mod tests {
    use super::{murmur2, murmur64a};

    /// Vectors published in Apache Kudu's `TestMurmurHash` (MurmurHash2 64-bit = MurmurHash64A),
    /// covering a short tail, a 7-byte tail and one full block plus a tail with a seed.
    #[test]
    fn matches_published_vectors() {
        assert_eq!(murmur64a(b"ab", 0), 7115271465109541368);
        assert_eq!(murmur64a(b"abcdefg", 0), 2601573339036254301);
        assert_eq!(murmur64a(b"quick brown fox", 42), 3575930248840144026);
    }

    #[test]
    fn tails_of_every_length_match_the_byte_by_byte_definition() {
        let data: Vec<u8> = (1..=40u8).map(|b| b.wrapping_mul(37)).collect();
        for len in 0..data.len() {
            let key = &data[..len];
            // The reference: blocks, then the tail bytes xored in one by one.
            let mut h = 7u64 ^ (len as u64).wrapping_mul(super::M);
            for block in key.chunks_exact(8) {
                let mut k = u64::from_le_bytes(block.try_into().unwrap()).wrapping_mul(super::M);
                k ^= k >> super::R;
                h = (h ^ k.wrapping_mul(super::M)).wrapping_mul(super::M);
            }
            let tail = &key[len / 8 * 8..];
            if !tail.is_empty() {
                for (i, &b) in tail.iter().enumerate() {
                    h ^= u64::from(b) << (8 * i);
                }
                h = h.wrapping_mul(super::M);
            }
            h ^= h >> super::R;
            h = h.wrapping_mul(super::M);
            h ^= h >> super::R;
            assert_eq!(murmur64a(key, 7), h, "length {len}");
        }
    }

    #[test]
    fn empty_input_with_zero_seed_is_zero() {
        // h = 0 ^ (0 * m) = 0 and the avalanche keeps 0 at 0.
        assert_eq!(murmur64a(b"", 0), 0);
    }

    /// Vectors of the 32-bit MurmurHash2 computed with Austin Appleby's public-domain reference
    /// code (empty input, tails of one and three bytes, blocks plus a tail with a seed).
    #[test]
    fn matches_known_vectors() {
        assert_eq!(murmur2(b"", 0), 0);
        assert_eq!(murmur2(b"", 1), 0x5bd15e36);
        assert_eq!(murmur2(b"a", 0), 0x92685f5e);
        assert_eq!(murmur2(b"abc", 0), 0x13577c9b);
        assert_eq!(murmur2(b"Hello, world!", 0x9747b28c), 0xbeba9b12);
    }
}
