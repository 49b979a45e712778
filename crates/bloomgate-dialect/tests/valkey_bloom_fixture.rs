//! valkey-bloom 0.1.0's data (tests/fixtures/valkey-bloom-rdb: an RDB file and each key's `DUMP`
//! payload, made by Valkey 8.0.1 + valkey-bloom 0.1.0) loads into `bloomfltr` values that answer
//! exactly as valkey-bloom did (every added item present, the very same false positives among
//! 5,000 probes, BF.INFO's fields), writes back byte for byte in encoding 0, and round-trips
//! through encoding 1, the `BF.LOAD` payload and our SCANDUMP stream.
//!
//! The valkey flavour is one setting per process: everything that depends on it runs in one
//! test, in order.

use bloomgate_dialect::budget::Allowance;
use bloomgate_dialect::commands::testing::Harness;
use bloomgate_dialect::encoding::rdb_file::walk;
use bloomgate_dialect::encoding::rdb_format::{dump_payload, restore_payload};
use bloomgate_dialect::types::sbchain::valkey::{
    decode_load_payload, encode_load_payload, set_valkey_flavour, set_valkey_random_seed,
    LoadPayloadError,
};
use bloomgate_dialect::types::sbchain::{ChainLink, ValkeyChain, ValkeyFlavour, ValkeyLink};
use bloomgate_dialect::value::{ChainValue, Kind};
use bloomgate_dialect::{Reply, Value};

use bloomgate_testkit::valkey_fixture::{self, fixture, hits, key_answers};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn chain(value: &Value) -> &ValkeyChain {
    ValkeyLink::of(value).expect("a bloomfltr value")
}

/// Every recorded answer of `key` holds for `chain`: added items present, the probes' false
/// positives exactly valkey-bloom's, BF.INFO's numbers.
fn check_answers(fixture: &serde_json::Value, key: &str, chain: &ValkeyChain) {
    let want = key_answers(fixture, key);
    for item in &want.present {
        assert!(chain.contains(item.as_bytes()), "{key}: {item} missing");
    }
    let got = hits(chain.contains_many(&want.probes));
    assert_eq!(got, want.false_positives, "{key}: false positives");
    let answers = &fixture["keys"][key]["answers"];
    let info = answers["BF.INFO"].as_array().unwrap();
    assert_eq!(
        chain.capacity(),
        info[1].as_u64().unwrap(),
        "{key}: Capacity"
    );
    assert_eq!(chain.size_bytes(), info[3].as_u64().unwrap(), "{key}: Size");
    assert_eq!(
        chain.links().len() as u64,
        info[5].as_u64().unwrap(),
        "{key}: filters"
    );
    assert_eq!(chain.items(), info[7].as_u64().unwrap(), "{key}: items");
    let expansion = chain.is_scaling().then(|| u64::from(chain.growth()));
    assert_eq!(expansion, info[9].as_u64(), "{key}: Expansion rate");
    assert_eq!(answers["TYPE"], ValkeyLink::TYPE_NAME);
}

#[test]
fn valkey_bloom_data_loads_and_writes_back() {
    let fixture = fixture();
    let keys = fixture["keys"].as_object().expect("keys");
    assert_eq!(keys.len(), 9);

    // 0.1.0's flavour: its BF.INFO Size, encoding 0 written.
    set_valkey_flavour(ValkeyFlavour::V0_1);
    assert_eq!(Kind::BloomValkey.encoding_version(), 0);

    // The RDB file: every key found, as a bloomfltr value answering as recorded.
    let file = std::fs::read(valkey_fixture::dir().join("dump.rdb")).expect("dump.rdb");
    let mut found = Vec::new();
    walk::<bloomgate_dialect::encoding::rdb_file::WalkError>(
        &file[..],
        file.len() as u64,
        1 << 30,
        |f| {
            found.push(f);
            Ok(())
        },
    )
    .expect("the fixture walks");
    assert_eq!(found.len(), 9);
    for f in &found {
        let key = std::str::from_utf8(&f.key).unwrap();
        check_answers(&fixture, key, chain(&f.value));
    }

    for (key, expected) in keys {
        // DUMP payloads: loaded, and written back byte for byte in encoding 0 (the footer is
        // Valkey's RDB version, ours Redis 7's: the value before it is compared).
        let payload = hex(expected["dump_payload_hex"].as_str().unwrap());
        let value = restore_payload(&payload, 1 << 30).expect("payload loads");
        check_answers(&fixture, key, chain(&value));
        let ours = dump_payload(&value);
        assert_eq!(
            ours[..ours.len() - 10],
            payload[..payload.len() - 10],
            "{key}: encoding 0 byte for byte"
        );

        // Encoding 1 (1.0's), the BF.LOAD payload and our SCANDUMP stream keep every bit.
        set_valkey_flavour(ValkeyFlavour::V1_0);
        let v1 = dump_payload(&value);
        assert_ne!(v1, ours);
        let back = restore_payload(&v1, 1 << 30).expect("encoding 1 loads");
        set_valkey_flavour(ValkeyFlavour::V0_1);
        check_answers(&fixture, key, chain(&back));
        assert_eq!(dump_payload(&back), ours, "{key}: 0 → 1 → 0");

        let load = encode_load_payload(chain(&value));
        let loaded = decode_load_payload(&load, &mut Allowance::unlimited()).expect("BF.LOAD");
        check_answers(&fixture, key, &loaded);
        assert!(matches!(
            decode_load_payload(&load, &mut Allowance::new(0)),
            Err(LoadPayloadError::OverBudget(_))
        ));

        let mut h = Harness::new();
        h.keys.insert(b"k".to_vec(), value.clone());
        let chunks = h.scandump("BF", "k");
        h.loadchunks("BF", "copy", &chunks);
        let copy = h.keys.get(&b"copy"[..]).expect("LOADCHUNK made the key");
        check_answers(&fixture, key, chain(copy));
        assert_eq!(h.run("BF.INFO copy"), h.run("BF.INFO k"));
    }
    set_valkey_flavour(ValkeyFlavour::V1_0);

    // BF.* commands on a valkey chain made through the generic chain (LAYOUT valkey), and its
    // 1.0 encoding with a random seed round-trips.
    set_valkey_random_seed(true);
    let mut h = Harness::new();
    assert_eq!(h.run("BF.RESERVE v 0.01 10 LAYOUT valkey"), Reply::ok());
    for i in 0..100 {
        h.run(&format!("BF.ADD v i{i}"));
    }
    assert!(matches!(h.keys.get(&b"v"[..]), Some(Value::BloomValkey(_))));
    let value = h.keys.get(&b"v"[..]).unwrap().clone();
    let c = chain(&value);
    assert!(c.links().len() > 2);
    assert!(c.settings().seed_random);
    let back = restore_payload(&dump_payload(&value), 1 << 30).unwrap();
    assert_eq!(chain(&back).settings(), c.settings());
    assert_eq!(chain(&back).dump_header(), c.dump_header());
    for i in 0..100 {
        assert!(chain(&back).contains(format!("i{i}").as_bytes()));
    }
    assert_eq!(h.run("BF.EXISTS v i5"), Reply::Bool(true));
    assert_eq!(h.run("BF.CARD v"), Reply::Int(c.items() as i64));
}

/// A damaged `BF.LOAD` payload is refused with valkey-bloom's errors, never a panic.
#[test]
fn load_payload_refusals() {
    let chain = ValkeyChain::new(100, 0.01, 2, false).unwrap();
    let good = encode_load_payload(&chain);
    let decode = |b: &[u8]| decode_load_payload(b, &mut Allowance::unlimited()).err();
    assert_eq!(decode(&good), None);
    let mut bad = good.clone();
    bad[0] = 2;
    assert_eq!(decode(&bad), Some(LoadPayloadError::UnsupportedVersion));
    for cut in 0..good.len() {
        assert_eq!(
            decode(&good[..cut]),
            Some(LoadPayloadError::Decoding),
            "cut {cut}"
        );
    }
    let mut longer = good.clone();
    longer.push(0);
    assert_eq!(decode(&longer), Some(LoadPayloadError::Decoding));
    // A forged length far past the payload.
    let mut forged = good.clone();
    forged[30..38].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(decode(&forged), Some(LoadPayloadError::Decoding));
    assert_eq!(
        LoadPayloadError::Decoding.message(),
        "ERR bloom object decoding failed"
    );
}
