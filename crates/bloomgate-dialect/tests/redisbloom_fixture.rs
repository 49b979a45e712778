//! RedisBloom's own `DUMP` payloads (tests/fixtures/redisbloom-rdb, made by Redis 7.0.15 +
//! RedisBloom 2.4.23) decode into values whose SCANDUMP sequence is RedisBloom's, and encode
//! back to the same payload byte for byte (LZF-compressed strings included).

use bloomgate_dialect::encoding::rdb_format::{dump_payload, restore_payload};

fn fixture() -> serde_json::Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/redisbloom-rdb/expected.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn fixture_payloads_restore_and_dump_byte_for_byte() {
    let fixture = fixture();
    let keys = fixture["keys"].as_object().expect("keys");
    assert_eq!(keys.len(), 9);
    for (key, expected) in keys {
        let payload = hex(expected["dump_payload_hex"].as_str().expect("payload"));
        let value = restore_payload(&payload, 1 << 30)
            .unwrap_or_else(|e| panic!("{key}: fixture payload refused: {e:?}"));
        let scandump: Vec<(i64, Vec<u8>)> = expected["scandump"]
            .as_array()
            .expect("scandump")
            .iter()
            .map(|step| {
                (
                    step[0].as_i64().expect("iter"),
                    hex(step[1].as_str().expect("hex")),
                )
            })
            .collect();
        let ours: Vec<(i64, Vec<u8>)> = value.dump_stream().collect();
        assert_eq!(ours, scandump, "{key}: SCANDUMP sequence");
        assert_eq!(dump_payload(&value), payload, "{key}: DUMP payload");
    }
}
