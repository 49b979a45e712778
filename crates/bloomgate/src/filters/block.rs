//! The storage unit of the one-block layouts ([`Blocked`](super::Blocked) and
//! [`FastLocal`](super::FastLocal)): a 512-bit, cache-line-aligned [`Block`] of words, its atomic
//! twin [`AtomicBlock`] for the concurrent filters, and [`BlockArray`], the lazily zeroed,
//! huge-page-advised, fallible allocation of a block array.

use std::alloc::Layout;
use std::marker::PhantomData;
use std::mem::{align_of, size_of, ManuallyDrop};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

use super::layout::StorageUnit;
use super::prefetch::advise_huge_pages;
use crate::error::{Error, Result};
use crate::hash::BLOCK_WORDS;

/// One 512-bit block, aligned to a cache line: the storage unit of the blocked layout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Block(pub [u64; BLOCK_WORDS]);

/// One 512-bit block of atomics; same size, alignment and bit layout as [`Block`] (the unit of
/// the concurrent blocked filter).
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct AtomicBlock(pub [AtomicU64; BLOCK_WORDS]);

const _: () = assert!(size_of::<AtomicBlock>() == size_of::<Block>());
const _: () = assert!(align_of::<AtomicBlock>() == align_of::<Block>());
const _: () = assert!(size_of::<Block>() == BLOCK_WORDS * size_of::<u64>());

impl Block {
    /// Whether every bit of `mask` is set in the block (the portable kernels' test): the
    /// missing bits of all words OR-ed together, one branch at the end.
    #[inline(always)]
    pub(super) fn has_all(&self, mask: [u64; BLOCK_WORDS]) -> bool {
        let missing = self
            .0
            .iter()
            .zip(mask)
            .fold(0, |acc, (w, m)| acc | (m & !w));
        missing == 0
    }
}

/// Blocks: the store is a [`BlockArray`], lazily zeroed and advised onto huge pages before
/// first touch.
impl StorageUnit for Block {
    type Store = BlockArray<Block>;
    type Atomic = AtomicBlock;
    type AtomicStore = BlockArray<AtomicBlock>;
    const WORDS: usize = BLOCK_WORDS;

    fn try_zeroed(count: usize) -> Result<BlockArray<Block>> {
        BlockArray::try_zeroed(count)
    }

    fn units(store: &BlockArray<Block>) -> &[Block] {
        store
    }

    fn units_mut(store: &mut BlockArray<Block>) -> &mut [Block] {
        store
    }

    fn relocate(store: &mut BlockArray<Block>, walk: &mut crate::relocate::Walk<'_>) {
        store.relocate(walk);
    }

    fn words(units: &[Block]) -> &[u64] {
        // SAFETY: Block is repr(C) around [u64; 8] with no padding (asserted above), so a slice
        // of n blocks is exactly 8n contiguous, initialised, suitably aligned u64s.
        unsafe {
            std::slice::from_raw_parts(units.as_ptr().cast::<u64>(), units.len() * BLOCK_WORDS)
        }
    }

    fn words_mut(units: &mut [Block]) -> &mut [u64] {
        // SAFETY: as in `words`; the exclusive borrow of `units` makes the view unique.
        unsafe {
            std::slice::from_raw_parts_mut(
                units.as_mut_ptr().cast::<u64>(),
                units.len() * BLOCK_WORDS,
            )
        }
    }

    fn into_atomic(store: BlockArray<Block>) -> BlockArray<AtomicBlock> {
        store.cast()
    }

    fn from_atomic(store: BlockArray<AtomicBlock>) -> BlockArray<Block> {
        store.cast()
    }

    fn atomic_words(units: &[AtomicBlock]) -> &[AtomicU64] {
        // SAFETY: AtomicBlock is repr(C) around [AtomicU64; 8] with no padding (same size as
        // Block, asserted above), so n blocks are 8n contiguous, initialised AtomicU64s; the
        // shared borrow is carried over unchanged.
        unsafe {
            std::slice::from_raw_parts(
                units.as_ptr().cast::<AtomicU64>(),
                units.len() * BLOCK_WORDS,
            )
        }
    }
}

/// A cache-line block type a [`BlockArray`] can hold: 64 bytes, 64-byte aligned, valid when all
/// bytes are zero, and reinterpretable as any other such type (both are words).
///
/// # Safety
/// Implementors are `repr(C, align(64))`, exactly 64 bytes, with no padding and every bit
/// pattern valid.
pub unsafe trait CacheLine: Sized {}

// SAFETY: Block is repr(C, align(64)) around [u64; 8] (asserted above: 64 bytes).
unsafe impl CacheLine for Block {}
// SAFETY: AtomicBlock is repr(C, align(64)) around [AtomicU64; 8], the same size (asserted).
unsafe impl CacheLine for AtomicBlock {}

/// How far the global allocator's zeroed path (`calloc`) is asked to align: a word. Asked for
/// more (a cache line), `std`'s system allocator takes an aligned `malloc` and zeroes it with
/// `memset`, which touches every page (a 120 MB link resident at once); at a word it calls
/// `calloc`, whose fresh pages stay unresident until written, as jemalloc's (serve) and Redis'
/// do at any alignment.
const ALLOC_ALIGN: usize = std::mem::align_of::<u64>();
/// Bytes allocated beyond the blocks, so they can start on a cache line inside the allocation
/// whatever word it starts at.
const SLACK: usize = 64 - ALLOC_ALIGN;

/// `len` cache-line blocks (a filter's bits, or their atomic twin) in one lazily zeroed
/// allocation of the global allocator: made by `alloc_zeroed` at word alignment, a few bytes
/// larger than the blocks, which start at the first cache line inside it. Untouched pages stay
/// unresident (as a classic filter's words do); the large ones are advised onto huge pages
/// before their first touch. [`BlockArray::try_zeroed`] reports an allocation the allocator
/// refuses as an error instead of aborting.
pub struct BlockArray<T: CacheLine> {
    /// The allocation (dangling when `len` is 0).
    base: NonNull<u8>,
    /// Bytes from `base` to the first block (0 when `len` is 0).
    offset: usize,
    len: usize,
    owns: PhantomData<T>,
}

// SAFETY: a BlockArray owns its blocks as a `Box<[T]>` would.
unsafe impl<T: CacheLine + Send> Send for BlockArray<T> {}
// SAFETY: as above; shared access hands out `&[T]` only.
unsafe impl<T: CacheLine + Sync> Sync for BlockArray<T> {}

impl<T: CacheLine> BlockArray<T> {
    /// The allocation behind `len` blocks (`None` for none, or past `isize::MAX` bytes).
    fn layout(len: usize) -> Option<Layout> {
        let size = len.checked_mul(64)?.checked_add(SLACK)?;
        (len > 0)
            .then(|| Layout::from_size_align(size, ALLOC_ALIGN).ok())
            .flatten()
    }

    /// `len` zeroed blocks, or [`Error::OutOfMemory`] if the allocator refuses them.
    pub fn try_zeroed(len: usize) -> Result<Self> {
        if len == 0 {
            return Ok(Self::empty());
        }
        let refused = || {
            Error::OutOfMemory(format!(
                "the allocator refused {} for {len} blocks",
                crate::memory::human_bytes((len as u64).saturating_mul(64))
            ))
        };
        let layout = Self::layout(len).ok_or_else(refused)?;
        // SAFETY: a non-zero size (len > 0); the result is checked for null.
        let base = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }).ok_or_else(refused)?;
        let offset = base.as_ptr().align_offset(64);
        debug_assert!(offset <= SLACK);
        advise_huge_pages(base.as_ptr().wrapping_add(offset), len * 64);
        Ok(Self {
            base,
            offset,
            len,
            owns: PhantomData,
        })
    }

    fn empty() -> Self {
        Self {
            base: NonNull::<T>::dangling().cast(),
            offset: 0,
            len: 0,
            owns: PhantomData,
        }
    }

    /// The same allocation as blocks of `U` (plain ⇄ atomic; no copy).
    pub fn cast<U: CacheLine>(self) -> BlockArray<U> {
        let this = ManuallyDrop::new(self);
        BlockArray {
            base: this.base,
            offset: this.offset,
            len: this.len,
            owns: PhantomData,
        }
    }

    /// Offers the allocation to a host that moves allocations (one slot). The copy may start
    /// at another offset from a cache line: the blocks are moved to the first one inside it.
    pub fn relocate(&mut self, walk: &mut crate::relocate::Walk<'_>) {
        let Some(layout) = Self::layout(self.len) else {
            return;
        };
        walk.slot(|r| {
            // SAFETY: `base` is the live allocation `try_zeroed` (or `clone`) made with exactly
            // `layout`, reached only through `&mut self` here.
            let Some(moved) = (unsafe { crate::relocate::offer(r, self.base.as_ptr(), layout) })
            else {
                return;
            };
            let base = NonNull::new(moved).expect("a relocated allocation is not null");
            let offset = base.as_ptr().align_offset(64);
            if offset != self.offset {
                // SAFETY: the new allocation holds the old one's bytes, the blocks at the old
                // offset; both ranges lie inside it (offsets ≤ SLACK); `copy` allows overlap.
                unsafe {
                    std::ptr::copy(
                        base.as_ptr().add(self.offset),
                        base.as_ptr().add(offset),
                        self.len * 64,
                    )
                };
            }
            self.base = base;
            self.offset = offset;
        });
    }
}

impl<T: CacheLine> std::ops::Deref for BlockArray<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` blocks live at `base + offset`, a cache line (or a dangling, aligned
        // pointer for none), initialised (zeroed, then written) for the life of `self`.
        unsafe {
            std::slice::from_raw_parts(self.base.as_ptr().add(self.offset).cast::<T>(), self.len)
        }
    }
}

impl<T: CacheLine> std::ops::DerefMut for BlockArray<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, with `&mut self` excluding every other access.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.base.as_ptr().add(self.offset).cast::<T>(),
                self.len,
            )
        }
    }
}

impl<T: CacheLine> Drop for BlockArray<T> {
    fn drop(&mut self) {
        if let Some(layout) = Self::layout(self.len) {
            // SAFETY: allocated with this layout by `try_zeroed`, `clone` or a relocator.
            unsafe { std::alloc::dealloc(self.base.as_ptr(), layout) };
        }
    }
}

impl Clone for BlockArray<Block> {
    /// A copy in a new allocation. Panics if the allocator refuses it (where cloning a `Vec`
    /// aborts), so a host that catches panics — the Redis module's `COPY` — fails the one
    /// command instead of the process.
    fn clone(&self) -> Self {
        let mut copy = Self::try_zeroed(self.len)
            .unwrap_or_else(|e| panic!("cloning {} blocks: {e}", self.len));
        copy.copy_from_slice(self);
        copy
    }
}

impl PartialEq for BlockArray<Block> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for BlockArray<Block> {}

impl std::fmt::Debug for BlockArray<Block> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockArray")
            .field("blocks", &self.len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relocate::{Relocator, Walk};

    /// Moves every allocation to a new one whose offset from a cache line differs from the
    /// old one's (so the blocks must shift inside it), poisoning and freeing the old.
    struct Shifting {
        moved: u64,
    }

    impl Relocator for Shifting {
        unsafe fn relocate(&mut self, ptr: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>> {
            let old = ptr.as_ptr().align_offset(64);
            let mut tried = Vec::new();
            let found = loop {
                // SAFETY: a non-zero layout (a BlockArray offers only non-empty ones).
                let new = NonNull::new(unsafe { std::alloc::alloc(layout) })?;
                if new.as_ptr().align_offset(64) != old || tried.len() == 64 {
                    break new;
                }
                tried.push(new);
            };
            // SAFETY: every pointer here is a live allocation of `layout`; the old one is
            // copied whole, poisoned and freed, as the trait's contract says.
            unsafe {
                for p in tried {
                    std::alloc::dealloc(p.as_ptr(), layout);
                }
                std::ptr::copy_nonoverlapping(ptr.as_ptr(), found.as_ptr(), layout.size());
                std::ptr::write_bytes(ptr.as_ptr(), 0xA5, layout.size());
                std::alloc::dealloc(ptr.as_ptr(), layout);
            }
            self.moved += 1;
            Some(found)
        }
        fn shared(&mut self) {}
        fn should_stop(&mut self) -> bool {
            false
        }
    }

    fn numbered(len: usize) -> BlockArray<Block> {
        let mut blocks = BlockArray::<Block>::try_zeroed(len).unwrap();
        assert!(blocks.iter().all(|b| *b == Block::default()), "zeroed");
        for (i, b) in blocks.iter_mut().enumerate() {
            b.0 = [i as u64; BLOCK_WORDS];
        }
        blocks
    }

    #[test]
    fn blocks_are_zeroed_aligned_and_survive_a_move_to_another_offset() {
        for len in [1, 3, 100] {
            let mut blocks = numbered(len);
            assert_eq!(blocks.as_ptr() as usize % 64, 0);
            let copy = blocks.clone();
            assert_eq!(copy, blocks);
            let mut shifting = Shifting { moved: 0 };
            let offset = blocks.offset;
            let mut walk = Walk::new(&mut shifting, 0);
            blocks.relocate(&mut walk);
            assert_eq!(walk.finish(), None);
            assert_eq!(shifting.moved, 1);
            assert_ne!(
                blocks.offset, offset,
                "the blocks moved inside the new allocation"
            );
            assert_eq!(blocks.as_ptr() as usize % 64, 0);
            assert_eq!(blocks, copy, "{len} blocks after the move");
            // Plain ⇄ atomic keeps the allocation and the bits.
            let at = blocks.as_ptr() as usize;
            let atomic = blocks.cast::<AtomicBlock>();
            assert_eq!(atomic.as_ptr() as usize, at);
            let back = atomic.cast::<Block>();
            assert_eq!(back, copy);
        }
        let empty = BlockArray::<Block>::try_zeroed(0).unwrap();
        assert!(empty.is_empty());
        assert_eq!(empty.clone(), empty);
    }

    #[test]
    fn sizes_past_the_address_space_are_an_error() {
        let refused = BlockArray::<Block>::try_zeroed(usize::MAX / 32);
        assert!(matches!(refused, Err(Error::OutOfMemory(_))));
        let refused = BlockArray::<Block>::try_zeroed(isize::MAX as usize / 64 - 1);
        assert!(matches!(refused, Err(Error::OutOfMemory(_))));
    }
}
