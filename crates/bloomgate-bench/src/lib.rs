//! The measuring parts of bloomgate-bench (keys, contenders, timing, the memory floor, models,
//! report, plots), shared by the `bloomgate-bench` binary and the Criterion micro-benchmarks.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod contender;
pub mod floor;
pub mod keys;
pub mod model;
pub mod ours;
pub mod peers;
pub mod plots;
pub mod report;
pub mod results;
pub mod sweep;
pub mod timing;

/// The Rust examples of README.md, compiled and run as doctests (scripts/ci/docs_check.sh runs the
/// shell and Python ones).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The Rust examples of docs/library.md, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/library.md")]
pub struct LibraryDocDoctests;
