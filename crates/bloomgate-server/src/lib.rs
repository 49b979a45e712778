//! bloomgate's Redis-protocol server: RedisBloom's BF.* dialect, bit for bit, with persistence
//! (snapshots plus a checksummed append-only log) and crash safety.
//!
//! Layers: [`resp`] (wire format), [`compat`] (RedisBloom-exact filter layouts), [`keyspace`],
//! [`commands`] (synchronous command layer, no I/O), [`persistence`], and the tokio network layer
//! in [`server`] / [`connection`], with [`metrics`] on a separate port.

pub mod commands;
pub mod compat;
pub mod connection;
pub mod keyspace;
pub mod metrics;
pub mod persistence;
pub mod resp;
pub mod server;

pub use server::{run, ServeArgs};
