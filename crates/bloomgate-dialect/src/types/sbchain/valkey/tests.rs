//! The valkey link against the `bloomfilter` crate itself (1.0.x, valkey-bloom 0.1.0's; 3.x,
//! valkey-bloom 1.0's): the same sizes, probe counts and bits, serialized bytes included; and
//! the RDB encodings' round trips and refusals.

use super::format::{rdb_load, rdb_save};
use super::*;
use crate::budget::Allowance;
use crate::codec::rdb_io::testing::{Field, Fields};
use crate::types::sbchain::ValkeyChain;
use proptest::prelude::*;

fn link(capacity: u64, fp: f64, rule: KRule) -> ValkeyLink {
    let plan = ValkeyPlan::sized(capacity, fp, rule).expect("a link");
    ValkeyLink::allocate(Allowance::unlimited().admit(plan).unwrap()).unwrap()
}

fn items(n: u32, tag: &str) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{tag}:{i}").into_bytes()).collect()
}

/// Our link and `bloomfilter` 1.0.16 (bit-vec, most significant bit first, k rounded up),
/// filled with the same items under the same seed: the same m, k and bitmap.
fn equals_bloomfilter_1(capacity: u64, fp: f64, seed: [u8; 32], added: &[Vec<u8>]) {
    let mut theirs =
        bloomfilter1::Bloom::<[u8]>::new_for_fp_rate_with_seed(capacity as usize, fp, &seed);
    let mut ours = link(capacity, fp, KRule::Ceil);
    for item in added {
        theirs.set(item);
        ours.insert(sip_hash_pair(&seed, item));
    }
    assert_eq!(ours.bits(), theirs.number_of_bits());
    assert_eq!(ours.hashes(), theirs.number_of_hash_functions());
    let mut bytes = ours.lsb_bytes();
    for b in &mut bytes {
        *b = b.reverse_bits();
    }
    assert_eq!(bytes, theirs.bitmap());
}

/// Our link and `bloomfilter` 3.x (own bitmap, least significant bit first, k rounded to
/// nearest): the same serialized filter, header and all.
fn equals_bloomfilter_3(capacity: u64, fp: f64, seed: [u8; 32], added: &[Vec<u8>]) {
    let mut theirs =
        bloomfilter3::Bloom::<[u8]>::new_for_fp_rate_with_seed(capacity as usize, fp, &seed)
            .expect("valid arguments");
    let mut ours = link(capacity, fp, KRule::Round);
    for item in added {
        theirs.set(item);
        ours.insert(sip_hash_pair(&seed, item));
    }
    let mut blob = vec![1u8];
    blob.extend_from_slice(&ours.bytes().to_le_bytes());
    blob.extend_from_slice(&ours.hashes().to_le_bytes());
    blob.extend_from_slice(&seed);
    blob.extend_from_slice(&ours.lsb_bytes());
    assert_eq!(blob, theirs.as_slice());
    for item in added {
        assert!(theirs.check(item) && ours.contains(sip_hash_pair(&seed, item)));
    }
}

#[test]
fn bit_for_bit_with_the_bloomfilter_crate() {
    let random = hash::random_seed();
    for seed in [FIXED_SEED, random] {
        for (capacity, fp) in [(1, 0.5), (50, 0.1), (100, 0.01), (1000, 0.001), (7, 0.25)] {
            let added = items(capacity as u32 * 2, "x");
            equals_bloomfilter_1(capacity, fp, seed, &added);
            equals_bloomfilter_3(capacity, fp, seed, &added);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn sizing_and_bits_match_the_crate_everywhere(
        capacity in 1u64..5000,
        fp in 0.0001f64..0.9,
        n in 0u32..300,
        seed in proptest::array::uniform32(any::<u8>()),
    ) {
        let added = items(n, "p");
        equals_bloomfilter_1(capacity, fp, seed, &added);
        equals_bloomfilter_3(capacity, fp, seed, &added);
    }

    /// Never a false negative after add → save → load, in either encoding; encoding 1 keeps the
    /// whole object (its header), encoding 0 every bit.
    #[test]
    fn no_false_negative_after_save_and_load(
        capacity in 1u64..80,
        fp in 0.001f64..0.3,
        growth in 0u32..4,
        n in 0u32..400,
    ) {
        let mut chain = ValkeyChain::new(capacity, fp, growth, growth == 0).unwrap();
        let added = items(n, "s");
        let mut taken = Vec::new();
        for item in &added {
            if chain.add(item, &mut Allowance::unlimited()).is_ok() {
                taken.push(item);
            }
        }
        for (flavour, encver) in [(ValkeyFlavour::V0_1, 0), (ValkeyFlavour::V1_0, 1)] {
            let mut fields = Fields::default();
            rdb_save(&chain, flavour, &mut fields);
            let back = rdb_load(&mut fields, encver).expect("loads");
            prop_assert!(fields.items.is_empty());
            for item in &taken {
                prop_assert!(back.contains(item));
            }
            prop_assert_eq!(back.items(), chain.items());
            let bits = |c: &ValkeyChain| {
                let mut all = Vec::new();
                c.visit_bits(&mut |b| all.extend_from_slice(b));
                all
            };
            prop_assert_eq!(bits(&back), bits(&chain));
            if encver == 1 {
                prop_assert_eq!(back.dump_header(), chain.dump_header());
            }
        }
    }
}

fn saved(chain: &ValkeyChain, flavour: ValkeyFlavour) -> Vec<Field> {
    let mut fields = Fields::default();
    rdb_save(chain, flavour, &mut fields);
    fields.items.into_iter().collect()
}

fn load(fields: Vec<Field>, encver: i32) -> Result<ValkeyChain, RdbError> {
    rdb_load(
        &mut Fields {
            items: fields.into(),
            allowance: Allowance::unlimited(),
        },
        encver,
    )
}

/// Each field of either encoding, damaged, is refused (never a panic).
#[test]
fn damaged_fields_are_refused() {
    let mut chain = ValkeyChain::new(4, 0.1, 2, false).unwrap();
    for i in 0..20u32 {
        chain
            .add(&i.to_le_bytes(), &mut Allowance::unlimited())
            .unwrap();
    }
    assert!(chain.links().len() >= 2);
    for (flavour, encver) in [(ValkeyFlavour::V0_1, 0), (ValkeyFlavour::V1_0, 1)] {
        let good = saved(&chain, flavour);
        assert!(load(saved(&chain, flavour), encver).is_ok());
        assert_eq!(
            load(saved(&chain, flavour), 2).err(),
            Some(RdbError::UnknownEncoding(2))
        );
        for cut in 0..good.len() {
            let fields = saved(&chain, flavour).into_iter().take(cut).collect();
            assert!(load(fields, encver).is_err(), "cut at {cut}");
        }
        for at in 0..good.len() {
            for forged in [
                Field::U(0),
                Field::U(u64::MAX),
                Field::U(3),
                Field::F(f32::NAN),
                Field::D(2.0),
                Field::S(vec![1; 3]),
                Field::S(Vec::new()),
            ] {
                let mut fields = saved(&chain, flavour);
                fields[at] = forged;
                // Either refused or a valid object (a count that happens to fit).
                if let Ok(back) = load(fields, encver) {
                    assert!(!back.links().is_empty());
                }
            }
        }
    }
    // Refusals the notes list for encoding 0: a bit count that is not the bitmap's, k = 0, no
    // filter, items over capacity.
    let v0 = saved(&chain, ValkeyFlavour::V0_1);
    let forge = |at: usize, f: Field| {
        let mut fields = saved(&chain, ValkeyFlavour::V0_1);
        fields[at] = f;
        load(fields, 0).is_err()
    };
    assert!(forge(0, Field::U(0)));
    assert!(forge(4, Field::U(8)));
    assert!(forge(5, Field::U(0)));
    assert!(forge(v0.len() - 1, Field::U(1 << 40)));
    // A budget too small for the object refuses it before allocating.
    let mut fields = Fields {
        items: saved(&chain, ValkeyFlavour::V1_0).into(),
        allowance: Allowance::new(8),
    };
    assert!(matches!(
        rdb_load(&mut fields, 1),
        Err(RdbError::OverBudget(_) | RdbError::Invalid(_))
    ));
}

/// 1.0's TIGHTENING and SEED on a new object: the links it grows by follow the ratio, every link
/// hashes with the seed, and the options survive encoding 1.
#[test]
fn creation_options() {
    let mut chain = ValkeyChain::new(4, 0.1, 2, false).unwrap();
    let seed = [7u8; 32];
    chain.set_valkey_options(Some(0.25), Some(seed)).unwrap();
    assert!(chain.set_valkey_options(Some(1.0), None).is_err());
    for i in 0..30u32 {
        chain
            .add(&i.to_le_bytes(), &mut Allowance::unlimited())
            .unwrap();
    }
    assert!(chain.set_valkey_options(None, Some(FIXED_SEED)).is_err());
    assert_eq!(chain.links()[1].error(), 0.1 * 0.25);
    assert_eq!(chain.links()[2].error(), 0.1 * 0.25 * 0.25);
    assert!(!chain.settings().seed_random);
    let mut fields = Fields::default();
    rdb_save(&chain, ValkeyFlavour::V1_0, &mut fields);
    let back = rdb_load(&mut fields, 1).unwrap();
    assert_eq!(back.dump_header(), chain.dump_header());
    // A fresh object with the seed places its bits as bloomfilter 3.x with that seed does.
    let mut fresh = ValkeyChain::new(4, 0.1, 2, false).unwrap();
    fresh.set_valkey_options(None, Some(seed)).unwrap();
    let mut theirs = bloomfilter3::Bloom::<[u8]>::new_for_fp_rate_with_seed(4, 0.1, &seed).unwrap();
    for item in [&b"a"[..], b"b"] {
        fresh.add(item, &mut Allowance::unlimited()).unwrap();
        theirs.set(item);
    }
    assert_eq!(theirs.as_slice()[45..], fresh.links()[0].lsb_bytes());
}

/// 1.0's `Max scaled capacity`: valkey-doc's figure for a default filter (capacity 100, error
/// 0.01, expansion 2, tightening 0.5) under the 128 MB object limit; smaller under a smaller
/// limit, and bounded without one.
#[test]
fn max_scaled_capacity_is_valkey_docs() {
    let chain = ValkeyChain::new(100, 0.01, 2, false).unwrap();
    assert_eq!(chain.max_scaled_capacity(128 << 20), 26_214_300);
    // The first link alone: 48 + 8 + 208 + 120 bytes.
    assert_eq!(chain.max_scaled_capacity(384), 100);
    assert_eq!(chain.max_scaled_capacity(383), 0);
    assert!(chain.max_scaled_capacity(0) > 26_214_300);
    let mut tight = ValkeyChain::new(1000, 0.001, 1, false).unwrap();
    tight.set_valkey_options(Some(0.999), None).unwrap();
    assert_eq!(tight.max_scaled_capacity(0), 1000 * MAX_LINKS);
}

/// Our SCANDUMP header refuses each bad field.
#[test]
fn dump_header_validation() {
    let chain = ValkeyChain::new(100, 0.01, 2, false).unwrap();
    let good = chain.dump_header();
    assert_eq!(ValkeyChain::header_len(&good), Some(good.len()));
    assert!(ValkeyChain::shape(&good).is_ok());
    let corrupt = |at: usize, bytes: &[u8]| {
        let mut h = good.clone();
        h[at..at + bytes.len()].copy_from_slice(bytes);
        ValkeyChain::shape(&h).is_err()
    };
    assert!(corrupt(0, b"X"));
    assert!(corrupt(4, &[2]));
    assert!(corrupt(5, &[4]));
    assert!(corrupt(8, &1u64.to_le_bytes()));
    assert!(corrupt(20, &2u32.to_le_bytes()));
    assert!(corrupt(24, &1.5f64.to_le_bytes()));
    assert!(corrupt(32, &0f64.to_le_bytes()));
    assert!(corrupt(72, &0u64.to_le_bytes()));
    assert!(corrupt(80, &f64::NAN.to_le_bytes()));
    assert!(corrupt(88, &1000u64.to_le_bytes()));
    assert!(corrupt(96, &0u64.to_le_bytes()));
    assert!(corrupt(104, &0u32.to_le_bytes()));
    assert!(ValkeyChain::shape(&good[..good.len() - 1]).is_err());
    assert!(ValkeyChain::shape(&[]).is_err());
}
