//! Scalable Bloom filter (Almeida, Baquero, Preguiça, Hutchison 2007): a filter that grows when
//! the item count overshoots the estimate while keeping a bound on the false-positive rate.
//!
//! A chain of links; link `i` holds `c0 · s^i` items at FPR `p0 · r^i` (growth factor `s`,
//! tightening ratio `r`). Inserts go to the newest link; when it has taken its capacity a new
//! link is added. A query is positive if any link answers positive, so the compound FPR is at
//! most `Σ p0 r^i < p0 / (1 − r)`. Setting `p0 = p·(1 − r)` from the user's target `p` makes
//! the bound exactly `p` no matter how many links are added (sizing the first link at `p` itself
//! would let the compound rate drift to `p/(1 − r)`, 2× the target at r = 0.5).
//! [`ScalableBloomFilter::fpr_bound`] reports the bound for the links that exist.
//!
//! Links are classic filters ([`BloomFilter`]), not blocked ones: link FPRs shrink
//! geometrically, and the blocked layout's space explodes at tiny rates (its per-block floor):
//! at 1e-12 it needs 160 bits/item vs 57.5 classic, at 1e-30 23,000 vs 144 (`Params` model).
//! Long chains (growth 1, or small r) reach such rates quickly. An absent key costs about two
//! cache lines per link (a classic query stops at the first clear bit). All links share the
//! seed, so one [`KeyHash`] probes the whole chain; links differ in size, so a key's positions
//! in different links are unrelated.
//!
//! Cost of the guarantee: at 1% with r = 0.5 the first link is sized for 0.5%, the second for
//! 0.25%, ...; memory per item grows by about `log2(1/r)/ln²2 ≈ 2.1` bits per doubling.
//! Growth arithmetic is checked: a link whose capacity or size overflows is
//! [`Error::TooLarge`], never a wrapped size.

use crate::codec::{self, corrupt, BodyReader, FilterCodec, FilterKind};
use crate::error::{Error, Result};
use crate::filters::BloomFilter;
use crate::hash::{KeyHash, DEFAULT_SEED};
use crate::params::{Layout, Params};

/// Default growth factor: each link holds twice the items of the previous one.
pub const DEFAULT_GROWTH: u32 = 2;

/// Default tightening ratio: each link has half the FPR of the previous one.
pub const DEFAULT_TIGHTENING: f64 = 0.5;

/// Most links a chain may have; a chain this long means growth is misconfigured (growth 1).
pub const MAX_LINKS: usize = 256;

/// A Bloom filter that grows with its contents and keeps its FPR bound.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalableBloomFilter {
    schedule: Schedule,
    seed: u64,
    links: Vec<BloomFilter>,
}

/// A chain's growth schedule: the options that give each link its capacity and FPR, checked.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Schedule {
    initial_capacity: u64,
    fpr: f64,
    growth: u32,
    tightening: f64,
}

impl ScalableBloomFilter {
    /// Starts with one link for `initial_capacity` items; the FPR stays ≤ `fpr` at any size.
    /// Growth [`DEFAULT_GROWTH`], tightening [`DEFAULT_TIGHTENING`], seed [`DEFAULT_SEED`].
    pub fn new(initial_capacity: u64, fpr: f64) -> Result<Self> {
        Self::with_options(
            initial_capacity,
            fpr,
            DEFAULT_GROWTH,
            DEFAULT_TIGHTENING,
            DEFAULT_SEED,
        )
    }

    /// Growth factor ≥ 1, tightening ratio in (0, 1).
    pub fn with_options(
        initial_capacity: u64,
        fpr: f64,
        growth: u32,
        tightening: f64,
        seed: u64,
    ) -> Result<Self> {
        let schedule = Schedule::new(initial_capacity, fpr, growth, tightening)?;
        let first = BloomFilter::with_params(schedule.link_params(0)?, seed)?;
        Ok(Self {
            schedule,
            seed,
            links: vec![first],
        })
    }

    /// Offers the link array's buffer, then each link's bits, to a host that moves allocations
    /// (see [`crate::relocate`]).
    pub fn relocate(&mut self, walk: &mut crate::relocate::Walk<'_>) {
        walk.vec(&mut self.links);
        for link in &mut self.links {
            link.relocate(walk);
        }
    }

    /// Bytes of the bit array of link `i` (0-based) in this filter's growth schedule, without
    /// allocating it: what a caller checks against a memory budget before the link exists.
    pub fn link_bytes(&self, i: usize) -> Result<u64> {
        Ok(self.schedule.link_params(i)?.bytes())
    }

    /// [`Self::link_bytes`] of the filter these options would make, without making it.
    pub fn schedule_link_bytes(
        initial_capacity: u64,
        fpr: f64,
        growth: u32,
        tightening: f64,
        i: usize,
    ) -> Result<u64> {
        Ok(Schedule::new(initial_capacity, fpr, growth, tightening)?
            .link_params(i)?
            .bytes())
    }

    /// Whether the next insert of an absent key adds a link (the newest link is at capacity).
    pub fn is_full(&self) -> bool {
        self.links
            .last()
            .is_none_or(|newest| newest.len() >= newest.params().items)
    }

    /// Appends an empty link, as growth would (a filter shaped like another whose contents
    /// arrive later). [`Error::TooLarge`] past the schedule's limits; the filter is unchanged.
    pub fn push_empty_link(&mut self) -> Result<()> {
        let link =
            BloomFilter::with_params(self.schedule.link_params(self.links.len())?, self.seed)?;
        self.links.push(link);
        Ok(())
    }

    /// The key's hash with this filter's seed.
    pub fn hash(&self, key: impl AsRef<[u8]>) -> KeyHash {
        KeyHash::of(key.as_ref(), self.seed)
    }

    /// Adds the key (growing if the newest link is full); returns whether it was possibly present
    /// already (then nothing is added). Errors only if a new link cannot be created
    /// ([`Error::TooLarge`]); the filter is unchanged then.
    pub fn insert(&mut self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.insert_hash(self.hash(key))
    }

    /// [`Self::insert`] of a precomputed hash.
    pub fn insert_hash(&mut self, h: KeyHash) -> Result<bool> {
        if self.contains_hash(h) {
            return Ok(true);
        }
        let newest = self.links.last().expect("at least one link");
        if newest.len() >= newest.params().items {
            self.push_empty_link()?;
        }
        self.links
            .last_mut()
            .expect("at least one link")
            .insert_hash(h);
        Ok(false)
    }

    /// "Maybe present" in any link (true) or "definitely absent" (false).
    pub fn contains(&self, key: impl AsRef<[u8]>) -> bool {
        self.contains_hash(self.hash(key))
    }

    /// Newest (largest) link first: a present key is most likely there.
    pub fn contains_hash(&self, h: KeyHash) -> bool {
        self.links.iter().rev().any(|link| link.contains_hash(h))
    }

    /// Requests the cache lines an insert of `h` writes in the newest link (see
    /// [`BloomFilter::prefetch_hash`]).
    pub fn prefetch_hash(&self, h: KeyHash) {
        if let Some(newest) = self.links.last() {
            newest.prefetch_hash(h);
        }
    }

    /// Sets `found[i]` for each hash not found yet that a link may contain: [`Self::contains_hash`]
    /// of many keys, each link (newest first) queried batched about the keys still unanswered.
    pub fn mark_batch_hashes(&self, hashes: &[KeyHash], found: &mut [bool]) {
        for link in self.links.iter().rev() {
            link.mark_batch_hashes(hashes, found);
        }
    }

    /// Distinct items added (inserts of possibly-present keys are not counted); saturating, as
    /// the links' counts come from the file for a loaded filter (a fuzz regression).
    pub fn len(&self) -> u64 {
        self.links
            .iter()
            .fold(0u64, |sum, link| sum.saturating_add(link.len()))
    }

    /// Whether the filter counts no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of links so far.
    pub fn links(&self) -> usize {
        self.links.len()
    }

    /// Items the existing links were sized for.
    pub fn capacity(&self) -> u64 {
        self.links.iter().map(|link| link.params().items).sum()
    }

    /// Design capacity of the first link.
    pub fn initial_capacity(&self) -> u64 {
        self.schedule.initial_capacity
    }

    /// The target FPR `p` the filter stays under at any size.
    pub fn target_fpr(&self) -> f64 {
        self.schedule.fpr
    }

    /// Capacity factor from one link to the next.
    pub fn growth(&self) -> u32 {
        self.schedule.growth
    }

    /// FPR factor from one link to the next (each link is sized for a tighter rate).
    pub fn tightening(&self) -> f64 {
        self.schedule.tightening
    }

    /// Compound model FPR if every existing link were filled to capacity:
    /// `1 − Π(1 − p_i) ≤ Σ p0 r^i < p0/(1 − r) = target`.
    pub fn fpr_bound(&self) -> f64 {
        1.0 - self
            .links
            .iter()
            .map(|link| 1.0 - link.params().fpr())
            .product::<f64>()
    }

    /// Compound FPR from the links' actual fill: `1 − Π(1 − estimated_fpr_i)`.
    pub fn estimated_fpr(&self) -> f64 {
        1.0 - self
            .links
            .iter()
            .map(|link| 1.0 - link.estimated_fpr())
            .product::<f64>()
    }

    /// Bytes of the filter: the struct and every link.
    pub fn memory_bytes(&self) -> usize {
        self.links.iter().map(|link| link.memory_bytes()).sum()
    }

    /// The seed keys are hashed with.
    pub fn seed(&self) -> u64 {
        self.seed
    }
}

#[cfg(feature = "serde")]
crate::codec::serde_as_file_image!(ScalableBloomFilter);

impl Schedule {
    /// Checks the options (including the first link's params).
    fn new(initial_capacity: u64, fpr: f64, growth: u32, tightening: f64) -> Result<Self> {
        if growth == 0 {
            return Err(Error::InvalidParameter(
                "growth factor must be at least 1".into(),
            ));
        }
        if !(tightening > 0.0 && tightening < 1.0) {
            return Err(Error::InvalidParameter(format!(
                "tightening ratio must be in (0, 1), got {tightening}"
            )));
        }
        if !(fpr > 0.0 && fpr < 1.0) {
            return Err(Error::InvalidParameter(format!(
                "fpr must be in (0, 1), got {fpr}"
            )));
        }
        let schedule = Schedule {
            initial_capacity,
            fpr,
            growth,
            tightening,
        };
        schedule.link_params(0)?;
        Ok(schedule)
    }

    /// Params of link `i`: capacity `c0 · s^i`, FPR `p·(1 − r)·r^i`.
    fn link_params(&self, i: usize) -> Result<Params> {
        if i >= MAX_LINKS {
            return Err(Error::TooLarge(format!(
                "a scalable filter is limited to {MAX_LINKS} links"
            )));
        }
        let capacity = u32::try_from(i)
            .ok()
            .and_then(|i| u64::from(self.growth).checked_pow(i))
            .and_then(|g| g.checked_mul(self.initial_capacity))
            .ok_or_else(|| Error::TooLarge(format!("capacity of link {i} overflows u64")))?;
        let link_fpr = self.fpr * (1.0 - self.tightening) * self.tightening.powi(i as i32);
        if link_fpr.is_nan() || link_fpr < f64::MIN_POSITIVE {
            return Err(Error::TooLarge(format!(
                "link {i} would need an FPR below the f64 range"
            )));
        }
        Params::for_items(Layout::Classic, capacity, link_fpr)
    }
}

/// Body: initial_capacity u64, fpr f64, growth u32, tightening f64, link count u32, then each
/// link as a length-prefixed classic-filter body. Every link must have exactly the params the
/// growth schedule gives.
impl FilterCodec for ScalableBloomFilter {
    fn body_len_hint(&self) -> usize {
        // Its parameters and arrays: at least the encoded body.
        self.memory_bytes()
    }

    const KIND: FilterKind = FilterKind::Scalable;

    fn hash_seed(&self) -> u64 {
        self.seed
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.schedule.initial_capacity.to_le_bytes());
        out.extend_from_slice(&self.schedule.fpr.to_le_bytes());
        out.extend_from_slice(&self.schedule.growth.to_le_bytes());
        out.extend_from_slice(&self.schedule.tightening.to_le_bytes());
        out.extend_from_slice(&(self.links.len() as u32).to_le_bytes());
        for link in &self.links {
            codec::encode_nested(link, out);
        }
    }

    fn decode_body(body: &mut BodyReader<'_>, seed: u64) -> Result<Self> {
        let initial_capacity = body.u64()?;
        let fpr = body.f64()?;
        let growth = body.u32()?;
        let tightening = body.f64()?;
        let count = body.u32()? as usize;
        let schedule = Schedule::new(initial_capacity, fpr, growth, tightening)
            .map_err(|e| corrupt(format!("scalable options: {e}")))?;
        let mut filter = Self {
            schedule,
            seed,
            links: Vec::new(),
        };
        if count == 0 || count > MAX_LINKS {
            return Err(corrupt(format!("scalable link count {count}")));
        }
        for i in 0..count {
            let expected = schedule
                .link_params(i)
                .map_err(|e| corrupt(format!("scalable link {i}: {e}")))?;
            let link: BloomFilter = codec::decode_nested(body, seed)?;
            if *link.params() != expected {
                return Err(corrupt(format!(
                    "scalable link {i} has params {:?}, the growth schedule gives {expected:?}",
                    link.params()
                )));
            }
            filter.links.push(link);
        }
        Ok(filter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The batched query over the links answers as one key at a time, keys found in an
    /// earlier link or given as already found staying found.
    #[test]
    fn mark_batch_hashes_answers_as_contains_hash() {
        let mut filter = ScalableBloomFilter::new(50, 0.01).unwrap();
        for i in 0..400 {
            filter.insert(format!("k{i}")).unwrap();
        }
        assert!(filter.links() > 1);
        let hashes: Vec<KeyHash> = (0..1000).map(|i| filter.hash(format!("k{i}"))).collect();
        let mut found = vec![false; hashes.len()];
        found[999] = true;
        filter.mark_batch_hashes(&hashes, &mut found);
        for (i, h) in hashes.iter().enumerate().take(999) {
            assert_eq!(found[i], filter.contains_hash(*h), "key {i}");
        }
        assert!(found[..400].iter().all(|&f| f) && found[999]);
    }

    #[test]
    fn growth_schedule_overflow_is_too_large() {
        let filter = Schedule {
            initial_capacity: 1 << 40,
            fpr: 0.01,
            growth: 1 << 20,
            tightening: 0.5,
        };
        // 2^40 · (2^20)^2 = 2^80 items overflows u64.
        assert!(matches!(filter.link_params(2), Err(Error::TooLarge(_))));
        assert!(matches!(
            filter.link_params(MAX_LINKS),
            Err(Error::TooLarge(_))
        ));
        let tiny = Schedule {
            initial_capacity: 1,
            growth: 1,
            tightening: 0.01,
            ..filter
        };
        // 0.01 · 0.99 · 0.01^200 underflows f64.
        assert!(matches!(tiny.link_params(200), Err(Error::TooLarge(_))));
        let p0 = tiny.link_params(0).unwrap();
        assert_eq!(p0.items, 1);
        assert!(p0.fpr() <= 0.01 * 0.99);
    }
}
