//! What the one scalable chain ([`Chain`]) asks of its link type: the link's bit test and bit
//! setting, its sizing, its share of the dump body, and its format — the dump header and RDB
//! encoding of a chain of such links, and the module type name they are saved under. A link
//! type is a policy: the chain's rule (add once, grow when the newest link is full, batched
//! and prefetched probes, SCANDUMP chunks that never cross a link) is written once, in
//! `chain.rs`, for every link type.
//!
//! A new link type is one file implementing [`ChainLink`] (its filter, its hash, its dump
//! header and RDB layout; the provided methods — the error rates of the first and the next
//! link — are RedisBloom's rule unless it overrides them), then its registration as a value: a
//! [`crate::Value`] variant and [`crate::value::Kind`] with its arm in
//! [`Kind::on_chain`](crate::value::Kind::on_chain), and its
//! [`ChainValue`](crate::value::ChainValue) impl.

use super::{Chain, ChainShape};
use crate::budget::{Admitted, Shape};
use crate::codec::rdb_io::{RdbError, RdbSink, RdbSource};
use bloomgate::relocate::Walk;

/// One fixed-size Bloom filter of a scalable chain, and the format of a chain of them.
pub trait ChainLink: Sized + Clone + std::fmt::Debug {
    /// The layout's name, as `BF.RESERVE … LAYOUT <name>` and `BF.INFO`'s `Layout` field name
    /// it.
    const LAYOUT: &'static str;
    /// The module type a chain of these links is saved as (9 characters).
    const TYPE_NAME: &'static str;
    /// The RDB encoding version written (readers accept this and older ones).
    const ENCODING_VERSION: i32;
    /// Bytes of a dump that [`ChainLink::header_len`] needs.
    const HEADER_PREFIX: usize;
    /// What this format's dump header starts with, so LOADCHUNK into a missing key knows which
    /// chain a header makes; `None` for RedisBloom's classic format, which has no such prefix
    /// (a header no other format claims is classic).
    const MAGIC: Option<&'static [u8]>;

    /// What a chain of these links keeps besides its links, item count and growth factor:
    /// whether it scales, and anything else its dump header records (the classic chain's option
    /// bits).
    type Settings: Copy + std::fmt::Debug + PartialEq;
    /// What an item's probes are computed from, once per item for every link.
    type Hash: Copy;
    /// A link sized but not yet allocated.
    type Plan: Shape + Copy + std::fmt::Debug + PartialEq;

    /// The settings of a chain `BF.RESERVE` creates (scaling unless `nonscaling`).
    fn settings(nonscaling: bool) -> Self::Settings;
    /// The settings of a chain created at `error` (by default [`ChainLink::settings`]: only a
    /// format that stores the object's error rate needs it).
    fn new_settings(nonscaling: bool, error: f64) -> Self::Settings {
        let _ = error;
        Self::settings(nonscaling)
    }
    /// Whether a chain with these settings grows when its newest link is full.
    fn scales(settings: &Self::Settings) -> bool;
    /// The hash of `item` in a chain with these settings.
    fn hash(settings: &Self::Settings, item: &[u8]) -> Self::Hash;
    /// The error rate of the first link of a chain created at `error`: by default half of it
    /// when the chain scales (room for the links it may grow by, each at half the rate of the
    /// one before: Σ e/2^(i+1) < e), all of it when it never grows.
    fn first_error(error: f64, nonscaling: bool) -> f64 {
        if nonscaling {
            error
        } else {
            error * 0.5
        }
    }
    /// The error rate of the link a chain of `links` (at least one) grows by: by default half
    /// the newest link's.
    fn next_error(settings: &Self::Settings, links: &[Self]) -> f64 {
        let _ = settings;
        links.last().map_or(0.0, |newest| newest.error() * 0.5)
    }

    /// A link for `capacity` items at `error`; `None` if no link of a supported size meets it.
    fn plan(capacity: u64, error: f64) -> Option<Self::Plan>;
    /// Allocates an admitted plan, holding no items; `None` if the allocator refuses.
    fn allocate(plan: Admitted<Self::Plan>) -> Option<Self>;

    /// Whether every probe bit of `h` is set.
    fn contains(&self, h: Self::Hash) -> bool;
    /// Sets every probe bit of `h`; true if at least one was clear.
    fn insert(&mut self, h: Self::Hash) -> bool;
    /// Requests the cache lines [`ChainLink::contains`] and [`ChainLink::insert`] of `h` read,
    /// before they are needed (the chain calls it only on links too big for the CPU's caches).
    fn prefetch(&self, h: Self::Hash);
    /// Cache lines one item's probes touch: batched adds prefetch that many lines per item
    /// ahead.
    fn lines(&self) -> usize;
    /// Keeps in `pending` (indices into `hashes`) the items this link reports present: the
    /// batched read, which a link may answer in prefetched stages.
    fn retain_present(&self, hashes: &[Self::Hash], pending: &mut Vec<u32>) {
        pending.retain(|&j| self.contains(hashes[j as usize]));
    }

    /// What the chain's rule reads and counts of the link.
    fn counts(&self) -> &LinkCounts;
    /// Mutable [`ChainLink::counts`].
    fn counts_mut(&mut self) -> &mut LinkCounts;
    /// Items the link was sized for.
    fn capacity(&self) -> u64 {
        self.counts().capacity
    }
    /// The link's error rate.
    fn error(&self) -> f64 {
        self.counts().error
    }
    /// Items this link newly took.
    fn items(&self) -> u64 {
        self.counts().items
    }
    /// Sets the link's item count (a loaded header's, a merge's estimate, one more item).
    fn set_items(&mut self, items: u64) {
        self.counts_mut().items = items;
    }
    /// Bytes of the link's bit array (its part of the dump body).
    fn bytes(&self) -> u64;
    /// `len` bytes of the array's little-endian image from byte `offset` (inside the array).
    fn read_le_bytes(&self, offset: u64, len: u64) -> Vec<u8>;
    /// Overwrites the little-endian image at byte `offset` with `data` (inside the array).
    fn write_le_bytes(&mut self, offset: u64, data: &[u8]);
    /// The whole little-endian image, handed to `f` in pieces (a snapshot's dump body, without
    /// a chunk-sized buffer).
    fn visit_le_bytes(&self, f: &mut dyn FnMut(&[u8]));
    /// Heap bytes the link holds, in allocator size classes.
    fn heap_bytes(&self) -> u64;
    /// Offers the link's allocations to a host that moves them (see [`bloomgate::relocate`]).
    fn relocate(&mut self, walk: &mut Walk<'_>);
    /// Set bits, bits and false-positive rate, in O(1) (a metrics scrape reads every filter).
    fn health(&self) -> LinkHealth;
    /// The link's `BF.DEBUG` line.
    fn debug_line(&self) -> String;

    /// The process-wide sums over live chains of this link type, if it keeps them (by
    /// default none).
    fn tally() -> Option<&'static super::Tally> {
        None
    }

    /// `BF.INFO Size` of `chain`: by default RedisBloom's, `32 + 64 × links + Σ link bytes`.
    fn size_bytes(chain: &Chain<Self>) -> u64 {
        32 + chain.links().iter().map(|l| 64 + l.bytes()).sum::<u64>()
    }

    /// The SCANDUMP header of `chain` (iterator 0).
    fn dump_header(chain: &Chain<Self>) -> Vec<u8>;
    /// Length of the dump header that starts `prefix` (at least [`ChainLink::HEADER_PREFIX`]
    /// bytes), if it is well formed.
    fn header_len(prefix: &[u8]) -> Option<usize>;
    /// A dump header's validated shape, nothing allocated (`ERR received bad data` if any
    /// field is refused).
    fn parse_header(header: &[u8]) -> Result<ChainShape<Self>, &'static str>;
    /// Writes `chain` in this format's RDB field order.
    fn rdb_save(chain: &Chain<Self>, out: &mut impl RdbSink);
    /// Reads a chain saved with encoding version `encver`: every field validated and the shape
    /// admitted against the source's allowance before anything is allocated.
    fn rdb_load(input: &mut impl RdbSource, encver: i32) -> Result<Chain<Self>, RdbError>;
}

/// What the chain's rule reads of a link: its capacity and error rate (from its plan) and the
/// items it newly took (kept by the chain, or read from a dump header).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkCounts {
    /// Items the link was sized for (RedisBloom's `entries`).
    pub capacity: u64,
    /// The link's error rate.
    pub error: f64,
    /// Items this link newly took (RedisBloom's per-link `size`).
    pub items: u64,
}

/// One link's health, as [`ChainLink::health`] reports it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkHealth {
    /// Bits set (counted, or the model's expectation for the link's items).
    pub ones: f64,
    /// Bits of the array.
    pub bits: u64,
    /// The probability that an absent item passes this link.
    pub fpr: f64,
}

/// A link whose chains `BF.MERGE` can union: chains of one shape OR their bits.
pub trait MergeLink: ChainLink {
    /// Whether `other`'s bits mean what this link's do (same size, probes, sizing).
    fn same_shape(&self, other: &Self) -> bool;
    /// `self |= other` (same shape).
    fn or_from(&mut self, other: &Self);
    /// The item count the set bits imply.
    fn estimated_items(&self) -> u64;
}
