//! How whole values travel as bytes, above the value types: RedisBloom's RDB field order of
//! each module type ([`rdb`]; a Bloom chain's is its link format's, in
//! [`crate::types::sbchain`]), Redis' framing of module values in `DUMP` payloads and RDB files
//! ([`rdb_format`], compressed strings through [`crate::codec::lzf`]), and a streaming walker
//! over a whole RDB file ([`rdb_file`]). The leaf codecs the types themselves use are in
//! [`crate::codec`].

pub mod rdb;
pub mod rdb_file;
pub mod rdb_format;
