//! bloomgate-gate: a membership gate for "has this scope (user) already seen this item?".
//!
//! Per-scope time-windowed Bloom filters sit in front of an exact store (SQLite or Redis, with an
//! LRU cache). A "definitely not" answer skips the exact path entirely; a "maybe" is either
//! verified against the exact store (policy [`Policy::Verify`], exact results) or trusted
//! ([`Policy::Trust`], over-filtering at the filter's false-positive rate). Filters follow the
//! product's retention window, are rebuilt from the store when they saturate, and share one memory
//! budget. Served items are recorded in the background (group commit) and filters are built in
//! the background, so a request costs its filter probes plus whatever the exact path asks.
//! `bloomgate demo feed` (in the CLI crate) reproduces the feed-service case study on a real store.

#![forbid(unsafe_code)]

mod cache;
mod error;
mod gate;
mod lifecycle;
mod metrics;
mod pending;
mod recorder;
mod redis_pool;
mod redis_store;
mod remote;
mod sqlite_store;
mod store;

pub use cache::{SeenCache, Ticket};
pub use error::{Error, Result};
pub use gate::{FilterMode, Gate, GateConfig, Policy};
pub use lifecycle::LifecycleConfig;
pub use metrics::Metrics;
pub use recorder::{BATCH_ROWS, QUEUE_REQUESTS};
pub use redis_store::RedisStore;
pub use sqlite_store::SqliteStore;
pub use store::{ExactStore, LatencyStore, Seen};
