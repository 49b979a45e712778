//! bloomgate's Redis-protocol server: hosts the RedisBloom dialect (`bloomgate-dialect`) on its
//! own keyspace, with persistence (snapshots plus a checksummed append-only log) and crash safety.
//!
//! Layers: [`resp`] (wire format), [`keyspace`], [`commands`] (synchronous command layer, no I/O:
//! Redis' own commands here, BF.*/CF.* from the dialect), [`persistence`], and the tokio network
//! layer in [`server`] / [`connection`], with [`metrics`] on a separate port.

pub mod commands;
pub mod connection;
pub mod keyspace;
pub mod metrics;
pub mod persistence;
pub mod resp;
pub mod server;

pub use server::{run, ServeArgs};
