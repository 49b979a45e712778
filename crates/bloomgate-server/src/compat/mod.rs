//! RedisBloom-compatible data layouts: MurmurHash64A and the scalable Bloom chain, bit-exact with
//! RedisBloom's dumps. Separate from the core's native filters by design.

pub mod murmur;
pub mod sbchain;
