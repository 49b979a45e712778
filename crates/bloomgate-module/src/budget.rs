//! The module's memory budget: what a new filter, link, sub-filter or loaded value may take
//! before it is allocated (the dialect's `budget` rule; a failed allocation inside Redis aborts
//! the whole server, so nothing may be allocated that was not admitted here first).
//!
//! - A command: `maxmemory` less Redis' used memory (fresh, from `RedisModule_GetUsedMemoryRatio`,
//!   the figure Redis' own eviction uses).
//! - With `maxmemory 0`, and for values loaded from the master, the AOF or an RDB file (which
//!   Redis loads whatever `maxmemory` says): an absolute ceiling, what the machine can hold —
//!   its physical memory less Redis' used memory, and no more than is available now (memory,
//!   cgroup limit, address space under `ulimit -v`: `bloomgate::memory`).
//!
//! `maxmemory` and `used_memory` come from `INFO memory`, read at most every 100 ms; what the
//! module admitted since the last reading is added to it ([`charge`]), so quick successive
//! allocations cannot each pass on one stale figure.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use redis_module::raw;

/// (when read, ms; maxmemory; used_memory)
static INFO: Mutex<(i64, u64, u64)> = Mutex::new((i64::MIN, 0, 0));
/// Bytes admitted since `INFO` was last read.
static CHARGED: AtomicU64 = AtomicU64::new(0);

/// Physical memory of the machine (or its cgroup's limit): the absolute ceiling.
fn machine_memory() -> u64 {
    static TOTAL: OnceLock<u64> = OnceLock::new();
    *TOTAL.get_or_init(|| bloomgate::memory::Headroom::now().total.unwrap_or(16 << 30))
}

/// `(maxmemory, used_memory)`, at most 100 ms old, used memory plus what was charged since.
/// Without a context (a type callback such as `copy`), the last reading is used.
fn info_memory(ctx: *mut raw::RedisModuleCtx) -> (u64, u64) {
    let mut cache = INFO.lock().unwrap_or_else(PoisonError::into_inner);
    // SAFETY: core API calls on a live context (a command's, or one from an RDB IO handle);
    // the info data is freed after use.
    unsafe {
        let now = raw::RedisModule_Milliseconds.expect("core API")();
        if !ctx.is_null() && now.saturating_sub(cache.0) >= 100 {
            let info = raw::RedisModule_GetServerInfo.expect("Redis 6+")(ctx, c"memory".as_ptr());
            if !info.is_null() {
                let field = raw::RedisModule_ServerInfoGetFieldUnsigned.expect("Redis 6+");
                let mut err = 0;
                let max = field(info, c"maxmemory".as_ptr(), &mut err);
                let used = field(info, c"used_memory".as_ptr(), &mut err);
                raw::RedisModule_FreeServerInfo.expect("Redis 6+")(ctx, info);
                *cache = (now, max, used);
                CHARGED.store(0, Ordering::Relaxed);
            }
        }
    }
    let (_, max, used) = *cache;
    (max, used.saturating_add(CHARGED.load(Ordering::Relaxed)))
}

/// The bytes new allocations may take now. `loading`: the value comes from the master, the AOF
/// or an RDB file (already accepted once: only the absolute ceiling applies).
pub fn budget(ctx: *mut raw::RedisModuleCtx, loading: bool) -> u64 {
    let (max, used) = info_memory(ctx);
    if max > 0 && !loading {
        // SAFETY: a core API call without arguments (Redis 6.0+).
        let ratio = unsafe { raw::RedisModule_GetUsedMemoryRatio.map(|f| f()) };
        let used = match ratio {
            Some(r) if r.is_finite() && r >= 0.0 => {
                ((f64::from(r) * max as f64) as u64).saturating_add(CHARGED.load(Ordering::Relaxed))
            }
            _ => used,
        };
        return max.saturating_sub(used);
    }
    machine_memory()
        .saturating_sub(used)
        .min(bloomgate::memory::allowance(false))
}

/// Whether a context's flags say its write replays data accepted once, which the per-key cap
/// (`bloom-memory-usage-limit`) never refuses: replicated from the master, loaded (an RDB file,
/// the AOF), or any write on a read-only replica (only its master writes there; a `RESTORE`
/// the master sends reaches `rdb_load` without its client, so the replica role is what tells).
pub fn replaying(flags: std::ffi::c_int) -> bool {
    let has = |flag: u32| flags & flag as std::ffi::c_int != 0;
    has(raw::REDISMODULE_CTX_FLAGS_REPLICATED)
        || has(raw::REDISMODULE_CTX_FLAGS_LOADING)
        || (has(raw::REDISMODULE_CTX_FLAGS_SLAVE) && has(raw::REDISMODULE_CTX_FLAGS_READONLY))
}

/// Records `bytes` just allocated for a value.
pub fn charge(bytes: u64) {
    CHARGED.fetch_add(bytes, Ordering::Relaxed);
    bloomgate::memory::charge(bytes);
}
