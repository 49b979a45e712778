//! RedisBloom-compatible data layouts: MurmurHash64A, the scalable Bloom chain and the cuckoo
//! filter, bit-exact with RedisBloom's dumps. Separate from the core's native filters by design.

pub mod cuckoo;
pub mod murmur;
pub mod sbchain;
