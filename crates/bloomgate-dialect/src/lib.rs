//! The RedisBloom dialect, written once and hosted twice.
//!
//! Everything that makes bloomgate a drop-in for RedisBloom lives here, with no I/O, no runtime
//! and no notion of a connection: the bit-exact values ([`sbchain::BloomChain`],
//! [`cuckoo::CuckooChain`], [`murmur`]), their SCANDUMP/LOADCHUNK and RDB encodings ([`value`],
//! [`rdb`], and Redis' framing of them in `DUMP` payloads and RDB files: [`rdb_format`]), the `bf-*`/`cf-*` settings ([`config`]) and the BF.*/CF.* command semantics —
//! argument parsing in RedisBloom's order, errors word for word, replies, and what a write must
//! replicate or log ([`commands`]). Beside them, our own extension: time-windowed filters
//! ([`windowed`], the `WF.*` commands).
//!
//! Two hosts run it: `bloomgate serve` (`bloomgate-server`, its own keyspace and persistence) and
//! the Redis/Valkey module (`bloomgate-module`, Redis' keyspace, RDB and replication). A host
//! implements [`commands::Host`] and calls [`commands::execute`]; every compatibility fix made
//! here lands in both.
#![deny(missing_docs)]

pub mod budget;
pub mod commands;
pub mod config;
pub mod countmin;
pub mod cow;
pub mod cuckoo;
mod flat_chunks;
pub mod lzf;
pub mod murmur;
pub mod num;
pub mod rdb;
pub mod rdb_format;
pub mod reply;
pub mod sbchain;
pub mod tdigest;
pub mod topk;
pub mod value;
pub mod windowed;

pub use commands::{execute, Host, Outcome};
pub use config::Config;
pub use reply::Reply;
pub use value::{DialectType, Value};

/// The RedisBloom version the dialect speaks, as `MODULE LIST` reports it (`major·10000 +
/// minor·100 + patch`): 8.8.0, the RedisBloom release whose commands, replies and encodings
/// (t-digest's memory count included) these are. Version-gated clients read it as "at least
/// 8.8", so none of their RedisBloom tests is skipped.
pub const REDISBLOOM_VERSION: i64 = 80800;

/// Redis' out-of-memory refusal, shared by both command families.
pub const ERR_OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
/// Redis' wrong-type error.
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// RedisBloom's missing-key error for reads that need the filter.
pub const ERR_NOT_FOUND: &str = "ERR not found";
