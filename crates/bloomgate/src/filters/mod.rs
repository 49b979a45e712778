//! The filter types. Each file is one kind; all share `bits`, `hash`, `params` and `codec`.

mod blocked;
mod classic;
mod concurrent;
mod counting;
mod cuckoo;
mod scalable;
mod windowed;

pub use blocked::*;
pub use classic::*;
pub use concurrent::*;
pub use counting::*;
pub use cuckoo::*;
pub use scalable::*;
pub use windowed::*;
