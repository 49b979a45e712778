//! The scalable Bloom filter behind `BF.*`: one chain ([`Chain`], `chain.rs`: the scaling rule,
//! batched and prefetched probes, the SCANDUMP/LOADCHUNK body) over a link type ([`ChainLink`],
//! `link.rs`), of which there are three:
//!
//! - [`classic`]: RedisBloom's SBChain link (`MBbloom--`) — its exact link sizing, MurmurHash64A
//!   double hashing, dump header and RDB field order, so dumps move between RedisBloom and
//!   bloomgate unchanged ([`BloomChain`]);
//! - [`blocked`]: our cache-line blocked link (`BGbloomBK`, `BF.RESERVE … LAYOUT blocked`), the
//!   core's blocked filter, one memory access per link ([`BlockedChain`]);
//! - [`valkey`]: valkey-bloom's filter (`bloomfltr`) — SipHash-1-3 indexing as its `bloomfilter`
//!   crate does, its RDB encodings 0 and 1 and its `BF.LOAD` payload ([`ValkeyChain`]).
//!
//! What every chain shares is here: the argument ranges of `BF.RESERVE`, the errors of an add
//! and of LOADCHUNK, and C's `%g` that `BF.DEBUG` prints error rates with.
//!
//! Implemented from RedisBloom's documented formats and observed behaviour, not from its source.

pub mod blocked;
mod chain;
pub mod classic;
mod link;
mod tally;
pub mod valkey;

pub use blocked::BlockedLink;
pub use chain::{Chain, ChainPlan, ChainShape, PREFETCH_ALL_BYTES};
pub use classic::{
    estimate_items, HashPair, Link, LinkPlan, LinkSizing, Options, DEFAULT_OPTIONS,
    OPT_ENTS_IS_BITS, OPT_FORCE64, OPT_NOROUND, OPT_NO_SCALING,
};
pub use link::{ChainLink, LinkCounts, LinkHealth, MergeLink};
pub use tally::{Tally, TallyReading};
pub use valkey::{ValkeyFlavour, ValkeyLink};

/// RedisBloom's scalable Bloom filter (`MBbloom--`): a chain of classic links.
pub type BloomChain = Chain<Link>;
/// The blocked scalable Bloom filter (`BGbloomBK`): a chain of blocked links.
pub type BlockedChain = Chain<BlockedLink>;
/// valkey-bloom's scalable Bloom filter (`bloomfltr`): a chain of valkey links.
pub type ValkeyChain = Chain<ValkeyLink>;

/// Largest growth factor: what `BF.RESERVE … EXPANSION` accepts (RedisBloom's cap). A loaded
/// header may not claim more: the growth factor sizes the next link.
pub const MAX_GROWTH: u32 = 32768;
/// Largest capacity `BF.RESERVE` takes (and the Bloom-family types built like it, `CBF.*` and
/// `WF.*`).
pub const MAX_CAPACITY: u64 = 1 << 30;

/// `BF.RESERVE`'s error-rate range, (0, 1), with its refusal.
pub fn check_error_rate(error: f64) -> Result<(), &'static str> {
    if error > 0.0 && error < 1.0 {
        Ok(())
    } else {
        Err("ERR error rate must be in the range (0.000000, 1.000000)")
    }
}

/// `BF.RESERVE`'s capacity range, [1, [`MAX_CAPACITY`]], with its refusal.
pub fn check_capacity(capacity: u64) -> Result<(), &'static str> {
    if (1..=MAX_CAPACITY).contains(&capacity) {
        Ok(())
    } else {
        Err("ERR capacity must be in the range [1, 1073741824]")
    }
}

/// SCANDUMP never returns more than 16 MiB in one chunk.
pub const MAX_SCANDUMP_CHUNK: u64 = crate::codec::chunks::CHUNK_BYTES;

/// LOADCHUNK: a header or chunk that fails validation.
pub const ERR_BAD_DATA: &str = "ERR received bad data";
/// LOADCHUNK: an offset outside every link.
pub const ERR_NO_LINK: &str = "ERR invalid offset - no link found";
/// LOADCHUNK: a chunk running past its link.
pub const ERR_CHUNK_TOO_BIG: &str = "ERR invalid chunk - Too big for current filter";

/// Why an add did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddError {
    /// Non-scaling filter at capacity: `ERR non scaling filter is full`.
    Full,
    /// A new link could not be built: `ERR problem inserting into filter`.
    GrowFailed,
    /// A new link would exceed the memory budget.
    OutOfMemory,
    /// A new link would take the chain past `bloom-memory-usage-limit`.
    OverCap,
}

impl AddError {
    /// RedisBloom's error text.
    pub fn message(self) -> &'static str {
        match self {
            AddError::Full => "ERR non scaling filter is full",
            AddError::GrowFailed => "ERR problem inserting into filter",
            AddError::OutOfMemory => crate::ERR_OOM,
            AddError::OverCap => crate::ERR_CAP,
        }
    }

    /// The error for a new link the allowance refused.
    pub(crate) fn refused(over: crate::budget::OverBudget) -> Self {
        match over.limit {
            crate::budget::Limit::Memory => AddError::OutOfMemory,
            crate::budget::Limit::KeyCap => AddError::OverCap,
        }
    }
}

/// `len` bytes of the little-endian image of `words` from byte `offset` (inside the words).
fn le_bytes(words: &[u64], offset: usize, len: usize) -> Vec<u8> {
    let first = offset / 8;
    let last = (offset + len).div_ceil(8);
    let mut out: Vec<u8> = words[first..last]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    out.drain(..offset - first * 8);
    out.truncate(len);
    out
}

/// Overwrites the little-endian image of `words` at byte `offset` with `data` (inside them).
fn patch_le_bytes(words: &mut [u64], offset: usize, data: &[u8]) {
    for (i, &byte) in data.iter().enumerate() {
        let b = offset + i;
        let shift = (b & 7) * 8;
        let word = &mut words[b >> 3];
        *word = (*word & !(0xffu64 << shift)) | (u64::from(byte) << shift);
    }
}

/// Hands the little-endian image of each slice of words to `f`, in pieces of at most 64 KiB.
fn visit_le_words<'a>(pieces: impl Iterator<Item = &'a [u64]>, f: &mut dyn FnMut(&[u8])) {
    const PIECE: usize = 64 << 10;
    let mut buf = Vec::with_capacity(PIECE);
    for piece in pieces {
        for words in piece.chunks(PIECE / 8) {
            buf.clear();
            buf.extend(words.iter().flat_map(|w| w.to_le_bytes()));
            f(&buf);
        }
    }
}

/// C's `printf("%g", x)`: 6 significant digits, trailing zeros removed, exponent form when the
/// decimal exponent is < -4 or ≥ 6.
pub fn format_g(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let sci = format!("{x:.5e}");
    let (mantissa, exp) = sci.split_once('e').expect("exponent form");
    let exp: i32 = exp.parse().expect("integer exponent");
    if !(-4..6).contains(&exp) {
        let mantissa = strip_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (5 - exp) as usize;
        strip_zeros(&format!("{x:.decimals$}")).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Allowance;
    use proptest::prelude::*;

    #[test]
    fn format_g_matches_c() {
        assert_eq!(format_g(0.005), "0.005");
        assert_eq!(format_g(0.000625), "0.000625");
        assert_eq!(format_g(0.0000625), "6.25e-05");
        assert_eq!(format_g(0.01), "0.01");
        assert_eq!(format_g(1234567.0), "1.23457e+06");
        assert_eq!(format_g(0.1), "0.1");
    }

    #[test]
    fn le_images_read_and_patch_any_range() {
        let mut words = vec![0u64; 4];
        patch_le_bytes(&mut words, 3, &[1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(le_bytes(&words, 3, 7), [1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(le_bytes(&words, 0, 4), [0, 0, 0, 1]);
        let mut all = Vec::new();
        visit_le_words([&words[..2], &words[2..]].into_iter(), &mut |b| {
            all.extend_from_slice(b)
        });
        assert_eq!(all, le_bytes(&words, 0, 32));
    }

    fn one_by_one<L: ChainLink>(
        chain: &mut Chain<L>,
        items: &[Vec<u8>],
    ) -> (Vec<bool>, Option<AddError>) {
        let mut answers = Vec::new();
        for item in items {
            match chain.add(item, &mut Allowance::unlimited()) {
                Ok(new) => answers.push(new),
                Err(e) => return (answers, Some(e)),
            }
        }
        (answers, None)
    }

    fn batched<L: ChainLink>(
        chain: &mut Chain<L>,
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
    fn assert_same<L: ChainLink>(a: &Chain<L>, b: &Chain<L>) {
        assert_eq!(a.dump_header(), b.dump_header());
        let body = |c: &Chain<L>| {
            let mut all = Vec::new();
            c.visit_bits(&mut |b| all.extend_from_slice(b));
            all
        };
        assert_eq!(body(a), body(b));
    }

    /// Every behaviour of the chain, for a link type.
    fn chain_rules<L: ChainLink>() {
        // A duplicate inside one batch answers new, then present.
        let mut chain = Chain::<L>::new(100, 0.01, 2, false).unwrap();
        let items = [b"a".to_vec(), b"a".to_vec(), b"b".to_vec(), b"a".to_vec()];
        let (answers, err) = batched(&mut chain, &items, &mut Allowance::unlimited());
        assert_eq!((answers, err), (vec![true, false, true, false], None));
        assert_eq!(chain.items(), 2);
        // The chain scales mid-batch as one by one.
        let items: Vec<Vec<u8>> = (0..50).map(|i| format!("s{i}").into_bytes()).collect();
        let mut a = Chain::<L>::new(10, 0.01, 2, false).unwrap();
        let mut b = a.clone();
        let (answers, err) = batched(&mut a, &items, &mut Allowance::unlimited());
        assert_eq!(err, None);
        assert!(a.links().len() > 1, "grew mid-batch");
        let caps: Vec<u64> = a.links().iter().map(|l| l.capacity()).collect();
        assert_eq!(&caps[..3], &[10, 20, 40]);
        let errors: Vec<f64> = a.links().iter().map(|l| l.error()).collect();
        assert_eq!(&errors[..3], &[0.005, 0.0025, 0.00125]);
        assert_eq!((answers, err), one_by_one(&mut b, &items));
        assert_same(&a, &b);
        assert_eq!(a.contains_many(&items), vec![true; items.len()]);
        // A non-scaling chain fills mid-batch and stops there.
        let items: Vec<Vec<u8>> = (0..20).map(|i| format!("f{i}").into_bytes()).collect();
        let mut a = Chain::<L>::new(5, 0.01, 0, true).unwrap();
        let mut b = a.clone();
        let (answers, err) = batched(&mut a, &items, &mut Allowance::unlimited());
        assert_eq!(err, Some(AddError::Full));
        assert_eq!(answers.iter().filter(|&&n| n).count(), 5);
        assert_eq!((answers, err), one_by_one(&mut b, &items));
        assert_same(&a, &b);
        assert_eq!(a.links().len(), 1);
        // Growth refused by the budget mid-batch keeps the items before; the rest goes in
        // once memory is allowed, as a host retrying with its real budget.
        let items: Vec<Vec<u8>> = (0..30).map(|i| format!("m{i}").into_bytes()).collect();
        let mut a = Chain::<L>::new(10, 0.01, 2, false).unwrap();
        let (answers, err) = batched(&mut a, &items, &mut Allowance::new(0));
        assert_eq!(err, Some(AddError::OutOfMemory));
        assert_eq!((a.links().len(), a.items()), (1, 10));
        let (more, err) = batched(&mut a, &items[answers.len()..], &mut Allowance::unlimited());
        assert_eq!(err, None);
        assert_eq!(answers.len() + more.len(), items.len());
        let mut b = Chain::<L>::new(10, 0.01, 2, false).unwrap();
        one_by_one(&mut b, &items);
        assert_same(&a, &b);
        // A growth factor refused by the budget on a single add.
        let mut small = Chain::<L>::new(1, 0.01, 1000, false).unwrap();
        small.add(b"a", &mut Allowance::new(0)).unwrap();
        assert_eq!(
            small.add(b"b", &mut Allowance::new(16)),
            Err(AddError::OutOfMemory)
        );
    }

    #[test]
    fn classic_chain_rules() {
        chain_rules::<Link>();
    }

    #[test]
    fn blocked_chain_rules() {
        chain_rules::<BlockedLink>();
    }

    /// A big link takes the prefetching paths (single items and writes ahead).
    fn big_link_answers_as_a_small_one<L: ChainLink>() {
        let mut big = Chain::<L>::new(5_000_000, 0.01, 2, false).unwrap();
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

    #[test]
    fn big_links_answer_as_small_ones() {
        big_link_answers_as_a_small_one::<Link>();
        big_link_answers_as_a_small_one::<BlockedLink>();
        big_link_answers_as_a_small_one::<ValkeyLink>();
    }

    /// Batched adds and reads answer exactly as one item at a time, with identical bits and
    /// counts, through scaling, a full non-scaling chain and duplicates; and a SCANDUMP /
    /// LOADCHUNK round trip gives back the same bytes, never a false negative.
    fn batched_equals_one_at_a_time<L: ChainLink>(
        batches: &[Vec<u16>],
        capacity: u64,
        error: f64,
        growth: u32,
    ) -> Result<(), TestCaseError> {
        let nonscaling = growth == 0;
        let mut a = Chain::<L>::new(capacity, error, growth, nonscaling).unwrap();
        let mut b = a.clone();
        for batch in batches {
            let items: Vec<Vec<u8>> = batch.iter().map(|i| format!("p{i}").into_bytes()).collect();
            let got = batched(&mut a, &items, &mut Allowance::unlimited());
            let want = one_by_one(&mut b, &items);
            prop_assert_eq!(&got, &want);
            let probes: Vec<Vec<u8>> = (0..320).map(|i| format!("p{i}").into_bytes()).collect();
            let single: Vec<bool> = probes.iter().map(|p| b.contains(p)).collect();
            prop_assert_eq!(a.contains_many(&probes), single);
        }
        assert_same(&a, &b);
        let mut copy = Chain::<L>::from_header(&a.dump_header()).unwrap();
        for (iter, len) in a.chunk_plan() {
            copy.load_chunk(iter, &a.chunk_bytes(iter, len)).unwrap();
        }
        assert_same(&a, &copy);
        // A scaling chain took every item: never a false negative, in the copy too.
        for item in batches.iter().flatten().filter(|_| !nonscaling) {
            let item = format!("p{item}");
            prop_assert!(copy.contains(item.as_bytes()));
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn batched_equals_one_at_a_time_for_every_link(
            batches in proptest::collection::vec(
                proptest::collection::vec(0u16..300, 0..150), 1..5),
            capacity in 1u64..60,
            error in 0.001f64..0.3,
            growth in 0u32..4,
        ) {
            batched_equals_one_at_a_time::<Link>(&batches, capacity, error, growth)?;
            batched_equals_one_at_a_time::<BlockedLink>(&batches, capacity, error, growth)?;
            batched_equals_one_at_a_time::<ValkeyLink>(&batches, capacity, error, growth)?;
        }
    }
}
