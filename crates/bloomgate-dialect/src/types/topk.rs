//! RedisBloom's Top-K (`TopK-TYPE`), a HeavyKeeper sketch: `depth` rows of `width` buckets
//! (a 32-bit fingerprint and a 32-bit count each) estimate counts, and a min-heap of `k`
//! entries keeps the heavy hitters. Hashes, fingerprints, bucket arithmetic and the heap's
//! sift-down follow RedisBloom's behaviour exactly, so every answer that does not depend on a
//! decay draw equals RedisBloom's (the list, counts and evictions of a sketch where no two
//! items collide in a bucket, INFO, sizes, the RDB encoding).
//!
//! **Decay.** An increment landing in a bucket owned by another fingerprint decrements it with
//! probability `decay^count` per unit, as in RedisBloom (the power computed the same way: from
//! a 256-entry table of `decay^i` beyond its end). RedisBloom draws from the C library's
//! `rand()`, seeded by Redis at startup, so its draws cannot be reproduced; ours come from a
//! xorshift generator kept in the sketch, seeded with a constant when the sketch is created or
//! loaded from an RDB value. The same commands on the same sketch therefore give the same
//! answers — on a replica fed the same commands, and after `bloomgate serve` restarts (its
//! snapshot keeps the generator's state).

use crate::codec::murmur::murmur2;
use crate::types::cow::{allocation_size, CowArray};
use bloomgate::relocate::Walk;

/// The fingerprint's hash seed.
const FINGERPRINT_SEED: u32 = 1919;
/// `decay^i` is tabulated for `i` below this, and composed from the table beyond.
const DECAY_TABLE: u32 = 256;
/// `sizeof(TopK)` in RedisBloom: k, width, depth, decay, two pointers and the 256-double table.
const STRUCT_BYTES: u64 = 2088;
/// `sizeof(Bucket)`: fingerprint and count.
pub const BUCKET_BYTES: u64 = 8;
/// `sizeof(HeapBucket)` on 64-bit hosts: fingerprint, item length, item pointer, count, padding.
pub const HEAP_ENTRY_BYTES: u64 = 24;
/// The generator's seed for a new or RDB-loaded sketch.
const RNG_SEED: u64 = 0x9E37_79B9_7F4A_7C15;
/// Dump header fields before the heap: k, width, depth (u32), decay (f64), generator state
/// (u64), heap bytes (u64).
pub const HEADER_FIXED: usize = 12 + 8 + 8 + 8;

/// One heap entry.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct HeapEntry {
    /// The item's fingerprint.
    pub fingerprint: u32,
    /// Its count when last updated.
    pub count: u32,
    /// The item (`None` for a slot never filled).
    pub item: Option<Box<[u8]>>,
}

/// A Top-K sketch.
#[derive(Clone, Debug, PartialEq)]
pub struct TopK {
    k: u32,
    width: u32,
    depth: u32,
    decay: f64,
    /// `width × depth` buckets as `[fingerprint, count]`.
    buckets: CowArray<u32>,
    heap: Vec<HeapEntry>,
    rng: u64,
}

/// Whether `decay` is a usable decay base: in `(0, 1]` (NaN is not).
pub fn valid_decay(decay: f64) -> bool {
    decay > 0.0 && decay <= 1.0
}

impl TopK {
    /// Bucket and heap bytes of a sketch so shaped, or `None` if that overflows.
    pub fn planned_bytes(k: u32, width: u32, depth: u32) -> Option<u64> {
        u64::from(width)
            .checked_mul(u64::from(depth))?
            .checked_mul(BUCKET_BYTES)?
            .checked_add(u64::from(k) * HEAP_ENTRY_BYTES)
    }

    /// An empty sketch (every dimension at least 1); `None` if it cannot be allocated.
    pub fn new(k: u32, width: u32, depth: u32, decay: f64) -> Option<Self> {
        if k == 0 || width == 0 || depth == 0 {
            return None;
        }
        let rows = usize::try_from(u64::from(width) * u64::from(depth)).ok()?;
        let buckets = CowArray::try_zeroed(rows, 2)?;
        let mut heap = Vec::new();
        heap.try_reserve_exact(k as usize).ok()?;
        heap.resize(k as usize, HeapEntry::default());
        Some(Self {
            k,
            width,
            depth,
            decay,
            buckets,
            heap,
            rng: RNG_SEED,
        })
    }

    /// Heap size.
    pub fn k(&self) -> u32 {
        self.k
    }
    /// Buckets per row.
    pub fn width(&self) -> u32 {
        self.width
    }
    /// Rows.
    pub fn depth(&self) -> u32 {
        self.depth
    }
    /// Decay base.
    pub fn decay(&self) -> f64 {
        self.decay
    }
    /// The heap, in its array order.
    pub fn heap(&self) -> &[HeapEntry] {
        &self.heap
    }

    fn bucket(&self, item: &[u8], row: u32) -> usize {
        let at = murmur2(item, row) % self.width;
        (u64::from(row) * u64::from(self.width) + u64::from(at)) as usize
    }

    /// `decay^count`, composed as RedisBloom composes it.
    fn decay_chance(&self, count: u32) -> f64 {
        let table = |i: u32| self.decay.powf(f64::from(i));
        if count < DECAY_TABLE {
            table(count)
        } else {
            table(DECAY_TABLE - 1).powf(f64::from(count / (DECAY_TABLE - 1)))
                * table(count % (DECAY_TABLE - 1))
        }
    }

    /// A uniform draw in [0, 1) (xorshift64*).
    fn draw(&mut self) -> f64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn index_in_heap(&self, item: &[u8], fingerprint: u32) -> Option<usize> {
        // Searched from the end; a slot never filled holds no bytes (as RedisBloom's NULL
        // item of length 0 compares).
        (0..self.heap.len()).rev().find(|&i| {
            let e = &self.heap[i];
            e.fingerprint == fingerprint && e.item.as_deref().unwrap_or_default() == item
        })
    }

    /// Adds `increment` occurrences of `item`; returns the item it pushed out of the heap, if
    /// it entered the heap in place of one.
    pub fn add(&mut self, item: &[u8], increment: u32) -> Option<Box<[u8]>> {
        let fingerprint = murmur2(item, FINGERPRINT_SEED);
        let heap_min = self.heap[0].count;
        let mut max_count = 0u32;
        for row in 0..self.depth {
            let at = self.bucket(item, row);
            let [fp, count] = {
                let b = self.buckets.row(at, 2);
                [b[0], b[1]]
            };
            if count == 0 {
                self.buckets
                    .row_mut(at, 2)
                    .copy_from_slice(&[fingerprint, increment]);
                max_count = max_count.max(increment);
            } else if fp == fingerprint {
                let count = count.wrapping_add(increment);
                self.buckets.row_mut(at, 2)[1] = count;
                max_count = max_count.max(count);
            } else {
                let mut count = count;
                let mut left = increment;
                while left > 0 {
                    let chance = self.decay_chance(count);
                    if self.draw() < chance {
                        count -= 1;
                        if count == 0 {
                            count = left;
                            self.buckets.row_mut(at, 2)[0] = fingerprint;
                            max_count = max_count.max(count);
                            break;
                        }
                    }
                    left -= 1;
                }
                self.buckets.row_mut(at, 2)[1] = count;
            }
        }
        if max_count < heap_min {
            return None;
        }
        if let Some(i) = self.index_in_heap(item, fingerprint) {
            // The bucket's count, not the larger of the two: it may have decayed.
            self.heap[i].count = max_count;
            self.sift_down(i);
            return None;
        }
        let expelled = std::mem::replace(
            &mut self.heap[0],
            HeapEntry {
                fingerprint,
                count: max_count,
                item: Some(item.into()),
            },
        )
        .item;
        self.sift_down(0);
        expelled
    }

    /// Moves the entry at `start` down the min-heap: it trades places with its smaller child
    /// when that child's count is not larger than its own on the first step, and while the
    /// next child's count is smaller after that (RedisBloom's sift-down, whose ties decide
    /// which entry a later insertion evicts).
    fn sift_down(&mut self, mut start: usize) {
        let len = self.heap.len();
        let last_parent = match len.checked_sub(2) {
            Some(n) => n / 2,
            None => return,
        };
        if start > last_parent {
            return;
        }
        let smaller = |heap: &[HeapEntry], child: usize| {
            if child + 1 < len && heap[child].count > heap[child + 1].count {
                child + 1
            } else {
                child
            }
        };
        let mut child = smaller(&self.heap, 2 * start + 1);
        if self.heap[child].count > self.heap[start].count {
            return;
        }
        let top = std::mem::take(&mut self.heap[start]);
        loop {
            self.heap[start] = std::mem::take(&mut self.heap[child]);
            start = child;
            if child > last_parent {
                break;
            }
            child = smaller(&self.heap, 2 * child + 1);
            if self.heap[child].count >= top.count {
                break;
            }
        }
        self.heap[start] = top;
    }

    /// Whether `item` is in the heap.
    pub fn contains(&self, item: &[u8]) -> bool {
        self.index_in_heap(item, murmur2(item, FINGERPRINT_SEED))
            .is_some()
    }

    /// The item's count estimate: the largest count among its rows' buckets holding its
    /// fingerprint (for an item in the heap, only those at least the heap's minimum).
    pub fn count(&self, item: &[u8]) -> u32 {
        let fingerprint = murmur2(item, FINGERPRINT_SEED);
        let heap_min = self.heap[0].count;
        let in_heap = self.index_in_heap(item, fingerprint).is_some();
        (0..self.depth)
            .map(|row| self.buckets.row(self.bucket(item, row), 2))
            .filter(|b| b[0] == fingerprint && (!in_heap || b[1] >= heap_min))
            .map(|b| b[1])
            .max()
            .unwrap_or(0)
    }

    /// The heap's entries by decreasing count (ties in heap order), stopping at the first
    /// zero count.
    pub fn list(&self) -> Vec<&HeapEntry> {
        let mut sorted: Vec<&HeapEntry> = self.heap.iter().collect();
        sorted.sort_by_key(|e| std::cmp::Reverse(e.count));
        sorted.into_iter().take_while(|e| e.count != 0).collect()
    }

    /// Bytes RedisBloom reports for the sketch (`MEMORY USAGE`): struct, buckets and heap.
    pub fn size_bytes(&self) -> u64 {
        STRUCT_BYTES
            + BUCKET_BYTES * u64::from(self.width) * u64::from(self.depth)
            + HEAP_ENTRY_BYTES * u64::from(self.k)
    }

    /// Offers the sketch's buffers to a host that moves allocations (see
    /// [`bloomgate::relocate`]): the buckets, the heap, then each heap item (one slot each, so
    /// a large `k` resumes across calls).
    pub fn relocate(&mut self, walk: &mut Walk<'_>) {
        self.buckets.relocate(walk);
        walk.vec(&mut self.heap);
        for entry in &mut self.heap {
            match &mut entry.item {
                Some(item) => walk.boxed_slice(item),
                None => walk.slot(|_| {}),
            }
        }
    }

    /// Heap bytes held beyond the value itself, in allocator size classes.
    pub fn heap_bytes(&self) -> u64 {
        allocation_size(size_of::<Self>() as u64)
            + self.buckets.heap_bytes()
            + allocation_size(self.heap.len() as u64 * size_of::<HeapEntry>() as u64)
            + self
                .heap
                .iter()
                .filter_map(|e| e.item.as_ref())
                .map(|i| allocation_size(i.len() as u64))
                .sum::<u64>()
    }

    /// The bucket bytes from byte `offset`, little endian `[fingerprint, count]` pairs, as
    /// RedisBloom stores them.
    pub fn bucket_bytes(&self, offset: u64, len: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(len as usize);
        self.buckets
            .visit((offset / 4) as usize, (len / 4) as usize, |words| {
                out.extend(words.iter().flat_map(|w| w.to_le_bytes()));
            });
        out
    }

    /// Overwrites buckets from byte `offset` (whole words); false if out of range.
    pub fn write_buckets(&mut self, offset: u64, data: &[u8]) -> bool {
        if !offset.is_multiple_of(4) || !data.len().is_multiple_of(4) {
            return false;
        }
        let words: Vec<u32> = data
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        self.buckets.write((offset / 4) as usize, &words)
    }

    /// Replaces the heap (loading): `k` entries. An entry may have a count and no item (an
    /// empty item saved by RedisBloom loads so); it lists as an empty string.
    pub fn set_heap(&mut self, heap: Vec<HeapEntry>) -> Result<(), &'static str> {
        if heap.len() != self.k as usize {
            return Err("Top-K heap size differs from k");
        }
        self.heap = heap;
        Ok(())
    }

    /// Resets the decay generator to its constant seed (a value loaded from RDB).
    pub fn reset_rng(&mut self) {
        self.rng = RNG_SEED;
    }

    /// The dump header: k, width, depth, decay, generator state, heap length, then the heap
    /// entries (fingerprint, count, item length + 1 or 0 for none, item bytes).
    pub fn dump_header(&self) -> Vec<u8> {
        let mut heap = Vec::new();
        for e in &self.heap {
            heap.extend_from_slice(&e.fingerprint.to_le_bytes());
            heap.extend_from_slice(&e.count.to_le_bytes());
            match &e.item {
                None => heap.extend_from_slice(&0u32.to_le_bytes()),
                Some(item) => {
                    heap.extend_from_slice(&(item.len() as u32 + 1).to_le_bytes());
                    heap.extend_from_slice(item);
                }
            }
        }
        let mut out = Vec::with_capacity(HEADER_FIXED + heap.len());
        for v in [self.k, self.width, self.depth] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.decay.to_le_bytes());
        out.extend_from_slice(&self.rng.to_le_bytes());
        out.extend_from_slice(&(heap.len() as u64).to_le_bytes());
        out.extend(heap);
        out
    }

    /// Length of the dump header that starts with `prefix` (at least [`HEADER_FIXED`] bytes).
    pub fn header_len(prefix: &[u8]) -> Option<usize> {
        let heap = u64::from_le_bytes(prefix.get(28..36)?.try_into().ok()?);
        usize::try_from(heap).ok()?.checked_add(HEADER_FIXED)
    }

    fn parse_fixed(header: &[u8]) -> Result<(u32, u32, u32, f64, u64), &'static str> {
        if header.len() < HEADER_FIXED || Self::header_len(header) != Some(header.len()) {
            return Err("bad Top-K header length");
        }
        let u32_at = |i: usize| u32::from_le_bytes(header[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(header[i..i + 8].try_into().unwrap());
        let (k, width, depth) = (u32_at(0), u32_at(4), u32_at(8));
        if k == 0 || width == 0 || depth == 0 {
            return Err("Top-K k, width and depth must be positive");
        }
        // Every heap entry takes at least 12 bytes of the header.
        if u64::from(k) * 12 > (header.len() - HEADER_FIXED) as u64 {
            return Err("Top-K heap shorter than k entries");
        }
        let decay = f64::from_bits(u64_at(12));
        if !valid_decay(decay) {
            return Err("Top-K decay out of range");
        }
        Ok((k, width, depth, decay, u64_at(20)))
    }

    /// Bucket and heap bytes the header describes, checked before [`Self::from_header`].
    pub fn header_bytes(header: &[u8]) -> Result<u64, &'static str> {
        let (k, width, depth, _, _) = Self::parse_fixed(header)?;
        Ok(
            Self::planned_bytes(k, width, depth).expect("u32 dimensions do not overflow")
                + header.len() as u64,
        )
    }

    /// A sketch shaped as the header says, its heap filled from it and its buckets empty.
    pub fn from_header(header: &[u8]) -> Result<Self, &'static str> {
        const BAD: &str = "bad Top-K heap entry";
        let (k, width, depth, decay, rng) = Self::parse_fixed(header)?;
        let mut rest = &header[HEADER_FIXED..];
        let mut take = |n: usize| -> Result<&[u8], &'static str> {
            if rest.len() < n {
                return Err(BAD);
            }
            let (head, tail) = rest.split_at(n);
            rest = tail;
            Ok(head)
        };
        let mut heap = Vec::new();
        heap.try_reserve_exact(k as usize)
            .map_err(|_| "cannot allocate the Top-K")?;
        for _ in 0..k {
            let fields = take(12)?;
            let word = |i: usize| u32::from_le_bytes(fields[i..i + 4].try_into().unwrap());
            let (fingerprint, count, len) = (word(0), word(4), word(8));
            let item = match len {
                0 => None,
                n => Some(take(n as usize - 1)?.into()),
            };
            heap.push(HeapEntry {
                fingerprint,
                count,
                item,
            });
        }
        if !rest.is_empty() {
            return Err(BAD);
        }
        let mut topk = Self::new(k, width, depth, decay).ok_or("cannot allocate the Top-K")?;
        topk.set_heap(heap)?;
        topk.rng = rng;
        Ok(topk)
    }

    /// The dump's bucket chunks: `(iterator, length)`, the iterator being the byte offset just
    /// past the chunk plus one.
    pub fn chunk_plan(&self) -> Vec<(i64, u64)> {
        crate::codec::chunks::plan(BUCKET_BYTES * u64::from(self.width) * u64::from(self.depth))
    }

    /// Writes back the chunk that [`Self::chunk_plan`] lists as ending at `iter`.
    pub fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
        let start = crate::codec::chunks::start(iter, data.len()).ok_or("bad Top-K chunk")?;
        if self.write_buckets(start, data) {
            Ok(())
        } else {
            Err("bad Top-K chunk")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heavy_hitters_stay_listed() {
        let mut t = TopK::new(3, 50, 4, 0.9).unwrap();
        for (item, n) in [("a", 10), ("b", 5), ("c", 3), ("d", 1)] {
            for _ in 0..n {
                t.add(item.as_bytes(), 1);
            }
        }
        let listed: Vec<&[u8]> = t
            .list()
            .iter()
            .map(|e| e.item.as_deref().unwrap())
            .collect();
        assert_eq!(listed, [b"a".as_slice(), b"b", b"c"]);
        assert!(t.contains(b"a") && !t.contains(b"d"));
        assert_eq!(t.count(b"a"), 10);
    }

    #[test]
    fn dump_round_trips_with_the_generator() {
        let mut a = TopK::new(5, 20, 3, 0.9).unwrap();
        for i in 0..200u32 {
            a.add(&(i % 37).to_le_bytes(), 1 + i % 3);
        }
        let header = a.dump_header();
        let mut b = TopK::from_header(&header).unwrap();
        for (iter, len) in a.chunk_plan() {
            let start = iter as u64 - 1 - len;
            b.load_chunk(iter, &a.bucket_bytes(start, len)).unwrap();
        }
        assert_eq!(a, b);
        a.add(b"x", 7);
        b.add(b"x", 7);
        assert_eq!(a, b);
        let mut forged = header.clone();
        forged[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(TopK::header_bytes(&forged).is_err());
    }
}
