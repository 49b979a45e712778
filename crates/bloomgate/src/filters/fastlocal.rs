//! FastLocal layout: like the blocked layout, all k bits of a key live in one 64-byte block
//! (one memory access per query), but the probes may land anywhere in the block and come from
//! one 32-bit hash by repeated multiplication (RocksDB's FastLocalBloom design, see
//! `crate::hash`). Free placement is more accurate than one bit per word (10 bits/key: 0.96%
//! against 1.06%), and the query reads only the low half of the key's hash.
//!
//! Speed: on x86-64 with AVX2 (chosen once per filter) a query computes eight probes with one
//! `vpmulld` against the powers of the multiplier, fetches the eight addressed 32-bit words of
//! the block with two `vpermd` and a blend, and tests them against eight one-bit masks with one
//! `vptest`; the whole query, block choice included, is one `#[target_feature]` function called
//! once. Inserts and the portable kernel build the block's 8-word mask in scalar code.

use super::block::Block;
use super::layout::{BitLayout, Geometry};
use super::local::{self, BlockTest, Kernel};
use super::Bloom;
use crate::codec::FilterKind;
use crate::hash::{fast_range, KeyHash, GOLDEN32_POWERS};
use crate::params::Layout;

/// The FastLocal layout policy; its value is the query kernel chosen for this CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastLocal(Kernel);

/// A Bloom filter whose keys each set k bits anywhere inside one 512-bit block.
pub type FastLocalBloomFilter = Bloom<FastLocal>;

/// The FastLocal layout's calls into its kernels, dispatched on the kernel chosen for this CPU.
trait FastLocalKernel {
    /// Sets the bits of the key whose hash has low half `lo`; returns whether they were all
    /// set already.
    fn insert(self, blocks: &mut [Block], g: Geometry, lo: u64) -> bool;
    /// Whether all of the bits of the key whose hash has low half `lo` are set.
    fn contains(self, blocks: &[Block], g: Geometry, lo: u64) -> bool;
}

impl FastLocalKernel for Kernel {
    /// The single-key insert, dispatched like [`Self::contains`].
    #[inline(always)]
    fn insert(self, blocks: &mut [Block], g: Geometry, lo: u64) -> bool {
        match self {
            Kernel::Portable => portable_insert(blocks, g, lo),
            // SAFETY: Avx2 is only chosen when the CPU reports AVX2 (Kernel::detect).
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => unsafe { avx2::insert(blocks, g.units, g.hashes, lo) },
        }
    }

    /// Scalars, not the `Geometry`, cross the call: a struct of three words would be passed
    /// through memory.
    #[inline(always)]
    fn contains(self, blocks: &[Block], g: Geometry, lo: u64) -> bool {
        match self {
            Kernel::Portable => portable_query(blocks, g, lo),
            // SAFETY: Avx2 is only chosen when the CPU reports AVX2 (Kernel::detect); k ≤ 64
            // holds for every validated `Params`.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => unsafe { avx2::query(blocks, g.units, g.hashes, lo) },
        }
    }
}

/// The block of a key whose hash has low half `lo`.
#[inline(always)]
fn home(g: Geometry, lo: u64) -> usize {
    fast_range(lo, g.units) as usize
}

/// Whether every bit of the key's mask is set in `block` (portable kernel).
#[inline(always)]
fn block_contains(block: &Block, lo: u64, hashes: u32) -> bool {
    block.has_all(KeyHash { lo, hi: 0 }.local_mask(hashes))
}

/// The single-key query of the portable kernel, out of line.
#[inline(never)]
fn portable_query(blocks: &[Block], g: Geometry, lo: u64) -> bool {
    block_contains(&blocks[home(g, lo)], lo, g.hashes)
}

/// The single-key insert of the portable kernel: probe j is `h · G^j` (independent
/// multiplies, no chain), set in place.
#[inline(never)]
fn portable_insert(blocks: &mut [Block], g: Geometry, lo: u64) -> bool {
    let block = &mut blocks[home(g, lo)];
    let probe_hash = lo as u32;
    let mut missing = 0;
    for &power in &GOLDEN32_POWERS[..g.hashes as usize] {
        let position = probe_hash.wrapping_mul(power) >> 23;
        let word = &mut block.0[(position >> 6) as usize];
        let bit = 1u64 << (position & 63);
        missing |= bit & !*word;
        *word |= bit;
    }
    missing == 0
}

impl BitLayout for FastLocal {
    type Unit = Block;
    const LAYOUT: Layout = Layout::FastLocal;
    const KIND: FilterKind = FilterKind::FastLocal;
    const TYPE_NAME: &'static str = "FastLocalBloomFilter";
    local::one_block_layout!();

    #[inline(always)]
    fn insert(self, blocks: &mut [Block], g: Geometry, h: KeyHash) -> bool {
        self.0.insert(blocks, g, h.lo)
    }

    #[inline(always)]
    fn contains(self, blocks: &[Block], g: Geometry, h: KeyHash) -> bool {
        self.0.contains(blocks, g, h.lo)
    }

    #[inline]
    fn probes(self, g: Geometry, h: KeyHash, visit: impl FnMut(usize, u64) -> bool) -> bool {
        local::visit_block_mask(home(g, h.lo), h.local_mask(g.hashes), visit)
    }

    #[inline(always)]
    fn home(g: Geometry, h: KeyHash) -> usize {
        home(g, h.lo)
    }

    /// The mean over blocks of (ones / 512)^k (each probe is uniform over the block).
    fn estimated_fpr(blocks: &[Block], g: Geometry) -> f64 {
        let total: f64 = blocks
            .iter()
            .map(|block| {
                let ones: u32 = block.0.iter().map(|w| w.count_ones()).sum();
                (f64::from(ones) / 512.0).powi(g.hashes as i32)
            })
            .sum();
        total / blocks.len() as f64
    }
}

/// The block tests the batched query pipeline calls.
impl BlockTest for FastLocal {
    #[inline(always)]
    fn block_contains_portable(block: &Block, h: KeyHash, hashes: u32) -> bool {
        block_contains(block, h.lo, hashes)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn block_contains_avx2(block: &Block, h: KeyHash, hashes: u32) -> bool {
        avx2::block_contains(block, h.lo, hashes)
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::Block;
    use crate::hash::{fast_range, GOLDEN32_POWERS};
    use std::arch::x86_64::*;

    /// Row `a`: shift counts OR-ed into each lane when only `a` lanes of a round are active.
    /// A count of 32 makes `vpsllvd` produce 0, so inactive lanes test no bit.
    /// A `const`, not a `static`: addressed directly, not through the GOT.
    const INACTIVE: [[u32; 8]; 9] = crate::filters::local::inactive_lanes!(u32, 32);

    /// The probes `start..start + 8` (those below `hashes`) of the key that are clear in the
    /// block halves `low`, `high`: zero when all are set.
    ///
    /// # Safety
    /// The CPU must support AVX2; `start ≤ hashes ≤ 64`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn round(
        low: __m256i,
        high: __m256i,
        h: __m256i,
        start: usize,
        hashes: usize,
    ) -> __m256i {
        let powers = _mm256_loadu_si256(GOLDEN32_POWERS.as_ptr().add(start).cast());
        let probe = _mm256_mullo_epi32(h, powers);
        // Top 4 bits: which of the 16 32-bit words; vpermd reads the low 3 of them and the top
        // bit (the sign) picks the half.
        let word = _mm256_srli_epi32::<28>(probe);
        let from_low = _mm256_permutevar8x32_epi32(low, word);
        let from_high = _mm256_permutevar8x32_epi32(high, word);
        let picked = _mm256_castps_si256(_mm256_blendv_ps(
            _mm256_castsi256_ps(from_low),
            _mm256_castsi256_ps(from_high),
            _mm256_castsi256_ps(probe),
        ));
        // Next 5 bits: the bit in that word; lanes past k shift by 32 (no bit).
        let mut bit = _mm256_srli_epi32::<27>(_mm256_slli_epi32::<4>(probe));
        if hashes - start < 8 {
            let inactive = _mm256_loadu_si256(INACTIVE[hashes - start].as_ptr().cast());
            bit = _mm256_or_si256(bit, inactive);
        }
        let mask = _mm256_sllv_epi32(_mm256_set1_epi32(1), bit);
        _mm256_andnot_si256(picked, mask)
    }

    /// Whether every probe of the key is set in `block`: eight probes per round, with k ≤ 8
    /// (what the sizer picks up to ~12 bits/key) as one straight line.
    ///
    /// # Safety
    /// The CPU must support AVX2; `hashes ≤ 64`.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn block_contains(block: &Block, lo: u64, hashes: u32) -> bool {
        // Block is repr(align(64)), so both 32-byte halves are aligned for vmovdqa.
        let words = block.0.as_ptr().cast::<__m256i>();
        let low = _mm256_load_si256(words);
        let high = _mm256_load_si256(words.add(1));
        let h = _mm256_set1_epi32(lo as u32 as i32);
        let hashes = hashes as usize;
        let mut missing = round(low, high, h, 0, hashes);
        let mut start = 8;
        while start < hashes {
            missing = _mm256_or_si256(missing, round(low, high, h, start, hashes));
            start += 8;
        }
        _mm256_testz_si256(missing, missing) != 0
    }

    /// The whole single-key query, block choice included, compiled with AVX2.
    ///
    /// # Safety
    /// The CPU must support AVX2; `hashes ≤ 64`.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn query(blocks: &[Block], units: u64, hashes: u32, lo: u64) -> bool {
        block_contains(&blocks[fast_range(lo, units) as usize], lo, hashes)
    }

    /// The whole single-key insert. Setting probes one by one in memory serialises on store
    /// forwarding (probes of one key often share a word), so the block's 512-bit mask is built
    /// in two registers first: probe p is `1 << (p − 64·i)` in 64-bit lane i, which `vpsllvq`
    /// turns into 0 in every other lane (the count is ≥ 64 or, wrapped, huge).
    ///
    /// # Safety
    /// The CPU must support AVX2; `hashes ≤ 64`.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn insert(blocks: &mut [Block], units: u64, hashes: u32, lo: u64) -> bool {
        let block = &mut blocks[fast_range(lo, units) as usize];
        let probe_hash = lo as u32;
        let one = _mm256_set1_epi64x(1);
        let low_base = _mm256_setr_epi64x(0, 64, 128, 192);
        let high_base = _mm256_setr_epi64x(256, 320, 384, 448);
        let mut low_mask = _mm256_setzero_si256();
        let mut high_mask = _mm256_setzero_si256();
        for &power in &GOLDEN32_POWERS[..hashes as usize] {
            let position = _mm256_set1_epi64x(i64::from(probe_hash.wrapping_mul(power) >> 23));
            let low_bit = _mm256_sllv_epi64(one, _mm256_sub_epi64(position, low_base));
            let high_bit = _mm256_sllv_epi64(one, _mm256_sub_epi64(position, high_base));
            low_mask = _mm256_or_si256(low_mask, low_bit);
            high_mask = _mm256_or_si256(high_mask, high_bit);
        }
        crate::filters::local::insert_halves(block, low_mask, high_mask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2 and portable kernels agree for every k, on blocks with random fill: queries
    /// answer alike and inserts set the same bits, which both then find.
    #[test]
    fn kernels_agree() {
        let detected = Kernel::detect();
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            rng
        };
        for k in 1..=crate::params::MAX_HASHES {
            for i in 0..2000u64 {
                let h = KeyHash::of(&i.to_le_bytes(), 5);
                let g = Geometry {
                    bits: 3 * 512,
                    units: 3,
                    hashes: k,
                };
                // Dense random fill: about half the queries pass.
                let mut blocks = [Block::default(); 3];
                for block in &mut blocks {
                    for w in &mut block.0 {
                        *w = next() | next() | next();
                    }
                }
                let expected = block_contains(&blocks[home(g, h.lo)], h.lo, k);
                assert_eq!(detected.contains(&blocks, g, h.lo), expected, "k={k} i={i}");
                assert_eq!(Kernel::Portable.contains(&blocks, g, h.lo), expected);
                let mut portable_blocks = blocks;
                let layout = FastLocal(detected);
                assert_eq!(layout.insert(&mut blocks, g, h), expected);
                let portable = FastLocal(Kernel::Portable);
                assert_eq!(portable.insert(&mut portable_blocks, g, h), expected);
                assert_eq!(blocks, portable_blocks, "inserts set different bits");
                assert!(layout.contains(&blocks, g, h));
                assert!(portable.contains(&blocks, g, h));
            }
        }
    }

    /// k ≤ 8 probes set at most k bits, all in the key's block.
    #[test]
    fn mask_has_at_most_k_bits() {
        for i in 0..1000u64 {
            let h = KeyHash::of(&i.to_le_bytes(), 1);
            for k in [1u32, 6, 7, 8, 16] {
                let ones: u32 = h.local_mask(k).iter().map(|w| w.count_ones()).sum();
                assert!(ones >= 1 && ones <= k);
            }
        }
    }
}
