//! The checks behind the fuzz targets in `fuzz_targets/` live in `bloomgate-testkit`
//! (`bloomgate_testkit::fuzz`), shared with the regression tests in
//! `crates/*/tests/fuzz_regressions.rs` that replay saved crashers through the same code.

pub use bloomgate_testkit::fuzz::*;
