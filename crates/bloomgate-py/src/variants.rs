//! The filters beyond a plain bit array: counting (removes), scalable (grows), cuckoo (removes
//! and counts in less space) and windowed (forgets by age). Each wraps its core type; the shared
//! methods come from `filter_class!`.

use bloomgate::{
    CuckooFilter as Cuckoo, ScalableBloomFilter as Scalable, WindowConfig,
    WindowedBloomFilter as Windowed,
};
use pyo3::prelude::*;

use crate::bloom::{Bits, BloomFilter};
use crate::{codec_inner, error, filter_class, positive};

codec_inner!(
    bloomgate::CountingBloomFilter,
    Counting,
    "CountingBloomFilter"
);
codec_inner!(Scalable, Scalable, "ScalableBloomFilter");
codec_inner!(Cuckoo, Cuckoo, "CuckooFilter");
codec_inner!(Windowed, Windowed, "WindowedBloomFilter");

pub fn wrap_counting(f: bloomgate::CountingBloomFilter) -> CountingBloomFilter {
    CountingBloomFilter::wrap(f)
}
pub fn wrap_scalable(f: Scalable) -> ScalableBloomFilter {
    ScalableBloomFilter::wrap(f)
}
pub fn wrap_cuckoo(f: Cuckoo) -> CuckooFilter {
    CuckooFilter::wrap(f)
}
pub fn wrap_windowed(f: Windowed) -> WindowedBloomFilter {
    WindowedBloomFilter::wrap(f)
}

/// A Bloom filter of 4-bit counters that can `remove` keys.
///
/// `CountingBloomFilter(expected_items, fpr, *, seed=0)`: sized like a classic filter, 4× its
/// memory. Only remove keys you added: removing a false positive removes another key's bits.
#[pyclass(module = "bloomgate", frozen)]
pub struct CountingBloomFilter {
    inner: crate::Shared<bloomgate::CountingBloomFilter>,
}

filter_class!(
    CountingBloomFilter,
    bloomgate::CountingBloomFilter,
    params("Number of counters."),
    {
        #[new]
        #[pyo3(signature = (expected_items, fpr, *, seed = 0))]
        fn new(expected_items: i128, fpr: f64, seed: u64) -> PyResult<Self> {
            let items = positive("expected_items", expected_items)?;
            let params = bloomgate::Params::for_items(bloomgate::Layout::Classic, items, fpr)
                .map_err(error)?;
            bloomgate::CountingBloomFilter::with_params(params, seed)
                .map(Self::wrap)
                .map_err(error)
        }

        /// Adds `key`; returns True if it was new (some counter was zero).
        fn add(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
            let key = crate::keys::key(key)?;
            Ok(!self.inner.write(py).insert(key.bytes()))
        }

        /// Adds every key of an iterable, with the GIL released.
        fn update(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<()> {
            crate::update(py, &self.inner, keys, |f, keys| {
                for key in keys {
                    f.insert(key);
                }
                Ok(())
            })
        }

        /// Removes one occurrence of `key`; KeyError (and no change) if it is definitely absent.
        fn remove(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
            let key = crate::keys::key(key)?;
            self.inner.write(py).remove(key.bytes()).map_err(error)
        }

        /// Upper bound on how many times `key` was added (the smallest of its counters, max 15).
        fn count(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<u8> {
            let key = crate::keys::key(key)?;
            Ok(self.inner.read(py).count_estimate(key.bytes()))
        }

        /// The classic BloomFilter with a bit wherever a counter is non-zero (same answers, 1/4 of
        /// the memory, no removal).
        fn to_bloom(&self, py: Python<'_>) -> BloomFilter {
            BloomFilter::wrap(Bits::Classic(self.inner.read(py).to_bloom()))
        }

        fn clear(&self, py: Python<'_>) {
            self.inner.write(py).clear()
        }

        fn __repr__(&self, py: Python<'_>) -> String {
            let f = self.inner.read(py);
            let p = f.params();
            format!(
                "CountingBloomFilter(bits={}, hashes={}, capacity={}, len={}, seed={})",
                p.bits,
                p.hashes,
                p.items,
                f.len(),
                f.seed()
            )
        }
    }
);

/// A Bloom filter that grows past its initial capacity and keeps its false-positive bound.
///
/// `ScalableBloomFilter(initial_capacity, fpr, *, growth=2, tightening=0.5, seed=0)`: a chain
/// of classic filters, link i holding initial_capacity·growth^i keys at fpr·(1−r)·r^i, so the
/// combined rate stays ≤ `fpr` however many keys arrive.
#[pyclass(module = "bloomgate", frozen)]
pub struct ScalableBloomFilter {
    inner: crate::Shared<Scalable>,
}

filter_class!(ScalableBloomFilter, Scalable, {
    #[new]
    #[pyo3(signature = (initial_capacity, fpr, *, growth = 2, tightening = 0.5, seed = 0))]
    fn new(
        initial_capacity: i128,
        fpr: f64,
        growth: u32,
        tightening: f64,
        seed: u64,
    ) -> PyResult<Self> {
        let items = positive("initial_capacity", initial_capacity)?;
        Scalable::with_options(items, fpr, growth, tightening, seed)
            .map(Self::wrap)
            .map_err(error)
    }

    /// Adds `key`; returns True if it was new. ValueError if a new link would exceed the size
    /// limit.
    fn add(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = crate::keys::key(key)?;
        self.inner
            .write(py)
            .insert(key.bytes())
            .map(|present| !present)
            .map_err(error)
    }

    /// Adds every key of an iterable, with the GIL released.
    fn update(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<()> {
        crate::update(py, &self.inner, keys, |f, keys| {
            keys.iter().try_for_each(|key| f.insert(key).map(drop))
        })
    }

    /// Number of filters in the chain.
    #[getter]
    fn links(&self, py: Python<'_>) -> usize {
        self.inner.read(py).links()
    }

    /// Keys the chain holds before it adds a link.
    #[getter]
    fn capacity(&self, py: Python<'_>) -> u64 {
        self.inner.read(py).capacity()
    }

    #[getter]
    fn initial_capacity(&self, py: Python<'_>) -> u64 {
        self.inner.read(py).initial_capacity()
    }

    /// The target false-positive rate (the bound at any size).
    #[getter]
    fn fpr(&self, py: Python<'_>) -> f64 {
        self.inner.read(py).target_fpr()
    }

    #[getter]
    fn growth(&self, py: Python<'_>) -> u32 {
        self.inner.read(py).growth()
    }

    #[getter]
    fn tightening(&self, py: Python<'_>) -> f64 {
        self.inner.read(py).tightening()
    }

    /// Bound on the false-positive rate from the links that exist (≤ fpr).
    fn fpr_bound(&self, py: Python<'_>) -> f64 {
        self.inner.read(py).fpr_bound()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let f = self.inner.read(py);
        format!(
            "ScalableBloomFilter(initial_capacity={}, fpr={}, links={}, len={}, seed={})",
            f.initial_capacity(),
            f.target_fpr(),
            f.links(),
            f.len(),
            f.seed()
        )
    }
});

/// A cuckoo filter: removes and counts keys, in about 1.3 bytes per key at 1%.
///
/// `CuckooFilter(capacity, fpr, *, seed=0)`: `add` raises FilterFullError when no room is left
/// (nothing stored before is lost). Only remove keys you added.
#[pyclass(module = "bloomgate", frozen)]
pub struct CuckooFilter {
    inner: crate::Shared<Cuckoo>,
}

filter_class!(CuckooFilter, Cuckoo, {
    #[new]
    #[pyo3(signature = (capacity, fpr, *, seed = 0))]
    fn new(capacity: i128, fpr: f64, seed: u64) -> PyResult<Self> {
        let items = positive("capacity", capacity)?;
        Cuckoo::with_seed(items, fpr, seed)
            .map(Self::wrap)
            .map_err(error)
    }

    /// Stores one more copy of `key`'s fingerprint; FilterFullError if there is no room.
    fn add(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = crate::keys::key(key)?;
        self.inner.write(py).insert(key.bytes()).map_err(error)
    }

    /// Adds every key of an iterable, with the GIL released; stops with FilterFullError at the
    /// first key that finds no room (the keys before it stay added).
    fn update(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<()> {
        crate::update(py, &self.inner, keys, |f, keys| {
            keys.iter().try_for_each(|key| f.insert(key))
        })
    }

    /// Removes one copy of `key`; KeyError (and no change) if it is definitely absent.
    fn remove(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = crate::keys::key(key)?;
        self.inner.write(py).remove(key.bytes()).map_err(error)
    }

    /// Copies of `key`'s fingerprint stored (of this key or keys colliding with it).
    fn count(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<u32> {
        let key = crate::keys::key(key)?;
        Ok(self.inner.read(py).count(key.bytes()))
    }

    /// Slots in the table.
    #[getter]
    fn capacity(&self, py: Python<'_>) -> u64 {
        self.inner.read(py).capacity()
    }

    /// Fraction of slots in use.
    #[getter]
    fn load_factor(&self, py: Python<'_>) -> f64 {
        self.inner.read(py).load_factor()
    }

    #[getter]
    fn buckets(&self, py: Python<'_>) -> u64 {
        self.inner.read(py).buckets()
    }

    #[getter]
    fn fingerprint_bits(&self, py: Python<'_>) -> u32 {
        self.inner.read(py).fingerprint_bits()
    }

    fn clear(&self, py: Python<'_>) {
        self.inner.write(py).clear()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let f = self.inner.read(py);
        format!(
            "CuckooFilter(buckets={}, fingerprint_bits={}, len={}, seed={})",
            f.buckets(),
            f.fingerprint_bits(),
            f.len(),
            f.seed()
        )
    }
});

/// A ring of Bloom filter generations that forgets old keys ("seen in the last N days").
///
/// `WindowedBloomFilter(generations, items_per_generation, fpr, *, window_ms=None, seed=0,
/// now_ms=None)`: time is cut into aligned slots of `window_ms`; each slot written to has a
/// generation, the `generations` newest slots are kept and queries check all of them. A
/// generation that takes more than `items_per_generation` keys grows instead of rotating early.
/// Without `window_ms` the slot moves only by `rotate()`. Times are milliseconds: pass `now_ms`
/// (simulated clocks), or leave it None for the wall clock (Unix epoch). Queries do not expire
/// anything: call `rotate_if_due()` first to apply expiry.
#[pyclass(module = "bloomgate", frozen)]
pub struct WindowedBloomFilter {
    inner: crate::Shared<Windowed>,
}

filter_class!(WindowedBloomFilter, Windowed, {
    #[new]
    #[pyo3(signature = (generations, items_per_generation, fpr, *, window_ms = None, seed = 0, now_ms = None))]
    fn new(
        generations: usize,
        items_per_generation: i128,
        fpr: f64,
        window_ms: Option<u64>,
        seed: u64,
        now_ms: Option<u64>,
    ) -> PyResult<Self> {
        let config = WindowConfig::new(
            generations,
            positive("items_per_generation", items_per_generation)?,
            fpr,
            window_ms,
        );
        Windowed::with_seed(config, seed, crate::now_ms(now_ms))
            .map(Self::wrap)
            .map_err(error)
    }

    /// Adds `key` at `now_ms` (moving the clock there if later) to the generation of its slot;
    /// returns True if it was new to that generation.
    #[pyo3(signature = (key, now_ms = None))]
    fn add(&self, py: Python<'_>, key: &Bound<'_, PyAny>, now_ms: Option<u64>) -> PyResult<bool> {
        let key = crate::keys::key(key)?;
        let present = self
            .inner
            .write(py)
            .insert(key.bytes(), crate::now_ms(now_ms))
            .map_err(error)?;
        Ok(!present)
    }

    /// Adds every key of an iterable at one time, with the GIL released.
    #[pyo3(signature = (keys, now_ms = None))]
    fn update(&self, py: Python<'_>, keys: &Bound<'_, PyAny>, now_ms: Option<u64>) -> PyResult<()> {
        let now = crate::now_ms(now_ms);
        crate::update(py, &self.inner, keys, |f, keys| {
            for key in keys {
                f.insert(key, now)?;
            }
            Ok(())
        })
    }

    /// Ends the current window now: later times count one slot later, and what that makes
    /// older than `generations` slots is dropped.
    #[pyo3(signature = (now_ms = None))]
    fn rotate(&self, py: Python<'_>, now_ms: Option<u64>) {
        self.inner.write(py).rotate(crate::now_ms(now_ms))
    }

    /// Moves the filter's clock to `now_ms`, dropping the generations dead then; returns whether
    /// the clock moved.
    #[pyo3(signature = (now_ms = None))]
    fn rotate_if_due(&self, py: Python<'_>, now_ms: Option<u64>) -> bool {
        self.inner.write(py).rotate_if_due(crate::now_ms(now_ms))
    }

    #[getter]
    fn generations(&self, py: Python<'_>) -> usize {
        self.inner.read(py).generations()
    }

    #[getter]
    fn items_per_generation(&self, py: Python<'_>) -> u64 {
        self.inner.read(py).config().items_per_generation
    }

    #[getter]
    fn window_ms(&self, py: Python<'_>) -> Option<u64> {
        self.inner.read(py).config().generation_window_ms
    }

    /// Target false-positive rate over all full generations.
    #[getter]
    fn fpr(&self, py: Python<'_>) -> f64 {
        self.inner.read(py).config().fpr
    }

    /// Keys in the newest generation.
    #[getter]
    fn newest_len(&self, py: Python<'_>) -> u64 {
        self.inner.read(py).newest_len()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let f = self.inner.read(py);
        let c = f.config();
        format!(
            "WindowedBloomFilter(generations={}, items_per_generation={}, fpr={}, window_ms={:?}, len={}, seed={})",
            c.generations,
            c.items_per_generation,
            c.fpr,
            c.generation_window_ms,
            f.len(),
            f.seed()
        )
    }
});
