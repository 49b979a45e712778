//! What the two one-block layouts ([`Blocked`](super::Blocked) and
//! [`FastLocal`](super::FastLocal), the [`BitLayout::LOCAL`] ones) share: the choice between
//! their AVX2 and portable kernels, the probe and prefetch helpers over a key's block, and the
//! batched query pipeline — hash ahead, prefetch the key's block, test the key against it —
//! written once over the per-layout block test ([`BlockTest`]).
//!
//! The AVX2 pipeline is a `#[target_feature(enable = "avx2")]` function generic over the layout,
//! and the closure that calls the layout's block test is written inside it, so the kernel
//! inlines into the loop exactly as when each layout had its own copy.

use super::block::Block;
use super::layout::{BitLayout, Geometry};
use super::prefetch::{prefetch, rolling};
use crate::hash::{KeyHash, BLOCK_WORDS};

/// Which kernel a one-block filter uses, chosen once per filter. Both kernels of a layout give
/// bit-identical results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kernel {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Kernel {
    /// AVX2 where the CPU reports it, the portable kernel elsewhere.
    pub(super) fn detect() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            return Kernel::Avx2;
        }
        Kernel::Portable
    }
}

/// The per-layout half of the batched query: how a key is tested against its block (the one
/// [`BitLayout::home`] picks) by each kernel.
pub(super) trait BlockTest: BitLayout<Unit = Block> {
    /// Whether every bit of the key is set in `block` (portable kernel).
    fn block_contains_portable(block: &Block, h: KeyHash, hashes: u32) -> bool;

    /// Whether every bit of the key is set in `block` (AVX2 kernel).
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[cfg(target_arch = "x86_64")]
    unsafe fn block_contains_avx2(block: &Block, h: KeyHash, hashes: u32) -> bool;
}

/// The AVX2 kernels' table of shift counts for a last, partial round of eight probes: row `a`
/// holds 0 in lanes `0..a` and `$off` in lanes `a..8`, a count for which the variable shift
/// (`vpsllvq` on `$t = u64` lanes, `vpsllvd` on `u32`) yields 0, so inactive lanes set or test
/// no bit. Evaluated at compile time into each kernel's `static` or `const`.
#[cfg(target_arch = "x86_64")]
macro_rules! inactive_lanes {
    ($t:ty, $off:expr) => {{
        let mut table: [[$t; 8]; 9] = [[0; 8]; 9];
        let mut active = 0;
        while active <= 8 {
            let mut lane = active;
            while lane < 8 {
                table[active][lane] = $off;
                lane += 1;
            }
            active += 1;
        }
        table
    }};
}
#[cfg(target_arch = "x86_64")]
pub(super) use inactive_lanes;

/// The part of [`BitLayout`] both one-block layouts share, for the body of `impl BitLayout for
/// L` where `L(Kernel)` is the layout's policy type (with `Unit = Block` and [`BlockTest`]):
/// always local, prefetching at every size (one line per key pays off as soon as the array
/// leaves L1/L2), the kernel detected once per filter, and the prefetch and batched query of
/// this module.
macro_rules! one_block_layout {
    () => {
        const PREFETCH_MIN_BYTES: usize = 0;
        const LOCAL: bool = true;

        fn select() -> Self {
            Self($crate::filters::local::Kernel::detect())
        }

        #[inline(always)]
        fn prefetch(
            self,
            words: *const u64,
            g: $crate::filters::layout::Geometry,
            h: $crate::hash::KeyHash,
        ) {
            $crate::filters::local::prefetch_block::<Self>(words, g, h);
        }

        /// The one-block pipeline of `local` (hash ahead, prefetch every block, one line per
        /// key).
        #[inline(always)]
        fn contains_batch(
            self,
            blocks: &[$crate::filters::block::Block],
            g: $crate::filters::layout::Geometry,
            count: usize,
            hash_at: impl Fn(usize) -> $crate::hash::KeyHash,
            out: &mut Vec<bool>,
        ) {
            $crate::filters::local::contains_batch::<Self>(self.0, blocks, g, count, hash_at, out);
        }
    };
}
pub(super) use one_block_layout;

/// The AVX2 kernels' insert into a block: ORs the two 256-bit halves of a key's mask into
/// `block`; returns whether all of those bits were set already.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn insert_halves(
    block: &mut Block,
    low_mask: std::arch::x86_64::__m256i,
    high_mask: std::arch::x86_64::__m256i,
) -> bool {
    use std::arch::x86_64::*;
    // Block is repr(align(64)), so both 32-byte halves are aligned for vmovdqa.
    let words = block.0.as_mut_ptr().cast::<__m256i>();
    let low = _mm256_load_si256(words);
    let high = _mm256_load_si256(words.add(1));
    let present = (_mm256_testc_si256(low, low_mask) & _mm256_testc_si256(high, high_mask)) != 0;
    _mm256_store_si256(words, _mm256_or_si256(low, low_mask));
    _mm256_store_si256(words.add(1), _mm256_or_si256(high, high_mask));
    present
}

/// Visits the set words of a key's 512-bit `mask` in block `block` as (word index, bit mask)
/// pairs over the filter's word view, stopping at the first visit that returns false (the
/// [`BitLayout::probes`] of both layouts).
#[inline(always)]
pub(super) fn visit_block_mask(
    block: usize,
    mask: [u64; BLOCK_WORDS],
    mut visit: impl FnMut(usize, u64) -> bool,
) -> bool {
    let first = block * BLOCK_WORDS;
    mask.iter()
        .enumerate()
        .all(|(w, &m)| m == 0 || visit(first + w, m))
}

/// Hints the cache line of the key's block in the word array at `words` (the
/// [`BitLayout::prefetch`] of both layouts).
#[inline(always)]
pub(super) fn prefetch_block<L: BitLayout>(words: *const u64, g: Geometry, h: KeyHash) {
    prefetch(words.wrapping_add(L::home(g, h) * BLOCK_WORDS));
}

/// The batched query of a one-block layout: hashes ahead and prefetches every block (one line
/// per key), then tests each key with `kernel`. The AVX2 loop is compiled with AVX2 enabled so
/// the kernel inlines into it.
#[inline(always)]
pub(super) fn contains_batch<L: BlockTest>(
    kernel: Kernel,
    blocks: &[Block],
    g: Geometry,
    count: usize,
    hash_at: impl Fn(usize) -> KeyHash,
    out: &mut Vec<bool>,
) {
    out.reserve(count);
    match kernel {
        Kernel::Portable => {
            let base = blocks.as_ptr();
            rolling(
                count,
                1,
                hash_at,
                |h| prefetch(base.wrapping_add(L::home(g, h))),
                |h| {
                    out.push(L::block_contains_portable(
                        &blocks[L::home(g, h)],
                        h,
                        g.hashes,
                    ))
                },
            );
        }
        // SAFETY: Avx2 is only chosen when the CPU reports AVX2 (Kernel::detect).
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { contains_batch_avx2::<L>(blocks, g, count, hash_at, out) },
    }
}

/// The AVX2 arm of [`contains_batch`]: the same loop, compiled with AVX2.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn contains_batch_avx2<L: BlockTest>(
    blocks: &[Block],
    g: Geometry,
    count: usize,
    hash_at: impl Fn(usize) -> KeyHash,
    out: &mut Vec<bool>,
) {
    let base = blocks.as_ptr();
    rolling(
        count,
        1,
        hash_at,
        |h| prefetch(base.wrapping_add(L::home(g, h))),
        |h| out.push(L::block_contains_avx2(&blocks[L::home(g, h)], h, g.hashes)),
    );
}
