//! The RedisBloom dialect, written once and hosted twice.
//!
//! Everything that makes bloomgate a drop-in for RedisBloom lives here, with no I/O, no runtime
//! and no notion of a connection:
//!
//! - [`types`]: the bit-exact values of every RedisBloom type — the scalable Bloom chain (BF),
//!   the cuckoo filter (CF), the Count-Min sketch (CMS), Top-K (TOPK), the t-digest (TDIGEST) —
//!   and our own extension, the time-windowed filter (WF), each with its SCANDUMP/LOADCHUNK
//!   dump stream;
//! - [`value`]: [`Value`], one of those types, and [`DialectType`], what hosts use to handle
//!   any of them (type name, memory, dump stream, RDB fields) without matching on the kind;
//! - [`codec`]: the leaf codecs the types build on — the RDB field I/O a host supplies, the
//!   SCANDUMP chunking, LZF, RedisBloom's MurmurHash;
//! - [`encoding`]: how whole values travel as bytes — RedisBloom's RDB field orders, Redis'
//!   framing of module values in `DUMP` payloads and RDB files, the RDB file walker;
//! - [`budget`]: the one rule for allocating from untrusted sizes (validate, admit, allocate);
//! - [`config`]: the `bf-*`/`cf-*` settings; [`num`]: number parsing as Redis parses;
//! - [`commands`]: the command model and the BF/CF/CMS/TOPK/TDIGEST/WF commands — argument
//!   parsing in RedisBloom's order, errors word for word, replies ([`reply`]), and what a
//!   write must replicate or log.
//!
//! Two hosts run it: `bloomgate serve` (`bloomgate-server`, its own keyspace and persistence) and
//! the Redis/Valkey module (`bloomgate-module`, Redis' keyspace, RDB and replication). A host
//! implements [`commands::Host`] and calls [`commands::execute`]; every compatibility fix made
//! here lands in both.
#![deny(missing_docs)]

pub mod budget;
pub mod codec;
pub mod commands;
pub mod config;
pub mod encoding;
pub mod num;
pub mod reply;
pub mod types;
pub mod value;

pub use commands::{execute, Host, Outcome};
pub use config::{Config, Dialect, ValkeyFlavour};
pub use reply::Reply;
pub use value::{DialectType, Value};

/// The RedisBloom version the dialect speaks, as `MODULE LIST` reports it (`major·10000 +
/// minor·100 + patch`): 8.8.0, the RedisBloom release whose commands, replies and encodings
/// (t-digest's memory count included) these are. Version-gated clients read it as "at least
/// 8.8", so none of their RedisBloom tests is skipped.
pub const REDISBLOOM_VERSION: i64 = 80800;

/// Redis' out-of-memory refusal, shared by both command families.
pub const ERR_OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
/// The per-key cap's refusal (`bloom-memory-usage-limit`), for every type and path — create,
/// growth, RESTORE, LOADCHUNK — in valkey-bloom's wording, so its users' checks carry over.
pub const ERR_CAP: &str = "ERR operation exceeds bloom object memory limit";
/// Redis' wrong-type error.
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// RedisBloom's missing-key error for reads that need the filter.
pub const ERR_NOT_FOUND: &str = "ERR not found";
