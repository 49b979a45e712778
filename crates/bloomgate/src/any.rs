//! A filter whose kind is known only at run time — what a tool gets when it opens a file.
//!
//! The CLI (`query`, `info`, `remove`) and servers that load user-supplied files work with
//! [`AnyFilter`]; code that knows its kind uses the concrete types directly.

use std::io::{Read, Write};

use crate::codec::{self, decode_whole, FilterCodec, FilterKind};
use crate::error::{Error, Result};
use crate::filters::{
    BitLayout, BlockedBloomFilter, Bloom, BloomFilter, CountingBloomFilter, CuckooFilter,
    FastLocalBloomFilter, ScalableBloomFilter, WindowedBloomFilter,
};
use crate::params::Params;

/// One of the library's filter types, chosen by the file it was read from.
#[derive(Debug)]
pub enum AnyFilter {
    /// A classic Bloom filter.
    Classic(BloomFilter),
    /// A cache-line blocked Bloom filter.
    Blocked(BlockedBloomFilter),
    /// A counting Bloom filter (4-bit counters).
    Counting(CountingBloomFilter),
    /// A scalable Bloom filter (a chain of growing classic links).
    Scalable(ScalableBloomFilter),
    /// A cuckoo filter.
    Cuckoo(CuckooFilter),
    /// A time-windowed Bloom filter (generations of aligned time slots).
    Windowed(WindowedBloomFilter),
    /// A FastLocal blocked Bloom filter (probes anywhere in one cache line).
    FastLocal(FastLocalBloomFilter),
}

/// A value in [`AnyFilter::info`].
#[derive(Clone, Debug, PartialEq)]
pub enum InfoValue {
    /// A count or size.
    Int(u64),
    /// A rate, ratio or estimate.
    Float(f64),
    /// A name.
    Text(String),
}

/// Applies the same expression to whichever filter the enum holds.
macro_rules! each {
    ($any:expr, $f:ident => $body:expr) => {
        match $any {
            AnyFilter::Classic($f) => $body,
            AnyFilter::Blocked($f) => $body,
            AnyFilter::Counting($f) => $body,
            AnyFilter::Scalable($f) => $body,
            AnyFilter::Cuckoo($f) => $body,
            AnyFilter::Windowed($f) => $body,
            AnyFilter::FastLocal($f) => $body,
        }
    };
}

impl AnyFilter {
    /// Parses a complete file image of any kind.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (header, body) = codec::split_verified(bytes)?;
        let seed = header.seed;
        Ok(match header.kind {
            FilterKind::Classic => Self::Classic(decode_whole(body, seed)?),
            FilterKind::Blocked => Self::Blocked(decode_whole(body, seed)?),
            FilterKind::Counting => Self::Counting(decode_whole(body, seed)?),
            FilterKind::Scalable => Self::Scalable(decode_whole(body, seed)?),
            FilterKind::Cuckoo => Self::Cuckoo(decode_whole(body, seed)?),
            FilterKind::Windowed => Self::Windowed(decode_whole(body, seed)?),
            FilterKind::FastLocal => Self::FastLocal(decode_whole(body, seed)?),
        })
    }

    /// Reads a file image of any kind; the buffer grows only as bytes arrive.
    pub fn read_from<R: Read>(reader: R) -> Result<Self> {
        Self::from_bytes(&codec::read_image(reader)?)
    }

    /// The complete file image.
    pub fn to_bytes(&self) -> Vec<u8> {
        each!(self, f => f.to_bytes())
    }

    /// Writes the file image to `writer`.
    pub fn write_to<W: Write>(&self, writer: W) -> std::io::Result<()> {
        each!(self, f => f.write_to(writer))
    }

    /// Which kind of filter this is (the file header's kind id).
    pub fn kind(&self) -> FilterKind {
        match self {
            Self::Classic(_) => FilterKind::Classic,
            Self::Blocked(_) => FilterKind::Blocked,
            Self::Counting(_) => FilterKind::Counting,
            Self::Scalable(_) => FilterKind::Scalable,
            Self::Cuckoo(_) => FilterKind::Cuckoo,
            Self::Windowed(_) => FilterKind::Windowed,
            Self::FastLocal(_) => FilterKind::FastLocal,
        }
    }

    /// "Maybe present" (true) or "definitely absent" (false).
    pub fn contains(&self, key: impl AsRef<[u8]>) -> bool {
        let key = key.as_ref();
        each!(self, f => f.contains(key))
    }

    /// Removes one occurrence of `key` from a counting or cuckoo filter. A key that is
    /// definitely absent is refused with [`Error::NotPresent`] and nothing changes; other kinds
    /// cannot forget keys ([`Error::Unsupported`]).
    pub fn remove(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        match self {
            Self::Counting(f) => f.remove(key),
            Self::Cuckoo(f) => f.remove(key),
            other => Err(Error::Unsupported(format!(
                "a {} filter cannot remove keys (use a counting or cuckoo filter)",
                other.kind().name()
            ))),
        }
    }

    /// Number of items the filter counts as inserted.
    pub fn len(&self) -> u64 {
        each!(self, f => f.len())
    }

    /// Whether the filter counts no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of filter storage.
    pub fn memory_bytes(&self) -> usize {
        each!(self, f => f.memory_bytes())
    }

    /// False-positive rate the filter is expected to have now, from its actual state.
    pub fn estimated_fpr(&self) -> f64 {
        each!(self, f => f.estimated_fpr())
    }

    /// Describes the filter: `kind, bits, hashes, items, bytes, fill_ratio, estimated_items,
    /// estimated_fpr` where they apply, then kind-specific fields.
    pub fn info(&self) -> Vec<(&'static str, InfoValue)> {
        use InfoValue::{Float, Int, Text};
        let mut out = vec![("kind", Text(self.kind().name().to_string()))];
        match self {
            Self::Classic(f) => out.extend(bit_filter_info(f)),
            Self::Blocked(f) => out.extend(bit_filter_info(f)),
            Self::FastLocal(f) => out.extend(bit_filter_info(f)),
            Self::Counting(f) => {
                let p = f.params();
                out.extend(params_info(p));
                out.extend([
                    ("counter_bits", Int(4)),
                    ("saturated_counters", Int(f.saturated_counters())),
                    (
                        "fill_ratio",
                        Float(f.nonzero_counters() as f64 / p.bits as f64),
                    ),
                ]);
            }
            Self::Scalable(f) => {
                out.extend([
                    ("links", Int(f.links() as u64)),
                    ("initial_capacity", Int(f.initial_capacity())),
                    ("capacity", Int(f.capacity())),
                    ("growth", Int(f.growth().into())),
                    ("tightening", Float(f.tightening())),
                    ("target_fpr", Float(f.target_fpr())),
                    ("fpr_bound", Float(f.fpr_bound())),
                ]);
            }
            Self::Cuckoo(f) => {
                out.extend([
                    ("buckets", Int(f.buckets())),
                    ("fingerprint_bits", Int(f.fingerprint_bits().into())),
                    ("capacity", Int(f.capacity())),
                    ("load_factor", Float(f.load_factor())),
                ]);
            }
            Self::Windowed(f) => {
                let config = f.config();
                out.extend([
                    ("generations", Int(f.generations() as u64)),
                    ("items_per_generation", Int(config.items_per_generation)),
                    ("newest_items", Int(f.newest_len())),
                    ("target_fpr", Float(config.fpr)),
                ]);
                if let Some(window) = config.generation_window_ms {
                    out.push(("generation_window_ms", Int(window)));
                }
            }
        }
        out.extend([
            ("items", Int(self.len())),
            ("bytes", Int(self.memory_bytes() as u64)),
            ("estimated_fpr", Float(self.estimated_fpr())),
            ("seed", Int(each!(self, f => f.seed()))),
        ]);
        out
    }
}

/// `bits, hashes, capacity, fill_ratio, estimated_items` of a bit filter of any layout.
fn bit_filter_info<L: BitLayout>(f: &Bloom<L>) -> impl Iterator<Item = (&'static str, InfoValue)> {
    params_info(f.params()).into_iter().chain([
        ("fill_ratio", InfoValue::Float(f.fill_ratio())),
        ("estimated_items", InfoValue::Float(f.estimated_len())),
    ])
}

/// `bits, hashes, capacity` of a bit-array filter.
fn params_info(params: &Params) -> [(&'static str, InfoValue); 3] {
    [
        ("bits", InfoValue::Int(params.bits)),
        ("hashes", InfoValue::Int(params.hashes.into())),
        ("capacity", InfoValue::Int(params.items)),
    ]
}

macro_rules! from_filter {
    ($($variant:ident($ty:ty)),*) => {$(
        impl From<$ty> for AnyFilter {
            fn from(filter: $ty) -> Self {
                AnyFilter::$variant(filter)
            }
        }
    )*};
}

from_filter!(
    Classic(BloomFilter),
    Blocked(BlockedBloomFilter),
    FastLocal(FastLocalBloomFilter),
    Counting(CountingBloomFilter),
    Scalable(ScalableBloomFilter),
    Cuckoo(CuckooFilter),
    Windowed(WindowedBloomFilter)
);
