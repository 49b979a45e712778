//! The storage unit of the one-block layouts ([`Blocked`](super::Blocked) and
//! [`FastLocal`](super::FastLocal)): a 512-bit, cache-line-aligned [`Block`] of words, its atomic
//! twin [`AtomicBlock`] for the concurrent filters, and the zeroed, huge-page-advised allocation
//! of a block array.

use std::mem::{align_of, size_of, ManuallyDrop};
use std::sync::atomic::AtomicU64;

use super::layout::StorageUnit;
use super::prefetch::advise_huge_pages;
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

/// Blocks: the store is a `Vec<Block>` allocated onto huge pages before first touch.
impl StorageUnit for Block {
    type Store = Vec<Block>;
    type Atomic = AtomicBlock;
    const WORDS: usize = BLOCK_WORDS;

    fn zeroed(count: usize) -> Vec<Block> {
        zeroed_blocks(count)
    }

    fn units(store: &Vec<Block>) -> &[Block] {
        store
    }

    fn units_mut(store: &mut Vec<Block>) -> &mut [Block] {
        store
    }

    fn into_vec(store: Vec<Block>) -> Vec<Block> {
        store
    }

    fn from_vec(units: Vec<Block>) -> Vec<Block> {
        units
    }

    fn relocate(store: &mut Vec<Block>, walk: &mut crate::relocate::Walk<'_>) {
        walk.vec(store);
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

    fn into_atomic(units: Vec<Block>) -> Vec<AtomicBlock> {
        let mut units = ManuallyDrop::new(units);
        // SAFETY: AtomicBlock and Block have the same size and alignment (asserted above) and
        // u64 → AtomicU64 is a valid reinterpretation (same size and bit validity); the plain
        // Vec is never dropped, so ownership of the allocation moves exactly once.
        unsafe {
            Vec::from_raw_parts(
                units.as_mut_ptr().cast::<AtomicBlock>(),
                units.len(),
                units.capacity(),
            )
        }
    }

    fn from_atomic(units: Vec<AtomicBlock>) -> Vec<Block> {
        let mut units = ManuallyDrop::new(units);
        // SAFETY: as in `into_atomic`, the other way; we own the Vec, so no other thread can
        // access the atomics while they become plain words.
        unsafe {
            Vec::from_raw_parts(
                units.as_mut_ptr().cast::<Block>(),
                units.len(),
                units.capacity(),
            )
        }
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

/// `count` zeroed blocks, advised onto huge pages before any page is touched. Not
/// `alloc_zeroed`: for 64-byte alignment the system allocator zeroes with memset itself, which
/// touches every page before the advice (measured: 6 MiB of 126 MiB on huge pages that way,
/// all of it this way).
fn zeroed_blocks(count: usize) -> Vec<Block> {
    if count == 0 {
        return Vec::new();
    }
    let layout = std::alloc::Layout::array::<Block>(count).expect("size validated by Params");
    // SAFETY: layout has non-zero size (count > 0, Block is 64 bytes).
    let ptr = unsafe { std::alloc::alloc(layout) }.cast::<Block>();
    if ptr.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    advise_huge_pages(ptr, layout.size());
    // SAFETY: ptr is a fresh allocation of exactly Layout::array::<Block>(count) (what Vec uses
    // for capacity `count`); it is fully zeroed here, and all-zero bytes are a valid Block.
    unsafe {
        std::ptr::write_bytes(ptr, 0, count);
        Vec::from_raw_parts(ptr, count, count)
    }
}
