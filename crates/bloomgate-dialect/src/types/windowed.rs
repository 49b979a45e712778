//! "Seen in the last N windows": a time-windowed filter as a server value (`WF.*` commands), an
//! extension of the dialect that RedisBloom does not have. The value is the core library's
//! [`WindowedBloomFilter`] (the one windowed filter of the project: the gate's local filters
//! age items exactly as these values do) plus what a server value needs on top: its creation
//! parameters, the dump format, memory-budget checks, the bound on write times, and the state
//! of a dump being loaded.
//!
//! Time is cut into aligned slots of `window_ms`; slot `s` covers `[s·W, (s+1)·W)`. Each slot
//! that received writes has one generation: a scalable Bloom filter (so a generation that fills
//! before its window ends grows by a link instead of rotating early — retention is never
//! shortened by load). At time `now` the live slots are the `G` newest up to `⌊now/W⌋`; older
//! generations are dropped by the next write.
//!
//! # Retention
//! An item added at time `t` sits in slot `⌊t/W⌋`, which stays live while
//! `⌊now/W⌋ < ⌊t/W⌋ + G`, i.e. at every `now < (⌊t/W⌋ + G)·W`. Since `⌊t/W⌋·W > t − W`, the item
//! answers 1 at every time `< t + (G−1)·W`; and at every time `≥ t + G·W` its slot is dead, so it
//! answers as an absent item would (with the filter's false-positive rate).
//!
//! # Write times
//! A write at time `t` moves the filter's clock to `⌊t/W⌋`, and the slots that are dead there
//! go. So a write may not lie a full retention or more in the future of the server's clock:
//! `AT t` with `⌊t/W⌋ ≥ ⌊now/W⌋ + G` (roughly, `t ≥ now + G·W`) is refused with
//! [`ERR_FUTURE`] before anything changes. Any accepted write therefore leaves the slot of `now`
//! live, and writes at the server's time keep landing in live generations. Times in the past
//! are accepted; a write into a slot already dead stores nothing and answers 0.
//!
//! # Determinism
//! Reads evaluate liveness against the caller's clock and change nothing. A write at time `t`
//! is a pure function of the value and `t` (drop slots `≤ ⌊t/W⌋ − G`, add to slot `⌊t/W⌋`), so
//! logging and replicating writes with their effective timestamp (`WF.INSERT key AT t ...`)
//! rebuilds the same bytes on replay or on a replica, whatever its clock says (a replay's clock
//! is later than the write's, so the future bound never refuses it).
//!
//! # Accuracy
//! Each generation targets `p_gen = 1 − (1 − p)^(1/G)`, so a query over `G` generations each at
//! their bound is positive with probability at most `p`.
//!
//! # Dump format (`WF.SCANDUMP` / `WF.LOADCHUNK`, RDB, snapshots)
//! The header (iterator 0 → `[1, header]`), little-endian: magic `BGWF`, format version `1`,
//! `f64 error`, `u64 capacity`, `u64 window_ms`, `u32 generations`, `u32 expansion`,
//! `u32 count`, then per generation `u64 slot, u64 bytes` (slots strictly increasing). Then one
//! chunk per generation (iterator `i + 2` for generation `i`), each the generation's filter in the
//! core library's checksummed file format. Every field is validated — a generation's declared
//! bytes must be the image of a whole number of links of the generation's growth schedule — and
//! the declared bytes are checked against the memory budget before anything is allocated; each
//! chunk is verified (checksum, kind, parameters, length) before it replaces its placeholder.
//!
//! # Loading a dump
//! A header creates the filter with each generation an empty filter of the declared shape
//! (answering as empty, as a half-loaded RedisBloom filter does) awaiting its chunk. Such a
//! half-loaded value is a valid value at every step: it saves, dumps and loads (the awaited
//! generations as the empty filters they are), as BF and CF values do. A write into an awaited
//! generation keeps that write and ends the wait: its chunk is then refused, as a chunk sent
//! twice is. The wait is not persisted: a value saved half-way loads complete.
//!
//! # Snapshots
//! Generations are shared between clones (copy-on-write per generation, in the core filter): a
//! server snapshotting a value while writes continue copies only the generations written during
//! the snapshot.

use bloomgate::filters::LINES_IN_FLIGHT;
use bloomgate::{
    FilterCodec, Inserted, KeyHash, ScalableBloomFilter, WindowConfig, WindowedBloomFilter,
};

use crate::budget::{Allowance, Buffer, Limit};

/// Most generations a filter may have (each query checks all of them).
pub const MAX_GENERATIONS: u64 = 1024;
/// Largest capacity per generation (BF.RESERVE's).
pub const MAX_CAPACITY: u64 = crate::types::sbchain::MAX_CAPACITY;
/// Largest growth factor of a generation.
pub const MAX_EXPANSION: u64 = 32768;
/// Longest window: about 100 years in milliseconds.
pub const MAX_WINDOW_MS: u64 = 100 * 365 * 24 * 3600 * 1000;

const MAGIC: &[u8; 4] = b"BGWF";
const FORMAT_VERSION: u8 = 1;
/// Magic, version, error, capacity, window, generations, expansion, count.
pub(crate) const HEADER_FIXED: usize = 4 + 1 + 8 + 8 + 8 + 4 + 4 + 4;
const HEADER_PER_GENERATION: usize = 16;
/// Bookkeeping bytes counted per value and per generation.
const OVERHEAD: u64 = 64;
/// Seed of every generation (fixed: dumps are portable between servers).
const SEED: u64 = bloomgate::hash::DEFAULT_SEED;
/// Items a batched add prefetches ahead: a generation's links are classic Bloom filters,
/// whose batched calls keep two lines per key in flight.
const ITEMS_AHEAD: usize = LINES_IN_FLIGHT / 2;

/// A generation as a header lists it: slot and file-image bytes.
type SlotImage = (u64, u64);
/// A header's total declared bytes and `(iterator, length)` chunk plan.
type HeaderPlan = (u64, Vec<(i64, u64)>);
/// A generation a header declares: slot, file-image bytes and the links those bytes make.
type DeclaredGeneration = (u64, u64, usize);

/// Error texts.
pub const ERR_BAD_HEADER: &str = "ERR invalid windowed filter header";
/// A chunk that is not the generation its iterator names.
pub const ERR_BAD_CHUNK: &str = "ERR invalid windowed filter chunk";
/// A write time a full retention or more ahead of the server's clock.
pub const ERR_FUTURE: &str =
    "ERR time is a full retention (generations x window) or more ahead of the server's clock";

/// Creation parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowParams {
    /// Target false-positive rate over all live generations, in (0, 1).
    pub error: f64,
    /// Items a generation is sized for before it grows.
    pub capacity: u64,
    /// Width of a slot, in milliseconds.
    pub window_ms: u64,
    /// Live generations `G` (2..=1024).
    pub generations: u32,
    /// Growth factor of a generation's links (1..=32768).
    pub expansion: u32,
}

impl WindowParams {
    /// Checks every range; the error text names the bad argument.
    pub fn validate(&self) -> Result<(), &'static str> {
        crate::types::sbchain::check_error_rate(self.error)?;
        crate::types::sbchain::check_capacity(self.capacity)?;
        if !(1..=MAX_WINDOW_MS).contains(&self.window_ms) {
            return Err("ERR window must be in the range [1, 3153600000000] milliseconds");
        }
        if !(2..=MAX_GENERATIONS).contains(&u64::from(self.generations)) {
            return Err("ERR generations must be in the range [2, 1024]");
        }
        if !(1..=MAX_EXPANSION).contains(&u64::from(self.expansion)) {
            return Err("ERR expansion must be in the range [1, 32768]");
        }
        Ok(())
    }

    /// The core filter's configuration.
    pub fn config(&self) -> WindowConfig {
        WindowConfig {
            generations: self.generations as usize,
            items_per_generation: self.capacity,
            fpr: self.error,
            generation_window_ms: Some(self.window_ms),
            growth: self.expansion,
        }
    }

    /// Refuses a write time a full retention or more ahead of `now_ms`: its slot must be
    /// less than G slots after the slot of `now_ms` (see the module docs).
    pub fn check_time(&self, at_ms: u64, now_ms: u64) -> Result<(), &'static str> {
        let (at, now) = (at_ms / self.window_ms, now_ms / self.window_ms);
        if at >= now.saturating_add(u64::from(self.generations)) {
            return Err(ERR_FUTURE);
        }
        Ok(())
    }

    /// The rate each generation is sized for: `1 − (1 − p)^(1/G)`.
    pub fn generation_error(&self) -> f64 {
        self.config().generation_fpr()
    }

    /// Bytes a new generation takes.
    pub fn generation_bytes(&self) -> Option<u64> {
        self.config().generation_bytes().ok()
    }

    /// Links of a generation whose file image is `len` bytes, computed from the growth
    /// schedule without allocating; `None` if no whole number of links has that length.
    fn links_for_image(&self, len: u64) -> Option<usize> {
        let config = self.config();
        let mut total = IMAGE_FRAME;
        for links in 1..=bloomgate::filters::MAX_LINKS {
            total = total.checked_add(PER_LINK + config.generation_link_bytes(links - 1).ok()?)?;
            if total >= len {
                return (total == len).then_some(links);
            }
        }
        None
    }

    /// An empty generation of `links` links (a placeholder awaiting its chunk).
    fn empty_generation(&self, links: usize) -> Option<ScalableBloomFilter> {
        let mut filter = self.config().new_generation(SEED).ok()?;
        for _ in 1..links {
            filter.push_empty_link().ok()?;
        }
        Some(filter)
    }
}

/// File frame (header and XXH3 checksum) plus the scalable body's fixed fields (initial
/// capacity, FPR, growth, tightening, link count).
const IMAGE_FRAME: u64 = bloomgate::codec::HEADER_LEN as u64 + 8 + (8 + 8 + 4 + 8 + 4);
/// Per link: its nested length and its parameters (bits, hashes, items, count), then the bits.
const PER_LINK: u64 = 8 + (8 + 4 + 8 + 8);

/// Bytes of `filter`'s file image (`FilterCodec::to_bytes`), from its shape instead of
/// serialising it. Pinned to `to_bytes` by a test.
fn image_len(filter: &ScalableBloomFilter) -> u64 {
    let links = filter.links() as u64;
    // `memory_bytes` is each link's struct plus its bit array.
    let bit_arrays =
        filter.memory_bytes() as u64 - links * std::mem::size_of::<bloomgate::BloomFilter>() as u64;
    IMAGE_FRAME + links * PER_LINK + bit_arrays
}

/// Why an add did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddError {
    /// The generation would have to grow beyond the memory budget.
    OutOfMemory,
    /// The generation would take the filter past `bloom-memory-usage-limit`.
    OverCap,
    /// The generation cannot grow any further (link limit or size overflow).
    Full,
}

impl AddError {
    /// The error text.
    pub fn message(self) -> &'static str {
        match self {
            AddError::OutOfMemory => crate::ERR_OOM,
            AddError::OverCap => crate::ERR_CAP,
            AddError::Full => "ERR problem inserting into filter",
        }
    }
}

/// A time-windowed filter value.
#[derive(Clone, Debug)]
pub struct WindowedFilter {
    params: WindowParams,
    inner: WindowedBloomFilter,
    /// Slots of the generations created from a dump header whose chunk has not arrived.
    awaiting: Vec<u64>,
}

impl WindowedFilter {
    /// An empty filter; `params` must be valid.
    pub fn new(params: WindowParams) -> Self {
        let inner = WindowedBloomFilter::with_seed(params.config(), SEED, 0)
            .expect("validated parameters make a valid filter");
        Self {
            params,
            inner,
            awaiting: Vec::new(),
        }
    }

    /// The creation parameters.
    pub fn params(&self) -> &WindowParams {
        &self.params
    }

    /// The core filter the value is.
    pub fn filter(&self) -> &WindowedBloomFilter {
        &self.inner
    }

    /// Adds `item` at time `at_ms` (dropping generations dead at that time first), after
    /// admitting what it would allocate (a new generation or link) against `allowance`. `Ok(true)`
    /// if new to its generation; `Ok(false)` if its generation may already hold it — or if
    /// `at_ms` lies in a slot already dead (its retention has passed; nothing is stored).
    pub fn add(
        &mut self,
        item: &[u8],
        at_ms: u64,
        allowance: &mut Allowance,
    ) -> Result<bool, AddError> {
        self.add_hash(self.inner.hash(item), at_ms, allowance)
    }

    /// [`Self::add`] of the item hashed to `h`.
    fn add_hash(
        &mut self,
        h: KeyHash,
        at_ms: u64,
        allowance: &mut Allowance,
    ) -> Result<bool, AddError> {
        let bytes = self
            .inner
            .allocation_for(h, at_ms)
            .map_err(|_| AddError::Full)?;
        if bytes > 0 {
            allowance
                .admit(Buffer(bytes.saturating_add(OVERHEAD)))
                .map_err(|over| match over.limit {
                    Limit::Memory => AddError::OutOfMemory,
                    Limit::KeyCap => AddError::OverCap,
                })?;
        }
        let inserted = self.inner.insert_hash_at(h, at_ms).map_err(|e| match e {
            bloomgate::Error::OutOfMemory(_) => AddError::OutOfMemory,
            _ => AddError::Full,
        })?;
        if !self.awaiting.is_empty() {
            // A write into an awaited generation ends its wait; dropped generations end theirs.
            let written = (inserted != Inserted::Expired).then(|| self.inner.slot_of(at_ms));
            let inner = &self.inner;
            self.awaiting
                .retain(|&s| Some(s) != written && inner.retained().any(|g| g.slot() == s));
        }
        Ok(inserted == Inserted::New)
    }

    /// [`Self::add`] of each item in order at `at_ms` (each sees the earlier ones), handing
    /// each answer to `added` and stopping at the first error, which it returns. The newest
    /// link of the generation the items go to is asked for the lines of the item
    /// `LINES_IN_FLIGHT / 2` places ahead while one is added (when it is big enough to miss the
    /// cache), so a batch overlaps its misses; bits, counts and answers are those of one add
    /// after another.
    pub fn add_many<I: AsRef<[u8]>>(
        &mut self,
        items: &[I],
        at_ms: u64,
        allowance: &mut Allowance,
        mut added: impl FnMut(bool),
    ) -> Result<(), AddError> {
        let slot = self.inner.slot_of(at_ms);
        let hash = |f: &Self, j: usize| f.inner.hash(items[j].as_ref());
        let prefetch = |f: &Self, h| {
            let target = f.inner.retained().rev().find(|g| g.slot() == slot);
            if let Some(filter) = target.and_then(|g| g.filter()) {
                filter.prefetch_hash(h);
            }
        };
        // The hashes ahead, in a ring on the stack (WF.ADD, a batch of one, allocates nothing).
        let mut ahead = [KeyHash { lo: 0, hi: 0 }; 2 * ITEMS_AHEAD];
        for (j, slot) in ahead
            .iter_mut()
            .enumerate()
            .take(items.len().min(ITEMS_AHEAD))
        {
            *slot = hash(self, j);
            prefetch(self, *slot);
        }
        for j in 0..items.len() {
            let next = j + ITEMS_AHEAD;
            if next < items.len() {
                ahead[next % ahead.len()] = hash(self, next);
                prefetch(self, ahead[next % ahead.len()]);
            }
            added(self.add_hash(ahead[j % ahead.len()], at_ms, allowance)?);
        }
        Ok(())
    }

    /// Whether `item` may have been added within the retention as of `now_ms`.
    pub fn contains(&self, item: &[u8], now_ms: u64) -> bool {
        self.inner.contains_at(item, now_ms)
    }

    /// [`Self::contains`] of each item, batched: every item hashed first, then each live
    /// generation's links queried with the core's prefetching batch query about the items
    /// not yet found.
    pub fn contains_many<I: AsRef<[u8]>>(&self, items: &[I], now_ms: u64) -> Vec<bool> {
        let hashes: Vec<_> = items.iter().map(|i| self.inner.hash(i.as_ref())).collect();
        let mut found = vec![false; items.len()];
        self.inner.mark_batch_hashes_at(&hashes, now_ms, &mut found);
        found
    }

    /// Items added to live generations (each counted once per generation).
    pub fn items(&self, now_ms: u64) -> u64 {
        self.inner.live_at(now_ms).map(|g| g.len()).sum()
    }

    /// Per live generation: slot start (ms), items, bytes, estimated false-positive rate.
    pub fn generation_stats(&self, now_ms: u64) -> Vec<(u64, u64, u64, f64)> {
        self.inner
            .live_at(now_ms)
            .map(|g| {
                (
                    g.slot() * self.params.window_ms,
                    g.len(),
                    g.memory_bytes() as u64,
                    g.estimated_fpr(),
                )
            })
            .collect()
    }

    /// Estimated false-positive rate of a query now: `1 − Π (1 − fpr_g)` over live generations.
    pub fn estimated_fpr(&self, now_ms: u64) -> f64 {
        1.0 - self
            .inner
            .live_at(now_ms)
            .map(|g| 1.0 - g.estimated_fpr())
            .product::<f64>()
    }

    /// Offers the generations' buffers (see [`bloomgate::WindowedBloomFilter::relocate`]) and
    /// the list of generations awaiting a chunk to a host that moves allocations.
    pub fn relocate(&mut self, walk: &mut bloomgate::relocate::Walk<'_>) {
        self.inner.relocate(walk);
        walk.vec(&mut self.awaiting);
    }

    /// Bytes the value takes (bit arrays plus bookkeeping).
    pub fn memory(&self) -> u64 {
        OVERHEAD
            + self
                .inner
                .retained()
                .map(|g| OVERHEAD + g.memory_bytes() as u64)
                .sum::<u64>()
    }

    /// Each generation's filter, oldest first.
    fn generation_filters(&self) -> impl Iterator<Item = (u64, &ScalableBloomFilter)> + '_ {
        self.inner.retained().map(|g| {
            let filter = g
                .filter()
                .expect("a WF value's generations are scalable (version-1 files are core-only)");
            (g.slot(), filter)
        })
    }

    fn header_with(&self, parts: &[SlotImage]) -> Vec<u8> {
        let p = &self.params;
        let mut out = Vec::with_capacity(HEADER_FIXED + parts.len() * HEADER_PER_GENERATION);
        out.extend_from_slice(MAGIC);
        out.push(FORMAT_VERSION);
        out.extend_from_slice(&p.error.to_le_bytes());
        out.extend_from_slice(&p.capacity.to_le_bytes());
        out.extend_from_slice(&p.window_ms.to_le_bytes());
        out.extend_from_slice(&p.generations.to_le_bytes());
        out.extend_from_slice(&p.expansion.to_le_bytes());
        out.extend_from_slice(&(parts.len() as u32).to_le_bytes());
        for (slot, len) in parts {
            out.extend_from_slice(&slot.to_le_bytes());
            out.extend_from_slice(&len.to_le_bytes());
        }
        out
    }

    fn parts(&self) -> Vec<SlotImage> {
        self.generation_filters()
            .map(|(slot, f)| (slot, image_len(f)))
            .collect()
    }

    /// The dump header (iterator 0).
    pub fn dump_header(&self) -> Vec<u8> {
        self.header_with(&self.parts())
    }

    /// `(iterator, length)` of each generation's chunk.
    pub fn chunk_plan(&self) -> Vec<(i64, u64)> {
        self.parts()
            .into_iter()
            .enumerate()
            .map(|(i, (_, len))| (i as i64 + 2, len))
            .collect()
    }

    /// The chunk returned with iterator `iter` (generation `iter − 2`), empty past the end.
    pub fn chunk_bytes(&self, iter: i64) -> Vec<u8> {
        usize::try_from(iter - 2)
            .ok()
            .and_then(|i| self.generation_filters().nth(i))
            .map(|(_, f)| f.to_bytes())
            .unwrap_or_default()
    }

    /// SCANDUMP: `[1, header]` at 0, then one generation per call, `[0, ""]` when done.
    pub fn scandump(&self, iter: i64) -> (i64, Vec<u8>) {
        let count = self.inner.retained().count();
        match iter {
            0 => (1, self.dump_header()),
            i if i >= 1 && ((i - 1) as usize) < count => (i + 1, self.chunk_bytes(i + 1)),
            _ => (0, Vec::new()),
        }
    }

    /// Length of a header from its fixed part.
    pub fn header_len(prefix: &[u8]) -> Option<usize> {
        let count = u32::from_le_bytes(
            prefix
                .get(HEADER_FIXED - 4..HEADER_FIXED)?
                .try_into()
                .ok()?,
        );
        (count as usize)
            .checked_mul(HEADER_PER_GENERATION)?
            .checked_add(HEADER_FIXED)
    }

    /// The header's parameters and `(slot, bytes, links)` per generation, every field
    /// validated without allocating.
    fn parse_header(
        header: &[u8],
    ) -> Result<(WindowParams, Vec<DeclaredGeneration>), &'static str> {
        let len = Self::header_len(header).ok_or(ERR_BAD_HEADER)?;
        if header.len() != len || &header[..4] != MAGIC || header[4] != FORMAT_VERSION {
            return Err(ERR_BAD_HEADER);
        }
        let u64_at = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("len"));
        let u32_at = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("len"));
        let params = WindowParams {
            error: f64::from_le_bytes(header[5..13].try_into().expect("len")),
            capacity: u64_at(13),
            window_ms: u64_at(21),
            generations: u32_at(29),
            expansion: u32_at(33),
        };
        params.validate().map_err(|_| ERR_BAD_HEADER)?;
        let count = u32_at(37) as usize;
        if count as u64 > u64::from(params.generations) {
            return Err(ERR_BAD_HEADER);
        }
        let mut parts: Vec<DeclaredGeneration> = Vec::with_capacity(count);
        for i in 0..count {
            let at = HEADER_FIXED + i * HEADER_PER_GENERATION;
            let (slot, bytes) = (u64_at(at), u64_at(at + 8));
            let ordered = parts.last().is_none_or(|&(prev, _, _)| slot > prev);
            let links = params.links_for_image(bytes).ok_or(ERR_BAD_HEADER)?;
            if !ordered || slot.checked_add(u64::from(params.generations)).is_none() {
                return Err(ERR_BAD_HEADER);
            }
            parts.push((slot, bytes, links));
        }
        // Live together: all within G slots of the newest.
        if let (Some(&(first, _, _)), Some(&(last, _, _))) = (parts.first(), parts.last()) {
            if first + u64::from(params.generations) <= last {
                return Err(ERR_BAD_HEADER);
            }
        }
        Ok((params, parts))
    }

    /// Bytes the header says the filter takes, checked against a budget before loading.
    pub fn header_bytes(header: &[u8]) -> Result<u64, &'static str> {
        let (_, parts) = Self::parse_header(header)?;
        parts
            .iter()
            .try_fold(0u64, |sum, &(_, bytes, _)| sum.checked_add(bytes))
            .ok_or(ERR_BAD_HEADER)
    }

    /// The header's total declared bytes and `(iterator, length)` chunk plan, validated
    /// without allocating.
    pub fn header_plan(header: &[u8]) -> Result<HeaderPlan, &'static str> {
        let (_, parts) = Self::parse_header(header)?;
        let bytes = parts
            .iter()
            .try_fold(0u64, |sum, &(_, bytes, _)| sum.checked_add(bytes))
            .ok_or(ERR_BAD_HEADER)?;
        let plan = parts
            .iter()
            .enumerate()
            .map(|(i, &(_, len, _))| (i as i64 + 2, len))
            .collect();
        Ok((bytes, plan))
    }

    /// A filter shaped as the header says, its generations empty until their chunks arrive.
    /// The caller checks [`Self::header_bytes`] against its budget first.
    pub fn from_header(header: &[u8]) -> Result<Self, &'static str> {
        let (params, parts) = Self::parse_header(header)?;
        let mut generations = Vec::with_capacity(parts.len());
        for &(slot, _, links) in &parts {
            let empty = params.empty_generation(links).ok_or(ERR_BAD_HEADER)?;
            generations.push((slot, empty));
        }
        let inner = WindowedBloomFilter::from_generations(params.config(), SEED, generations)
            .map_err(|_| ERR_BAD_HEADER)?;
        Ok(Self {
            params,
            inner,
            awaiting: parts.iter().map(|&(slot, _, _)| slot).collect(),
        })
    }

    /// LOADCHUNK: generation `iter − 2`'s file image, verified (checksum, kind, parameters and
    /// the length of the generation it replaces) before it replaces the placeholder. Only a
    /// generation still awaiting its chunk takes one.
    pub fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
        let index = usize::try_from(iter - 2).map_err(|_| ERR_BAD_CHUNK)?;
        let (slot, current) = self
            .generation_filters()
            .nth(index)
            .map(|(slot, f)| (slot, image_len(f)))
            .ok_or(ERR_BAD_CHUNK)?;
        if data.len() as u64 != current || !self.awaiting.contains(&slot) {
            return Err(ERR_BAD_CHUNK);
        }
        let filter = ScalableBloomFilter::from_bytes(data).map_err(|_| ERR_BAD_CHUNK)?;
        self.inner
            .replace_generation(index, filter)
            .map_err(|_| ERR_BAD_CHUNK)?;
        self.awaiting.retain(|&s| s != slot);
        Ok(())
    }
}

/// A windowed filter's header, validated (every generation's declared bytes are whole links of
/// its growth schedule) without allocating anything: its total bytes and chunk plan. Only
/// [`DialectType::from_shape`](crate::value::DialectType::from_shape) allocates (each
/// generation an empty filter of its declared shape, until its chunk arrives).
#[derive(Debug)]
pub struct WindowedShape {
    pub(crate) header: Vec<u8>,
    pub(crate) bytes: u64,
    pub(crate) plan: Vec<(i64, u64)>,
}

impl WindowedShape {
    /// `(iterator, length)` of each generation's chunk, as the header declares them.
    pub fn chunk_plan(&self) -> Vec<(i64, u64)> {
        self.plan.clone()
    }
}

impl crate::budget::Shape for WindowedShape {
    fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(window_ms: u64, generations: u32) -> WindowParams {
        WindowParams {
            error: 0.01,
            capacity: 100,
            window_ms,
            generations,
            expansion: 2,
        }
    }

    /// Batched reads answer as single ones, across generations, links and times (dead
    /// generations skipped), on a small filter and on one past the core's prefetch size.
    #[test]
    fn contains_many_answers_as_contains() {
        for capacity in [100, 5_000_000] {
            let mut f = WindowedFilter::new(WindowParams {
                capacity,
                ..params(1000, 3)
            });
            for i in 0..600u64 {
                f.add(
                    format!("w{i}").as_bytes(),
                    i * 10,
                    &mut Allowance::unlimited(),
                )
                .unwrap();
            }
            let probes: Vec<Vec<u8>> = (0..900).map(|i| format!("w{i}").into_bytes()).collect();
            for now in [0, 2500, 5990, 7000, 9000] {
                let single: Vec<bool> = probes.iter().map(|p| f.contains(p, now)).collect();
                assert_eq!(f.contains_many(&probes, now), single, "now {now}");
            }
            assert!(f.contains_many(&probes, 5990)[300..600].iter().all(|&p| p));
        }
    }

    /// Batched adds answer as one add after another (duplicates inside a batch answer false
    /// the second time; growth mid-batch), with identical dumps, on a small filter and on
    /// one big enough to prefetch.
    #[test]
    fn add_many_answers_as_add() {
        for capacity in [10, 5_000_000] {
            let mut a = WindowedFilter::new(WindowParams {
                capacity,
                ..params(1000, 3)
            });
            let mut b = a.clone();
            for (n, at) in [(0u64, 0u64), (1, 1500), (2, 1700)] {
                let items: Vec<Vec<u8>> = (0..130)
                    .map(|i| format!("m{}", (i + n * 50) % 100).into_bytes())
                    .collect();
                let mut got = Vec::new();
                a.add_many(&items, at, &mut Allowance::unlimited(), |x| got.push(x))
                    .unwrap();
                let want: Vec<bool> = items
                    .iter()
                    .map(|i| b.add(i, at, &mut Allowance::unlimited()).unwrap())
                    .collect();
                assert_eq!(got, want);
                assert!(!got[100], "a duplicate inside the batch");
            }
            assert_eq!(a.dump_header(), b.dump_header());
            assert_eq!(a.chunk_bytes(1), b.chunk_bytes(1));
        }
    }

    /// The image length computed from a generation's shape is what serialising it writes, as
    /// it grows link by link, for several capacities, rates and growth factors.
    #[test]
    fn image_len_is_the_serialised_length() {
        for (capacity, error, expansion) in [(10, 0.1, 1), (100, 0.01, 2), (37, 0.001, 4)] {
            let p = WindowParams {
                error,
                capacity,
                window_ms: 1000,
                generations: 3,
                expansion,
            };
            let mut filter = p.config().new_generation(SEED).unwrap();
            let mut links = 0;
            for i in 0..2000u32 {
                if filter.links() != links {
                    links = filter.links();
                    assert_eq!(image_len(&filter), filter.to_bytes().len() as u64, "{p:?}");
                }
                filter.insert(i.to_le_bytes()).unwrap();
            }
            assert!(links >= 3, "{p:?}: {links} links");
            assert_eq!(image_len(&filter), filter.to_bytes().len() as u64, "{p:?}");
        }
        let mut f = WindowedFilter::new(params(1000, 4));
        for i in 0..1000u32 {
            f.add(
                &i.to_le_bytes(),
                u64::from(i % 3) * 1000,
                &mut Allowance::unlimited(),
            )
            .unwrap();
        }
        for (iter, len) in f.chunk_plan() {
            assert_eq!(f.chunk_bytes(iter).len() as u64, len);
        }
    }

    /// The retention promise, at every boundary: present before t + (G−1)·W, dead from t + G·W.
    #[test]
    fn retention_bounds_hold_at_every_offset() {
        let (w, g) = (1000u64, 3u32);
        for t in [0u64, 1, 499, 999, 1000, 12_345] {
            let mut f = WindowedFilter::new(params(w, g));
            f.add(b"x", t, &mut Allowance::unlimited()).unwrap();
            let keep = t + (u64::from(g) - 1) * w;
            for now in [t, t + 1, keep.saturating_sub(1)] {
                assert!(f.contains(b"x", now), "t={t} now={now}");
            }
            let gone = t + u64::from(g) * w;
            assert!(!f.contains(b"x", gone), "t={t}");
            // A later write drops the dead generation for good.
            f.add(b"y", gone, &mut Allowance::unlimited()).unwrap();
            assert!(
                !f.contains(b"x", t),
                "t={t}: dropped, whatever the reader's clock"
            );
        }
    }

    /// A generation that overflows its capacity grows instead of rotating: nothing added within
    /// the window is lost, and the false-positive rate stays near the target.
    #[test]
    fn overload_grows_and_keeps_accuracy() {
        let mut f = WindowedFilter::new(params(60_000, 2));
        for i in 0..5_000u32 {
            f.add(&i.to_le_bytes(), 10, &mut Allowance::unlimited())
                .unwrap();
        }
        assert!((0..5_000u32).all(|i| f.contains(&i.to_le_bytes(), 59_999)));
        let fp = (5_000..105_000u32)
            .filter(|i| f.contains(&i.to_le_bytes(), 10))
            .count();
        assert!(fp < 1_000, "{fp} false positives in 100,000");
    }

    #[test]
    fn dump_round_trip_and_refusals() {
        let mut f = WindowedFilter::new(params(1000, 4));
        for t in [0u64, 1500, 2500, 3500] {
            for i in 0..300u32 {
                f.add(
                    format!("{t}-{i}").as_bytes(),
                    t,
                    &mut Allowance::unlimited(),
                )
                .unwrap();
            }
        }
        let header = f.dump_header();
        assert_eq!(
            WindowedFilter::header_len(&header[..HEADER_FIXED]),
            Some(header.len())
        );
        let mut back = WindowedFilter::from_header(&header).unwrap();
        assert!(!back.contains(b"0-1", 3500), "empty until loaded");
        for (iter, _) in f.chunk_plan() {
            back.load_chunk(iter, &f.chunk_bytes(iter)).unwrap();
        }
        assert_eq!(back.dump_header(), header);
        assert!((0..300u32).all(|i| back.contains(format!("1500-{i}").as_bytes(), 3500)));
        assert_eq!(back.items(3500), f.items(3500));
        // A chunk twice, a damaged chunk, a chunk past the end.
        assert!(back.awaiting.is_empty());
        assert_eq!(back.load_chunk(2, &f.chunk_bytes(2)), Err(ERR_BAD_CHUNK));
        let mut fresh = WindowedFilter::from_header(&header).unwrap();
        let mut bad = f.chunk_bytes(2);
        bad[40] ^= 1;
        assert_eq!(fresh.load_chunk(2, &bad), Err(ERR_BAD_CHUNK));
        assert_eq!(fresh.load_chunk(9, &bad), Err(ERR_BAD_CHUNK));
        // Headers: bad magic, too many generations, unordered slots, slots too far apart.
        let mut h = header.clone();
        h[0] = b'X';
        assert!(WindowedFilter::from_header(&h).is_err());
        let mut h = header.clone();
        h[29..33].copy_from_slice(&2u32.to_le_bytes());
        assert!(WindowedFilter::from_header(&h).is_err());
        let mut h = header.clone();
        h[HEADER_FIXED..HEADER_FIXED + 8].copy_from_slice(&9u64.to_le_bytes());
        assert!(WindowedFilter::from_header(&h).is_err());
        assert!(WindowedFilter::from_header(&header[..header.len() - 1]).is_err());
    }

    #[test]
    fn budget_refuses_new_generations() {
        let mut f = WindowedFilter::new(params(1000, 2));
        assert_eq!(
            f.add(b"a", 0, &mut Allowance::new(10)),
            Err(AddError::OutOfMemory)
        );
        assert!(f.add(b"a", 0, &mut Allowance::unlimited()).unwrap());
        assert!(
            !f.add(b"a", 0, &mut Allowance::new(10)).unwrap(),
            "already present needs no memory"
        );
    }

    #[test]
    fn writes_into_dead_slots_store_nothing() {
        let mut f = WindowedFilter::new(params(1000, 2));
        f.add(b"new", 5000, &mut Allowance::unlimited()).unwrap();
        assert!(!f.add(b"old", 3000, &mut Allowance::unlimited()).unwrap());
        assert!(!f.contains(b"old", 3000));
        // A late write into a live older slot lands in its own generation.
        assert!(f.add(b"late", 4200, &mut Allowance::unlimited()).unwrap());
        assert!(f.contains(b"late", 5000));
        assert!(!f.contains(b"late", 6000), "slot 4 is dead at 6000");
    }

    fn loaded_header(f: &WindowedFilter) -> WindowedFilter {
        WindowedFilter::from_header(&f.dump_header()).unwrap()
    }

    /// The whole dump of a value, as SCANDUMP gives it.
    fn dump(f: &WindowedFilter) -> Vec<(i64, Vec<u8>)> {
        let mut out = vec![(1, f.dump_header())];
        out.extend(f.chunk_plan().iter().map(|&(i, _)| (i, f.chunk_bytes(i))));
        out
    }

    /// A header alone makes a valid value: it dumps (the awaited generations as the empty
    /// filters they are) and that dump loads; the chunks that arrive later still fill it.
    #[test]
    fn a_half_loaded_value_dumps_and_loads() {
        let mut f = WindowedFilter::new(params(1000, 3));
        for t in [0u64, 1500, 2500] {
            for i in 0..500u32 {
                f.add(
                    format!("{t}-{i}").as_bytes(),
                    t,
                    &mut Allowance::unlimited(),
                )
                .unwrap();
            }
        }
        let mut half = loaded_header(&f);
        assert_eq!(half.dump_header(), f.dump_header(), "same shape");
        half.load_chunk(2, &f.chunk_bytes(2)).unwrap();
        for (iter, len) in half.chunk_plan() {
            assert_eq!(half.chunk_bytes(iter).len() as u64, len);
        }
        // Its dump loads elsewhere (as an RDB load or RESTORE would).
        let saved = dump(&half);
        let mut copy = WindowedFilter::from_header(&saved[0].1).unwrap();
        for (iter, data) in &saved[1..] {
            copy.load_chunk(*iter, data).unwrap();
        }
        assert!((0..500u32).all(|i| copy.contains(format!("0-{i}").as_bytes(), 2500)));
        assert!(
            !copy.contains(b"1500-1", 2500),
            "awaited generations answer as empty"
        );
        // The original keeps loading.
        for (iter, data) in &dump(&f)[2..] {
            half.load_chunk(*iter, data).unwrap();
        }
        assert_eq!(dump(&half), dump(&f));
    }

    /// A write into an awaited generation is kept, and that generation's chunk is then
    /// refused (it would overwrite the write).
    #[test]
    fn a_write_ends_the_wait() {
        let mut f = WindowedFilter::new(params(1000, 3));
        f.add(b"old", 1500, &mut Allowance::unlimited()).unwrap();
        let mut half = loaded_header(&f);
        assert!(half.add(b"new", 1600, &mut Allowance::unlimited()).unwrap());
        assert_eq!(half.load_chunk(2, &f.chunk_bytes(2)), Err(ERR_BAD_CHUNK));
        assert!(half.contains(b"new", 1700));
    }

    /// Forged headers are refused before anything is allocated: a generation's bytes must be
    /// the image of whole links of its schedule (a huge capacity with tiny declared bytes, or
    /// an odd length, is refused), and the budget sees the real size.
    #[test]
    fn forged_headers_are_refused() {
        let mut f = WindowedFilter::new(params(1000, 3));
        f.add(b"a", 0, &mut Allowance::unlimited()).unwrap();
        let header = f.dump_header();
        let mut h = header.clone();
        h[13..21].copy_from_slice(&MAX_CAPACITY.to_le_bytes());
        assert_eq!(WindowedFilter::header_bytes(&h), Err(ERR_BAD_HEADER));
        let mut h = header.clone();
        let at = HEADER_FIXED + 8;
        let len = u64::from_le_bytes(h[at..at + 8].try_into().unwrap());
        h[at..at + 8].copy_from_slice(&(len + 1).to_le_bytes());
        assert_eq!(WindowedFilter::from_header(&h).err(), Some(ERR_BAD_HEADER));
        // A huge but well-formed generation declares its real size.
        let big = WindowParams {
            capacity: MAX_CAPACITY,
            ..params(1000, 3)
        };
        let bytes = big.generation_bytes().unwrap();
        assert!(bytes > 1 << 30);
        let big_header =
            WindowedFilter::new(big).header_with(&[(0, IMAGE_FRAME + PER_LINK + bytes)]);
        assert_eq!(
            WindowedFilter::header_bytes(&big_header),
            Ok(IMAGE_FRAME + PER_LINK + bytes)
        );
    }

    #[test]
    fn write_times_are_bounded_by_one_retention() {
        let p = params(1000, 3);
        let now = 10_500;
        assert_eq!(p.check_time(u64::MAX, now), Err(ERR_FUTURE));
        assert_eq!(p.check_time(13_000, now), Err(ERR_FUTURE));
        assert_eq!(p.check_time(12_999, now), Ok(()));
        assert_eq!(p.check_time(0, now), Ok(()));
        // The latest accepted time leaves the slot of `now` live.
        let mut f = WindowedFilter::new(p);
        f.add(b"ahead", 12_999, &mut Allowance::unlimited())
            .unwrap();
        assert!(f.add(b"now", now, &mut Allowance::unlimited()).unwrap());
        assert!(f.contains(b"now", now));
    }

    /// The dump of a value written by the dialect's own windowed filter before it was built on
    /// the core's (`tests/golden/wf-dump-v1.bin`: error 0.01, capacity 50, window 1 s, 3
    /// generations, expansion 2; 120 items `"{t}-{i}"` at each t of 0, 0.7, 1.5, 2.6 and 3.1 s,
    /// so generations grew links) loads, and the same writes today make the same bytes: WF
    /// dumps and RDB values did not change.
    #[test]
    fn dumps_are_unchanged_since_the_dialect_had_its_own_filter() {
        let golden = include_bytes!("../../tests/golden/wf-dump-v1.bin");
        let mut parts = Vec::new();
        let mut rest = &golden[..];
        while !rest.is_empty() {
            let iter = i64::from_le_bytes(rest[..8].try_into().unwrap());
            let len = u64::from_le_bytes(rest[8..16].try_into().unwrap()) as usize;
            parts.push((iter, rest[16..16 + len].to_vec()));
            rest = &rest[16 + len..];
        }
        let mut loaded = WindowedFilter::from_header(&parts[0].1).unwrap();
        for (iter, data) in &parts[1..] {
            loaded.load_chunk(*iter, data).unwrap();
        }
        assert_eq!(dump(&loaded), parts);
        let mut f = WindowedFilter::new(WindowParams {
            error: 0.01,
            capacity: 50,
            window_ms: 1000,
            generations: 3,
            expansion: 2,
        });
        for t in [0u64, 700, 1500, 2600, 3100] {
            for i in 0..120u32 {
                f.add(
                    format!("{t}-{i}").as_bytes(),
                    t,
                    &mut Allowance::unlimited(),
                )
                .unwrap();
            }
        }
        assert_eq!(dump(&f), parts);
        assert!(f
            .filter()
            .retained()
            .any(|g| g.filter().unwrap().links() > 1));
        assert!((0..120u32).all(|i| loaded.contains(format!("1500-{i}").as_bytes(), 3100)));
    }
}
