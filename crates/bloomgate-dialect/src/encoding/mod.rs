//! How values travel as bytes: RedisBloom's RDB field order of each module type ([`rdb`]), the
//! field I/O a host supplies for it ([`rdb_io`]), Redis' framing of module values in `DUMP`
//! payloads and RDB files ([`rdb_format`], compressed strings through [`lzf`]), the flat
//! SCANDUMP chunking of dump bodies (`chunks`) and RedisBloom's hash
//! ([`murmur`]), whose exact bits decide where an item lands in a dumped filter.

pub(crate) mod chunks;
pub mod lzf;
pub mod murmur;
pub mod rdb;
pub mod rdb_file;
pub mod rdb_format;
pub mod rdb_io;
