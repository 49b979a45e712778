//! Time-windowed Bloom filter: "seen in the last G windows" for rolling histories that must
//! forget old items (the feed-service case: what did this user see in the last week?). The one
//! windowed filter of the project: the gate's local filters use it, and the dialect's `WF.*`
//! values are built on it.
//!
//! # Slots and generations
//! Time is cut into aligned slots of W = `generation_window_ms`: slot `s` covers
//! `[s·W, (s+1)·W)`. Each slot that received writes has one generation, a
//! [`ScalableBloomFilter`]: a generation that fills before its window ends **grows by a link
//! instead of rotating early**, so retention is never shortened by load. The filter's clock is
//! the newest slot it has been brought to (by a write, [`WindowedBloomFilter::rotate_if_due`] or
//! [`WindowedBloomFilter::rotate`]); the live slots are the G newest up to the clock, and older
//! generations are dropped when the clock moves past them. Time is always passed in (`now_ms`);
//! the library never reads a clock, so simulated clocks work. Without a window
//! (`generation_window_ms = None`) the clock moves only by [`WindowedBloomFilter::rotate`].
//!
//! # Retention guarantee
//! An item inserted at time t sits in slot ⌊t/W⌋, which stays live while the clock is below
//! ⌊t/W⌋ + G, i.e. at every time `< (⌊t/W⌋ + G)·W`. Since ⌊t/W⌋·W > t − W, the item is present
//! for every query until at least t + (G−1)·W, and it is gone once the clock reaches a time
//! ≥ t + G·W. [`WindowedBloomFilter::rotate`] moves every later time one slot on (it ends the
//! current window early, and so shortens retention by one window for what is stored).
//!
//! # Accuracy
//! A query is positive if any live generation answers positive, so each generation targets
//! `p_gen = 1 − (1 − p)^(1/G)`, making the union over G generations at their bound exactly `p`;
//! a generation's links tighten geometrically (ratio [`GENERATION_TIGHTENING`]) so growth keeps
//! each generation under `p_gen`.
//!
//! # Snapshots
//! Generations sit behind [`Arc`]: cloning a filter shares every generation, and a write copies
//! only the generation it writes to, and only while a clone still shares it (copy-on-write per
//! generation). A server snapshotting a value while writes continue copies at most the
//! generations written during the snapshot, not the whole value.
//!
//! # File format
//! Version 2 (written): the slot clock, the rotation shift and per generation its slot and a
//! scalable body. Version 1 files (a ring of G blocked generations rotated on a schedule that
//! started at creation) still load: their generations keep the blocked bits, are mapped onto
//! slots so that nothing they hold is forgotten earlier than version 1 promised, and age out
//! as any other generation.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::codec::{self, corrupt, BodyReader, FilterCodec, FilterKind};
use crate::error::{Error, Result};
use crate::filters::{BlockedBloomFilter, ScalableBloomFilter};
use crate::hash::{KeyHash, DEFAULT_SEED};
use crate::params::{Layout, Params, MAX_BYTES};

/// Most generations a filter may have (each query checks all of them).
pub const MAX_GENERATIONS: usize = 1024;
/// Tightening ratio of each generation's links.
pub const GENERATION_TIGHTENING: f64 = 0.5;
/// Growth factor of a generation's links unless configured otherwise.
pub const DEFAULT_GENERATION_GROWTH: u32 = 2;
/// Largest growth factor of a generation's links.
pub const MAX_GENERATION_GROWTH: u32 = 32768;

/// First u32 of a version-2 body (a version-1 body starts with G ≤ 1024).
const BODY_V2_MARK: u32 = u32::MAX;
const BODY_VERSION: u8 = 2;
const TAG_SCALABLE: u8 = 0;
const TAG_LEGACY: u8 = 1;

/// Shape of a windowed filter.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct WindowConfig {
    /// Number of live generations G, 2..=[`MAX_GENERATIONS`].
    pub generations: usize,
    /// Distinct items a generation is sized for before it grows a link.
    pub items_per_generation: u64,
    /// Target FPR of a query over G generations at their bound.
    pub fpr: f64,
    /// W: the width of a slot in milliseconds (> 0); `None`: slots move only by `rotate`.
    pub generation_window_ms: Option<u64>,
    /// Capacity factor from one link of a generation to the next, 1..=[`MAX_GENERATION_GROWTH`].
    #[cfg_attr(feature = "serde", serde(default = "default_growth"))]
    pub growth: u32,
}

#[cfg(feature = "serde")]
fn default_growth() -> u32 {
    DEFAULT_GENERATION_GROWTH
}

impl WindowConfig {
    /// G generations of `items_per_generation` at a union FPR of `fpr`, growth
    /// [`DEFAULT_GENERATION_GROWTH`].
    pub fn new(
        generations: usize,
        items_per_generation: u64,
        fpr: f64,
        generation_window_ms: Option<u64>,
    ) -> Self {
        Self {
            generations,
            items_per_generation,
            fpr,
            generation_window_ms,
            growth: DEFAULT_GENERATION_GROWTH,
        }
    }

    /// FPR each generation is sized for: `1 − (1 − p)^(1/G)`.
    pub fn generation_fpr(&self) -> f64 {
        -((-self.fpr).ln_1p() / self.generations as f64).exp_m1()
    }

    /// Checks every range and that G first links fit the size limit.
    pub fn validate(&self) -> Result<()> {
        if !(2..=MAX_GENERATIONS).contains(&self.generations) {
            return Err(Error::InvalidParameter(format!(
                "generations must be in 2..={MAX_GENERATIONS}, got {}",
                self.generations
            )));
        }
        if self.generation_window_ms == Some(0) {
            return Err(Error::InvalidParameter(
                "generation window must be at least 1 ms".into(),
            ));
        }
        if !(self.fpr > 0.0 && self.fpr < 1.0) {
            return Err(Error::InvalidParameter(format!(
                "fpr must be in (0, 1), got {}",
                self.fpr
            )));
        }
        if !(1..=MAX_GENERATION_GROWTH).contains(&self.growth) {
            return Err(Error::InvalidParameter(format!(
                "growth must be in 1..={MAX_GENERATION_GROWTH}, got {}",
                self.growth
            )));
        }
        let bytes = self.generation_bytes()?;
        if bytes.saturating_mul(self.generations as u64) > MAX_BYTES {
            return Err(Error::TooLarge(format!(
                "{} generations of {bytes} bytes exceed the size limit",
                self.generations
            )));
        }
        Ok(())
    }

    /// Bytes of a new generation's bit array (its first link), without allocating it.
    pub fn generation_bytes(&self) -> Result<u64> {
        self.generation_link_bytes(0)
    }

    /// Bytes of link `i` of a generation's growth schedule, without allocating anything.
    pub fn generation_link_bytes(&self, i: usize) -> Result<u64> {
        ScalableBloomFilter::schedule_link_bytes(
            self.items_per_generation,
            self.generation_fpr(),
            self.growth,
            GENERATION_TIGHTENING,
            i,
        )
    }

    /// A new, empty generation.
    pub fn new_generation(&self, seed: u64) -> Result<ScalableBloomFilter> {
        ScalableBloomFilter::with_options(
            self.items_per_generation,
            self.generation_fpr(),
            self.growth,
            GENERATION_TIGHTENING,
            seed,
        )
    }

    /// Whether `filter` is a generation of this shape (capacity, rate, growth, seed).
    pub fn is_generation(&self, filter: &ScalableBloomFilter, seed: u64) -> bool {
        filter.initial_capacity() == self.items_per_generation
            && filter.target_fpr() == self.generation_fpr()
            && filter.growth() == self.growth
            && filter.tightening() == GENERATION_TIGHTENING
            && filter.seed() == seed
    }
}

/// A generation's bits.
#[derive(Clone, Debug, PartialEq)]
enum Bits {
    Scalable(ScalableBloomFilter),
    /// A generation read from a version-1 file: blocked, fixed size.
    Legacy(BlockedBloomFilter),
}

/// One slot's filter.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    slot: u64,
    bits: Arc<Bits>,
}

impl Generation {
    /// The slot it covers (`[slot·W, (slot+1)·W)`, shifted by rotations).
    pub fn slot(&self) -> u64 {
        self.slot
    }

    /// Its filter; `None` for a generation loaded from a version-1 file.
    pub fn filter(&self) -> Option<&ScalableBloomFilter> {
        match &*self.bits {
            Bits::Scalable(f) => Some(f),
            Bits::Legacy(_) => None,
        }
    }

    /// Distinct items it holds.
    pub fn len(&self) -> u64 {
        match &*self.bits {
            Bits::Scalable(f) => f.len(),
            Bits::Legacy(f) => f.len(),
        }
    }

    /// Whether it holds no item.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of its filter.
    pub fn memory_bytes(&self) -> usize {
        match &*self.bits {
            Bits::Scalable(f) => f.memory_bytes(),
            Bits::Legacy(f) => f.memory_bytes(),
        }
    }

    /// FPR from its fill.
    pub fn estimated_fpr(&self) -> f64 {
        match &*self.bits {
            Bits::Scalable(f) => f.estimated_fpr(),
            Bits::Legacy(f) => f.estimated_fpr(),
        }
    }

    /// Whether another filter (a snapshot) shares its bits.
    pub fn is_shared(&self) -> bool {
        Arc::strong_count(&self.bits) > 1
    }

    fn contains_hash(&self, h: KeyHash) -> bool {
        match &*self.bits {
            Bits::Scalable(f) => f.contains_hash(h),
            Bits::Legacy(f) => f.contains_hash(h),
        }
    }
}

/// What an insert did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserted {
    /// The key was new to its generation.
    New,
    /// Its generation may already hold it (nothing changed).
    Present,
    /// Its slot is dead at the filter's clock: its retention has passed, nothing is stored.
    Expired,
}

/// Generations of aligned time slots (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct WindowedBloomFilter {
    config: WindowConfig,
    seed: u64,
    /// Oldest first; slots strictly increasing, all live at `clock`.
    generations: VecDeque<Generation>,
    /// The newest slot the filter has been brought to.
    clock: u64,
    /// Slots added by [`Self::rotate`].
    shift: u64,
}

impl WindowedBloomFilter {
    /// Offers the generation ring's buffer, then each generation's links and bits, to a host
    /// that moves allocations (see [`crate::relocate`]); a generation a clone still shares is
    /// reported as shared, not offered.
    pub fn relocate(&mut self, walk: &mut crate::relocate::Walk<'_>) {
        // A VecDeque converts to and from a Vec over the same buffer, never reallocating.
        let mut ring: Vec<Generation> = std::mem::take(&mut self.generations).into();
        walk.vec(&mut ring);
        self.generations = ring.into();
        for generation in &mut self.generations {
            match Arc::get_mut(&mut generation.bits) {
                Some(Bits::Scalable(f)) => f.relocate(walk),
                Some(Bits::Legacy(f)) => f.relocate(walk),
                None => walk.slot(|r| r.shared()),
            }
        }
    }

    /// An empty filter whose clock is at `now_ms`, seed [`DEFAULT_SEED`]. Generations are
    /// allocated as their slots receive writes.
    pub fn new(config: WindowConfig, now_ms: u64) -> Result<Self> {
        Self::with_seed(config, DEFAULT_SEED, now_ms)
    }

    /// As [`Self::new`] with an explicit hash seed.
    pub fn with_seed(config: WindowConfig, seed: u64, now_ms: u64) -> Result<Self> {
        config.validate()?;
        let mut filter = Self {
            config,
            seed,
            generations: VecDeque::new(),
            clock: 0,
            shift: 0,
        };
        filter.clock = filter.slot_of(now_ms);
        Ok(filter)
    }

    /// A filter from its generations `(slot, filter)`, oldest first (a dump being loaded): the
    /// slots must increase and lie within G of the newest, which is the clock; every filter
    /// must have the generation shape of `config` and `seed`.
    pub fn from_generations(
        config: WindowConfig,
        seed: u64,
        generations: Vec<(u64, ScalableBloomFilter)>,
    ) -> Result<Self> {
        config.validate()?;
        let clock = generations.last().map_or(0, |&(slot, _)| slot);
        let mut ring = VecDeque::with_capacity(generations.len());
        for (slot, filter) in generations {
            check_slot(&config, &ring, slot, clock)?;
            if !config.is_generation(&filter, seed) {
                return Err(Error::InvalidParameter(format!(
                    "the generation of slot {slot} is not shaped as the config says"
                )));
            }
            ring.push_back(Generation {
                slot,
                bits: Arc::new(Bits::Scalable(filter)),
            });
        }
        Ok(Self {
            config,
            seed,
            generations: ring,
            clock,
            shift: 0,
        })
    }

    /// The key's hash with this filter's seed.
    pub fn hash(&self, key: impl AsRef<[u8]>) -> KeyHash {
        KeyHash::of(key.as_ref(), self.seed)
    }

    /// The slot a time falls in.
    pub fn slot_of(&self, at_ms: u64) -> u64 {
        self.config
            .generation_window_ms
            .map_or(0, |w| at_ms / w)
            .saturating_add(self.shift)
    }

    /// The first time of a slot (0 without a window).
    pub fn slot_start_ms(&self, slot: u64) -> u64 {
        self.config
            .generation_window_ms
            .map_or(0, |w| slot.saturating_sub(self.shift).saturating_mul(w))
    }

    /// Moves the clock to `slot` if that is later, dropping the generations dead there.
    fn advance(&mut self, slot: u64) -> bool {
        if slot <= self.clock {
            return false;
        }
        self.clock = slot;
        let g = self.config.generations as u64;
        while let Some(oldest) = self.generations.front() {
            if oldest.slot.saturating_add(g) > slot {
                break;
            }
            self.generations.pop_front();
        }
        true
    }

    /// Adds the key at `now_ms` (moving the clock there if later); returns whether its
    /// generation may already have held it. A time whose slot is already dead stores nothing
    /// and answers `false`. [`Error::TooLarge`] only when a generation cannot grow further.
    pub fn insert(&mut self, key: impl AsRef<[u8]>, now_ms: u64) -> Result<bool> {
        self.insert_hash(self.hash(key), now_ms)
    }

    /// [`Self::insert`] of a precomputed hash.
    pub fn insert_hash(&mut self, h: KeyHash, now_ms: u64) -> Result<bool> {
        Ok(self.insert_hash_at(h, now_ms)? == Inserted::Present)
    }

    /// Bytes an insert of `h` at `at_ms` would allocate: a new generation, a generation's next
    /// link, or nothing. For callers that check a memory budget before the allocation happens.
    pub fn allocation_for(&self, h: KeyHash, at_ms: u64) -> Result<u64> {
        let slot = self.slot_of(at_ms);
        let g = self.config.generations as u64;
        if slot.saturating_add(g) <= self.clock {
            return Ok(0);
        }
        match self.find(slot) {
            Err(_) => self.config.generation_bytes(),
            Ok(i) => match &*self.generations[i].bits {
                Bits::Scalable(f) if f.is_full() && !f.contains_hash(h) => f.link_bytes(f.links()),
                _ => Ok(0),
            },
        }
    }

    /// Adds the key's hash at `at_ms`, saying what happened.
    pub fn insert_hash_at(&mut self, h: KeyHash, at_ms: u64) -> Result<Inserted> {
        let slot = self.slot_of(at_ms);
        self.advance(slot);
        if slot.saturating_add(self.config.generations as u64) <= self.clock {
            return Ok(Inserted::Expired);
        }
        let i = match self.find(slot) {
            Ok(i) => i,
            Err(i) => {
                let filter = self.config.new_generation(self.seed)?;
                self.generations.insert(
                    i,
                    Generation {
                        slot,
                        bits: Arc::new(Bits::Scalable(filter)),
                    },
                );
                i
            }
        };
        let generation = &mut self.generations[i];
        if generation.contains_hash(h) {
            return Ok(Inserted::Present);
        }
        // Copies the generation only if a snapshot still shares it.
        match Arc::make_mut(&mut generation.bits) {
            Bits::Scalable(f) => {
                f.insert_hash(h)?;
            }
            Bits::Legacy(f) => {
                f.insert_hash(h);
            }
        }
        Ok(Inserted::New)
    }

    /// Index of `slot`'s generation, or where it would go.
    fn find(&self, slot: u64) -> std::result::Result<usize, usize> {
        // Writes go to the newest slot almost always: look there first.
        match self.generations.back() {
            Some(newest) if newest.slot == slot => Ok(self.generations.len() - 1),
            Some(newest) if newest.slot < slot => Err(self.generations.len()),
            _ => self.generations.binary_search_by_key(&slot, |g| g.slot),
        }
    }

    /// Whether the key may have been inserted within the retention, as of the filter's clock.
    pub fn contains(&self, key: impl AsRef<[u8]>) -> bool {
        self.contains_hash(self.hash(key))
    }

    /// Newest first: recent keys are the likeliest hits.
    pub fn contains_hash(&self, h: KeyHash) -> bool {
        self.generations.iter().rev().any(|g| g.contains_hash(h))
    }

    /// Whether the key may have been inserted within the retention as of `now_ms`, changing
    /// nothing (generations dead at `now_ms` are skipped, not dropped).
    pub fn contains_at(&self, key: impl AsRef<[u8]>, now_ms: u64) -> bool {
        self.contains_hash_at(self.hash(key), now_ms)
    }

    /// [`Self::contains_at`] of a precomputed hash.
    pub fn contains_hash_at(&self, h: KeyHash, now_ms: u64) -> bool {
        self.live_at(now_ms).any(|g| g.contains_hash(h))
    }

    /// Sets `found[i]` for each hash not found yet that may have been inserted within the
    /// retention as of `now_ms`: [`Self::contains_hash_at`] of many keys, each live generation
    /// (newest first) queried batched about the keys still unanswered.
    pub fn mark_batch_hashes_at(&self, hashes: &[KeyHash], now_ms: u64, found: &mut [bool]) {
        for g in self.live_at(now_ms).rev() {
            match &*g.bits {
                Bits::Scalable(f) => f.mark_batch_hashes(hashes, found),
                Bits::Legacy(f) => f.mark_batch_hashes(hashes, found),
            }
        }
    }

    /// The generations live at `now_ms`, oldest first.
    pub fn live_at(&self, now_ms: u64) -> impl DoubleEndedIterator<Item = &Generation> + '_ {
        let now = self.slot_of(now_ms);
        let g = self.config.generations as u64;
        self.generations
            .iter()
            .filter(move |gen| gen.slot.saturating_add(g) > now)
    }

    /// Every retained generation, oldest first.
    pub fn retained(&self) -> impl DoubleEndedIterator<Item = &Generation> + '_ {
        self.generations.iter()
    }

    /// Moves the clock to `now_ms`, dropping the generations dead there. Returns whether the
    /// clock moved. A clock that goes backwards changes nothing.
    pub fn rotate_if_due(&mut self, now_ms: u64) -> bool {
        let slot = self.slot_of(now_ms);
        self.advance(slot)
    }

    /// Ends the current window now: every later time counts one slot later, and the clock
    /// moves to `now_ms` (dropping what that kills).
    pub fn rotate(&mut self, now_ms: u64) {
        self.shift = self.shift.saturating_add(1);
        let slot = self.slot_of(now_ms).max(self.clock.saturating_add(1));
        self.advance(slot);
    }

    /// Number of generations a query may check (G).
    pub fn generations(&self) -> usize {
        self.config.generations
    }

    /// The clock: the newest slot the filter has been brought to.
    pub fn clock_slot(&self) -> u64 {
        self.clock
    }

    /// Distinct items (per generation) over the retained generations; saturating.
    pub fn len(&self) -> u64 {
        self.generations
            .iter()
            .fold(0u64, |sum, g| sum.saturating_add(g.len()))
    }

    /// Whether no retained generation holds an item.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Items in the generation of the clock's slot.
    pub fn newest_len(&self) -> u64 {
        self.generations
            .back()
            .filter(|g| g.slot == self.clock)
            .map_or(0, Generation::len)
    }

    /// FPR of a query from the retained generations' fill: `1 − Π(1 − estimated_fpr_g)`.
    pub fn estimated_fpr(&self) -> f64 {
        1.0 - self
            .generations
            .iter()
            .map(|g| 1.0 - g.estimated_fpr())
            .product::<f64>()
    }

    /// Bytes of every retained generation.
    pub fn memory_bytes(&self) -> usize {
        self.generations.iter().map(Generation::memory_bytes).sum()
    }

    /// The seed keys are hashed with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The configuration the filter was made with.
    pub fn config(&self) -> &WindowConfig {
        &self.config
    }

    /// Replaces the filter of generation `index` (oldest first) with `filter` of the generation
    /// shape (a chunk of a dump arriving).
    pub fn replace_generation(&mut self, index: usize, filter: ScalableBloomFilter) -> Result<()> {
        if !self.config.is_generation(&filter, self.seed) {
            return Err(Error::InvalidParameter(
                "the filter is not shaped as this filter's generations".into(),
            ));
        }
        let generation = self
            .generations
            .get_mut(index)
            .ok_or_else(|| Error::InvalidParameter(format!("no generation {index}")))?;
        generation.bits = Arc::new(Bits::Scalable(filter));
        Ok(())
    }
}

/// A generation at `slot` may follow `ring` in a filter whose clock is `clock`.
fn check_slot(
    config: &WindowConfig,
    ring: &VecDeque<Generation>,
    slot: u64,
    clock: u64,
) -> Result<()> {
    let ordered = ring.back().is_none_or(|prev| slot > prev.slot);
    let live = slot <= clock && slot.saturating_add(config.generations as u64) > clock;
    if ordered && live {
        Ok(())
    } else {
        Err(Error::InvalidParameter(format!(
            "generation slot {slot} is out of order or not live at slot {clock}"
        )))
    }
}

#[cfg(feature = "serde")]
crate::codec::serde_as_file_image!(WindowedBloomFilter);

/// Body, version 2: `u32::MAX`, version u8 = 2, generations u32, items_per_generation u64,
/// fpr f64, growth u32, window flag u8 (0 = none, 1 = set), window_ms u64, shift u64, clock u64,
/// count u32, then per generation (oldest first) slot u64, tag u8 (0 scalable, 1 blocked from a
/// version-1 file) and the length-prefixed body. Version 1: generations u32, items_per_generation
/// u64, fpr f64, window flag u8, window_ms u64, newest_started_ms u64, then G length-prefixed
/// blocked bodies, oldest first.
impl FilterCodec for WindowedBloomFilter {
    fn body_len_hint(&self) -> usize {
        // Its parameters and arrays: at least the encoded body.
        self.memory_bytes()
    }

    const KIND: FilterKind = FilterKind::Windowed;

    fn hash_seed(&self) -> u64 {
        self.seed
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        let c = &self.config;
        out.extend_from_slice(&BODY_V2_MARK.to_le_bytes());
        out.push(BODY_VERSION);
        out.extend_from_slice(&(c.generations as u32).to_le_bytes());
        out.extend_from_slice(&c.items_per_generation.to_le_bytes());
        out.extend_from_slice(&c.fpr.to_le_bytes());
        out.extend_from_slice(&c.growth.to_le_bytes());
        out.push(u8::from(c.generation_window_ms.is_some()));
        out.extend_from_slice(&c.generation_window_ms.unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&self.shift.to_le_bytes());
        out.extend_from_slice(&self.clock.to_le_bytes());
        out.extend_from_slice(&(self.generations.len() as u32).to_le_bytes());
        for g in &self.generations {
            out.extend_from_slice(&g.slot.to_le_bytes());
            match &*g.bits {
                Bits::Scalable(f) => {
                    out.push(TAG_SCALABLE);
                    codec::encode_nested(f, out);
                }
                Bits::Legacy(f) => {
                    out.push(TAG_LEGACY);
                    codec::encode_nested(f, out);
                }
            }
        }
    }

    fn decode_body(body: &mut BodyReader<'_>, seed: u64) -> Result<Self> {
        let first = body.u32()?;
        if first != BODY_V2_MARK {
            return decode_v1(body, first, seed);
        }
        if body.u8()? != BODY_VERSION {
            return Err(corrupt("windowed: unknown body version"));
        }
        let generations = body.u32()? as usize;
        let items_per_generation = body.u64()?;
        let fpr = body.f64()?;
        let growth = body.u32()?;
        let generation_window_ms = window(body.u8()?, body.u64()?)?;
        let shift = body.u64()?;
        let clock = body.u64()?;
        let config = WindowConfig {
            generations,
            items_per_generation,
            fpr,
            generation_window_ms,
            growth,
        };
        config
            .validate()
            .map_err(|e| corrupt(format!("windowed config: {e}")))?;
        let count = body.u32()? as usize;
        if count > generations {
            return Err(corrupt("windowed: more generations than G"));
        }
        let mut ring = VecDeque::with_capacity(count);
        for _ in 0..count {
            let slot = body.u64()?;
            check_slot(&config, &ring, slot, clock).map_err(|e| corrupt(e.to_string()))?;
            let bits = match body.u8()? {
                TAG_SCALABLE => {
                    let f = codec::decode_nested::<ScalableBloomFilter>(body, seed)?;
                    if !config.is_generation(&f, seed) {
                        return Err(corrupt(format!(
                            "windowed generation of slot {slot} is not shaped as the config says"
                        )));
                    }
                    Bits::Scalable(f)
                }
                TAG_LEGACY => Bits::Legacy(codec::decode_nested::<BlockedBloomFilter>(body, seed)?),
                _ => return Err(corrupt("windowed: bad generation tag")),
            };
            ring.push_back(Generation {
                slot,
                bits: Arc::new(bits),
            });
        }
        Ok(Self {
            config,
            seed,
            generations: ring,
            clock,
            shift,
        })
    }
}

fn window(flag: u8, window_ms: u64) -> Result<Option<u64>> {
    match flag {
        0 if window_ms == 0 => Ok(None),
        1 => Ok(Some(window_ms)),
        _ => Err(corrupt("windowed: bad window flag")),
    }
}

/// A version-1 body (its first field, G, already read): a ring of G blocked generations, the
/// newest started at `newest_started_ms`. Each keeps its bits; generation i (oldest first)
/// goes to slot `clock − (G−1−i)` with the clock at ⌈newest_started/W⌉ + G − 1 (shifted by
/// G − 1 so no slot is negative), which keeps every item at least as long as version 1
/// promised. Without a window, slots are 0..G and the clock G − 1. Empty generations are
/// not kept.
fn decode_v1(
    body: &mut BodyReader<'_>,
    generations: u32,
    seed: u64,
) -> Result<WindowedBloomFilter> {
    let generations = generations as usize;
    let items_per_generation = body.u64()?;
    let fpr = body.f64()?;
    let generation_window_ms = window(body.u8()?, body.u64()?)?;
    let newest_started_ms = body.u64()?;
    let config = WindowConfig::new(generations, items_per_generation, fpr, generation_window_ms);
    config
        .validate()
        .map_err(|e| corrupt(format!("windowed config: {e}")))?;
    let params = Params::for_items(
        Layout::Blocked,
        items_per_generation,
        config.generation_fpr(),
    )
    .map_err(|e| corrupt(format!("windowed config: {e}")))?;
    let g = generations as u64;
    let shift = g - 1;
    let clock = generation_window_ms
        .map_or(0, |w| newest_started_ms.div_ceil(w))
        .checked_add(shift)
        .ok_or_else(|| corrupt("windowed: start time out of range"))?;
    let mut ring = VecDeque::new();
    for i in 0..g {
        let f = codec::decode_nested::<BlockedBloomFilter>(body, seed)?;
        if *f.params() != params {
            return Err(corrupt(format!(
                "windowed generation {i} has params {:?}, the config gives {params:?}",
                f.params()
            )));
        }
        if !f.is_empty() {
            ring.push_back(Generation {
                slot: clock - (g - 1 - i),
                bits: Arc::new(Bits::Legacy(f)),
            });
        }
    }
    Ok(WindowedBloomFilter {
        config,
        seed,
        generations: ring,
        clock,
        shift,
    })
}
