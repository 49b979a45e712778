//! RedisBloom's scalable Bloom filter ("SBChain") as a compatibility type: the exact link sizing,
//! MurmurHash64A double hashing, scaling rule and SCANDUMP/LOADCHUNK byte format that RedisBloom
//! uses, so dumps move between RedisBloom and bloomgate unchanged. The core's native filters use a
//! different hash and probe scheme. A link's bits live in copy-on-write segments
//! ([`CowArray`]) so a snapshot shares them instead of copying; bit `i` is bit `i % 64` of
//! little-endian word `i / 64`, the LSB-first byte layout RedisBloom dumps use. The dump header
//! and chunks, and the validation of a loaded header, are in `dump.rs`.
//!
//! Implemented from RedisBloom's documented formats and observed behaviour, not from its source.

use crate::budget::{Admitted, Allowance, Shape};
use crate::encoding::murmur::murmur64a;
use crate::types::cow::CowArray;
use bloomgate::relocate::Walk;

mod batch;
mod blocked;
mod dump;
mod merge;
mod scaling;
pub use blocked::{
    BlockedChain, BlockedChainPlan, BlockedLink, BlockedShape, BLOCKED_MAGIC,
    HEADER_FIXED as BLOCKED_HEADER_FIXED,
};
pub use dump::ChainShape;
pub use merge::estimate_items;
use scaling::ChainLink;

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
/// Largest growth factor: what `BF.RESERVE … EXPANSION` accepts (RedisBloom's cap). A loaded
/// header may not claim more: the growth factor sizes the next link.
pub const MAX_GROWTH: u32 = 32768;
/// Largest capacity `BF.RESERVE` takes (and the Bloom-family types built like it, `CBF.*` and
/// `WF.*`).
pub const MAX_CAPACITY: u64 = 1 << 30;

/// `BF.RESERVE`'s error-rate range, (0, 1), with its refusal.
pub fn check_error_rate(error: f64) -> Result<(), &'static str> {
    if error > 0.0 && error < 1.0 {
        Ok(())
    } else {
        Err("ERR error rate must be in the range (0.000000, 1.000000)")
    }
}

/// `BF.RESERVE`'s capacity range, [1, [`MAX_CAPACITY`]], with its refusal.
pub fn check_capacity(capacity: u64) -> Result<(), &'static str> {
    if (1..=MAX_CAPACITY).contains(&capacity) {
        Ok(())
    } else {
        Err("ERR capacity must be in the range [1, 1073741824]")
    }
}
/// SCANDUMP never returns more than 16 MiB in one chunk.
pub const MAX_SCANDUMP_CHUNK: u64 = crate::encoding::chunks::CHUNK_BYTES;
/// `BF.INFO Size` accounting: the chain struct is 32 bytes and each link struct 64 bytes in
/// RedisBloom's memory; clients see `32 + 64 * links + Σ link bytes`.
const CHAIN_OVERHEAD: u64 = 32;
const LINK_OVERHEAD: u64 = 64;
/// Dump header sizes: `u64 size, u32 nfilters, u32 options, u32 growth`, then per link
/// `u64 bytes, u64 bits, u64 size, f64 error, f64 bpe, u32 hashes, u64 entries, u8 n2`.
pub const HEADER_FIXED: usize = 20;
const HEADER_LINK: usize = 53;

/// LOADCHUNK: a header or chunk that fails validation.
pub const ERR_BAD_DATA: &str = "ERR received bad data";
/// LOADCHUNK: an offset outside every link.
pub const ERR_NO_LINK: &str = "ERR invalid offset - no link found";
/// LOADCHUNK: a chunk running past its link.
pub const ERR_CHUNK_TOO_BIG: &str = "ERR invalid chunk - Too big for current filter";

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

/// A link about to be allocated: a chain's first link or the next one it grows by.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkPlan {
    capacity: u64,
    error: f64,
    sizing: LinkSizing,
}

impl LinkPlan {
    /// A link for `capacity` items at `error`; `None` if its size does not fit in memory
    /// addresses.
    pub fn new(capacity: u64, error: f64) -> Option<Self> {
        Some(Self {
            capacity,
            error,
            sizing: LinkSizing::new(capacity, error)?,
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
    error: f64,
    bpe: f64,
    capacity: u64,
    /// Items this link newly took (RedisBloom's per-link `size`).
    items: u64,
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

impl Link {
    /// Allocates a planned link (its bytes admitted by the caller: a chain plan's or a growth
    /// step's).
    fn allocate(plan: LinkPlan) -> Option<Self> {
        let LinkPlan {
            capacity,
            error,
            sizing,
        } = plan;
        Some(Self {
            bits: zeroed_bits(sizing.bytes)?,
            error,
            bpe: sizing.bpe,
            capacity,
            items: 0,
            hashes: u16::try_from(sizing.hashes).ok()?,
            n2: 0,
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

    /// Sets every probe bit; true if at least one was clear.
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

    /// Bytes of the bit array.
    pub fn bytes(&self) -> u64 {
        self.bits.len() as u64 * 8
    }

    /// Bits of the bit array (`bytes × 8`).
    pub fn bits(&self) -> u64 {
        self.bits.len() as u64 * 64
    }

    /// Bits per entry the link was sized with.
    pub fn bpe(&self) -> f64 {
        self.bpe
    }

    /// The link's error rate.
    pub fn error(&self) -> f64 {
        self.error
    }

    /// Items the link was sized for (RedisBloom's `entries`).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Items this link newly took.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// Legacy power-of-two exponent (0 for NOROUND links).
    pub fn n2(&self) -> u8 {
        self.n2
    }

    /// The bit array as RedisBloom stores it (little-endian bytes).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.read_le_bytes(0, self.bytes() as usize)
    }

    /// `len` bytes of the little-endian image from byte `offset` (8-aligned offsets and lengths
    /// are the common case; any range inside the array works).
    fn read_le_bytes(&self, offset: usize, len: usize) -> Vec<u8> {
        let first = offset / 8;
        let last = (offset + len).div_ceil(8);
        let mut out = Vec::with_capacity((last - first) * 8);
        let inside = self.bits.visit(first, last - first, |words| {
            for w in words {
                out.extend_from_slice(&w.to_le_bytes());
            }
        });
        assert!(inside, "range lies inside the link");
        out.drain(..offset - first * 8);
        out.truncate(len);
        out
    }

    /// Overwrites the little-endian image at byte `offset` with `data` (inside the array).
    fn write_le_bytes(&mut self, offset: usize, data: &[u8]) {
        let first = offset / 8;
        let last = (offset + data.len()).div_ceil(8);
        let mut words = self
            .bits
            .read(first, last - first)
            .expect("range lies inside the link");
        let before = popcount(&words);
        for (i, &byte) in data.iter().enumerate() {
            let b = offset - first * 8 + i;
            let shift = (b & 7) * 8;
            let word = &mut words[b >> 3];
            *word = (*word & !(0xffu64 << shift)) | (u64::from(byte) << shift);
        }
        self.ones.adjust(popcount(&words), before);
        self.bits.write(first, &words);
    }

    /// Probes per item.
    pub fn hashes(&self) -> u32 {
        u32::from(self.hashes)
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
        (bits * -(-k * self.items as f64 / bits).exp_m1()) as u64
    }

    /// Bits set, counted by walking the array (tests check the kept count against it).
    #[cfg(test)]
    fn count_ones_walking(&self) -> u64 {
        self.bits.pieces().map(popcount).sum()
    }

    /// `bytes:B bits:b hashes:h hashwidth:64 capacity:c size:s ratio:r` (ratio as C's `%g`).
    fn debug_line(&self) -> String {
        format!(
            "bytes:{} bits:{} hashes:{} hashwidth:64 capacity:{} size:{} ratio:{}",
            self.bytes(),
            self.bits(),
            self.hashes,
            self.capacity,
            self.items,
            format_g(self.error)
        )
    }
}

/// The classic link under the one scaling rule.
impl ChainLink for Link {
    type Hash = HashPair;
    type Plan = LinkPlan;

    fn plan(capacity: u64, error: f64) -> Option<LinkPlan> {
        LinkPlan::new(capacity, error)
    }
    fn allocate(plan: Admitted<LinkPlan>) -> Option<Self> {
        Link::allocate(plan.into_shape())
    }
    fn contains(&self, h: HashPair) -> bool {
        Link::contains(self, h)
    }
    fn insert(&mut self, h: HashPair) -> bool {
        Link::insert(self, h)
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn error(&self) -> f64 {
        self.error
    }
    fn items(&self) -> u64 {
        self.items
    }
    fn count_item(&mut self) {
        self.items = self.items.saturating_add(1);
    }
    fn bytes(&self) -> u64 {
        Link::bytes(self)
    }
    fn read_le_bytes(&self, offset: u64, len: u64) -> Vec<u8> {
        Link::read_le_bytes(self, offset as usize, len as usize)
    }
}

/// Allocates a zeroed array of `bytes` (a multiple of 8) without aborting on allocation failure.
fn zeroed_bits(bytes: u64) -> Option<CowArray<u64>> {
    CowArray::try_zeroed(usize::try_from(bytes / 8).ok()?, 1)
}

/// Why an add did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddError {
    /// Non-scaling filter at capacity: `ERR non scaling filter is full`.
    Full,
    /// A new link could not be built: `ERR problem inserting into filter`.
    GrowFailed,
    /// A new link would exceed the memory budget.
    OutOfMemory,
    /// A new link would take the chain past `bloom-memory-usage-limit`.
    OverCap,
}

impl AddError {
    /// RedisBloom's error text.
    pub fn message(self) -> &'static str {
        match self {
            AddError::Full => "ERR non scaling filter is full",
            AddError::GrowFailed => "ERR problem inserting into filter",
            AddError::OutOfMemory => crate::ERR_OOM,
            AddError::OverCap => crate::ERR_CAP,
        }
    }

    /// The error for a new link the allowance refused.
    pub(crate) fn refused(over: crate::budget::OverBudget) -> Self {
        match over.limit {
            crate::budget::Limit::Memory => AddError::OutOfMemory,
            crate::budget::Limit::KeyCap => AddError::OverCap,
        }
    }
}

/// A RedisBloom scalable Bloom filter: links newest last, in an exactly sized boxed slice (a
/// chain grows rarely; most keep their one link).
#[derive(Clone, Debug)]
pub struct BloomChain {
    links: Box<[Link]>,
    items: u64,
    options: Options,
    growth: u32,
}

/// The option bits a chain may have: FORCE64 always, NOROUND and NO_SCALING optional. An enum
/// (not a `u32`) so [`crate::Value`] can keep its tag in the unused values: a value is then 32
/// bytes, not 40, in every key's table slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Options {
    Force64 = OPT_FORCE64 as u8,
    NoRound = (OPT_FORCE64 | OPT_NOROUND) as u8,
    Force64NoScaling = (OPT_FORCE64 | OPT_NO_SCALING) as u8,
    NoRoundNoScaling = (OPT_FORCE64 | OPT_NOROUND | OPT_NO_SCALING) as u8,
}

impl Options {
    /// The options from their dump bits; `None` for anything else (unknown bits, no FORCE64).
    fn from_bits(bits: u32) -> Option<Self> {
        [
            Self::Force64,
            Self::NoRound,
            Self::Force64NoScaling,
            Self::NoRoundNoScaling,
        ]
        .into_iter()
        .find(|&o| o.bits() == bits)
    }

    fn bits(self) -> u32 {
        self as u32
    }
}

impl BloomChain {
    /// The chain `BF.RESERVE key error capacity [EXPANSION growth] [NONSCALING]` builds, not yet
    /// allocated: its first link uses `error/2` when scaling, `error` when not. Arguments are
    /// validated by the caller. `None` if the link's size does not fit in memory addresses.
    pub fn plan(capacity: u64, error: f64, growth: u32, nonscaling: bool) -> Option<ChainPlan> {
        let options =
            Options::from_bits(DEFAULT_OPTIONS | if nonscaling { OPT_NO_SCALING } else { 0 })
                .expect("valid option bits");
        let first_error = scaling::first_error(error, nonscaling);
        Some(ChainPlan {
            link: LinkPlan::new(capacity, first_error)?,
            options,
            growth,
        })
    }

    /// Allocates a planned chain; `None` if the allocator refuses.
    pub fn create(plan: Admitted<ChainPlan>) -> Option<Self> {
        let ChainPlan {
            link,
            options,
            growth,
        } = plan.into_shape();
        let link = Link::allocate(link)?;
        Some(Self {
            links: Box::new([link]),
            items: 0,
            options,
            growth,
        })
    }

    /// [`Self::plan`] and [`Self::create`] with no budget: for values whose size the caller has
    /// bounded itself (tests, tools); hosts admit a shape against their budget instead.
    pub fn new(capacity: u64, error: f64, growth: u32, nonscaling: bool) -> Option<Self> {
        let plan = Self::plan(capacity, error, growth, nonscaling)?;
        Self::create(Allowance::unlimited().admit(plan).ok()?)
    }

    /// Whether the chain may grow.
    pub fn is_scaling(&self) -> bool {
        self.options.bits() & OPT_NO_SCALING == 0
    }

    /// Adds the item hashed to `h` by the one scaling rule both chain types share
    /// (`scaling.rs`): `Ok(true)` if new, `Ok(false)` if any link already reports it. When the
    /// newest link is at capacity, a scaling chain grows by a link of `capacity * growth` items
    /// at half the error, admitted against `allowance` before it is allocated. (`batch.rs`
    /// hashes items and prefetches for it.)
    fn add_hashed(&mut self, h: HashPair, allowance: &mut Allowance) -> Result<bool, AddError> {
        let scaling = self.is_scaling();
        scaling::add(
            &mut self.links,
            &mut self.items,
            h,
            scaling,
            self.growth,
            allowance,
        )
    }

    /// BF.CARD / "Number of items inserted".
    pub fn items(&self) -> u64 {
        self.items
    }

    /// Σ link capacities (BF.INFO Capacity); saturating, though loaded headers are checked to
    /// keep it within `i64`.
    pub fn capacity(&self) -> u64 {
        self.links
            .iter()
            .fold(0u64, |sum, l| sum.saturating_add(l.capacity))
    }

    /// The links, oldest first.
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// The expansion factor (`Expansion rate`).
    pub fn growth(&self) -> u32 {
        self.growth
    }

    /// The dump header's option bits.
    pub fn options(&self) -> u32 {
        self.options.bits()
    }

    /// Offers the link array, then each link's bits, to a host that moves allocations (see
    /// [`bloomgate::relocate`]).
    pub fn relocate(&mut self, walk: &mut Walk<'_>) {
        walk.boxed_slice(&mut self.links);
        for link in &mut self.links {
            link.bits.relocate(walk);
        }
    }

    /// Heap bytes the chain holds beyond its own struct (links and bits, in allocator size
    /// classes): what it really costs, where [`Self::size_bytes`] is RedisBloom's figure.
    pub fn heap_bytes(&self) -> u64 {
        crate::types::cow::allocation_size(size_of_val::<[Link]>(&self.links) as u64)
            + self.links.iter().map(|l| l.bits.heap_bytes()).sum::<u64>()
    }

    /// BF.INFO Size: `32 + 64 × links + Σ link bytes`.
    pub fn size_bytes(&self) -> u64 {
        CHAIN_OVERHEAD
            + self
                .links
                .iter()
                .map(|l| LINK_OVERHEAD + l.bytes())
                .sum::<u64>()
    }

    /// BF.DEBUG lines: `size:N`, then one line per link.
    pub fn debug_lines(&self) -> Vec<String> {
        let mut lines = vec![format!("size:{}", self.items)];
        lines.extend(self.links.iter().map(Link::debug_line));
        lines
    }
}

/// A new chain as `BF.RESERVE` (or an auto-creating add) describes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChainPlan {
    link: LinkPlan,
    options: Options,
    growth: u32,
}

impl Shape for ChainPlan {
    fn bytes(&self) -> u64 {
        self.link.bytes()
    }
}

/// C's `printf("%g", x)`: 6 significant digits, trailing zeros removed, exponent form when the
/// decimal exponent is < -4 or ≥ 6.
pub fn format_g(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let sci = format!("{x:.5e}");
    let (mantissa, exp) = sci.split_once('e').expect("exponent form");
    let exp: i32 = exp.parse().expect("integer exponent");
    if !(-4..6).contains(&exp) {
        let mantissa = strip_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (5 - exp) as usize;
        strip_zeros(&format!("{x:.decimals$}")).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn format_g_matches_c() {
        assert_eq!(format_g(0.005), "0.005");
        assert_eq!(format_g(0.000625), "0.000625");
        assert_eq!(format_g(0.0000625), "6.25e-05");
        assert_eq!(format_g(0.01), "0.01");
        assert_eq!(format_g(1234567.0), "1.23457e+06");
        assert_eq!(format_g(0.1), "0.1");
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

    #[test]
    fn dump_and_load_round_trip_bit_exact() {
        let mut chain = BloomChain::new(10, 0.01, 2, false).unwrap();
        for i in 0..100 {
            chain
                .add(format!("k{i}").as_bytes(), &mut Allowance::unlimited())
                .unwrap();
        }
        let header = chain.dump_header();
        assert_eq!(header.len(), 20 + 53 * chain.links().len());
        let mut copy = BloomChain::from_header(&header).unwrap();
        let mut iter = 1;
        loop {
            let (next, chunk) = chain.dump_chunk(iter);
            if next == 0 {
                assert!(chunk.is_empty());
                break;
            }
            copy.load_chunk(next, &chunk).unwrap();
            iter = next;
        }
        for i in 0..100 {
            assert!(copy.contains(format!("k{i}").as_bytes()));
        }
        assert_eq!(copy.dump_header(), header);
        assert_eq!(copy.items(), chain.items());
        // Chunks never cross links: first chunk is exactly link 0.
        assert_eq!(chain.dump_chunk(1), (17, chain.links[0].to_le_bytes()));
    }

    #[test]
    fn header_validation_rejects_each_bad_field() {
        let chain = BloomChain::new(100, 0.01, 2, false).unwrap();
        let good = chain.dump_header();
        assert!(BloomChain::from_header(&good).is_ok());
        let corrupt = |at: usize, bytes: &[u8]| {
            let mut h = good.clone();
            h[at..at + bytes.len()].copy_from_slice(bytes);
            BloomChain::from_header(&h).err()
        };
        assert_eq!(corrupt(0, &1u64.to_le_bytes()), Some(ERR_BAD_DATA)); // size != Σ
        assert_eq!(corrupt(8, &2u32.to_le_bytes()), Some(ERR_BAD_DATA)); // nfilters
        assert_eq!(corrupt(12, &(5u32 | 16).to_le_bytes()), Some(ERR_BAD_DATA)); // options
        assert_eq!(corrupt(12, &1u32.to_le_bytes()), Some(ERR_BAD_DATA)); // no FORCE64
        assert_eq!(corrupt(16, &32768u32.to_le_bytes()), None); // BF.RESERVE's largest growth
        assert_eq!(corrupt(16, &32769u32.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(16, &(1u32 << 31).to_le_bytes()), Some(ERR_BAD_DATA));
        // A link's bytes must be what its capacity and bpe give (144 here).
        let mut bigger = good.clone();
        bigger[20..28].copy_from_slice(&152u64.to_le_bytes());
        bigger[28..36].copy_from_slice(&(152u64 * 8).to_le_bytes());
        assert_eq!(BloomChain::from_header(&bigger).err(), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(20, &7u64.to_le_bytes()), Some(ERR_BAD_DATA)); // bytes
        assert_eq!(corrupt(28, &7u64.to_le_bytes()), Some(ERR_BAD_DATA)); // bits
        let mut over = good.clone();
        over[0..8].copy_from_slice(&5000u64.to_le_bytes());
        over[36..44].copy_from_slice(&5000u64.to_le_bytes());
        assert!(
            BloomChain::from_header(&over).is_ok(),
            "items > capacity: accepted"
        );
        assert_eq!(corrupt(44, &1.5f64.to_le_bytes()), Some(ERR_BAD_DATA)); // error
        assert_eq!(corrupt(52, &f64::NAN.to_le_bytes()), Some(ERR_BAD_DATA)); // bpe
        assert_eq!(
            hashes_for(-(f64::from_bits(1).ln() / LN2_SQUARED)),
            MAX_HASHES,
            "no error rate needs more"
        );
        assert_eq!(corrupt(60, &3u32.to_le_bytes()), Some(ERR_BAD_DATA)); // hashes
        assert_eq!(corrupt(64, &0u64.to_le_bytes()), Some(ERR_BAD_DATA)); // capacity
        assert_eq!(corrupt(72, &[64]), Some(ERR_BAD_DATA)); // n2
        assert_eq!(
            BloomChain::from_header(&good[..good.len() - 1]).err(),
            Some(ERR_BAD_DATA)
        );
        assert_eq!(BloomChain::from_header(&[]).err(), Some(ERR_BAD_DATA));
    }

    #[test]
    fn load_chunk_bounds() {
        let chain = BloomChain::new(100, 0.01, 2, false).unwrap(); // one 144-byte link
        let mut copy = BloomChain::from_header(&chain.dump_header()).unwrap();
        assert_eq!(copy.load_chunk(0, &[1]), Err(ERR_BAD_DATA));
        assert_eq!(copy.load_chunk(3, &[1; 4]), Err(ERR_BAD_DATA));
        assert_eq!(copy.load_chunk(4, &[1; 4]), Err(ERR_NO_LINK));
        assert_eq!(copy.load_chunk(146, &[1; 145]), Err(ERR_CHUNK_TOO_BIG));
        assert_eq!(copy.load_chunk(1000, &[1]), Err(ERR_NO_LINK));
        assert_eq!(copy.load_chunk(145, &[0xff; 144]), Ok(()));
        assert!(copy.contains(b"anything"));
        assert_eq!(copy.links()[0].count_ones(), 144 * 8);
        // Overwriting part of the array adjusts the kept count by what changed.
        assert_eq!(copy.load_chunk(11, &[0x0f; 10]), Ok(()));
        assert_eq!(copy.links()[0].count_ones(), 134 * 8 + 10 * 4);
        assert_eq!(
            copy.links()[0].count_ones(),
            copy.links()[0].count_ones_walking()
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Never a false negative: every added item is reported present, through scaling and
        /// through a SCANDUMP/LOADCHUNK round trip.
        #[test]
        fn no_false_negatives(
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
            let mut iter = 1;
            loop {
                let (next, chunk) = chain.dump_chunk(iter);
                if next == 0 {
                    break;
                }
                copy.load_chunk(next, &chunk).unwrap();
                iter = next;
            }
            for item in &items {
                proptest::prop_assert!(chain.contains(item));
                proptest::prop_assert!(copy.contains(item));
            }
            // The kept set-bit counts are exact, through inserts and chunk loads.
            for link in chain.links().iter().chain(copy.links()) {
                proptest::prop_assert_eq!(link.count_ones(), link.count_ones_walking());
            }
        }
    }
}
