//! The blocked Bloom chain (`BF.RESERVE … LAYOUT blocked`, our type `BGbloomBK`): a scalable
//! chain whose links are the core's cache-line blocked filter ([`BlockedBloomFilter`]: every
//! probe of an item inside one 64-byte block, so a query costs one memory access per link
//! instead of one per probe). It scales by the chain's one rule (`scaling.rs`): each new link
//! blocked, `capacity × growth` items at half the error. Each link is sized by the core's exact
//! blocked model, so its *measured* false-positive rate meets the link's error rate (a blocked
//! link needs more bits per item than a classic one at the same rate: ~10.1 against 9.6 at 1%,
//! ~15.7 against 14.4 at 0.1%).
//!
//! Items are hashed once (XXH3-128 with the core's default seed) for every link. It is not
//! RedisBloom's format and RedisBloom cannot load it: its own type name keeps it apart.
//!
//! # Dump format (`BF.SCANDUMP` / `BF.LOADCHUNK`, RDB)
//! The header (iterator 0 → `[1, header]`), little-endian: magic `BGBK`, format version `1`,
//! `u8 flags` (bit 0: non-scaling), `u16 0`, `u64 items`, `u32 growth`, `u32 links`, then per
//! link `u64 capacity, f64 error, u64 items, u64 bits, u32 hashes`. Then the links' bit arrays
//! (the core's word order, each word little-endian), in chunks of at most 16 MiB that never
//! cross a link, each returned with 1 + the byte offset after it, as the classic chain's.

use super::{format_g, AddError, ChainLink, ERR_BAD_DATA};
use crate::budget::{Admitted, Allowance, Shape};
use crate::encoding::chunks::plan_parts;
use bloomgate::hash::DEFAULT_SEED;
use bloomgate::{BlockedBloomFilter, KeyHash, Layout, Params};

/// The dump header's first bytes; a classic header cannot start so (its first field is an
/// item count).
pub const BLOCKED_MAGIC: &[u8; 4] = b"BGBK";
const FORMAT_VERSION: u8 = 1;
const FLAG_NONSCALING: u8 = 1;
/// Fixed part of the header: magic, version, flags, reserved, items, growth, link count.
pub const HEADER_FIXED: usize = 4 + 1 + 1 + 2 + 8 + 4 + 4;
const HEADER_LINK: usize = 8 + 8 + 8 + 8 + 4;
/// Most links a header may declare (a chain growing by 1 from capacity 1 stops far earlier).
const MAX_LINKS: usize = 1 << 16;
/// `BF.INFO Size` accounting, as the classic chain's: a chain struct and a link struct each.
const CHAIN_OVERHEAD: u64 = 32;
const LINK_OVERHEAD: u64 = 64;

/// One blocked link: the core filter and what the chain's rule needs of it.
#[derive(Clone, Debug)]
pub struct BlockedLink {
    filter: BlockedBloomFilter,
    capacity: u64,
    error: f64,
    items: u64,
}

/// A blocked link sized for its capacity and error rate by the core's blocked model, not yet
/// allocated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockedLinkPlan {
    capacity: u64,
    error: f64,
    params: Params,
}

impl Shape for BlockedLinkPlan {
    fn bytes(&self) -> u64 {
        self.params.bytes()
    }
}

impl BlockedLink {
    /// Bytes of the bit array.
    pub fn bytes(&self) -> u64 {
        self.filter.params().bytes()
    }
    /// Probes per item.
    pub fn hashes(&self) -> u32 {
        self.filter.params().hashes
    }
    /// Items the link was sized for.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }
    /// The link's error rate.
    pub fn error(&self) -> f64 {
        self.error
    }
    /// Items this link newly took.
    pub fn items(&self) -> u64 {
        self.items
    }
    /// The core filter.
    pub fn filter(&self) -> &BlockedBloomFilter {
        &self.filter
    }

    /// `len` bytes of the little-endian image from byte `offset` (inside the array).
    fn read_le_bytes(&self, offset: u64, len: u64) -> Vec<u8> {
        let words = self.filter.words();
        let first = (offset / 8) as usize;
        let last = (offset + len).div_ceil(8) as usize;
        let mut out: Vec<u8> = words[first..last]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        out.drain(..(offset - first as u64 * 8) as usize);
        out.truncate(len as usize);
        out
    }

    /// Overwrites the little-endian image at byte `offset` with `data` (inside the array).
    fn write_le_bytes(&mut self, offset: u64, data: &[u8]) {
        let words = self.filter.words_mut();
        for (i, &byte) in data.iter().enumerate() {
            let b = offset as usize + i;
            let shift = (b & 7) * 8;
            let word = &mut words[b >> 3];
            *word = (*word & !(0xffu64 << shift)) | (u64::from(byte) << shift);
        }
    }
}

impl ChainLink for BlockedLink {
    type Hash = KeyHash;
    type Plan = BlockedLinkPlan;

    fn plan(capacity: u64, error: f64) -> Option<BlockedLinkPlan> {
        let params = Params::for_items(Layout::Blocked, capacity, error).ok()?;
        Some(BlockedLinkPlan {
            capacity,
            error,
            params,
        })
    }
    fn allocate(plan: Admitted<BlockedLinkPlan>) -> Option<Self> {
        let plan = plan.into_shape();
        Some(Self {
            filter: BlockedBloomFilter::with_params(plan.params, DEFAULT_SEED).ok()?,
            capacity: plan.capacity,
            error: plan.error,
            items: 0,
        })
    }
    fn contains(&self, h: KeyHash) -> bool {
        self.filter.contains_hash(h)
    }
    fn insert(&mut self, h: KeyHash) -> bool {
        !self.filter.insert_hash(h)
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
        BlockedLink::bytes(self)
    }
    fn read_le_bytes(&self, offset: u64, len: u64) -> Vec<u8> {
        BlockedLink::read_le_bytes(self, offset, len)
    }
}

/// A scalable Bloom filter of blocked links, newest last.
#[derive(Clone, Debug)]
pub struct BlockedChain {
    links: Box<[BlockedLink]>,
    items: u64,
    growth: u32,
    scaling: bool,
}

/// A new blocked chain as `BF.RESERVE … LAYOUT blocked` describes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockedChainPlan {
    link: BlockedLinkPlan,
    growth: u32,
    scaling: bool,
}

impl Shape for BlockedChainPlan {
    fn bytes(&self) -> u64 {
        self.link.bytes()
    }
}

impl BlockedChain {
    /// The chain `BF.RESERVE key error capacity [EXPANSION growth] [NONSCALING] LAYOUT blocked`
    /// builds, not yet allocated (first link at `error/2` when scaling, as the classic chain's).
    /// `None` if no blocked filter of a supported size meets the rate.
    pub fn plan(
        capacity: u64,
        error: f64,
        growth: u32,
        nonscaling: bool,
    ) -> Option<BlockedChainPlan> {
        Some(BlockedChainPlan {
            link: BlockedLink::plan(capacity, super::scaling::first_error(error, nonscaling))?,
            growth,
            scaling: !nonscaling,
        })
    }

    /// Allocates a planned chain; `None` if the core refuses the parameters.
    pub fn create(plan: Admitted<BlockedChainPlan>) -> Option<Self> {
        let BlockedChainPlan {
            link,
            growth,
            scaling,
        } = plan.into_shape();
        let link = BlockedLink::allocate(Allowance::unlimited().admit(link).ok()?)?;
        Some(Self {
            links: Box::new([link]),
            items: 0,
            growth,
            scaling,
        })
    }

    /// [`Self::plan`] and [`Self::create`] with no budget (tests, tools).
    pub fn new(capacity: u64, error: f64, growth: u32, nonscaling: bool) -> Option<Self> {
        let plan = Self::plan(capacity, error, growth, nonscaling)?;
        Self::create(Allowance::unlimited().admit(plan).ok()?)
    }

    fn hash(item: &[u8]) -> KeyHash {
        KeyHash::of(item, DEFAULT_SEED)
    }

    /// Adds `item` by the chain's scaling rule: `Ok(true)` if new.
    pub fn add(&mut self, item: &[u8], allowance: &mut Allowance) -> Result<bool, AddError> {
        let scaling = self.scaling;
        super::scaling::add(
            &mut self.links,
            &mut self.items,
            Self::hash(item),
            scaling,
            self.growth,
            allowance,
        )
    }

    /// Whether `item` may be present (any link reports it).
    pub fn contains(&self, item: &[u8]) -> bool {
        let h = Self::hash(item);
        self.links.iter().rev().any(|link| link.contains(h))
    }

    /// [`Self::contains`] of every item, through the core's batched query: all items hashed
    /// first, then each link's blocks requested ahead of the tests, so a batch costs about one
    /// memory latency per link rather than one per item.
    pub fn contains_many<I: AsRef<[u8]>>(&self, items: &[I]) -> Vec<bool> {
        let hashes: Vec<KeyHash> = items.iter().map(|i| Self::hash(i.as_ref())).collect();
        let mut found = vec![false; hashes.len()];
        let mut answers = Vec::with_capacity(hashes.len());
        for link in self.links.iter().rev() {
            answers.clear();
            link.filter.contains_batch_hashes(&hashes, &mut answers);
            for (f, a) in found.iter_mut().zip(&answers) {
                *f |= a;
            }
        }
        found
    }

    /// Whether the chain may grow.
    pub fn is_scaling(&self) -> bool {
        self.scaling
    }
    /// BF.CARD.
    pub fn items(&self) -> u64 {
        self.items
    }
    /// Σ link capacities.
    pub fn capacity(&self) -> u64 {
        self.links
            .iter()
            .fold(0u64, |sum, l| sum.saturating_add(l.capacity))
    }
    /// The links, oldest first.
    pub fn links(&self) -> &[BlockedLink] {
        &self.links
    }
    /// The expansion factor.
    pub fn growth(&self) -> u32 {
        self.growth
    }

    /// BF.INFO Size: `32 + 64 × links + Σ link bytes`, as the classic chain counts.
    pub fn size_bytes(&self) -> u64 {
        CHAIN_OVERHEAD
            + self
                .links
                .iter()
                .map(|l| LINK_OVERHEAD + l.bytes())
                .sum::<u64>()
    }

    /// Offers the link array, then each link's blocks, to a host that moves allocations (see
    /// [`bloomgate::relocate`]).
    pub fn relocate(&mut self, walk: &mut bloomgate::relocate::Walk<'_>) {
        walk.boxed_slice(&mut self.links);
        for link in &mut self.links {
            link.filter.relocate(walk);
        }
    }

    /// Heap bytes beyond the struct: the link slice and the bit arrays.
    pub fn heap_bytes(&self) -> u64 {
        crate::types::cow::allocation_size(size_of_val::<[BlockedLink]>(&self.links) as u64)
            + self.links.iter().map(BlockedLink::bytes).sum::<u64>()
    }

    /// Expected fill ratio and false-positive rate, from each link's item count and the core's
    /// blocked model: O(links), never a walk of the bits (a metrics scrape reads it for every
    /// filter under the store lock). A probe misses every link with probability
    /// Π_i (1 − fpr_i).
    pub fn model_health(&self) -> (f64, f64) {
        let mut miss_all = 1.0;
        let (mut ones, mut bits) = (0.0, 0u64);
        for link in self.links.iter() {
            let params = link.filter.params();
            let (m, k) = (params.bits as f64, f64::from(params.hashes));
            ones += m * -(-k * link.items as f64 / m).exp_m1();
            bits += params.bits;
            miss_all *= 1.0 - params.fpr_at(link.items);
        }
        (ones / bits.max(1) as f64, 1.0 - miss_all)
    }

    /// BF.DEBUG lines: `size:N`, then one line per link (the classic's fields, `layout:blocked`
    /// last).
    pub fn debug_lines(&self) -> Vec<String> {
        let mut lines = vec![format!("size:{}", self.items)];
        lines.extend(self.links.iter().map(|l| {
            format!(
                "bytes:{} bits:{} hashes:{} hashwidth:64 capacity:{} size:{} ratio:{} layout:blocked",
                l.bytes(),
                l.bytes() * 8,
                l.hashes(),
                l.capacity,
                l.items,
                format_g(l.error)
            )
        }));
        lines
    }

    /// Where each SCANDUMP chunk ends: `(iterator returned with it, length)`.
    pub fn chunk_plan(&self) -> Vec<(i64, u64)> {
        plan_parts(self.links.iter().map(BlockedLink::bytes))
    }

    /// The SCANDUMP header (iterator 0).
    pub fn dump_header(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_FIXED + HEADER_LINK * self.links.len());
        out.extend_from_slice(BLOCKED_MAGIC);
        out.push(FORMAT_VERSION);
        out.push(if self.scaling { 0 } else { FLAG_NONSCALING });
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&self.items.to_le_bytes());
        out.extend_from_slice(&self.growth.to_le_bytes());
        out.extend_from_slice(&(self.links.len() as u32).to_le_bytes());
        for link in self.links.iter() {
            out.extend_from_slice(&link.capacity.to_le_bytes());
            out.extend_from_slice(&link.error.to_le_bytes());
            out.extend_from_slice(&link.items.to_le_bytes());
            out.extend_from_slice(&(link.bytes() * 8).to_le_bytes());
            out.extend_from_slice(&link.hashes().to_le_bytes());
        }
        out
    }

    /// SCANDUMP for iterator `iter >= 1`: the next chunk and the iterator to continue with, or
    /// `(0, [])` when done.
    pub fn dump_chunk(&self, iter: i64) -> (i64, Vec<u8>) {
        super::scaling::dump_chunk(&self.links, iter)
    }

    /// The bytes of the chunk of `len` bytes that SCANDUMP returns with `iter`.
    pub fn chunk_bytes(&self, iter: i64, len: u64) -> Vec<u8> {
        self.dump_chunk(iter - len as i64).1
    }

    /// Length of the dump header that starts `buf`, if `buf` holds its fixed part.
    pub fn header_len(buf: &[u8]) -> Option<usize> {
        let links = u32::from_le_bytes(buf.get(20..24)?.try_into().ok()?) as usize;
        links.checked_mul(HEADER_LINK)?.checked_add(HEADER_FIXED)
    }

    /// A dump header's validated shape, nothing allocated. Refused with `ERR received bad
    /// data`: a wrong magic, version, flag or length; no link or more than 65536; a growth
    /// above BF.RESERVE's cap; a link whose capacity is 0, whose error is outside (0, 1), whose
    /// bits and hashes the core refuses for a blocked filter (a positive multiple of 512 bits,
    /// at most 1 TiB; 1 to 64 probes); Σ link items other than the chain's; Σ capacities
    /// beyond `i64` or Σ bytes overflowing. The memory budget is then checked by the caller.
    pub fn shape(header: &[u8]) -> Result<BlockedShape, &'static str> {
        let bad = ERR_BAD_DATA;
        if header.len() < HEADER_FIXED || &header[..4] != BLOCKED_MAGIC {
            return Err(bad);
        }
        let u64_at = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8"));
        let u32_at = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4"));
        let (version, flags) = (header[4], header[5]);
        let items = u64_at(8);
        let growth = u32_at(16);
        let count = u32_at(20) as usize;
        if version != FORMAT_VERSION
            || flags & !FLAG_NONSCALING != 0
            || header[6..8] != [0, 0]
            || growth > super::MAX_GROWTH
            || !(1..=MAX_LINKS).contains(&count)
            || header.len() != HEADER_FIXED + HEADER_LINK * count
        {
            return Err(bad);
        }
        let mut links = Vec::with_capacity(count);
        let (mut item_sum, mut capacity_sum, mut total_bytes) = (0u64, 0u64, 0u64);
        for i in 0..count {
            let at = HEADER_FIXED + HEADER_LINK * i;
            let capacity = u64_at(at);
            let error = f64::from_le_bytes(header[at + 8..at + 16].try_into().expect("8"));
            let link_items = u64_at(at + 16);
            let bits = u64_at(at + 24);
            let hashes = u32_at(at + 32);
            if capacity == 0 || !(error > 0.0 && error < 1.0) {
                return Err(bad);
            }
            let params = Params::new(Layout::Blocked, bits, hashes, capacity).map_err(|_| bad)?;
            if params.bits != bits {
                return Err(bad);
            }
            item_sum = item_sum.checked_add(link_items).ok_or(bad)?;
            capacity_sum = capacity_sum
                .checked_add(capacity)
                .filter(|&c| c <= i64::MAX as u64)
                .ok_or(bad)?;
            total_bytes = total_bytes.checked_add(params.bytes()).ok_or(bad)?;
            links.push((
                BlockedLinkPlan {
                    capacity,
                    error,
                    params,
                },
                link_items,
            ));
        }
        if item_sum != items {
            return Err(bad);
        }
        Ok(BlockedShape {
            links,
            items,
            growth,
            scaling: flags & FLAG_NONSCALING == 0,
            total_bytes,
        })
    }

    /// An empty-bits chain shaped as an admitted header says.
    pub fn from_shape(shape: Admitted<BlockedShape>) -> Result<Self, &'static str> {
        let shape = shape.into_shape();
        let mut links = Vec::with_capacity(shape.links.len());
        for (plan, items) in shape.links {
            let admitted = Allowance::unlimited()
                .admit(plan)
                .map_err(|_| ERR_BAD_DATA)?;
            let mut link = BlockedLink::allocate(admitted).ok_or(ERR_BAD_DATA)?;
            link.items = items;
            links.push(link);
        }
        Ok(Self {
            links: links.into_boxed_slice(),
            items: shape.items,
            growth: shape.growth,
            scaling: shape.scaling,
        })
    }

    /// [`Self::shape`] and [`Self::from_shape`] with no budget (tests, tools).
    pub fn from_header(header: &[u8]) -> Result<Self, &'static str> {
        let shape = Self::shape(header)?;
        Self::from_shape(Allowance::unlimited().admit(shape).expect("unlimited"))
    }

    /// LOADCHUNK: `iter` is what SCANDUMP returned with `data` (1 + offset after the chunk).
    pub fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
        let (index, offset) = super::scaling::chunk_at(&self.links, iter, data.len() as u64)?;
        let link = &mut self.links[index];
        link.write_le_bytes(offset, data);
        Ok(())
    }
}

/// A blocked chain as a validated dump header describes it.
#[derive(Debug)]
pub struct BlockedShape {
    links: Vec<(BlockedLinkPlan, u64)>,
    items: u64,
    growth: u32,
    scaling: bool,
    total_bytes: u64,
}

impl BlockedShape {
    /// Where each chunk of the body ends (as [`BlockedChain::chunk_plan`] of the loaded chain).
    pub fn chunk_plan(&self) -> Vec<(i64, u64)> {
        plan_parts(self.links.iter().map(|(plan, _)| plan.bytes()))
    }
}

impl Shape for BlockedShape {
    fn bytes(&self) -> u64 {
        self.total_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::sbchain::{ERR_CHUNK_TOO_BIG, ERR_NO_LINK};

    fn dump(chain: &BlockedChain) -> Vec<(i64, Vec<u8>)> {
        let mut out = vec![(1, chain.dump_header())];
        let mut iter = 1;
        loop {
            let (next, chunk) = chain.dump_chunk(iter);
            if next == 0 {
                break;
            }
            out.push((next, chunk));
            iter = next;
        }
        out
    }

    fn load(stream: &[(i64, Vec<u8>)]) -> BlockedChain {
        let mut chain = BlockedChain::from_header(&stream[0].1).unwrap();
        for (iter, chunk) in &stream[1..] {
            chain.load_chunk(*iter, chunk).unwrap();
        }
        chain
    }

    /// The measured rate of a filter filled to capacity meets the requested rate, at 1% and
    /// 0.1% on 100k absent items: a non-scaling link at the rate itself, and a scaling chain
    /// grown to several links.
    #[test]
    fn measured_fpr_meets_the_error_rate() {
        for (error, capacity) in [(0.01, 20_000u64), (0.001, 20_000)] {
            for nonscaling in [true, false] {
                let mut chain = BlockedChain::new(capacity, error, 2, nonscaling).unwrap();
                let fill = if nonscaling { capacity } else { capacity * 4 };
                for i in 0..fill {
                    chain
                        .add(&i.to_le_bytes(), &mut Allowance::unlimited())
                        .unwrap();
                }
                if !nonscaling {
                    assert!(chain.links().len() >= 2);
                }
                let absent: Vec<[u8; 8]> = (0..100_000u64)
                    .map(|i| (u64::MAX - i).to_le_bytes())
                    .collect();
                let positives = chain.contains_many(&absent).iter().filter(|&&b| b).count();
                let measured = positives as f64 / absent.len() as f64;
                // A link at exactly the rate measures it up to sampling error (three standard
                // deviations of 100k trials); a scaling chain's links are at half the rate
                // and below, so it measures under the rate itself.
                let bound = if nonscaling {
                    error + 3.0 * (error / absent.len() as f64).sqrt()
                } else {
                    error
                };
                assert!(
                    measured <= bound,
                    "error {error} nonscaling {nonscaling}: measured {measured}"
                );
            }
        }
    }

    #[test]
    fn scales_and_refuses_when_full() {
        let mut chain = BlockedChain::new(10, 0.01, 2, false).unwrap();
        for i in 0..100u32 {
            chain
                .add(&i.to_le_bytes(), &mut Allowance::unlimited())
                .unwrap();
        }
        let caps: Vec<u64> = chain.links().iter().map(|l| l.capacity()).collect();
        assert_eq!(&caps[..4], &[10, 20, 40, 80]);
        let errors: Vec<f64> = chain.links().iter().map(|l| l.error()).collect();
        assert_eq!(&errors[..3], &[0.005, 0.0025, 0.00125]);
        let mut fixed = BlockedChain::new(5, 0.01, 2, true).unwrap();
        let mut outcome = Ok(true);
        for i in 0..50u32 {
            outcome = fixed.add(&i.to_le_bytes(), &mut Allowance::unlimited());
            if outcome.is_err() {
                break;
            }
        }
        assert_eq!(outcome, Err(AddError::Full));
        assert_eq!(fixed.items(), 5);
        // Growth is admitted against the budget before it is allocated.
        let mut small = BlockedChain::new(1, 0.01, 1000, false).unwrap();
        small.add(b"a", &mut Allowance::new(0)).unwrap();
        assert_eq!(
            small.add(b"b", &mut Allowance::new(16)),
            Err(AddError::OutOfMemory)
        );
    }

    #[test]
    fn header_validation_rejects_each_bad_field() {
        let chain = BlockedChain::new(100, 0.01, 2, false).unwrap();
        let good = chain.dump_header();
        assert_eq!(BlockedChain::header_len(&good), Some(good.len()));
        assert!(BlockedChain::shape(&good).is_ok());
        let corrupt = |at: usize, bytes: &[u8]| {
            let mut h = good.clone();
            h[at..at + bytes.len()].copy_from_slice(bytes);
            BlockedChain::shape(&h).err()
        };
        assert_eq!(corrupt(0, b"X"), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(4, &[2]), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(5, &[2]), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(8, &1u64.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(16, &40000u32.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(20, &2u32.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(24, &0u64.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(32, &1.5f64.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(32, &f64::NAN.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(48, &100u64.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(48, &(1u64 << 50).to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(56, &0u32.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(56, &65u32.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(
            BlockedChain::shape(&good[..good.len() - 1]).err(),
            Some(ERR_BAD_DATA)
        );
        assert_eq!(BlockedChain::shape(&[]).err(), Some(ERR_BAD_DATA));
        // A header declaring more than the budget is refused before allocating.
        let mut huge = good.clone();
        huge[48..56].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let shape = BlockedChain::shape(&huge).unwrap();
        assert!(Allowance::new(1 << 20).admit(shape).is_err());
    }

    #[test]
    fn load_chunk_bounds() {
        let chain = BlockedChain::new(100, 0.01, 2, false).unwrap();
        let bytes = chain.links()[0].bytes();
        let mut copy = BlockedChain::from_header(&chain.dump_header()).unwrap();
        assert_eq!(copy.load_chunk(0, &[1]), Err(ERR_BAD_DATA));
        assert_eq!(copy.load_chunk(3, &[1; 4]), Err(ERR_BAD_DATA));
        assert_eq!(copy.load_chunk(4, &[1; 4]), Err(ERR_NO_LINK));
        let over = vec![1u8; bytes as usize + 1];
        assert_eq!(
            copy.load_chunk(bytes as i64 + 2, &over),
            Err(ERR_CHUNK_TOO_BIG)
        );
        assert_eq!(copy.load_chunk(i64::MAX, &[1]), Err(ERR_NO_LINK));
        let full = vec![0xffu8; bytes as usize];
        assert_eq!(copy.load_chunk(bytes as i64 + 1, &full), Ok(()));
        assert!(copy.contains(b"anything"));
        // An unaligned piece lands where the classic chain's would.
        assert_eq!(copy.load_chunk(14, &[0x0f; 3]), Ok(()));
        assert_eq!(copy.dump_chunk(9).1[..5], [0xff, 0xff, 0x0f, 0x0f, 0x0f]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

        /// Never a false negative: through scaling, the batched query, and a SCANDUMP /
        /// LOADCHUNK round trip that gives back the same bytes.
        #[test]
        fn no_false_negatives(
            items in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24), 1..300),
            capacity in 1u64..50,
            error in 0.001f64..0.3,
            growth in 1u32..5,
        ) {
            let mut chain = BlockedChain::new(capacity, error, growth, false).unwrap();
            for item in &items {
                chain.add(item, &mut Allowance::unlimited()).unwrap();
            }
            let copy = load(&dump(&chain));
            proptest::prop_assert_eq!(dump(&copy), dump(&chain));
            proptest::prop_assert!(chain.contains_many(&items).iter().all(|&b| b));
            for item in &items {
                proptest::prop_assert!(chain.contains(item));
                proptest::prop_assert!(copy.contains(item));
            }
        }
    }
}
