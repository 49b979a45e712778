//! The leaf codecs every value type builds on, knowing no value type: the field I/O of RDB
//! module values that a host supplies and every loader reads through ([`rdb_io`]), the flat
//! SCANDUMP chunking of dump bodies (`chunks`), LZF ([`lzf`], the compression of Redis' strings)
//! and RedisBloom's hashes ([`murmur`]), whose exact bits decide where an item lands in a dumped
//! filter. The framing of whole values is above the types, in [`crate::encoding`].

pub(crate) mod chunks;
pub mod lzf;
pub mod murmur;
pub mod rdb_io;
