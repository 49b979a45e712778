//! RedisBloom's SBChain link as a compatibility type: the exact link sizing, MurmurHash64A
//! double hashing and option bits that RedisBloom uses, so dumps move between RedisBloom and
//! bloomgate unchanged ([`super::BloomChain`], `MBbloom--`). The core's native filters use a
//! different hash and probe scheme. A link's bits live in copy-on-write segments
//! ([`CowArray`]) so a snapshot shares them instead of copying; bit `i` is bit `i % 64` of
//! little-endian word `i / 64`, the LSB-first byte layout RedisBloom dumps use. The dump header
//! and RDB field order are in `format.rs`, the batched probes in `probe.rs`, the union of
//! links (`BF.MERGE`) in `merge.rs`.
//!
//! Implemented from RedisBloom's documented formats and observed behaviour, not from its source.

use super::link::{ChainLink, LinkCounts, LinkHealth};
use super::{format_g, le_bytes, patch_le_bytes, visit_le_words, Chain, ChainShape};
use crate::budget::{Admitted, Shape};
use crate::codec::murmur::murmur64a;
use crate::codec::rdb_io::{RdbError, RdbSink, RdbSource};
use crate::types::cow::CowArray;
use bloomgate::relocate::Walk;

mod format;
mod merge;
mod probe;

pub use format::HEADER_FIXED;
pub use merge::estimate_items;

/// Link option bits as stored in the dump header.
pub const OPT_NOROUND: u32 = 1;
/// Legacy: `entries` counts bits.
pub const OPT_ENTS_IS_BITS: u32 = 2;
/// 64-bit hashing (every filter created since 2.x).
pub const OPT_FORCE64: u32 = 4;
/// The chain never grows.
pub const OPT_NO_SCALING: u32 = 8;
/// NOROUND | FORCE64: what RedisBloom has created since 2.x.
pub const DEFAULT_OPTIONS: u32 = OPT_NOROUND | OPT_FORCE64;

/// `-ln(error) / ln(2)^2` uses ln(2)^2 truncated to 15 significant digits, as libbloom does; the
/// exact constant matters because `bpe` is stored in dumps and drives `bits = floor(cap * bpe)`.
const LN2_SQUARED: f64 = 0.480453013918201;
/// `hashes = ceil(ln2 * bpe)` with ln2 likewise truncated (not `std::f64::consts::LN_2`: the
/// truncated value is what decides `hashes` at boundaries and is part of the format).
#[allow(clippy::approx_constant)]
const LN2: f64 = 0.693147180559945;

/// The two 64-bit hashes every probe position derives from.
#[derive(Clone, Copy, Debug)]
pub struct HashPair {
    a: u64,
    b: u64,
}

impl HashPair {
    /// `a = MurmurHash64A(item, 0xc6a4a7935bd1e995)`, `b = MurmurHash64A(item, a)`.
    pub fn of(item: &[u8]) -> Self {
        let a = murmur64a(item, 0xc6a4a7935bd1e995);
        let b = murmur64a(item, a);
        Self { a, b }
    }

    /// Probe `i`: `(a + i*b) mod bits`, 64-bit wrapping.
    #[inline]
    fn position(self, i: u32, bits: u64) -> u64 {
        self.a.wrapping_add(u64::from(i).wrapping_mul(self.b)) % bits
    }
}

/// Sizing of one link for a capacity and error rate (NOROUND|FORCE64 rules).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkSizing {
    /// Bytes of the bit array (a multiple of 8).
    pub bytes: u64,
    /// Bits (`bytes × 8`).
    pub bits: u64,
    /// Probes per item.
    pub hashes: u32,
    /// Bits per entry.
    pub bpe: f64,
}

impl LinkSizing {
    /// `bpe = -ln(error)/ln2²`, `bits = floor(capacity*bpe)` (≥ 1) rounded up to whole 64-bit
    /// words, `hashes = ceil(ln2*bpe)`. `None` if the size does not fit in memory addresses.
    pub fn new(capacity: u64, error: f64) -> Option<Self> {
        Self::from_bpe(capacity, -(error.ln() / LN2_SQUARED))
    }

    /// The sizing for `capacity` items at `bpe` bits per entry (what a NOROUND link's stored
    /// `bpe` implies for its bit count).
    fn from_bpe(capacity: u64, bpe: f64) -> Option<Self> {
        let raw_bits = capacity as f64 * bpe;
        // 2^63 bits is far beyond any allocation; also rejects inf/NaN.
        if raw_bits.is_nan() || raw_bits >= 9.2e18 {
            return None;
        }
        let bits = (raw_bits as u64).max(1);
        let bytes = if !bits.is_multiple_of(64) {
            (bits / 64 + 1) * 8
        } else {
            bits / 8
        };
        Some(Self {
            bytes,
            bits: bytes * 8,
            hashes: hashes_for(bpe),
            bpe,
        })
    }
}

/// A link about to be allocated: a chain's first link, the next one it grows by, or one a dump
/// header describes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkPlan {
    capacity: u64,
    error: f64,
    sizing: LinkSizing,
    /// Power-of-two exponent of a legacy link (0 for the links every creation makes).
    n2: u8,
}

impl LinkPlan {
    /// A link for `capacity` items at `error`; `None` if its size does not fit in memory
    /// addresses.
    pub fn new(capacity: u64, error: f64) -> Option<Self> {
        Some(Self {
            capacity,
            error,
            sizing: LinkSizing::new(capacity, error)?,
            n2: 0,
        })
    }
}

impl Shape for LinkPlan {
    fn bytes(&self) -> u64 {
        self.sizing.bytes
    }
}

/// The most hash functions any error rate in (0,1) gives (the smallest double, 2^-1074, needs
/// 1075): a header asking for more is forged.
const MAX_HASHES: u32 = 1075;

fn hashes_for(bpe: f64) -> u32 {
    (LN2 * bpe).ceil() as u32
}

/// One fixed-size Bloom filter in the chain (kept to 64 bytes: a small filter's link and its
/// bits are most of what a key costs). Its byte and bit counts are the bit array's length.
#[derive(Clone, Debug)]
pub struct Link {
    bits: CowArray<u64>,
    /// Capacity, error rate and the items this link newly took.
    counts: LinkCounts,
    bpe: f64,
    /// Probes per item (at most [`MAX_HASHES`], so 16 bits leave room for `ones`).
    hashes: u16,
    /// Power-of-two exponent of legacy (non-NOROUND) links; 0 for NOROUND links. Round-tripped.
    n2: u8,
    /// Bits set, counted as writes set them: fill and saturation without walking the bits.
    ones: Ones,
}

/// A link's set-bit count, kept as each insert and each loaded chunk changes it, in 40 bits
/// (the link stays 64 bytes): exact for links up to 2^40 bits (128 GiB). Past that it saturates
/// and [`Link::count_ones`] answers the model's expectation for the link's items instead.
#[derive(Clone, Copy, Debug, Default)]
struct Ones([u8; 5]);

impl Ones {
    const SATURATED: u64 = (1 << 40) - 1;

    fn get(self) -> u64 {
        let mut le = [0u8; 8];
        le[..5].copy_from_slice(&self.0);
        u64::from_le_bytes(le)
    }

    fn set(&mut self, n: u64) {
        let le = n.min(Self::SATURATED).to_le_bytes();
        self.0.copy_from_slice(&le[..5]);
    }

    /// `+ set - cleared`; a saturated count stays saturated.
    fn adjust(&mut self, set: u64, cleared: u64) {
        let n = self.get();
        if n != Self::SATURATED {
            self.set(n.saturating_add(set).saturating_sub(cleared));
        }
    }
}

fn popcount(words: &[u64]) -> u64 {
    words.iter().map(|w| u64::from(w.count_ones())).sum()
}

/// Allocates a zeroed array of `bytes` (a multiple of 8) without aborting on allocation failure.
fn zeroed_bits(bytes: u64) -> Option<CowArray<u64>> {
    CowArray::try_zeroed(usize::try_from(bytes / 8).ok()?, 1)
}

impl Link {
    /// Bits of the bit array (`bytes × 8`).
    pub fn bits(&self) -> u64 {
        self.bits.len() as u64 * 64
    }

    /// Bits per entry the link was sized with.
    pub fn bpe(&self) -> f64 {
        self.bpe
    }

    /// Legacy power-of-two exponent (0 for NOROUND links).
    pub fn n2(&self) -> u8 {
        self.n2
    }

    /// Probes per item.
    pub fn hashes(&self) -> u32 {
        u32::from(self.hashes)
    }

    /// The bit array as RedisBloom stores it (little-endian bytes).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.read_le_bytes(0, self.bytes())
    }

    /// Bits set (fill and saturation), in O(1): counted as inserts and loaded chunks set them,
    /// never by walking the bits (a metrics scrape reads it for every filter under the store
    /// lock). For a link past 2^40 bits, the expected count for its items:
    /// `bits × (1 − e^(−k·items/bits))`.
    pub fn count_ones(&self) -> u64 {
        let ones = self.ones.get();
        if ones != Ones::SATURATED {
            return ones;
        }
        let bits = self.bits() as f64;
        let k = f64::from(self.hashes);
        (bits * -(-k * self.counts.items as f64 / bits).exp_m1()) as u64
    }

    /// Bits set, counted by walking the array (tests check the kept count against it).
    #[cfg(test)]
    fn count_ones_walking(&self) -> u64 {
        self.bits.pieces().map(popcount).sum()
    }
}

/// The option bits a chain may have: FORCE64 always, NOROUND and NO_SCALING optional. An enum
/// (not a `u32`) so [`crate::Value`] can keep its tag in the unused values: a value is then 32
/// bytes, not 40, in every key's table slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Options {
    /// FORCE64.
    Force64 = OPT_FORCE64 as u8,
    /// FORCE64 | NOROUND: what every creation makes.
    NoRound = (OPT_FORCE64 | OPT_NOROUND) as u8,
    /// FORCE64 | NO_SCALING.
    Force64NoScaling = (OPT_FORCE64 | OPT_NO_SCALING) as u8,
    /// FORCE64 | NOROUND | NO_SCALING: what every non-scaling creation makes.
    NoRoundNoScaling = (OPT_FORCE64 | OPT_NOROUND | OPT_NO_SCALING) as u8,
}

impl Options {
    /// The options from their dump bits; `None` for anything else (unknown bits, no FORCE64).
    pub fn from_bits(bits: u32) -> Option<Self> {
        [
            Self::Force64,
            Self::NoRound,
            Self::Force64NoScaling,
            Self::NoRoundNoScaling,
        ]
        .into_iter()
        .find(|&o| o.bits() == bits)
    }

    /// The dump header's option bits.
    pub fn bits(self) -> u32 {
        self as u32
    }
}

/// The classic link: RedisBloom's bit array, hash and format.
impl ChainLink for Link {
    const LAYOUT: &'static str = "classic";
    const TYPE_NAME: &'static str = "MBbloom--";
    const ENCODING_VERSION: i32 = 4;
    const HEADER_PREFIX: usize = HEADER_FIXED;
    const MAGIC: Option<&'static [u8]> = None;
    type Settings = Options;
    type Hash = HashPair;
    type Plan = LinkPlan;

    fn settings(nonscaling: bool) -> Options {
        Options::from_bits(DEFAULT_OPTIONS | if nonscaling { OPT_NO_SCALING } else { 0 })
            .expect("valid option bits")
    }
    fn scales(settings: &Options) -> bool {
        settings.bits() & OPT_NO_SCALING == 0
    }
    fn hash(_: &Options, item: &[u8]) -> HashPair {
        HashPair::of(item)
    }

    fn plan(capacity: u64, error: f64) -> Option<LinkPlan> {
        LinkPlan::new(capacity, error)
    }
    fn allocate(plan: Admitted<LinkPlan>) -> Option<Self> {
        let LinkPlan {
            capacity,
            error,
            sizing,
            n2,
        } = plan.into_shape();
        Some(Self {
            bits: zeroed_bits(sizing.bytes)?,
            counts: LinkCounts {
                capacity,
                error,
                items: 0,
            },
            bpe: sizing.bpe,
            hashes: u16::try_from(sizing.hashes).ok()?,
            n2,
            ones: Ones::default(),
        })
    }

    fn contains(&self, h: HashPair) -> bool {
        let bits = self.bits();
        if let Some(words) = self.bits.as_slice() {
            // No page copied by a snapshot: index the one array directly.
            return (0..u32::from(self.hashes)).all(|i| {
                let at = h.position(i, bits);
                words[(at >> 6) as usize] & (1u64 << (at & 63)) != 0
            });
        }
        (0..u32::from(self.hashes)).all(|i| {
            let at = h.position(i, bits);
            self.bits.row((at >> 6) as usize, 1)[0] & (1u64 << (at & 63)) != 0
        })
    }

    fn insert(&mut self, h: HashPair) -> bool {
        let bits = self.bits();
        let hashes = u32::from(self.hashes);
        if let Some(words) = self.bits.as_mut_slice() {
            // No snapshot shares the array: set the bits in place.
            let mut newly_set = 0;
            for i in 0..hashes {
                let at = h.position(i, bits);
                let word = &mut words[(at >> 6) as usize];
                let mask = 1u64 << (at & 63);
                newly_set += u64::from(*word & mask == 0);
                *word |= mask;
            }
            self.ones.adjust(newly_set, 0);
            return newly_set > 0;
        }
        let mut newly_set = 0;
        for i in 0..hashes {
            let at = h.position(i, bits);
            let mask = 1u64 << (at & 63);
            // Read first: a bit already set needs no write, so no shared segment is copied.
            if self.bits.row((at >> 6) as usize, 1)[0] & mask == 0 {
                self.bits.row_mut((at >> 6) as usize, 1)[0] |= mask;
                newly_set += 1;
            }
        }
        self.ones.adjust(newly_set, 0);
        newly_set > 0
    }

    /// All k lines (nothing on a link a snapshot shares).
    fn prefetch(&self, h: HashPair) {
        self.prefetch_all(h);
    }
    fn lines(&self) -> usize {
        usize::from(self.hashes)
    }
    /// In probe stages (`probe.rs`).
    fn retain_present(&self, hashes: &[HashPair], pending: &mut Vec<u32>) {
        self.retain_present_staged(hashes, pending);
    }

    fn counts(&self) -> &LinkCounts {
        &self.counts
    }
    fn counts_mut(&mut self) -> &mut LinkCounts {
        &mut self.counts
    }
    fn bytes(&self) -> u64 {
        self.bits.len() as u64 * 8
    }

    /// Any range inside the array (8-aligned offsets and lengths are the common case).
    fn read_le_bytes(&self, offset: u64, len: u64) -> Vec<u8> {
        let (offset, len) = (offset as usize, len as usize);
        let first = offset / 8;
        let last = (offset + len).div_ceil(8);
        let mut words = Vec::with_capacity(last - first);
        let inside = self
            .bits
            .visit(first, last - first, |piece| words.extend_from_slice(piece));
        assert!(inside, "range lies inside the link");
        le_bytes(&words, offset - first * 8, len)
    }

    /// Keeps the set-bit count: what the overwritten words held is replaced by what they hold.
    fn write_le_bytes(&mut self, offset: u64, data: &[u8]) {
        let offset = offset as usize;
        let first = offset / 8;
        let last = (offset + data.len()).div_ceil(8);
        let mut words = self
            .bits
            .read(first, last - first)
            .expect("range lies inside the link");
        let before = popcount(&words);
        patch_le_bytes(&mut words, offset - first * 8, data);
        self.ones.adjust(popcount(&words), before);
        self.bits.write(first, &words);
    }

    fn visit_le_bytes(&self, f: &mut dyn FnMut(&[u8])) {
        visit_le_words(self.bits.pieces(), f);
    }
    fn heap_bytes(&self) -> u64 {
        self.bits.heap_bytes()
    }
    fn relocate(&mut self, walk: &mut Walk<'_>) {
        self.bits.relocate(walk);
    }

    /// From the kept set-bit count: a probe passes with probability `fill^k`.
    fn health(&self) -> LinkHealth {
        let bits = self.bits();
        let ones = self.count_ones();
        let fill = ones as f64 / bits as f64;
        LinkHealth {
            ones: ones as f64,
            bits,
            fpr: fill.powi(i32::from(self.hashes)),
        }
    }

    /// `bytes:B bits:b hashes:h hashwidth:64 capacity:c size:s ratio:r` (ratio as C's `%g`).
    fn debug_line(&self) -> String {
        format!(
            "bytes:{} bits:{} hashes:{} hashwidth:64 capacity:{} size:{} ratio:{}",
            self.bytes(),
            self.bits(),
            self.hashes,
            self.counts.capacity,
            self.counts.items,
            format_g(self.counts.error)
        )
    }

    fn dump_header(chain: &Chain<Self>) -> Vec<u8> {
        format::dump_header(chain)
    }
    fn header_len(prefix: &[u8]) -> Option<usize> {
        format::header_len(prefix)
    }
    fn parse_header(header: &[u8]) -> Result<ChainShape<Self>, &'static str> {
        format::parse_header(header)
    }
    fn rdb_save(chain: &Chain<Self>, out: &mut impl RdbSink) {
        format::rdb_save(chain, out)
    }
    fn rdb_load(input: &mut impl RdbSource, encver: i32) -> Result<Chain<Self>, RdbError> {
        format::rdb_load(input, encver)
    }
}

#[cfg(test)]
mod tests {
    use crate::budget::Allowance;
    use crate::types::sbchain::{AddError, BloomChain};

    #[test]
    fn info_size_matches_reference_examples() {
        // Defaults (0.01, 100): first link at 0.005 → bpe 11.03, 1102 bits → 144 bytes;
        // 32 + 64 + 144 = 240.
        assert_eq!(
            BloomChain::new(100, 0.01, 2, false).unwrap().size_bytes(),
            240
        );
        assert_eq!(
            BloomChain::new(100, 0.001, 2, false).unwrap().size_bytes(),
            296
        );
    }

    #[test]
    fn debug_lines_match_reference_chain() {
        let mut chain = BloomChain::new(10, 0.01, 2, false).unwrap();
        for i in 0..100 {
            chain
                .add(format!("item{i}").as_bytes(), &mut Allowance::unlimited())
                .unwrap();
        }
        let lines = chain.debug_lines();
        let prefixes = [
            "bytes:16 bits:128 hashes:8 hashwidth:64 capacity:10 size:",
            "bytes:32 bits:256 hashes:9 hashwidth:64 capacity:20 size:",
            "bytes:72 bits:576 hashes:10 hashwidth:64 capacity:40 size:",
            "bytes:160 bits:1280 hashes:11 hashwidth:64 capacity:80 size:",
        ];
        let ratios = [
            "ratio:0.005",
            "ratio:0.0025",
            "ratio:0.00125",
            "ratio:0.000625",
        ];
        assert_eq!(lines.len(), 5, "{lines:?}");
        assert_eq!(lines[0], format!("size:{}", chain.items()));
        for ((line, prefix), ratio) in lines[1..].iter().zip(prefixes).zip(ratios) {
            assert!(line.starts_with(prefix), "{line}");
            assert!(line.ends_with(ratio), "{line}");
        }
    }

    #[test]
    fn nonscaling_filter_fills_up() {
        let mut chain = BloomChain::new(5, 0.01, 0, true).unwrap();
        let mut added = 0;
        let mut full = false;
        for i in 0..50 {
            match chain.add(format!("x{i}").as_bytes(), &mut Allowance::unlimited()) {
                Ok(true) => added += 1,
                Ok(false) => {}
                Err(e) => {
                    assert_eq!(e, AddError::Full);
                    full = true;
                    break;
                }
            }
        }
        assert!(full);
        assert_eq!(added, 5);
        assert_eq!(chain.links().len(), 1);
    }

    /// A link a snapshot shares (pages copied on write) answers through the slow path alike.
    #[test]
    fn shared_link_answers_alike() {
        let mut chain = BloomChain::new(1000, 0.01, 2, false).unwrap();
        let items: Vec<Vec<u8>> = (0..200).map(|i| format!("c{i}").into_bytes()).collect();
        let snapshot = chain.clone();
        chain
            .add_many(&items[..100], &mut Allowance::unlimited(), |_| {})
            .unwrap();
        assert!(chain.links()[0].bits.as_slice().is_none(), "pages copied");
        let single: Vec<bool> = items.iter().map(|p| chain.contains(p)).collect();
        assert_eq!(chain.contains_many(&items), single);
        assert!(snapshot.contains_many(&items).iter().all(|&p| !p));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// The kept set-bit counts are exact, through inserts and chunk loads.
        #[test]
        fn kept_counts_are_exact(
            items in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24), 1..400),
            capacity in 1u64..50,
            error in 0.001f64..0.3,
            growth in 1u32..5,
        ) {
            let mut chain = BloomChain::new(capacity, error, growth, false).unwrap();
            for item in &items {
                chain.add(item, &mut Allowance::unlimited()).unwrap();
            }
            let mut copy = BloomChain::from_header(&chain.dump_header()).unwrap();
            for (iter, len) in chain.chunk_plan() {
                copy.load_chunk(iter, &chain.chunk_bytes(iter, len)).unwrap();
            }
            for link in chain.links().iter().chain(copy.links()) {
                proptest::prop_assert_eq!(link.count_ones(), link.count_ones_walking());
            }
        }
    }
}
