//! A chain's SCANDUMP/LOADCHUNK byte format, RedisBloom's: the dump header (chain fields, then
//! each link's sizing) with the validation a loaded header must pass before anything is
//! allocated ([`ChainShape`]), the body in chunks of at most 16 MiB that never cross a link,
//! and LOADCHUNK writing them back.

use super::*;

impl BloomChain {
    /// Where each SCANDUMP chunk ends: `(iterator returned with it, length)`; chunks are at most
    /// 16 MiB and never cross a link.
    pub fn chunk_plan(&self) -> Vec<(i64, u64)> {
        crate::encoding::chunks::plan_parts(self.links.iter().map(Link::bytes))
    }

    /// Every link's bit array as little-endian bytes, in order, in pieces of at most 64 KiB (the
    /// dump body, without building its chunks).
    pub fn visit_bits(&self, f: &mut dyn FnMut(&[u8])) {
        const PIECE: usize = 64 << 10;
        let mut buf = Vec::with_capacity(PIECE);
        for link in self.links.iter() {
            for segment in link.bits.pieces() {
                for words in segment.chunks(PIECE / 8) {
                    buf.clear();
                    buf.extend(words.iter().flat_map(|w| w.to_le_bytes()));
                    f(&buf);
                }
            }
        }
    }

    /// The SCANDUMP header (iterator 0).
    pub fn dump_header(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_FIXED + HEADER_LINK * self.links.len());
        out.extend_from_slice(&self.items.to_le_bytes());
        out.extend_from_slice(&(self.links.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.options.bits().to_le_bytes());
        out.extend_from_slice(&self.growth.to_le_bytes());
        for link in &self.links {
            out.extend_from_slice(&link.bytes().to_le_bytes());
            out.extend_from_slice(&link.bits().to_le_bytes());
            out.extend_from_slice(&link.items.to_le_bytes());
            out.extend_from_slice(&link.error.to_le_bytes());
            out.extend_from_slice(&link.bpe.to_le_bytes());
            out.extend_from_slice(&link.hashes().to_le_bytes());
            out.extend_from_slice(&link.capacity.to_le_bytes());
            out.push(link.n2);
        }
        out
    }

    /// SCANDUMP for iterator `iter >= 1`: the next chunk (≤ 16 MiB, never crossing a link) and
    /// the iterator to continue with (1 + byte offset after the chunk), or `(0, [])` when done.
    pub fn dump_chunk(&self, iter: i64) -> (i64, Vec<u8>) {
        scaling::dump_chunk(&self.links, iter)
    }

    /// Length of the dump header that starts `buf` (from its filter count), if `buf` holds at
    /// least the fixed part.
    pub fn header_len(buf: &[u8]) -> Option<usize> {
        let nfilters = u32::from_le_bytes(buf.get(8..12)?.try_into().ok()?) as usize;
        nfilters.checked_mul(HEADER_LINK)?.checked_add(HEADER_FIXED)
    }

    /// A SCANDUMP header's validated shape (see `parse_header`), before anything is allocated.
    pub fn shape(header: &[u8]) -> Result<ChainShape, &'static str> {
        parse_header(header).map(ChainShape)
    }

    /// Builds an empty-bits chain shaped as an admitted header says.
    pub fn from_shape(shape: Admitted<ChainShape>) -> Result<Self, &'static str> {
        let parsed = shape.into_shape().0;
        let mut links = Vec::with_capacity(parsed.links.len());
        for (bytes, spec) in parsed.links {
            let bits = zeroed_bits(bytes).ok_or(ERR_BAD_DATA)?;
            links.push(Link { bits, ..spec });
        }
        Ok(Self {
            links: links.into_boxed_slice(),
            items: parsed.items,
            options: parsed.options,
            growth: parsed.growth,
        })
    }

    /// [`Self::shape`] and [`Self::from_shape`] with no budget: for values whose size the caller has
    /// bounded itself (tests, tools); hosts admit a shape against their budget instead.
    pub fn from_header(header: &[u8]) -> Result<Self, &'static str> {
        Self::from_shape(
            Allowance::unlimited()
                .admit(Self::shape(header)?)
                .expect("unlimited"),
        )
    }

    /// LOADCHUNK: `iter` is what SCANDUMP returned with `data` (1 + offset after the chunk).
    pub fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
        let (index, offset) = scaling::chunk_at(&self.links, iter, data.len() as u64)?;
        let link = &mut self.links[index];
        link.write_le_bytes(offset as usize, data);
        Ok(())
    }
}

/// A chain as a validated dump header describes it (what [`BloomChain::from_shape`] allocates).
#[derive(Debug)]
pub struct ChainShape(ParsedHeader);

impl Shape for ChainShape {
    fn bytes(&self) -> u64 {
        self.0.total_bytes
    }
}

#[derive(Debug)]
struct ParsedHeader {
    items: u64,
    /// Σ link bytes (checked not to overflow).
    total_bytes: u64,
    options: Options,
    growth: u32,
    /// Each link's bytes, and the link with an empty placeholder bit array.
    links: Vec<(u64, Link)>,
}

/// Little-endian field reader over a header buffer.
struct Fields<'a> {
    buf: &'a [u8],
}

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let (head, rest) = self.buf.split_at(N);
        self.buf = rest;
        head.try_into().expect("length checked")
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn f64(&mut self) -> f64 {
        f64::from_le_bytes(self.take())
    }
}

/// Validates a header, refusing with `ERR received bad data`. Each check is kept only because
/// something would break without it:
/// - exact length for the link count, at least one link: there is nothing else to read;
/// - only NOROUND/FORCE64/NO_SCALING options, FORCE64 set: other bits (32-bit hashing) would
///   place bits where this implementation does not look, a false negative for every item;
/// - per link `bytes` a non-zero multiple of 8 and `bits == bytes*8`: a bit index past the
///   array would panic;
/// - error in (0,1) (a new link halves it), `hashes == ceil(ln2*bpe)` and at most
///   [`MAX_HASHES`]: otherwise a forged header asks for 2^32 probes per item (fuzz regression
///   `bf_bpe_must_match_error_rate`);
/// - capacity ≥ 1 and n2 < 64: what every creation gives; n2 is a shift amount;
/// - Σ link bytes and Σ capacities fit (capacity within `i64`, as BF.INFO replies it): sums
///   that overflowed panicked (fuzz regressions `bf_link_bytes_sum_overflow`,
///   `bf_capacity_sum_overflow`); the memory budget is then checked before allocating.
///
/// - Σ link items == the chain's items: RedisBloom refuses a header whose first field is
///   corrupted (its `test_scandump_invalid_header`).
///
/// The bit array is kept in 64-bit words, so `bytes` stays a multiple of 8 (a dump must give
/// back the length it loaded).
///
/// Refused although RedisBloom accepts them (docs/compatibility.md), because they forge past
/// what BF.RESERVE can create and decide later allocations:
/// - a growth factor above [`MAX_GROWTH`] (BF.RESERVE's EXPANSION cap): the next link would be
///   `capacity × growth` items (a forged 2^31 made one write allocate gigabytes);
/// - a NOROUND link whose bit count is not what its capacity and `bpe` give
///   (`floor(capacity × bpe)` rounded up to 64 bits): the sizes must agree with each other.
///
/// Like RedisBloom, a link's item count may exceed its capacity (a counter, saturating).
fn parse_header(buf: &[u8]) -> Result<ParsedHeader, &'static str> {
    if buf.len() < HEADER_FIXED {
        return Err(ERR_BAD_DATA);
    }
    let mut f = Fields { buf };
    let items = f.u64();
    let nfilters = f.u32() as usize;
    let options = f.u32();
    let growth = f.u32();
    if nfilters == 0 || buf.len() != HEADER_FIXED + HEADER_LINK * nfilters || growth > MAX_GROWTH {
        return Err(ERR_BAD_DATA);
    }
    let options = Options::from_bits(options).ok_or(ERR_BAD_DATA)?;
    let mut links = Vec::with_capacity(nfilters);
    let mut item_sum = 0u64;
    let mut total_bytes = 0u64;
    let mut capacity_sum = 0u64;
    for _ in 0..nfilters {
        let bytes = f.u64();
        let bits = f.u64();
        let link_items = f.u64();
        let error = f.f64();
        let bpe = f.f64();
        let hashes = f.u32();
        let capacity = f.u64();
        let n2 = f.take::<1>()[0];
        let valid = bytes > 0
            && bytes.is_multiple_of(8)
            && bytes.checked_mul(8) == Some(bits)
            && error > 0.0
            && error < 1.0
            && bpe.is_finite()
            && bpe > 0.0
            && (1..=MAX_HASHES).contains(&hashes)
            && hashes == hashes_for(bpe)
            && capacity >= 1
            && n2 < 64
            && (options.bits() & OPT_NOROUND == 0
                || LinkSizing::from_bpe(capacity, bpe).is_some_and(|s| s.bytes == bytes));
        if !valid {
            return Err(ERR_BAD_DATA);
        }
        item_sum = item_sum.checked_add(link_items).ok_or(ERR_BAD_DATA)?;
        total_bytes = total_bytes.checked_add(bytes).ok_or(ERR_BAD_DATA)?;
        capacity_sum = capacity_sum
            .checked_add(capacity)
            .filter(|&c| c <= i64::MAX as u64)
            .ok_or(ERR_BAD_DATA)?;
        links.push((
            bytes,
            Link {
                bits: CowArray::try_zeroed(0, 1).ok_or(ERR_BAD_DATA)?,
                error,
                bpe,
                capacity,
                items: link_items,
                hashes: hashes as u16, // at most MAX_HASHES, checked above
                n2,
                ones: Ones::default(),
            },
        ));
    }
    if item_sum != items {
        return Err(ERR_BAD_DATA);
    }
    Ok(ParsedHeader {
        items,
        total_bytes,
        options,
        growth,
        links,
    })
}
