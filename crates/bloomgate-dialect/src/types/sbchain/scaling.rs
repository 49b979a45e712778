//! The one scaling rule every Bloom chain follows, whatever its links' bit layout: an item any
//! link reports is not added again; when the newest link holds its capacity, a scaling chain
//! grows by a link of `capacity × growth` items at half the newest link's error rate (so the
//! chain's total stays below the requested rate: Σ e/2^(i+1) < e), admitted against the memory
//! budget before it is allocated, and a non-scaling chain refuses the item. The classic
//! RedisBloom chain ([`super::BloomChain`]) and the blocked one ([`super::BlockedChain`]) both
//! add through [`add`], and both walk their links' bytes for SCANDUMP / LOADCHUNK through
//! [`link_at`], [`dump_chunk`] and [`chunk_at`].

use super::{AddError, ERR_BAD_DATA, ERR_CHUNK_TOO_BIG, ERR_NO_LINK};
use crate::budget::{Admitted, Allowance, Shape};
use crate::encoding::chunks::CHUNK_BYTES;

/// Each new link gets half the previous link's error rate (the first link of a scaling chain
/// half the requested rate).
pub(crate) const ERROR_TIGHTENING_RATIO: f64 = 0.5;

/// The first link's error rate for a chain created at `error`: `error/2` when it scales (room
/// for the links it may grow by), `error` when it never grows.
pub(crate) fn first_error(error: f64, nonscaling: bool) -> f64 {
    if nonscaling {
        error
    } else {
        error * ERROR_TIGHTENING_RATIO
    }
}

/// One fixed-size filter of a chain, as the scaling rule sees it.
pub(crate) trait ChainLink: Sized {
    /// What the link's probes are computed from, once per item for every link.
    type Hash: Copy;
    /// A link sized but not yet allocated.
    type Plan: Shape;

    /// A link for `capacity` items at `error`; `None` if it cannot be built.
    fn plan(capacity: u64, error: f64) -> Option<Self::Plan>;
    /// Allocates an admitted plan; `None` if the allocator refuses.
    fn allocate(plan: Admitted<Self::Plan>) -> Option<Self>;
    /// Whether every probe bit of the hash is set.
    fn contains(&self, h: Self::Hash) -> bool;
    /// Sets every probe bit; true if at least one was clear.
    fn insert(&mut self, h: Self::Hash) -> bool;
    /// Items the link was sized for.
    fn capacity(&self) -> u64;
    /// The link's error rate.
    fn error(&self) -> f64;
    /// Items this link newly took.
    fn items(&self) -> u64;
    /// Counts one more item taken (saturating: counts may come from a dump header).
    fn count_item(&mut self);
    /// Bytes of the link's bit array (its part of the dump body).
    fn bytes(&self) -> u64;
    /// `len` bytes of the array's little-endian image from byte `offset` (inside the array).
    fn read_le_bytes(&self, offset: u64, len: u64) -> Vec<u8>;
}

/// The link holding dump byte `offset` (0-based over all links' bit arrays, oldest first) and
/// the offset inside it.
pub(crate) fn link_at<L: ChainLink>(links: &[L], mut offset: u64) -> Option<(usize, u64)> {
    for (i, link) in links.iter().enumerate() {
        if offset < link.bytes() {
            return Some((i, offset));
        }
        offset -= link.bytes();
    }
    None
}

/// Where LOADCHUNK writes a chunk of `len` bytes that SCANDUMP returned with iterator `iter`
/// (1 + the byte offset after the chunk): the link's index and the offset inside it, or the
/// error RedisBloom answers (a bad iterator, no link there, a chunk past the link's end).
pub(crate) fn chunk_at<L: ChainLink>(
    links: &[L],
    iter: i64,
    len: u64,
) -> Result<(usize, u64), &'static str> {
    if iter <= 0 || (iter as u64) < len {
        return Err(ERR_BAD_DATA);
    }
    let (index, offset) = (iter as u64 - len)
        .checked_sub(1)
        .and_then(|o| link_at(links, o))
        .ok_or(ERR_NO_LINK)?;
    if len > links[index].bytes() - offset {
        return Err(ERR_CHUNK_TOO_BIG);
    }
    Ok((index, offset))
}

/// SCANDUMP for iterator `iter >= 1`: the next chunk (at most [`CHUNK_BYTES`], never crossing a
/// link) and the iterator to continue with (1 + the byte offset after the chunk), or `(0, [])`
/// when done.
pub(crate) fn dump_chunk<L: ChainLink>(links: &[L], iter: i64) -> (i64, Vec<u8>) {
    // `checked_sub`: an iterator of i64::MIN must not overflow (a fuzz regression).
    let offset = iter.checked_sub(1).and_then(|o| u64::try_from(o).ok());
    let Some((index, offset)) = offset.and_then(|o| link_at(links, o)) else {
        return (0, Vec::new());
    };
    let link = &links[index];
    let len = (link.bytes() - offset).min(CHUNK_BYTES);
    (iter + len as i64, link.read_le_bytes(offset, len))
}

/// Adds the item hashed as `h` to the chain of `links` (newest last) holding `items` items:
/// `Ok(true)` if new, `Ok(false)` if any link already reports it.
pub(crate) fn add<L: ChainLink>(
    links: &mut Box<[L]>,
    items: &mut u64,
    h: L::Hash,
    scaling: bool,
    growth: u32,
    allowance: &mut Allowance,
) -> Result<bool, AddError> {
    if links.iter().rev().any(|link| link.contains(h)) {
        return Ok(false);
    }
    let newest = links.last().expect("a chain has at least one link");
    if newest.items() >= newest.capacity() {
        if !scaling {
            return Err(AddError::Full);
        }
        let capacity = newest
            .capacity()
            .checked_mul(u64::from(growth))
            .filter(|&c| c > 0);
        let error = newest.error() * ERROR_TIGHTENING_RATIO;
        let plan = capacity
            .and_then(|c| L::plan(c, error))
            .ok_or(AddError::GrowFailed)?;
        let plan = allowance.admit(plan).map_err(AddError::refused)?;
        let link = L::allocate(plan).ok_or(AddError::OutOfMemory)?;
        let mut grown = std::mem::take(links).into_vec();
        grown.push(link);
        *links = grown.into_boxed_slice();
    }
    let newest = links.last_mut().expect("a chain has at least one link");
    if newest.insert(h) {
        newest.count_item();
        *items = items.saturating_add(1);
    }
    Ok(true)
}
