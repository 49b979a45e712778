//! Fuzzes BF.LOADCHUNK through the command layer: forged headers and chunks, then every BF.*
//! command on the loaded key and a SCANDUMP → LOADCHUNK round trip, under a 64 MiB maxmemory.
//! Errors are fine; panics, unbounded allocation and non-round-tripping dumps are not (see
//! `src/command_script.rs`).
#![no_main]

use bloomgate_fuzz::command_script::{check, Family};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    check(Family::Bloom, data);
});
