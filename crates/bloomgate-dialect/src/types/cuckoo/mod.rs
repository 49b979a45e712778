//! RedisBloom's cuckoo filter as a compatibility type: 8-bit fingerprints from MurmurHash64A,
//! power-of-two bucket counts, sub-filters that grow by a power-of-two factor, the exact
//! insert / kick / undo order, delete-triggered compaction, and the 38-byte SCANDUMP header, so
//! `CF.SCANDUMP` bytes move between RedisBloom and bloomgate unchanged. The core's native
//! [`bloomgate::CuckooFilter`] is a different, more accurate design; nothing is shared.
//!
//! Implemented from RedisBloom's documented formats and observed behaviour, not from its source.
//!
//! Hashing: `h = MurmurHash64A(item, 0)`, `fp = h % 255 + 1` (0 marks an empty slot),
//! `i1 = h`, `i2 = i1 ^ (fp × 0x5bd1e995)`; a sub-filter of `n` buckets (a power of two) uses
//! `i mod n`. Because `n` is a power of two, the alternate of a *reduced* index is the reduced
//! alternate, so a fingerprint moved by a kick can always find its way back.
//!
//! Slots live in copy-on-write segments of whole buckets ([`CowArray`]), so a snapshot shares
//! them and a write copies only the segment it changes.

use crate::budget::{Admitted, Allowance, Limit, Shape};
use crate::codec::murmur::murmur64a;
use crate::types::cow::CowArray;
use bloomgate::relocate::Walk;

mod batch;

/// The multiplier that turns a fingerprint into the bucket offset of its alternate.
const ALT_MULTIPLIER: u64 = 0x5bd1e995;
/// `CF.INFO Size` accounting: 40 bytes for the filter struct and 16 per sub-filter, plus one byte
/// per slot.
const FILTER_OVERHEAD: u64 = 40;
const SUB_FILTER_OVERHEAD: u64 = 16;
/// `u64 numItems, u64 numBuckets, u64 numDeletes, u64 numFilters, u16 bucketSize,
/// u16 maxIterations, u16 expansion`, packed little-endian.
pub const HEADER_LEN: usize = 38;
/// SCANDUMP chunks never exceed 16 MiB and never cross a sub-filter boundary.
pub const MAX_SCANDUMP_CHUNK: u64 = crate::codec::chunks::CHUNK_BYTES;
/// Compaction runs after a delete once deletes exceed this share of the stored items.
const COMPACT_DELETE_RATIO: f64 = 0.10;

/// Most slots per bucket.
pub const MAX_BUCKET_SIZE: u64 = 255;
/// Longest kick chain.
pub const MAX_ITERATIONS: u64 = 65535;
/// Largest expansion factor.
pub const MAX_EXPANSION: u64 = 32768;
/// Largest capacity CF.RESERVE accepts.
pub const MAX_CAPACITY: u64 = 1 << 30;
/// `cf-max-expansions`' upper bound, and so the most sub-filters a valid dump can describe.
pub const MAX_FILTERS: u64 = 65536;

/// The hash of an item as the filter uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lookup {
    /// 8-bit fingerprint, never 0.
    pub fp: u8,
    /// First bucket index (before reduction).
    pub i1: u64,
    /// Alternate bucket index (before reduction).
    pub i2: u64,
}

impl Lookup {
    /// Hashes `item` as RedisBloom does.
    pub fn of(item: &[u8]) -> Self {
        let h = murmur64a(item, 0);
        let fp = (h % 255 + 1) as u8;
        Self {
            fp,
            i1: h,
            i2: alternate(h, fp),
        }
    }
}

fn alternate(index: u64, fp: u8) -> u64 {
    index ^ u64::from(fp).wrapping_mul(ALT_MULTIPLIER)
}

/// Why an insert did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertError {
    /// No room and the filter may not grow (expansion 0).
    Full,
    /// `cf-max-expansions` sub-filters already exist when the command starts, or a command
    /// would grow the filter past [`MAX_FILTERS`].
    MaxExpansions,
    /// A new sub-filter would exceed the memory budget or cannot be allocated.
    OutOfMemory,
    /// A new sub-filter would take the filter past `bloom-memory-usage-limit`.
    OverCap,
}

impl InsertError {
    /// RedisBloom's error text.
    pub fn message(self) -> &'static str {
        match self {
            InsertError::Full => "Filter is full",
            InsertError::MaxExpansions => "Maximum expansions reached",
            InsertError::OutOfMemory => crate::ERR_OOM,
            InsertError::OverCap => crate::ERR_CAP,
        }
    }
}

/// Creation parameters, validated by the caller against the documented ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CuckooParams {
    /// Items the first sub-filter is sized for.
    pub capacity: u64,
    /// Slots per bucket.
    pub bucket_size: u16,
    /// Kick chain length.
    pub max_iterations: u16,
    /// As given (0..=32768); stored rounded up to a power of two.
    pub expansion: u16,
}

impl CuckooParams {
    /// `next_pow2(capacity / bucket_size)`, at least 1.
    pub fn buckets(&self) -> u64 {
        (self.capacity / u64::from(self.bucket_size.max(1)))
            .max(1)
            .next_power_of_two()
    }
}

/// The new filter's first sub-filter: its slot bytes.
impl Shape for CuckooParams {
    fn bytes(&self) -> u64 {
        self.buckets() * u64::from(self.bucket_size)
    }
}

/// A sub-filter a filter grows by: its slot bytes.
#[derive(Clone, Copy, Debug)]
struct SubFilterPlan {
    buckets: u64,
    bucket_size: u16,
}

impl Shape for SubFilterPlan {
    fn bytes(&self) -> u64 {
        self.buckets.saturating_mul(u64::from(self.bucket_size))
    }
}

/// A slot: (bucket, position in the bucket).
type Slot = (usize, usize);

/// One fixed-size table of `buckets × bucket_size` one-byte slots.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SubFilter {
    buckets: u64,
    slots: CowArray<u8>,
}

impl SubFilter {
    fn zeroed(buckets: u64, bucket_size: u16) -> Option<Self> {
        let rows = usize::try_from(buckets).ok()?;
        let slots = CowArray::try_zeroed(rows, usize::from(bucket_size))?;
        Some(Self { buckets, slots })
    }

    /// The bucket an (unreduced) index falls in.
    fn bucket_of(&self, index: u64) -> usize {
        (index & (self.buckets - 1)) as usize
    }

    fn bucket(&self, b: usize, bucket_size: u16) -> &[u8] {
        self.slots.row(b, usize::from(bucket_size))
    }

    fn set(&mut self, (b, p): Slot, bucket_size: u16, fp: u8) {
        self.slots.row_mut(b, usize::from(bucket_size))[p] = fp;
    }

    /// The first empty slot of bucket(i1), else of bucket(i2).
    fn free_slot(&self, i1: u64, i2: u64, bucket_size: u16) -> Option<Slot> {
        self.find(i1, i2, bucket_size, 0)
    }

    /// The first slot holding `fp` in bucket(i1), else in bucket(i2).
    fn slot_of(&self, l: Lookup, bucket_size: u16) -> Option<Slot> {
        self.find(l.i1, l.i2, bucket_size, l.fp)
    }

    fn find(&self, i1: u64, i2: u64, bucket_size: u16, fp: u8) -> Option<Slot> {
        [i1, i2].into_iter().find_map(|i| {
            let b = self.bucket_of(i);
            self.bucket(b, bucket_size)
                .iter()
                .position(|&s| s == fp)
                .map(|p| (b, p))
        })
    }

    /// Copies of `fp` in both buckets (a bucket that is its own alternate counts twice).
    fn count(&self, l: Lookup, bucket_size: u16) -> u64 {
        [l.i1, l.i2]
            .into_iter()
            .map(|i| {
                let b = self.bucket_of(i);
                self.bucket(b, bucket_size)
                    .iter()
                    .filter(|&&s| s == l.fp)
                    .count() as u64
            })
            .sum()
    }

    /// Cuckoo displacement: swap `fp` into slot `v` of bucket `b` (starting at `i1`, `v = 0`),
    /// move to the victim's alternate bucket, stop at the first bucket with an empty slot,
    /// else advance `v`. After `max_iterations` failures every swap is undone in reverse order,
    /// so no stored fingerprint changes. True if `fp` (or a victim) found a home.
    fn kick_insert(&mut self, mut fp: u8, i1: u64, bucket_size: u16, max_iterations: u16) -> bool {
        let bs = usize::from(bucket_size);
        let mut bucket = self.bucket_of(i1);
        let mut victim = 0usize;
        let mut swapped: Vec<Slot> = Vec::with_capacity(usize::from(max_iterations));
        for _ in 0..max_iterations {
            std::mem::swap(&mut fp, &mut self.slots.row_mut(bucket, bs)[victim]);
            swapped.push((bucket, victim));
            bucket = self.bucket_of(alternate(bucket as u64, fp));
            if let Some(p) = self
                .bucket(bucket, bucket_size)
                .iter()
                .position(|&s| s == 0)
            {
                self.set((bucket, p), bucket_size, fp);
                return true;
            }
            victim = (victim + 1) % bs;
        }
        for (b, p) in swapped.into_iter().rev() {
            std::mem::swap(&mut fp, &mut self.slots.row_mut(b, bs)[p]);
        }
        false
    }
}

/// A RedisBloom cuckoo filter: sub-filters oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CuckooChain {
    filters: Vec<SubFilter>,
    items: u64,
    deletes: u64,
    bucket_size: u16,
    max_iterations: u16,
    /// A power of two, or 0 for a filter that never grows.
    expansion: u16,
}

impl CuckooChain {
    /// The filter `CF.RESERVE` builds from admitted parameters; `None` if it cannot be
    /// allocated.
    pub fn create(p: Admitted<CuckooParams>) -> Option<Self> {
        let p = p.into_shape();
        let expansion = if p.expansion == 0 {
            0
        } else {
            p.expansion.checked_next_power_of_two()?
        };
        Some(Self {
            filters: vec![SubFilter::zeroed(p.buckets(), p.bucket_size)?],
            items: 0,
            deletes: 0,
            bucket_size: p.bucket_size,
            max_iterations: p.max_iterations,
            expansion,
        })
    }

    /// [`Self::create`] with no budget: for values whose size the caller has
    /// bounded itself (tests, tools); hosts admit a shape against their budget instead.
    pub fn new(p: CuckooParams) -> Option<Self> {
        Self::create(Allowance::unlimited().admit(p).ok()?)
    }

    fn lookup_in(&self, l: Lookup) -> bool {
        self.filters
            .iter()
            .any(|f| f.slot_of(l, self.bucket_size).is_some())
    }

    /// Whether `item` may be present.
    pub fn contains(&self, item: &[u8]) -> bool {
        self.lookup_in(Lookup::of(item))
    }

    /// CF.COUNT: matching fingerprints in the item's buckets of every sub-filter (an upper bound
    /// on the times the item was added).
    pub fn count(&self, item: &[u8]) -> u64 {
        let l = Lookup::of(item);
        self.filters
            .iter()
            .map(|f| f.count(l, self.bucket_size))
            .sum()
    }

    /// CF.ADD: stores the item's fingerprint (again, if already present). Sub-filters are tried
    /// newest to oldest; then a kick chain in the newest; then, if allowed, a new sub-filter of
    /// `expansion ×` the newest's buckets, admitted against `allowance` before it is allocated.
    /// `cf-max-expansions` is the caller's check, made once per command (as RedisBloom does);
    /// here growth stops only at [`MAX_FILTERS`], the most a dump header may describe.
    pub fn insert(&mut self, item: &[u8], allowance: &mut Allowance) -> Result<(), InsertError> {
        self.insert_lookup(Lookup::of(item), allowance)
    }

    /// [`Self::insert`] of the item `l` was hashed from.
    fn insert_lookup(&mut self, l: Lookup, allowance: &mut Allowance) -> Result<(), InsertError> {
        loop {
            let bs = self.bucket_size;
            if let Some((f, slot)) = self
                .filters
                .iter()
                .enumerate()
                .rev()
                .find_map(|(f, sub)| sub.free_slot(l.i1, l.i2, bs).map(|s| (f, s)))
            {
                self.filters[f].set(slot, bs, l.fp);
                self.items = self.items.saturating_add(1);
                return Ok(());
            }
            let newest = self.filters.last_mut().expect("at least one sub-filter");
            if newest.kick_insert(l.fp, l.i1, bs, self.max_iterations) {
                self.items = self.items.saturating_add(1);
                return Ok(());
            }
            self.grow(allowance)?;
        }
    }

    /// CF.ADDNX / CF.INSERTNX: inserts unless the item already looks present; `Ok(false)` then.
    pub fn insert_unique(
        &mut self,
        item: &[u8],
        allowance: &mut Allowance,
    ) -> Result<bool, InsertError> {
        self.insert_unique_lookup(Lookup::of(item), allowance)
    }

    /// [`Self::insert_unique`] of the item `l` was hashed from.
    fn insert_unique_lookup(
        &mut self,
        l: Lookup,
        allowance: &mut Allowance,
    ) -> Result<bool, InsertError> {
        if self.lookup_in(l) {
            return Ok(false);
        }
        self.insert_lookup(l, allowance).map(|()| true)
    }

    fn grow(&mut self, allowance: &mut Allowance) -> Result<(), InsertError> {
        if self.expansion == 0 {
            return Err(InsertError::Full);
        }
        if self.filters.len() as u64 >= MAX_FILTERS {
            return Err(InsertError::MaxExpansions);
        }
        let newest = self.filters.last().expect("at least one sub-filter");
        let buckets = newest
            .buckets
            .checked_mul(u64::from(self.expansion))
            .ok_or(InsertError::OutOfMemory)?;
        let plan = allowance
            .admit(SubFilterPlan {
                buckets,
                bucket_size: self.bucket_size,
            })
            .map_err(|over| match over.limit {
                Limit::Memory => InsertError::OutOfMemory,
                Limit::KeyCap => InsertError::OverCap,
            })?
            .into_shape();
        let sub =
            SubFilter::zeroed(plan.buckets, plan.bucket_size).ok_or(InsertError::OutOfMemory)?;
        self.filters.push(sub);
        Ok(())
    }

    /// CF.DEL: clears one matching fingerprint (newest sub-filter first, bucket(i1) before
    /// bucket(i2)). With more than one sub-filter, a delete that takes the deletes past 10% of
    /// the items compacts the filter.
    pub fn delete(&mut self, item: &[u8]) -> bool {
        let l = Lookup::of(item);
        let bs = self.bucket_size;
        let Some((f, slot)) = self
            .filters
            .iter()
            .enumerate()
            .rev()
            .find_map(|(f, sub)| sub.slot_of(l, bs).map(|s| (f, s)))
        else {
            return false;
        };
        self.filters[f].set(slot, bs, 0);
        // Counts come from a dump header, which cannot be checked against the slot bytes that
        // follow it: they saturate rather than wrap.
        self.items = self.items.saturating_sub(1);
        self.deletes = self.deletes.saturating_add(1);
        if self.filters.len() > 1 && self.deletes as f64 > COMPACT_DELETE_RATIO * self.items as f64
        {
            self.compact(false);
        }
        true
    }

    /// Compaction: for each sub-filter from the newest down to the second, moves every
    /// fingerprint into the first free slot of its two buckets in the oldest sub-filter that has
    /// one (its buckets there derive from its stored bucket index and that index's alternate);
    /// a newest sub-filter left empty is freed. `keep_going` (CF.COMPACT) goes on past a
    /// sub-filter that could not be emptied; the compaction a delete triggers stops there.
    /// Resets the delete counter.
    pub fn compact(&mut self, keep_going: bool) {
        let bs = self.bucket_size;
        let width = usize::from(bs);
        for f in (1..self.filters.len()).rev() {
            let (older, rest) = self.filters.split_at_mut(f);
            let current = &mut rest[0];
            let mut emptied = true;
            for bucket in 0..current.buckets as usize {
                for p in 0..width {
                    let fp = current.bucket(bucket, bs)[p];
                    if fp == 0 {
                        continue;
                    }
                    let i1 = bucket as u64;
                    let i2 = alternate(i1, fp);
                    let home = older
                        .iter_mut()
                        .find_map(|sub| sub.free_slot(i1, i2, bs).map(|at| (sub, at)));
                    match home {
                        Some((sub, at)) => {
                            sub.set(at, bs, fp);
                            current.set((bucket, p), bs, 0);
                        }
                        None => emptied = false,
                    }
                }
            }
            if emptied && f == self.filters.len() - 1 {
                self.filters.pop();
            }
            if !emptied && !keep_going {
                break;
            }
        }
        self.deletes = 0;
    }

    /// Fingerprints stored ("Number of items inserted").
    pub fn items(&self) -> u64 {
        self.items
    }

    /// Deletes since the last compaction.
    pub fn deletes(&self) -> u64 {
        self.deletes
    }

    /// Number of sub-filters.
    pub fn filters(&self) -> usize {
        self.filters.len()
    }

    /// Buckets of the first sub-filter (CF.INFO "Number of buckets").
    pub fn buckets(&self) -> u64 {
        self.filters[0].buckets
    }

    /// Slots per bucket.
    pub fn bucket_size(&self) -> u16 {
        self.bucket_size
    }

    /// Kick chain length.
    pub fn max_iterations(&self) -> u16 {
        self.max_iterations
    }

    /// Growth factor (a power of two, or 0).
    pub fn expansion(&self) -> u16 {
        self.expansion
    }

    /// CF.INFO Size: `40 + 16 × sub-filters + slot bytes`.
    pub fn size_bytes(&self) -> u64 {
        FILTER_OVERHEAD
            + self
                .filters
                .iter()
                .map(|f| SUB_FILTER_OVERHEAD + f.slots.len() as u64)
                .sum::<u64>()
    }

    /// Slot bytes over all sub-filters (the dump body).
    pub fn slot_bytes(&self) -> u64 {
        self.filters.iter().map(|f| f.slots.len() as u64).sum()
    }

    /// CF.DEBUG's line.
    pub fn debug_line(&self) -> String {
        format!(
            "bktsize:{} buckets:{} items:{} deletes:{} filters:{} max_iterations:{} expansion:{}",
            self.bucket_size,
            self.buckets(),
            self.items,
            self.deletes,
            self.filters.len(),
            self.max_iterations,
            self.expansion
        )
    }

    /// Each sub-filter's bucket count and slot bytes (copied), oldest first.
    pub fn sub_filters(&self) -> impl Iterator<Item = (u64, Vec<u8>)> + '_ {
        self.filters.iter().map(|f| {
            let bytes = f.slots.read(0, f.slots.len()).expect("whole array");
            (f.buckets, bytes)
        })
    }

    /// Offers the sub-filter array, then each sub-filter's slots, to a host that moves
    /// allocations (see [`bloomgate::relocate`]).
    pub fn relocate(&mut self, walk: &mut Walk<'_>) {
        walk.vec(&mut self.filters);
        for filter in &mut self.filters {
            filter.slots.relocate(walk);
        }
    }

    /// Heap bytes the filter holds beyond its own struct (sub-filter table and slots, in
    /// allocator size classes), for memory accounting.
    pub fn heap_bytes(&self) -> u64 {
        let table = self.filters.capacity() * size_of::<SubFilter>();
        crate::types::cow::allocation_size(table as u64)
            + self
                .filters
                .iter()
                .map(|f| f.slots.heap_bytes())
                .sum::<u64>()
    }

    /// Every sub-filter's slots, in order, segment by segment (the dump body, without building
    /// its chunks).
    pub fn visit_slots(&self, f: &mut dyn FnMut(&[u8])) {
        for sub in &self.filters {
            for segment in sub.slots.pieces() {
                f(segment);
            }
        }
    }

    /// The 38-byte SCANDUMP header (iterator 0).
    pub fn dump_header(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN);
        out.extend_from_slice(&self.items.to_le_bytes());
        out.extend_from_slice(&self.buckets().to_le_bytes());
        out.extend_from_slice(&self.deletes.to_le_bytes());
        out.extend_from_slice(&(self.filters.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.bucket_size.to_le_bytes());
        out.extend_from_slice(&self.max_iterations.to_le_bytes());
        out.extend_from_slice(&self.expansion.to_le_bytes());
        out
    }

    /// The sub-filter holding dump byte `offset` (0-based over all slot arrays) and the offset
    /// inside it.
    fn filter_at(&self, mut offset: u64) -> Option<(usize, usize)> {
        for (i, f) in self.filters.iter().enumerate() {
            let len = f.slots.len() as u64;
            if offset < len {
                return Some((i, offset as usize));
            }
            offset -= len;
        }
        None
    }

    /// SCANDUMP for iterator `iter >= 1`: the next chunk (a whole sub-filter up to 16 MiB, else
    /// 16 MiB pieces) and the iterator after it (1 + byte offset after the chunk); `None` when
    /// done. An iterator that does not fall on a chunk start is honoured as RedisBloom does: the
    /// chunk it falls in is returned whole and the iterator advances by the chunk's length from
    /// where it was (`2` on a 64-byte sub-filter gives `[66, all 64 bytes]`).
    pub fn dump_chunk(&self, iter: i64) -> Option<(i64, Vec<u8>)> {
        let offset = u64::try_from(iter.checked_sub(1)?).ok()?;
        let (f, at) = self.filter_at(offset)?;
        let slots = &self.filters[f].slots;
        let start = at - at % MAX_SCANDUMP_CHUNK as usize;
        let len = (slots.len() - start).min(MAX_SCANDUMP_CHUNK as usize);
        let next = iter.checked_add(len as i64)?;
        Some((
            next,
            slots
                .read(start, len)
                .expect("chunk lies inside its sub-filter"),
        ))
    }

    /// Where each SCANDUMP chunk ends, `(iterator returned with it, length)`, without copying
    /// any slots: what walking [`Self::dump_chunk`] from iterator 1 returns.
    pub fn chunk_plan(&self) -> Vec<(i64, u64)> {
        crate::codec::chunks::plan_parts(self.filters.iter().map(|f| f.slots.len() as u64))
    }

    /// A SCANDUMP header's validated shape (see `parse_header`), before anything is allocated.
    pub fn shape(header: &[u8]) -> Result<CuckooShape, HeaderError> {
        let h = parse_header(header)?;
        let bytes = h
            .sub_filter_buckets()
            .map(|b| b * u64::from(h.bucket_size))
            .sum();
        Ok(CuckooShape { header: h, bytes })
    }

    /// An all-empty filter shaped as an admitted header says.
    pub fn from_shape(shape: Admitted<CuckooShape>) -> Result<Self, HeaderError> {
        let h = shape.into_shape().header;
        let filters = h
            .sub_filter_buckets()
            .map(|buckets| SubFilter::zeroed(buckets, h.bucket_size))
            .collect::<Option<Vec<_>>>()
            .ok_or(HeaderError::CannotAllocate)?;
        Ok(Self {
            filters,
            items: h.items,
            deletes: h.deletes,
            bucket_size: h.bucket_size,
            max_iterations: h.max_iterations,
            expansion: h.expansion,
        })
    }

    /// [`Self::shape`] and [`Self::from_shape`] with no budget: for values whose size the caller has
    /// bounded itself (tests, tools); hosts admit a shape against their budget instead.
    pub fn from_header(header: &[u8]) -> Result<Self, HeaderError> {
        Self::from_shape(
            Allowance::unlimited()
                .admit(Self::shape(header)?)
                .expect("unlimited"),
        )
    }

    /// LOADCHUNK: `iter` is what SCANDUMP returned with `data`; the chunk must lie inside one
    /// sub-filter.
    pub fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
        const ERR: &str = "Couldn't load chunk!";
        let end = u64::try_from(iter)
            .ok()
            .and_then(|i| i.checked_sub(1))
            .ok_or(ERR)?;
        let start = end.checked_sub(data.len() as u64).ok_or(ERR)?;
        let (f, at) = self.filter_at(start).ok_or(ERR)?;
        let slots = &mut self.filters[f].slots;
        if data.is_empty() || data.len() > slots.len() - at {
            return Err(ERR);
        }
        slots.write(at, data);
        Ok(())
    }
}

/// Why a dump header was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderError {
    /// Not 38 bytes long: `Invalid header`.
    Invalid,
    /// A field is out of range, or the described filter cannot be allocated:
    /// `Couldn't create filter!`.
    CannotAllocate,
}

impl HeaderError {
    /// RedisBloom's error text.
    pub fn message(self) -> &'static str {
        match self {
            HeaderError::Invalid => "Invalid header",
            HeaderError::CannotAllocate => "Couldn't create filter!",
        }
    }
}

/// A filter as a validated dump header describes it (what [`CuckooChain::from_shape`]
/// allocates).
#[derive(Debug)]
pub struct CuckooShape {
    header: Header,
    bytes: u64,
}

impl CuckooShape {
    /// Bucket counts of the sub-filters, oldest first (each sub-filter's slot bytes are this
    /// times the bucket size).
    pub fn sub_filter_buckets(&self) -> impl Iterator<Item = u64> + '_ {
        self.header.sub_filter_buckets()
    }

    /// Slots per bucket.
    pub fn bucket_size(&self) -> u16 {
        self.header.bucket_size
    }
}

impl Shape for CuckooShape {
    fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[derive(Debug)]
struct Header {
    items: u64,
    buckets: u64,
    deletes: u64,
    filters: u64,
    bucket_size: u16,
    max_iterations: u16,
    expansion: u16,
}

impl Header {
    /// Bucket counts of the sub-filters: `buckets × expansion^j`.
    fn sub_filter_buckets(&self) -> impl Iterator<Item = u64> + '_ {
        let growth = u64::from(self.expansion.max(1));
        (0..self.filters).scan(self.buckets, move |b, _| {
            let this = *b;
            *b = b.saturating_mul(growth);
            Some(this)
        })
    }
}

/// The most slot bytes one filter may describe (2^40, the core library's size cap); keeps every
/// size computation far from overflow.
const MAX_SLOT_BYTES: u64 = 1 << 40;

/// Validates a header. The length must be exact (`Invalid header`); every other refusal is
/// `Couldn't create filter!`, as RedisBloom words them. Each field check is kept only because
/// something would break without it:
/// - bucket count a power of two: bucket indexes are reduced with a mask, and a kicked
///   fingerprint finds its way back only because the alternate of a reduced index is the
///   reduced alternate — otherwise out-of-range slots (a panic) or false negatives;
/// - bucket size 1..=255: 0 makes every bucket empty-width (the kick loop divides by it);
/// - at most as many buckets in the first sub-filter as CF.RESERVE's largest capacity gives
///   (`next_pow2(2^30 / bucket size)`): RedisBloom accepts more (docs/compatibility.md), and its
///   own test's forged header of 2^48 buckets made a host allocate until it died;
/// - max iterations ≥ 1, expansion 0 or a power of two ≤ 32768: what CF.RESERVE can create;
///   a non-power-of-two expansion would give sub-filters non-power-of-two bucket counts;
/// - 1..=65536 sub-filters (exactly one when the filter cannot grow): a filter needs one, and
///   a non-growing filter's later sub-filters would have zero buckets;
/// - total slots ≤ 2^40 bytes: keeps size arithmetic far from overflow (the memory budget is
///   checked by the caller before anything is allocated).
///
/// The item and delete counters are not checked against the slots (RedisBloom accepts 5 items
/// in 4 slots): they are only counters, saturating where they change.
fn parse_header(buf: &[u8]) -> Result<Header, HeaderError> {
    let buf: &[u8; HEADER_LEN] = buf.try_into().map_err(|_| HeaderError::Invalid)?;
    let u64_at = |at: usize| u64::from_le_bytes(buf[at..at + 8].try_into().expect("in header"));
    let u16_at = |at: usize| u16::from_le_bytes(buf[at..at + 2].try_into().expect("in header"));
    let h = Header {
        items: u64_at(0),
        buckets: u64_at(8),
        deletes: u64_at(16),
        filters: u64_at(24),
        bucket_size: u16_at(32),
        max_iterations: u16_at(34),
        expansion: u16_at(36),
    };
    let shape_ok = h.buckets.is_power_of_two()
        && (1..=MAX_BUCKET_SIZE).contains(&u64::from(h.bucket_size))
        && h.buckets <= (MAX_CAPACITY / u64::from(h.bucket_size)).next_power_of_two()
        && h.max_iterations >= 1
        && (h.expansion == 0 || h.expansion.is_power_of_two())
        && (1..=MAX_FILTERS).contains(&h.filters)
        && (h.expansion != 0 || h.filters == 1);
    if !shape_ok {
        return Err(HeaderError::CannotAllocate);
    }
    let mut total = 0u64;
    for buckets in h.sub_filter_buckets() {
        total = buckets
            .checked_mul(u64::from(h.bucket_size))
            .and_then(|b| b.checked_add(total))
            .filter(|&t| t <= MAX_SLOT_BYTES)
            .ok_or(HeaderError::CannotAllocate)?;
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn params(capacity: u64, bucket_size: u16, expansion: u16) -> CuckooParams {
        CuckooParams {
            capacity,
            bucket_size,
            max_iterations: 20,
            expansion,
        }
    }

    #[test]
    fn fingerprint_and_alternate_follow_the_layout() {
        let l = Lookup::of(b"foo");
        let h = murmur64a(b"foo", 0);
        assert_eq!(u64::from(l.fp), h % 255 + 1);
        assert_eq!(l.i2, h ^ u64::from(l.fp).wrapping_mul(0x5bd1e995));
        assert_eq!(alternate(l.i2, l.fp), l.i1);
    }

    /// The dump of a small filter, recomputed here straight from the documented layout (no
    /// kicks needed): header fields, then slot bytes where each fingerprint sits in the first
    /// empty slot of bucket `i1 mod n`, else of `i2 mod n`.
    #[test]
    fn dump_bytes_follow_the_documented_layout() {
        let mut f = CuckooChain::new(params(64, 2, 1)).unwrap();
        let n = 32u64;
        let mut slots = [0u8; 64];
        for word in ["apple", "banana", "cherry", "date", "elder", "fig", "grape"] {
            f.insert(word.as_bytes(), &mut Allowance::unlimited())
                .unwrap();
            let h = murmur64a(word.as_bytes(), 0);
            let fp = (h % 255 + 1) as u8;
            let i2 = h ^ u64::from(fp).wrapping_mul(0x5bd1e995);
            let free = [h % n, i2 % n].into_iter().find_map(|b| {
                let at = b as usize * 2;
                (at..at + 2).find(|&s| slots[s] == 0)
            });
            slots[free.expect("no kicks needed at this load")] = fp;
        }
        let mut header = Vec::new();
        header.extend(7u64.to_le_bytes()); // items
        header.extend(32u64.to_le_bytes()); // buckets
        header.extend(0u64.to_le_bytes()); // deletes
        header.extend(1u64.to_le_bytes()); // sub-filters
        header.extend(2u16.to_le_bytes()); // bucket size
        header.extend(20u16.to_le_bytes()); // max iterations
        header.extend(1u16.to_le_bytes()); // expansion
        assert_eq!(f.dump_header(), header);
        assert_eq!(f.dump_chunk(1), Some((65, slots.to_vec())));
        assert_eq!(f.dump_chunk(65), None);
    }

    #[test]
    fn sizes_match_redisbloom() {
        let f = CuckooChain::new(params(1000, 2, 1)).unwrap();
        assert_eq!(f.buckets(), 512);
        assert_eq!(f.size_bytes(), 1080);
        let f = CuckooChain::new(params(1024, 4, 3)).unwrap();
        assert_eq!((f.buckets(), f.expansion()), (256, 4));
        // The sizes client test suites expect from RedisBloom (capacity 10; 200 at bucket 10).
        let f = CuckooChain::new(params(10, 2, 1)).unwrap();
        assert_eq!((f.buckets(), f.size_bytes()), (8, 72));
        let f = CuckooChain::new(params(200, 10, 4)).unwrap();
        assert_eq!((f.buckets(), f.size_bytes(), f.expansion()), (32, 376, 4));
    }

    #[test]
    fn header_round_trips_and_rejects_forgeries() {
        let mut f = CuckooChain::new(params(64, 2, 2)).unwrap();
        for i in 0..200u32 {
            f.insert(&i.to_le_bytes(), &mut Allowance::unlimited())
                .unwrap();
        }
        assert!(f.filters() > 1);
        let header = f.dump_header();
        assert_eq!(header.len(), HEADER_LEN);
        let mut copy = CuckooChain::from_header(&header).unwrap();
        let mut iter = 1;
        while let Some((next, chunk)) = f.dump_chunk(iter) {
            copy.load_chunk(next, &chunk).unwrap();
            iter = next;
        }
        assert_eq!(copy, f);
        let forge = |at: usize, bytes: &[u8]| {
            let mut h = header.clone();
            h[at..at + bytes.len()].copy_from_slice(bytes);
            CuckooChain::from_header(&h).map(|_| ())
        };
        let refused = Err(HeaderError::CannotAllocate);
        assert_eq!(forge(8, &3u64.to_le_bytes()), refused);
        assert_eq!(forge(24, &0u64.to_le_bytes()), refused);
        assert_eq!(forge(24, &u64::MAX.to_le_bytes()), refused);
        assert_eq!(forge(32, &0u16.to_le_bytes()), refused);
        assert_eq!(forge(36, &3u16.to_le_bytes()), refused);
        assert_eq!(forge(8, &(1u64 << 62).to_le_bytes()), refused);
        // More buckets than CF.RESERVE can create (RedisBloom's own forged test header has
        // 2^48; 2^32 and 2^40 made hosts allocate until they died).
        for buckets in [1u64 << 32, 1 << 40, 1 << 48] {
            assert_eq!(forge(8, &buckets.to_le_bytes()), refused, "{buckets}");
        }
        let mut widest = header.clone();
        widest[8..16].copy_from_slice(&(1u64 << 30).to_le_bytes());
        widest[24..32].copy_from_slice(&1u64.to_le_bytes());
        widest[32..34].copy_from_slice(&1u16.to_le_bytes());
        assert_eq!(CuckooChain::shape(&widest).unwrap().bytes(), 1 << 30);
        widest[8..16].copy_from_slice(&(1u64 << 31).to_le_bytes());
        assert!(CuckooChain::shape(&widest).is_err());
        // Counters are not judged against the slots (RedisBloom accepts them).
        assert_eq!(forge(0, &u64::MAX.to_le_bytes()), Ok(()));
        assert_eq!(
            CuckooChain::from_header(&header[..37]).map(|_| ()),
            Err(HeaderError::Invalid)
        );
        assert!(copy.load_chunk(1 << 40, b"x").is_err());
        assert!(copy.load_chunk(0, b"").is_err());
    }

    #[test]
    fn non_growing_filter_fills_up_and_keeps_everything() {
        let mut f = CuckooChain::new(params(8, 2, 0)).unwrap();
        let mut stored = Vec::new();
        for i in 0..100u32 {
            match f.insert(&i.to_le_bytes(), &mut Allowance::unlimited()) {
                Ok(()) => stored.push(i),
                Err(e) => assert_eq!(e, InsertError::Full),
            }
        }
        assert_eq!(f.items(), stored.len() as u64);
        assert!(stored.iter().all(|i| f.contains(&i.to_le_bytes())));
    }

    #[test]
    fn growth_stops_at_the_budget() {
        let mut g = CuckooChain::new(params(4, 2, 1)).unwrap();
        let mut allowance = Allowance::new(3);
        let oom = (0..200u32).find_map(|i| g.insert(&i.to_le_bytes(), &mut allowance).err());
        assert_eq!(oom, Some(InsertError::OutOfMemory));
    }

    #[test]
    fn deletes_compact_into_older_sub_filters() {
        let mut f = CuckooChain::new(params(16, 2, 1)).unwrap();
        for i in 0..40u32 {
            f.insert(&i.to_le_bytes(), &mut Allowance::unlimited())
                .unwrap();
        }
        let grown = f.filters();
        assert!(grown > 1);
        for i in 0..30u32 {
            assert!(f.delete(&i.to_le_bytes()));
        }
        assert!(
            f.filters() < grown,
            "compaction freed the emptied newest sub-filters"
        );
        assert_eq!(f.items(), 10);
        assert!((30..40u32).all(|i| f.contains(&i.to_le_bytes())));
    }

    proptest! {
        /// Any mix of adds (including failed ones), deletes of added items and compactions
        /// keeps every remaining added item visible, and a failed add changes nothing.
        #[test]
        fn no_false_negatives(ops in prop::collection::vec((0u8..4, 0u16..300), 1..400),
                              bucket_size in 1u16..5, expansion in 0u16..3) {
            let mut f = CuckooChain::new(CuckooParams {
                capacity: 8, bucket_size, max_iterations: 10, expansion,
            }).unwrap();
            let mut present: Vec<u16> = Vec::new();
            for (op, key) in ops {
                let item = key.to_le_bytes();
                match op {
                    0 | 1 => {
                        let before = f.clone();
                        match f.insert(&item, &mut Allowance::unlimited()) {
                            Ok(()) => present.push(key),
                            Err(_) => prop_assert_eq!(&f, &before),
                        }
                    }
                    2 => if let Some(pos) = present.iter().position(|&k| k == key) {
                        present.swap_remove(pos);
                        prop_assert!(f.delete(&item));
                    },
                    _ => f.compact(key % 2 == 0),
                }
                prop_assert_eq!(f.items(), present.len() as u64);
                for k in &present {
                    prop_assert!(f.contains(&k.to_le_bytes()));
                }
            }
        }
    }
}
