//! `bloomgate serve`: the Redis-protocol server (RedisBloom-compatible BF.* commands). Options
//! and behaviour live in `bloomgate_server`.

pub use bloomgate_server::ServeArgs as Args;

pub fn run(args: Args) -> anyhow::Result<()> {
    bloomgate_server::run(args)
}
