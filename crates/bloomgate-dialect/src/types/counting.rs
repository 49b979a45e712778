//! Counting Bloom filters as a server value (`CBF.*` commands), an extension of the dialect that
//! RedisBloom does not have: a Bloom filter whose items can be deleted. The value is the core
//! library's [`CountingBloomFilter`] (the one counting filter of the project: `bloomgate build
//! --kind counting` writes the same counters) plus what a server value needs on top: its
//! creation parameters (error rate and capacity), the dump format and its validation.
//!
//! Counters are 4 bits (the default) or 8 bits wide. A counter that reaches its maximum (15 or
//! 255) is saturated: it never changes again, neither up nor down, because its true count is no
//! longer known — decrementing it could reach 0 while other items still map there.
//!
//! **Deleting an item that was never added** but tests present (a false positive) decrements
//! counters that other items set, and can make those items answer absent (false negatives).
//! Only delete what you added. A delete of an item that is definitely absent changes nothing.
//!
//! A filter holds at most `capacity` items (adds minus deletes): an add past it is refused with
//! [`ERR_FULL`], as a non-scaling Bloom filter refuses one, so the error rate stays the one asked
//! for.
//!
//! # Dump format (`CBF.SCANDUMP` / `CBF.LOADCHUNK`, RDB, snapshots)
//! The header (iterator 0 → `[1, header]`), little-endian: magic `BGCB`, format version `1`,
//! `f64 error`, `u64 capacity`, `u8 counter bits`, `u64 counters`, `u32 hashes`, `u64 count`.
//! Then the counter words in chunks, exactly as the core file format's counting body stores them
//! (`docs/format.md`, kind 3), each returned with the byte offset just past it plus one as its
//! iterator. The header is validated before anything is allocated: the error rate and capacity
//! must be ones `CBF.RESERVE` accepts, the counters and hashes must be what it would size for
//! them, the count at most the capacity; so a forged header cannot ask for more memory than the
//! capacity it declares, and the budget sees that size first.

use bloomgate::hash::DEFAULT_SEED;
use bloomgate::{CountingBloomFilter, Layout, Params};

use crate::types::cow::allocation_size;
use bloomgate::relocate::Walk;

/// Largest capacity (BF.RESERVE's).
pub const MAX_CAPACITY: u64 = crate::types::sbchain::MAX_CAPACITY;
/// Counter widths, in bits.
pub const COUNTER_BITS: [u32; 2] = bloomgate::filters::COUNTER_BITS;
/// The default counter width.
pub const DEFAULT_COUNTER_BITS: u32 = 4;

const MAGIC: &[u8; 4] = b"BGCB";
const FORMAT_VERSION: u8 = 1;
/// Magic, version, error, capacity, counter bits, counters, hashes, count.
pub const HEADER_LEN: usize = 4 + 1 + 8 + 8 + 1 + 8 + 4 + 8;

/// An add past the capacity.
pub const ERR_FULL: &str = "ERR counting filter is full";
/// A malformed or forged dump header.
pub const ERR_BAD_HEADER: &str = "ERR invalid counting filter header";
/// A chunk that does not fit the filter.
pub const ERR_BAD_CHUNK: &str = "ERR invalid counting filter chunk";

/// Creation parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CountingParams {
    /// Target false-positive rate at capacity, in (0, 1).
    pub error: f64,
    /// Most items (adds minus deletes) the filter holds.
    pub capacity: u64,
    /// Bits per counter: 4 or 8.
    pub counter_bits: u32,
}

impl CountingParams {
    /// Checks every range; the error text names the bad argument.
    pub fn validate(&self) -> Result<(), &'static str> {
        crate::types::sbchain::check_error_rate(self.error)?;
        crate::types::sbchain::check_capacity(self.capacity)?;
        if !COUNTER_BITS.contains(&self.counter_bits) {
            return Err("ERR BITS must be 4 or 8");
        }
        Ok(())
    }

    /// The classic layout the counters mirror (one counter per bit).
    fn filter_params(&self) -> Result<Params, &'static str> {
        self.validate()?;
        Params::for_items(Layout::Classic, self.capacity, self.error)
            .map_err(|_| "ERR could not create filter")
    }

    /// The validated shape of a filter of these parameters: what it will allocate.
    pub fn shape(&self) -> Result<CountingShape, &'static str> {
        let params = self.filter_params()?;
        let bytes = CountingBloomFilter::counter_bytes(&params, self.counter_bits).map_err(
            |e| match e {
                bloomgate::Error::OutOfMemory(_) => crate::ERR_OOM,
                _ => "ERR could not create filter",
            },
        )?;
        Ok(CountingShape {
            params: *self,
            filter: params,
            bytes,
            count: 0,
        })
    }
}

/// What a counting filter will allocate, validated: from `CBF.RESERVE`'s arguments or a dump
/// header. Only [`CountingFilter::new`] allocates, from an admitted shape.
#[derive(Debug)]
pub struct CountingShape {
    params: CountingParams,
    filter: Params,
    bytes: u64,
    count: u64,
}

impl crate::budget::Shape for CountingShape {
    fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// A counting Bloom filter value.
#[derive(Clone, Debug, PartialEq)]
pub struct CountingFilter {
    params: CountingParams,
    inner: CountingBloomFilter,
}

impl CountingFilter {
    /// An empty filter (its count taken from the shape) of an admitted shape.
    pub fn new(shape: crate::budget::Admitted<CountingShape>) -> Result<Self, &'static str> {
        let shape = shape.into_shape();
        let mut inner = CountingBloomFilter::with_counter_bits(
            shape.filter,
            DEFAULT_SEED,
            shape.params.counter_bits,
        )
        .map_err(|e| match e {
            bloomgate::Error::OutOfMemory(_) => crate::ERR_OOM,
            _ => "ERR could not create filter",
        })?;
        inner.set_len(shape.count);
        Ok(Self {
            params: shape.params,
            inner,
        })
    }

    /// The creation parameters.
    pub fn params(&self) -> &CountingParams {
        &self.params
    }

    /// The core filter the value is.
    pub fn filter(&self) -> &CountingBloomFilter {
        &self.inner
    }

    /// Adds one occurrence of `item`: `Ok(true)` if it was definitely absent before, `Ok(false)`
    /// if it may have been present (its counters go up either way); [`ERR_FULL`] at capacity.
    pub fn add(&mut self, item: &[u8]) -> Result<bool, &'static str> {
        if self.inner.len() >= self.params.capacity {
            return Err(ERR_FULL);
        }
        Ok(!self.inner.insert(item))
    }

    /// Deletes one occurrence of `item`: false (nothing changed) if it is definitely absent.
    pub fn delete(&mut self, item: &[u8]) -> bool {
        self.inner.remove(item).is_ok()
    }

    /// Whether `item` may be present.
    pub fn contains(&self, item: &[u8]) -> bool {
        self.inner.contains(item)
    }

    /// The item's smallest counter: an upper bound on how often it was added (0: absent).
    pub fn count(&self, item: &[u8]) -> u64 {
        u64::from(self.inner.count_estimate(item))
    }

    /// Adds minus deletes.
    pub fn items(&self) -> u64 {
        self.inner.len()
    }

    /// Bytes reported as the filter's size: its counters.
    pub fn memory(&self) -> u64 {
        self.inner.memory_bytes() as u64
    }

    /// Offers the counters to a host that moves allocations (see [`bloomgate::relocate`]).
    pub fn relocate(&mut self, walk: &mut Walk<'_>) {
        self.inner.relocate(walk);
    }

    /// Heap bytes held beyond the value itself, in allocator size classes.
    pub fn heap_bytes(&self) -> u64 {
        allocation_size(size_of::<Self>() as u64) + allocation_size(self.memory())
    }

    /// The dump header (iterator 0).
    pub fn dump_header(&self) -> Vec<u8> {
        let p = &self.params;
        let f = self.inner.params();
        let mut out = Vec::with_capacity(HEADER_LEN);
        out.extend_from_slice(MAGIC);
        out.push(FORMAT_VERSION);
        out.extend_from_slice(&p.error.to_le_bytes());
        out.extend_from_slice(&p.capacity.to_le_bytes());
        out.push(p.counter_bits as u8);
        out.extend_from_slice(&f.bits.to_le_bytes());
        out.extend_from_slice(&f.hashes.to_le_bytes());
        out.extend_from_slice(&self.inner.len().to_le_bytes());
        out
    }

    /// A dump header validated into the shape it describes, nothing allocated.
    pub fn header_shape(header: &[u8]) -> Result<CountingShape, &'static str> {
        if header.len() != HEADER_LEN || &header[..4] != MAGIC || header[4] != FORMAT_VERSION {
            return Err(ERR_BAD_HEADER);
        }
        let u64_at = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("len"));
        let params = CountingParams {
            error: f64::from_le_bytes(header[5..13].try_into().expect("len")),
            capacity: u64_at(13),
            counter_bits: u32::from(header[21]),
        };
        let mut shape = params.shape().map_err(|_| ERR_BAD_HEADER)?;
        let hashes = u32::from_le_bytes(header[30..34].try_into().expect("len"));
        let count = u64_at(34);
        if u64_at(22) != shape.filter.bits
            || hashes != shape.filter.hashes
            || count > params.capacity
        {
            return Err(ERR_BAD_HEADER);
        }
        shape.count = count;
        Ok(shape)
    }

    /// `(iterator, length)` of each chunk of counters after the header.
    pub fn chunk_plan(&self) -> Vec<(i64, u64)> {
        crate::codec::chunks::plan(self.memory())
    }

    /// The counters' bytes from byte `offset` (little endian words, as the file format).
    pub fn counter_bytes(&self, offset: u64, len: u64) -> Vec<u8> {
        let words = self.inner.counter_words();
        let (first, count) = ((offset / 8) as usize, (len / 8) as usize);
        let end = first.saturating_add(count).min(words.len());
        words
            .get(first.min(end)..end)
            .unwrap_or_default()
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect()
    }

    /// Writes back the chunk that [`Self::chunk_plan`] lists as ending at `iter`.
    pub fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
        let start = crate::codec::chunks::start(iter, data.len()).ok_or(ERR_BAD_CHUNK)?;
        if !start.is_multiple_of(8) || !data.len().is_multiple_of(8) {
            return Err(ERR_BAD_CHUNK);
        }
        let words = self.inner.counter_words_mut();
        let first = (start / 8) as usize;
        let target = first
            .checked_add(data.len() / 8)
            .filter(|&end| end <= words.len())
            .map(|end| &mut words[first..end])
            .ok_or(ERR_BAD_CHUNK)?;
        for (word, bytes) in target.iter_mut().zip(data.chunks_exact(8)) {
            *word = u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
        }
        Ok(())
    }

    /// SCANDUMP: `[1, header]` at 0, then the chunks of [`Self::chunk_plan`] in order (each
    /// returned with its own iterator, which asks for the next), `[0, ""]` when done.
    pub fn scandump(&self, iter: i64) -> (i64, Vec<u8>) {
        if iter == 0 {
            return (1, self.dump_header());
        }
        let plan = self.chunk_plan();
        // Iterator 1 asks for the first chunk; a chunk's own iterator asks for the next.
        let next = if iter == 1 {
            plan.first()
        } else {
            plan.iter()
                .position(|&(end, _)| end == iter)
                .and_then(|at| plan.get(at + 1))
        };
        match next {
            Some(&(end, len)) => (end, self.counter_bytes(end as u64 - 1 - len, len)),
            None => (0, Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Allowance;

    fn filter(capacity: u64, counter_bits: u32) -> CountingFilter {
        let shape = CountingParams {
            error: 0.01,
            capacity,
            counter_bits,
        }
        .shape()
        .unwrap();
        CountingFilter::new(Allowance::unlimited().admit(shape).unwrap()).unwrap()
    }

    /// Add 10k, delete 5k: every kept item present, few deleted or absent ones.
    #[test]
    fn deletes_keep_the_rest_and_the_error_rate() {
        for bits in COUNTER_BITS {
            let mut f = filter(10_000, bits);
            for i in 0..10_000u32 {
                f.add(&i.to_le_bytes()).unwrap();
            }
            assert_eq!(f.add(b"one more"), Err(ERR_FULL));
            for i in 0..5_000u32 {
                assert!(f.delete(&i.to_le_bytes()));
            }
            assert_eq!(f.items(), 5_000);
            assert!((5_000..10_000u32).all(|i| f.contains(&i.to_le_bytes())));
            let deleted = (0..5_000u32)
                .filter(|i| f.contains(&i.to_le_bytes()))
                .count();
            let absent = (10_000..110_000u32)
                .filter(|i| f.contains(&i.to_le_bytes()))
                .count();
            assert!(deleted <= 75, "{deleted} of 5000 deleted items present");
            assert!(absent <= 1_500, "{absent} of 100000 absent items present");
        }
    }

    #[test]
    fn dump_round_trips_through_chunks() {
        let mut f = filter(5_000, 8);
        for i in 0..3_000u32 {
            f.add(&i.to_le_bytes()).unwrap();
        }
        f.add(b"x").unwrap();
        f.add(b"x").unwrap();
        let shape = CountingFilter::header_shape(&f.dump_header()).unwrap();
        let mut copy = CountingFilter::new(Allowance::unlimited().admit(shape).unwrap()).unwrap();
        let (mut iter, mut chunks) = (0, 0);
        loop {
            let (next, data) = f.scandump(iter);
            if next == 0 {
                break;
            }
            if iter > 0 {
                copy.load_chunk(next, &data).unwrap();
                chunks += 1;
            }
            iter = next;
        }
        assert_eq!(chunks, f.chunk_plan().len());
        assert_eq!(copy, f);
        assert_eq!(copy.count(b"x"), 2);
        assert_eq!(copy.load_chunk(5, &[0; 16]), Err(ERR_BAD_CHUNK));
        assert_eq!(copy.load_chunk(1 << 40, &[0; 8]), Err(ERR_BAD_CHUNK));
    }

    /// Forged headers are refused before allocating: more counters or hashes than the capacity
    /// needs, a count past the capacity, an unknown width, a bad error rate.
    #[test]
    fn forged_headers_are_refused() {
        let f = filter(1000, 4);
        let header = f.dump_header();
        assert!(CountingFilter::header_shape(&header).is_ok());
        for (at, value) in [
            (22usize, u64::MAX.to_le_bytes().to_vec()),
            (30, 9u32.to_le_bytes().to_vec()),
            (34, 1001u64.to_le_bytes().to_vec()),
            (21, vec![16]),
            (5, 2.0f64.to_le_bytes().to_vec()),
            (13, (MAX_CAPACITY + 1).to_le_bytes().to_vec()),
            (0, b"XXXX".to_vec()),
        ] {
            let mut h = header.clone();
            h[at..at + value.len()].copy_from_slice(&value);
            assert_eq!(
                CountingFilter::header_shape(&h).err(),
                Some(ERR_BAD_HEADER),
                "{at}"
            );
        }
        assert!(CountingFilter::header_shape(&header[..HEADER_LEN - 1]).is_err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Adds and deletes of items actually added (a small filter, so counters collide and
        /// 4-bit ones saturate), with dump round trips between them: never a false negative,
        /// and the count is adds minus deletes.
        #[test]
        fn no_false_negatives_under_adds_and_deletes_of_added_items(
            bits in proptest::sample::select(vec![4u32, 8]),
            ops in proptest::collection::vec((0u8..3, 0u16..60), 1..300),
        ) {
            let mut f = filter(40, bits);
            let mut copies = [0u32; 60];
            for (op, item) in ops {
                let key = item.to_le_bytes();
                match op {
                    0 if f.items() < 40 => {
                        f.add(&key).unwrap();
                        copies[item as usize] += 1;
                    }
                    1 if copies[item as usize] > 0 => {
                        proptest::prop_assert!(f.delete(&key));
                        copies[item as usize] -= 1;
                    }
                    2 => {
                        let shape = CountingFilter::header_shape(&f.dump_header()).unwrap();
                        let mut copy =
                            CountingFilter::new(Allowance::unlimited().admit(shape).unwrap())
                                .unwrap();
                        for (iter, len) in f.chunk_plan() {
                            copy.load_chunk(iter, &f.counter_bytes(iter as u64 - 1 - len, len))
                                .unwrap();
                        }
                        proptest::prop_assert_eq!(&copy, &f);
                        f = copy;
                    }
                    _ => {}
                }
                for (k, &c) in copies.iter().enumerate() {
                    if c > 0 {
                        proptest::prop_assert!(f.contains(&(k as u16).to_le_bytes()));
                    }
                }
                proptest::prop_assert_eq!(f.items(), copies.iter().map(|&c| u64::from(c)).sum::<u64>());
            }
        }
    }
}
