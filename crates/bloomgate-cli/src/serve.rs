//! `bloomgate serve`: the Redis-protocol server (RedisBloom-compatible BF.* commands). Options
//! and behaviour live in `bloomgate_server`.

pub use bloomgate_server::ServeArgs as Args;

pub fn run(args: Args) -> anyhow::Result<()> {
    use tikv_jemalloc_ctl::{Access as _, AsName as _};
    // Return freed pages to the OS in the background (as Redis runs jemalloc), within a second
    // rather than jemalloc's default ten: pages freed by table growth and request buffers
    // otherwise stay resident as if keys held them.
    let _ = tikv_jemalloc_ctl::background_thread::write(true);
    for name in [&b"arenas.dirty_decay_ms\0"[..], b"arena.0.dirty_decay_ms\0"] {
        let _ = name.name().write(DIRTY_DECAY_MS);
    }
    bloomgate_server::keyspace::set_heap_probe(heap_allocated);
    bloomgate_server::run(args)
}

/// How long jemalloc keeps freed pages before returning them to the OS.
const DIRTY_DECAY_MS: isize = 1000;

/// Bytes jemalloc has handed out and not had back (`stats.allocated`, after refreshing its
/// statistics epoch): `used_memory`, as Redis reports its allocator's count.
fn heap_allocated() -> u64 {
    use tikv_jemalloc_ctl::{epoch, stats};
    let _ = epoch::advance();
    stats::allocated::read().map_or(0, |n| n as u64)
}
