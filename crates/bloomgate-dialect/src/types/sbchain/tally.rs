//! Process-wide sums over every live chain of a link type (valkey-bloom 1.0's `INFO bf`
//! `bf_bloom_*` metrics): a new chain adds what it counts ([`Counted`]); every change of its
//! links or items adds the difference between what it counts after and before; its `Drop`
//! takes what it counts back. So
//! the sums are those of the chains alive now, however they were made (created, grown, loaded,
//! cloned for COPY) or freed (DEL, FLUSHALL, expiry, a value replaced or refused).

use super::{Chain, ChainLink};
use std::sync::atomic::{AtomicU64, Ordering};

/// What one chain adds to a [`Tally`] (all zero: nothing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counted {
    objects: u64,
    filters: u64,
    items: u64,
    capacity: u64,
    bytes: u64,
}

impl Counted {
    /// What `chain` adds: one object, its links, items, capacity and `BF.INFO Size`.
    pub(crate) fn of<L: ChainLink>(chain: &Chain<L>) -> Self {
        Self {
            objects: 1,
            filters: chain.links().len() as u64,
            items: chain.items(),
            capacity: chain.capacity(),
            bytes: chain.size_bytes(),
        }
    }
}

/// The sums over the live chains of one link type.
#[derive(Debug)]
pub struct Tally {
    objects: AtomicU64,
    filters: AtomicU64,
    items: AtomicU64,
    capacity: AtomicU64,
    bytes: AtomicU64,
}

/// A reading of a [`Tally`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TallyReading {
    /// Σ `BF.INFO Size`.
    pub total_memory_bytes: u64,
    /// Live objects.
    pub num_objects: u64,
    /// Σ links (`BF.INFO Filters`).
    pub num_filters: u64,
    /// Σ items (`BF.INFO Items`).
    pub num_items: u64,
    /// Σ capacities (`BF.INFO Capacity`).
    pub capacity: u64,
}

impl Tally {
    /// All zero.
    pub const fn new() -> Self {
        Self {
            objects: AtomicU64::new(0),
            filters: AtomicU64::new(0),
            items: AtomicU64::new(0),
            capacity: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    /// Replaces a chain's `old` contribution by `new`.
    pub(crate) fn replace(&self, old: Counted, new: Counted) {
        let pairs = [
            (&self.objects, old.objects, new.objects),
            (&self.filters, old.filters, new.filters),
            (&self.items, old.items, new.items),
            (&self.capacity, old.capacity, new.capacity),
            (&self.bytes, old.bytes, new.bytes),
        ];
        for (sum, old, new) in pairs {
            if new >= old {
                sum.fetch_add(new - old, Ordering::Relaxed);
            } else {
                sum.fetch_sub(old - new, Ordering::Relaxed);
            }
        }
    }

    /// The sums now.
    pub fn read(&self) -> TallyReading {
        TallyReading {
            total_memory_bytes: self.bytes.load(Ordering::Relaxed),
            num_objects: self.objects.load(Ordering::Relaxed),
            num_filters: self.filters.load(Ordering::Relaxed),
            num_items: self.items.load(Ordering::Relaxed),
            capacity: self.capacity.load(Ordering::Relaxed),
        }
    }
}

impl Default for Tally {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::sbchain::ValkeyLink;

    /// A chain's contribution follows it as it grows and goes back to nothing when it is
    /// replaced by nothing (a private tally: the global one is shared by parallel tests).
    #[test]
    fn a_contribution_is_replaced_and_taken_back() {
        let tally = Tally::new();
        let mut chain = Chain::<ValkeyLink>::new(10, 0.01, 2, false).expect("a small chain");
        let first = Counted::of(&chain);
        tally.replace(Counted::default(), first);
        let read = tally.read();
        assert_eq!(
            (read.num_objects, read.num_filters, read.num_items),
            (1, 1, 0)
        );
        assert_eq!(read.capacity, 10);
        assert_eq!(read.total_memory_bytes, chain.size_bytes());
        let mut allowance = crate::budget::Allowance::unlimited();
        for i in 0..40u32 {
            chain.add(&i.to_le_bytes(), &mut allowance).expect("scales");
        }
        let grown = Counted::of(&chain);
        tally.replace(first, grown);
        let read = tally.read();
        assert!(read.num_filters > 1);
        assert_eq!(read.num_items, chain.items());
        assert_eq!(read.capacity, chain.capacity());
        assert_eq!(read.total_memory_bytes, chain.size_bytes());
        tally.replace(grown, Counted::default());
        assert_eq!(tally.read(), TallyReading::default());
    }
}
