//! The blocked link (`BF.RESERVE … LAYOUT blocked`, our type `BGbloomBK`): the core's cache-line
//! blocked filter ([`BlockedBloomFilter`]: every probe of an item inside one 64-byte block, so a
//! query costs one memory access per link instead of one per probe), in the one chain
//! ([`super::BlockedChain`]). Each link is sized by the core's exact blocked model, so its
//! *measured* false-positive rate meets the link's error rate (a blocked link needs more bits
//! per item than a classic one at the same rate: ~10.1 against 9.6 at 1%, ~15.7 against 14.4 at
//! 0.1%).
//!
//! Items are hashed once (XXH3-128 with the core's default seed) for every link. It is not
//! RedisBloom's format and RedisBloom cannot load it: its own type name keeps it apart.
//!
//! # Dump format (`BF.SCANDUMP` / `BF.LOADCHUNK`, RDB)
//! The header (iterator 0 → `[1, header]`), little-endian: magic `BGBK`, format version `1`,
//! `u8 flags` (bit 0: non-scaling), `u16 0`, `u64 items`, `u32 growth`, `u32 links`, then per
//! link `u64 capacity, f64 error, u64 items, u64 bits, u32 hashes`. Then the links' bit arrays
//! (the core's word order, each word little-endian), in the chain's chunks. Its RDB value is
//! that dump stream: the header as one string, then each chunk as a string.

use super::link::{ChainLink, LinkCounts, LinkHealth};
use super::{
    format_g, le_bytes, patch_le_bytes, visit_le_words, Chain, ChainShape, ERR_BAD_DATA, MAX_GROWTH,
};
use crate::budget::{Admitted, Shape};
use crate::codec::rdb_io::{RdbError, RdbSink, RdbSource};
use bloomgate::hash::DEFAULT_SEED;
use bloomgate::relocate::Walk;
use bloomgate::{BlockedBloomFilter, KeyHash, Layout, Params};

/// The dump header's first bytes; a classic header cannot start so (its first field is an
/// item count).
pub const BLOCKED_MAGIC: &[u8; 4] = b"BGBK";
const FORMAT_VERSION: u8 = 1;
const FLAG_NONSCALING: u8 = 1;
/// Fixed part of the header: magic, version, flags, reserved, items, growth, link count.
pub const HEADER_FIXED: usize = 4 + 1 + 1 + 2 + 8 + 4 + 4;
const HEADER_LINK: usize = 8 + 8 + 8 + 8 + 4;
/// Most links a header may declare (a chain growing by 1 from capacity 1 stops far earlier).
const MAX_LINKS: usize = 1 << 16;
/// The longest RDB header string read: [`MAX_LINKS`] links' worth, and then some.
const MAX_RDB_HEADER: u64 = 4 << 20;

/// Whether a blocked chain grows: its one setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scaling {
    /// Grows by a link when the newest is full.
    Grows,
    /// Refuses items once its one link is full.
    Fixed,
}

/// One blocked link: the core filter and what the chain's rule needs of it.
#[derive(Clone, Debug)]
pub struct BlockedLink {
    filter: BlockedBloomFilter,
    counts: LinkCounts,
}

/// A blocked link sized for its capacity and error rate by the core's blocked model, not yet
/// allocated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockedLinkPlan {
    capacity: u64,
    error: f64,
    params: Params,
}

impl Shape for BlockedLinkPlan {
    fn bytes(&self) -> u64 {
        self.params.bytes()
    }
}

impl BlockedLink {
    /// Probes per item.
    pub fn hashes(&self) -> u32 {
        self.filter.params().hashes
    }
    /// The core filter.
    pub fn filter(&self) -> &BlockedBloomFilter {
        &self.filter
    }
}

impl ChainLink for BlockedLink {
    const LAYOUT: &'static str = "blocked";
    const TYPE_NAME: &'static str = "BGbloomBK";
    const ENCODING_VERSION: i32 = 1;
    const HEADER_PREFIX: usize = HEADER_FIXED;
    const MAGIC: Option<&'static [u8]> = Some(BLOCKED_MAGIC);
    type Settings = Scaling;
    type Hash = KeyHash;
    type Plan = BlockedLinkPlan;

    fn settings(nonscaling: bool) -> Scaling {
        if nonscaling {
            Scaling::Fixed
        } else {
            Scaling::Grows
        }
    }
    fn scales(settings: &Scaling) -> bool {
        *settings == Scaling::Grows
    }
    fn hash(_: &Scaling, item: &[u8]) -> KeyHash {
        KeyHash::of(item, DEFAULT_SEED)
    }

    fn plan(capacity: u64, error: f64) -> Option<BlockedLinkPlan> {
        let params = Params::for_items(Layout::Blocked, capacity, error).ok()?;
        Some(BlockedLinkPlan {
            capacity,
            error,
            params,
        })
    }
    fn allocate(plan: Admitted<BlockedLinkPlan>) -> Option<Self> {
        let plan = plan.into_shape();
        Some(Self {
            filter: BlockedBloomFilter::with_params(plan.params, DEFAULT_SEED).ok()?,
            counts: LinkCounts {
                capacity: plan.capacity,
                error: plan.error,
                items: 0,
            },
        })
    }

    fn contains(&self, h: KeyHash) -> bool {
        self.filter.contains_hash(h)
    }
    fn insert(&mut self, h: KeyHash) -> bool {
        !self.filter.insert_hash(h)
    }
    /// The item's one block.
    fn prefetch(&self, h: KeyHash) {
        self.filter.prefetch_hash(h);
    }
    fn lines(&self) -> usize {
        1
    }
    /// Through the core's batched query (hashes ahead, every block prefetched).
    fn retain_present(&self, hashes: &[KeyHash], pending: &mut Vec<u32>) {
        let asked: Vec<KeyHash> = pending.iter().map(|&j| hashes[j as usize]).collect();
        let mut answers = Vec::with_capacity(asked.len());
        self.filter.contains_batch_hashes(&asked, &mut answers);
        let mut answer = answers.into_iter();
        pending.retain(|_| answer.next().unwrap_or(false));
    }

    fn counts(&self) -> &LinkCounts {
        &self.counts
    }
    fn counts_mut(&mut self) -> &mut LinkCounts {
        &mut self.counts
    }
    fn bytes(&self) -> u64 {
        self.filter.params().bytes()
    }
    fn read_le_bytes(&self, offset: u64, len: u64) -> Vec<u8> {
        le_bytes(self.filter.words(), offset as usize, len as usize)
    }
    fn write_le_bytes(&mut self, offset: u64, data: &[u8]) {
        patch_le_bytes(self.filter.words_mut(), offset as usize, data);
    }
    fn visit_le_bytes(&self, f: &mut dyn FnMut(&[u8])) {
        visit_le_words(std::iter::once(self.filter.words()), f);
    }
    fn heap_bytes(&self) -> u64 {
        self.bytes()
    }
    fn relocate(&mut self, walk: &mut Walk<'_>) {
        self.filter.relocate(walk);
    }

    /// From the link's item count and the core's blocked model, never a walk of the bits.
    fn health(&self) -> LinkHealth {
        let params = self.filter.params();
        let (m, k) = (params.bits as f64, f64::from(params.hashes));
        LinkHealth {
            ones: m * -(-k * self.counts.items as f64 / m).exp_m1(),
            bits: params.bits,
            fpr: params.fpr_at(self.counts.items),
        }
    }

    /// The classic's fields, `layout:blocked` last.
    fn debug_line(&self) -> String {
        format!(
            "bytes:{} bits:{} hashes:{} hashwidth:64 capacity:{} size:{} ratio:{} layout:blocked",
            self.bytes(),
            self.bytes() * 8,
            self.hashes(),
            self.counts.capacity,
            self.counts.items,
            format_g(self.counts.error)
        )
    }

    fn dump_header(chain: &Chain<Self>) -> Vec<u8> {
        let links = chain.links();
        let mut out = Vec::with_capacity(HEADER_FIXED + HEADER_LINK * links.len());
        out.extend_from_slice(BLOCKED_MAGIC);
        out.push(FORMAT_VERSION);
        out.push(if chain.is_scaling() {
            0
        } else {
            FLAG_NONSCALING
        });
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&chain.items().to_le_bytes());
        out.extend_from_slice(&chain.growth().to_le_bytes());
        out.extend_from_slice(&(links.len() as u32).to_le_bytes());
        for link in links {
            out.extend_from_slice(&link.counts.capacity.to_le_bytes());
            out.extend_from_slice(&link.counts.error.to_le_bytes());
            out.extend_from_slice(&link.counts.items.to_le_bytes());
            out.extend_from_slice(&(link.bytes() * 8).to_le_bytes());
            out.extend_from_slice(&link.hashes().to_le_bytes());
        }
        out
    }

    fn header_len(buf: &[u8]) -> Option<usize> {
        let links = u32::from_le_bytes(buf.get(20..24)?.try_into().ok()?) as usize;
        links.checked_mul(HEADER_LINK)?.checked_add(HEADER_FIXED)
    }

    /// Refused with `ERR received bad data`: a wrong magic, version, flag or length; no link or
    /// more than 65536; a growth above BF.RESERVE's cap; a link whose capacity is 0, whose
    /// error is outside (0, 1), whose bits and hashes the core refuses for a blocked filter (a
    /// positive multiple of 512 bits, at most 1 TiB; 1 to 64 probes); and what every format's
    /// shape checks (`ChainShape::new`). The memory budget is then checked by the caller.
    fn parse_header(header: &[u8]) -> Result<ChainShape<Self>, &'static str> {
        let bad = ERR_BAD_DATA;
        if header.len() < HEADER_FIXED || &header[..4] != BLOCKED_MAGIC {
            return Err(bad);
        }
        let u64_at = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8"));
        let u32_at = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4"));
        let (version, flags) = (header[4], header[5]);
        let items = u64_at(8);
        let growth = u32_at(16);
        let count = u32_at(20) as usize;
        if version != FORMAT_VERSION
            || flags & !FLAG_NONSCALING != 0
            || header[6..8] != [0, 0]
            || growth > MAX_GROWTH
            || !(1..=MAX_LINKS).contains(&count)
            || header.len() != HEADER_FIXED + HEADER_LINK * count
        {
            return Err(bad);
        }
        let mut links = Vec::with_capacity(count);
        for i in 0..count {
            let at = HEADER_FIXED + HEADER_LINK * i;
            let capacity = u64_at(at);
            let error = f64::from_le_bytes(header[at + 8..at + 16].try_into().expect("8"));
            let link_items = u64_at(at + 16);
            let bits = u64_at(at + 24);
            let hashes = u32_at(at + 32);
            if capacity == 0 || !(error > 0.0 && error < 1.0) {
                return Err(bad);
            }
            let params = Params::new(Layout::Blocked, bits, hashes, capacity).map_err(|_| bad)?;
            if params.bits != bits {
                return Err(bad);
            }
            let plan = BlockedLinkPlan {
                capacity,
                error,
                params,
            };
            let counts = LinkCounts {
                capacity,
                error,
                items: link_items,
            };
            links.push((plan, counts));
        }
        let nonscaling = flags & FLAG_NONSCALING != 0;
        ChainShape::new(links, items, growth, Self::settings(nonscaling))
    }

    fn rdb_save(chain: &Chain<Self>, out: &mut impl RdbSink) {
        chain.save_dump_stream(out);
    }
    fn rdb_load(input: &mut impl RdbSource, encver: i32) -> Result<Chain<Self>, RdbError> {
        Chain::load_dump_stream(input, encver, MAX_RDB_HEADER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Allowance;
    use crate::types::sbchain::{BlockedChain, ERR_CHUNK_TOO_BIG, ERR_NO_LINK};

    /// The measured rate of a filter filled to capacity meets the requested rate, at 1% and
    /// 0.1% on 100k absent items: a non-scaling link at the rate itself, and a scaling chain
    /// grown to several links.
    #[test]
    fn measured_fpr_meets_the_error_rate() {
        for (error, capacity) in [(0.01, 20_000u64), (0.001, 20_000)] {
            for nonscaling in [true, false] {
                let mut chain = BlockedChain::new(capacity, error, 2, nonscaling).unwrap();
                let fill = if nonscaling { capacity } else { capacity * 4 };
                for i in 0..fill {
                    chain
                        .add(&i.to_le_bytes(), &mut Allowance::unlimited())
                        .unwrap();
                }
                if !nonscaling {
                    assert!(chain.links().len() >= 2);
                }
                let absent: Vec<[u8; 8]> = (0..100_000u64)
                    .map(|i| (u64::MAX - i).to_le_bytes())
                    .collect();
                let positives = chain.contains_many(&absent).iter().filter(|&&b| b).count();
                let measured = positives as f64 / absent.len() as f64;
                // A link at exactly the rate measures it up to sampling error (three standard
                // deviations of 100k trials); a scaling chain's links are at half the rate
                // and below, so it measures under the rate itself.
                let bound = if nonscaling {
                    error + 3.0 * (error / absent.len() as f64).sqrt()
                } else {
                    error
                };
                assert!(
                    measured <= bound,
                    "error {error} nonscaling {nonscaling}: measured {measured}"
                );
            }
        }
    }

    #[test]
    fn header_validation_rejects_each_bad_field() {
        let chain = BlockedChain::new(100, 0.01, 2, false).unwrap();
        let good = chain.dump_header();
        assert_eq!(BlockedChain::header_len(&good), Some(good.len()));
        assert!(BlockedChain::shape(&good).is_ok());
        let corrupt = |at: usize, bytes: &[u8]| {
            let mut h = good.clone();
            h[at..at + bytes.len()].copy_from_slice(bytes);
            BlockedChain::shape(&h).err()
        };
        assert_eq!(corrupt(0, b"X"), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(4, &[2]), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(5, &[2]), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(8, &1u64.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(16, &40000u32.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(20, &2u32.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(24, &0u64.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(32, &1.5f64.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(32, &f64::NAN.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(48, &100u64.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(48, &(1u64 << 50).to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(56, &0u32.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(56, &65u32.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(
            BlockedChain::shape(&good[..good.len() - 1]).err(),
            Some(ERR_BAD_DATA)
        );
        assert_eq!(BlockedChain::shape(&[]).err(), Some(ERR_BAD_DATA));
        // A header declaring more than the budget is refused before allocating.
        let mut huge = good.clone();
        huge[48..56].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let shape = BlockedChain::shape(&huge).unwrap();
        assert!(Allowance::new(1 << 20).admit(shape).is_err());
    }

    #[test]
    fn load_chunk_bounds() {
        let chain = BlockedChain::new(100, 0.01, 2, false).unwrap();
        let bytes = chain.links()[0].bytes();
        let mut copy = BlockedChain::from_header(&chain.dump_header()).unwrap();
        assert_eq!(copy.load_chunk(0, &[1]), Err(ERR_BAD_DATA));
        assert_eq!(copy.load_chunk(3, &[1; 4]), Err(ERR_BAD_DATA));
        assert_eq!(copy.load_chunk(4, &[1; 4]), Err(ERR_NO_LINK));
        let over = vec![1u8; bytes as usize + 1];
        assert_eq!(
            copy.load_chunk(bytes as i64 + 2, &over),
            Err(ERR_CHUNK_TOO_BIG)
        );
        assert_eq!(copy.load_chunk(i64::MAX, &[1]), Err(ERR_NO_LINK));
        let full = vec![0xffu8; bytes as usize];
        assert_eq!(copy.load_chunk(bytes as i64 + 1, &full), Ok(()));
        assert!(copy.contains(b"anything"));
        // An unaligned piece lands where the classic chain's would.
        assert_eq!(copy.load_chunk(14, &[0x0f; 3]), Ok(()));
        assert_eq!(copy.dump_chunk(9).1[..5], [0xff, 0xff, 0x0f, 0x0f, 0x0f]);
    }
}
