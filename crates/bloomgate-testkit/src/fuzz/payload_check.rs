//! The `rdb_payload` fuzz check, shared with `crates/bloomgate-dialect/tests/fuzz_payloads.rs`:
//! the dialect's load paths for untrusted bytes.
//!
//! 1. The input as a `DUMP` payload, its RDB version and CRC64 trailer re-sealed so the body
//!    reaches the decoder (`restore_payload`, what RESTORE, MIGRATE and the server's RDB import
//!    run) under a 64 MiB budget: refused, or a value no larger than the budget that dumps,
//!    restores and dumps again to the same bytes.
//! 2. The input as a SCANDUMP header of every kind (`Kind::from_header`, what LOADCHUNK and
//!    snapshot loads run) under the same allowance: refused, or a value whose size was admitted
//!    before it was allocated.
//!
//! 3. The input as valkey-bloom 1.0's `BF.LOAD` payload (`decode_load_payload`) under the same
//!    allowance: refused, or a chain admitted before it was allocated whose payload encodes and
//!    decodes to the same bytes.
//!
//! Errors are fine; panics, allocations past the budget and non-round-tripping dumps are not.

use bloomgate_dialect::budget::Allowance;
use bloomgate_dialect::encoding::rdb_format::{
    crc64, dump_payload, restore_payload, DUMP_RDB_VERSION,
};
use bloomgate_dialect::types::sbchain::valkey::{decode_load_payload, encode_load_payload};
use bloomgate_dialect::value::Kind;

/// Bytes a fuzzed value may allocate.
pub const BUDGET: u64 = 64 << 20;
/// A value's reported size beyond its arrays: struct and per-link/sub-filter overheads.
const OVERHEAD: u64 = 8 << 20;

/// `data` with a valid RDB version and CRC64 trailer (appended if `data` is too short).
pub fn seal(data: &[u8]) -> Vec<u8> {
    let mut payload = data.to_vec();
    if payload.len() < 10 {
        payload.extend_from_slice(&[0; 10]);
    }
    let body = payload.len() - 10;
    payload[body..body + 2].copy_from_slice(&DUMP_RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &payload[..body + 2]);
    payload[body + 2..].copy_from_slice(&crc.to_le_bytes());
    payload
}

/// Runs both checks on one input.
pub fn check(data: &[u8]) {
    if let Ok(value) = restore_payload(&seal(data), BUDGET) {
        assert!(
            value.memory() <= BUDGET + OVERHEAD,
            "a restored value of {} bytes passed a {BUDGET}-byte budget",
            value.memory()
        );
        let dumped = dump_payload(&value);
        let back = restore_payload(&dumped, u64::MAX).expect("our own DUMP restores");
        assert_eq!(dump_payload(&back), dumped, "DUMP → RESTORE → DUMP differs");
    }
    let mut allowance = Allowance::new(BUDGET);
    if let Ok(chain) = decode_load_payload(data, &mut allowance) {
        assert!(allowance.spent() <= BUDGET);
        let payload = encode_load_payload(&chain);
        let back = decode_load_payload(&payload, &mut Allowance::unlimited())
            .expect("our own BF.LOAD payload decodes");
        assert_eq!(
            encode_load_payload(&back),
            payload,
            "BF.LOAD payload round trip"
        );
    }
    for kind in Kind::ALL {
        let mut allowance = Allowance::new(BUDGET);
        if let Ok(value) = kind.from_header(data, &mut allowance) {
            assert!(allowance.spent() <= BUDGET);
            assert!(
                value.memory() <= allowance.spent() + OVERHEAD,
                "{kind:?}: {} bytes allocated, {} admitted",
                value.memory(),
                allowance.spent()
            );
        }
    }
}
