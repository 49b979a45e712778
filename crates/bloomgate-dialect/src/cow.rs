//! Copy-on-write storage for the large arrays inside dialect values (Bloom link bits, cuckoo
//! slots), so a host can snapshot a value without copying it: the array is cut into segments of
//! [`SEGMENT_BYTES`] behind `Arc`s. Cloning a value bumps reference counts; a write copies
//! only the segment it touches, and only while a clone (a snapshot being written) still shares
//! it. An array of at most one segment — every small filter — is a single allocation.
//!
//! The array is addressed in rows of a fixed length the caller passes (1 word for a Bloom bit
//! array, one bucket of `bucket_size` slots for a cuckoo filter): a row never crosses a segment.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes of segments copied because a clone still shared them, since the process started.
static COPIED_BYTES: AtomicU64 = AtomicU64::new(0);

/// Bytes of segments copied by writes because a clone (a snapshot) shared them: what
/// copy-on-write cost in memory (Redis reports the same as `current_cow_size`).
pub fn copied_bytes() -> u64 {
    COPIED_BYTES.load(Ordering::Relaxed)
}

/// The segment, writable: copied first (and counted) if a clone shares it.
#[inline]
fn unshare<T: Copy>(segment: &mut Arc<[T]>) -> &mut [T] {
    if Arc::get_mut(segment).is_none() {
        COPIED_BYTES.fetch_add(size_of_val::<[T]>(segment) as u64, Ordering::Relaxed);
    }
    Arc::make_mut(segment)
}

/// Target segment size: small enough that a write which copies one for each of its probes
/// while a snapshot shares them (7 at 1%: under 2 MiB) stays around a millisecond, large enough
/// that the segment table of a 1 GiB filter is 4,096 pointers.
pub const SEGMENT_BYTES: usize = 256 << 10;

/// An array of `T` in copy-on-write segments.
#[derive(Clone, PartialEq, Eq)]
pub struct CowArray<T> {
    repr: Repr<T>,
}

#[derive(Clone, PartialEq, Eq)]
enum Repr<T> {
    /// The whole array in one allocation.
    One(Arc<[T]>),
    /// Segments of `2^shift` rows each (the last may be shorter).
    Many {
        segments: Box<[Arc<[T]>]>,
        shift: u8,
    },
}

impl<T: Copy + Default> std::fmt::Debug for CowArray<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CowArray")
            .field("len", &self.len())
            .field("segments", &self.segments().len())
            .finish()
    }
}

/// Bytes an allocation of `n` bytes really takes in jemalloc (the allocator of Redis, which
/// hosts the module, and of `bloomgate serve`): small size classes — multiples of 16 up to 128,
/// then four classes per doubling up to 14 KiB — and whole 4 KiB pages above (measured: a
/// 138 MB filter's 256 KiB segments add up to its bytes, not to the next class). Used to report
/// memory as resident pages see it, not as requested.
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

/// `len` zeroed elements, or `None` if they cannot be allocated (never aborts on the large
/// reservation).
fn zeroed_segment<T: Copy + Default>(len: usize) -> Option<Arc<[T]>> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(len).ok()?;
    v.resize(len, T::default());
    Some(Arc::from(v))
}

impl<T: Copy + Default> CowArray<T> {
    /// `rows × row_len` zeroed elements; `None` if that does not fit in memory.
    pub fn try_zeroed(rows: usize, row_len: usize) -> Option<Self> {
        let row_bytes = row_len.checked_mul(size_of::<T>())?.max(1);
        let total = rows.checked_mul(row_len)?;
        // Most rows a segment may hold: the largest power of two within SEGMENT_BYTES.
        let per_segment = (SEGMENT_BYTES / row_bytes).max(1);
        let shift = per_segment.ilog2();
        let per_segment = 1usize << shift;
        if rows <= per_segment {
            return Some(Self {
                repr: Repr::One(zeroed_segment(total)?),
            });
        }
        let segments = (0..rows.div_ceil(per_segment))
            .map(|s| {
                let first = s * per_segment;
                zeroed_segment((rows - first).min(per_segment) * row_len)
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            repr: Repr::Many {
                segments: segments.into_boxed_slice(),
                shift: shift as u8,
            },
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::One(a) => a.len(),
            // Every segment but the last is full.
            Repr::Many { segments, .. } => {
                (segments.len() - 1) * segments[0].len() + segments[segments.len() - 1].len()
            }
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The segments in order (their concatenation is the array).
    pub fn segments(&self) -> &[Arc<[T]>] {
        match &self.repr {
            Repr::One(a) => std::slice::from_ref(a),
            Repr::Many { segments, .. } => segments,
        }
    }

    /// Row `r` of `row_len` elements (the length the array was built with).
    #[inline]
    pub fn row(&self, r: usize, row_len: usize) -> &[T] {
        match &self.repr {
            Repr::One(a) => &a[r * row_len..(r + 1) * row_len],
            Repr::Many { segments, shift } => {
                let at = (r & ((1 << shift) - 1)) * row_len;
                &segments[r >> shift][at..at + row_len]
            }
        }
    }

    /// Row `r`, mutably: its segment is copied first if a clone still shares it.
    #[inline]
    pub fn row_mut(&mut self, r: usize, row_len: usize) -> &mut [T] {
        match &mut self.repr {
            Repr::One(a) => &mut unshare(a)[r * row_len..(r + 1) * row_len],
            Repr::Many { segments, shift } => {
                let at = (r & ((1 << *shift) - 1)) * row_len;
                &mut unshare(&mut segments[r >> *shift])[at..at + row_len]
            }
        }
    }

    /// Copies `len` elements from `offset` (across segments); `None` if out of range.
    pub fn read(&self, offset: usize, len: usize) -> Option<Vec<T>> {
        let end = offset.checked_add(len)?;
        if end > self.len() {
            return None;
        }
        let mut out = Vec::with_capacity(len);
        self.for_each_piece(offset, end, |seg, range| out.extend_from_slice(&seg[range]));
        Some(out)
    }

    /// Overwrites elements from `offset` with `data` (across segments, copying shared ones);
    /// false (and nothing changed) if out of range.
    pub fn write(&mut self, offset: usize, data: &[T]) -> bool {
        match offset.checked_add(data.len()) {
            Some(end) if end <= self.len() => {}
            _ => return false,
        }
        let mut start = 0usize;
        let mut done = 0usize;
        for seg in self.segments_mut() {
            let seg_len = seg.len();
            let (seg_start, seg_end) = (start, start + seg_len);
            start = seg_end;
            let from = offset.max(seg_start);
            let to = (offset + data.len()).min(seg_end);
            if from >= to {
                continue;
            }
            unshare(seg)[from - seg_start..to - seg_start]
                .copy_from_slice(&data[done..done + (to - from)]);
            done += to - from;
        }
        true
    }

    /// Calls `f` with each segment piece covering elements `start..end`, in order.
    fn for_each_piece(
        &self,
        start: usize,
        end: usize,
        mut f: impl FnMut(&[T], std::ops::Range<usize>),
    ) {
        let mut seg_start = 0usize;
        for seg in self.segments() {
            let seg_end = seg_start + seg.len();
            let from = start.max(seg_start);
            let to = end.min(seg_end);
            if from < to {
                f(seg, from - seg_start..to - seg_start);
            }
            if seg_end >= end {
                break;
            }
            seg_start = seg_end;
        }
    }

    fn segments_mut(&mut self) -> &mut [Arc<[T]>] {
        match &mut self.repr {
            Repr::One(a) => std::slice::from_mut(a),
            Repr::Many { segments, .. } => segments,
        }
    }

    /// Heap bytes the array holds (elements plus each allocation's reference counts, in
    /// allocator size classes), for memory accounting.
    pub fn heap_bytes(&self) -> u64 {
        // O(1) (writers account before and after each change): every segment but the last is
        // full.
        let arc =
            |s: &Arc<[T]>| allocation_size((2 * size_of::<usize>() + size_of_val(&**s)) as u64);
        match &self.repr {
            Repr::One(a) => arc(a),
            Repr::Many { segments, .. } => {
                let (last, full) = segments.split_last().expect("at least two segments");
                full.len() as u64 * arc(&full[0])
                    + arc(last)
                    + allocation_size((segments.len() * size_of::<Arc<[T]>>()) as u64)
            }
        }
    }

    /// Calls `f` with the pieces of segments covering elements `offset..offset + len`, in
    /// order; false (and no call) if out of range.
    pub fn visit(&self, offset: usize, len: usize, mut f: impl FnMut(&[T])) -> bool {
        match offset.checked_add(len) {
            Some(end) if end <= self.len() => {
                self.for_each_piece(offset, end, |seg, range| f(&seg[range]));
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_arrays_are_one_allocation_large_ones_segmented() {
        let small = CowArray::<u64>::try_zeroed(18, 1).unwrap();
        assert_eq!(small.segments().len(), 1);
        assert_eq!(small.len(), 18);
        let words = SEGMENT_BYTES / 8;
        let large = CowArray::<u64>::try_zeroed(2 * words + 3, 1).unwrap();
        assert_eq!(large.segments().len(), 3);
        assert_eq!(large.len(), 2 * words + 3);
        let full = allocation_size(16 + SEGMENT_BYTES as u64);
        assert_eq!(
            large.heap_bytes(),
            2 * full + 48 + 48,
            "two full, one of 3 words, table"
        );
        assert_eq!(small.heap_bytes(), allocation_size(16 + 18 * 8));
        // Rows of 3 bytes never cross a segment.
        let slots = CowArray::<u8>::try_zeroed(1 << 21, 3).unwrap();
        assert!(slots.segments().iter().all(|s| s.len() % 3 == 0));
        assert_eq!(slots.len(), 3 << 21);
    }

    #[test]
    fn a_write_copies_only_the_shared_segment_it_touches() {
        let words = SEGMENT_BYTES / 8;
        let mut live = CowArray::<u64>::try_zeroed(3 * words, 1).unwrap();
        live.row_mut(5, 1)[0] = 7;
        let snapshot = live.clone();
        live.row_mut(words + 1, 1)[0] = 9;
        let (a, b) = (live.segments(), snapshot.segments());
        assert!(Arc::ptr_eq(&a[0], &b[0]) && Arc::ptr_eq(&a[2], &b[2]));
        assert!(!Arc::ptr_eq(&a[1], &b[1]));
        assert_eq!(
            snapshot.row(words + 1, 1)[0],
            0,
            "the snapshot keeps its point in time"
        );
        assert_eq!(live.row(words + 1, 1)[0], 9);
        assert_eq!(live.row(5, 1)[0], 7);
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
    fn read_and_write_cross_segments() {
        let words = SEGMENT_BYTES / 8;
        let mut array = CowArray::<u64>::try_zeroed(2 * words, 1).unwrap();
        let data: Vec<u64> = (1..=10).collect();
        assert!(array.write(words - 5, &data));
        assert_eq!(array.read(words - 5, 10).unwrap(), data);
        assert_eq!(array.row(words + 4, 1)[0], 10);
        assert!(!array.write(2 * words - 1, &data));
        assert!(array.read(2 * words - 1, 2).is_none());
    }
}
