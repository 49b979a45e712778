//! The one error type of the core library. Every fallible public function returns it, so callers
//! (CLI, server, gate) can match on what went wrong instead of parsing strings.

use std::fmt;

/// Everything that can go wrong in the core library.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// A sizing or construction parameter is out of its domain (n = 0, p ∉ (0,1), NaN, k = 0, ...).
    InvalidParameter(String),
    /// The requested filter would exceed addressable memory or the library's size limit.
    TooLarge(String),
    /// The filter fits the library's limits but not the memory this process can get now
    /// (available memory, cgroup limit, address space): refused before allocating. The message
    /// names the size asked for and the limit.
    OutOfMemory(String),
    /// Two filters cannot be combined (different sizes, hash counts, seeds or kinds).
    Incompatible(String),
    /// A remove was refused because the key is definitely not in the filter; nothing changed.
    NotPresent,
    /// A filter with a hard capacity (cuckoo) has no room; nothing already stored was lost.
    Full,
    /// The operation is not supported by this kind of filter (e.g. remove on a classic filter).
    Unsupported(String),
    /// Serialized data is not a valid filter: bad magic, version, checksum, truncation, ...
    Corrupt(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidParameter(msg) => write!(f, "invalid parameter: {msg}"),
            Error::TooLarge(msg) => write!(f, "too large: {msg}"),
            Error::OutOfMemory(msg) => write!(f, "out of memory: {msg}"),
            Error::Incompatible(msg) => write!(f, "incompatible filters: {msg}"),
            Error::NotPresent => write!(f, "key is definitely not in the filter"),
            Error::Full => write!(f, "filter is full"),
            Error::Unsupported(msg) => write!(f, "unsupported: {msg}"),
            Error::Corrupt(msg) => write!(f, "corrupt filter data: {msg}"),
        }
    }
}

impl std::error::Error for Error {}

/// Result alias used throughout the core library.
pub type Result<T, E = Error> = std::result::Result<T, E>;
