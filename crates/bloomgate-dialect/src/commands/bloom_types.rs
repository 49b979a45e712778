//! The two value types every BF.* command accepts — RedisBloom's classic chain (`MBbloom--`)
//! and our blocked chain (`BGbloomBK`, `LAYOUT blocked`) — seen through one trait, and which of
//! them a key holds, so each BF.* handler is written once over [`BloomType`].

use super::host::{Args, Ctx, Host};
use crate::budget::Allowance;
use crate::reply::Reply;
use crate::types::sbchain::{AddError, BlockedChain, BloomChain};
use crate::value::DialectType;

/// The bit layout of a Bloom chain: `BF.RESERVE … LAYOUT classic|blocked`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BloomLayout {
    /// RedisBloom's layout and type (`MBbloom--`): k probes over the whole link.
    Classic,
    /// Every probe of an item in one 64-byte block of the link (`BGbloomBK`).
    Blocked,
}

impl BloomLayout {
    /// The layout a `LAYOUT` argument names (any case).
    pub fn parse(arg: &[u8]) -> Option<Self> {
        if arg.eq_ignore_ascii_case(b"classic") {
            Some(Self::Classic)
        } else if arg.eq_ignore_ascii_case(b"blocked") {
            Some(Self::Blocked)
        } else {
            None
        }
    }

    /// The argument naming the layout.
    pub fn name(self) -> &'static str {
        match self {
            Self::Classic => "classic",
            Self::Blocked => "blocked",
        }
    }

    /// Which Bloom chain `key` holds: `Ok(None)` if none, WRONGTYPE if a value of another type.
    /// One lookup, and nothing allocated unless it answers WRONGTYPE (BF.ADD and BF.EXISTS on
    /// an existing key allocate nothing).
    pub(super) fn at<H: Host + ?Sized>(
        ctx: &mut Ctx<H>,
        key: &[u8],
    ) -> Result<Option<Self>, Reply> {
        match ctx.value(key) {
            Ok(None) => Ok(None),
            Ok(Some(v)) if BloomChain::of(v).is_some() => Ok(Some(Self::Classic)),
            Ok(Some(v)) if BlockedChain::of(v).is_some() => Ok(Some(Self::Blocked)),
            _ => Err(Reply::error(crate::ERR_WRONGTYPE)),
        }
    }
}

/// What the BF.* handlers ask of a Bloom chain, whatever its layout.
pub(super) trait BloomType: DialectType {
    /// The chain's layout (BF.INFO's `Layout` field is added for non-classic ones).
    const LAYOUT: BloomLayout;
    /// Adds `item` by the chain's scaling rule: `Ok(true)` if new.
    fn add(&mut self, item: &[u8], allowance: &mut Allowance) -> Result<bool, AddError>;
    /// [`BloomType::add`] of each item in order, each answer reported through `added`,
    /// stopping at the first error (the items before it added, those after it not).
    fn add_many(
        &mut self,
        items: &Args,
        allowance: &mut Allowance,
        added: &mut dyn FnMut(bool),
    ) -> Result<(), AddError> {
        for item in items {
            added(self.add(item, allowance)?);
        }
        Ok(())
    }
    /// BF.CARD.
    fn items(&self) -> u64;
    /// Σ link capacities.
    fn capacity(&self) -> u64;
    /// BF.INFO Size.
    fn size_bytes(&self) -> u64;
    /// Number of links.
    fn filters(&self) -> usize;
    /// The expansion factor, `None` for a non-scaling chain.
    fn expansion(&self) -> Option<u32>;
    /// SCANDUMP for an iterator ≥ 1.
    fn dump_chunk(&self, iter: i64) -> (i64, Vec<u8>);
}

impl BloomType for BloomChain {
    const LAYOUT: BloomLayout = BloomLayout::Classic;
    fn add(&mut self, item: &[u8], allowance: &mut Allowance) -> Result<bool, AddError> {
        BloomChain::add(self, item, allowance)
    }
    /// In order, with the lines of the items ahead requested early.
    fn add_many(
        &mut self,
        items: &Args,
        allowance: &mut Allowance,
        added: &mut dyn FnMut(bool),
    ) -> Result<(), AddError> {
        BloomChain::add_many(self, items, allowance, added)
    }
    fn items(&self) -> u64 {
        BloomChain::items(self)
    }
    fn capacity(&self) -> u64 {
        BloomChain::capacity(self)
    }
    fn size_bytes(&self) -> u64 {
        BloomChain::size_bytes(self)
    }
    fn filters(&self) -> usize {
        self.links().len()
    }
    fn expansion(&self) -> Option<u32> {
        self.is_scaling().then(|| self.growth())
    }
    fn dump_chunk(&self, iter: i64) -> (i64, Vec<u8>) {
        BloomChain::dump_chunk(self, iter)
    }
}

impl BloomType for BlockedChain {
    const LAYOUT: BloomLayout = BloomLayout::Blocked;
    fn add(&mut self, item: &[u8], allowance: &mut Allowance) -> Result<bool, AddError> {
        BlockedChain::add(self, item, allowance)
    }
    fn items(&self) -> u64 {
        BlockedChain::items(self)
    }
    fn capacity(&self) -> u64 {
        BlockedChain::capacity(self)
    }
    fn size_bytes(&self) -> u64 {
        BlockedChain::size_bytes(self)
    }
    fn filters(&self) -> usize {
        self.links().len()
    }
    fn expansion(&self) -> Option<u32> {
        self.is_scaling().then(|| self.growth())
    }
    fn dump_chunk(&self, iter: i64) -> (i64, Vec<u8>) {
        BlockedChain::dump_chunk(self, iter)
    }
}
