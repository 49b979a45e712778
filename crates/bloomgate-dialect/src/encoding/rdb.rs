//! RedisBloom's RDB encoding of its module types (cuckoo, Count-Min, Top-K) and of our windowed
//! and counting filters, as sequences of typed fields; a Bloom chain's is with its link format
//! ([`crate::types::sbchain`]), the t-digest's with its type ([`crate::types::tdigest`]).
//!
//! Redis saves a module value as a stream of unsigned integers, doubles and string buffers
//! written through the module API; RedisBloom's field order (its documented RDB encoding of each
//! module data type) is what lets an RDB file, a `DUMP` payload or a
//! full sync move between RedisBloom and bloomgate. This module knows the order; the host supplies
//! the field I/O ([`RdbSink`], [`RdbSource`]): the module through Redis' `RedisModule_Save*` /
//! `RedisModule_Load*`, the server through its own encoder of Redis' module-value format.
//!
//! Loading never trusts a size (the rule of [`crate::budget`]): the fields are turned into a
//! SCANDUMP header and validated by the same code as `LOADCHUNK`; every string buffer is read
//! and must have exactly the length the header implies (so the claimed sizes are backed by the
//! payload); the shape is admitted against the source's
//! [`Allowance`](crate::budget::Allowance); only then is the value allocated.

use crate::budget::Shape;
use crate::codec::rdb_io::{admit, RdbError, RdbSink, RdbSource};
use crate::types::counting::CountingFilter;
use crate::types::countmin::CountMin;
use crate::types::cuckoo::{self, CuckooChain};
use crate::types::topk::TopK;
use crate::types::windowed::WindowedFilter;
use crate::value::DialectType;

fn invalid(why: impl Into<String>) -> RdbError {
    RdbError::invalid(why)
}

/// Most sub-filters a value may describe before anything is allocated for them.
const MAX_PARTS: u64 = 65536;

/// Writes each part's bytes back through LOADCHUNK's path, in the chunks SCANDUMP would use.
fn fill<T: DialectType>(value: &mut T, parts: &[Vec<u8>]) -> Result<(), RdbError> {
    let all: Vec<u8> = parts.concat();
    let mut at = 0usize;
    for (iter, len) in value.chunk_plan() {
        let end = at + len as usize;
        let data = all
            .get(at..end)
            .ok_or_else(|| invalid("body shorter than its header"))?;
        value.load_chunk(iter, data).map_err(invalid)?;
        at = end;
    }
    if at != all.len() {
        return Err(invalid("body longer than its header"));
    }
    Ok(())
}

/// `MBbloomCF` (encver 4): filter count, first bucket count, items, deletes, bucket size, max
/// iterations, expansion; per sub-filter its bucket count and slot bytes.
pub fn save_cuckoo(filter: &CuckooChain, out: &mut impl RdbSink) {
    out.save_unsigned(filter.filters() as u64);
    out.save_unsigned(filter.buckets());
    out.save_unsigned(filter.items());
    out.save_unsigned(filter.deletes());
    out.save_unsigned(u64::from(filter.bucket_size()));
    out.save_unsigned(u64::from(filter.max_iterations()));
    out.save_unsigned(u64::from(filter.expansion()));
    for (buckets, slots) in filter.sub_filters() {
        out.save_unsigned(buckets);
        out.save_string(&slots);
    }
}

/// Defaults for fields that encodings before 4 did not store (RedisBloom's configuration
/// defaults; every sub-filter then has the first one's bucket count, i.e. expansion 1).
const LEGACY_BUCKET_SIZE: u16 = 2;
const LEGACY_MAX_ITERATIONS: u16 = 20;
const LEGACY_EXPANSION: u16 = 1;

/// Reads a `MBbloomCF` value (encoding versions 0–4).
pub fn load_cuckoo(input: &mut impl RdbSource, encver: i32) -> Result<CuckooChain, RdbError> {
    if !(0..=CuckooChain::ENCODING_VERSION).contains(&encver) {
        return Err(RdbError::UnknownEncoding(encver));
    }
    let filters = input.load_unsigned()?;
    let buckets = input.load_unsigned()?;
    let items = input.load_unsigned()?;
    if filters == 0 || filters > MAX_PARTS || buckets == 0 {
        return Err(invalid("filter or bucket count out of range"));
    }
    let (deletes, bucket_size, max_iterations, expansion) = if encver >= 4 {
        let deletes = input.load_unsigned()?;
        let small = |v: u64| u16::try_from(v).map_err(|_| invalid("field out of range"));
        let bucket_size = small(input.load_unsigned()?)?;
        let max_iterations = small(input.load_unsigned()?)?;
        let expansion = small(input.load_unsigned()?)?;
        (deletes, bucket_size, max_iterations, expansion)
    } else {
        (
            0,
            LEGACY_BUCKET_SIZE,
            LEGACY_MAX_ITERATIONS,
            LEGACY_EXPANSION,
        )
    };
    let mut header = Vec::with_capacity(cuckoo::HEADER_LEN);
    header.extend_from_slice(&items.to_le_bytes());
    header.extend_from_slice(&buckets.to_le_bytes());
    header.extend_from_slice(&deletes.to_le_bytes());
    header.extend_from_slice(&filters.to_le_bytes());
    header.extend_from_slice(&bucket_size.to_le_bytes());
    header.extend_from_slice(&max_iterations.to_le_bytes());
    header.extend_from_slice(&expansion.to_le_bytes());
    let shape = CuckooChain::shape(&header).map_err(|e| invalid(e.message()))?;
    let bucket_size = u64::from(shape.bucket_size());
    let expected: Vec<u64> = shape.sub_filter_buckets().collect();
    let mut bodies = Vec::with_capacity(expected.len());
    for want in expected {
        let got = if encver >= 4 {
            input.load_unsigned()?
        } else {
            buckets
        };
        if got != want {
            return Err(invalid(
                "sub-filter bucket count does not match the expansion",
            ));
        }
        let len = want * bucket_size;
        let data = input.load_string(len)?;
        if data.len() as u64 != len {
            return Err(invalid("sub-filter length does not match its bucket count"));
        }
        bodies.push(data);
    }
    let shape = admit(input, shape)?;
    let mut filter = CuckooChain::from_shape(shape).map_err(|e| invalid(e.message()))?;
    fill(&mut filter, &bodies)?;
    Ok(filter)
}

/// `BGwindowF` (our type): its dump header as one string, then each generation's file image.
pub fn save_windowed(filter: &WindowedFilter, out: &mut impl RdbSink) {
    out.save_string(&filter.dump_header());
    for (iter, len) in filter.chunk_plan() {
        let image = filter.chunk_bytes(iter);
        debug_assert_eq!(image.len() as u64, len);
        out.save_string(&image);
    }
}

/// Reads a `BGwindowF` value, every part validated as LOADCHUNK validates it.
pub fn load_windowed(input: &mut impl RdbSource, encver: i32) -> Result<WindowedFilter, RdbError> {
    if encver != WindowedFilter::ENCODING_VERSION {
        return Err(RdbError::UnknownEncoding(encver));
    }
    const MAX_HEADER: u64 = 64 * 1024;
    let header = input.load_string(MAX_HEADER)?;
    let shape = WindowedFilter::shape(&header).map_err(invalid)?;
    let mut parts = Vec::new();
    for (_, len) in shape.chunk_plan() {
        let data = input.load_string(len)?;
        if data.len() as u64 != len {
            return Err(invalid("generation length does not match its header"));
        }
        parts.push(data);
    }
    let shape = admit(input, shape)?;
    let mut filter = WindowedFilter::from_shape(shape).map_err(invalid)?;
    fill(&mut filter, &parts)?;
    Ok(filter)
}

/// `BGcntBloo` (our type): its dump header as one string, then the counter words as one string
/// (little-endian `u64`s, as the core file format's counting body stores them).
pub fn save_counting(filter: &CountingFilter, out: &mut impl RdbSink) {
    out.save_string(&filter.dump_header());
    out.save_string(&filter.counter_bytes(0, filter.memory()));
}

/// Reads a `BGcntBloo` value: the header validated into a shape, the counter buffer read and
/// matched against the shape's size, the shape admitted, then the filter allocated.
pub fn load_counting(input: &mut impl RdbSource, encver: i32) -> Result<CountingFilter, RdbError> {
    if encver != CountingFilter::ENCODING_VERSION {
        return Err(RdbError::UnknownEncoding(encver));
    }
    let header = input.load_string(crate::types::counting::HEADER_LEN as u64)?;
    let shape = CountingFilter::shape(&header).map_err(invalid)?;
    let bytes = shape.bytes();
    let data = input.load_string(bytes)?;
    if data.len() as u64 != bytes {
        return Err(invalid("counter buffer length does not match its header"));
    }
    let shape = admit(input, shape)?;
    let mut filter = CountingFilter::from_shape(shape).map_err(invalid)?;
    fill(&mut filter, &[data])?;
    Ok(filter)
}

/// `CMSk-TYPE` (encver 0): width, depth, total; the counters as one string buffer
/// (`4 × width × depth` bytes, little endian).
pub fn save_countmin(cms: &CountMin, out: &mut impl RdbSink) {
    out.save_unsigned(cms.width());
    out.save_unsigned(cms.depth());
    out.save_unsigned(cms.total());
    out.save_string(&cms.cell_bytes(0, 4 * cms.width() * cms.depth()));
}

/// Reads a `CMSk-TYPE` value: the dimensions are checked (non-zero, their byte size
/// representable) and charged to the budget before the counters are allocated, and the
/// counter buffer must have exactly that size.
pub fn load_countmin(input: &mut impl RdbSource, encver: i32) -> Result<CountMin, RdbError> {
    if encver != CountMin::ENCODING_VERSION {
        return Err(RdbError::UnknownEncoding(encver));
    }
    let mut header = Vec::with_capacity(crate::types::countmin::HEADER_LEN);
    for _ in 0..3 {
        header.extend_from_slice(&input.load_unsigned()?.to_le_bytes());
    }
    let shape = <CountMin as DialectType>::shape(&header).map_err(invalid)?;
    let bytes = shape.bytes();
    let data = input.load_string(bytes)?;
    if data.len() as u64 != bytes {
        return Err(invalid(
            "counter buffer length does not match width x depth",
        ));
    }
    let shape = admit(input, shape)?;
    let mut cms = <CountMin as DialectType>::from_shape(shape).map_err(invalid)?;
    fill(&mut cms, &[data])?;
    Ok(cms)
}

/// `TopK-TYPE` (encver 0): k, width, depth, decay; the buckets as one buffer (`[fingerprint,
/// count]` u32 pairs); the heap as RedisBloom's 24-byte entries (fingerprint, item length, a
/// pointer RedisBloom ignores on load — written as zero — count, padding); then each heap
/// entry's item as a C string (an empty string for a slot never filled).
pub fn save_topk(topk: &TopK, out: &mut impl RdbSink) {
    out.save_unsigned(u64::from(topk.k()));
    out.save_unsigned(u64::from(topk.width()));
    out.save_unsigned(u64::from(topk.depth()));
    out.save_double(topk.decay());
    let buckets =
        crate::types::topk::BUCKET_BYTES * u64::from(topk.width()) * u64::from(topk.depth());
    out.save_string(&topk.bucket_bytes(0, buckets));
    // An item is a C string there: what follows a NUL byte is not saved.
    let saved = |item: &[u8]| -> Vec<u8> {
        let end = item.iter().position(|&b| b == 0).unwrap_or(item.len());
        item[..end].to_vec()
    };
    let mut heap =
        Vec::with_capacity(topk.heap().len() * crate::types::topk::HEAP_ENTRY_BYTES as usize);
    let mut items = Vec::with_capacity(topk.heap().len());
    for entry in topk.heap() {
        let mut item = entry.item.as_deref().map(saved).unwrap_or_default();
        heap.extend_from_slice(&entry.fingerprint.to_le_bytes());
        heap.extend_from_slice(&(item.len() as u32).to_le_bytes());
        heap.extend_from_slice(&0u64.to_le_bytes());
        heap.extend_from_slice(&entry.count.to_le_bytes());
        heap.extend_from_slice(&0u32.to_le_bytes());
        item.push(0);
        items.push(item);
    }
    out.save_string(&heap);
    for item in items {
        out.save_string(&item);
    }
}

/// Reads a `TopK-TYPE` value: k, width and depth must be non-zero 32-bit values and decay in
/// `(0, 1]` (as TOPK.RESERVE requires); their
/// buffers are charged to the budget before anything is allocated, and each buffer must have
/// exactly the size they imply. Items are the heap strings without their last (NUL) byte; a
/// one-byte string is a slot never filled. The decay generator starts from its seed.
pub fn load_topk(input: &mut impl RdbSource, encver: i32) -> Result<TopK, RdbError> {
    use crate::types::topk::{HeapEntry, BUCKET_BYTES, HEAP_ENTRY_BYTES};
    if encver != TopK::ENCODING_VERSION {
        return Err(RdbError::UnknownEncoding(encver));
    }
    let dim = |v: u64| match u32::try_from(v) {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(invalid("Top-K k, width or depth out of range")),
    };
    let k = dim(input.load_unsigned()?)?;
    let width = dim(input.load_unsigned()?)?;
    let depth = dim(input.load_unsigned()?)?;
    let decay = input.load_double()?;
    if !crate::types::topk::valid_decay(decay) {
        return Err(invalid("Top-K decay out of range"));
    }
    let bucket_len = BUCKET_BYTES * u64::from(width) * u64::from(depth);
    let heap_len = HEAP_ENTRY_BYTES * u64::from(k);
    let buckets = input.load_string(bucket_len)?;
    if buckets.len() as u64 != bucket_len {
        return Err(invalid("bucket buffer length does not match width x depth"));
    }
    let blob = input.load_string(heap_len)?;
    if blob.len() as u64 != heap_len {
        return Err(invalid("heap buffer length does not match k"));
    }
    // The buffers are backed by the payload: now the sketch's size is admitted, then allocated.
    admit(input, crate::budget::Buffer(bucket_len + heap_len))?;
    let mut heap = Vec::new();
    heap.try_reserve_exact(k as usize)
        .map_err(|_| invalid("Top-K heap does not fit in memory"))?;
    for entry in blob.chunks_exact(HEAP_ENTRY_BYTES as usize) {
        let word = |i: usize| u32::from_le_bytes(entry[i..i + 4].try_into().expect("4 bytes"));
        let mut item = input.load_string(u64::from(u32::MAX))?;
        let item = match item.len() {
            0 => return Err(invalid("Top-K heap item without its terminator")),
            1 => None,
            n => {
                item.truncate(n - 1);
                Some(item.into_boxed_slice())
            }
        };
        heap.push(HeapEntry {
            fingerprint: word(0),
            count: word(16),
            item,
        });
    }
    let mut topk =
        TopK::new(k, width, depth, decay).ok_or_else(|| invalid("Top-K does not fit in memory"))?;
    fill(&mut topk, &[buckets])?;
    topk.set_heap(heap).map_err(invalid)?;
    Ok(topk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{Allowance, OverBudget};
    use crate::types::cuckoo::CuckooParams;

    use crate::codec::rdb_io::testing::{Field, Fields};

    #[test]
    fn cuckoo_round_trip_keeps_dump_bytes() {
        let p = CuckooParams {
            capacity: 64,
            bucket_size: 2,
            max_iterations: 20,
            expansion: 2,
        };
        let mut filter = CuckooChain::new(p).unwrap();
        for i in 0..300 {
            filter
                .insert(format!("k{i}").as_bytes(), &mut Allowance::unlimited())
                .unwrap();
        }
        assert!(filter.filters() > 1);
        let mut fields = Fields::default();
        save_cuckoo(&filter, &mut fields);
        let back = load_cuckoo(&mut fields, 4).unwrap();
        assert_eq!(back, filter);
    }

    #[test]
    fn windowed_round_trip_keeps_dump_bytes() {
        let params = crate::types::windowed::WindowParams {
            error: 0.01,
            capacity: 50,
            window_ms: 1000,
            generations: 3,
            expansion: 2,
        };
        let mut filter = WindowedFilter::new(params);
        for t in [0u64, 1000, 2000] {
            for i in 0..120 {
                filter
                    .add(
                        format!("{t}/{i}").as_bytes(),
                        t,
                        &mut Allowance::unlimited(),
                    )
                    .unwrap();
            }
        }
        let mut fields = Fields::default();
        save_windowed(&filter, &mut fields);
        let back = load_windowed(&mut fields, 1).unwrap();
        assert!(back.dump_stream().eq(filter.dump_stream()));
        let mut fields = Fields::default();
        save_windowed(&filter, &mut fields);
        if let Some(Field::S(image)) = fields.items.get_mut(2) {
            image[50] ^= 0x10;
        }
        assert!(matches!(
            load_windowed(&mut fields, 1),
            Err(RdbError::Invalid(_))
        ));
    }

    #[test]
    fn damaged_fields_are_refused() {
        let mut fields = Fields::default();
        for v in [1, 1 << 40, 0, 0, 2, 20, 1] {
            fields.save_unsigned(v);
        }
        assert!(matches!(
            load_cuckoo(&mut fields, 4),
            Err(RdbError::Invalid(_))
        ));
    }

    /// The largest first sub-filter CF.RESERVE can make (2^30 one-slot buckets, 1 GiB) but
    /// only 8 bytes of payload: refused for the missing bytes before anything is allocated.
    #[test]
    fn claimed_sizes_must_be_backed_by_the_payload() {
        let mut fields = Fields::default();
        for v in [1, 1 << 30, 0, 0, 1, 20, 1, 1 << 30] {
            fields.save_unsigned(v);
        }
        fields.save_string(&[0; 8]);
        assert!(matches!(
            load_cuckoo(&mut fields, 4),
            Err(RdbError::Invalid(_))
        ));
    }

    #[test]
    fn counting_round_trip_and_refusals() {
        use crate::types::counting::CountingParams;
        let shape = CountingParams {
            error: 0.01,
            capacity: 2000,
            counter_bits: 4,
        }
        .shape()
        .unwrap();
        let mut filter =
            CountingFilter::from_shape(Allowance::unlimited().admit(shape).unwrap()).unwrap();
        for i in 0..1500u32 {
            filter.add(&i.to_le_bytes()).unwrap();
        }
        let mut fields = Fields::default();
        save_counting(&filter, &mut fields);
        assert_eq!(load_counting(&mut fields, 1).unwrap(), filter);
        // A short counter buffer, an unknown encoding, a budget too small.
        let mut fields = Fields::default();
        save_counting(&filter, &mut fields);
        if let Some(Field::S(counters)) = fields.items.get_mut(1) {
            counters.truncate(8);
        }
        assert!(matches!(
            load_counting(&mut fields, 1),
            Err(RdbError::Invalid(_))
        ));
        let mut fields = Fields::default();
        save_counting(&filter, &mut fields);
        assert!(matches!(
            load_counting(&mut fields, 2),
            Err(RdbError::UnknownEncoding(2))
        ));
        let mut fields = Fields::default();
        save_counting(&filter, &mut fields);
        fields.allowance = Allowance::new(filter.memory() - 1);
        assert!(matches!(
            load_counting(&mut fields, 1),
            Err(RdbError::OverBudget(_))
        ));
    }

    #[test]
    fn values_over_the_allowance_are_refused() {
        let filter = CuckooChain::new(CuckooParams {
            capacity: 1000,
            bucket_size: 2,
            max_iterations: 20,
            expansion: 1,
        })
        .unwrap();
        let mut fields = Fields::default();
        save_cuckoo(&filter, &mut fields);
        fields.allowance = Allowance::new(1023);
        assert!(matches!(
            load_cuckoo(&mut fields, 4),
            Err(RdbError::OverBudget(OverBudget { needed: 1024, .. }))
        ));
    }

    /// A forged decay (field 3) outside `(0, 1]`, NaN included, is refused as TOPK.RESERVE
    /// refuses it; the edge 1.0 and an ordinary 0.9 load.
    #[test]
    fn topk_decay_out_of_range_is_refused() {
        let mut topk = TopK::new(3, 8, 2, 0.9).unwrap();
        topk.add(b"a", 2);
        let forged = |decay: f64| {
            let mut fields = Fields::default();
            save_topk(&topk, &mut fields);
            fields.items[3] = Field::D(decay);
            load_topk(&mut fields, 0)
        };
        for decay in [0.0, 1.5, -0.1, f64::NAN, f64::INFINITY] {
            assert_eq!(
                forged(decay).unwrap_err(),
                invalid("Top-K decay out of range"),
                "decay {decay}"
            );
        }
        for decay in [1.0, 0.9] {
            let loaded = forged(decay).unwrap();
            assert_eq!(loaded.decay(), decay);
            assert_eq!(loaded.heap(), topk.heap());
        }
        // The dump header (SCANDUMP-style, the server's snapshots) refuses it the same way.
        let mut header = topk.dump_header();
        header[12..20].copy_from_slice(&f64::NAN.to_le_bytes());
        assert!(TopK::from_header(&header).is_err());
    }
}
