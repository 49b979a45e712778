//! The exact path: what the gate knows for certain about a scope, without its filters.
//!
//! `core.rs` (`Core`) answers from the pending overlay (`pending.rs`: rows served but not yet
//! committed), the seen cache (`cache.rs`) and the exact store, in that order; `recorder.rs`
//! commits served rows to the store in groups and clears them from the overlay once the store
//! has confirmed them.

pub(crate) mod cache;
pub(crate) mod core;
pub(crate) mod pending;
pub(crate) mod recorder;
