//! Python objects → key bytes: the one place that decides which bytes a Python key hashes as, so
//! that a key means the same thing in Python, in the `bloomgate` CLI and in Rust.
//!
//! - `str`: its UTF-8 bytes (`"user-17"` is the CLI line `user-17`);
//! - `bytes`, `bytearray`, `memoryview`: the bytes themselves;
//! - `int` (and `bool`, an `int`): in `[-2^63, 2^63)` its 8-byte little-endian two's complement
//!   (Rust `i64::to_le_bytes`); any other int its shortest little-endian two's complement of
//!   more than 8 bytes, `n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)`.
//!
//! Keys of different types with the same bytes are the same key (`"a"` and `b"a"`).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{
    PyByteArray, PyBytes, PyDict, PyInt, PyIterator, PyList, PyMemoryView, PyString, PyTuple,
};

/// The bytes of one key: borrowed from an immutable Python object, or encoded / copied.
pub enum Key<'a> {
    Borrowed(&'a [u8]),
    Int([u8; 8]),
    Owned(Vec<u8>),
}

impl Key<'_> {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Key::Borrowed(b) => b,
            Key::Int(b) => b,
            Key::Owned(b) => b,
        }
    }
}

/// The key bytes of `obj`, or `TypeError` for an unsupported type.
#[inline]
pub fn key<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<Key<'a>> {
    // Exact type first: a pointer compare, where the subclass check is a call through the
    // stable ABI.
    if let Ok(s) = obj.cast_exact::<PyString>() {
        return str_key(s);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return str_key(s);
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Key::Borrowed(b.as_bytes()));
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        return int_key(i);
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        // Copied: a bytearray can be resized by another thread once the GIL is released.
        return Ok(Key::Owned(b.to_vec()));
    }
    if obj.is_instance_of::<PyMemoryView>() {
        // The buffer protocol is not in the 3.9 stable ABI; `tobytes` is.
        let copy = obj.call_method0("tobytes")?;
        return Ok(Key::Owned(copy.cast::<PyBytes>()?.as_bytes().to_vec()));
    }
    Err(PyTypeError::new_err(format!(
        "a key must be str, bytes, bytearray, memoryview or int, not {}",
        obj.get_type().name()?
    )))
}

fn int_key<'a>(i: &Bound<'_, PyInt>) -> PyResult<Key<'a>> {
    if let Ok(n) = i.extract::<i64>() {
        return Ok(Key::Int(n.to_le_bytes()));
    }
    let bits: usize = i.call_method0("bit_length")?.extract()?;
    let kwargs = PyDict::new(i.py());
    kwargs.set_item("signed", true)?;
    let encoded = i.call_method("to_bytes", ((bits + 8) / 8, "little"), Some(&kwargs))?;
    Ok(Key::Owned(encoded.cast::<PyBytes>()?.as_bytes().to_vec()))
}

// `PyUnicode_AsUTF8AndSize` joined the stable ABI in 3.10, but every CPython >= 3.3 exports it,
// and on Linux/macOS an extension's symbols resolve against the running interpreter. The
// stable-ABI alternative for 3.9 (`PyUnicode_AsUTF8String`) allocates a bytes object per key,
// which cost more than the whole filter probe (measured, see BENCHMARKS.md).
#[cfg(not(windows))]
extern "C" {
    fn PyUnicode_AsUTF8AndSize(
        unicode: *mut pyo3::ffi::PyObject,
        size: *mut pyo3::ffi::Py_ssize_t,
    ) -> *const std::os::raw::c_char;
}

/// The UTF-8 bytes CPython caches in the str at `s` (encoded on first use); on failure (lone
/// surrogates) the exception it set.
///
/// # Safety
/// `s` must point to a live `str`, the GIL must be held, and the str must outlive `'a` (the
/// bytes are its own buffer, unchanged while it lives).
#[cfg(not(windows))]
#[inline]
unsafe fn utf8<'a>(py: Python<'_>, s: *mut pyo3::ffi::PyObject) -> PyResult<&'a [u8]> {
    let mut size: pyo3::ffi::Py_ssize_t = 0;
    let data = PyUnicode_AsUTF8AndSize(s, &mut size);
    if data.is_null() {
        return Err(PyErr::fetch(py));
    }
    Ok(std::slice::from_raw_parts(data.cast::<u8>(), size as usize))
}

/// The UTF-8 bytes of a `str`, without a copy (CPython caches them in the object).
#[cfg(not(windows))]
#[inline]
fn str_key<'a>(s: &'a Bound<'_, PyString>) -> PyResult<Key<'a>> {
    // SAFETY: `s` is a live str (the cast checked it) and we hold the GIL (the `Bound`); the
    // slice borrows `s` for 'a. Exercised by every str key in tests/test_api.py (including
    // non-ASCII and a lone surrogate in test_errors.py).
    unsafe { utf8(s.py(), s.as_ptr()) }.map(Key::Borrowed)
}

/// The common case of a batch, a list of exact `str` keys, without the two reference-count
/// calls per key that `get_item` makes (function calls under the stable ABI, a fifth of a
/// batch query's time): pushes the UTF-8 bytes of `list[pos]` and answers true if it is an
/// exact `str`, else answers false and pushes nothing.
#[cfg(not(windows))]
#[inline]
fn push_exact_str(list: &Bound<'_, PyList>, pos: usize, keys: &mut Keys) -> PyResult<bool> {
    let py = list.py();
    // SAFETY: `list` is a live list and we hold the GIL (the `Bound`); the caller checked
    // pos < len. PyList_GetItem returns a borrowed reference (or null with IndexError set).
    // Nothing between here and the copy below can run Python code (a type compare and
    // PyUnicode_AsUTF8AndSize on an exact str, which only encodes and caches its UTF-8 form),
    // so the list still holds the item and the borrowed reference and the UTF-8 buffer it
    // owns stay valid until `keys.push` has copied the bytes. Exercised by every list batch
    // in the Python tests (test_api.py's mixed-type list of str, str subclass, bytes and int
    // keys, non-ASCII keys; test_errors.py's lone surrogate).
    unsafe {
        let item = pyo3::ffi::PyList_GetItem(list.as_ptr(), pos as pyo3::ffi::Py_ssize_t);
        if item.is_null() {
            return Err(PyErr::fetch(py));
        }
        if pyo3::ffi::Py_TYPE(item) != std::ptr::addr_of_mut!(pyo3::ffi::PyUnicode_Type) {
            return Ok(false);
        }
        keys.push(utf8(py, item)?);
    }
    Ok(true)
}

#[cfg(windows)]
fn push_exact_str(_: &Bound<'_, PyList>, _: usize, _: &mut Keys) -> PyResult<bool> {
    Ok(false)
}

/// Windows links the 3.9 stable ABI through python3.dll, which lacks the function above.
#[cfg(windows)]
fn str_key<'a>(s: &'a Bound<'_, PyString>) -> PyResult<Key<'a>> {
    Ok(Key::Owned(s.to_cow()?.into_owned().into_bytes()))
}

/// Keys per chunk of a batch call: small enough that the copied keys stay in L2 cache and no
/// call allocates memory in proportion to its input (4096 keys of 30 bytes: 120 KiB), large
/// enough that releasing and retaking the GIL per chunk costs under 1% (measured).
pub const CHUNK: usize = 4096;

/// Up to [`CHUNK`] keys copied into one buffer, so they can be hashed after the GIL is released
/// (no Python object is touched then, and no other thread can change them).
#[derive(Default)]
pub struct Keys {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl Keys {
    fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }

    #[inline]
    fn push(&mut self, key: &[u8]) {
        self.data.extend_from_slice(key);
        self.ends.push(self.data.len());
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// The keys as slices of the buffer.
    pub fn slices(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let key = &self.data[start..end];
                start = end;
                key
            })
            .collect()
    }
}

/// Where the keys of a batch call come from.
pub enum Batch<'py> {
    /// By index, so a list changed between chunks (by another thread) is read as it is then.
    List(Bound<'py, PyList>, usize),
    Tuple(Bound<'py, PyTuple>, usize),
    Iter(Bound<'py, PyIterator>),
    /// Consecutive `width`-byte keys (a NumPy integer array as little-endian i64: exactly the
    /// int encoding above).
    Fixed(Vec<u8>, usize, usize),
}

impl<'py> Batch<'py> {
    /// The keys of an iterable. A lone `str`/`bytes` is refused: iterating it would add its
    /// characters, never what the caller meant.
    pub fn of(iterable: &Bound<'py, PyAny>) -> PyResult<Self> {
        if iterable.is_instance_of::<PyString>() || iterable.is_instance_of::<PyBytes>() {
            return Err(PyTypeError::new_err(
                "expected an iterable of keys, got a single str/bytes key (use add / `in`)",
            ));
        }
        if let Ok(list) = iterable.cast::<PyList>() {
            return Ok(Batch::List(list.clone(), 0));
        }
        if let Ok(tuple) = iterable.cast::<PyTuple>() {
            return Ok(Batch::Tuple(tuple.clone(), 0));
        }
        Ok(Batch::Iter(iterable.try_iter()?))
    }

    pub fn fixed(data: &[u8], width: usize) -> Self {
        Batch::Fixed(data.to_vec(), width, 0)
    }

    /// Replaces `keys` with the next chunk; false once the batch is exhausted.
    pub fn next_chunk(&mut self, keys: &mut Keys) -> PyResult<bool> {
        keys.clear();
        match self {
            Batch::List(list, pos) => {
                // Only a key of another type can run Python code (an int subclass's
                // `bit_length`, a memoryview's `tobytes`) that could resize the list: the
                // length is read again after each of those.
                let mut len = list.len();
                while keys.len() < CHUNK && *pos < len {
                    if !push_exact_str(list, *pos, keys)? {
                        let item = list.get_item(*pos)?;
                        keys.push(key(&item)?.bytes());
                        len = list.len();
                    }
                    *pos += 1;
                }
            }
            Batch::Tuple(tuple, pos) => {
                while keys.len() < CHUNK && *pos < tuple.len() {
                    let item = tuple.get_item(*pos)?;
                    keys.push(key(&item)?.bytes());
                    *pos += 1;
                }
            }
            Batch::Iter(iter) => {
                while keys.len() < CHUNK {
                    match iter.next() {
                        Some(item) => keys.push(key(&item?)?.bytes()),
                        None => break,
                    }
                }
            }
            Batch::Fixed(data, width, pos) => {
                for record in data[*pos..].chunks_exact(*width).take(CHUNK) {
                    keys.push(record);
                    *pos += *width;
                }
            }
        }
        Ok(keys.len() > 0)
    }
}
