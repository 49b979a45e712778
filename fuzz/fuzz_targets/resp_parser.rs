//! Fuzzes `bloomgate_server::resp::RequestParser`: never panics, never holds more than it was
//! given, and parsing the same bytes whole, at fuzzer-chosen cut points and one byte at a time
//! yields the same commands and the same protocol error (see `src/resp_check.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bloomgate_fuzz::resp_check::check(data);
});
