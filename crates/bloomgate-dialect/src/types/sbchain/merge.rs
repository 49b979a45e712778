//! The union of chains of one shape (`BF.MERGE`): the bitwise OR of each link's bits, and the
//! item counts estimated afterwards from the bits set.

use super::*;

/// Words ORed per step: a bounded buffer whatever the link's size.
const STEP_WORDS: usize = 8192;

impl BloomChain {
    /// Whether `other` has this chain's shape, so their bits can be ORed: the same options,
    /// growth factor and number of links, and per link the same bits, hashes, capacity, error
    /// rate and bits per entry (where each item's probes land, and how the chain grows).
    pub fn same_shape(&self, other: &Self) -> bool {
        self.options == other.options
            && self.growth == other.growth
            && self.links.len() == other.links.len()
            && self.links.iter().zip(other.links.iter()).all(|(a, b)| {
                a.bits.len() == b.bits.len()
                    && a.hashes == b.hashes
                    && a.capacity == b.capacity
                    && a.n2 == b.n2
                    && a.error.to_bits() == b.error.to_bits()
                    && a.bpe.to_bits() == b.bpe.to_bits()
            })
    }

    /// ORs the bits of every chain in `sources` (each of this chain's shape, see
    /// [`Self::same_shape`]) into this one, then sets each link's item count to the estimate
    /// [`estimate_items`] makes from its set bits, and the chain's to their sum.
    pub fn merge_from(&mut self, sources: &[&Self]) {
        for source in sources {
            debug_assert!(self.same_shape(source));
            for (link, other) in self.links.iter_mut().zip(source.links.iter()) {
                link.or_from(other);
            }
        }
        let mut total = 0u64;
        for link in self.links.iter_mut() {
            link.items = estimate_items(link.bits(), link.hashes(), link.count_ones());
            total = total.saturating_add(link.items);
        }
        self.items = total;
    }
}

impl Link {
    /// `self.bits |= other.bits` (same length), in bounded steps, keeping the set-bit count.
    fn or_from(&mut self, other: &Link) {
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
