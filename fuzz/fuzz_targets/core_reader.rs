//! Fuzzes the core file-format reader: `AnyFilter::from_bytes` and `AnyFilter::read_from` agree
//! on Ok/Err, accepted images re-encode byte for byte, and decoded filters answer queries,
//! inserts and removes without panicking; each input is also tried with a repaired envelope so
//! the body decoders are reached (see `src/core_check.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bloomgate_fuzz::core_check::check(data);
});
