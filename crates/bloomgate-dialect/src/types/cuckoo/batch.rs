//! Many items at once: every item hashed first, then both candidate buckets of many items
//! requested (prefetched) before any is read, so a batch against a filter far bigger than the
//! CPU cache overlaps its misses instead of taking them one after another.
//!
//! - **Reads** ([`CuckooChain::contains_many`], CF.MEXISTS): sub-filter by sub-filter, the two
//!   buckets of every item still unanswered are requested [`ITEMS_AHEAD`] items ahead of the
//!   one being read.
//! - **Inserts** ([`CuckooChain::insert_many`], CF.INSERT, CF.INSERTNX, CF.ADD, CF.ADDNX) apply
//!   strictly in order — each item sees the earlier ones, kicks and growth happen where they
//!   would one item at a time — while the two buckets of the newest sub-filter (where an
//!   insert looks first) are requested [`ITEMS_AHEAD`] items ahead.
//!
//! A bucket index is a mask, not a division, so requesting lines costs little even when the
//! filter is in cache: no size rule.

use super::{CuckooChain, InsertError, Lookup, SubFilter};
use crate::budget::Allowance;
use bloomgate::filters::{prefetch, LINES_IN_FLIGHT};

/// Items whose buckets are requested ahead of the one being read or inserted: two lines each.
const ITEMS_AHEAD: usize = LINES_IN_FLIGHT / 2;
/// Lookups an insert batch keeps (a power of two above [`ITEMS_AHEAD`]).
const RING: usize = 64;

impl Lookup {
    const EMPTY: Self = Self {
        fp: 0,
        i1: 0,
        i2: 0,
    };
}

impl SubFilter {
    /// Requests the cache lines of `l`'s two buckets.
    #[inline]
    fn prefetch(&self, l: Lookup, bucket_size: u16) {
        for i in [l.i1, l.i2] {
            prefetch(self.bucket(self.bucket_of(i), bucket_size).as_ptr());
        }
    }
}

impl CuckooChain {
    /// Whether each of `items` may be present: [`CuckooChain::contains`] of each, buckets
    /// requested ahead (see the module's notes).
    pub fn contains_many<I: AsRef<[u8]>>(&self, items: &[I]) -> Vec<bool> {
        let lookups: Vec<Lookup> = items.iter().map(|i| Lookup::of(i.as_ref())).collect();
        let mut found = vec![false; items.len()];
        let mut pending: Vec<u32> = (0..items.len() as u32).collect();
        let bs = self.bucket_size;
        for sub in &self.filters {
            if pending.is_empty() {
                break;
            }
            let at = |r: usize| lookups[pending[r] as usize];
            for r in 0..pending.len().min(ITEMS_AHEAD) {
                sub.prefetch(at(r), bs);
            }
            for r in 0..pending.len() {
                if r + ITEMS_AHEAD < pending.len() {
                    sub.prefetch(at(r + ITEMS_AHEAD), bs);
                }
                if sub.slot_of(at(r), bs).is_some() {
                    found[pending[r] as usize] = true;
                }
            }
            pending.retain(|&j| !found[j as usize]);
        }
        found
    }

    /// Inserts `items` in order — [`CuckooChain::insert_unique`] of each with `unique`, else
    /// [`CuckooChain::insert`] (`Ok(true)`) — handing each item's outcome to `inserted`: the
    /// answer, or the error that left that item out ([`InsertError::Full`],
    /// [`InsertError::MaxExpansions`]; the next item is still tried). Stops at the first
    /// [`InsertError::OutOfMemory`], which it returns without reporting that item: the items
    /// before it are in, the rest are not tried. Slots, counts and kicks are those of one
    /// insert after another.
    pub fn insert_many<I: AsRef<[u8]>>(
        &mut self,
        items: &[I],
        unique: bool,
        allowance: &mut Allowance,
        mut inserted: impl FnMut(Result<bool, InsertError>),
    ) -> Result<(), InsertError> {
        // The lookups of the items ahead, in a ring on the stack: CF.ADD (a batch of one)
        // allocates nothing.
        let mut ahead = [Lookup::EMPTY; RING];
        let lookup = |j: usize| Lookup::of(items[j].as_ref());
        for (j, slot) in ahead
            .iter_mut()
            .enumerate()
            .take(items.len().min(ITEMS_AHEAD))
        {
            *slot = lookup(j);
            self.prefetch_newest(*slot);
        }
        for j in 0..items.len() {
            if j + ITEMS_AHEAD < items.len() {
                let next = lookup(j + ITEMS_AHEAD);
                ahead[(j + ITEMS_AHEAD) % RING] = next;
                self.prefetch_newest(next);
            }
            let l = ahead[j % RING];
            let outcome = if unique {
                self.insert_unique_lookup(l, allowance)
            } else {
                self.insert_lookup(l, allowance).map(|()| true)
            };
            match outcome {
                Err(InsertError::OutOfMemory) => return Err(InsertError::OutOfMemory),
                outcome => inserted(outcome),
            }
        }
        Ok(())
    }

    fn prefetch_newest(&self, l: Lookup) {
        let newest = self.filters.last().expect("at least one sub-filter");
        newest.prefetch(l, self.bucket_size);
    }
}

#[cfg(test)]
mod tests {
    use super::super::CuckooParams;
    use super::*;
    use proptest::prelude::*;

    type Outcomes = Vec<Result<bool, InsertError>>;

    fn one_by_one(f: &mut CuckooChain, items: &[Vec<u8>], unique: bool) -> (Outcomes, bool) {
        let mut out = Vec::new();
        for item in items {
            let outcome = if unique {
                f.insert_unique(item, &mut Allowance::unlimited())
            } else {
                f.insert(item, &mut Allowance::unlimited()).map(|()| true)
            };
            if outcome == Err(InsertError::OutOfMemory) {
                return (out, true);
            }
            out.push(outcome);
        }
        (out, false)
    }

    fn batched(f: &mut CuckooChain, items: &[Vec<u8>], unique: bool) -> (Outcomes, bool) {
        let mut out = Vec::new();
        let oom = f
            .insert_many(items, unique, &mut Allowance::unlimited(), |o| out.push(o))
            .is_err();
        (out, oom)
    }

    fn chain(capacity: u64, bucket_size: u16, max_iterations: u16, expansion: u16) -> CuckooChain {
        CuckooChain::new(CuckooParams {
            capacity,
            bucket_size,
            max_iterations,
            expansion,
        })
        .unwrap()
    }

    #[test]
    fn duplicates_kicks_and_a_full_filter_inside_one_batch() {
        let items: Vec<Vec<u8>> = (0..40)
            .map(|i| format!("k{}", i % 30).into_bytes())
            .collect();
        for unique in [false, true] {
            let mut a = chain(8, 2, 20, 0);
            let mut b = a.clone();
            let got = batched(&mut a, &items, unique);
            assert!(got.0.contains(&Err(InsertError::Full)), "filled mid-batch");
            if unique {
                assert_eq!(&got.0[..3], &[Ok(true), Ok(true), Ok(true)]);
            }
            assert_eq!(got, one_by_one(&mut b, &items, unique));
            assert_eq!(a, b, "same slots, counts");
        }
        // A duplicate inside one INSERTNX batch answers 1 then 0.
        let mut f = chain(1000, 2, 20, 1);
        let (out, _) = batched(&mut f, &[b"x".to_vec(), b"x".to_vec()], true);
        assert_eq!(out, [Ok(true), Ok(false)]);
    }

    #[test]
    fn growth_refused_mid_batch_stops_there() {
        let items: Vec<Vec<u8>> = (0..40).map(|i| format!("g{i}").into_bytes()).collect();
        let mut f = chain(8, 2, 20, 2);
        let mut out = Vec::new();
        let err = f.insert_many(&items, false, &mut Allowance::new(0), |o| out.push(o));
        assert_eq!(err, Err(InsertError::OutOfMemory));
        assert!(out.len() < items.len() && out.iter().all(|o| *o == Ok(true)));
        assert_eq!(f.items(), out.len() as u64);
        assert_eq!(f.filters(), 1);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Batched inserts and reads answer as one item at a time, with identical slots and
        /// counts, through kicks, growth, a full filter and duplicates.
        #[test]
        fn batched_equals_one_at_a_time(
            batches in proptest::collection::vec(
                proptest::collection::vec(0u16..400, 0..120), 1..4),
            capacity in 4u64..80,
            bucket_size in 1u16..5,
            expansion in 0u16..3,
            unique in any::<bool>(),
        ) {
            let mut a = chain(capacity.max(2 * u64::from(bucket_size)), bucket_size, 20, expansion);
            let mut b = a.clone();
            for batch in &batches {
                let items: Vec<Vec<u8>> =
                    batch.iter().map(|i| format!("p{i}").into_bytes()).collect();
                prop_assert_eq!(batched(&mut a, &items, unique), one_by_one(&mut b, &items, unique));
                let probes: Vec<Vec<u8>> = (0..420).map(|i| format!("p{i}").into_bytes()).collect();
                let single: Vec<bool> = probes.iter().map(|p| b.contains(p)).collect();
                prop_assert_eq!(a.contains_many(&probes), single);
            }
            prop_assert_eq!(a, b);
        }
    }
}
