//! The classic chain's formats, RedisBloom's: the SCANDUMP header (chain fields, then each
//! link's sizing) with the validation a loaded header must pass before anything is allocated,
//! and the RDB field order of `MBbloom--` (encoding versions 0–4), which loads through the same
//! validation.

use super::*;
use crate::codec::rdb_io::admit;
use crate::types::sbchain::{ERR_BAD_DATA, MAX_GROWTH};

/// Dump header sizes: `u64 size, u32 nfilters, u32 options, u32 growth`, then per link
/// `u64 bytes, u64 bits, u64 size, f64 error, f64 bpe, u32 hashes, u64 entries, u8 n2`.
pub const HEADER_FIXED: usize = 20;
const HEADER_LINK: usize = 53;

/// Most links an RDB value may describe before anything is allocated for them.
const MAX_LINKS: u64 = 65536;

/// The SCANDUMP header (iterator 0).
pub(super) fn dump_header(chain: &Chain<Link>) -> Vec<u8> {
    let links = chain.links();
    let mut out = Vec::with_capacity(HEADER_FIXED + HEADER_LINK * links.len());
    out.extend_from_slice(&chain.items().to_le_bytes());
    out.extend_from_slice(&(links.len() as u32).to_le_bytes());
    out.extend_from_slice(&chain.settings().bits().to_le_bytes());
    out.extend_from_slice(&chain.growth().to_le_bytes());
    for link in links {
        out.extend_from_slice(&link.bytes().to_le_bytes());
        out.extend_from_slice(&link.bits().to_le_bytes());
        out.extend_from_slice(&link.counts.items.to_le_bytes());
        out.extend_from_slice(&link.counts.error.to_le_bytes());
        out.extend_from_slice(&link.bpe.to_le_bytes());
        out.extend_from_slice(&link.hashes().to_le_bytes());
        out.extend_from_slice(&link.counts.capacity.to_le_bytes());
        out.push(link.n2);
    }
    out
}

/// Length of the dump header that starts `buf` (from its filter count), if `buf` holds at
/// least the fixed part.
pub(super) fn header_len(buf: &[u8]) -> Option<usize> {
    let nfilters = u32::from_le_bytes(buf.get(8..12)?.try_into().ok()?) as usize;
    nfilters.checked_mul(HEADER_LINK)?.checked_add(HEADER_FIXED)
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
/// - and what every format's shape checks ([`ChainShape::new`]): Σ link bytes and Σ capacities
///   fit, Σ link items == the chain's items.
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
pub(super) fn parse_header(buf: &[u8]) -> Result<ChainShape<Link>, &'static str> {
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
        let sizing = LinkSizing {
            bytes,
            bits,
            hashes,
            bpe,
        };
        let plan = LinkPlan {
            capacity,
            error,
            sizing,
            n2,
        };
        let counts = LinkCounts {
            capacity,
            error,
            items: link_items,
        };
        links.push((plan, counts));
    }
    ChainShape::new(links, items, growth, options)
}

/// `MBbloom--`: chain items, link count, options (encver ≥ 2), growth (encver ≥ 4); per link
/// entries, error, hashes, bpe, bits and n2 (encver ≥ 1), the bit array, link items.
pub(super) fn rdb_save(chain: &Chain<Link>, out: &mut impl RdbSink) {
    out.save_unsigned(chain.items());
    out.save_unsigned(chain.links().len() as u64);
    out.save_unsigned(u64::from(chain.settings().bits()));
    out.save_unsigned(u64::from(chain.growth()));
    for link in chain.links() {
        out.save_unsigned(link.counts.capacity);
        out.save_double(link.counts.error);
        out.save_unsigned(u64::from(link.hashes()));
        out.save_double(link.bpe);
        out.save_unsigned(link.bits());
        out.save_unsigned(u64::from(link.n2));
        out.save_string(&link.to_le_bytes());
        out.save_unsigned(link.counts.items);
    }
}

/// Reads a `MBbloom--` value (encoding versions 0–4): the fields are turned into a SCANDUMP
/// header and validated by the same code as LOADCHUNK; every bit array is read and must have
/// exactly the length its header implies (so the claimed sizes are backed by the payload); the
/// shape is admitted against the source's allowance; only then is the chain allocated and its
/// bits written back through LOADCHUNK's path.
pub(super) fn rdb_load(input: &mut impl RdbSource, encver: i32) -> Result<Chain<Link>, RdbError> {
    if !(0..=Link::ENCODING_VERSION).contains(&encver) {
        return Err(RdbError::UnknownEncoding(encver));
    }
    let items = input.load_unsigned()?;
    let nfilters = input.load_unsigned()?;
    if nfilters == 0 || nfilters > MAX_LINKS {
        return Err(RdbError::invalid("filter count out of range"));
    }
    let options = if encver >= 2 {
        input.load_unsigned()?
    } else {
        0
    };
    let growth = if encver >= 4 {
        input.load_unsigned()?
    } else {
        2
    };
    let (options, growth) = (
        u32::try_from(options).map_err(|_| RdbError::invalid("options out of range"))?,
        u32::try_from(growth).map_err(|_| RdbError::invalid("growth out of range"))?,
    );
    let mut header = Vec::new();
    header.extend_from_slice(&items.to_le_bytes());
    header.extend_from_slice(&(nfilters as u32).to_le_bytes());
    header.extend_from_slice(&options.to_le_bytes());
    header.extend_from_slice(&growth.to_le_bytes());
    let mut body = Vec::new();
    for _ in 0..nfilters {
        let capacity = input.load_unsigned()?;
        let error = input.load_double()?;
        let hashes = input.load_unsigned()?;
        let bpe = input.load_double()?;
        let (bits, n2) = if encver >= 1 {
            (input.load_unsigned()?, input.load_unsigned()?)
        } else {
            ((capacity as f64 * bpe) as u64, 0)
        };
        let bytes = bits.div_ceil(8);
        let data = input.load_string(bytes)?;
        if data.len() as u64 != bytes {
            return Err(RdbError::invalid(
                "bit array length does not match its bit count",
            ));
        }
        let link_items = input.load_unsigned()?;
        let hashes =
            u32::try_from(hashes).map_err(|_| RdbError::invalid("hash count out of range"))?;
        let n2 = u8::try_from(n2).map_err(|_| RdbError::invalid("n2 out of range"))?;
        header.extend_from_slice(&bytes.to_le_bytes());
        header.extend_from_slice(&bits.to_le_bytes());
        header.extend_from_slice(&link_items.to_le_bytes());
        header.extend_from_slice(&error.to_le_bytes());
        header.extend_from_slice(&bpe.to_le_bytes());
        header.extend_from_slice(&hashes.to_le_bytes());
        header.extend_from_slice(&capacity.to_le_bytes());
        header.push(n2);
        body.extend_from_slice(&data);
    }
    let shape = admit(input, parse_header(&header).map_err(RdbError::invalid)?)?;
    let mut chain = Chain::from_shape(shape).map_err(RdbError::invalid)?;
    let mut at = 0usize;
    for (iter, len) in chain.chunk_plan() {
        let end = at + len as usize;
        let data = body
            .get(at..end)
            .ok_or_else(|| RdbError::invalid("body shorter than its header"))?;
        chain.load_chunk(iter, data).map_err(RdbError::invalid)?;
        at = end;
    }
    if at != body.len() {
        return Err(RdbError::invalid("body longer than its header"));
    }
    Ok(chain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{Allowance, OverBudget};
    use crate::codec::rdb_io::testing::Field;
    use crate::codec::rdb_io::testing::Fields as RdbFields;
    use crate::types::sbchain::{BloomChain, ERR_CHUNK_TOO_BIG, ERR_NO_LINK};

    #[test]
    fn dump_and_load_round_trip_bit_exact() {
        let mut chain = BloomChain::new(10, 0.01, 2, false).unwrap();
        for i in 0..100 {
            chain
                .add(format!("k{i}").as_bytes(), &mut Allowance::unlimited())
                .unwrap();
        }
        let header = chain.dump_header();
        assert_eq!(header.len(), 20 + 53 * chain.links().len());
        let mut copy = BloomChain::from_header(&header).unwrap();
        let mut iter = 1;
        loop {
            let (next, chunk) = chain.dump_chunk(iter);
            if next == 0 {
                assert!(chunk.is_empty());
                break;
            }
            copy.load_chunk(next, &chunk).unwrap();
            iter = next;
        }
        for i in 0..100 {
            assert!(copy.contains(format!("k{i}").as_bytes()));
        }
        assert_eq!(copy.dump_header(), header);
        assert_eq!(copy.items(), chain.items());
        // Chunks never cross links: first chunk is exactly link 0.
        assert_eq!(chain.dump_chunk(1), (17, chain.links()[0].to_le_bytes()));
    }

    #[test]
    fn header_validation_rejects_each_bad_field() {
        let chain = BloomChain::new(100, 0.01, 2, false).unwrap();
        let good = chain.dump_header();
        assert!(BloomChain::from_header(&good).is_ok());
        let corrupt = |at: usize, bytes: &[u8]| {
            let mut h = good.clone();
            h[at..at + bytes.len()].copy_from_slice(bytes);
            BloomChain::from_header(&h).err()
        };
        assert_eq!(corrupt(0, &1u64.to_le_bytes()), Some(ERR_BAD_DATA)); // size != Σ
        assert_eq!(corrupt(8, &2u32.to_le_bytes()), Some(ERR_BAD_DATA)); // nfilters
        assert_eq!(corrupt(12, &(5u32 | 16).to_le_bytes()), Some(ERR_BAD_DATA)); // options
        assert_eq!(corrupt(12, &1u32.to_le_bytes()), Some(ERR_BAD_DATA)); // no FORCE64
        assert_eq!(corrupt(16, &32768u32.to_le_bytes()), None); // BF.RESERVE's largest growth
        assert_eq!(corrupt(16, &32769u32.to_le_bytes()), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(16, &(1u32 << 31).to_le_bytes()), Some(ERR_BAD_DATA));
        // A link's bytes must be what its capacity and bpe give (144 here).
        let mut bigger = good.clone();
        bigger[20..28].copy_from_slice(&152u64.to_le_bytes());
        bigger[28..36].copy_from_slice(&(152u64 * 8).to_le_bytes());
        assert_eq!(BloomChain::from_header(&bigger).err(), Some(ERR_BAD_DATA));
        assert_eq!(corrupt(20, &7u64.to_le_bytes()), Some(ERR_BAD_DATA)); // bytes
        assert_eq!(corrupt(28, &7u64.to_le_bytes()), Some(ERR_BAD_DATA)); // bits
        let mut over = good.clone();
        over[0..8].copy_from_slice(&5000u64.to_le_bytes());
        over[36..44].copy_from_slice(&5000u64.to_le_bytes());
        assert!(
            BloomChain::from_header(&over).is_ok(),
            "items > capacity: accepted"
        );
        assert_eq!(corrupt(44, &1.5f64.to_le_bytes()), Some(ERR_BAD_DATA)); // error
        assert_eq!(corrupt(52, &f64::NAN.to_le_bytes()), Some(ERR_BAD_DATA)); // bpe
        assert_eq!(
            hashes_for(-(f64::from_bits(1).ln() / LN2_SQUARED)),
            MAX_HASHES,
            "no error rate needs more"
        );
        assert_eq!(corrupt(60, &3u32.to_le_bytes()), Some(ERR_BAD_DATA)); // hashes
        assert_eq!(corrupt(64, &0u64.to_le_bytes()), Some(ERR_BAD_DATA)); // capacity
        assert_eq!(corrupt(72, &[64]), Some(ERR_BAD_DATA)); // n2
        assert_eq!(
            BloomChain::from_header(&good[..good.len() - 1]).err(),
            Some(ERR_BAD_DATA)
        );
        assert_eq!(BloomChain::from_header(&[]).err(), Some(ERR_BAD_DATA));
    }

    #[test]
    fn load_chunk_bounds() {
        let chain = BloomChain::new(100, 0.01, 2, false).unwrap(); // one 144-byte link
        let mut copy = BloomChain::from_header(&chain.dump_header()).unwrap();
        assert_eq!(copy.load_chunk(0, &[1]), Err(ERR_BAD_DATA));
        assert_eq!(copy.load_chunk(3, &[1; 4]), Err(ERR_BAD_DATA));
        assert_eq!(copy.load_chunk(4, &[1; 4]), Err(ERR_NO_LINK));
        assert_eq!(copy.load_chunk(146, &[1; 145]), Err(ERR_CHUNK_TOO_BIG));
        assert_eq!(copy.load_chunk(1000, &[1]), Err(ERR_NO_LINK));
        assert_eq!(copy.load_chunk(145, &[0xff; 144]), Ok(()));
        assert!(copy.contains(b"anything"));
        assert_eq!(copy.links()[0].count_ones(), 144 * 8);
        // Overwriting part of the array adjusts the kept count by what changed.
        assert_eq!(copy.load_chunk(11, &[0x0f; 10]), Ok(()));
        assert_eq!(copy.links()[0].count_ones(), 134 * 8 + 10 * 4);
        assert_eq!(
            copy.links()[0].count_ones(),
            copy.links()[0].count_ones_walking()
        );
    }

    #[test]
    fn rdb_round_trip_keeps_dump_bytes() {
        let mut chain = BloomChain::new(10, 0.01, 2, false).unwrap();
        for i in 0..100 {
            chain
                .add(format!("k{i}").as_bytes(), &mut Allowance::unlimited())
                .unwrap();
        }
        let mut fields = RdbFields::default();
        rdb_save(&chain, &mut fields);
        assert_eq!(fields.items[1], Field::U(chain.links().len() as u64));
        let back = rdb_load(&mut fields, 4).unwrap();
        assert!(fields.items.is_empty());
        assert_eq!(back.dump_header(), chain.dump_header());
        assert_eq!(back.chunk_plan(), chain.chunk_plan());
        for (iter, len) in chain.chunk_plan() {
            assert_eq!(back.chunk_bytes(iter, len), chain.chunk_bytes(iter, len));
        }
    }

    #[test]
    fn damaged_rdb_fields_are_refused() {
        let chain = BloomChain::new(100, 0.01, 2, false).unwrap();
        let mut fields = RdbFields::default();
        rdb_save(&chain, &mut fields);
        // hashes (field 6) off by one.
        fields.items[6] = Field::U(99);
        assert!(matches!(
            rdb_load(&mut fields, 4),
            Err(RdbError::Invalid(_))
        ));
        let mut fields = RdbFields::default();
        rdb_save(&chain, &mut fields);
        fields.items.truncate(5);
        assert_eq!(rdb_load(&mut fields, 4).unwrap_err(), RdbError::Truncated);
        let mut fields = RdbFields::default();
        fields.save_unsigned(0);
        fields.save_unsigned(0);
        assert!(rdb_load(&mut fields, 4).is_err());
        assert_eq!(
            rdb_load(&mut RdbFields::default(), 5).unwrap_err(),
            RdbError::UnknownEncoding(5)
        );
    }

    #[test]
    fn rdb_values_over_the_allowance_are_refused() {
        let mut chain = BloomChain::new(1000, 0.01, 2, false).unwrap();
        chain.add(b"x", &mut Allowance::unlimited()).unwrap();
        let mut fields = RdbFields::default();
        rdb_save(&chain, &mut fields);
        fields.allowance = Allowance::new(100);
        assert!(matches!(
            rdb_load(&mut fields, 4),
            Err(RdbError::OverBudget(OverBudget { allowed: 100, .. }))
        ));
    }
}
