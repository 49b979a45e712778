//! The `rdb_payload` fuzz check (`bloomgate_testkit::fuzz::payload_check`) on stable Rust:
//! real DUMP payloads and SCANDUMP headers of every type, and every single-bit flip and every
//! truncation of them, are refused or round-trip — never a panic, never an allocation past the
//! budget. The fuzzer explores further (`scripts/fuzz/fuzz.sh 600 rdb_payload`).

use bloomgate_testkit::fuzz::payload_check;

use bloomgate_dialect::budget::Allowance;
use bloomgate_dialect::encoding::rdb_format::dump_payload;
use bloomgate_dialect::types::cuckoo::{CuckooChain, CuckooParams};
use bloomgate_dialect::types::sbchain::{BlockedChain, BloomChain};
use bloomgate_dialect::DialectType;
use bloomgate_dialect::Value;

fn values() -> Vec<Value> {
    let mut chain = BloomChain::new(4, 0.01, 2, false).unwrap();
    let mut blocked = BlockedChain::new(4, 0.01, 2, false).unwrap();
    let mut cuckoo = CuckooChain::new(CuckooParams {
        capacity: 8,
        bucket_size: 2,
        max_iterations: 20,
        expansion: 2,
    })
    .unwrap();
    for i in 0..20u32 {
        chain
            .add(&i.to_le_bytes(), &mut Allowance::unlimited())
            .unwrap();
        blocked
            .add(&i.to_le_bytes(), &mut Allowance::unlimited())
            .unwrap();
        cuckoo
            .insert(&i.to_le_bytes(), &mut Allowance::unlimited())
            .unwrap();
    }
    vec![
        Value::Bloom(chain),
        blocked.into_value(),
        Value::Cuckoo(Box::new(cuckoo)),
    ]
}

#[test]
fn real_payloads_and_headers_with_every_bit_flip_and_cut() {
    for value in values() {
        let payload = dump_payload(&value);
        let (header, _) = value.dump_layout();
        for input in [payload, header] {
            payload_check::check(&input);
            for at in 0..input.len() {
                payload_check::check(&input[..at]);
                for bit in 0..8 {
                    let mut flipped = input.clone();
                    flipped[at] ^= 1 << bit;
                    payload_check::check(&flipped);
                }
            }
        }
    }
}
