//! `bloomgate.BloomFilter`: the classic, cache-line blocked or FastLocal bit filter behind one
//! Python class (the layout is a constructor argument, as `--kind` is for `bloomgate build`).

use std::io::{self, Write};

use bloomgate::any::AnyFilter;
use bloomgate::{BlockedBloomFilter, FastLocalBloomFilter, FilterCodec, Layout, Params};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::{error, filter_class, positive, Inner};

/// The filter of a `BloomFilter`: any bit layout.
#[derive(Clone)]
pub enum Bits {
    Classic(bloomgate::BloomFilter),
    Blocked(BlockedBloomFilter),
    FastLocal(FastLocalBloomFilter),
}

/// Applies the same expression to whichever layout the enum holds.
macro_rules! each {
    ($bits:expr, $f:ident => $body:expr) => {
        match $bits {
            Bits::Classic($f) => $body,
            Bits::Blocked($f) => $body,
            Bits::FastLocal($f) => $body,
        }
    };
}

impl Bits {
    fn params(&self) -> &Params {
        each!(self, f => f.params())
    }

    /// The layout's name, as `layout=` takes it.
    fn layout_name(&self) -> &'static str {
        match self {
            Bits::Classic(_) => "classic",
            Bits::Blocked(_) => "blocked",
            Bits::FastLocal(_) => "fastlocal",
        }
    }

    /// `self |= other` (`intersect`: `self &= other`); both must have the same layout, size,
    /// hash count and seed.
    fn combine(&mut self, other: &Bits, intersect: bool) -> PyResult<()> {
        let result = match (self, other) {
            (Bits::Classic(a), Bits::Classic(b)) if intersect => a.intersect(b),
            (Bits::Classic(a), Bits::Classic(b)) => a.union(b),
            (Bits::Blocked(a), Bits::Blocked(b)) if intersect => a.intersect(b),
            (Bits::Blocked(a), Bits::Blocked(b)) => a.union(b),
            (Bits::FastLocal(a), Bits::FastLocal(b)) if intersect => a.intersect(b),
            (Bits::FastLocal(a), Bits::FastLocal(b)) => a.union(b),
            (a, b) => {
                return Err(PyValueError::new_err(format!(
                    "incompatible filters: a {} and a {} filter cannot be combined",
                    a.layout_name(),
                    b.layout_name()
                )))
            }
        };
        result.map_err(error)
    }
}

impl Inner for Bits {
    const CLASS: &'static str = "BloomFilter";
    fn contains_key(&self, key: &[u8]) -> bool {
        each!(self, f => f.contains(key))
    }
    fn contains_keys(&self, keys: &[&[u8]], out: &mut Vec<bool>) {
        each!(self, f => f.contains_batch(keys, out))
    }
    fn count(&self) -> u64 {
        each!(self, f => f.len())
    }
    fn estimated_fpr(&self) -> f64 {
        each!(self, f => f.estimated_fpr())
    }
    fn memory_bytes(&self) -> usize {
        each!(self, f => f.memory_bytes())
    }
    fn seed(&self) -> u64 {
        each!(self, f => f.seed())
    }
    fn to_bytes(&self) -> Vec<u8> {
        each!(self, f => f.to_bytes())
    }
    fn write_to(&self, writer: &mut dyn Write) -> io::Result<()> {
        each!(self, f => f.write_to(writer))
    }
    fn from_any(any: AnyFilter) -> Result<Self, AnyFilter> {
        match any {
            AnyFilter::Classic(f) => Ok(Bits::Classic(f)),
            AnyFilter::Blocked(f) => Ok(Bits::Blocked(f)),
            AnyFilter::FastLocal(f) => Ok(Bits::FastLocal(f)),
            other => Err(other),
        }
    }
}

fn layout(name: &str) -> PyResult<Layout> {
    match name {
        "classic" => Ok(Layout::Classic),
        "blocked" => Ok(Layout::Blocked),
        "fastlocal" => Ok(Layout::FastLocal),
        _ => Err(PyValueError::new_err(format!(
            "layout must be \"classic\", \"blocked\" or \"fastlocal\", got {name:?}"
        ))),
    }
}

fn build(params: Params, seed: u64) -> PyResult<Bits> {
    Ok(match params.layout {
        Layout::Classic => {
            Bits::Classic(bloomgate::BloomFilter::with_params(params, seed).map_err(error)?)
        }
        Layout::Blocked => {
            Bits::Blocked(BlockedBloomFilter::with_params(params, seed).map_err(error)?)
        }
        Layout::FastLocal => {
            Bits::FastLocal(FastLocalBloomFilter::with_params(params, seed).map_err(error)?)
        }
    })
}

/// A Bloom filter: "definitely not" is always right, "maybe" is wrong at a chosen rate.
///
/// `BloomFilter(expected_items, fpr, *, layout="classic", seed=0)` sizes the filter for
/// `expected_items` keys at false-positive rate `fpr` with the exact model of the layout:
/// "classic" (k probes over the whole array, fewest bits), "blocked" (all probes in one
/// 64-byte cache line) or "fastlocal" (one cache line, probes anywhere in it: fastest queries
/// and fewer false positives than "blocked"). Keys are str (UTF-8), bytes-like or int. Thread-safe.
#[pyclass(module = "bloomgate", frozen)]
pub struct BloomFilter {
    inner: crate::Shared<Bits>,
}

filter_class!(BloomFilter, Bits, params("Size of the bit array."), {
    #[new]
    #[pyo3(signature = (expected_items, fpr, *, layout = "classic", seed = 0))]
    fn new(expected_items: i128, fpr: f64, layout: &str, seed: u64) -> PyResult<Self> {
        let items = positive("expected_items", expected_items)?;
        let params = Params::for_items(self::layout(layout)?, items, fpr).map_err(error)?;
        Ok(Self::wrap(build(params, seed)?))
    }

    /// A filter of exactly `bits` bits (rounded up to 64, or 512 for "blocked" and "fastlocal") and `hashes`
    /// probes per key. `expected_items` (for `fpr` and `capacity`) defaults to the count at
    /// which `hashes` is optimal: bits·ln 2 / hashes.
    #[staticmethod]
    #[pyo3(signature = (bits, hashes, *, layout = "classic", seed = 0, expected_items = None))]
    fn with_bits(
        bits: i128,
        hashes: u32,
        layout: &str,
        seed: u64,
        expected_items: Option<i128>,
    ) -> PyResult<Self> {
        let bits = positive("bits", bits)?;
        let items = match expected_items {
            Some(n) => positive("expected_items", n)?,
            None => ((bits as f64 * std::f64::consts::LN_2 / f64::from(hashes.max(1))).round()
                as u64)
                .max(1),
        };
        let params = Params::new(self::layout(layout)?, bits, hashes, items).map_err(error)?;
        Ok(Self::wrap(build(params, seed)?))
    }

    /// Adds `key`; returns True if it was new (some of its bits were clear), False if it was
    /// possibly present already.
    fn add(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = crate::keys::key(key)?;
        let key = key.bytes();
        Ok(!self.inner.fast_write(py, |f| each!(f, f => f.insert(key))))
    }

    /// Adds every key of an iterable (or NumPy array), with the GIL released while hashing and
    /// inserting.
    fn update(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<()> {
        crate::update(py, &self.inner, keys, |f, keys| {
            each!(f, f => f.insert_batch(keys));
            Ok(())
        })
    }

    /// Distinct keys estimated from the fill (Swamidass–Baldi); unlike `len`, it survives
    /// unions and counts keys added to filters that were merged.
    fn estimated_len(&self, py: Python<'_>) -> f64 {
        each!(&*self.inner.read(py), f => f.estimated_len())
    }

    /// Fraction of bits set.
    #[getter]
    fn fill_ratio(&self, py: Python<'_>) -> f64 {
        each!(&*self.inner.read(py), f => f.fill_ratio())
    }

    /// "classic", "blocked" or "fastlocal".
    #[getter]
    fn layout(&self, py: Python<'_>) -> &'static str {
        self.inner.read(py).layout_name()
    }

    /// Removes every key.
    fn clear(&self, py: Python<'_>) {
        each!(&mut *self.inner.write(py), f => f.clear())
    }

    /// A new filter holding the keys of both (same layout, bits, hashes and seed, else
    /// ValueError).
    fn union(&self, py: Python<'_>, other: &Self) -> PyResult<Self> {
        self.combined(py, other, false)
    }

    /// A new filter answering True only where both do (same layout, bits, hashes and seed).
    fn intersection(&self, py: Python<'_>, other: &Self) -> PyResult<Self> {
        self.combined(py, other, true)
    }

    fn __or__(&self, py: Python<'_>, other: &Self) -> PyResult<Self> {
        self.combined(py, other, false)
    }

    fn __and__(&self, py: Python<'_>, other: &Self) -> PyResult<Self> {
        self.combined(py, other, true)
    }

    fn __ior__(slf: &Bound<'_, Self>, other: &Self) -> PyResult<()> {
        slf.get().combine_in_place(slf.py(), other, false)
    }

    fn __iand__(slf: &Bound<'_, Self>, other: &Self) -> PyResult<()> {
        slf.get().combine_in_place(slf.py(), other, true)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let f = self.inner.read(py);
        let p = f.params();
        format!(
            "BloomFilter(layout={:?}, bits={}, hashes={}, capacity={}, len={}, seed={})",
            f.layout_name(),
            p.bits,
            p.hashes,
            p.items,
            f.count(),
            f.seed()
        )
    }
});

impl BloomFilter {
    fn combined(&self, py: Python<'_>, other: &Self, intersect: bool) -> PyResult<Self> {
        let mut out = self.inner.read(py).clone();
        if !std::ptr::eq(self, other) {
            out.combine(&other.inner.read(py), intersect)?;
        }
        Ok(Self::wrap(out))
    }

    fn combine_in_place(&self, py: Python<'_>, other: &Self, intersect: bool) -> PyResult<()> {
        if std::ptr::eq(self, other) {
            return Ok(()); // f |= f and f &= f change nothing
        }
        let (mut mine, theirs) = self.inner.write_read(py, &other.inner);
        mine.combine(&theirs, intersect)
    }
}
