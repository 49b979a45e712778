//! Process-wide sums over every live chain of a link type (valkey-bloom 1.0's `INFO bf`
//! `bf_bloom_*` metrics): each chain remembers what it last added ([`Counted`]) and, after
//! every change of its links or items, adds the difference; its `Drop` takes it all back. So
//! the sums are those of the chains alive now, however they were made (created, grown, loaded,
//! cloned for COPY) or freed (DEL, FLUSHALL, expiry, a value replaced or refused).

use super::{Chain, ChainLink};
use std::sync::atomic::{AtomicU64, Ordering};

/// What one chain adds to a [`Tally`] (all zero before it is counted).
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
