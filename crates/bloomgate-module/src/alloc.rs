//! The module's global allocator: Redis' own (so `used_memory` and `maxmemory` see every byte
//! the module holds), through its fallible entry points — `RedisModule_TryAlloc`,
//! `RedisModule_TryCalloc`, `RedisModule_TryRealloc` — so an allocation Redis cannot make is a
//! null the caller turns into an error reply, where the plain ones would abort the server.
//! Zeroed allocations keep calloc's semantics: a large filter's pages stay unresident until
//! written, as RedisBloom's do (on Redis 7.0, which has `TryAlloc` but no `TryCalloc`, the pages
//! of a large allocation are zeroed by handing them back to the kernel, which also leaves them
//! unresident). It counts allocations, shown in `INFO bf` (`bf_allocations`), by which a test
//! proves the hot commands allocate nothing, and the active defragmentation counters
//! (`bf_defrag_hits`, `bf_defrag_misses` and the others `defrag.rs` reports).

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};

use bloomgate_dialect::types::sbchain::valkey::{valkey_metrics, ValkeyFlavour};
use redis_module::alloc::RedisAlloc;
use redis_module::raw;

/// Allocations (and reallocations) the module has made since it loaded.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// Redis' allocator, counted, fallible where Redis allows it.
pub struct ModuleAlloc;

/// The size Redis is asked for: rounded up to the alignment, as `RedisAlloc` does (jemalloc
/// aligns each size class to its size's largest power-of-two divisor).
fn aligned_size(layout: Layout) -> usize {
    (layout.size() + layout.align() - 1) & !(layout.align() - 1)
}

/// Allocations from this size on are zeroed, when Redis has no `TryCalloc`, by `madvise`
/// (`MADV_DONTNEED`) of their whole pages instead of writing zeros over them: Redis' jemalloc
/// maps large allocations privately and anonymously, so a page given back reads as zeros and
/// takes no memory until written.
const ZERO_BY_MADVISE: usize = 1 << 20;

/// Zeroes `size` bytes at `ptr` without making its whole pages resident (see
/// [`ZERO_BY_MADVISE`]); the partial pages at either end are written.
///
/// # Safety
/// `ptr..ptr + size` is a live allocation of this allocator, owned by the caller.
unsafe fn zero(ptr: *mut u8, size: usize) {
    #[cfg(target_os = "linux")]
    if size >= ZERO_BY_MADVISE {
        const PAGE: usize = 4096;
        let start = (ptr as usize).next_multiple_of(PAGE);
        let end = (ptr as usize + size) / PAGE * PAGE;
        // SAFETY: [start, end) lies inside the caller's allocation and is page aligned; on a
        // private anonymous mapping MADV_DONTNEED makes the pages read as zeros. If the kernel
        // refuses, the range is written instead.
        let given_back =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) }
                == 0;
        if given_back {
            // SAFETY: the head and tail outside the pages given back, inside the allocation.
            unsafe {
                std::ptr::write_bytes(ptr, 0, start - ptr as usize);
                std::ptr::write_bytes(end as *mut u8, 0, ptr as usize + size - end);
            }
            return;
        }
    }
    // SAFETY: the caller's allocation.
    unsafe { std::ptr::write_bytes(ptr, 0, size) };
}

// SAFETY: every method delegates to Redis' allocator (jemalloc), which returns memory aligned
// for `aligned_size`, as `RedisAlloc` relies on; a null return reports failure.
unsafe impl GlobalAlloc for ModuleAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: Redis' allocator, available once the module API is initialised (before any
        // allocation the module makes); otherwise the caller's contract, passed on.
        match unsafe { raw::RedisModule_TryAlloc } {
            Some(try_alloc) => unsafe { try_alloc(aligned_size(layout)).cast() },
            None => unsafe { RedisAlloc.alloc(layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`. Redis 7.4+ and Valkey 8 have TryCalloc; Redis 7.0 only
        // TryAlloc, whose memory is zeroed here.
        unsafe {
            if let Some(try_calloc) = raw::RedisModule_TryCalloc {
                ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
                return try_calloc(1, aligned_size(layout)).cast();
            }
            let ptr = self.alloc(layout);
            if !ptr.is_null() {
                zero(ptr, layout.size());
            }
            ptr
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
        match unsafe { raw::RedisModule_TryRealloc } {
            // SAFETY: `ptr` came from Redis' allocator through this one.
            Some(realloc) => unsafe { realloc(ptr.cast(), aligned_size(new)).cast() },
            None => {
                // SAFETY: the default: allocate, copy, free (the old block stays if the new
                // one cannot be had).
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

/// `INFO bf`: the allocation count and the active defragmentation counters (see `defrag.rs`);
/// in valkey-bloom 1.0's dialect also its sections `bf_bloom_core_metrics` (the sums over the
/// live `bloomfltr` objects) and `bf_bloom_defrag_metrics`.
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
            if crate::settings::read().dialect.valkey() == Some(ValkeyFlavour::V1_0) {
                let m = valkey_metrics();
                section(ctx, c"bloom_core_metrics".as_ptr());
                let core = [
                    (c"bloom_total_memory_bytes", m.total_memory_bytes),
                    (c"bloom_num_objects", m.num_objects),
                    (c"bloom_num_filters_across_objects", m.num_filters),
                    (c"bloom_num_items_across_objects", m.num_items),
                    (c"bloom_capacity_across_objects", m.capacity),
                ];
                for (name, value) in core {
                    field(ctx, name.as_ptr(), value);
                }
                section(ctx, c"bloom_defrag_metrics".as_ptr());
                crate::defrag::report_valkey(&mut |name, value| {
                    field(ctx, name.as_ptr(), value);
                });
            }
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
