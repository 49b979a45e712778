//! The scalable Bloom chain, written once over its link type ([`Chain<L>`], `L` a
//! [`ChainLink`]): RedisBloom's classic links ([`super::BloomChain`]) and our blocked ones
//! ([`super::BlockedChain`]) are the same chain.
//!
//! - **The scaling rule.** An item any link reports is not added again; when the newest link
//!   holds its capacity, a scaling chain grows by a link of `capacity × growth` items at a
//!   tighter error rate (half the newest link's: [`ChainLink::next_error`]), admitted against
//!   the memory budget before it is allocated; a non-scaling chain refuses the item.
//! - **Batches.** A link far bigger than the CPU cache costs a memory latency per probe taken
//!   one after the other; here the cache lines of many probes are requested (prefetched) before
//!   any of them is tested, so the misses overlap. Reads ([`Chain::contains_many`], BF.MEXISTS)
//!   go link by link, newest first, each link answering only the items still unanswered (a
//!   classic link in probe stages: probe 0 of every item, then probe 1 of the survivors, …).
//!   Writes ([`Chain::add_many`], BF.MADD and BF.INSERT) apply strictly in order — each item
//!   sees the earlier ones of its batch, and the chain may grow or fill mid-batch, exactly as
//!   one add after another — while the lines of the newest link are prefetched for the item
//!   `LINES_IN_FLIGHT / lines` places ahead. Single items ([`Chain::contains`],
//!   [`Chain::add`]) request all of a link's lines before testing any when the link is at least
//!   [`PREFETCH_ALL_BYTES`].
//! - **The dump body.** SCANDUMP returns the links' bit arrays, oldest first, in chunks of at
//!   most 16 MiB that never cross a link, each with 1 + the byte offset after it as its
//!   iterator; LOADCHUNK writes them back. The header before them is the link format's
//!   ([`ChainLink::dump_header`], validated by [`ChainLink::parse_header`] into a
//!   [`ChainShape`] before anything is allocated).

use super::link::{ChainLink, LinkCounts, MergeLink};
use super::tally::Counted;
use super::{AddError, ERR_BAD_DATA, ERR_CHUNK_TOO_BIG, ERR_NO_LINK};
use crate::budget::{Admitted, Allowance, Shape};
use crate::codec::chunks::{plan_parts, CHUNK_BYTES};
use crate::codec::rdb_io::{admit, RdbError, RdbSink, RdbSource};
use bloomgate::filters::LINES_IN_FLIGHT;
use bloomgate::relocate::Walk;

/// Links at least this big get all of an item's lines requested before its probes are tested
/// (single items), and the lines of items ahead requested while one is added (batched writes).
/// The rule: a link that big cannot stay in the L2 cache of any current CPU, so its probes are
/// mostly misses and overlapping them wins; below it the probes mostly hit, and the extra
/// probe positions computed for the prefetches would only cost.
pub const PREFETCH_ALL_BYTES: u64 = 4 << 20;

/// Hashes a batched write keeps (a power of two above [`LINES_IN_FLIGHT`], the farthest it
/// looks ahead).
const RING: usize = 64;

/// A scalable Bloom filter: links newest last, in an exactly sized boxed slice (a chain grows
/// rarely; most keep their one link).
#[derive(Debug)]
pub struct Chain<L: ChainLink> {
    links: Box<[L]>,
    items: u64,
    growth: u32,
    settings: L::Settings,
}

/// A copy (COPY) is counted as one more object.
impl<L: ChainLink> Clone for Chain<L> {
    fn clone(&self) -> Self {
        let copy = Self {
            links: self.links.clone(),
            items: self.items,
            growth: self.growth,
            settings: self.settings,
        };
        copy.count_in();
        copy
    }
}

/// A freed chain takes back what it adds to its link type's tally.
impl<L: ChainLink> Drop for Chain<L> {
    fn drop(&mut self) {
        if let Some(tally) = L::tally() {
            tally.replace(Counted::of(self), Counted::default());
        }
    }
}

/// A new chain as `BF.RESERVE` (or an auto-creating add) describes it, not yet allocated.
#[derive(Clone, Debug)]
pub struct ChainPlan<L: ChainLink> {
    link: L::Plan,
    settings: L::Settings,
    growth: u32,
}

impl<L: ChainLink> Shape for ChainPlan<L> {
    fn bytes(&self) -> u64 {
        self.link.bytes()
    }
}

/// A chain as a validated dump header describes it (what [`Chain::from_shape`] allocates).
#[derive(Debug)]
pub struct ChainShape<L: ChainLink> {
    /// Each link's plan and item count.
    links: Vec<(L::Plan, u64)>,
    items: u64,
    growth: u32,
    settings: L::Settings,
    /// Σ link bytes (checked not to overflow).
    total_bytes: u64,
}

impl<L: ChainLink> ChainShape<L> {
    /// The shape of a header whose links a format has validated one by one: each link's plan
    /// and counts, oldest first. Refused with `ERR received bad data` unless what they add up to
    /// holds: Σ link items == the chain's `items` (RedisBloom refuses a header whose first
    /// field is corrupted, its `test_scandump_invalid_header`); Σ capacities within `i64` (as
    /// BF.INFO replies it) and Σ bytes within `u64` (sums that overflowed panicked: fuzz
    /// regressions `bf_link_bytes_sum_overflow`, `bf_capacity_sum_overflow`). The memory
    /// budget is then checked before allocating.
    pub(crate) fn new(
        links: Vec<(L::Plan, LinkCounts)>,
        items: u64,
        growth: u32,
        settings: L::Settings,
    ) -> Result<Self, &'static str> {
        let (mut item_sum, mut capacity_sum, mut total_bytes) = (0u64, 0u64, 0u64);
        for (plan, counts) in &links {
            item_sum = item_sum.checked_add(counts.items).ok_or(ERR_BAD_DATA)?;
            capacity_sum = capacity_sum
                .checked_add(counts.capacity)
                .filter(|&c| c <= i64::MAX as u64)
                .ok_or(ERR_BAD_DATA)?;
            total_bytes = total_bytes.checked_add(plan.bytes()).ok_or(ERR_BAD_DATA)?;
        }
        if item_sum != items {
            return Err(ERR_BAD_DATA);
        }
        Ok(Self {
            links: links
                .into_iter()
                .map(|(plan, counts)| (plan, counts.items))
                .collect(),
            items,
            growth,
            settings,
            total_bytes,
        })
    }

    /// Where each chunk of the body ends (as [`Chain::chunk_plan`] of the loaded chain).
    pub fn chunk_plan(&self) -> Vec<(i64, u64)> {
        plan_parts(self.links.iter().map(|(plan, _)| plan.bytes()))
    }
}

impl<L: ChainLink> Shape for ChainShape<L> {
    fn bytes(&self) -> u64 {
        self.total_bytes
    }
}

impl<L: ChainLink> Chain<L> {
    /// The chain `BF.RESERVE key error capacity [EXPANSION growth] [NONSCALING]` builds, not yet
    /// allocated: its first link uses `error/2` when scaling, `error` when not. Arguments are
    /// validated by the caller. `None` if no link of a supported size meets them.
    pub fn plan(capacity: u64, error: f64, growth: u32, nonscaling: bool) -> Option<ChainPlan<L>> {
        Some(ChainPlan {
            link: L::plan(capacity, L::first_error(error, nonscaling))?,
            settings: L::new_settings(nonscaling, error),
            growth,
        })
    }

    /// Allocates a planned chain; `None` if the allocator refuses.
    pub fn create(plan: Admitted<ChainPlan<L>>) -> Option<Self> {
        let ChainPlan {
            link,
            settings,
            growth,
        } = plan.into_shape();
        // The chain's plan was admitted: it is its one link's.
        let link = L::allocate(Allowance::unlimited().admit(link).ok()?)?;
        let chain = Self {
            links: Box::new([link]),
            items: 0,
            growth,
            settings,
        };
        chain.count_in();
        Some(chain)
    }

    /// Adds a new chain to its link type's tally (its `Drop` takes it back). The chain keeps
    /// no copy of what it added (a field would grow every value): it is recomputed, so every
    /// change of links or items goes through [`Self::counted`].
    fn count_in(&self) {
        if let Some(tally) = L::tally() {
            tally.replace(Counted::default(), Counted::of(self));
        }
    }

    /// Runs `change` (of the links or items), moving the tally by what it changed.
    fn counted<R>(&mut self, change: impl FnOnce(&mut Self) -> R) -> R {
        let Some(tally) = L::tally() else {
            return change(self);
        };
        let before = Counted::of(self);
        let result = change(self);
        tally.replace(before, Counted::of(self));
        result
    }

    /// [`Self::plan`] and [`Self::create`] with no budget: for values whose size the caller has
    /// bounded itself (tests, tools); hosts admit a shape against their budget instead.
    pub fn new(capacity: u64, error: f64, growth: u32, nonscaling: bool) -> Option<Self> {
        let plan = Self::plan(capacity, error, growth, nonscaling)?;
        Self::create(Allowance::unlimited().admit(plan).ok()?)
    }

    /// Whether the chain may grow.
    pub fn is_scaling(&self) -> bool {
        L::scales(&self.settings)
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
            .fold(0u64, |sum, l| sum.saturating_add(l.capacity()))
    }

    /// The links, oldest first.
    pub fn links(&self) -> &[L] {
        &self.links
    }

    /// The expansion factor (`Expansion rate`).
    pub fn growth(&self) -> u32 {
        self.growth
    }

    /// What the chain keeps besides links, items and growth (its format's settings).
    pub fn settings(&self) -> &L::Settings {
        &self.settings
    }

    /// Mutable [`Self::settings`], for a format's own creation options.
    pub(crate) fn settings_mut(&mut self) -> &mut L::Settings {
        &mut self.settings
    }

    fn newest(&self) -> &L {
        self.links.last().expect("a chain has at least one link")
    }

    /// Requests the lines an add of `h` reads and writes in the newest link, if it is big.
    fn prefetch_newest(&self, h: L::Hash) {
        prefetch_big(self.newest(), h);
    }

    /// Whether `item` may be present (any link reports it).
    pub fn contains(&self, item: &[u8]) -> bool {
        let h = L::hash(&self.settings, item);
        self.links.iter().rev().any(|link| {
            prefetch_big(link, h);
            link.contains(h)
        })
    }

    /// Whether each of `items` may be present: [`Chain::contains`] of each, batched (see the
    /// module's notes).
    pub fn contains_many<I: AsRef<[u8]>>(&self, items: &[I]) -> Vec<bool> {
        let hashes: Vec<L::Hash> = items
            .iter()
            .map(|i| L::hash(&self.settings, i.as_ref()))
            .collect();
        let mut found = vec![false; items.len()];
        let mut unanswered: Vec<u32> = (0..items.len() as u32).collect();
        let mut pending = Vec::with_capacity(items.len());
        for link in self.links.iter().rev() {
            if unanswered.is_empty() {
                break;
            }
            pending.clear();
            pending.extend_from_slice(&unanswered);
            link.retain_present(&hashes, &mut pending);
            for &j in &pending {
                found[j as usize] = true;
            }
            unanswered.retain(|&j| !found[j as usize]);
        }
        found
    }

    /// Adds `item`: `Ok(true)` if new, `Ok(false)` if any link already reports it. When the
    /// newest link is at capacity, a scaling chain grows by a link of `capacity * growth` items
    /// at half the error, admitted against `allowance` before it is allocated.
    pub fn add(&mut self, item: &[u8], allowance: &mut Allowance) -> Result<bool, AddError> {
        let h = L::hash(&self.settings, item);
        self.prefetch_newest(h);
        self.counted(|chain| chain.add_hashed(h, allowance))
    }

    /// Adds `items` in order, calling `added` with each one's answer (as [`Chain::add`]'s
    /// `Ok`), and stops at the first error, which it returns: the items before it are added,
    /// those after it are not. Bits, counts and answers are those of adding one after another
    /// (a duplicate inside the batch answers `false`; the chain may grow or fill mid-batch).
    pub fn add_many<I: AsRef<[u8]>>(
        &mut self,
        items: &[I],
        allowance: &mut Allowance,
        added: impl FnMut(bool),
    ) -> Result<(), AddError> {
        self.counted(|chain| chain.add_batch(items, allowance, added))
    }

    /// [`Self::add_many`] outside [`Self::counted`].
    fn add_batch<I: AsRef<[u8]>>(
        &mut self,
        items: &[I],
        allowance: &mut Allowance,
        mut added: impl FnMut(bool),
    ) -> Result<(), AddError> {
        let distance = (LINES_IN_FLIGHT / self.newest().lines().max(1)).clamp(1, RING - 1);
        // The hashes of the items ahead, in a ring on the stack (no allocation per batch).
        let mut ahead: [Option<L::Hash>; RING] = [None; RING];
        let settings = self.settings;
        let hash = |j: usize| L::hash(&settings, items[j].as_ref());
        for (j, slot) in ahead.iter_mut().enumerate().take(items.len().min(distance)) {
            let h = hash(j);
            self.prefetch_newest(h);
            *slot = Some(h);
        }
        for j in 0..items.len() {
            if j + distance < items.len() {
                let next = hash(j + distance);
                self.prefetch_newest(next);
                ahead[(j + distance) % RING] = Some(next);
            }
            let h = ahead[j % RING].expect("hashed ahead");
            added(self.add_hashed(h, allowance)?);
        }
        Ok(())
    }

    /// Adds the item hashed as `h` by the scaling rule (see the module's notes).
    fn add_hashed(&mut self, h: L::Hash, allowance: &mut Allowance) -> Result<bool, AddError> {
        if self.links.iter().rev().any(|link| link.contains(h)) {
            return Ok(false);
        }
        let newest = self.newest();
        if newest.items() >= newest.capacity() {
            if !self.is_scaling() {
                return Err(AddError::Full);
            }
            let capacity = newest
                .capacity()
                .checked_mul(u64::from(self.growth))
                .filter(|&c| c > 0);
            let error = L::next_error(&self.settings, &self.links);
            let plan = capacity
                .and_then(|c| L::plan(c, error))
                .ok_or(AddError::GrowFailed)?;
            let plan = allowance.admit(plan).map_err(AddError::refused)?;
            let link = L::allocate(plan).ok_or(AddError::OutOfMemory)?;
            let mut grown = std::mem::take(&mut self.links).into_vec();
            grown.push(link);
            self.links = grown.into_boxed_slice();
        }
        let newest = self
            .links
            .last_mut()
            .expect("a chain has at least one link");
        if newest.insert(h) {
            newest.set_items(newest.items().saturating_add(1));
            self.items = self.items.saturating_add(1);
        }
        Ok(true)
    }

    /// BF.INFO Size, as the link format counts it ([`ChainLink::size_bytes`]).
    pub fn size_bytes(&self) -> u64 {
        L::size_bytes(self)
    }

    /// Heap bytes the chain holds beyond its own struct (links and bits, in allocator size
    /// classes): what it really costs, where [`Self::size_bytes`] is RedisBloom's figure.
    pub fn heap_bytes(&self) -> u64 {
        crate::types::cow::allocation_size(size_of_val::<[L]>(&self.links) as u64)
            + self.links.iter().map(L::heap_bytes).sum::<u64>()
    }

    /// Offers the link array, then each link's bits, to a host that moves allocations (see
    /// [`bloomgate::relocate`]).
    pub fn relocate(&mut self, walk: &mut Walk<'_>) {
        walk.boxed_slice(&mut self.links);
        for link in &mut self.links {
            link.relocate(walk);
        }
    }

    /// Fill ratio and false-positive rate, in O(links) (a metrics scrape reads it for every
    /// filter under the store lock): set bits over bits, and the probability that an absent
    /// item passes some link, `1 − Π_i (1 − fpr_i)`.
    pub fn health(&self) -> (f64, f64) {
        let mut miss_all = 1.0;
        let (mut ones, mut bits) = (0.0, 0u64);
        for link in self.links.iter() {
            let health = link.health();
            ones += health.ones;
            bits += health.bits;
            miss_all *= 1.0 - health.fpr;
        }
        (ones / bits.max(1) as f64, 1.0 - miss_all)
    }

    /// BF.DEBUG lines: `size:N`, then one line per link.
    pub fn debug_lines(&self) -> Vec<String> {
        let mut lines = vec![format!("size:{}", self.items)];
        lines.extend(self.links.iter().map(L::debug_line));
        lines
    }

    /// Where each SCANDUMP chunk ends: `(iterator returned with it, length)`; chunks are at most
    /// 16 MiB and never cross a link.
    pub fn chunk_plan(&self) -> Vec<(i64, u64)> {
        plan_parts(self.links.iter().map(L::bytes))
    }

    /// The SCANDUMP header (iterator 0), in the link format's layout.
    pub fn dump_header(&self) -> Vec<u8> {
        L::dump_header(self)
    }

    /// SCANDUMP for iterator `iter >= 1`: the next chunk (≤ 16 MiB, never crossing a link) and
    /// the iterator to continue with (1 + byte offset after the chunk), or `(0, [])` when done.
    pub fn dump_chunk(&self, iter: i64) -> (i64, Vec<u8>) {
        // `checked_sub`: an iterator of i64::MIN must not overflow (a fuzz regression).
        let offset = iter.checked_sub(1).and_then(|o| u64::try_from(o).ok());
        let Some((index, offset)) = offset.and_then(|o| self.link_at(o)) else {
            return (0, Vec::new());
        };
        let link = &self.links[index];
        let len = (link.bytes() - offset).min(CHUNK_BYTES);
        (iter + len as i64, link.read_le_bytes(offset, len))
    }

    /// The bytes of the chunk of `len` bytes that SCANDUMP returns with `iter`.
    pub fn chunk_bytes(&self, iter: i64, len: u64) -> Vec<u8> {
        self.dump_chunk(iter - len as i64).1
    }

    /// Every link's bit array as little-endian bytes, in order, in pieces (the dump body,
    /// without building its chunks).
    pub fn visit_bits(&self, f: &mut dyn FnMut(&[u8])) {
        for link in self.links.iter() {
            link.visit_le_bytes(f);
        }
    }

    /// The link holding dump byte `offset` (0-based over all links' bit arrays, oldest first)
    /// and the offset inside it.
    fn link_at(&self, mut offset: u64) -> Option<(usize, u64)> {
        for (i, link) in self.links.iter().enumerate() {
            if offset < link.bytes() {
                return Some((i, offset));
            }
            offset -= link.bytes();
        }
        None
    }

    /// LOADCHUNK: `iter` is what SCANDUMP returned with `data` (1 + offset after the chunk).
    /// Refused as RedisBloom refuses: a bad iterator, no link there, a chunk past the link's
    /// end.
    pub fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
        let len = data.len() as u64;
        if iter <= 0 || (iter as u64) < len {
            return Err(ERR_BAD_DATA);
        }
        let (index, offset) = (iter as u64 - len)
            .checked_sub(1)
            .and_then(|o| self.link_at(o))
            .ok_or(ERR_NO_LINK)?;
        let link = &mut self.links[index];
        if len > link.bytes() - offset {
            return Err(ERR_CHUNK_TOO_BIG);
        }
        link.write_le_bytes(offset, data);
        Ok(())
    }

    /// Length of the dump header that starts `buf`, if `buf` holds enough of it.
    pub fn header_len(buf: &[u8]) -> Option<usize> {
        L::header_len(buf)
    }

    /// A SCANDUMP header's validated shape (see [`ChainLink::parse_header`]), before anything
    /// is allocated.
    pub fn shape(header: &[u8]) -> Result<ChainShape<L>, &'static str> {
        L::parse_header(header)
    }

    /// Builds an empty-bits chain shaped as an admitted header says.
    pub fn from_shape(shape: Admitted<ChainShape<L>>) -> Result<Self, &'static str> {
        let shape = shape.into_shape();
        let mut links = Vec::with_capacity(shape.links.len());
        for (plan, items) in shape.links {
            // The whole shape was admitted: each link is part of it.
            let admitted = Allowance::unlimited()
                .admit(plan)
                .map_err(|_| ERR_BAD_DATA)?;
            let mut link = L::allocate(admitted).ok_or(ERR_BAD_DATA)?;
            link.set_items(items);
            links.push(link);
        }
        let chain = Self {
            links: links.into_boxed_slice(),
            items: shape.items,
            growth: shape.growth,
            settings: shape.settings,
        };
        chain.count_in();
        Ok(chain)
    }

    /// [`Self::shape`] and [`Self::from_shape`] with no budget: for values whose size the
    /// caller has bounded itself (tests, tools); hosts admit a shape against their budget
    /// instead.
    pub fn from_header(header: &[u8]) -> Result<Self, &'static str> {
        Self::from_shape(
            Allowance::unlimited()
                .admit(Self::shape(header)?)
                .expect("unlimited"),
        )
    }

    /// The RDB encoding of a format with no field order of its own: the dump header as one
    /// string, then each SCANDUMP chunk as a string.
    pub(super) fn save_dump_stream(&self, out: &mut impl RdbSink) {
        out.save_string(&self.dump_header());
        for (iter, len) in self.chunk_plan() {
            out.save_string(&self.chunk_bytes(iter, len));
        }
    }

    /// Reads what [`Chain::save_dump_stream`] wrote (encoding version `encver`, a header of at
    /// most `max_header` bytes), every part validated as LOADCHUNK validates it and the shape
    /// admitted before the links are allocated.
    pub(super) fn load_dump_stream(
        input: &mut impl RdbSource,
        encver: i32,
        max_header: u64,
    ) -> Result<Self, RdbError> {
        if encver != L::ENCODING_VERSION {
            return Err(RdbError::UnknownEncoding(encver));
        }
        let header = input.load_string(max_header)?;
        let shape = Self::shape(&header).map_err(RdbError::invalid)?;
        let plan = shape.chunk_plan();
        let shape = admit(input, shape)?;
        let mut chain = Self::from_shape(shape).map_err(RdbError::invalid)?;
        for (iter, len) in plan {
            let data = input.load_string(len)?;
            if data.len() as u64 != len {
                return Err(RdbError::invalid("chunk length does not match its header"));
            }
            chain.load_chunk(iter, &data).map_err(RdbError::invalid)?;
        }
        Ok(chain)
    }
}

/// Requests `h`'s lines in `link` if the link is big enough for that to pay.
fn prefetch_big<L: ChainLink>(link: &L, h: L::Hash) {
    if link.bytes() >= PREFETCH_ALL_BYTES {
        link.prefetch(h);
    }
}

/// The union of chains of one shape (`BF.MERGE`): the bitwise OR of each link's bits, and the
/// item counts estimated afterwards from the bits set.
impl<L: MergeLink> Chain<L> {
    /// Whether `other` has this chain's shape, so their bits can be ORed: the same settings,
    /// growth factor and number of links, and links of one shape (where each item's probes
    /// land, and how the chain grows).
    pub fn same_shape(&self, other: &Self) -> bool {
        self.settings == other.settings
            && self.growth == other.growth
            && self.links.len() == other.links.len()
            && self
                .links
                .iter()
                .zip(other.links.iter())
                .all(|(a, b)| a.same_shape(b))
    }

    /// ORs the bits of every chain in `sources` (each of this chain's shape, see
    /// [`Self::same_shape`]) into this one, then sets each link's item count to the estimate its
    /// set bits give, and the chain's to their sum.
    pub fn merge_from(&mut self, sources: &[&Self]) {
        self.counted(|chain| chain.merge_bits(sources));
    }

    /// [`Self::merge_from`] outside [`Self::counted`].
    fn merge_bits(&mut self, sources: &[&Self]) {
        for source in sources {
            debug_assert!(self.same_shape(source));
            for (link, other) in self.links.iter_mut().zip(source.links.iter()) {
                link.or_from(other);
            }
        }
        let mut total = 0u64;
        for link in self.links.iter_mut() {
            let items = link.estimated_items();
            link.set_items(items);
            total = total.saturating_add(items);
        }
        self.items = total;
    }
}
