//! Moving a value's heap buffers to new addresses, for a host whose allocator compacts memory
//! (Redis' active defragmentation): the host implements [`Relocator`] (offer an allocation, get
//! a copy at a better address or nothing), and a value walks its buffers in a fixed order through
//! a [`Walk`], which rebuilds each `Vec`/`Box` that moved at its new address.
//!
//! - **What is offered.** Only allocations of at most [`MOVABLE_MAX`] bytes: jemalloc packs
//!   those into shared slabs, which fragment as neighbours are freed; larger ones get whole
//!   pages of their own, which jemalloc's defragmenter never moves, so offering them would only
//!   cost a lookup. Empty (unallocated) buffers are skipped too.
//! - **Resumable.** Every buffer is one *slot*, numbered in the walk's order. A walk starts at a
//!   slot (0, or where the previous one paused) and pauses after any slot at which the
//!   relocator says its time is up ([`Relocator::should_stop`]); [`Walk::finish`] then tells
//!   where to resume. A value that changed between two calls is still walked safely (every call
//!   reaches its buffers afresh); at worst some buffers are skipped until the next cycle.

use std::alloc::Layout;
use std::ptr::{self, NonNull};

/// Largest allocation worth offering: jemalloc's largest small size class with 4 KiB pages
/// (14 KiB). Larger allocations are page runs of their own, which do not fragment.
pub const MOVABLE_MAX: usize = 14 << 10;

/// What moves allocations: a host's allocator.
pub trait Relocator {
    /// Offers the live allocation at `ptr`, made by the global allocator with `layout`: the
    /// address of a new allocation of the same layout holding the same bytes (the old one is
    /// then freed), or `None` if it stays where it is.
    ///
    /// # Safety
    /// `ptr` is a live allocation of the global allocator made with `layout`, and nothing reads
    /// or writes through the old address once a new one is returned.
    unsafe fn relocate(&mut self, ptr: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>>;

    /// Reports an allocation that was not offered because another owner shares it (a
    /// copy-on-write snapshot still reading it): moving it would pull it from under that owner.
    fn shared(&mut self);

    /// Whether the walk should pause now (the host's time slice is spent); asked after every
    /// slot.
    fn should_stop(&mut self) -> bool;
}

/// One resumable pass over a value's allocations (see the module docs).
pub struct Walk<'a> {
    relocator: &'a mut dyn Relocator,
    /// First slot to visit.
    start: u64,
    /// The next slot's number.
    next: u64,
    paused: bool,
}

impl<'a> Walk<'a> {
    /// A walk that visits slots from `start` on (0 for a fresh pass).
    pub fn new(relocator: &'a mut dyn Relocator, start: u64) -> Self {
        Self {
            relocator,
            start,
            next: 0,
            paused: false,
        }
    }

    /// Where the next call resumes (`Some(slot)`) if the walk paused, `None` if it visited
    /// every slot.
    pub fn finish(self) -> Option<u64> {
        self.paused.then_some(self.next)
    }

    /// Slots walked over so far (visited or skipped): after a whole walk from slot 0, the
    /// value's number of slots.
    pub fn position(&self) -> u64 {
        self.next
    }

    /// Whether the walk has paused (every further slot is skipped).
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// Visits the next slot with `f`, unless it lies before the start or the walk has paused.
    pub fn slot(&mut self, f: impl FnOnce(&mut dyn Relocator)) {
        if self.paused {
            return;
        }
        let index = self.next;
        self.next += 1;
        if index < self.start {
            return;
        }
        f(&mut *self.relocator);
        if self.relocator.should_stop() {
            self.paused = true;
        }
    }

    /// A slot holding `v`'s buffer.
    pub fn vec<T>(&mut self, v: &mut Vec<T>) {
        self.slot(|r| relocate_vec(r, v));
    }

    /// A slot holding `b`'s allocation.
    pub fn boxed<T>(&mut self, b: &mut Box<T>) {
        self.slot(|r| relocate_box(r, b));
    }

    /// A slot holding `b`'s buffer.
    pub fn boxed_slice<T>(&mut self, b: &mut Box<[T]>) {
        self.slot(|r| relocate_boxed_slice(r, b));
    }
}

/// A [`Relocator`] that moves nothing and never stops: walking with it counts slots.
#[derive(Clone, Copy, Debug, Default)]
pub struct Still;

impl Relocator for Still {
    unsafe fn relocate(&mut self, _ptr: NonNull<u8>, _layout: Layout) -> Option<NonNull<u8>> {
        None
    }

    fn shared(&mut self) {}

    fn should_stop(&mut self) -> bool {
        false
    }
}

/// Offers the allocation at `ptr` if its layout is worth moving; its new address, if it moved.
///
/// # Safety
/// As [`Relocator::relocate`].
pub unsafe fn offer<T>(r: &mut dyn Relocator, ptr: *mut T, layout: Layout) -> Option<*mut T> {
    if layout.size() == 0 || layout.size() > MOVABLE_MAX {
        return None;
    }
    let ptr = NonNull::new(ptr.cast::<u8>())?;
    // SAFETY: the caller's contract, passed on.
    unsafe { r.relocate(ptr, layout) }.map(|p| p.as_ptr().cast())
}

/// Offers `v`'s buffer; if it moved, `v` is rebuilt over the new one (same length, capacity).
pub fn relocate_vec<T>(r: &mut dyn Relocator, v: &mut Vec<T>) {
    let Ok(layout) = Layout::array::<T>(v.capacity()) else {
        return;
    };
    let (len, cap) = (v.len(), v.capacity());
    // SAFETY: a Vec of non-zero size owns one global-allocator allocation of exactly
    // `Layout::array::<T>(capacity)`; `&mut v` keeps every other access out until it is
    // rebuilt below.
    if let Some(new) = unsafe { offer(r, v.as_mut_ptr(), layout) } {
        // SAFETY: `new` holds the old buffer's bytes (its `len` initialised elements) in an
        // allocation of the same layout; the old buffer was freed by the relocator, so the old
        // Vec is overwritten without being dropped.
        unsafe { ptr::write(v, Vec::from_raw_parts(new, len, cap)) };
    }
}

/// Offers `b`'s allocation; if it moved, `b` is rebuilt over the new one.
pub fn relocate_box<T>(r: &mut dyn Relocator, b: &mut Box<T>) {
    let p: *mut T = &mut **b;
    // SAFETY: a Box of a non-zero-size `T` owns one global-allocator allocation of
    // `Layout::new::<T>()`; `&mut b` keeps every other access out until it is rebuilt.
    if let Some(new) = unsafe { offer(r, p, Layout::new::<T>()) } {
        // SAFETY: `new` holds the value's bytes in an allocation of the same layout; the old
        // one is freed, so the old Box is overwritten without being dropped.
        unsafe { ptr::write(b, Box::from_raw(new)) };
    }
}

/// Offers `b`'s buffer; if it moved, `b` is rebuilt over the new one (same length).
pub fn relocate_boxed_slice<T>(r: &mut dyn Relocator, b: &mut Box<[T]>) {
    let len = b.len();
    let Ok(layout) = Layout::array::<T>(len) else {
        return;
    };
    // SAFETY: a boxed slice of non-zero size owns one global-allocator allocation of
    // `Layout::array::<T>(len)`; `&mut b` keeps every other access out until it is rebuilt.
    if let Some(new) = unsafe { offer(r, b.as_mut_ptr(), layout) } {
        // SAFETY: as in `relocate_vec`: the same `len` elements in the same layout, the old
        // allocation freed and not dropped again.
        unsafe { ptr::write(b, Box::from_raw(ptr::slice_from_raw_parts_mut(new, len))) };
    }
}

/// A [`Relocator`] for tests: copies every allocation it is offered into a fresh one and
/// poisons and frees the old, so a buffer read through a stale address shows up as wrong
/// contents; counts moves and shared buffers, and pauses every `stop_every` slots.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct CopyingRelocator {
    /// Allocations moved.
    pub moved: u64,
    /// Shared allocations reported.
    pub shared: u64,
    /// Pause after this many slots (0: never).
    pub stop_every: u64,
    /// Slots seen since the last pause.
    pub since_stop: u64,
}

impl Relocator for CopyingRelocator {
    unsafe fn relocate(&mut self, ptr: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>> {
        // SAFETY: a non-zero layout (`offer` skips empty ones); the old allocation is live
        // with `layout` (the caller's contract), copied whole, poisoned, then freed.
        unsafe {
            let new = NonNull::new(std::alloc::alloc(layout))?;
            ptr::copy_nonoverlapping(ptr.as_ptr(), new.as_ptr(), layout.size());
            ptr::write_bytes(ptr.as_ptr(), 0xA5, layout.size());
            std::alloc::dealloc(ptr.as_ptr(), layout);
            self.moved += 1;
            Some(new)
        }
    }

    fn shared(&mut self) {
        self.shared += 1;
    }

    fn should_stop(&mut self) -> bool {
        self.since_stop += 1;
        if self.stop_every != 0 && self.since_stop >= self.stop_every {
            self.since_stop = 0;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vecs_boxes_and_slices_move_and_keep_their_contents() {
        let mut r = CopyingRelocator::default();
        let mut v: Vec<u64> = (0..100).collect();
        v.reserve(7);
        let cap = v.capacity();
        let mut b = Box::new([7u32; 9]);
        let mut s: Box<[u16]> = (0..50).collect();
        let mut big = vec![1u8; MOVABLE_MAX + 1];
        let mut empty: Vec<u64> = Vec::new();
        let mut walk = Walk::new(&mut r, 0);
        walk.vec(&mut v);
        walk.boxed(&mut b);
        walk.boxed_slice(&mut s);
        walk.vec(&mut big);
        walk.vec(&mut empty);
        assert_eq!(walk.finish(), None);
        assert_eq!(r.moved, 3, "the large and the empty buffer are not offered");
        assert_eq!(v, (0..100).collect::<Vec<u64>>());
        assert_eq!(v.capacity(), cap);
        assert_eq!(*b, [7u32; 9]);
        assert_eq!(&*s, &(0..50).collect::<Vec<u16>>()[..]);
        assert!(big.iter().all(|&x| x == 1));
        v.push(1); // the rebuilt Vec still owns its allocation
        drop((v, b, s, big, empty));
    }

    #[test]
    fn a_walk_pauses_and_resumes_where_it_stopped() {
        let mut bufs: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 20]).collect();
        let mut r = CopyingRelocator {
            stop_every: 3,
            ..Default::default()
        };
        let mut start = 0;
        let mut calls = 0;
        loop {
            calls += 1;
            let mut walk = Walk::new(&mut r, start);
            for b in &mut bufs {
                walk.vec(b);
            }
            match walk.finish() {
                Some(next) => start = next,
                None => break,
            }
        }
        assert_eq!(r.moved, 10, "every buffer moved exactly once");
        assert!(calls >= 4);
        for (i, b) in bufs.iter().enumerate() {
            assert_eq!(b, &vec![i as u8; 20]);
        }
    }
}
