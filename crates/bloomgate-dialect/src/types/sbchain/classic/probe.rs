//! A classic link's prefetched probes. Its k probes of an item land on up to k cache lines, so
//! a link far bigger than the CPU cache costs a memory latency per probe taken one after the
//! other; here lines are requested before they are tested, so the misses overlap:
//!
//! - one item's k lines at once ([`Link::prefetch_all`]), for single items and for the items
//!   a batched write prefetches ahead of itself;
//! - a batch of reads in stages ([`Link::retain_present_staged`]): probe 0 of every item still
//!   unanswered is prefetched and tested, then probe 1 of the survivors, and so on. Most absent
//!   items fail at probe 0 or 1, so the later stages are short and a batch waits about one
//!   memory latency per stage. Inside a stage a rolling window keeps [`LINES_IN_FLIGHT`] lines
//!   requested ahead of the test.
//!
//! A link whose pages a snapshot has copied (no single array to index) is probed item by item
//! without prefetching.

use super::{HashPair, Link};
use crate::types::sbchain::ChainLink;
use bloomgate::filters::{prefetch, LINES_IN_FLIGHT};

/// The word holding bit `at`.
#[inline(always)]
fn word_of(words: &[u64], at: u64) -> &u64 {
    &words[(at >> 6) as usize]
}

#[inline(always)]
fn is_set(words: &[u64], at: u64) -> bool {
    word_of(words, at) & (1u64 << (at & 63)) != 0
}

impl Link {
    /// Requests the cache lines of all of `h`'s probes (nothing on a link a snapshot shares).
    pub(super) fn prefetch_all(&self, h: HashPair) {
        if let Some(words) = self.bits.as_slice() {
            let bits = self.bits();
            for i in 0..u32::from(self.hashes) {
                prefetch(word_of(words, h.position(i, bits)));
            }
        }
    }

    /// Keeps in `pending` (indices into `hashes`) the items this link reports present, probe
    /// stage by probe stage.
    pub(super) fn retain_present_staged(&self, hashes: &[HashPair], pending: &mut Vec<u32>) {
        let Some(words) = self.bits.as_slice() else {
            pending.retain(|&j| self.contains(hashes[j as usize]));
            return;
        };
        let bits = self.bits();
        // The current stage's bit positions.
        let mut at = Vec::with_capacity(pending.len());
        for i in 0..u32::from(self.hashes) {
            let n = pending.len();
            if n == 0 {
                return;
            }
            at.clear();
            at.resize(n, 0);
            let position = |j: u32| hashes[j as usize].position(i, bits);
            for (r, slot) in at.iter_mut().enumerate().take(LINES_IN_FLIGHT) {
                *slot = position(pending[r]);
                prefetch(word_of(words, *slot));
            }
            let mut kept = 0;
            for r in 0..n {
                let ahead = r + LINES_IN_FLIGHT;
                if ahead < n {
                    at[ahead] = position(pending[ahead]);
                    prefetch(word_of(words, at[ahead]));
                }
                if is_set(words, at[r]) {
                    pending[kept] = pending[r];
                    kept += 1;
                }
            }
            pending.truncate(kept);
        }
    }
}
