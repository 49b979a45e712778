//! "Seen in the last N windows": a time-windowed filter as a server value (`WF.*` commands), an
//! extension of the dialect that RedisBloom does not have.
//!
//! Time is cut into aligned slots of `window_ms`; slot `s` covers `[s·W, (s+1)·W)`. Each slot
//! that received writes has one generation: a scalable Bloom filter from the core library (so a
//! generation that fills before its window ends grows by a link instead of rotating early —
//! retention is never shortened by load). At time `now` the live slots are the `G` newest up to
//! `⌊now/W⌋`; older generations are dropped by the next write.
//!
//! # Retention
//! An item added at time `t` sits in slot `⌊t/W⌋`, which stays live while
//! `⌊now/W⌋ < ⌊t/W⌋ + G`, i.e. at every `now < (⌊t/W⌋ + G)·W`. Since `⌊t/W⌋·W > t − W`, the item
//! answers 1 at every time `< t + (G−1)·W`; and at every time `≥ t + G·W` its slot is dead, so it
//! answers as an absent item would (with the filter's false-positive rate).
//!
//! # Determinism
//! Reads evaluate liveness against the caller's clock and change nothing. A write at time `t`
//! is a pure function of the value and `t` (drop slots `≤ ⌊t/W⌋ − G`, add to slot `⌊t/W⌋`), so
//! logging and replicating writes with their effective timestamp (`WF.INSERT key AT t ...`)
//! rebuilds the same bytes on replay or on a replica, whatever its clock says.
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
//! core library's checksummed file format. Every field is validated and the declared bytes are
//! checked against the memory budget before anything is allocated; each chunk is verified
//! (checksum, kind, parameters) before it replaces its placeholder.

use std::collections::VecDeque;

use bloomgate::{FilterCodec, ScalableBloomFilter};

/// Most generations a filter may have (each query checks all of them).
pub const MAX_GENERATIONS: u64 = 1024;
/// Largest capacity per generation.
pub const MAX_CAPACITY: u64 = 1 << 30;
/// Largest growth factor of a generation.
pub const MAX_EXPANSION: u64 = 32768;
/// Longest window: about 100 years in milliseconds.
pub const MAX_WINDOW_MS: u64 = 100 * 365 * 24 * 3600 * 1000;

const MAGIC: &[u8; 4] = b"BGWF";
const FORMAT_VERSION: u8 = 1;
/// Magic, version, error, capacity, window, generations, expansion, count.
pub(crate) const HEADER_FIXED: usize = 4 + 1 + 8 + 8 + 8 + 4 + 4 + 4;
const HEADER_PER_GENERATION: usize = 16;
/// Bytes a generation's link grows by at most, relative to the whole generation, per growth
/// step: used to check the memory budget before an insert may add a link.
const OVERHEAD: u64 = 64;
/// Tightening ratio of each generation's links.
const TIGHTENING: f64 = 0.5;
/// Seed of every generation (fixed: dumps are portable between servers).
const SEED: u64 = bloomgate::hash::DEFAULT_SEED;

/// A generation as a header lists it: slot and file-image bytes.
type SlotImage = (u64, u64);

/// Error texts.
pub const ERR_BAD_HEADER: &str = "ERR invalid windowed filter header";
/// A chunk that is not the generation its iterator names.
pub const ERR_BAD_CHUNK: &str = "ERR invalid windowed filter chunk";

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
        if !(self.error > 0.0 && self.error < 1.0) {
            return Err("ERR error rate must be in the range (0.000000, 1.000000)");
        }
        if !(1..=MAX_CAPACITY).contains(&self.capacity) {
            return Err("ERR capacity must be in the range [1, 1073741824]");
        }
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

    /// The rate each generation is sized for: `1 − (1 − p)^(1/G)`.
    pub fn generation_error(&self) -> f64 {
        -((-self.error).ln_1p() / f64::from(self.generations)).exp_m1()
    }

    /// A new, empty generation.
    fn new_generation(&self) -> Option<ScalableBloomFilter> {
        ScalableBloomFilter::with_options(
            self.capacity,
            self.generation_error(),
            self.expansion,
            TIGHTENING,
            SEED,
        )
        .ok()
    }

    /// Bytes a new generation takes.
    pub fn generation_bytes(&self) -> Option<u64> {
        let fpr = self.generation_error() * (1.0 - TIGHTENING);
        bloomgate::Params::for_items(bloomgate::Layout::Classic, self.capacity, fpr)
            .ok()
            .map(|p| p.bytes())
    }
}

/// One slot's filter. `None` while a dump is being loaded and its chunk has not arrived (it
/// answers as empty until then, as a half-loaded RedisBloom filter does).
#[derive(Clone, Debug)]
struct Generation {
    slot: u64,
    filter: Option<ScalableBloomFilter>,
    /// Bytes of the filter's file image as a loaded header declared it (what the chunk that
    /// fills `filter` must be); once `filter` is there, [`image_len`] is its length.
    image_len: u64,
}

/// Bytes of `filter`'s file image (`FilterCodec::to_bytes`), from its shape instead of
/// serialising it: the file header and the XXH3 checksum; the scalable body's initial capacity,
/// FPR, growth, tightening and link count; per link its nested length, its parameters (bits,
/// hashes, items, count) and its bit array. Pinned to `to_bytes` by a test.
fn image_len(filter: &ScalableBloomFilter) -> u64 {
    const FILE_FRAME: u64 = bloomgate::codec::HEADER_LEN as u64 + 8;
    const SCALABLE_FIXED: u64 = 8 + 8 + 4 + 8 + 4;
    const PER_LINK: u64 = 8 + (8 + 4 + 8 + 8);
    let links = filter.links() as u64;
    // `memory_bytes` is each link's struct plus its bit array.
    let bit_arrays =
        filter.memory_bytes() as u64 - links * std::mem::size_of::<bloomgate::BloomFilter>() as u64;
    FILE_FRAME + SCALABLE_FIXED + links * PER_LINK + bit_arrays
}

/// Why an add did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddError {
    /// The generation would have to grow beyond the memory budget.
    OutOfMemory,
    /// The generation cannot grow any further (link limit or size overflow).
    Full,
}

impl AddError {
    /// The error text.
    pub fn message(self) -> &'static str {
        match self {
            AddError::OutOfMemory => crate::ERR_OOM,
            AddError::Full => "ERR problem inserting into filter",
        }
    }
}

/// A time-windowed filter: generations oldest first.
#[derive(Clone, Debug)]
pub struct WindowedFilter {
    params: WindowParams,
    generations: VecDeque<Generation>,
}

impl WindowedFilter {
    /// An empty filter; `params` must be valid.
    pub fn new(params: WindowParams) -> Self {
        Self {
            params,
            generations: VecDeque::new(),
        }
    }

    /// The creation parameters.
    pub fn params(&self) -> &WindowParams {
        &self.params
    }

    fn slot_of(&self, at_ms: u64) -> u64 {
        at_ms / self.params.window_ms
    }

    /// Whether slot `slot` is live at `now_ms`.
    fn live(&self, slot: u64, now_ms: u64) -> bool {
        slot + u64::from(self.params.generations) > self.slot_of(now_ms)
    }

    fn live_generations(&self, now_ms: u64) -> impl Iterator<Item = &Generation> + '_ {
        self.generations
            .iter()
            .filter(move |g| self.live(g.slot, now_ms))
    }

    /// Adds `item` at time `at_ms` (dropping generations dead at that time first). `Ok(true)` if
    /// new to its generation; `Ok(false)` if its generation may already hold it — or if `at_ms`
    /// lies in a slot already dead (its retention has passed; nothing is stored).
    pub fn add(&mut self, item: &[u8], at_ms: u64, budget: u64) -> Result<bool, AddError> {
        let slot = self.slot_of(at_ms);
        let newest = self.generations.back().map_or(slot, |g| g.slot.max(slot));
        while let Some(oldest) = self.generations.front() {
            if oldest.slot + u64::from(self.params.generations) > newest {
                break;
            }
            self.generations.pop_front();
        }
        if slot + u64::from(self.params.generations) <= newest {
            return Ok(false);
        }
        let at = match self.generations.iter().position(|g| g.slot >= slot) {
            Some(i) if self.generations[i].slot == slot => i,
            found => {
                let bytes = self.params.generation_bytes().ok_or(AddError::Full)?;
                if bytes + OVERHEAD > budget {
                    return Err(AddError::OutOfMemory);
                }
                let filter = self.params.new_generation().ok_or(AddError::Full)?;
                let i = found.unwrap_or(self.generations.len());
                self.generations.insert(
                    i,
                    Generation {
                        slot,
                        image_len: 0,
                        filter: Some(filter),
                    },
                );
                i
            }
        };
        let generation = &mut self.generations[at];
        let filter = match &mut generation.filter {
            Some(filter) => filter,
            slot_filter => slot_filter.insert(self.params.new_generation().ok_or(AddError::Full)?),
        };
        let h = filter.hash(item);
        if filter.contains_hash(h) {
            return Ok(false);
        }
        if filter.len() >= filter.capacity() {
            // The next link is at most `growth ×` the whole chain so far.
            let next = (filter.memory_bytes() as u64).saturating_mul(u64::from(filter.growth()));
            if next > budget {
                return Err(AddError::OutOfMemory);
            }
        }
        filter.insert_hash(h).map_err(|_| AddError::Full)?;
        Ok(true)
    }

    /// Whether `item` may have been added within the retention as of `now_ms`.
    pub fn contains(&self, item: &[u8], now_ms: u64) -> bool {
        let mut hash = None;
        self.live_generations(now_ms).any(|g| {
            g.filter.as_ref().is_some_and(|f| {
                let h = *hash.get_or_insert_with(|| f.hash(item));
                f.contains_hash(h)
            })
        })
    }

    /// Items added to live generations (each counted once per generation).
    pub fn items(&self, now_ms: u64) -> u64 {
        self.live_generations(now_ms)
            .filter_map(|g| g.filter.as_ref())
            .map(ScalableBloomFilter::len)
            .sum()
    }

    /// Per live generation: slot start (ms), items, bytes, estimated false-positive rate.
    pub fn generation_stats(&self, now_ms: u64) -> Vec<(u64, u64, u64, f64)> {
        self.live_generations(now_ms)
            .map(|g| {
                let (items, bytes, fpr) = g.filter.as_ref().map_or((0, 0, 0.0), |f| {
                    (f.len(), f.memory_bytes() as u64, f.estimated_fpr())
                });
                (g.slot * self.params.window_ms, items, bytes, fpr)
            })
            .collect()
    }

    /// Estimated false-positive rate of a query now: `1 − Π (1 − fpr_g)` over live generations.
    pub fn estimated_fpr(&self, now_ms: u64) -> f64 {
        1.0 - self
            .generation_stats(now_ms)
            .iter()
            .map(|&(_, _, _, fpr)| 1.0 - fpr)
            .product::<f64>()
    }

    /// Bytes the value takes (bit arrays plus bookkeeping).
    pub fn memory(&self) -> u64 {
        OVERHEAD
            + self
                .generations
                .iter()
                .map(|g| {
                    OVERHEAD
                        + g.filter
                            .as_ref()
                            .map_or(g.image_len, |f| f.memory_bytes() as u64)
                })
                .sum::<u64>()
    }

    fn header_with(&self, lens: &[u64]) -> Vec<u8> {
        let p = &self.params;
        let mut out = Vec::with_capacity(HEADER_FIXED + lens.len() * HEADER_PER_GENERATION);
        out.extend_from_slice(MAGIC);
        out.push(FORMAT_VERSION);
        out.extend_from_slice(&p.error.to_le_bytes());
        out.extend_from_slice(&p.capacity.to_le_bytes());
        out.extend_from_slice(&p.window_ms.to_le_bytes());
        out.extend_from_slice(&p.generations.to_le_bytes());
        out.extend_from_slice(&p.expansion.to_le_bytes());
        out.extend_from_slice(&(self.generations.len() as u32).to_le_bytes());
        for (g, len) in self.generations.iter().zip(lens) {
            out.extend_from_slice(&g.slot.to_le_bytes());
            out.extend_from_slice(&len.to_le_bytes());
        }
        out
    }

    fn image_lens(&self) -> Vec<u64> {
        self.generations
            .iter()
            .map(|g| g.filter.as_ref().map_or(g.image_len, image_len))
            .collect()
    }

    /// The dump header (iterator 0).
    pub fn dump_header(&self) -> Vec<u8> {
        self.header_with(&self.image_lens())
    }

    /// `(iterator, length)` of each generation's chunk.
    pub fn chunk_plan(&self) -> Vec<(i64, u64)> {
        self.image_lens()
            .into_iter()
            .enumerate()
            .map(|(i, len)| (i as i64 + 2, len))
            .collect()
    }

    /// The chunk returned with iterator `iter` (generation `iter − 2`), empty past the end.
    pub fn chunk_bytes(&self, iter: i64) -> Vec<u8> {
        usize::try_from(iter - 2)
            .ok()
            .and_then(|i| self.generations.get(i))
            .and_then(|g| g.filter.as_ref())
            .map(FilterCodec::to_bytes)
            .unwrap_or_default()
    }

    /// SCANDUMP: `[1, header]` at 0, then one generation per call, `[0, ""]` when done.
    pub fn scandump(&self, iter: i64) -> (i64, Vec<u8>) {
        match iter {
            0 => (1, self.dump_header()),
            i if i >= 1 && ((i - 1) as usize) < self.generations.len() => {
                (i + 1, self.chunk_bytes(i + 1))
            }
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

    fn parse_header(header: &[u8]) -> Result<(WindowParams, Vec<SlotImage>), &'static str> {
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
        let mut parts = Vec::with_capacity(count);
        for i in 0..count {
            let at = HEADER_FIXED + i * HEADER_PER_GENERATION;
            let (slot, bytes) = (u64_at(at), u64_at(at + 8));
            let ordered = parts
                .last()
                .is_none_or(|&(prev, _): &(u64, u64)| slot > prev);
            // Live together: all within G slots of the newest.
            if !ordered || bytes == 0 || slot.checked_add(u64::from(params.generations)).is_none() {
                return Err(ERR_BAD_HEADER);
            }
            parts.push((slot, bytes));
        }
        if let (Some(&(first, _)), Some(&(last, _))) = (parts.first(), parts.last()) {
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
            .try_fold(0u64, |sum, &(_, bytes)| sum.checked_add(bytes))
            .ok_or(ERR_BAD_HEADER)
    }

    /// A filter shaped as the header says, its generations empty until their chunks arrive.
    pub fn from_header(header: &[u8]) -> Result<Self, &'static str> {
        let (params, parts) = Self::parse_header(header)?;
        Ok(Self {
            params,
            generations: parts
                .into_iter()
                .map(|(slot, image_len)| Generation {
                    slot,
                    filter: None,
                    image_len,
                })
                .collect(),
        })
    }

    /// LOADCHUNK: generation `iter − 2`'s file image, verified (checksum, kind, parameters and
    /// the length the header declared) before it replaces the placeholder.
    pub fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
        let index = usize::try_from(iter - 2).map_err(|_| ERR_BAD_CHUNK)?;
        let params = self.params;
        let generation = self.generations.get_mut(index).ok_or(ERR_BAD_CHUNK)?;
        if data.len() as u64 != generation.image_len || generation.filter.is_some() {
            return Err(ERR_BAD_CHUNK);
        }
        let filter = ScalableBloomFilter::from_bytes(data).map_err(|_| ERR_BAD_CHUNK)?;
        let same_shape = filter.initial_capacity() == params.capacity
            && filter.target_fpr() == params.generation_error()
            && filter.growth() == params.expansion
            && filter.tightening() == TIGHTENING
            && filter.seed() == SEED;
        if !same_shape {
            return Err(ERR_BAD_CHUNK);
        }
        generation.filter = Some(filter);
        Ok(())
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
            let mut filter = p.new_generation().unwrap();
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
            f.add(&i.to_le_bytes(), u64::from(i % 3) * 1000, u64::MAX)
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
            f.add(b"x", t, u64::MAX).unwrap();
            let keep = t + (u64::from(g) - 1) * w;
            for now in [t, t + 1, keep.saturating_sub(1)] {
                assert!(f.contains(b"x", now), "t={t} now={now}");
            }
            let gone = t + u64::from(g) * w;
            assert!(!f.contains(b"x", gone), "t={t}");
            // A later write drops the dead generation for good.
            f.add(b"y", gone, u64::MAX).unwrap();
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
            f.add(&i.to_le_bytes(), 10, u64::MAX).unwrap();
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
                f.add(format!("{t}-{i}").as_bytes(), t, u64::MAX).unwrap();
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
        assert_eq!(f.add(b"a", 0, 10), Err(AddError::OutOfMemory));
        assert!(f.add(b"a", 0, u64::MAX).unwrap());
        assert!(
            !f.add(b"a", 0, 10).unwrap(),
            "already present needs no memory"
        );
    }

    #[test]
    fn writes_into_dead_slots_store_nothing() {
        let mut f = WindowedFilter::new(params(1000, 2));
        f.add(b"new", 5000, u64::MAX).unwrap();
        assert!(!f.add(b"old", 3000, u64::MAX).unwrap());
        assert!(!f.contains(b"old", 3000));
        // A late write into a live older slot lands in its own generation.
        assert!(f.add(b"late", 4200, u64::MAX).unwrap());
        assert!(f.contains(b"late", 5000));
        assert!(!f.contains(b"late", 6000), "slot 4 is dead at 6000");
    }
}
