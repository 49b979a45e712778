//! Fuzzes the dialect's load paths for untrusted bytes: DUMP payloads (CRC re-sealed) through
//! `restore_payload` and SCANDUMP headers of every kind through `Kind::from_header`, under a
//! 64 MiB budget (see `bloomgate_testkit::fuzz::payload_check`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bloomgate_fuzz::payload_check::check(data);
});
