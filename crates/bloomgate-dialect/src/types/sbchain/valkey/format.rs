//! The formats of a valkey chain: valkey-bloom's RDB encodings 0 (0.1.0) and 1 (1.0), 1.0's
//! `BF.LOAD` payload, and our SCANDUMP header (valkey-bloom has no SCANDUMP).
//!
//! Encoding 0: `unsigned N, unsigned expansion (0 = non-scaling), float fp`, then per link
//! `string bitmap (most significant bit first), unsigned bits, unsigned hashes, unsigned
//! capacity`, then `unsigned items of the last link` (the others are full). No seed: every
//! 0.1.0 filter uses [`FIXED_SEED`]. Our extension, for an object with another seed (made by
//! 1.0) saved by a 0.1.0-flavoured server: bit 32 of the expansion field set, and the 32-byte
//! seed as a string after the error rate — valkey-bloom 0.1.0 cannot hold such an object, and
//! fails to load it rather than answering false negatives.
//!
//! Encoding 1: `unsigned N, unsigned expansion, double fp, double tightening, unsigned
//! is-seed-random`, then per link `string filter, unsigned capacity`, then `unsigned items of
//! the last link`; a filter is `u8 1, u64 bytes L, u32 hashes, [u8; 32] seed`, then L bytes,
//! least significant bit first (the `bloomfilter` 3.x serialization).
//!
//! `BF.LOAD` payload: `u8 1`, then (bincode 1.x: little endian, fixed-width integers, `u64`
//! lengths) `u32 expansion, f64 fp, f64 tightening, bool is-seed-random, u64 N`, then per link
//! `u64 length + filter (as in encoding 1), i64 items, i64 capacity`.
//!
//! SCANDUMP header (ours): magic `VKBF`, `u8 1`, `u8 flags` (bit 0 non-scaling, bit 1 random
//! seed), `u16 0`, `u64 items`, `u32 growth`, `u32 links`, `f64 fp`, `f64 tightening`, the
//! 32-byte seed, then per link `u64 capacity, f64 error, u64 items, u64 bytes, u32 hashes`;
//! the body is the links' bits, least significant bit first.
//!
//! Every loader validates each field and admits the whole shape against its allowance before
//! the links are allocated; nothing here panics on any input.

use super::{
    ValkeyFlavour, ValkeyLink, ValkeyPlan, ValkeySettings, DEFAULT_TIGHTENING, FIXED_SEED,
    MAX_LINKS, MAX_LINK_BYTES,
};
use crate::budget::{Allowance, OverBudget};
use crate::codec::rdb_io::{RdbError, RdbSink, RdbSource};
use crate::types::sbchain::link::{ChainLink, LinkCounts};
use crate::types::sbchain::{Chain, ChainShape, ERR_BAD_DATA};

/// Our SCANDUMP header's first bytes.
pub const MAGIC: &[u8] = b"VKBF";
const DUMP_VERSION: u8 = 1;
const FLAG_NONSCALING: u8 = 1;
const FLAG_SEED_RANDOM: u8 = 2;
/// Magic, version, flags, reserved, items, growth, links.
pub const HEADER_FIXED: usize = 4 + 1 + 1 + 2 + 8 + 4 + 4;
/// fp, tightening, seed.
const HEADER_OBJECT: usize = 8 + 8 + 32;
const HEADER_LINK: usize = 8 + 8 + 8 + 8 + 4;
/// The `bloomfilter` 3.x serialization's header: version, bytes, hashes, seed.
const FILTER_HEADER: usize = 1 + 8 + 4 + 32;
const FILTER_VERSION: u8 = 1;
/// Encoding 0's expansion field: a seed string follows the error rate (our extension).
const SEED_FOLLOWS: u64 = 1 << 32;
/// The `BF.LOAD` payload's object version.
const OBJECT_VERSION: u8 = 1;

/// One link as a format describes it, its bits in 1.0's order (least significant bit first).
struct LinkIn {
    plan: ValkeyPlan,
    items: u64,
    lsb: Vec<u8>,
}

/// Why a stored object was refused.
#[derive(Debug)]
enum Refusal {
    Invalid(&'static str),
    OverBudget(OverBudget),
}

/// Checks the object's fields and sizes them into a shape: `ERR_BAD_DATA` if the shape does
/// not hold together.
fn shape_of(
    links: impl Iterator<Item = (ValkeyPlan, u64)>,
    growth: u32,
    settings: ValkeySettings,
) -> Result<ChainShape<ValkeyLink>, &'static str> {
    let in_range = |x: f64| x > 0.0 && x < 1.0;
    if !in_range(settings.fp) || !in_range(settings.tightening) {
        return Err(ERR_BAD_DATA);
    }
    let mut total = 0u64;
    let mut counted = Vec::new();
    for (plan, items) in links {
        if items > plan.capacity {
            return Err(ERR_BAD_DATA);
        }
        total = total.checked_add(items).ok_or(ERR_BAD_DATA)?;
        let counts = LinkCounts {
            capacity: plan.capacity,
            error: plan.error,
            items,
        };
        counted.push((plan, counts));
    }
    if counted.is_empty() || counted.len() as u64 > MAX_LINKS {
        return Err(ERR_BAD_DATA);
    }
    ChainShape::new(counted, total, growth, settings)
}

/// Builds a chain from validated links: shaped, admitted against `allowance`, allocated, bits
/// written.
fn build(
    links: Vec<LinkIn>,
    expansion: u32,
    settings: ValkeySettings,
    allowance: &mut Allowance,
) -> Result<Chain<ValkeyLink>, Refusal> {
    let shape = shape_of(links.iter().map(|l| (l.plan, l.items)), expansion, settings)
        .map_err(Refusal::Invalid)?;
    let shape = allowance.admit(shape).map_err(Refusal::OverBudget)?;
    let mut chain = Chain::from_shape(shape).map_err(Refusal::Invalid)?;
    let mut at = 0u64;
    for link in &links {
        let len = link.lsb.len() as u64;
        chain
            .load_chunk((at + len) as i64 + 1, &link.lsb)
            .map_err(Refusal::Invalid)?;
        at += len;
    }
    Ok(chain)
}

fn rdb_refusal(r: Refusal) -> RdbError {
    match r {
        Refusal::Invalid(why) => RdbError::invalid(why),
        Refusal::OverBudget(o) => RdbError::OverBudget(o),
    }
}

/// The error rate a loaded link `i` was sized for (formats store its bits, not its rate):
/// `fp × tightening^i`, kept above 0 (a rate that underflowed stays a valid rate in our dump
/// header).
fn stored_error(fp: f64, tightening: f64, i: usize) -> f64 {
    (fp * tightening.powi(i as i32)).max(f64::MIN_POSITIVE)
}

/// Reverses the bit order inside each byte (0.1.0's order ↔ 1.0's).
fn flip_bytes(bytes: &mut [u8]) {
    for b in bytes {
        *b = b.reverse_bits();
    }
}

/// The object's links with their items: every link but the last is full.
fn with_items(plans: Vec<(ValkeyPlan, Vec<u8>)>, last_items: u64) -> Vec<LinkIn> {
    let n = plans.len();
    plans
        .into_iter()
        .enumerate()
        .map(|(i, (plan, lsb))| LinkIn {
            items: if i + 1 == n {
                last_items
            } else {
                plan.capacity
            },
            plan,
            lsb,
        })
        .collect()
}

fn link_count(n: u64) -> Result<usize, RdbError> {
    if (1..=MAX_LINKS).contains(&n) {
        Ok(n as usize)
    } else {
        Err(RdbError::invalid("filter count out of range"))
    }
}

fn expansion_of(e: u64) -> Result<u32, RdbError> {
    u32::try_from(e).map_err(|_| RdbError::invalid("expansion out of range"))
}

/// A `bloomfilter` 3.x serialized filter: `(bytes, hashes, seed, bits)`; `None` if malformed.
fn parse_filter(blob: &[u8]) -> Option<(u64, u32, [u8; 32], &[u8])> {
    if blob.len() < FILTER_HEADER || blob[0] != FILTER_VERSION {
        return None;
    }
    let bytes = u64::from_le_bytes(blob[1..9].try_into().ok()?);
    let hashes = u32::from_le_bytes(blob[9..13].try_into().ok()?);
    let seed: [u8; 32] = blob[13..45].try_into().ok()?;
    let bits = &blob[FILTER_HEADER..];
    (bits.len() as u64 == bytes).then_some((bytes, hashes, seed, bits))
}

/// A link serialized as `bloomfilter` 3.x does.
fn filter_blob(link: &ValkeyLink, seed: &[u8; 32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FILTER_HEADER + link.bytes() as usize);
    out.push(FILTER_VERSION);
    out.extend_from_slice(&link.bytes().to_le_bytes());
    out.extend_from_slice(&link.hashes().to_le_bytes());
    out.extend_from_slice(seed);
    link.visit_le_bytes(&mut |b| out.extend_from_slice(b));
    out
}

/// The expansion a format stores: the growth factor, 0 for a non-scaling object.
fn expansion(chain: &Chain<ValkeyLink>) -> u32 {
    if chain.is_scaling() {
        chain.growth()
    } else {
        0
    }
}

fn last_items(chain: &Chain<ValkeyLink>) -> u64 {
    chain.links().last().map_or(0, |l| l.items())
}

/// Writes `chain` in the encoding of `flavour`. Encoding 0 has no seed: an object whose seed
/// is not [`FIXED_SEED`] carries it in our extension (see the module's notes).
pub(super) fn rdb_save(chain: &Chain<ValkeyLink>, flavour: ValkeyFlavour, out: &mut impl RdbSink) {
    let settings = chain.settings();
    out.save_unsigned(chain.links().len() as u64);
    let own_seed = settings.seed != FIXED_SEED && flavour == ValkeyFlavour::V0_1;
    out.save_unsigned(u64::from(expansion(chain)) | if own_seed { SEED_FOLLOWS } else { 0 });
    match flavour {
        ValkeyFlavour::V0_1 => {
            out.save_float(settings.fp as f32);
            if own_seed {
                out.save_string(&settings.seed);
            }
            for link in chain.links() {
                let mut bits = link.lsb_bytes();
                flip_bytes(&mut bits);
                out.save_string(&bits);
                out.save_unsigned(link.bits());
                out.save_unsigned(u64::from(link.hashes()));
                out.save_unsigned(link.capacity());
            }
        }
        ValkeyFlavour::V1_0 => {
            out.save_double(settings.fp);
            out.save_double(settings.tightening);
            out.save_unsigned(u64::from(settings.seed_random));
            for link in chain.links() {
                out.save_string(&filter_blob(link, &settings.seed));
                out.save_unsigned(link.capacity());
            }
        }
    }
    out.save_unsigned(last_items(chain));
}

/// Reads a `bloomfltr` value of encoding 0 or 1.
pub(super) fn rdb_load(
    input: &mut impl RdbSource,
    encver: i32,
) -> Result<Chain<ValkeyLink>, RdbError> {
    if !(0..=ValkeyLink::ENCODING_VERSION).contains(&encver) {
        return Err(RdbError::UnknownEncoding(encver));
    }
    let n = link_count(input.load_unsigned()?)?;
    let stored = input.load_unsigned()?;
    let own_seed = encver == 0 && stored & SEED_FOLLOWS != 0;
    let expansion = expansion_of(if own_seed {
        stored & !SEED_FOLLOWS
    } else {
        stored
    })?;
    let (settings, plans) = match encver {
        0 => {
            let fp = f64::from(input.load_float()?);
            let seed = if own_seed {
                input
                    .load_string(32)?
                    .try_into()
                    .map_err(|_| RdbError::invalid("seed of the wrong length"))?
            } else {
                FIXED_SEED
            };
            let settings = ValkeySettings {
                scaling: expansion > 0,
                fp,
                tightening: DEFAULT_TIGHTENING,
                seed,
                seed_random: own_seed,
            };
            let mut plans = Vec::with_capacity(n.min(64));
            for i in 0..n {
                // A source charges what it reads to its allowance (or Redis has read it).
                let mut bits = input.load_string(MAX_LINK_BYTES)?;
                let (m, k, capacity) = (
                    input.load_unsigned()?,
                    input.load_unsigned()?,
                    input.load_unsigned()?,
                );
                if m != bits.len() as u64 * 8 {
                    return Err(RdbError::invalid("bit count does not match the bitmap"));
                }
                let plan = u32::try_from(k)
                    .ok()
                    .and_then(|k| {
                        ValkeyPlan::checked(
                            bits.len() as u64,
                            k,
                            capacity,
                            stored_error(fp, DEFAULT_TIGHTENING, i),
                        )
                    })
                    .ok_or_else(|| RdbError::invalid("filter fields out of range"))?;
                flip_bytes(&mut bits);
                plans.push((plan, bits));
            }
            (settings, plans)
        }
        1 => {
            let fp = input.load_double()?;
            let tightening = input.load_double()?;
            let seed_random = match input.load_unsigned()? {
                0 => false,
                1 => true,
                _ => return Err(RdbError::invalid("is-seed-random out of range")),
            };
            let mut seed = None;
            let mut plans = Vec::with_capacity(n.min(64));
            for i in 0..n {
                let blob = input.load_string(MAX_LINK_BYTES + FILTER_HEADER as u64)?;
                let capacity = input.load_unsigned()?;
                let (bytes, k, link_seed, bits) =
                    parse_filter(&blob).ok_or_else(|| RdbError::invalid("malformed filter"))?;
                if *seed.get_or_insert(link_seed) != link_seed {
                    return Err(RdbError::invalid("filters of one object with two seeds"));
                }
                let error = stored_error(fp, tightening, i);
                let plan = ValkeyPlan::checked(bytes, k, capacity, error)
                    .ok_or_else(|| RdbError::invalid("filter fields out of range"))?;
                plans.push((plan, bits.to_vec()));
            }
            let settings = ValkeySettings::loaded(expansion > 0, fp, tightening, seed, seed_random);
            (settings, plans)
        }
        other => return Err(RdbError::UnknownEncoding(other)),
    };
    let last = input.load_unsigned()?;
    let links = with_items(plans, last);
    build(links, expansion, settings, input.allowance()).map_err(rdb_refusal)
}

/// Why a `BF.LOAD` payload was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadPayloadError {
    /// Malformed: `ERR bloom object decoding failed`.
    Decoding,
    /// An object version other than 1: `ERR bloom object decoding failed. Unsupported version`.
    UnsupportedVersion,
    /// Valid, but larger than the allowance.
    OverBudget(OverBudget),
}

impl LoadPayloadError {
    /// valkey-bloom 1.0's error text (the budget's for [`LoadPayloadError::OverBudget`]).
    pub fn message(self) -> &'static str {
        match self {
            LoadPayloadError::Decoding => "ERR bloom object decoding failed",
            LoadPayloadError::UnsupportedVersion => {
                "ERR bloom object decoding failed. Unsupported version"
            }
            LoadPayloadError::OverBudget(o) => match o.limit {
                crate::budget::Limit::Memory => crate::ERR_OOM,
                crate::budget::Limit::KeyCap => crate::ERR_CAP,
            },
        }
    }
}

/// valkey-bloom 1.0's `BF.LOAD` data for `chain` (what its AOF rewrite writes).
pub fn encode_load_payload(chain: &Chain<ValkeyLink>) -> Vec<u8> {
    let settings = chain.settings();
    let mut out = vec![OBJECT_VERSION];
    out.extend_from_slice(&expansion(chain).to_le_bytes());
    out.extend_from_slice(&settings.fp.to_le_bytes());
    out.extend_from_slice(&settings.tightening.to_le_bytes());
    out.push(u8::from(settings.seed_random));
    out.extend_from_slice(&(chain.links().len() as u64).to_le_bytes());
    for link in chain.links() {
        let blob = filter_blob(link, &settings.seed);
        out.extend_from_slice(&(blob.len() as u64).to_le_bytes());
        out.extend_from_slice(&blob);
        out.extend_from_slice(&(link.items() as i64).to_le_bytes());
        out.extend_from_slice(&(link.capacity() as i64).to_le_bytes());
    }
    out
}

/// A reader over untrusted bytes: every read checks what is left.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: u64) -> Result<&'a [u8], LoadPayloadError> {
        let n = usize::try_from(n).map_err(|_| LoadPayloadError::Decoding)?;
        if n > self.0.len() {
            return Err(LoadPayloadError::Decoding);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], LoadPayloadError> {
        self.take(N as u64)?
            .try_into()
            .map_err(|_| LoadPayloadError::Decoding)
    }
    fn u64(&mut self) -> Result<u64, LoadPayloadError> {
        self.array().map(u64::from_le_bytes)
    }
    fn f64(&mut self) -> Result<f64, LoadPayloadError> {
        self.array().map(f64::from_le_bytes)
    }
}

/// Decodes a `BF.LOAD` payload into a chain: every field validated, the shape admitted against
/// `allowance` before anything is allocated (the payload's own length bounds every read).
pub fn decode_load_payload(
    data: &[u8],
    allowance: &mut Allowance,
) -> Result<Chain<ValkeyLink>, LoadPayloadError> {
    use LoadPayloadError::Decoding;
    let mut c = Cursor(data);
    if c.array::<1>()?[0] != OBJECT_VERSION {
        return Err(LoadPayloadError::UnsupportedVersion);
    }
    let expansion = u32::from_le_bytes(c.array()?);
    let fp = c.f64()?;
    let tightening = c.f64()?;
    let seed_random = match c.array::<1>()?[0] {
        0 => false,
        1 => true,
        _ => return Err(Decoding),
    };
    let n = c.u64()?;
    if n == 0 || n > MAX_LINKS {
        return Err(Decoding);
    }
    let mut seed = None;
    let mut links = Vec::new();
    for i in 0..n as usize {
        let len = c.u64()?;
        let (bytes, k, link_seed, bits) = parse_filter(c.take(len)?).ok_or(Decoding)?;
        let items = u64::try_from(i64::from_le_bytes(c.array()?)).map_err(|_| Decoding)?;
        let capacity = u64::try_from(i64::from_le_bytes(c.array()?)).map_err(|_| Decoding)?;
        if *seed.get_or_insert(link_seed) != link_seed {
            return Err(Decoding);
        }
        let error = stored_error(fp, tightening, i);
        let plan = ValkeyPlan::checked(bytes, k, capacity, error).ok_or(Decoding)?;
        links.push(LinkIn {
            plan,
            items,
            lsb: bits.to_vec(),
        });
    }
    if !c.0.is_empty() {
        return Err(Decoding);
    }
    let settings = ValkeySettings::loaded(expansion > 0, fp, tightening, seed, seed_random);
    build(links, expansion, settings, allowance).map_err(|r| match r {
        Refusal::Invalid(_) => Decoding,
        Refusal::OverBudget(o) => LoadPayloadError::OverBudget(o),
    })
}

/// Our SCANDUMP header of `chain`.
pub(super) fn dump_header(chain: &Chain<ValkeyLink>) -> Vec<u8> {
    let settings = chain.settings();
    let links = chain.links();
    let mut out = Vec::with_capacity(HEADER_FIXED + HEADER_OBJECT + HEADER_LINK * links.len());
    out.extend_from_slice(MAGIC);
    out.push(DUMP_VERSION);
    let mut flags = 0;
    if !settings.scaling {
        flags |= FLAG_NONSCALING;
    }
    if settings.seed_random {
        flags |= FLAG_SEED_RANDOM;
    }
    out.push(flags);
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&chain.items().to_le_bytes());
    out.extend_from_slice(&chain.growth().to_le_bytes());
    out.extend_from_slice(&(links.len() as u32).to_le_bytes());
    out.extend_from_slice(&settings.fp.to_le_bytes());
    out.extend_from_slice(&settings.tightening.to_le_bytes());
    out.extend_from_slice(&settings.seed);
    for link in links {
        out.extend_from_slice(&link.capacity().to_le_bytes());
        out.extend_from_slice(&link.error().to_le_bytes());
        out.extend_from_slice(&link.items().to_le_bytes());
        out.extend_from_slice(&link.bytes().to_le_bytes());
        out.extend_from_slice(&link.hashes().to_le_bytes());
    }
    out
}

/// Length of the header that starts `prefix`.
pub(super) fn header_len(prefix: &[u8]) -> Option<usize> {
    let links = u32::from_le_bytes(prefix.get(20..24)?.try_into().ok()?) as usize;
    links
        .checked_mul(HEADER_LINK)?
        .checked_add(HEADER_FIXED + HEADER_OBJECT)
}

/// Refused with `ERR received bad data`: a wrong magic, version, flag or length; no link or
/// more than [`MAX_LINKS`]; an error rate or tightening outside (0, 1); a link whose capacity,
/// bytes or probes are out of range, or whose items exceed its capacity.
pub(super) fn parse_header(header: &[u8]) -> Result<ChainShape<ValkeyLink>, &'static str> {
    let bad = ERR_BAD_DATA;
    if header.len() < HEADER_FIXED + HEADER_OBJECT || &header[..4] != MAGIC {
        return Err(bad);
    }
    let u64_at = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8"));
    let f64_at = |at: usize| f64::from_bits(u64_at(at));
    let u32_at = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4"));
    let (version, flags) = (header[4], header[5]);
    let items = u64_at(8);
    let growth = u32_at(16);
    let count = u32_at(20) as u64;
    if version != DUMP_VERSION
        || flags & !(FLAG_NONSCALING | FLAG_SEED_RANDOM) != 0
        || header[6..8] != [0, 0]
        || !(1..=MAX_LINKS).contains(&count)
        || header.len() as u64 != (HEADER_FIXED + HEADER_OBJECT) as u64 + HEADER_LINK as u64 * count
    {
        return Err(bad);
    }
    let settings = ValkeySettings {
        scaling: flags & FLAG_NONSCALING == 0,
        fp: f64_at(24),
        tightening: f64_at(32),
        seed: header[40..72].try_into().expect("32"),
        seed_random: flags & FLAG_SEED_RANDOM != 0,
    };
    let mut links = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        let at = HEADER_FIXED + HEADER_OBJECT + HEADER_LINK * i;
        let error = f64_at(at + 8);
        if !(error > 0.0 && error < 1.0) {
            return Err(bad);
        }
        let plan =
            ValkeyPlan::checked(u64_at(at + 24), u32_at(at + 32), u64_at(at), error).ok_or(bad)?;
        links.push((plan, u64_at(at + 16)));
    }
    let sum = links
        .iter()
        .try_fold(0u64, |sum, (_, n)| sum.checked_add(*n))
        .ok_or(bad)?;
    if sum != items {
        return Err(bad);
    }
    shape_of(links.into_iter(), growth, settings)
}
