//! bloomgate: Bloom filters as a production lever.
//!
//! Answer "is this key in the set?" in memory: "definitely not" is always right, "maybe" is
//! wrong at a chosen, measured rate.

#![deny(missing_docs)]

pub mod any;
pub mod bits;
pub mod codec;
pub mod error;
pub mod filters;
pub mod hash;
pub mod memory;
pub mod params;
pub mod relocate;

pub use codec::FilterCodec;
pub use error::{Error, Result};
pub use filters::*;
pub use hash::KeyHash;
pub use params::{Layout, Params};

/// Compiles and runs the Rust examples in the workspace README, so they stay true.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
