//! Golden vectors: the hash and the probe positions of both layouts are part of the file format.
//! If any of these fail, existing filter files would silently stop matching their keys.

use bloomgate::hash::{fast_range, KeyHash, BLOCK_SALTS, DEFAULT_SEED};
use bloomgate::{BlockedBloomFilter, BloomFilter, Layout, Params};

#[test]
fn xxh3_128_vectors() {
    // ("", seed 0) is the published XXH3-128 test vector 0x99aa06d3014798d8_6001c324468d497f.
    let cases: [(&[u8], u64, u64, u64); 5] = [
        (b"", 0x0, 0x6001c324468d497f, 0x99aa06d3014798d8),
        (b"a", 0x0, 0xe6c632b61e964e1f, 0xa96faf705af16834),
        (b"hello world", 0x0, 0xa99b8775cc15b6c7, 0xdf8d09e93f874900),
        (b"hello world", 0x2a, 0x82c1ce3b43a636ba, 0x5a5ecb4a698378a2),
        (
            b"0123456789abcdef",
            0xdeadbeef,
            0xe725e1696602c1fb,
            0xaddee0738bdcb3ef,
        ),
    ];
    for (key, seed, lo, hi) in cases {
        assert_eq!(
            KeyHash::of(key, seed),
            KeyHash { lo, hi },
            "key {key:?} seed {seed}"
        );
    }
    assert_eq!(DEFAULT_SEED, 0);
}

#[test]
fn classic_probe_vectors() {
    let h = KeyHash::of(b"hello world", 0);
    assert_eq!(
        h.classic_probes(1024, 7).collect::<Vec<_>>(),
        [57, 230, 496, 128, 131, 141, 328]
    );
    assert_eq!(
        h.classic_probes(1_000_003, 3).collect::<Vec<_>>(),
        [55991, 225055, 484764]
    );
}

#[test]
fn blocked_probe_vectors() {
    let h = KeyHash::of(b"hello world", 0);
    assert_eq!(h.block_index(1000), 662);
    assert_eq!(h.block_index(1 << 20), 694712);
    assert_eq!(
        h.block_mask(3),
        [
            0x4000000000000000,
            0x200000000000,
            0x400000000000,
            0,
            0,
            0,
            0,
            0
        ]
    );
    assert_eq!(
        h.block_mask(8),
        [
            0x4000000000000000,
            0x200000000000,
            0x400000000000,
            0x40000000,
            0x80000000000000,
            0x4,
            0x400000,
            0x20
        ]
    );
    assert_eq!(
        h.block_mask(16),
        [
            0x4008000000000000,
            0x200800000000,
            0x8400000000000,
            0x200040000000,
            0x90000000000000,
            0x4,
            0x2000400000,
            0x4000020
        ]
    );
    assert_eq!(BLOCK_SALTS[0], 0xb843f28d);
    assert_eq!(BLOCK_SALTS[63], 0xad968295);
    assert!(BLOCK_SALTS.iter().all(|c| c % 2 == 1));
}

/// The filters really use those positions: a filter with exactly the golden bits set answers yes.
#[test]
fn filters_set_exactly_the_golden_bits() {
    let mut classic =
        BloomFilter::with_params(Params::new(Layout::Classic, 1024, 7, 1).unwrap(), 0).unwrap();
    classic.insert(b"hello world");
    let expected: Vec<u64> = vec![57, 128, 131, 141, 230, 328, 496];
    let set: Vec<u64> = (0..1024).filter(|&i| classic.bits().get(i)).collect();
    assert_eq!(set, expected);

    let mut blocked =
        BlockedBloomFilter::with_params(Params::new(Layout::Blocked, 1000 * 512, 8, 1).unwrap(), 0)
            .unwrap();
    blocked.insert(b"hello world");
    assert_eq!(blocked.count_ones(), 8);
    // Every set bit is in block 662 and matches the golden mask.
    let bytes = bloomgate::FilterCodec::to_bytes(&blocked);
    let body = &bytes[32 + 28..bytes.len() - 8]; // header, 28-byte params prefix, checksum
    let block = &body[662 * 64..663 * 64];
    let words: Vec<u64> = block
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(words, KeyHash::of(b"hello world", 0).block_mask(8));
}

#[test]
fn fast_range_is_multiply_high() {
    assert_eq!(fast_range(1 << 63, 1000), 500);
    assert_eq!(fast_range(u64::MAX, u64::MAX), u64::MAX - 1);
    assert_eq!(fast_range(12345, 1), 0);
}
