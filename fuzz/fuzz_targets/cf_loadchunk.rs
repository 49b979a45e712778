//! Fuzzes CF.LOADCHUNK through the command layer: forged headers and chunks, then every CF.*
//! command on the loaded key and a SCANDUMP → LOADCHUNK round trip, under a 64 MiB maxmemory.
//! Errors are fine; panics, unbounded allocation and non-round-tripping dumps are not (see
//! `src/command_script.rs`). Uses command names only, so it builds before CF.* exists.
#![no_main]

use bloomgate_fuzz::command_script::{check, Family};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    check(Family::Cuckoo, data);
});
