//! valkey-bloom's link (`bloomfltr`): a Bloom filter indexed exactly as valkey-bloom's filters
//! are (the `bloomfilter` crate's scheme), in the one chain ([`super::ValkeyChain`]), so
//! valkey-bloom's RDB files load into the module and are written back in its encoding.
//!
//! - **Hashing** (`hash.rs`): a 32-byte seed gives two SipHash-1-3 keys; an item (hashed as a
//!   Rust byte slice: its length as a little-endian `u64`, then its bytes) gives `h0`, `h1`;
//!   probe `i` is `h0`, `h1`, then `(h0 + i·h1 mod 2^64) mod (2^64 − 59)`, taken mod the bit
//!   count. valkey-bloom 0.1.0 uses one fixed seed; 1.0 a random seed per object by default.
//! - **Sizing**: bitmap bytes `ceil(n·ln p / (−8·ln²2))`; probes `ceil(m/n·ln 2)` (0.1.0's
//!   `bloomfilter` 1.0.x) or `round(m/n·ln 2)` (1.0's 3.x), at least 1, by the server's
//!   [`ValkeyFlavour`]; a loaded link keeps its stored count.
//! - **Scaling**: the first link takes the error rate itself (no halving); link `i` is sized
//!   for `fp × tightening^i` (tightening 0.5 in 0.1.0), capacity × expansion.
//! - **Bits**: bit `o` is bit `o % 64` of little-endian word `o / 64`, i.e. byte `o / 8` under
//!   mask `1 << (o % 8)` of the little-endian image: 1.0's layout. 0.1.0's (`bit-vec`, most
//!   significant bit first) is the same bits with each byte reversed, applied on save and load.
//!
//! The RDB encodings (0: 0.1.0, 1: 1.0), the `BF.LOAD` payload and our SCANDUMP header are in
//! `format.rs`. Implemented from valkey-bloom's documented formats and measured behaviour
//! (docs/valkey-bloom-notes.md), tested bit for bit against the `bloomfilter` crate.

use super::classic::estimate_items;
use super::link::{ChainLink, LinkCounts, LinkHealth, MergeLink};
use super::{format_g, le_bytes, patch_le_bytes, visit_le_words, Chain, ChainShape};
use super::{Tally, TallyReading};
use crate::budget::{Admitted, Shape};
use crate::codec::rdb_io::{RdbError, RdbSink, RdbSource};
use bloomgate::relocate::Walk;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

mod format;
mod hash;
#[cfg(test)]
mod tests;

pub use format::{decode_load_payload, encode_load_payload, LoadPayloadError};
pub use hash::{bitmap_bytes, hashes_for, probe_index, sip_hash_pair, KRule, FIXED_SEED};

/// Which valkey-bloom a server speaks for `bloomfltr` values: how new links are sized and
/// seeded, `BF.INFO Size`, and the RDB encoding written. Every flavour loads both encodings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ValkeyFlavour {
    /// valkey-bloom 0.1.0: encoding 0, the fixed seed, probes rounded up, f32 error rates.
    V0_1,
    /// valkey-bloom 1.0: encoding 1, a random seed per object (unless turned off), probes
    /// rounded to nearest.
    #[default]
    V1_0,
}

impl ValkeyFlavour {
    /// The RDB encoding version this flavour writes `bloomfltr` values in.
    pub fn encoding_version(self) -> i32 {
        match self {
            ValkeyFlavour::V0_1 => 0,
            ValkeyFlavour::V1_0 => 1,
        }
    }
    /// How this flavour counts a new link's probes.
    pub fn k_rule(self) -> KRule {
        match self {
            ValkeyFlavour::V0_1 => KRule::Ceil,
            ValkeyFlavour::V1_0 => KRule::Round,
        }
    }
}

static FLAVOUR: AtomicU8 = AtomicU8::new(1);
/// The sums over every live `bloomfltr` object (kept by the chain, see [`Tally`]).
static METRICS: Tally = Tally::new();

/// valkey-bloom 1.0's `INFO bf` core metrics: the sums of `BF.INFO` Size, Number of filters,
/// Number of items inserted and Capacity over every live `bloomfltr` object, and their count.
pub fn valkey_metrics() -> TallyReading {
    METRICS.read()
}
static RANDOM_SEED: AtomicBool = AtomicBool::new(true);

/// Sets the server's valkey-bloom flavour (a module load argument; before the `bloomfltr` type
/// is registered, since its encoding version is the flavour's).
pub fn set_valkey_flavour(flavour: ValkeyFlavour) {
    FLAVOUR.store(flavour as u8, Ordering::Relaxed);
}

/// The server's valkey-bloom flavour ([`ValkeyFlavour::V1_0`] unless set).
pub fn valkey_flavour() -> ValkeyFlavour {
    match FLAVOUR.load(Ordering::Relaxed) {
        0 => ValkeyFlavour::V0_1,
        _ => ValkeyFlavour::V1_0,
    }
}

/// Whether new 1.0-flavour filters get a random seed (valkey-bloom 1.0's
/// `bf.bloom-use-random-seed`, default yes); 0.1.0 always uses [`FIXED_SEED`].
pub fn set_valkey_random_seed(random: bool) {
    RANDOM_SEED.store(random, Ordering::Relaxed);
}

/// The tightening ratio of 0.1.0, and 1.0's default.
pub const DEFAULT_TIGHTENING: f64 = 0.5;
/// Most links an object may have (loaded, or grown to): at tightening 0.5 the error rate of a
/// link reaches 0 in an `f64` after about 1,075 links.
pub const MAX_LINKS: u64 = 4096;
/// Largest bit array of one link, in bytes (1 TiB).
pub const MAX_LINK_BYTES: u64 = 1 << 40;
/// Most probes a loaded link may declare (an error rate of 1e-308 needs about 1,023).
pub const MAX_HASHES: u32 = 4096;

/// What a valkey chain keeps besides its links: whether it scales, the object's error rate and
/// tightening ratio (which size the links it grows by), and the seed every link hashes with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValkeySettings {
    /// Grows when the newest link is full (expansion > 0).
    pub scaling: bool,
    /// The object's error rate (link `i` is sized for `fp × tightening^i`).
    pub fp: f64,
    /// The tightening ratio.
    pub tightening: f64,
    /// The 32-byte seed of every link.
    pub seed: [u8; 32],
    /// Whether the seed was drawn at random (1.0's `is_seed_random`).
    pub seed_random: bool,
}

impl ValkeySettings {
    /// The settings a stored object declares (valkey-bloom's fixed seed when it stores none).
    pub(crate) fn loaded(
        scaling: bool,
        fp: f64,
        tightening: f64,
        seed: Option<[u8; 32]>,
        seed_random: bool,
    ) -> Self {
        Self {
            scaling,
            fp,
            tightening,
            seed: seed.unwrap_or(FIXED_SEED),
            seed_random,
        }
    }

    /// The settings of a new object at error rate `fp`, by the server's flavour.
    fn new(scaling: bool, fp: f64) -> Self {
        let flavour = valkey_flavour();
        let random = flavour == ValkeyFlavour::V1_0 && RANDOM_SEED.load(Ordering::Relaxed);
        Self {
            scaling,
            // 0.1.0 parses and keeps error rates as f32.
            fp: match flavour {
                ValkeyFlavour::V0_1 => f64::from(fp as f32),
                ValkeyFlavour::V1_0 => fp,
            },
            tightening: DEFAULT_TIGHTENING,
            seed: if random {
                hash::random_seed()
            } else {
                FIXED_SEED
            },
            seed_random: random,
        }
    }

    /// The error rate of link `index` (0 = the first).
    pub fn link_error(&self, index: usize) -> f64 {
        self.fp * self.tightening.powi(index.min(i32::MAX as usize) as i32)
    }
}

/// valkey-bloom 1.0's creation options (`BF.INSERT … TIGHTENING t SEED s`, the
/// `bf.bloom-tightening-ratio` config), set on a new object before its first item.
impl Chain<ValkeyLink> {
    /// Sets the tightening ratio (in (0, 1)) the object grows with and its seed (a given seed
    /// is not random, as in 1.0); refused once the object holds an item (its bits were placed
    /// by the old seed).
    pub fn set_valkey_options(
        &mut self,
        tightening: Option<f64>,
        seed: Option<[u8; 32]>,
    ) -> Result<(), &'static str> {
        if self.items() > 0 {
            return Err("ERR the filter already holds items");
        }
        if let Some(t) = tightening {
            if !(t > 0.0 && t < 1.0) {
                return Err("ERR (0 < tightening ratio range < 1)");
            }
            self.settings_mut().tightening = t;
        }
        if let Some(seed) = seed {
            let settings = self.settings_mut();
            settings.seed = seed;
            settings.seed_random = false;
        }
        Ok(())
    }
}

/// Why an object stops scaling short of a capacity ([`scaled_capacity`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleStop {
    /// The next link's error rate is not above `f64::MIN_POSITIVE` (or [`MAX_LINKS`] links).
    ErrorDegrades,
    /// The next link would take the object past the limit (or its capacity past `i64`).
    MemoryLimit,
}

/// How an object scales, as valkey-bloom 1.0 counts it for `BF.INFO`'s `Max scaled capacity`
/// and `BF.INSERT`'s `VALIDATESCALETO`: links of `capacity × expansion^i` items at
/// `fp × tightening^i`, added while the object — counted as 1.0 counts Size, `48 + 8 × (the link
/// vector's capacity) + Σ (208 + bitmap bytes)` — stays within `limit` bytes (0: none), until
/// their total capacity reaches `want`. `Ok(total)` once it does; else the total that fits and
/// why it stops.
pub fn scaled_capacity(
    capacity: u64,
    fp: f64,
    tightening: f64,
    expansion: u32,
    limit: u64,
    want: u64,
) -> Result<u64, (u64, ScaleStop)> {
    let limit = if limit == 0 { u64::MAX } else { limit };
    let growth = u64::from(expansion.max(1));
    let (mut capacity, mut total, mut links_bytes) = (capacity, 0u64, 0u64);
    for i in 0..MAX_LINKS {
        if total >= want {
            return Ok(total);
        }
        let error = fp * tightening.powi(i.min(i32::MAX as u64) as i32);
        if error.is_nan() || error <= f64::MIN_POSITIVE {
            return Err((total, ScaleStop::ErrorDegrades));
        }
        let Some(bytes) = bitmap_bytes(capacity, error) else {
            return Err((total, ScaleStop::MemoryLimit));
        };
        links_bytes = links_bytes.saturating_add(208 + bytes);
        let vcap = if i == 0 {
            1
        } else {
            (i + 1).next_power_of_two().max(4)
        };
        if 48u64.saturating_add(8 * vcap).saturating_add(links_bytes) > limit {
            return Err((total, ScaleStop::MemoryLimit));
        }
        total = total.saturating_add(capacity);
        match capacity.checked_mul(growth) {
            Some(next) if next <= i64::MAX as u64 => capacity = next,
            _ if total >= want => return Ok(total),
            _ => return Err((total, ScaleStop::MemoryLimit)),
        }
    }
    match total >= want {
        true => Ok(total),
        false => Err((total, ScaleStop::ErrorDegrades)),
    }
}

/// valkey-bloom 1.0's `BF.INFO` figure of a scaling object.
impl Chain<ValkeyLink> {
    /// `Max scaled capacity`: [`scaled_capacity`] from the object's first link, as far as it
    /// goes within `limit` bytes (0: none).
    pub fn max_scaled_capacity(&self, limit: u64) -> u64 {
        let Some(first) = self.links().first() else {
            return 0;
        };
        let s = self.settings();
        let scaled = scaled_capacity(
            first.capacity(),
            s.fp,
            s.tightening,
            self.growth(),
            limit,
            u64::MAX,
        );
        scaled.unwrap_or_else(|(total, _)| total)
    }
}

/// One valkey-bloom filter: `bytes × 8` bits in little-endian words, its probe count, and what
/// the chain's rule counts.
#[derive(Clone, Debug)]
pub struct ValkeyLink {
    words: Box<[u64]>,
    bytes: u64,
    hashes: u32,
    counts: LinkCounts,
}

/// A link sized but not allocated: its bytes and probes, capacity and error rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValkeyPlan {
    /// Bytes of the bit array (bits = 8 × bytes).
    pub bytes: u64,
    /// Probes per item.
    pub hashes: u32,
    /// Items the link is sized for.
    pub capacity: u64,
    /// Its error rate.
    pub error: f64,
}

impl Shape for ValkeyPlan {
    fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl ValkeyPlan {
    /// The link valkey-bloom builds for `capacity` items at `error` with probes counted by
    /// `rule`; `None` outside what a link can be.
    pub fn sized(capacity: u64, error: f64, rule: KRule) -> Option<Self> {
        let bytes = bitmap_bytes(capacity, error)?;
        let hashes = hashes_for(bytes * 8, capacity, rule);
        Self::checked(bytes, hashes, capacity, error)
    }

    /// A plan from stored fields, if they are in range.
    pub(crate) fn checked(bytes: u64, hashes: u32, capacity: u64, error: f64) -> Option<Self> {
        ((1..=MAX_LINK_BYTES).contains(&bytes)
            && (1..=MAX_HASHES).contains(&hashes)
            && capacity > 0
            && capacity <= i64::MAX as u64)
            .then_some(Self {
                bytes,
                hashes,
                capacity,
                error,
            })
    }
}

impl ValkeyLink {
    /// Probes per item.
    pub fn hashes(&self) -> u32 {
        self.hashes
    }
    /// Bits of the array.
    pub fn bits(&self) -> u64 {
        self.bytes * 8
    }
    /// The bit array as bytes, bit `o` in byte `o / 8` under mask `1 << (o % 8)` (1.0's
    /// order).
    pub fn lsb_bytes(&self) -> Vec<u8> {
        le_bytes(&self.words, 0, self.bytes as usize)
    }
    /// Whether bit `o` is set.
    fn get(&self, o: u64) -> bool {
        self.words[(o / 64) as usize] & (1 << (o % 64)) != 0
    }
    fn probes(&self, h: (u64, u64)) -> impl Iterator<Item = u64> + '_ {
        let bits = self.bits();
        (0..self.hashes).map(move |i| probe_index(h, i, bits))
    }
}

/// `BF.MERGE` of valkey-bloom filters: links of one size, probe count, capacity and error
/// rate (in chains of one seed, see [`Chain::same_shape`]) OR their bits.
impl MergeLink for ValkeyLink {
    fn same_shape(&self, other: &Self) -> bool {
        self.bytes == other.bytes
            && self.hashes == other.hashes
            && self.counts.capacity == other.counts.capacity
            && self.counts.error.to_bits() == other.counts.error.to_bits()
    }
    fn or_from(&mut self, other: &Self) {
        for (w, o) in self.words.iter_mut().zip(other.words.iter()) {
            *w |= o;
        }
    }
    /// From the set bits (the words past the last byte are never set).
    fn estimated_items(&self) -> u64 {
        let ones = self.words.iter().map(|w| u64::from(w.count_ones())).sum();
        estimate_items(self.bits(), self.hashes, ones)
    }
}

impl ChainLink for ValkeyLink {
    const LAYOUT: &'static str = "valkey";
    const TYPE_NAME: &'static str = "bloomfltr";
    /// The newest encoding (valkey-bloom 1.0's); what a server writes is its flavour's
    /// ([`ValkeyFlavour::encoding_version`]).
    const ENCODING_VERSION: i32 = 1;
    const HEADER_PREFIX: usize = format::HEADER_FIXED;
    const MAGIC: Option<&'static [u8]> = Some(format::MAGIC);
    type Settings = ValkeySettings;
    type Hash = (u64, u64);
    type Plan = ValkeyPlan;

    fn settings(nonscaling: bool) -> ValkeySettings {
        ValkeySettings::new(!nonscaling, 0.01)
    }
    fn new_settings(nonscaling: bool, error: f64) -> ValkeySettings {
        ValkeySettings::new(!nonscaling, error)
    }
    fn scales(settings: &ValkeySettings) -> bool {
        settings.scaling
    }
    fn hash(settings: &ValkeySettings, item: &[u8]) -> (u64, u64) {
        sip_hash_pair(&settings.seed, item)
    }
    /// valkey-bloom sizes its first link for the error rate itself (f32 in 0.1.0).
    fn first_error(error: f64, _: bool) -> f64 {
        match valkey_flavour() {
            ValkeyFlavour::V0_1 => f64::from(error as f32),
            ValkeyFlavour::V1_0 => error,
        }
    }
    /// `fp × tightening^(links so far)`; 0 (no link can be sized: the chain refuses to grow)
    /// past [`MAX_LINKS`].
    fn next_error(settings: &ValkeySettings, links: &[Self]) -> f64 {
        if links.len() as u64 >= MAX_LINKS {
            return 0.0;
        }
        settings.link_error(links.len())
    }

    fn tally() -> Option<&'static Tally> {
        Some(&METRICS)
    }

    fn plan(capacity: u64, error: f64) -> Option<ValkeyPlan> {
        ValkeyPlan::sized(capacity, error, valkey_flavour().k_rule())
    }
    fn allocate(plan: Admitted<ValkeyPlan>) -> Option<Self> {
        let plan = plan.into_shape();
        let len = usize::try_from(plan.bytes.div_ceil(8)).ok()?;
        let mut words = Vec::new();
        words.try_reserve_exact(len).ok()?;
        words.resize(len, 0u64);
        Some(Self {
            words: words.into_boxed_slice(),
            bytes: plan.bytes,
            hashes: plan.hashes,
            counts: LinkCounts {
                capacity: plan.capacity,
                error: plan.error,
                items: 0,
            },
        })
    }

    fn contains(&self, h: (u64, u64)) -> bool {
        self.probes(h).all(|o| self.get(o))
    }
    fn insert(&mut self, h: (u64, u64)) -> bool {
        let bits = self.bits();
        let mut changed = false;
        for i in 0..self.hashes {
            let o = probe_index(h, i, bits);
            let (word, mask) = ((o / 64) as usize, 1u64 << (o % 64));
            changed |= self.words[word] & mask == 0;
            self.words[word] |= mask;
        }
        changed
    }
    fn prefetch(&self, h: (u64, u64)) {
        for o in self.probes(h) {
            bloomgate::filters::prefetch(&self.words[(o / 64) as usize]);
        }
    }
    fn lines(&self) -> usize {
        self.hashes as usize
    }

    fn counts(&self) -> &LinkCounts {
        &self.counts
    }
    fn counts_mut(&mut self) -> &mut LinkCounts {
        &mut self.counts
    }
    fn bytes(&self) -> u64 {
        self.bytes
    }
    fn read_le_bytes(&self, offset: u64, len: u64) -> Vec<u8> {
        le_bytes(&self.words, offset as usize, len as usize)
    }
    fn write_le_bytes(&mut self, offset: u64, data: &[u8]) {
        patch_le_bytes(&mut self.words, offset as usize, data);
    }
    fn visit_le_bytes(&self, f: &mut dyn FnMut(&[u8])) {
        // The words' image may run past the array's last byte: cut it there.
        let mut left = self.bytes as usize;
        visit_le_words(std::iter::once(&self.words[..]), &mut |piece| {
            let take = piece.len().min(left);
            if take > 0 {
                f(&piece[..take]);
            }
            left -= take;
        });
    }
    fn heap_bytes(&self) -> u64 {
        crate::types::cow::allocation_size(self.words.len() as u64 * 8)
    }
    fn relocate(&mut self, walk: &mut Walk<'_>) {
        walk.boxed_slice(&mut self.words);
    }

    /// From the item count (the standard model), never a walk of the bits.
    fn health(&self) -> LinkHealth {
        let (m, k) = (self.bits() as f64, f64::from(self.hashes));
        let ones = m * -(-k * self.counts.items as f64 / m).exp_m1();
        LinkHealth {
            ones,
            bits: self.bits(),
            fpr: (ones / m).powf(k),
        }
    }

    fn debug_line(&self) -> String {
        format!(
            "bytes:{} bits:{} hashes:{} hashwidth:64 capacity:{} size:{} ratio:{} layout:valkey",
            self.bytes,
            self.bits(),
            self.hashes,
            self.counts.capacity,
            self.counts.items,
            format_g(self.counts.error)
        )
    }

    /// valkey-bloom's `BF.INFO Size`: 0.1.0 `32 + Σ (200 + bytes)`; 1.0 `48 + 8 × (the link
    /// vector's capacity) + Σ (208 + bytes)`.
    fn size_bytes(chain: &Chain<Self>) -> u64 {
        let links = chain.links();
        let bits: u64 = links.iter().map(|l| l.bytes).sum();
        let n = links.len() as u64;
        match valkey_flavour() {
            ValkeyFlavour::V0_1 => 32 + 200 * n + bits,
            ValkeyFlavour::V1_0 => {
                let vcap = if n <= 1 {
                    1
                } else {
                    n.next_power_of_two().max(4)
                };
                48 + 8 * vcap + 208 * n + bits
            }
        }
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
        format::rdb_save(chain, valkey_flavour(), out)
    }
    fn rdb_load(input: &mut impl RdbSource, encver: i32) -> Result<Chain<Self>, RdbError> {
        format::rdb_load(input, encver)
    }
}
