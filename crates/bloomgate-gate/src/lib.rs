//! bloomgate-gate: a membership gate for "has this scope (user) already seen this item?".
//!
//! Per-scope time-windowed Bloom filters sit in front of an exact store (SQLite or Redis, with an
//! LRU cache). A "definitely not" answer skips the exact path entirely; a "maybe" is either
//! verified against the exact store (policy [`Policy::Verify`], exact results) or trusted
//! ([`Policy::Trust`], over-filtering at the filter's false-positive rate). Filters follow the
//! product's retention window, are rebuilt from the store when they saturate, and share one memory
//! budget. Served items are recorded in the background (group commit); a scope's first request
//! builds its filter when that is cheaper than the exact path, and local filters survive restarts
//! through snapshots. The [`sim`] module reproduces the feed-service case study on a real store
//! (`bloomgate demo feed` runs it); docs/gate.md describes the design and its measurements.
//!
//! Layout: [`Gate`] (`gate.rs`) answers requests, configured by the plain data in `config.rs`
//! ([`GateConfig`], [`LifecycleConfig`], ...); `core.rs` owns the exact side (store, cache,
//! pending overlay); the filters are a `FilterBackend` (`backend.rs`): none, local
//! (`lifecycle.rs`, its build jobs and queue in `build_queue.rs`, with `snapshot.rs` and the
//! cold-path rule in `costs.rs`) or remote (`remote.rs`); the recorder (`recorder.rs`) commits
//! served items. Stores implement [`ExactStore`] (`store.rs`, `sqlite_store.rs`,
//! `redis_store.rs`, `postgres_store.rs` with its time partitions in `postgres_partitions.rs`);
//! `url.rs` names stores and filters by URL ([`StoreUrl`], [`FilterUrl`]) and
//! is the one place a store's scheme is recognised and the store opened; `identity.rs` turns a
//! scope or item given as bytes into the 64-bit id everything keys on ([`item_id`]).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod backend;
mod build_queue;
mod cache;
mod config;
mod core;
mod costs;
mod error;
mod gate;
mod identity;
mod lifecycle;
mod metrics;
mod pending;
mod postgres_partitions;
mod postgres_store;
mod recorder;
mod redis_pool;
mod redis_store;
mod remote;
pub mod sim;
mod snapshot;
mod sqlite_store;
mod store;
mod url;

pub use cache::{SeenCache, Ticket};
pub use config::{FilterMode, GateConfig, LifecycleConfig, Persistence, Policy, Timeouts};
pub use costs::INLINE_FACTOR;
pub use error::{Error, Result};
pub use gate::Gate;
pub use identity::{item_id, ID_SEED};
pub use metrics::{Histogram, Metrics};
pub use postgres_partitions::Partition;
pub use postgres_store::{PgOptions, PostgresStore};
pub use recorder::{BATCH_ROWS, QUEUE_ROWS, RETRY_FIRST, RETRY_MAX, ROOM_WAIT};
pub use redis_store::RedisStore;
pub use sqlite_store::SqliteStore;
pub use store::{ExactStore, LatencyStore, Seen};
pub use url::{FilterUrl, StoreUrl, UrlError};
