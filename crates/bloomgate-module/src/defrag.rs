//! Active defragmentation of the module's values (Redis' `activedefrag`): every data type's
//! `defrag` callback offers the value's small allocations to `RedisModule_DefragAlloc`, which
//! copies an allocation into a less fragmented slab when jemalloc says it is worth it and
//! returns NULL otherwise. What is offered is the key's boxed [`Value`], then the value's own
//! walk ([`Value::relocate`]): a boxed kind's struct, a chain's link array and each link's bits,
//! a cuckoo filter's sub-filter array and slots, a Top-K's buckets, heap and every heap item, a
//! t-digest's centroid arrays, a sketch's counters, a windowed filter's generations. Only
//! allocations of at most [`MOVABLE_MAX`](bloomgate::relocate::MOVABLE_MAX) bytes (jemalloc's small size classes) are offered:
//! larger arrays are page runs of their own, which jemalloc never moves and which do not
//! fragment. An array a copy-on-write clone still shares is not offered (it is counted as a
//! miss and as shared).
//!
//! **Resumable.** Redis hands a value whose `free_effort` exceeds
//! `active-defrag-max-scan-fields` to its "late" defrag with a cursor; there the callback stops
//! when `RedisModule_DefragShouldStop` says the cycle's time is up, or after [`SLICE`]
//! allocations, stores the walk's position with `RedisModule_DefragCursorSet` and returns 1;
//! Redis calls it again (in a later cycle) and it resumes from `RedisModule_DefragCursorGet`.
//! Without a cursor (a value with a small effort) one call moves everything.
//!
//! Every move is possible because the module's global allocator is Redis' own
//! (`RedisModule_Alloc`, see `alloc.rs`): each Rust allocation is one Redis allocation, and a
//! Rust value may be moved bitwise (nothing of ours points into itself).
//!
//! `INFO bf` reports `bf_defrag_hits` (allocations moved) and `bf_defrag_misses` (allocations
//! offered and left in place, or shared), the same per family (`bf_<family>_defrag_hits`,
//! `bf_<family>_defrag_misses` with the family `bf`, `cf`, `cms`, `topk`, `tdigest`, `wf` or
//! `cbf`), `bf_defrag_shared` (shared arrays not offered) and `bf_defrag_resumed` (calls that
//! paused and left a cursor).

use std::alloc::Layout;
use std::ffi::{c_int, c_ulong, c_void, CStr};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU64, Ordering};

use bloomgate::relocate::{Relocator, Walk};
use bloomgate_dialect::value::Kind;
use bloomgate_dialect::Value;
use redis_module::raw;

/// Most allocations one resumable call offers before it yields to Redis with a cursor (as
/// Redis' own late defrag checks its clock every 512 moves), so a value with thousands of
/// allocations never holds the defrag cycle past its time.
pub const SLICE: u64 = 512;

/// Which counter of a [`Counters`].
type Pick = fn(&Counters) -> &AtomicU64;

/// Counters of one kind of value.
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
}

/// Per kind, in [`Kind::ALL`] order.
static BY_KIND: [Counters; Kind::ALL.len()] = [const {
    Counters {
        hits: AtomicU64::new(0),
        misses: AtomicU64::new(0),
    }
}; Kind::ALL.len()];
/// Arrays not offered because a clone shared them (also counted as misses).
static SHARED: AtomicU64 = AtomicU64::new(0);
/// Calls that paused with a cursor to be resumed.
static RESUMED: AtomicU64 = AtomicU64::new(0);

fn counters(kind: Kind) -> &'static Counters {
    let i = Kind::ALL
        .iter()
        .position(|&k| k == kind)
        .expect("every kind");
    &BY_KIND[i]
}

/// Hands every defrag counter to `field` as `(name, value)`, the names as `INFO bf` shows them
/// without the module's `bf_` prefix: the totals, then each family's. Allocates nothing (so
/// reading `INFO bf` leaves `bf_allocations` still).
pub fn report(field: &mut dyn FnMut(&CStr, u64)) {
    let sum = |f: Pick, family: Option<&str>| -> u64 {
        Kind::ALL
            .iter()
            .filter(|k| family.is_none_or(|name| k.family() == name))
            .map(|&k| f(counters(k)).load(Ordering::Relaxed))
            .sum()
    };
    field(c"defrag_hits", sum(|c| &c.hits, None));
    field(c"defrag_misses", sum(|c| &c.misses, None));
    field(c"defrag_shared", SHARED.load(Ordering::Relaxed));
    field(c"defrag_resumed", RESUMED.load(Ordering::Relaxed));
    for (i, kind) in Kind::ALL.iter().enumerate() {
        let family = kind.family();
        if Kind::ALL[..i].iter().any(|k| k.family() == family) {
            continue; // reported with the first kind of its family
        }
        let per_family: [(&str, Pick); 2] = [
            ("_defrag_hits", |c| &c.hits),
            ("_defrag_misses", |c| &c.misses),
        ];
        for (suffix, counter) in per_family {
            let mut name = [0u8; 32];
            let len = family.len() + suffix.len();
            name[..family.len()].copy_from_slice(family.as_bytes());
            name[family.len()..len].copy_from_slice(suffix.as_bytes());
            let name = CStr::from_bytes_until_nul(&name).expect("a short name, NUL after it");
            field(name, sum(counter, Some(family)));
        }
    }
}

/// valkey-bloom 1.0's `bf_bloom_defrag_metrics` fields (without the module's `bf_` prefix):
/// the counters of `bloomfltr` values alone.
pub fn report_valkey(field: &mut dyn FnMut(&CStr, u64)) {
    let bloomfltr = counters(Kind::BloomValkey);
    field(c"bloom_defrag_hits", bloomfltr.hits.load(Ordering::Relaxed));
    field(
        c"bloom_defrag_misses",
        bloomfltr.misses.load(Ordering::Relaxed),
    );
}

/// Redis' defragmenter as a [`Relocator`], counting into one kind's counters.
struct RedisRelocator {
    ctx: *mut raw::RedisModuleDefragCtx,
    counters: &'static Counters,
    /// Whether this call may pause (Redis gave it a cursor).
    resumable: bool,
    /// Slots visited in this call.
    visited: u64,
}

impl RedisRelocator {
    /// Offers the allocation at `p` (any size: the key's value box): its new address, if moved.
    ///
    /// # Safety
    /// `p` is a live allocation of the module's allocator (Redis' own) that nothing else uses
    /// during the call and that is reached only through the returned address afterwards.
    unsafe fn offer(&mut self, p: *mut c_void) -> Option<NonNull<c_void>> {
        // SAFETY: `ctx` is the running callback's context; the caller's contract. Redis'
        // DefragAlloc frees `p` only when it returns a new copy of it.
        let moved = match unsafe { raw::RedisModule_DefragAlloc } {
            Some(defrag) => unsafe { defrag(self.ctx, p) },
            None => ptr::null_mut(),
        };
        let moved = NonNull::new(moved);
        match moved {
            Some(_) => self.counters.hits.fetch_add(1, Ordering::Relaxed),
            None => self.counters.misses.fetch_add(1, Ordering::Relaxed),
        };
        moved
    }
}

impl Relocator for RedisRelocator {
    unsafe fn relocate(&mut self, ptr: NonNull<u8>, _layout: Layout) -> Option<NonNull<u8>> {
        // SAFETY: the trait's contract (a live allocation of the global allocator, which is
        // Redis' allocator, used only through the returned address afterwards). DefragAlloc
        // makes the copy in the same jemalloc size class, so the layout (size and the class's
        // alignment, which the module allocator relies on) is kept.
        unsafe { self.offer(ptr.as_ptr().cast()) }.map(NonNull::cast)
    }

    fn shared(&mut self) {
        SHARED.fetch_add(1, Ordering::Relaxed);
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
    }

    fn should_stop(&mut self) -> bool {
        if !self.resumable {
            return false;
        }
        self.visited += 1;
        // SAFETY: `ctx` is the running callback's defrag context.
        self.visited >= SLICE
            || match unsafe { raw::RedisModule_DefragShouldStop } {
                Some(stop) => (unsafe { stop(self.ctx) }) != 0,
                None => false,
            }
    }
}

/// The `defrag` callback of every type: moves the key's boxed value (on a walk's first call),
/// then walks the value from the cursor Redis kept for it; 1 if it paused with a cursor.
pub unsafe extern "C" fn defrag(
    ctx: *mut raw::RedisModuleDefragCtx,
    _key: *mut raw::RedisModuleString,
    value: *mut *mut c_void,
) -> c_int {
    if value.is_null() || unsafe { *value }.is_null() {
        return 0;
    }
    let mut cursor: c_ulong = 0;
    // SAFETY: `ctx` is the live defrag context Redis passed; a call without a cursor (the
    // immediate path, whose return value Redis ignores) answers an error and must finish.
    let resumable = match unsafe { raw::RedisModule_DefragCursorGet } {
        Some(get) => (unsafe { get(ctx, &mut cursor) }) == raw::REDISMODULE_OK as c_int,
        None => false,
    };
    // SAFETY: Redis passes the key's value pointer (a `Box<Value>` made by `types::into_raw`)
    // on the main thread, with nothing else using the key.
    let kind = unsafe { &*(*value).cast::<Value>() }.kind();
    let mut relocator = RedisRelocator {
        ctx,
        counters: counters(kind),
        resumable,
        visited: 0,
    };
    if cursor == 0 {
        // SAFETY: as above; the new address is stored back in the key before any other use.
        if let Some(moved) = unsafe { relocator.offer(*value) } {
            unsafe { *value = moved.as_ptr() };
        }
    }
    // SAFETY: as above, at the value's current address.
    let value = unsafe { &mut *(*value).cast::<Value>() };
    let mut walk = Walk::new(&mut relocator, cursor as u64);
    value.relocate(&mut walk);
    match walk.finish() {
        Some(next) if resumable => {
            RESUMED.fetch_add(1, Ordering::Relaxed);
            // SAFETY: as for DefragCursorGet; Redis keeps the cursor for the next call.
            if let Some(set) = unsafe { raw::RedisModule_DefragCursorSet } {
                unsafe { set(ctx, next as c_ulong) };
            }
            1
        }
        _ => 0,
    }
}

/// The `free_effort` callback: the allocations freeing the value releases (the slots its
/// defrag walk visits, see [`Value::allocation_count`]) plus one per 16 MiB of its arrays, so
/// a large filter is freed in Redis' background thread (above `lazyfree-lazy-user-del`'s
/// threshold) and a value with many allocations is defragmented by the resumable path (above
/// `active-defrag-max-scan-fields`).
pub unsafe extern "C" fn free_effort(
    _key: *mut raw::RedisModuleString,
    value: *const c_void,
) -> usize {
    if value.is_null() {
        return 1;
    }
    // SAFETY: Redis passes the key's live value pointer (a `Box<Value>`, allocated mutable) on
    // the main thread with nothing else using it; counting walks it without changing it.
    let value = unsafe { &mut *value.cast::<Value>().cast_mut() };
    let arrays = value.memory() >> 24;
    (1 + value.allocation_count() + arrays)
        .try_into()
        .unwrap_or(usize::MAX)
}
