//! The seam between the one generic bit filter ([`Bloom`](super::Bloom)) and the bit layouts it
//! can use. A layout is a small policy: which storage unit it addresses (a `u64` word, a 512-bit
//! block), how a key's hash picks units and marks or checks bits in them, its FPR model and its
//! file-format id. Everything else — storage, sizing, batching and prefetching, parallel
//! build, union / intersection, estimates, the file format, the concurrent variant — is written
//! once over this trait, so a new layout is one policy file plus a [`FilterKind`] id.
//!
//! The policy value itself is the kernel choice (e.g. AVX2 or portable for the blocked layout):
//! it is picked once when a filter is constructed ([`BitLayout::select`]) and passed by value to
//! every call, so the dispatch is one predictable branch on a field, never a CPU-feature check.

use std::fmt::Debug;
use std::ops::Deref;
use std::sync::atomic::AtomicU64;

use crate::codec::FilterKind;
use crate::error::Result;
use crate::hash::KeyHash;
use crate::params::{Layout, Params};

/// What a layout's probes need to know about the filter they address, computed once at
/// construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Size of the bit array (m).
    pub bits: u64,
    /// Number of storage units (words for classic, blocks for blocked).
    pub units: u64,
    /// Probes per key (k).
    pub hashes: u32,
}

impl Geometry {
    /// The geometry of a filter with these parameters, whose storage units hold `unit_words`
    /// 64-bit words each.
    pub fn of(params: &Params, unit_words: usize) -> Self {
        Geometry {
            bits: params.bits,
            units: params.bits / (64 * unit_words as u64),
            hashes: params.hashes,
        }
    }
}

/// A storage unit of a bit layout: a plain `u64` word or a cache-line block of words. Owns the
/// conversions the generic filter needs (zeroed allocation, word views, the lossless
/// plain ⇄ atomic reinterpretation used by the concurrent filter).
pub trait StorageUnit: Copy + Default + PartialEq + Eq + Debug + Send + Sync + 'static {
    /// The owned array of units (what the plain filter stores).
    type Store: Clone + PartialEq + Eq + Debug + Send + Sync;
    /// The same unit with atomic words (what the concurrent filter stores).
    type Atomic: Send + Sync;
    /// The owned array of atomic units (what the concurrent filter stores).
    type AtomicStore: Deref<Target = [Self::Atomic]> + Send + Sync;
    /// 64-bit words per unit.
    const WORDS: usize;

    /// `count` zeroed units, lazily (untouched pages stay unresident) and advised onto huge
    /// pages when large; [`Error::OutOfMemory`](crate::Error::OutOfMemory) if the allocator
    /// refuses them.
    fn try_zeroed(count: usize) -> Result<Self::Store>;
    /// [`Self::try_zeroed`] that aborts if the allocator refuses, as `vec![0; n]` does.
    fn zeroed(count: usize) -> Self::Store {
        Self::try_zeroed(count).unwrap_or_else(|_| {
            let bytes = count.saturating_mul(Self::WORDS * 8);
            std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align(bytes, 8)
                    .unwrap_or(std::alloc::Layout::new::<u64>()),
            )
        })
    }
    /// The units of a store.
    fn units(store: &Self::Store) -> &[Self];
    /// The units of a store, mutably.
    fn units_mut(store: &mut Self::Store) -> &mut [Self];
    /// The units as consecutive little-endian-order words (unit u = words `u·WORDS..`).
    fn words(units: &[Self]) -> &[u64];
    /// The units as mutable words.
    fn words_mut(units: &mut [Self]) -> &mut [u64];
    /// Plain → atomic, reusing the allocation where the platform allows.
    fn into_atomic(store: Self::Store) -> Self::AtomicStore;
    /// Atomic → plain, reusing the allocation where the platform allows.
    fn from_atomic(store: Self::AtomicStore) -> Self::Store;
    /// The atomic units as consecutive atomic words.
    fn atomic_words(units: &[Self::Atomic]) -> &[AtomicU64];
    /// Offers a store's buffer to a host that moves allocations (one slot).
    fn relocate(store: &mut Self::Store, walk: &mut crate::relocate::Walk<'_>);
}

/// A bit layout: how a key's hash marks and checks bits. The value is the kernel chosen for
/// this machine (see the module comment).
pub trait BitLayout: Copy + Debug + Send + Sync + 'static {
    /// The storage unit probes address.
    type Unit: StorageUnit;
    /// The sizing / FPR model ([`Params`] carries it).
    const LAYOUT: Layout;
    /// The file-format id written to the header.
    const KIND: FilterKind;
    /// The public type name, for error messages.
    const TYPE_NAME: &'static str;
    /// Below this array size batched queries skip prefetching (the array sits in cache and
    /// computing probes twice costs more than it saves).
    const PREFETCH_MIN_BYTES: usize;
    /// Whether all of a key's probes land in one unit ([`Self::home`]), which lets the
    /// parallel build partition units between threads instead of using atomics.
    const LOCAL: bool;

    /// The fastest kernel for this machine; called once per filter.
    fn select() -> Self;

    /// Sets the key's bits; returns whether they were all set already.
    fn insert(self, units: &mut [Self::Unit], g: Geometry, h: KeyHash) -> bool;

    /// Whether all of the key's bits are set.
    fn contains(self, units: &[Self::Unit], g: Geometry, h: KeyHash) -> bool;

    /// Visits the key's probes as (word index, bit mask) pairs over the word view of the
    /// units, stopping at the first visit that returns false; returns false if one did. The
    /// generic path (concurrent filters, reference checks); `insert` / `contains` are the
    /// kernels and must agree with it.
    fn probes(self, g: Geometry, h: KeyHash, visit: impl FnMut(usize, u64) -> bool) -> bool;

    /// Hints the cache lines the key will touch in the word array at `words`.
    fn prefetch(self, words: *const u64, g: Geometry, h: KeyHash);

    /// The unit holding all of the key's probes, for [`Self::LOCAL`] layouts.
    fn home(g: Geometry, h: KeyHash) -> usize;

    /// FPR of a filter in this exact bit state.
    fn estimated_fpr(units: &[Self::Unit], g: Geometry) -> f64;

    /// Cache lines a key keeps in flight, for the prefetch distance of the batched calls: one
    /// for the local layouts; two for the classic one, whose prefetch asks for k lines but
    /// whose query of an absent key reads about two before it meets a clear bit (half the bits
    /// are set at the optimal fill). Counting all k there measured worse (256 MiB, batched
    /// misses: 37–38 ns at 6 keys ahead, 29–31 ns at 24).
    #[inline(always)]
    fn lines(g: Geometry) -> u32 {
        if Self::LOCAL {
            1
        } else {
            g.hashes.min(2)
        }
    }

    /// The batch query engine: `contains` of `count` hashes, prefetching ahead when the array
    /// is large. Layouts override it to compile the loop with their kernel's target features.
    #[inline(always)]
    fn contains_batch(
        self,
        units: &[Self::Unit],
        g: Geometry,
        count: usize,
        hash_at: impl Fn(usize) -> KeyHash,
        out: &mut Vec<bool>,
    ) {
        out.reserve(count);
        if std::mem::size_of_val(units) < Self::PREFETCH_MIN_BYTES {
            out.extend((0..count).map(|i| self.contains(units, g, hash_at(i))));
            return;
        }
        let base = Self::Unit::words(units).as_ptr();
        super::prefetch::rolling(
            count,
            Self::lines(g),
            hash_at,
            |h| self.prefetch(base, g, h),
            |h| out.push(self.contains(units, g, h)),
        );
    }
}
