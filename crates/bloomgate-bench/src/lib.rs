//! The measuring parts of bloomgate-bench (keys, contenders, timing, the memory floor, models,
//! report, plots), shared by the `bloomgate-bench` binary and the Criterion micro-benchmarks.

#![forbid(unsafe_code)]

pub mod contender;
pub mod floor;
pub mod keys;
pub mod model;
pub mod ours;
pub mod peers;
pub mod plots;
pub mod report;
pub mod sweep;
pub mod timing;
