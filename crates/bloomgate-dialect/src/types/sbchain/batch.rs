//! Items in, answers out: hashing items and probing many at once. A link far bigger than the
//! CPU cache costs a memory latency per probe taken one after the other; here the cache lines
//! of many probes are requested (prefetched) before any of them is tested, so the misses
//! overlap.
//!
//! - **Reads** ([`BloomChain::contains_many`], BF.MEXISTS) go in stages, link by link (newest
//!   first, as single reads): probe 0 of every item still unanswered is prefetched and tested,
//!   then probe 1 of the survivors, and so on. Most absent items fail at probe 0 or 1, so the
//!   later stages are short and a batch waits about one memory latency per stage. Inside a
//!   stage a rolling window keeps [`LINES_IN_FLIGHT`] lines requested ahead of the test.
//! - **Writes** ([`BloomChain::add_many`], BF.MADD and BF.INSERT) apply strictly in order —
//!   each item sees the earlier ones of its batch, and the chain may grow or fill mid-batch,
//!   exactly as one add after another — while all k lines of the newest link are prefetched
//!   for the item `LINES_IN_FLIGHT / k` places ahead. Bits, counts and answers are those of
//!   adding the items one by one.
//! - **Single items** ([`BloomChain::contains`], [`BloomChain::add`]) request all k lines of a
//!   link before testing any when the link is at least [`PREFETCH_ALL_BYTES`].
//!
//! A link whose pages a snapshot has copied (no single array to index) is probed item by item
//! without prefetching, as before.

use super::{AddError, BloomChain, HashPair, Link};
use crate::budget::Allowance;
use bloomgate::filters::{prefetch, LINES_IN_FLIGHT};

/// Links at least this big get all k lines of an item requested before its probes are tested
/// (single items), and the lines of items ahead requested while one is added (batched writes).
/// The rule: a link that big cannot stay in the L2 cache of any current CPU, so its probes are
/// mostly misses and overlapping them wins; below it the probes mostly hit, and the extra
/// probe positions (a 64-bit division each) computed for the prefetches would only cost.
/// Batched reads prefetch on links of every size: they compute each position once anyway.
pub const PREFETCH_ALL_BYTES: u64 = 4 << 20;

/// Hashes a batched write keeps (a power of two above [`LINES_IN_FLIGHT`], the farthest it
/// looks ahead).
const RING: usize = 64;

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
    fn prefetch_all(&self, h: HashPair) {
        if let Some(words) = self.bits.as_slice() {
            let bits = self.bits();
            for i in 0..u32::from(self.hashes) {
                prefetch(word_of(words, h.position(i, bits)));
            }
        }
    }

    /// [`Link::contains`] for one item, all lines requested first on a big link.
    fn contains_single(&self, h: HashPair) -> bool {
        if self.bytes() >= PREFETCH_ALL_BYTES {
            self.prefetch_all(h);
        }
        self.contains(h)
    }

    /// Keeps in `pending` (indices into `hashes`) the items this link reports present, probe
    /// stage by probe stage. `at` is scratch space for the current stage's bit positions.
    fn retain_present(&self, hashes: &[HashPair], pending: &mut Vec<u32>, at: &mut Vec<u64>) {
        let Some(words) = self.bits.as_slice() else {
            pending.retain(|&j| self.contains(hashes[j as usize]));
            return;
        };
        let bits = self.bits();
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

impl BloomChain {
    /// Whether `item` may be present (any link reports it).
    pub fn contains(&self, item: &[u8]) -> bool {
        let h = HashPair::of(item);
        self.links.iter().rev().any(|link| link.contains_single(h))
    }

    /// Whether each of `items` may be present: [`BloomChain::contains`] of each, probed in
    /// stages (see the module's notes).
    pub fn contains_many<I: AsRef<[u8]>>(&self, items: &[I]) -> Vec<bool> {
        let hashes: Vec<HashPair> = items.iter().map(|i| HashPair::of(i.as_ref())).collect();
        let mut found = vec![false; items.len()];
        let mut unanswered: Vec<u32> = (0..items.len() as u32).collect();
        let mut pending = Vec::with_capacity(items.len());
        let mut at = Vec::with_capacity(items.len());
        for link in self.links.iter().rev() {
            if unanswered.is_empty() {
                break;
            }
            pending.clear();
            pending.extend_from_slice(&unanswered);
            link.retain_present(&hashes, &mut pending, &mut at);
            for &j in &pending {
                found[j as usize] = true;
            }
            unanswered.retain(|&j| !found[j as usize]);
        }
        found
    }

    /// Adds `item`: `Ok(true)` if new, `Ok(false)` if any link already reports it. When the
    /// newest link is at capacity, a scaling chain grows by a link of `capacity * growth` items
    /// at half the error, admitted against `allowance` before it is allocated.
    pub fn add(&mut self, item: &[u8], allowance: &mut Allowance) -> Result<bool, AddError> {
        let h = HashPair::of(item);
        self.prefetch_newest(h);
        self.add_hashed(h, allowance)
    }

    /// Adds `items` in order, calling `added` with each one's answer (as [`BloomChain::add`]'s
    /// `Ok`), and stops at the first error, which it returns: the items before it are added,
    /// those after it are not. Bits, counts and answers are those of adding one after another
    /// (a duplicate inside the batch answers `false`; the chain may grow or fill mid-batch).
    pub fn add_many<I: AsRef<[u8]>>(
        &mut self,
        items: &[I],
        allowance: &mut Allowance,
        mut added: impl FnMut(bool),
    ) -> Result<(), AddError> {
        let hashes_per_item = self.newest().hashes().max(1) as usize;
        let distance = (LINES_IN_FLIGHT / hashes_per_item).max(1);
        // The hashes of the items ahead, in a ring on the stack (no allocation per batch).
        let mut ahead = [HashPair { a: 0, b: 0 }; RING];
        let hash = |j: usize| HashPair::of(items[j].as_ref());
        for (j, slot) in ahead.iter_mut().enumerate().take(items.len().min(distance)) {
            *slot = hash(j);
            self.prefetch_newest(*slot);
        }
        for j in 0..items.len() {
            if j + distance < items.len() {
                let next = hash(j + distance);
                ahead[(j + distance) % RING] = next;
                self.prefetch_newest(next);
            }
            added(self.add_hashed(ahead[j % RING], allowance)?);
        }
        Ok(())
    }

    fn newest(&self) -> &Link {
        self.links.last().expect("a chain has at least one link")
    }

    /// Requests the lines an add of `h` reads and writes in the newest link, if it is big.
    fn prefetch_newest(&self, h: HashPair) {
        let newest = self.newest();
        if newest.bytes() >= PREFETCH_ALL_BYTES {
            newest.prefetch_all(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn one_by_one(chain: &mut BloomChain, items: &[Vec<u8>]) -> (Vec<bool>, Option<AddError>) {
        let mut answers = Vec::new();
        for item in items {
            match chain.add(item, &mut Allowance::unlimited()) {
                Ok(new) => answers.push(new),
                Err(e) => return (answers, Some(e)),
            }
        }
        (answers, None)
    }

    fn batched(
        chain: &mut BloomChain,
        items: &[Vec<u8>],
        allowance: &mut Allowance,
    ) -> (Vec<bool>, Option<AddError>) {
        let mut answers = Vec::new();
        let err = chain
            .add_many(items, allowance, |new| answers.push(new))
            .err();
        (answers, err)
    }

    /// Same header (counts, links) and same bits.
    fn assert_same(a: &BloomChain, b: &BloomChain) {
        assert_eq!(a.dump_header(), b.dump_header());
        for (x, y) in a.links().iter().zip(b.links()) {
            assert_eq!(x.to_le_bytes(), y.to_le_bytes());
            assert_eq!(x.count_ones(), y.count_ones());
        }
    }

    #[test]
    fn duplicate_inside_one_batch_answers_new_then_present() {
        let mut chain = BloomChain::new(100, 0.01, 2, false).unwrap();
        let items = [b"a".to_vec(), b"a".to_vec(), b"b".to_vec(), b"a".to_vec()];
        let (answers, err) = batched(&mut chain, &items, &mut Allowance::unlimited());
        assert_eq!(answers, [true, false, true, false]);
        assert_eq!(err, None);
        assert_eq!(chain.items(), 2);
    }

    #[test]
    fn chain_scales_mid_batch_as_one_by_one() {
        let items: Vec<Vec<u8>> = (0..50).map(|i| format!("s{i}").into_bytes()).collect();
        let mut a = BloomChain::new(10, 0.01, 2, false).unwrap();
        let mut b = a.clone();
        let (answers, err) = batched(&mut a, &items, &mut Allowance::unlimited());
        assert_eq!(err, None);
        assert!(a.links().len() > 1, "grew mid-batch");
        assert_eq!((answers, err), one_by_one(&mut b, &items));
        assert_same(&a, &b);
        assert_eq!(a.contains_many(&items), vec![true; items.len()]);
    }

    #[test]
    fn nonscaling_chain_fills_mid_batch_and_stops_there() {
        let items: Vec<Vec<u8>> = (0..20).map(|i| format!("f{i}").into_bytes()).collect();
        let mut a = BloomChain::new(5, 0.01, 0, true).unwrap();
        let mut b = a.clone();
        let (answers, err) = batched(&mut a, &items, &mut Allowance::unlimited());
        assert_eq!(err, Some(AddError::Full));
        assert_eq!(answers.iter().filter(|&&n| n).count(), 5);
        assert_eq!((answers, err), one_by_one(&mut b, &items));
        assert_same(&a, &b);
    }

    #[test]
    fn growth_refused_by_the_budget_mid_batch_keeps_the_items_before() {
        let items: Vec<Vec<u8>> = (0..30).map(|i| format!("m{i}").into_bytes()).collect();
        let mut a = BloomChain::new(10, 0.01, 2, false).unwrap();
        let (answers, err) = batched(&mut a, &items, &mut Allowance::new(0));
        assert_eq!(err, Some(AddError::OutOfMemory));
        assert_eq!(a.links().len(), 1);
        assert_eq!(a.items(), 10);
        // The rest goes in once memory is allowed, as a host retrying with its real budget.
        let rest = &items[answers.len()..];
        let (more, err) = batched(&mut a, rest, &mut Allowance::unlimited());
        assert_eq!(err, None);
        assert_eq!(answers.len() + more.len(), items.len());
        let mut b = BloomChain::new(10, 0.01, 2, false).unwrap();
        one_by_one(&mut b, &items);
        assert_same(&a, &b);
    }

    /// A big link takes the prefetching paths (single items and writes ahead).
    #[test]
    fn big_link_answers_as_a_small_one() {
        let mut big = BloomChain::new(5_000_000, 0.01, 2, false).unwrap();
        assert!(big.links()[0].bytes() >= PREFETCH_ALL_BYTES);
        let items: Vec<Vec<u8>> = (0..300)
            .map(|i| format!("b{}", i % 250).into_bytes())
            .collect();
        let mut answers = Vec::new();
        big.add_many(&items, &mut Allowance::unlimited(), |n| answers.push(n))
            .unwrap();
        assert_eq!(answers.iter().filter(|&&n| n).count(), 250);
        assert!(items.iter().all(|i| big.contains(i)));
        let probes: Vec<Vec<u8>> = (0..400).map(|i| format!("b{i}").into_bytes()).collect();
        let many = big.contains_many(&probes);
        let single: Vec<bool> = probes.iter().map(|p| big.contains(p)).collect();
        assert_eq!(many, single);
        assert!(many[..250].iter().all(|&p| p));
    }

    /// A link a snapshot shares (pages copied on write) answers through the slow path alike.
    #[test]
    fn shared_link_answers_alike() {
        let mut chain = BloomChain::new(1000, 0.01, 2, false).unwrap();
        let items: Vec<Vec<u8>> = (0..200).map(|i| format!("c{i}").into_bytes()).collect();
        let snapshot = chain.clone();
        chain
            .add_many(&items[..100], &mut Allowance::unlimited(), |_| {})
            .unwrap();
        assert!(chain.links()[0].bits.as_slice().is_none(), "pages copied");
        let single: Vec<bool> = items.iter().map(|p| chain.contains(p)).collect();
        assert_eq!(chain.contains_many(&items), single);
        assert!(snapshot.contains_many(&items).iter().all(|&p| !p));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Batched adds and reads answer exactly as one item at a time, with identical bits
        /// and counts, through scaling, a full non-scaling chain and duplicates.
        #[test]
        fn batched_equals_one_at_a_time(
            batches in proptest::collection::vec(
                proptest::collection::vec(0u16..300, 0..150), 1..5),
            capacity in 1u64..60,
            error in 0.001f64..0.3,
            growth in 0u32..4,
        ) {
            let nonscaling = growth == 0;
            let mut a = BloomChain::new(capacity, error, growth, nonscaling).unwrap();
            let mut b = a.clone();
            for batch in &batches {
                let items: Vec<Vec<u8>> =
                    batch.iter().map(|i| format!("p{i}").into_bytes()).collect();
                let got = batched(&mut a, &items, &mut Allowance::unlimited());
                let want = one_by_one(&mut b, &items);
                prop_assert_eq!(&got, &want);
                let probes: Vec<Vec<u8>> = (0..320).map(|i| format!("p{i}").into_bytes()).collect();
                let single: Vec<bool> = probes.iter().map(|p| b.contains(p)).collect();
                prop_assert_eq!(a.contains_many(&probes), single);
            }
            assert_same(&a, &b);
        }
    }
}
