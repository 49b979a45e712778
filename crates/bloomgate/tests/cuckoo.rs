//! Cuckoo filter: no false negatives under any sequence of inserts, legal removes and
//! round-trips; FPR against the model; the space and load targets of the design.

use bloomgate::codec::FilterCodec;
use bloomgate::{CuckooFilter, Error, KeyHash};
use proptest::prelude::*;

mod variant_keys;
use variant_keys::*;

/// The "done when", for n = 1M and n = 700k at 1%:
/// measured (seed 0): n = 1M: 1.318 bytes/item, FPR 0.739% on 1M unseen keys (model 0.739%);
/// n = 700k: 1.319 bytes/item, FPR 0.727% (model 0.739%).
#[test]
fn one_percent_filters_meet_space_and_accuracy_targets() {
    const TRIALS: u64 = 1_000_000;
    for n in [1_000_000u64, 700_000] {
        let mut filter = CuckooFilter::new(n, 0.01).unwrap();
        assert_eq!(filter.fingerprint_bits(), 10);
        for i in 0..n {
            filter.insert(key(i)).unwrap();
        }
        let bytes_per_item = filter.memory_bytes() as f64 / n as f64;
        assert!(bytes_per_item <= 1.45, "n={n}: {bytes_per_item} bytes/item");
        assert!((0..n).all(|i| filter.contains(key(i))), "false negative");

        let fpr = measured_fpr(|k| filter.contains(k), TRIALS);
        let model = filter.estimated_fpr();
        assert!(fpr <= 0.01 + four_sigma(0.01, TRIALS), "n={n}: FPR {fpr}");
        assert!(
            (fpr - model).abs() <= four_sigma(model, TRIALS) + 0.05 * model,
            "n={n}: FPR {fpr} vs model {model}"
        );

        for i in (0..n).step_by(2) {
            filter.remove(key(i)).unwrap();
        }
        assert_eq!(filter.len(), n / 2);
        assert!(
            (1..n).step_by(2).all(|i| filter.contains(key(i))),
            "remove lost a key"
        );
    }
}

/// Measured with 500 kicks: the first `Full` comes at 95.4–97.3% load (n = 1k..1M, 40 seeds).
#[test]
fn reaches_95_percent_load_and_a_failed_insert_loses_nothing() {
    for seed in 0..4u64 {
        let mut filter = CuckooFilter::with_seed(50_000, 0.001, seed).unwrap();
        let mut inserted = 0u64;
        let before_full = loop {
            let snapshot = filter.clone();
            match filter.insert(key(inserted)) {
                Ok(()) => inserted += 1,
                Err(Error::Full) => break snapshot,
                Err(e) => panic!("unexpected {e}"),
            }
        };
        assert!(
            filter.load_factor() >= 0.95,
            "seed {seed}: full at load {}",
            filter.load_factor()
        );
        assert_eq!(filter, before_full, "a failed insert changed the table");
        // More failing inserts of other keys still lose nothing.
        for i in 0..200 {
            let _ = filter.insert(unseen(i));
        }
        assert!(
            (0..inserted).all(|i| filter.contains(key(i))),
            "seed {seed}: lost a key"
        );
    }
}

#[test]
fn duplicates_are_stored_as_copies_up_to_two_full_buckets() {
    let mut filter = CuckooFilter::new(1000, 0.01).unwrap();
    for copies in 1..=8 {
        filter.insert(b"dup").unwrap();
        assert_eq!(filter.count(b"dup"), copies);
    }
    assert_eq!(filter.insert(b"dup"), Err(Error::Full));
    assert_eq!(filter.count(b"dup"), 8);
    for copies in (0..8).rev() {
        filter.remove(b"dup").unwrap();
        assert_eq!(filter.count(b"dup"), copies);
    }
    assert!(!filter.contains(b"dup"));
    assert_eq!(filter.remove(b"dup"), Err(Error::NotPresent));
    assert!(filter.is_empty());
}

#[test]
fn removing_an_absent_key_changes_nothing() {
    let mut filter = CuckooFilter::new(10_000, 0.001).unwrap();
    for i in 0..5000 {
        filter.insert(key(i)).unwrap();
    }
    let before = filter.clone();
    let absent = (0..).map(unseen).find(|k| !filter.contains(k)).unwrap();
    assert_eq!(filter.remove(absent), Err(Error::NotPresent));
    assert_eq!(filter, before);
}

#[test]
fn fingerprint_width_follows_the_target() {
    // f = ceil(log2(8 / p)), at least 4.
    for (fpr, bits) in [
        (0.5, 4),
        (0.1, 7),
        (0.01, 10),
        (0.001, 13),
        (1e-6, 23),
        (2e-9, 32),
    ] {
        assert_eq!(
            CuckooFilter::fingerprint_bits_for(fpr).unwrap(),
            bits,
            "fpr {fpr}"
        );
    }
    for bad in [0.0, 1.0, -0.1, f64::NAN, 1e-9] {
        assert!(matches!(
            CuckooFilter::new(100, bad),
            Err(Error::InvalidParameter(_))
        ));
    }
    assert!(matches!(
        CuckooFilter::new(0, 0.01),
        Err(Error::InvalidParameter(_))
    ));
    assert!(matches!(
        CuckooFilter::with_dimensions(1, 3, 0),
        Err(Error::InvalidParameter(_))
    ));
    assert!(matches!(
        CuckooFilter::with_dimensions(u64::MAX, 32, 0),
        Err(Error::TooLarge(_))
    ));
    assert!(matches!(
        CuckooFilter::new(u64::MAX, 0.01),
        Err(Error::TooLarge(_))
    ));
}

/// Narrow fingerprints make false positives frequent enough to check the model tightly:
/// model `1 − (1 − 1/(2^f − 1))^(8α)` at the load reached.
#[test]
fn fpr_matches_the_model_for_narrow_fingerprints() {
    const TRIALS: u64 = 200_000;
    for bits in [4u32, 6, 8] {
        let mut filter = CuckooFilter::with_dimensions(5000, bits, 7).unwrap();
        for i in 0..19_000 {
            filter.insert(key(i)).unwrap();
        }
        let fpr = measured_fpr(|k| filter.contains(k), TRIALS);
        let model = filter.estimated_fpr();
        assert!(
            (fpr - model).abs() <= four_sigma(model, TRIALS) + 0.03 * model,
            "f={bits}: FPR {fpr} vs model {model}"
        );
    }
}

#[test]
fn hash_once_entry_points_agree_with_keyed_ones() {
    let mut filter = CuckooFilter::with_seed(1000, 0.01, 99).unwrap();
    let h = KeyHash::of(b"k", 99);
    assert_eq!(filter.hash(b"k"), h);
    filter.insert_hash(h).unwrap();
    assert!(filter.contains(b"k"));
    assert_eq!(filter.count_hash(h), 1);
    filter.remove_hash(h).unwrap();
    assert!(!filter.contains_hash(h));
}

#[test]
fn codec_round_trips_and_rejects_inconsistent_bodies() {
    let mut filter = CuckooFilter::with_seed(3000, 0.001, 5).unwrap();
    for i in 0..2500 {
        filter.insert(key(i)).unwrap();
    }
    let bytes = filter.to_bytes();
    assert_eq!(CuckooFilter::from_bytes(&bytes).unwrap(), filter);

    // A body whose length field disagrees with its slots, or with a width out of range.
    let mut body = Vec::new();
    bloomgate::codec::FilterCodec::encode_body(&filter, &mut body);
    let mut wrong_len = body.clone();
    wrong_len[12] ^= 1; // low byte of len (after buckets u64 + bits u32)
    let mut reader = bloomgate::codec::BodyReader::new(&wrong_len);
    assert!(matches!(
        CuckooFilter::decode_body(&mut reader, 5),
        Err(Error::Corrupt(_))
    ));
    let mut wrong_bits = body;
    wrong_bits[8] = 40;
    let mut reader = bloomgate::codec::BodyReader::new(&wrong_bits);
    assert!(matches!(
        CuckooFilter::decode_body(&mut reader, 5),
        Err(Error::Corrupt(_))
    ));
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u8),
    Remove(u8),
    RoundTrip,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => any::<u8>().prop_map(Op::Insert),
        3 => any::<u8>().prop_map(Op::Remove),
        1 => Just(Op::RoundTrip),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A small table (16 buckets = 64 slots) so kicks, `Full` and undo happen often.
    #[test]
    fn no_false_negatives_under_inserts_legal_removes_and_round_trips(
        bits in 4u32..=32,
        seed in any::<u64>(),
        ops in prop::collection::vec(op(), 1..300),
    ) {
        let mut filter = CuckooFilter::with_dimensions(16, bits, seed).unwrap();
        let mut copies = [0u32; 256];
        for op in ops {
            match op {
                Op::Insert(k) => match filter.insert([k]) {
                    Ok(()) => copies[k as usize] += 1,
                    Err(e) => prop_assert_eq!(e, Error::Full),
                },
                Op::Remove(k) if copies[k as usize] > 0 => {
                    filter.remove([k]).unwrap();
                    copies[k as usize] -= 1;
                }
                Op::Remove(_) => {}
                Op::RoundTrip => filter = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap(),
            }
            prop_assert_eq!(filter.len(), copies.iter().map(|&c| u64::from(c)).sum::<u64>());
            for (k, &c) in copies.iter().enumerate() {
                prop_assert!(filter.count([k as u8]) >= c);
            }
        }
    }
}
