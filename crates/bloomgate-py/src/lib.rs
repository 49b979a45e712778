//! `bloomgate` for Python: the core library's filters as Python classes (PyO3, one abi3 wheel for
//! CPython >= 3.9), reading and writing the same files as the `bloomgate` CLI, and the membership
//! gate of `bloomgate-gate` as `bloomgate.Gate` (`gate.rs`).
//!
//! Why a separate crate: the core stays free of Python; this crate only converts keys
//! (`keys.rs`), maps errors, and guards each filter with a lock so Python threads can share it.
//!
//! # Threads
//! Every filter sits behind a lock (`shared.rs`): queries share it, inserts take it exclusively.
//! Batch calls (`update`, `contains_many`, `save`, `load`) copy their keys out of Python objects,
//! then release the GIL for the hashing and probing. While holding the GIL a thread never *waits*
//! for a filter lock (it releases the GIL to wait, then retries), and a thread holding a lock
//! without the GIL never waits for the GIL, so no interleaving deadlocks. `key in f` (every class)
//! and `BloomFilter.add` skip the lock when no other thread is using it (they hold the GIL
//! throughout).

#![deny(missing_docs)]

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use bloomgate::any::AnyFilter;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyError, PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyMemoryView};

mod bloom;
mod gate;
mod keys;
mod shared;
mod variants;

use keys::{Batch, Keys};
pub(crate) use shared::Shared;

create_exception!(
    bloomgate,
    FilterFullError,
    PyException,
    "A cuckoo filter found no room for a key; nothing stored before was lost."
);

/// Maps a core error to the Python exception a caller expects.
pub(crate) fn error(e: bloomgate::Error) -> PyErr {
    use bloomgate::Error as E;
    match e {
        E::NotPresent => PyKeyError::new_err(e.to_string()),
        E::Full => FilterFullError::new_err(e.to_string()),
        E::Unsupported(_) => PyTypeError::new_err(e.to_string()),
        // One line naming the size asked for and the limit, then how to ask for less.
        E::OutOfMemory(_) => PyMemoryError::new_err(format!(
            "{e}; lower the expected number of items (or capacity) or raise fpr"
        )),
        E::InvalidParameter(_) | E::TooLarge(_) | E::Incompatible(_) | E::Corrupt(_) => {
            PyValueError::new_err(e.to_string())
        }
    }
}

/// A positive count parameter (taken as a wide int so a negative one is a `ValueError`, not an
/// `OverflowError`).
pub(crate) fn positive(name: &str, value: i128) -> PyResult<u64> {
    match u64::try_from(value) {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(PyValueError::new_err(format!(
            "{name} must be a positive integer below 2**64, got {value}"
        ))),
    }
}

/// What the filter of every Python class has in common.
pub(crate) trait Inner: Clone + Send + Sync + 'static {
    /// The Python class (for messages).
    const CLASS: &'static str;
    fn contains_key(&self, key: &[u8]) -> bool;
    /// Appends `contains_key` of every key to `out`; bit filters override it with their
    /// prefetching batch query.
    fn contains_keys(&self, keys: &[&[u8]], out: &mut Vec<bool>) {
        out.extend(keys.iter().map(|k| self.contains_key(k)));
    }
    fn count(&self) -> u64;
    fn estimated_fpr(&self) -> f64;
    fn memory_bytes(&self) -> usize;
    fn seed(&self) -> u64;
    fn to_bytes(&self) -> Vec<u8>;
    fn write_to(&self, writer: &mut dyn Write) -> io::Result<()>;
    /// The filter if the file held this class's kind, else the file's filter back.
    fn from_any(any: AnyFilter) -> Result<Self, AnyFilter>;
}

/// The keys of a batch call, and the shape of the NumPy array they came from (if they did).
fn batch_keys<'py>(keys: &Bound<'py, PyAny>) -> PyResult<(Batch<'py>, Option<Bound<'py, PyAny>>)> {
    let py = keys.py();
    let numpy = py.import("sys")?.getattr("modules")?.get_item("numpy").ok();
    let Some(np) = numpy.filter(|np| {
        np.getattr("ndarray")
            .and_then(|t| keys.is_instance(&t))
            .unwrap_or(false)
    }) else {
        return Ok((Batch::of(keys)?, None));
    };
    let shape = keys.getattr("shape")?;
    let flat = keys.call_method0("ravel")?;
    let dtype = flat.getattr("dtype")?;
    let kind: String = dtype.getattr("kind")?.extract()?;
    let itemsize: usize = dtype.getattr("itemsize")?.extract()?;
    // Integers that fit in i64 are their 8-byte little-endian encoding: no Python object per key.
    if kind == "i" || (kind == "u" && itemsize < 8) {
        let le = np.call_method1("ascontiguousarray", (flat, "<i8"))?;
        let bytes = le.call_method0("tobytes")?;
        return Ok((
            Batch::fixed(bytes.cast::<PyBytes>()?.as_bytes(), 8),
            Some(shape),
        ));
    }
    let list = flat.call_method0("tolist")?;
    Ok((Batch::of(&list)?, Some(shape)))
}

/// `contains_many` of every class: a list of bools, or a NumPy bool array of the input's shape.
/// Keys are copied out chunk by chunk; each chunk is hashed and probed with the GIL released.
pub(crate) fn contains_many<T: Inner>(
    py: Python<'_>,
    lock: &Shared<T>,
    keys: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    let (mut batch, shape) = batch_keys(keys)?;
    let (mut chunk, mut found) = (Keys::default(), Vec::new());
    while batch.next_chunk(&mut chunk)? {
        let registered = lock.register(py);
        py.detach(|| {
            lock.read_detached(&registered)
                .contains_keys(&chunk.slices(), &mut found)
        });
    }
    match shape {
        None => Ok(bool_list(py, &found)?.into_any().unbind()),
        Some(shape) => {
            let bytes: Vec<u8> = found.into_iter().map(u8::from).collect();
            let np = py.import("numpy")?;
            let array = np.call_method1(
                "frombuffer",
                (PyByteArray::new(py, &bytes), np.getattr("bool_")?),
            )?;
            Ok(array.call_method1("reshape", (shape,))?.unbind())
        }
    }
}

/// `found` as a Python list: `[majority] * n` (one C-level repeat, no call per key), then the
/// minority answers set one by one. A batch of misses, the common query, costs no call per key.
fn bool_list<'py>(py: Python<'py>, found: &[bool]) -> PyResult<Bound<'py, PyList>> {
    let trues = found.iter().filter(|&&hit| hit).count();
    let majority = trues * 2 > found.len();
    let list = PyList::new(py, [majority])?
        .as_sequence()
        .repeat(found.len())?
        .cast_into::<PyList>()?;
    for (i, &hit) in found.iter().enumerate() {
        if hit != majority {
            list.set_item(i, hit)?;
        }
    }
    Ok(list)
}

/// Runs `insert` on the keys of `iterable`, chunk by chunk, each with the GIL released and the
/// filter locked exclusively; stops at the first error `insert` returns (the keys before it
/// stay inserted).
pub(crate) fn update<T: Inner>(
    py: Python<'_>,
    lock: &Shared<T>,
    iterable: &Bound<'_, PyAny>,
    insert: impl Fn(&mut T, &[&[u8]]) -> bloomgate::Result<()> + Sync,
) -> PyResult<()> {
    let (mut batch, _) = batch_keys(iterable)?;
    let mut chunk = Keys::default();
    while batch.next_chunk(&mut chunk)? {
        let registered = lock.register(py);
        py.detach(|| insert(&mut lock.write_detached(&registered), &chunk.slices()))
            .map_err(error)?;
    }
    Ok(())
}

/// The bytes of a `bytes`, `bytearray` or `memoryview` argument.
pub(crate) fn buffer(data: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = data.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(b) = data.cast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    if data.is_instance_of::<PyMemoryView>() {
        return buffer(&data.call_method0("tobytes")?);
    }
    Err(PyTypeError::new_err(format!(
        "expected bytes, bytearray or memoryview, not {}",
        data.get_type().name()?
    )))
}

/// Writes the file image next to `path`, syncs it, then renames it over `path`, so a crash never
/// leaves a half-written filter under the final name (as `bloomgate build` does).
pub(crate) fn save_file<T: Inner>(py: Python<'_>, lock: &Shared<T>, path: &Path) -> PyResult<()> {
    let registered = lock.register(py);
    py.detach(|| -> io::Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        // Unique per call, not just per process: two threads saving to one path must not
        // rename each other's half-written file.
        static SAVES: AtomicU64 = AtomicU64::new(0);
        let call = SAVES.fetch_add(1, Ordering::Relaxed);
        tmp.push(format!(".tmp-{}-{call}", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let result = (|| {
            let mut out = BufWriter::new(File::create(&tmp)?);
            lock.read_detached(&registered).write_to(&mut out)?;
            out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    })
    .map_err(|e| io_error(e, path))
}

/// An `OSError` naming the file, as Python's own `open` raises it: `OSError(errno, strerror,
/// filename)` (so `FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent'`).
fn io_error(e: io::Error, path: &Path) -> PyErr {
    let filename = path.display().to_string();
    match e.raw_os_error() {
        Some(errno) => {
            let text = e.to_string();
            let strerror = text
                .strip_suffix(&format!(" (os error {errno})"))
                .unwrap_or(&text)
                .to_string();
            pyo3::exceptions::PyOSError::new_err((errno, strerror, filename))
        }
        None => pyo3::exceptions::PyOSError::new_err(format!("{filename}: {e}")),
    }
}

/// Reads a filter file of any kind, validated before anything large is allocated.
fn read_any(py: Python<'_>, path: &Path) -> PyResult<AnyFilter> {
    let file = File::open(path).map_err(|e| io_error(e, path))?;
    py.detach(|| AnyFilter::read_from(BufReader::new(file)))
        .map_err(|e| match error(e) {
            // A damaged or foreign file: the message names it.
            err if err.is_instance_of::<PyValueError>(py) => {
                PyValueError::new_err(format!("{}: {}", path.display(), err.value(py)))
            }
            err => err,
        })
}

/// The filter of a file or byte image that must hold `T`'s kind.
pub(crate) fn expect_kind<T: Inner>(any: AnyFilter, source: &str) -> PyResult<T> {
    T::from_any(any).map_err(|other| {
        PyValueError::new_err(format!(
            "{source} holds a {} filter, not a {}; open it with bloomgate.{} or bloomgate.load",
            other.kind().name(),
            T::CLASS,
            class_of(&other)
        ))
    })
}

pub(crate) fn load_file<T: Inner>(py: Python<'_>, path: &Path) -> PyResult<T> {
    expect_kind(read_any(py, path)?, &path.display().to_string())
}

pub(crate) fn from_image<T: Inner>(data: &Bound<'_, PyAny>) -> PyResult<T> {
    let bytes = buffer(data)?;
    let any = data
        .py()
        .detach(|| AnyFilter::from_bytes(&bytes))
        .map_err(error)?;
    expect_kind(any, "the data")
}

fn class_of(any: &AnyFilter) -> &'static str {
    match any {
        AnyFilter::Classic(_) | AnyFilter::Blocked(_) | AnyFilter::FastLocal(_) => {
            bloom::Bits::CLASS
        }
        AnyFilter::Counting(_) => bloomgate::CountingBloomFilter::CLASS,
        AnyFilter::Scalable(_) => bloomgate::ScalableBloomFilter::CLASS,
        AnyFilter::Cuckoo(_) => bloomgate::CuckooFilter::CLASS,
        AnyFilter::Windowed(_) => bloomgate::WindowedBloomFilter::CLASS,
    }
}

/// Wraps a filter of any kind in its Python class.
fn wrap(py: Python<'_>, any: AnyFilter) -> PyResult<Py<PyAny>> {
    Ok(match any {
        bits @ (AnyFilter::Classic(_) | AnyFilter::Blocked(_) | AnyFilter::FastLocal(_)) => {
            let bits = <bloom::Bits as Inner>::from_any(bits)
                .unwrap_or_else(|_| unreachable!("a bit filter"));
            bloom::BloomFilter::wrap(bits)
                .into_pyobject(py)?
                .into_any()
                .unbind()
        }
        AnyFilter::Counting(f) => variants::wrap_counting(f)
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        AnyFilter::Scalable(f) => variants::wrap_scalable(f)
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        AnyFilter::Cuckoo(f) => variants::wrap_cuckoo(f)
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        AnyFilter::Windowed(f) => variants::wrap_windowed(f)
            .into_pyobject(py)?
            .into_any()
            .unbind(),
    })
}

/// Opens a filter file of any kind (as written by `save` or `bloomgate build`) as its class.
#[pyfunction]
fn load(py: Python<'_>, path: PathBuf) -> PyResult<Py<PyAny>> {
    wrap(py, read_any(py, &path)?)
}

/// Parses a filter image of any kind (as returned by `to_bytes`) as its class.
#[pyfunction]
fn from_bytes(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let bytes = buffer(data)?;
    let any = py.detach(|| AnyFilter::from_bytes(&bytes)).map_err(error)?;
    wrap(py, any)
}

/// Generates the methods every filter class shares (queries, sizes, files, pickling, copies)
/// in the class's one `#[pymethods]` block, followed by its own methods.
macro_rules! filter_class {
    // A filter sized by `Params` (BloomFilter, CountingBloomFilter): its getters come along,
    // `$bits_doc` saying what its bits are.
    ($class:ident, $inner:ty, params($bits_doc:literal), { $($methods:tt)* }) => {
        crate::filter_class!($class, $inner, {
            $($methods)*

            /// Model false-positive rate at `capacity` items (the rate the filter was sized for).
            #[getter]
            fn fpr(&self, py: Python<'_>) -> f64 {
                self.inner.read(py).params().fpr()
            }

            #[doc = $bits_doc]
            #[getter]
            fn bits(&self, py: Python<'_>) -> u64 {
                self.inner.read(py).params().bits
            }

            /// Probes per key (k).
            #[getter]
            fn hashes(&self, py: Python<'_>) -> u32 {
                self.inner.read(py).params().hashes
            }

            /// Items the filter was sized for.
            #[getter]
            fn capacity(&self, py: Python<'_>) -> u64 {
                self.inner.read(py).params().items
            }
        });
    };
    ($class:ident, $inner:ty, { $($methods:tt)* }) => {
        impl $class {
            pub(crate) fn wrap(inner: $inner) -> Self {
                Self { inner: crate::Shared::new(inner) }
            }
        }

        #[pyo3::pymethods]
        impl $class {
            $($methods)*

            /// `key in f`: False means definitely absent; True means present or a false
            /// positive.
            fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
                let key = crate::keys::key(key)?;
                let key = key.bytes();
                Ok(self.inner.fast_read(py, |f| crate::Inner::contains_key(f, key)))
            }

            /// Same as `key in f`.
            fn might_contain(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
                self.__contains__(py, key)
            }

            /// `key in f` for every key of an iterable, with the GIL released while hashing and
            /// probing: a list of bools, or a NumPy bool array of the same shape for an array.
            fn contains_many(
                &self,
                py: Python<'_>,
                keys: &Bound<'_, PyAny>,
            ) -> PyResult<Py<PyAny>> {
                crate::contains_many(py, &self.inner, keys)
            }

            /// Number of items the filter counts as inserted.
            fn __len__(&self, py: Python<'_>) -> usize {
                crate::Inner::count(&*self.inner.read(py)) as usize
            }

            /// False-positive rate the filter has now, from its actual contents.
            fn estimated_fpr(&self, py: Python<'_>) -> f64 {
                crate::Inner::estimated_fpr(&*self.inner.read(py))
            }

            /// Bytes of memory the filter uses.
            #[getter]
            fn nbytes(&self, py: Python<'_>) -> usize {
                crate::Inner::memory_bytes(&*self.inner.read(py))
            }

            /// The XXH3-128 seed keys are hashed with (stored in the file).
            #[getter]
            fn seed(&self, py: Python<'_>) -> u64 {
                crate::Inner::seed(&*self.inner.read(py))
            }

            /// Writes the filter to `path` in the bloomgate file format (atomically: a
            /// temporary file renamed over `path`), readable by `load` and the `bloomgate` CLI.
            fn save(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
                crate::save_file(py, &self.inner, &path)
            }

            /// Reads a filter file (from `save` or `bloomgate build`); ValueError if it is
            /// corrupt or holds another kind of filter.
            #[staticmethod]
            fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Self> {
                crate::load_file(py, &path).map(Self::wrap)
            }

            /// The file image (what `save` writes).
            fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, pyo3::types::PyBytes> {
                let image = crate::Inner::to_bytes(&*self.inner.read(py));
                pyo3::types::PyBytes::new(py, &image)
            }

            /// Parses a file image (bytes, bytearray or memoryview).
            #[staticmethod]
            fn from_bytes(data: &Bound<'_, PyAny>) -> PyResult<Self> {
                crate::from_image(data).map(Self::wrap)
            }

            fn __reduce__<'py>(
                slf: &Bound<'py, Self>,
            ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, pyo3::types::PyBytes>,))> {
                let from_bytes = slf.get_type().getattr("from_bytes")?;
                Ok((from_bytes, (slf.get().to_bytes(slf.py()),)))
            }

            /// An independent copy.
            fn copy(&self, py: Python<'_>) -> Self {
                Self::wrap(self.inner.read(py).clone())
            }

            fn __copy__(&self, py: Python<'_>) -> Self {
                self.copy(py)
            }

            fn __deepcopy__(&self, py: Python<'_>, _memo: &Bound<'_, PyAny>) -> Self {
                self.copy(py)
            }
        }
    };
}
pub(crate) use filter_class;

/// Implements [`Inner`] for a core filter type that is its own file kind.
macro_rules! codec_inner {
    ($ty:ty, $variant:ident, $class:literal) => {
        impl crate::Inner for $ty {
            const CLASS: &'static str = $class;
            fn contains_key(&self, key: &[u8]) -> bool {
                self.contains(key)
            }
            fn count(&self) -> u64 {
                self.len()
            }
            fn estimated_fpr(&self) -> f64 {
                <$ty>::estimated_fpr(self)
            }
            fn memory_bytes(&self) -> usize {
                <$ty>::memory_bytes(self)
            }
            fn seed(&self) -> u64 {
                <$ty>::seed(self)
            }
            fn to_bytes(&self) -> Vec<u8> {
                bloomgate::FilterCodec::to_bytes(self)
            }
            fn write_to(&self, writer: &mut dyn std::io::Write) -> std::io::Result<()> {
                bloomgate::FilterCodec::write_to(self, writer)
            }
            fn from_any(any: bloomgate::any::AnyFilter) -> Result<Self, bloomgate::any::AnyFilter> {
                match any {
                    bloomgate::any::AnyFilter::$variant(f) => Ok(f),
                    other => Err(other),
                }
            }
        }
    };
}
pub(crate) use codec_inner;

/// The current wall-clock time in milliseconds since the Unix epoch (the windowed filter's
/// default clock; its file stores times on this scale).
pub(crate) fn now_ms(given: Option<u64>) -> u64 {
    given.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    })
}

#[pymodule]
fn _bloomgate(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<bloom::BloomFilter>()?;
    m.add_class::<variants::CountingBloomFilter>()?;
    m.add_class::<variants::ScalableBloomFilter>()?;
    m.add_class::<variants::CuckooFilter>()?;
    m.add_class::<variants::WindowedBloomFilter>()?;
    m.add("FilterFullError", m.py().get_type::<FilterFullError>())?;
    m.add_class::<gate::Gate>()?;
    m.add("GateError", m.py().get_type::<gate::GateError>())?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(from_bytes, m)?)?;
    Ok(())
}
