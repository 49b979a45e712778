//! `bloomgate serve`: the Redis-protocol server (RedisBloom-compatible BF.* commands). Options
//! and behaviour live in `bloomgate_server`.

pub use bloomgate_server::ServeArgs as Args;

pub fn run(args: Args) -> anyhow::Result<()> {
    // Return freed pages to the OS in the background, as Redis runs jemalloc.
    let _ = tikv_jemalloc_ctl::background_thread::write(true);
    bloomgate_server::keyspace::set_heap_probe(heap_allocated);
    bloomgate_server::run(args)
}

/// Bytes jemalloc has handed out and not had back (`stats.allocated`, after refreshing its
/// statistics epoch): `used_memory`, as Redis reports its allocator's count.
fn heap_allocated() -> u64 {
    use tikv_jemalloc_ctl::{epoch, stats};
    let _ = epoch::advance();
    stats::allocated::read().map_or(0, |n| n as u64)
}
