//! The module's global allocator: Redis' own (so `used_memory` and `maxmemory` see every byte
//! the module holds), with zeroed allocations from `RedisModule_Calloc` — calloc semantics, so a
//! large filter's pages stay unresident until written, as RedisBloom's do — and a count of
//! allocations, shown in `INFO bf` (`bf_allocations`), by which a test proves the hot commands
//! allocate nothing, and the active defragmentation counters (`bf_defrag_hits`,
//! `bf_defrag_misses` and the others `defrag.rs` reports).

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};

use redis_module::alloc::RedisAlloc;
use redis_module::raw;

/// Allocations (and reallocations) the module has made since it loaded.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// Redis' allocator, counted, with `alloc_zeroed` through `RedisModule_Calloc`.
pub struct ModuleAlloc;

/// The size Redis is asked for: rounded up to the alignment, as `RedisAlloc` does (jemalloc
/// aligns each size class to its size's largest power-of-two divisor).
fn aligned_size(layout: Layout) -> usize {
    (layout.size() + layout.align() - 1) & !(layout.align() - 1)
}

// SAFETY: every method delegates to Redis' allocator (jemalloc), which returns memory aligned
// for `aligned_size`, as `RedisAlloc` relies on; a null return reports failure.
unsafe impl GlobalAlloc for ModuleAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { RedisAlloc.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: Redis' calloc, available once the module API is initialised (before any
        // allocation the module makes).
        match unsafe { raw::RedisModule_Calloc } {
            Some(calloc) => unsafe { calloc(1, aligned_size(layout)).cast() },
            // SAFETY: the caller's contract, passed on.
            None => unsafe { RedisAlloc.alloc_zeroed(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator.
        unsafe { RedisAlloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        let new = Layout::from_size_align(new_size, layout.align()).expect("valid layout");
        // jemalloc keeps the alignment of sizes rounded as `aligned_size` rounds them.
        match unsafe { raw::RedisModule_Realloc } {
            // SAFETY: `ptr` came from Redis' allocator through this one.
            Some(realloc) => unsafe { realloc(ptr.cast(), aligned_size(new)).cast() },
            None => {
                // SAFETY: the default: allocate, copy, free.
                let out = unsafe { self.alloc(new) };
                if !out.is_null() {
                    // SAFETY: both blocks hold at least the smaller size.
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, out, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                out
            }
        }
    }
}

/// `INFO bf`: the allocation count and the active defragmentation counters (see `defrag.rs`).
pub extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    // SAFETY: Redis calls this with a live info context; the strings are NUL-terminated.
    unsafe {
        if let (Some(section), Some(field)) = (
            raw::RedisModule_InfoAddSection,
            raw::RedisModule_InfoAddFieldULongLong,
        ) {
            section(ctx, c"".as_ptr());
            field(
                ctx,
                c"allocations".as_ptr(),
                ALLOCATIONS.load(Ordering::Relaxed),
            );
            crate::defrag::report(&mut |name, value| {
                field(ctx, name.as_ptr(), value);
            });
        }
    }
}

/// Replaces the info callback the module macro registered with [`info`].
pub fn register_info(ctx: &redis_module::Context) {
    // SAFETY: OnLoad context; `info` matches `RedisModuleInfoFunc`.
    unsafe {
        if let Some(register) = raw::RedisModule_RegisterInfoFunc {
            register(ctx.ctx, Some(info));
        }
    }
}
