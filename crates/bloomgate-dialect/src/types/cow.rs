//! Copy-on-write storage for the large arrays inside dialect values (Bloom link bits, cuckoo
//! slots), so a host can snapshot a value without copying it, and resident memory follows
//! what is written.
//!
//! - **One lazily zeroed allocation.** The array is a single zeroed allocation
//!   (`alloc_zeroed`: calloc semantics, also through Redis' allocator in the module), so the
//!   operating system maps its pages on first touch: `BF.RESERVE k 0.01 100000000` makes 114 MB
//!   of address space and almost no resident memory until items go in, as RedisBloom's do.
//!   Memory accounting still reports the full logical size.
//! - **Pages copied on write.** Cloning an array (a snapshot being written) shares that
//!   allocation. While it is shared, a write copies only the page it touches — at most
//!   [`PAGE_BYTES`], as the kernel's copy-on-write after Redis' fork does — into an overlay
//!   that reads consult first. Once the clone is gone, the next write folds the overlay back
//!   and frees it, so an unshared array is again one allocation and reads and writes index it
//!   directly ([`CowArray::as_slice`], [`CowArray::as_mut_slice`]).
//!
//! The array is addressed in rows of a fixed length the caller passes (1 word for a Bloom bit
//! array, one bucket of `bucket_size` slots for a cuckoo filter): a row never crosses a page.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

use bloomgate::relocate::{offer, Relocator, Walk, MOVABLE_MAX};

/// Bytes of pages copied because a clone still shared them, since the process started.
static COPIED_BYTES: AtomicU64 = AtomicU64::new(0);

/// Bytes of pages copied by writes because a clone (a snapshot) shared them: what
/// copy-on-write cost in memory (Redis reports the same as `current_cow_size`).
pub fn copied_bytes() -> u64 {
    COPIED_BYTES.load(Ordering::Relaxed)
}

/// Largest unit a write copies while a clone shares the array: the kernel's page, so a write
/// during a snapshot costs what it costs in Redis after its fork.
pub const PAGE_BYTES: usize = 4 << 10;

/// Bytes an allocation of `n` bytes really takes in jemalloc (the allocator of Redis, which
/// hosts the module, and of `bloomgate serve`): small size classes — multiples of 16 up to 128,
/// then four classes per doubling up to 14 KiB — and whole 4 KiB pages above. Used to report
/// memory as the allocator sees it, not as requested.
pub fn allocation_size(n: u64) -> u64 {
    const SMALL_MAX: u64 = 14 << 10;
    const PAGE: u64 = 4 << 10;
    match n {
        0 => 0,
        1..=8 => 8,
        9..=128 => n.div_ceil(16) * 16,
        129..=SMALL_MAX => {
            let step = 1u64 << ((n - 1).ilog2() - 2);
            n.div_ceil(step) * step
        }
        _ => n.div_ceil(PAGE) * PAGE,
    }
}

/// A zeroed heap array of `len` plain integers, from `alloc_zeroed` (so large ones stay
/// unresident until written). Shared between clones through an `Arc`; written only through
/// [`CowArray`] while that `Arc` is unique.
struct Buf<T> {
    ptr: NonNull<T>,
    len: usize,
}

// SAFETY: `Buf` owns its elements like a `Box<[T]>` does; `CowArray` hands out `&[T]` only
// while no `&mut [T]` exists (writes need `&mut CowArray` and a unique `Arc`).
unsafe impl<T: Send> Send for Buf<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Buf<T> {}

impl<T: Copy + Default> Buf<T> {
    /// `len` zeroed elements; `None` if they cannot be allocated (never aborts). `T` is a
    /// plain integer (`u8`, `u64`), for which all-zero bytes are the default value.
    fn zeroed(len: usize) -> Option<Self> {
        let layout = Layout::array::<T>(len).ok()?;
        if layout.size() == 0 {
            return Some(Self {
                ptr: NonNull::dangling(),
                len,
            });
        }
        // SAFETY: a non-zero size; the result is checked for null.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        Some(Self {
            ptr: NonNull::new(ptr.cast())?,
            len,
        })
    }

    fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialized elements (zeroed, then written) for the life of
        // `self`; writes happen only through `as_mut_slice`/`CowArray::base_mut`, which need
        // exclusive access.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`, with `&mut self` excluding every other access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Offers the allocation to `r`; keeps its new address if it moved.
    fn relocate(&mut self, r: &mut dyn Relocator) {
        let Ok(layout) = Layout::array::<T>(self.len) else {
            return;
        };
        // SAFETY: `ptr` is the allocation `zeroed` made with exactly this layout (a zero-size
        // one is dangling, and `offer` skips it), reached only through `&mut self` here.
        if let Some(new) = unsafe { offer(r, self.ptr.as_ptr(), layout) } {
            // The new allocation has the same layout and bytes; `Drop` frees it with that layout.
            self.ptr = NonNull::new(new).expect("a relocated allocation is not null");
        }
    }
}

impl<T> Drop for Buf<T> {
    fn drop(&mut self) {
        let layout = Layout::array::<T>(self.len).expect("allocated with this layout");
        if layout.size() != 0 {
            // SAFETY: allocated by `Buf::zeroed` with this layout.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), layout) };
        }
    }
}

/// Pages this array wrote while its allocation was shared; they replace the allocation's.
#[derive(Clone)]
struct Overlay<T> {
    pages: Box<[Option<Box<[T]>>]>,
    /// Pages present.
    count: usize,
}

/// An array of `T` (a plain integer) in one lazily zeroed allocation, shared copy-on-write
/// between clones at page granularity.
pub struct CowArray<T> {
    base: Arc<Buf<T>>,
    overlay: Option<Box<Overlay<T>>>,
    /// Rows per page, as a power of two.
    page_shift: u8,
    /// Elements per row (u32 keeps the array 24 bytes: a Bloom link stays 64).
    row_len: u32,
}

impl<T: Copy + Default> Clone for CowArray<T> {
    /// Shares the allocation (and copies any overlay pages, which exist only while an earlier
    /// clone is alive).
    fn clone(&self) -> Self {
        Self {
            base: Arc::clone(&self.base),
            overlay: self.overlay.clone(),
            page_shift: self.page_shift,
            row_len: self.row_len,
        }
    }
}

impl<T: Copy + Default + PartialEq> PartialEq for CowArray<T> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.pieces().flatten().eq(other.pieces().flatten())
    }
}

impl<T: Copy + Default + Eq> Eq for CowArray<T> {}

impl<T: Copy + Default> std::fmt::Debug for CowArray<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CowArray")
            .field("len", &self.len())
            .field("shared", &(Arc::strong_count(&self.base) > 1))
            .field(
                "copied_pages",
                &self.overlay.as_ref().map_or(0, |o| o.count),
            )
            .finish()
    }
}

/// Where elements `offset..end` lie in pages of `page_elems` elements, page by page:
/// `(page, the elements' range within that page, their range within offset..end)`.
fn spans(
    page_elems: usize,
    offset: usize,
    end: usize,
) -> impl Iterator<Item = (usize, std::ops::Range<usize>, std::ops::Range<usize>)> {
    let mut at = offset;
    std::iter::from_fn(move || {
        (at < end).then(|| {
            let p = at / page_elems;
            let start = p * page_elems;
            let to = end.min(start + page_elems);
            let span = (p, at - start..to - start, at - offset..to - offset);
            at = to;
            span
        })
    })
}

impl<T: Copy + Default> CowArray<T> {
    /// `rows × row_len` zeroed elements; `None` if that does not fit in memory.
    pub fn try_zeroed(rows: usize, row_len: usize) -> Option<Self> {
        let row_len = u32::try_from(row_len.max(1)).ok()?;
        let row_bytes = (row_len as usize).checked_mul(size_of::<T>())?;
        let total = rows.checked_mul(row_len as usize)?;
        // Most rows a page may hold: the largest power of two within PAGE_BYTES.
        let per_page = (PAGE_BYTES / row_bytes.max(1)).max(1);
        Some(Self {
            base: Arc::new(Buf::zeroed(total)?),
            overlay: None,
            page_shift: per_page.ilog2() as u8,
            row_len,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.base.len
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Elements per page.
    fn page_elems(&self) -> usize {
        (1usize << self.page_shift) * self.row_len as usize
    }

    /// Number of pages (the last may be shorter).
    fn page_count(&self) -> usize {
        self.len().div_ceil(self.page_elems())
    }

    /// Element range of page `p`.
    fn page_range(&self, p: usize) -> std::ops::Range<usize> {
        let start = p * self.page_elems();
        start..(start + self.page_elems()).min(self.len())
    }

    /// The whole array as one slice, when no page has been copied (no clone has shared it
    /// since it was last written alone): the fast path of reads.
    #[inline]
    pub fn as_slice(&self) -> Option<&[T]> {
        match self.overlay {
            None => Some(self.base.as_slice()),
            Some(_) => None,
        }
    }

    /// The whole array, writable, when no clone shares it (any copied pages are folded back
    /// first): the fast path of writes.
    #[inline]
    pub fn as_mut_slice(&mut self) -> Option<&mut [T]> {
        if !self.unique() {
            return None;
        }
        if self.overlay.is_some() {
            self.fold();
        }
        Some(self.base_mut())
    }

    /// Whether no clone shares the allocation. Clones never make `Weak` references, so a
    /// strong count of 1 seen through `&mut self` stays 1; the fence orders this thread's
    /// writes after the reads of the clone whose drop made it 1 (its decrement is a release).
    #[inline]
    fn unique(&mut self) -> bool {
        if Arc::strong_count(&self.base) == 1 {
            fence(Ordering::Acquire);
            true
        } else {
            false
        }
    }

    /// The allocation, writable; the caller has checked [`CowArray::unique`].
    #[inline]
    fn base_mut(&mut self) -> &mut [T] {
        debug_assert_eq!(Arc::strong_count(&self.base), 1);
        let buf = Arc::as_ptr(&self.base);
        // SAFETY: this is the only `Arc` of the allocation (`unique`), and `&mut self` excludes
        // every other borrow of it, so no other reference to the elements exists; the elements
        // live behind `Buf::ptr`, a raw pointer from `alloc_zeroed`, not inside the `Arc`.
        unsafe { std::slice::from_raw_parts_mut((*buf).ptr.as_ptr(), (*buf).len) }
    }

    /// Writes copied pages back into the allocation, which no clone shares any more, and frees
    /// them.
    fn fold(&mut self) {
        let Some(overlay) = self.overlay.take() else {
            return;
        };
        for (p, page) in overlay.pages.iter().enumerate() {
            if let Some(page) = page {
                let range = self.page_range(p);
                self.base_mut()[range].copy_from_slice(page);
            }
        }
    }

    /// Page `p`, writable: copied first if a clone shares the allocation.
    fn page_mut(&mut self, p: usize) -> &mut [T] {
        if self.unique() {
            self.fold();
            let range = self.page_range(p);
            return &mut self.base_mut()[range];
        }
        let range = self.page_range(p);
        let pages = self.page_count();
        let count = self
            .overlay
            .get_or_insert_with(|| {
                Box::new(Overlay {
                    pages: vec![None; pages].into_boxed_slice(),
                    count: 0,
                })
            })
            .count;
        if count >= pages / 2 && count >= 16 {
            // Shared for long (a copy kept as a value of its own, not a snapshot that ends):
            // stop paying for the overlay and own a private copy.
            if let Some(copy) = self.deep_copy() {
                *self = copy;
                let range = self.page_range(p);
                return &mut self.base_mut()[range];
            }
        }
        let overlay = self.overlay.as_mut().expect("made above");
        let base = &self.base;
        let slot = &mut overlay.pages[p];
        if slot.is_none() {
            COPIED_BYTES.fetch_add((range.len() * size_of::<T>()) as u64, Ordering::Relaxed);
            *slot = Some(base.as_slice()[range].into());
            overlay.count += 1;
        }
        slot.as_mut().expect("just copied")
    }

    /// Page `p` as reads see it.
    fn page(&self, p: usize) -> &[T] {
        if let Some(page) = self.overlay.as_ref().and_then(|o| o.pages[p].as_deref()) {
            return page;
        }
        &self.base.as_slice()[self.page_range(p)]
    }

    /// The array in order, as slices (one while no page is copied, else page by page).
    pub fn pieces(&self) -> impl Iterator<Item = &[T]> + '_ {
        let pages = match self.overlay {
            None => 0..0,
            Some(_) => 0..self.page_count(),
        };
        self.as_slice()
            .into_iter()
            .chain(pages.map(|p| self.page(p)))
    }

    /// Row `r` of `row_len` elements (the length the array was built with).
    #[inline]
    pub fn row(&self, r: usize, row_len: usize) -> &[T] {
        let at = r * row_len;
        if let Some(overlay) = &self.overlay {
            let p = r >> self.page_shift;
            if let Some(page) = &overlay.pages[p] {
                let at = at - p * self.page_elems();
                return &page[at..at + row_len];
            }
        }
        &self.base.as_slice()[at..at + row_len]
    }

    /// Row `r`, mutably: its page is copied first if a clone still shares it.
    #[inline]
    pub fn row_mut(&mut self, r: usize, row_len: usize) -> &mut [T] {
        let at = r * row_len;
        if self.overlay.is_none() && self.unique() {
            return &mut self.base_mut()[at..at + row_len];
        }
        let p = r >> self.page_shift;
        let start = p * self.page_elems();
        &mut self.page_mut(p)[at - start..at - start + row_len]
    }

    /// Copies `len` elements from `offset` (across pages); `None` if out of range.
    pub fn read(&self, offset: usize, len: usize) -> Option<Vec<T>> {
        let mut out = Vec::with_capacity(len);
        self.visit(offset, len, |piece| out.extend_from_slice(piece))
            .then_some(out)
    }

    /// Overwrites elements from `offset` with `data` (copying shared pages); false (and
    /// nothing changed) if out of range.
    pub fn write(&mut self, offset: usize, data: &[T]) -> bool {
        let Some(end) = self.end_of(offset, data.len()) else {
            return false;
        };
        if let Some(all) = self.as_mut_slice() {
            all[offset..end].copy_from_slice(data);
            return true;
        }
        for (p, in_page, in_data) in spans(self.page_elems(), offset, end) {
            self.page_mut(p)[in_page].copy_from_slice(&data[in_data]);
        }
        true
    }

    /// The end of elements `offset..offset + len`, if they are all in the array.
    fn end_of(&self, offset: usize, len: usize) -> Option<usize> {
        offset.checked_add(len).filter(|&end| end <= self.len())
    }

    /// Offers the array's buffer to a host that moves allocations (one slot; see
    /// [`bloomgate::relocate`]). A buffer a clone still shares (a snapshot being written), or
    /// that has copied pages, is reported as shared and stays; the small shared handle around
    /// it is not offered (an `Arc` cannot be rebuilt at a new address).
    pub fn relocate(&mut self, walk: &mut Walk<'_>) {
        let bytes = self.len().saturating_mul(size_of::<T>());
        if bytes == 0 || bytes > MOVABLE_MAX {
            return;
        }
        walk.slot(|r| {
            if self.overlay.is_some() {
                return r.shared();
            }
            match Arc::get_mut(&mut self.base) {
                Some(buf) => buf.relocate(r),
                None => r.shared(),
            }
        });
    }

    /// Heap bytes the array holds (its allocation and the shared handle's, in allocator size
    /// classes; copied pages are a snapshot's transient cost, as copy-on-write pages are in
    /// Redis), for memory accounting.
    pub fn heap_bytes(&self) -> u64 {
        let handle = 2 * size_of::<usize>() + size_of::<Buf<T>>();
        allocation_size((self.len() * size_of::<T>()) as u64) + allocation_size(handle as u64)
    }

    /// Calls `f` with the pieces covering elements `offset..offset + len`, in order; false
    /// (and no call) if out of range.
    pub fn visit(&self, offset: usize, len: usize, mut f: impl FnMut(&[T])) -> bool {
        let Some(end) = self.end_of(offset, len) else {
            return false;
        };
        if let Some(all) = self.as_slice() {
            if offset < end {
                f(&all[offset..end]);
            }
            return true;
        }
        for (p, in_page, _) in spans(self.page_elems(), offset, end) {
            f(&self.page(p)[in_page]);
        }
        true
    }

    /// A private copy of this array's contents (no sharing, no copied pages).
    pub fn deep_copy(&self) -> Option<Self> {
        let mut base = Buf::zeroed(self.len())?;
        let out = base.as_mut_slice();
        let mut at = 0;
        for piece in self.pieces() {
            out[at..at + piece.len()].copy_from_slice(piece);
            at += piece.len();
        }
        Some(Self {
            base: Arc::new(base),
            overlay: None,
            page_shift: self.page_shift,
            row_len: self.row_len,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_large_arrays_are_one_allocation() {
        let small = CowArray::<u64>::try_zeroed(18, 1).unwrap();
        assert_eq!(small.len(), 18);
        assert_eq!(small.pieces().count(), 1);
        assert_eq!(small.heap_bytes(), allocation_size(18 * 8) + 32);
        let large = CowArray::<u64>::try_zeroed(3 << 20, 1).unwrap();
        assert_eq!(large.pieces().count(), 1);
        assert_eq!(large.heap_bytes(), (24 << 20) + 32);
        // Rows of 3 bytes never cross a page: 1,024 rows (3 KiB) per page.
        let slots = CowArray::<u8>::try_zeroed(1 << 21, 3).unwrap();
        assert_eq!(slots.page_elems(), 3 << 10);
        assert_eq!(slots.len(), 3 << 21);
    }

    #[test]
    fn a_write_copies_only_the_shared_page_it_touches() {
        let words = PAGE_BYTES / 8;
        let mut live = CowArray::<u64>::try_zeroed(300 * words, 1).unwrap();
        live.row_mut(5, 1)[0] = 7;
        let snapshot = live.clone();
        let copied = copied_bytes();
        live.row_mut(words + 1, 1)[0] = 9;
        live.row_mut(words + 2, 1)[0] = 10;
        // One page copied (other tests may copy concurrently: at least ours, a page each).
        assert!(copied_bytes() - copied >= PAGE_BYTES as u64);
        assert_eq!(live.overlay.as_ref().unwrap().count, 1);
        assert!(live.as_slice().is_none(), "reads consult the copied page");
        assert_eq!(
            snapshot.row(words + 1, 1)[0],
            0,
            "the snapshot keeps its point in time"
        );
        assert_eq!(live.row(words + 1, 1)[0], 9);
        assert_eq!(live.row(words + 2, 1)[0], 10);
        assert_eq!(live.row(5, 1)[0], 7);
        assert_eq!(snapshot.row(5, 1)[0], 7);
        assert_eq!(live.read(words, 4).unwrap(), vec![0, 9, 10, 0]);
        // The snapshot gone, the next write folds the copies back: one allocation again.
        drop(snapshot);
        live.row_mut(200 * words, 1)[0] = 11;
        assert!(live.overlay.is_none());
        let all = live.as_slice().unwrap();
        assert_eq!(
            (all[5], all[words + 1], all[words + 2], all[200 * words]),
            (7, 9, 10, 11)
        );
    }

    #[test]
    fn a_clone_of_a_clone_keeps_each_point_in_time() {
        let words = PAGE_BYTES / 8;
        let mut live = CowArray::<u64>::try_zeroed(4 * words, 1).unwrap();
        let first = live.clone();
        live.row_mut(0, 1)[0] = 1;
        let second = live.clone();
        live.row_mut(0, 1)[0] = 2;
        live.row_mut(3 * words, 1)[0] = 3;
        assert_eq!(first.row(0, 1)[0], 0);
        assert_eq!(second.row(0, 1)[0], 1);
        assert_eq!(second.row(3 * words, 1)[0], 0);
        assert_eq!(live.row(0, 1)[0], 2);
        assert_eq!(live, live.deep_copy().unwrap());
        assert!(live != first);
        drop((first, second));
        assert_eq!(live.as_mut_slice().unwrap()[3 * words], 3);
    }

    #[test]
    fn allocation_sizes_follow_jemalloc_classes() {
        let classes = [
            (1, 8),
            (9, 16),
            (17, 32),
            (100, 112),
            (144, 160),
            (161, 192),
        ];
        for (n, class) in classes {
            assert_eq!(allocation_size(n), class, "{n}");
        }
        assert_eq!(allocation_size(257), 320);
        assert_eq!(allocation_size(14 << 10), 14 << 10);
        assert_eq!(allocation_size((256 << 10) + 16), (256 + 4) << 10);
    }

    #[test]
    fn read_and_write_cross_pages_shared_or_not() {
        let words = PAGE_BYTES / 8;
        let mut array = CowArray::<u64>::try_zeroed(2 * words, 1).unwrap();
        let data: Vec<u64> = (1..=10).collect();
        assert!(array.write(words - 5, &data));
        assert_eq!(array.read(words - 5, 10).unwrap(), data);
        let snapshot = array.clone();
        let more: Vec<u64> = (20..30).collect();
        assert!(array.write(words - 3, &more));
        assert_eq!(array.read(words - 5, 12).unwrap()[2..], more[..]);
        assert_eq!(snapshot.read(words - 5, 10).unwrap(), data);
        let mut pieces = Vec::new();
        assert!(array.visit(words - 5, 12, |p| pieces.push(p.len())));
        assert_eq!(pieces, vec![5, 7], "page by page while pages are copied");
        assert!(!array.write(2 * words - 1, &data));
        assert!(array.read(2 * words - 1, 2).is_none());
    }
}
