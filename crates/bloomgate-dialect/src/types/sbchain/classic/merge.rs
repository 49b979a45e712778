//! The union of classic links (`BF.MERGE`, through [`Chain::merge_from`]): the bitwise OR of
//! their bits, and the item count estimated afterwards from the bits set.

use super::*;
use crate::types::sbchain::MergeLink;

/// Words ORed per step: a bounded buffer whatever the link's size.
const STEP_WORDS: usize = 8192;

impl MergeLink for Link {
    /// The same bits, hashes, capacity, error rate, bits per entry and n2: where each item's
    /// probes land, and how the chain grows.
    fn same_shape(&self, other: &Self) -> bool {
        self.bits.len() == other.bits.len()
            && self.hashes == other.hashes
            && self.counts.capacity == other.counts.capacity
            && self.n2 == other.n2
            && self.counts.error.to_bits() == other.counts.error.to_bits()
            && self.bpe.to_bits() == other.bpe.to_bits()
    }

    /// In bounded steps, keeping the set-bit count.
    fn or_from(&mut self, other: &Self) {
        let len = self.bits.len();
        let mut at = 0;
        while at < len {
            let n = STEP_WORDS.min(len - at);
            let theirs = other.bits.read(at, n).expect("same length");
            let mut ours = self.bits.read(at, n).expect("inside the link");
            let before = popcount(&ours);
            for (w, t) in ours.iter_mut().zip(&theirs) {
                *w |= t;
            }
            let after = popcount(&ours);
            if after != before {
                // Only changed words are written: a segment a snapshot shares is copied only
                // where the union differs.
                self.ones.adjust(after, before);
                self.bits.write(at, &ours);
            }
            at += n;
        }
    }

    /// [`estimate_items`] of the link's kept set-bit count.
    fn estimated_items(&self) -> u64 {
        estimate_items(self.bits(), self.hashes(), self.count_ones())
    }
}

/// The number of distinct items a Bloom filter of `bits` bits and `hashes` probes per item most
/// likely holds when `ones` of its bits are set: `n ≈ −(m/k)·ln(1 − X/m)` (m bits, k hashes,
/// X set), rounded to the nearest integer. A filter with every bit set says only that it is
/// saturated: its estimate is that of one bit short of full.
pub fn estimate_items(bits: u64, hashes: u32, ones: u64) -> u64 {
    if bits == 0 || hashes == 0 || ones == 0 {
        return 0;
    }
    let m = bits as f64;
    let x = (ones.min(bits - 1)) as f64;
    let n = -(m / f64::from(hashes)) * (-x / m).ln_1p();
    n.round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Allowance;
    use crate::types::sbchain::BloomChain;

    fn filled(range: std::ops::Range<u32>) -> BloomChain {
        let mut chain = BloomChain::new(100_000, 0.01, 2, false).unwrap();
        for i in range {
            chain
                .add(&i.to_le_bytes(), &mut Allowance::unlimited())
                .unwrap();
        }
        chain
    }

    #[test]
    fn union_holds_every_item_and_estimates_its_size() {
        let a = filled(0..40_000);
        let b = filled(30_000..70_000);
        assert!(a.same_shape(&b));
        let mut dest = a.clone();
        dest.merge_from(&[&b]);
        assert!((0..70_000u32).all(|i| dest.contains(&i.to_le_bytes())));
        let fp = (1_000_000..1_100_000u32)
            .filter(|i| dest.contains(&i.to_le_bytes()))
            .count();
        assert!(fp <= 2_000, "{fp} false positives in 100k");
        let card = dest.items() as f64;
        assert!((card - 70_000.0).abs() <= 3_500.0, "{card}");
        for link in dest.links() {
            assert_eq!(link.count_ones(), link.count_ones_walking());
        }
        // The estimate of a single filter is close to what it counted.
        let mut alone = a.clone();
        alone.merge_from(&[]);
        assert!((alone.items() as f64 - 40_000.0).abs() <= 2_000.0);
    }

    #[test]
    fn shapes_must_agree() {
        let a = BloomChain::new(100, 0.01, 2, false).unwrap();
        assert!(a.same_shape(&BloomChain::new(100, 0.01, 2, false).unwrap()));
        for other in [
            BloomChain::new(101, 0.01, 2, false),
            BloomChain::new(100, 0.02, 2, false),
            BloomChain::new(100, 0.01, 4, false),
            BloomChain::new(100, 0.01, 2, true),
        ] {
            assert!(!a.same_shape(&other.unwrap()));
        }
        // A chain that scaled has another link.
        let mut grown = BloomChain::new(10, 0.01, 2, false).unwrap();
        for i in 0..30u32 {
            grown
                .add(&i.to_le_bytes(), &mut Allowance::unlimited())
                .unwrap();
        }
        assert!(!BloomChain::new(10, 0.01, 2, false)
            .unwrap()
            .same_shape(&grown));
    }

    #[test]
    fn estimate_edges() {
        assert_eq!(estimate_items(1024, 7, 0), 0);
        assert!(estimate_items(1024, 7, 1024) > estimate_items(1024, 7, 1000));
        // One item sets k bits: the estimate of k bits set is about one.
        assert_eq!(estimate_items(1 << 20, 7, 7), 1);
    }
}
