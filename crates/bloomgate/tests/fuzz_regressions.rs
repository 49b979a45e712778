//! Replays what the `core_reader` fuzz target in `fuzz/` found, through the very check it runs
//! (`bloomgate_testkit::fuzz::core_check`), so a fixed bug stays fixed on stable Rust
//! without cargo-fuzz. Inputs are the minimised crashers in
//! `tests/fuzz_regressions/core_reader-<name>.bin`, plus real and forged images of every kind.

use bloomgate_testkit::fuzz::core_check;

use bloomgate::any::AnyFilter;
use bloomgate::codec::{FilterCodec, MAX_BODY_BYTES};
use bloomgate::{
    BlockedBloomFilter, BloomFilter, CountingBloomFilter, CuckooFilter, ScalableBloomFilter,
    WindowConfig, WindowedBloomFilter,
};
use core_check::{check, repair_envelope, Verdict};

fn input(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fuzz_regressions/{name}.bin",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn rejected_with(verdict: &Verdict, text: &str) -> bool {
    matches!(verdict, Verdict::Rejected(msg) if msg.contains(text))
}

/// A valid cuckoo image followed by 19 more bytes: `read_from` stopped after the checksum and
/// accepted it, `from_bytes` refused it. Both now refuse (docs/format.md: the image ends
/// exactly after the checksum).
#[test]
fn trailing_bytes_are_refused_by_both_readers() {
    let data = input("core_reader-trailing-bytes");
    let (raw, _) = check(&data);
    assert!(
        rejected_with(&raw, "trailing bytes after the checksum"),
        "{raw:?}"
    );
    let streamed = AnyFilter::read_from(&data[..]).unwrap_err();
    assert!(
        streamed.to_string().contains("trailing bytes"),
        "{streamed}"
    );
}

/// The image a crasher holds, accepted by the check as `kind` either as given or with its
/// envelope repaired (minimised crashers usually need the repair).
fn accepted_image(name: &str, kind: &'static str) -> Vec<u8> {
    let data = input(name);
    let (raw, repaired) = check(&data);
    let accepted = Verdict::Accepted(kind);
    if raw == accepted {
        return data;
    }
    assert_eq!(repaired, Some(accepted), "{name}");
    repair_envelope(&data).unwrap()
}

/// A classic image whose stored `len` is u64::MAX: the first insert of a new key overflowed
/// the count. Counts of loaded filters now saturate.
#[test]
fn stored_len_at_u64_max_saturates() {
    let image = accepted_image("core_reader-len-overflow", "classic");
    let AnyFilter::Classic(mut filter) = AnyFilter::from_bytes(&image).unwrap() else {
        panic!("not a classic filter");
    };
    assert_eq!(filter.len(), u64::MAX);
    for i in 0..100 {
        filter.insert(format!("new-{i}"));
    }
    assert_eq!(filter.len(), u64::MAX);
}

/// A windowed image whose generations' stored counts add up past u64::MAX: `len()` overflowed
/// summing them. The sum now saturates.
#[test]
fn windowed_len_sum_saturates() {
    let image = accepted_image("core_reader-windowed-len-overflow", "windowed");
    let filter = AnyFilter::from_bytes(&image).unwrap();
    assert_eq!(filter.len(), u64::MAX);
}

fn small_filters() -> Vec<AnyFilter> {
    let mut classic = BloomFilter::new(50, 0.01).unwrap();
    let mut blocked = BlockedBloomFilter::new(50, 0.01).unwrap();
    let mut counting = CountingBloomFilter::new(50, 0.01).unwrap();
    let mut cuckoo = CuckooFilter::new(50, 0.01).unwrap();
    let mut scalable = ScalableBloomFilter::new(4, 0.01).unwrap();
    let config = WindowConfig {
        generations: 2,
        items_per_generation: 8,
        fpr: 0.01,
        generation_window_ms: Some(10),
    };
    let mut windowed = WindowedBloomFilter::new(config, 0).unwrap();
    for i in 0..20u64 {
        let key = format!("k{i}");
        classic.insert(&key);
        blocked.insert(&key);
        counting.insert(&key);
        cuckoo.insert(&key).unwrap();
        scalable.insert(&key).unwrap();
        windowed.insert(&key, i);
    }
    vec![
        classic.into(),
        blocked.into(),
        counting.into(),
        cuckoo.into(),
        scalable.into(),
        windowed.into(),
    ]
}

/// Real images of every kind pass the whole check (both readers, byte-exact re-encoding,
/// queries, inserts, removes), as given and with the envelope recomputed.
#[test]
fn real_images_of_every_kind_pass() {
    for filter in small_filters() {
        let image = filter.to_bytes();
        let name = filter.kind().name();
        assert_eq!(
            check(&image),
            (Verdict::Accepted(name), Some(Verdict::Accepted(name)))
        );
    }
}

/// Forged envelopes the fuzzer starts from: a 1 TiB body length with a valid header check, a
/// body one byte short, and a body with a flipped bit under a recomputed checksum. All are
/// refused by both readers without allocating what the header claims.
#[test]
fn forged_envelopes_are_refused() {
    let image = CuckooFilter::new(10, 0.1).unwrap().to_bytes();
    let mut huge = image.clone();
    huge[20..28].copy_from_slice(&MAX_BODY_BYTES.to_le_bytes());
    let header_check = xxhash_rust::xxh3::xxh3_64(&huge[..28]) as u32;
    huge[28..32].copy_from_slice(&header_check.to_le_bytes());
    let (verdict, _) = check(&huge);
    assert!(rejected_with(&verdict, "truncated"), "{verdict:?}");

    let (verdict, _) = check(&image[..image.len() - 1]);
    assert!(rejected_with(&verdict, "truncated"), "{verdict:?}");

    // A non-zero padding bit in the slot array, checksums recomputed: the body decoder refuses.
    let mut padded = image;
    let last_body_byte = padded.len() - 9;
    padded[last_body_byte] ^= 0x80;
    let (_, repaired) = check(&padded);
    assert!(
        matches!(&repaired, Some(Verdict::Rejected(m)) if m.contains("cuckoo")),
        "{repaired:?}"
    );
}
