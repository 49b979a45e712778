//! bloomgate's Redis-protocol server: hosts the RedisBloom dialect (`bloomgate-dialect`) on its
//! own keyspace, with persistence (snapshots plus a checksummed append-only log) and crash safety.
//!
//! Layers, each depending only on those before it: [`lock`] (the lock-poisoning policy,
//! [`lock::relock`]), [`inline`] and [`resp`] (wire format), [`glob`], [`pubsub`],
//! [`keyspace`], [`persistence`] (files and records; it replays commands through a trait the
//! command layer implements), [`config`] (options, settings, `CONFIG`'s parameters), [`gate`]
//! (the gate behind `GATE.*`, its calls run off the event loop),
//! [`commands`] (the synchronous command layer, no I/O: one table, one command model, BF.*/CF.*/
//! WF.* from the dialect and the server's own), [`metrics`], and the tokio network layer:
//! [`shared`] (state shared by connections), [`connection`], [`server`] ([`run`]).
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! let settings = bloomgate_server::Options::default().resolve()?;
//! let listener = bloomgate_server::bind(&settings)?;
//! bloomgate_server::run(listener, settings, bloomgate_server::shutdown_signal())
//! # }
//! ```

#![deny(missing_docs)]

pub mod commands;
pub mod config;
pub mod connection;
pub mod gate;
pub mod glob;
pub mod inline;
pub mod keyspace;
pub mod lock;
pub mod metrics;
pub mod persistence;
pub mod pubsub;
pub mod resp;
pub mod server;
pub mod shared;

pub use config::{GateSettings, Options, Settings};
pub use persistence::FsyncPolicy;
pub use server::{bind, run, serve, shutdown_signal};
