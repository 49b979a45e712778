//! The filter types. The bit filters are one generic filter ([`Bloom`], and [`ConcurrentBloom`]
//! for `&self` inserts) over small layout policies ([`BitLayout`]: [`Classic`], [`Blocked`], [`FastLocal`]);
//! the two one-block layouts share their storage unit (`block`) and their kernel choice and
//! batched pipeline (`local`);
//! the other kinds (counting, scalable, cuckoo, windowed) each have their own file and reuse
//! `bits`, `hash`, `params` and `codec`.

mod block;
mod blocked;
mod bloom;
mod classic;
mod concurrent;
mod counting;
mod cuckoo;
mod fastlocal;
pub mod layout;
mod local;
mod prefetch;
mod scalable;
mod windowed;

pub use block::*;
pub use blocked::*;
pub use bloom::*;
pub use classic::*;
pub use concurrent::*;
pub use counting::*;
pub use cuckoo::*;
pub use fastlocal::*;
pub use layout::{BitLayout, Geometry, StorageUnit};
pub use prefetch::{advise_huge_pages, prefetch, LINES_IN_FLIGHT};
pub use scalable::*;
pub use windowed::*;
