//! bloomgate-gate: a membership gate for "has this scope (user) already seen this item?".
//!
//! Per-scope time-windowed Bloom filters sit in front of an exact store (SQLite, Redis or
//! PostgreSQL, with an LRU cache). A "definitely not" answer skips the exact path entirely; a
//! "maybe" is either verified against the exact store (policy [`Policy::Verify`], exact results)
//! or trusted ([`Policy::Trust`], over-filtering at the filter's false-positive rate). Filters follow the
//! product's retention window, are rebuilt from the store when they saturate, and share one memory
//! budget. Served items are recorded in the background (group commit); a scope's first request
//! builds its filter when that is cheaper than the exact path, and local filters survive restarts
//! through snapshots. The [`sim`] module reproduces the feed-service case study on a real store
//! (`bloomgate demo feed` runs it); docs/gate.md describes the design and its measurements.
//!
//! Layout: [`Gate`] (`gate.rs`) answers requests, configured by the plain data in `config.rs`
//! ([`GateConfig`], [`LifecycleConfig`], ...). Three rooms hold the rest:
//! - `exact/`: the exact path: `core.rs` (store, cache, pending overlay), `cache.rs`,
//!   `pending.rs`, and the recorder (`recorder.rs`) that commits served items in groups;
//! - `filters/`: the filters, a `FilterBackend` (`filters/mod.rs`): none, local (`lifecycle.rs`,
//!   its build jobs and queue in `build_queue.rs`, with `snapshot.rs` and the cold-path rule in
//!   `costs.rs`) or remote (`remote.rs`, routed by `nodes.rs`, its pending rows kept by the
//!   Lua scripts of `scripts.rs`);
//! - `stores/`: the exact stores, implementing [`ExactStore`] (`stores/mod.rs`): `sqlite.rs`,
//!   `redis.rs` (with `redis_pool.rs`, which the remote filters share), `postgres.rs` with its
//!   time partitions in `postgres_partitions.rs`.
//!
//! `url.rs` names stores and filters by URL ([`StoreUrl`], [`FilterUrl`]) and is the one place a
//! store's scheme is recognised and the store opened; `identity.rs` turns a scope or item given
//! as bytes into the 64-bit id everything keys on ([`item_id`]); `error.rs` is the crate's error.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod config;
mod error;
mod exact;
mod filters;
mod gate;
mod identity;
mod metrics;
pub mod sim;
mod stores;
mod url;

pub use config::{
    Durability, FilterMode, GateConfig, LifecycleConfig, Persistence, Policy, Timeouts,
};
pub use error::{Error, Result};
pub use exact::cache::{SeenCache, Ticket};
pub use exact::recorder::{BATCH_ROWS, QUEUE_ROWS, RETRY_FIRST, RETRY_MAX, ROOM_WAIT};
pub use filters::costs::INLINE_FACTOR;
pub use gate::Gate;
pub use identity::{item_id, ID_SEED};
pub use metrics::{Histogram, Metrics};
pub use stores::postgres::{PgOptions, PostgresStore};
pub use stores::postgres_partitions::Partition;
pub use stores::redis::RedisStore;
pub use stores::sqlite::SqliteStore;
pub use stores::{ExactStore, LatencyStore, Seen};
pub use url::{FilterUrl, StoreUrl, UrlError};
