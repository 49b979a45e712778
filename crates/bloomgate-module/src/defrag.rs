//! Active defragmentation of the module's values (Redis' `activedefrag`): every data type's
//! `defrag` callback moves the value's small allocations — the key's boxed [`Value`] and, for
//! the boxed kinds, the value struct it points to — through `RedisModule_DefragAlloc`, which
//! copies an allocation into a less fragmented slab when jemalloc says it is worth it and returns
//! NULL otherwise. Large arrays (a filter's bits, a sketch's counters) are not moved: jemalloc
//! gives them pages of their own, which do not fragment. A value has at most two allocations to
//! move, so one call always finishes it (no cursor is needed).
//!
//! Every move is possible because the module's global allocator is Redis' own
//! (`RedisModule_Alloc`, see `alloc.rs`): each Rust allocation is one Redis allocation, and a
//! Rust value may be moved bitwise (nothing of ours points into itself).
//!
//! `INFO bf` reports `bf_defrag_hits` (allocations moved) and `bf_defrag_misses` (allocations
//! jemalloc left where they were).

use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

use bloomgate_dialect::Value;
use redis_module::raw;

/// Allocations moved by active defragmentation.
static HITS: AtomicU64 = AtomicU64::new(0);
/// Allocations offered to active defragmentation and left in place.
static MISSES: AtomicU64 = AtomicU64::new(0);

/// Allocations moved since the module loaded.
pub fn hits() -> u64 {
    HITS.load(Ordering::Relaxed)
}

/// Allocations left in place since the module loaded.
pub fn misses() -> u64 {
    MISSES.load(Ordering::Relaxed)
}

/// Offers the allocation at `p` to Redis' defragmenter: its new address, or `p` if it stays.
///
/// # Safety
/// `ctx` is the live defrag context of the running callback; `p` is a live allocation made by
/// the module's allocator (Redis' own) that nothing else references during the call.
unsafe fn offer<T>(ctx: *mut raw::RedisModuleDefragCtx, p: *mut T) -> *mut T {
    // SAFETY: the caller's contract; DefragAlloc frees `p` only when it returns a new copy.
    let moved = match unsafe { raw::RedisModule_DefragAlloc } {
        Some(defrag) => unsafe { defrag(ctx, p.cast()) },
        None => ptr::null_mut(),
    };
    if moved.is_null() {
        MISSES.fetch_add(1, Ordering::Relaxed);
        p
    } else {
        HITS.fetch_add(1, Ordering::Relaxed);
        moved.cast()
    }
}

/// Moves the allocation behind `b`, if the defragmenter wants to.
///
/// # Safety
/// As [`offer`]: `ctx` is live and `b`'s allocation is referenced only through `b`.
unsafe fn offer_box<T>(ctx: *mut raw::RedisModuleDefragCtx, b: &mut Box<T>) {
    // SAFETY: `b` is read out and written back with no use in between; the box's allocation
    // came from the module's allocator, and `offer` returns a live copy of it (or it).
    unsafe {
        let p = Box::into_raw(ptr::read(b));
        ptr::write(b, Box::from_raw(offer(ctx, p)));
    }
}

/// The `defrag` callback of every type: moves the key's boxed value, then its value struct.
pub unsafe extern "C" fn defrag(
    ctx: *mut raw::RedisModuleDefragCtx,
    _key: *mut raw::RedisModuleString,
    value: *mut *mut c_void,
) -> c_int {
    if value.is_null() || unsafe { *value }.is_null() {
        return 0;
    }
    // SAFETY: Redis passes the key's value pointer (a `Box<Value>` made by `types::into_raw`)
    // on the main thread, with nothing else using the key; the new address is stored back.
    unsafe {
        let moved = offer(ctx, (*value).cast::<Value>());
        *value = moved.cast();
        match &mut *moved {
            Value::Bloom(_) => {}
            Value::Cuckoo(b) => offer_box(ctx, b),
            Value::Windowed(b) => offer_box(ctx, b),
            Value::TDigest(b) => offer_box(ctx, b),
            Value::CountMin(b) => offer_box(ctx, b),
            Value::TopK(b) => offer_box(ctx, b),
            Value::Counting(b) => offer_box(ctx, b),
            Value::BloomBlocked(b) => offer_box(ctx, b),
        }
    }
    0
}

/// The `free_effort` callback: about how many allocations freeing the value releases (its value
/// struct and its arrays, counted per 16 MiB dump chunk); above `lazyfree-lazy-user-del`'s
/// threshold Redis frees the value in its background thread.
pub unsafe extern "C" fn free_effort(
    _key: *mut raw::RedisModuleString,
    value: *const c_void,
) -> usize {
    if value.is_null() {
        return 1;
    }
    // SAFETY: Redis passes the key's live value pointer (a `Box<Value>`).
    let value = unsafe { &*value.cast::<Value>() };
    1 + value.dump_layout().1.len()
}
