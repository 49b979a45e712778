//! The checks behind the fuzz targets in `fuzz/fuzz_targets/`, here so the fuzz crate and the
//! regression tests (`crates/*/tests/fuzz_regressions.rs`, which replay saved crashers through
//! exactly the code the fuzzer ran) share one copy. Each module documents what its target
//! checks.

#[cfg(feature = "fuzz-server")]
pub mod command_script;
#[cfg(feature = "fuzz-core")]
pub mod core_check;
#[cfg(feature = "fuzz-dialect")]
pub mod payload_check;
#[cfg(feature = "fuzz-server")]
pub mod resp_check;
