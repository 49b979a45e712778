//! Time-windowed (rotating) Bloom filter: a ring of G generations for rolling "seen" histories
//! that must forget old items (the feed-service case: what did this user see in the last week?).
//!
//! Inserts go to the newest generation; queries check all G. [`WindowedBloomFilter::rotate`]
//! clears the oldest generation and makes it the newest. Rotation happens explicitly, when the
//! newest generation has taken `items_per_generation` items, or — with
//! `generation_window_ms = Some(W)` — when the newest generation is W old. Time is always passed
//! in (`now_ms`); the library never reads a clock, so simulated clocks work.
//!
//! # Retention guarantee (age-based rotation, W = `generation_window_ms`)
//! An item inserted at time t is present for every query until at least t + (G−1)·W, and is gone
//! once `rotate_if_due(now)` (or `insert`) has been called with now ≥ t + G·W.
//! Why: `insert` first applies due rotations, so the newest generation started at some
//! s ∈ (t − W, t]. Age rotations are scheduled at s + W, s + 2W, … (a late call catches up on
//! every missed one, and the schedule does not drift), and the item's generation is dropped by
//! the G-th of them, at s + G·W ∈ (t + (G−1)·W, t + G·W].
//! Caveats: (1) rotations are applied by `insert` / `rotate_if_due`, not by `contains` (which
//! takes `&self`) — call `rotate_if_due(now)` before querying to apply expiry; (2) a
//! capacity-triggered or explicit rotation counts as one of the G, so retention shrinks if more
//! than `items_per_generation` distinct items arrive within one window. Size generations for the
//! peak rate per window to keep the (G−1)·W promise.
//!
//! # Accuracy
//! A query is positive if any generation answers positive, so each generation is sized for
//! `p_gen = 1 − (1 − p)^(1/G)`, making the union over G full generations exactly `p`.
//! Generations use the blocked layout: a query costs G cache lines, not G·k.

use std::collections::VecDeque;

use crate::codec::{self, corrupt, BodyReader, FilterCodec, FilterKind};
use crate::error::{Error, Result};
use crate::filters::BlockedBloomFilter;
use crate::hash::{KeyHash, DEFAULT_SEED};
use crate::params::{Layout, Params, MAX_BYTES};

/// Most generations a ring may have (each query checks all of them).
pub const MAX_GENERATIONS: usize = 1024;

/// Shape of a windowed filter.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct WindowConfig {
    /// Number of generations G, 2..=[`MAX_GENERATIONS`].
    pub generations: usize,
    /// Distinct items a generation is sized for; the newest rotates out when it holds this many.
    pub items_per_generation: u64,
    /// Target FPR of a query over all G full generations.
    pub fpr: f64,
    /// Age-based rotation: a generation becomes old after this many milliseconds (W > 0).
    pub generation_window_ms: Option<u64>,
}

impl WindowConfig {
    /// FPR each generation is sized for: `1 − (1 − p)^(1/G)`.
    pub fn generation_fpr(&self) -> f64 {
        -((-self.fpr).ln_1p() / self.generations as f64).exp_m1()
    }

    /// Validates the config and sizes one generation.
    pub fn generation_params(&self) -> Result<Params> {
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
        let params = Params::for_items(
            Layout::Blocked,
            self.items_per_generation,
            self.generation_fpr(),
        )?;
        if params.bytes().saturating_mul(self.generations as u64) > MAX_BYTES {
            return Err(Error::TooLarge(format!(
                "{} generations of {} bytes exceed the size limit",
                self.generations,
                params.bytes()
            )));
        }
        Ok(params)
    }
}

/// A ring of G Bloom filter generations.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowedBloomFilter {
    config: WindowConfig,
    seed: u64,
    /// Front = oldest, back = newest; always exactly `config.generations` entries.
    generations: VecDeque<BlockedBloomFilter>,
    /// When the newest generation's window started (age-based rotation schedule).
    newest_started_ms: u64,
}

impl WindowedBloomFilter {
    /// All G generations are allocated up front (memory is fixed); seed [`DEFAULT_SEED`].
    pub fn new(config: WindowConfig, now_ms: u64) -> Result<Self> {
        Self::with_seed(config, DEFAULT_SEED, now_ms)
    }

    /// As [`Self::new`] with an explicit hash seed.
    pub fn with_seed(config: WindowConfig, seed: u64, now_ms: u64) -> Result<Self> {
        let params = config.generation_params()?;
        let generations = (0..config.generations)
            .map(|_| BlockedBloomFilter::with_params(params, seed))
            .collect::<Result<VecDeque<_>>>()?;
        Ok(Self {
            config,
            seed,
            generations,
            newest_started_ms: now_ms,
        })
    }

    /// The key's hash with this filter's seed.
    pub fn hash(&self, key: impl AsRef<[u8]>) -> KeyHash {
        KeyHash::of(key.as_ref(), self.seed)
    }

    /// Applies due rotations (age, or newest generation full), then adds the key to the newest
    /// generation. Returns whether it was possibly present before.
    pub fn insert(&mut self, key: impl AsRef<[u8]>, now_ms: u64) -> bool {
        self.insert_hash(self.hash(key), now_ms)
    }

    /// [`Self::insert`] of a precomputed hash.
    pub fn insert_hash(&mut self, h: KeyHash, now_ms: u64) -> bool {
        self.rotate_if_due(now_ms);
        if self.newest().len() >= self.config.items_per_generation {
            self.rotate(now_ms);
        }
        let newest = self.generations.len() - 1;
        let in_older = self.generations.range(..newest).any(|g| g.contains_hash(h));
        let in_newest = self.generations[newest].insert_hash(h);
        in_older || in_newest
    }

    /// Whether the key may have been inserted within the retained generations.
    pub fn contains(&self, key: impl AsRef<[u8]>) -> bool {
        self.contains_hash(self.hash(key))
    }

    /// Newest first: recent keys are the likeliest hits.
    pub fn contains_hash(&self, h: KeyHash) -> bool {
        self.generations.iter().rev().any(|g| g.contains_hash(h))
    }

    /// Drops the oldest generation and starts a new, empty newest one at `now_ms`.
    pub fn rotate(&mut self, now_ms: u64) {
        self.drop_oldest();
        self.newest_started_ms = now_ms;
    }

    /// Applies every age-based rotation due by `now_ms` (at most G are needed: after G the ring
    /// is empty). The schedule advances in whole windows so it does not drift with call times.
    /// Returns whether anything rotated. A clock that goes backwards rotates nothing.
    pub fn rotate_if_due(&mut self, now_ms: u64) -> bool {
        let Some(window) = self.config.generation_window_ms else {
            return false;
        };
        let due = now_ms.saturating_sub(self.newest_started_ms) / window;
        if due == 0 {
            return false;
        }
        for _ in 0..due.min(self.generations.len() as u64) {
            self.drop_oldest();
        }
        // due·window ≤ now − start, so this cannot overflow.
        self.newest_started_ms += due * window;
        true
    }

    fn drop_oldest(&mut self) {
        let mut oldest = self.generations.pop_front().expect("G ≥ 2 generations");
        oldest.clear();
        self.generations.push_back(oldest);
    }

    fn newest(&self) -> &BlockedBloomFilter {
        self.generations.back().expect("G ≥ 2 generations")
    }

    /// Number of generations (G).
    pub fn generations(&self) -> usize {
        self.generations.len()
    }

    /// Distinct items (per generation) over all generations; saturating, as the generations'
    /// counts come from the file for a loaded filter (a fuzz regression).
    pub fn len(&self) -> u64 {
        self.generations
            .iter()
            .fold(0u64, |sum, g| sum.saturating_add(g.len()))
    }

    /// Whether no generation holds an item.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Items in the newest generation.
    pub fn newest_len(&self) -> u64 {
        self.newest().len()
    }

    /// When the newest generation's window started.
    pub fn newest_started_ms(&self) -> u64 {
        self.newest_started_ms
    }

    /// FPR of a query from the generations' actual fill: `1 − Π(1 − estimated_fpr_g)`.
    pub fn estimated_fpr(&self) -> f64 {
        1.0 - self
            .generations
            .iter()
            .map(|g| 1.0 - g.estimated_fpr())
            .product::<f64>()
    }

    /// Bytes of the filter: the struct and every generation.
    pub fn memory_bytes(&self) -> usize {
        self.generations.iter().map(|g| g.memory_bytes()).sum()
    }

    /// The seed keys are hashed with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The configuration the filter was made with.
    pub fn config(&self) -> &WindowConfig {
        &self.config
    }
}

#[cfg(feature = "serde")]
crate::codec::serde_as_file_image!(WindowedBloomFilter);

/// Body: generations u32, items_per_generation u64, fpr f64, window flag u8 (0 = none, 1 = set),
/// window_ms u64, newest_started_ms u64, then G length-prefixed blocked-filter bodies, oldest
/// first.
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
        out.extend_from_slice(&(c.generations as u32).to_le_bytes());
        out.extend_from_slice(&c.items_per_generation.to_le_bytes());
        out.extend_from_slice(&c.fpr.to_le_bytes());
        out.push(u8::from(c.generation_window_ms.is_some()));
        out.extend_from_slice(&c.generation_window_ms.unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&self.newest_started_ms.to_le_bytes());
        for g in &self.generations {
            codec::encode_nested(g, out);
        }
    }

    fn decode_body(body: &mut BodyReader<'_>, seed: u64) -> Result<Self> {
        let generations = body.u32()? as usize;
        let items_per_generation = body.u64()?;
        let fpr = body.f64()?;
        let has_window = body.u8()?;
        let window = body.u64()?;
        let generation_window_ms = match has_window {
            0 if window == 0 => None,
            1 => Some(window),
            _ => return Err(corrupt("windowed: bad window flag")),
        };
        let newest_started_ms = body.u64()?;
        let config = WindowConfig {
            generations,
            items_per_generation,
            fpr,
            generation_window_ms,
        };
        let params = config
            .generation_params()
            .map_err(|e| corrupt(format!("windowed config: {e}")))?;
        let mut ring = VecDeque::new();
        for i in 0..generations {
            let g = codec::decode_nested::<BlockedBloomFilter>(body, seed)?;
            if *g.params() != params {
                return Err(corrupt(format!(
                    "windowed generation {i} has params {:?}, the config gives {params:?}",
                    g.params()
                )));
            }
            ring.push_back(g);
        }
        Ok(Self {
            config,
            seed,
            generations: ring,
            newest_started_ms,
        })
    }
}
