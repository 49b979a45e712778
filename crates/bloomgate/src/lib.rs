//! bloomgate: Bloom filters as a production lever.
//!
//! Answer "is this key in the set?" in memory: "definitely not" is always right, "maybe" is
//! wrong at a chosen, measured rate.

pub mod bits;
pub mod error;

pub use error::{Error, Result};
