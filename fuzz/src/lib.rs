//! Checks behind the fuzz targets in `fuzz_targets/`, kept in a library so the regression tests
//! in `crates/*/tests/fuzz_regressions.rs` can include the same files and replay saved crashers
//! through exactly the code the fuzzer ran. Each module documents what its target checks.

pub mod command_script;
pub mod core_check;
pub mod payload_check;
pub mod resp_check;
