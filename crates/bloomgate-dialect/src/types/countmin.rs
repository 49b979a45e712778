//! RedisBloom's Count-Min Sketch (`CMSk-TYPE`): `depth` rows of `width` 32-bit counters and
//! a 64-bit total. Row `i` indexes an item at `murmur2(item, seed i) % width`; an increment
//! saturates each counter at `u32::MAX` (the estimate is then reported as an overflow) and the
//! total wraps as RedisBloom's `size_t` does. Merges are checked for overflow in RedisBloom's
//! order (64-bit signed products and sums, per cell and for the totals) before any counter is
//! written, so a refused merge changes nothing.
//!
//! Hosts persist a sketch as its RDB fields ([`crate::encoding::rdb`]) or, in `bloomgate serve`'s
//! snapshots, as a dump stream of our own: a 24-byte header (width, depth, total; little
//! endian) and the counters' bytes in chunks.

use crate::codec::murmur::murmur2;
use crate::types::cow::{allocation_size, CowArray};
use bloomgate::filters::prefetch;
use bloomgate::relocate::Walk;

/// Counters a batched INCRBY or QUERY locates and requests before using them (the items of a
/// chunk × depth; a sketch deeper than this is done item by item): a fixed buffer, so a batch
/// allocates nothing whatever the sketch's shape.
const BATCH_CELLS: usize = 256;

/// Dump header: width, depth, total (u64 little endian each).
pub const HEADER_LEN: usize = 24;
/// `sizeof(CMSketch)` in RedisBloom: width, depth, array pointer, total.
const STRUCT_BYTES: u64 = 32;

/// A Count-Min Sketch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountMin {
    width: u64,
    depth: u64,
    total: u64,
    cells: CowArray<u32>,
}

/// Why a merge was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeOverflow;

impl CountMin {
    /// Counter bytes of a `width` × `depth` sketch, or `None` if that overflows.
    pub fn planned_bytes(width: u64, depth: u64) -> Option<u64> {
        width.checked_mul(depth)?.checked_mul(4)
    }

    /// An empty sketch; `None` if the dimensions are zero or the counters cannot be allocated.
    pub fn new(width: u64, depth: u64) -> Option<Self> {
        if width == 0 || depth == 0 {
            return None;
        }
        let cells = usize::try_from(width.checked_mul(depth)?).ok()?;
        Some(Self {
            width,
            depth,
            total: 0,
            cells: CowArray::try_zeroed(cells, 1)?,
        })
    }

    /// RedisBloom's dimensions for an overestimation `error` and a failure probability `prob`
    /// (both in (0, 1)): width `ceil(2 / error)`, depth `ceil(log10(prob) / log10(0.5))` with
    /// the logarithms taken in single precision, as there.
    pub fn dims_for(error: f64, prob: f64) -> (u64, u64) {
        let width = (2.0 / error).ceil() as u64;
        let depth = ((prob as f32).log10() / 0.5f32.log10()).ceil() as u64;
        (width, depth)
    }

    /// Counters per row.
    pub fn width(&self) -> u64 {
        self.width
    }

    /// Rows.
    pub fn depth(&self) -> u64 {
        self.depth
    }

    /// The total of all increments (INFO `count`).
    pub fn total(&self) -> u64 {
        self.total
    }

    fn index(&self, item: &[u8], row: u64) -> usize {
        let hash = u64::from(murmur2(item, row as u32));
        (hash % self.width + row * self.width) as usize
    }

    /// Adds `by` to the item's counter in every row (saturating at `u32::MAX`) and to the
    /// total; returns the new estimate (`u32::MAX` meaning overflow).
    pub fn increment(&mut self, item: &[u8], by: u64) -> u64 {
        let mut min = u64::MAX;
        for row in 0..self.depth {
            let at = self.index(item, row);
            min = min.min(self.add_at(at, by));
        }
        self.total = self.total.wrapping_add(by);
        min
    }

    /// Adds `by` to counter `at`, saturating; its new value.
    fn add_at(&mut self, at: usize, by: u64) -> u64 {
        let cell = &mut self.cells.row_mut(at, 1)[0];
        *cell = u64::from(*cell).saturating_add(by).min(u64::from(u32::MAX)) as u32;
        u64::from(*cell)
    }

    /// The item's estimated count: its smallest counter.
    pub fn query(&self, item: &[u8]) -> u64 {
        (0..self.depth)
            .map(|row| u64::from(self.cells.row(self.index(item, row), 1)[0]))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// [`Self::increment`] of each `(item, by)` in order, each estimate handed to `estimate`
    /// (an item repeated in the batch sees its earlier increments). The counters of a chunk
    /// of items are located and requested (prefetched) before the chunk is applied, so a
    /// sketch bigger than the cache overlaps its misses.
    pub fn increment_many(&mut self, pairs: &[(&[u8], u64)], mut estimate: impl FnMut(u64)) {
        let mut cells = [0usize; BATCH_CELLS];
        let depth = self.depth as usize;
        if depth > BATCH_CELLS {
            return pairs
                .iter()
                .for_each(|&(item, by)| estimate(self.increment(item, by)));
        }
        for chunk in pairs.chunks(BATCH_CELLS / depth) {
            self.locate(chunk.iter().map(|p| p.0), &mut cells);
            for (at, &(_, by)) in cells.chunks_exact(depth).zip(chunk) {
                let min = at.iter().map(|&at| self.add_at(at, by)).min();
                self.total = self.total.wrapping_add(by);
                estimate(min.unwrap_or(u64::MAX));
            }
        }
    }

    /// [`Self::query`] of each item, counters requested a chunk of items ahead (see
    /// [`Self::increment_many`]).
    pub fn query_many<I: AsRef<[u8]>>(&self, items: &[I]) -> Vec<u64> {
        let depth = self.depth as usize;
        if depth > BATCH_CELLS {
            return items.iter().map(|i| self.query(i.as_ref())).collect();
        }
        let mut cells = [0usize; BATCH_CELLS];
        let mut out = Vec::with_capacity(items.len());
        for chunk in items.chunks(BATCH_CELLS / depth) {
            self.locate(chunk.iter().map(AsRef::as_ref), &mut cells);
            out.extend(cells.chunks_exact(depth).take(chunk.len()).map(|at| {
                at.iter()
                    .map(|&at| u64::from(self.cells.row(at, 1)[0]))
                    .min()
                    .unwrap_or(u64::MAX)
            }));
        }
        out
    }

    /// Writes the counter index of every row of each item into `cells` (`depth` per item, in
    /// order) and requests its cache line.
    fn locate<'i>(&self, items: impl Iterator<Item = &'i [u8]>, cells: &mut [usize]) {
        let depth = self.depth as usize;
        for (item, at) in items.zip(cells.chunks_exact_mut(depth)) {
            for (row, slot) in at.iter_mut().enumerate() {
                *slot = self.index(item, row as u64);
                prefetch(self.cells.row(*slot, 1).as_ptr());
            }
        }
    }

    /// Replaces this sketch's counters and total with the weighted sum of `sources` (each of
    /// this sketch's dimensions). Refused, with nothing changed, if any cell's sum leaves
    /// `0..=u32::MAX`, the totals' sum is negative, or a 64-bit product or partial sum
    /// overflows along the way.
    pub fn merge(&mut self, sources: &[(&CountMin, i64)]) -> Result<(), MergeOverflow> {
        let cells = (self.width * self.depth) as usize;
        let cell_sum = |at: usize| -> Option<i64> {
            sources.iter().try_fold(0i64, |sum, (src, weight)| {
                sum.checked_add(i64::from(src.cells.row(at, 1)[0]).checked_mul(*weight)?)
            })
        };
        for at in 0..cells {
            match cell_sum(at) {
                Some(sum) if (0..=i64::from(u32::MAX)).contains(&sum) => {}
                _ => return Err(MergeOverflow),
            }
        }
        let total = sources
            .iter()
            .try_fold(0i64, |sum, (src, weight)| {
                let product = i64::try_from(i128::from(src.total) * i128::from(*weight)).ok()?;
                sum.checked_add(product)
            })
            .filter(|&t| t >= 0)
            .ok_or(MergeOverflow)?;
        for at in 0..cells {
            let sum = cell_sum(at).expect("checked above");
            self.cells.row_mut(at, 1)[0] = sum as u32;
        }
        self.total = total as u64;
        Ok(())
    }

    /// Bytes RedisBloom reports for the sketch (`MEMORY USAGE`): its struct and counters.
    pub fn size_bytes(&self) -> u64 {
        STRUCT_BYTES + 4 * self.width * self.depth
    }

    /// Offers the counters to a host that moves allocations (see [`bloomgate::relocate`]).
    pub fn relocate(&mut self, walk: &mut Walk<'_>) {
        self.cells.relocate(walk);
    }

    /// Heap bytes held beyond the value itself, in allocator size classes.
    pub fn heap_bytes(&self) -> u64 {
        allocation_size(size_of::<Self>() as u64) + self.cells.heap_bytes()
    }

    /// The counters' bytes, little endian, as RedisBloom stores them.
    pub fn cell_bytes(&self, offset: u64, len: u64) -> Vec<u8> {
        let (first, count) = ((offset / 4) as usize, (len / 4) as usize);
        let mut out = Vec::with_capacity(len as usize);
        self.cells.visit(first, count, |cells| {
            out.extend(cells.iter().flat_map(|c| c.to_le_bytes()));
        });
        out
    }

    /// Overwrites counters from byte `offset` with `data` (whole counters); false if out of
    /// range.
    pub fn write_cells(&mut self, offset: u64, data: &[u8]) -> bool {
        if !offset.is_multiple_of(4) || !data.len().is_multiple_of(4) {
            return false;
        }
        let cells: Vec<u32> = data
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        self.cells.write((offset / 4) as usize, &cells)
    }

    /// Sets the total (loading).
    pub fn set_total(&mut self, total: u64) {
        self.total = total;
    }

    /// The dump header: width, depth, total.
    pub fn dump_header(&self) -> Vec<u8> {
        [self.width, self.depth, self.total]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect()
    }

    fn parse_header(header: &[u8]) -> Result<(u64, u64, u64), &'static str> {
        if header.len() != HEADER_LEN {
            return Err("bad Count-Min header length");
        }
        let field = |i: usize| u64::from_le_bytes(header[i * 8..i * 8 + 8].try_into().unwrap());
        let (width, depth) = (field(0), field(1));
        if width == 0 || depth == 0 {
            return Err("Count-Min width and depth must be positive");
        }
        Self::planned_bytes(width, depth)
            .filter(|&b| b <= i64::MAX as u64)
            .ok_or("Count-Min dimensions overflow")?;
        Ok((width, depth, field(2)))
    }

    /// Counter bytes the header describes, for the budget check before [`Self::from_header`].
    pub fn header_bytes(header: &[u8]) -> Result<u64, &'static str> {
        let (width, depth, _) = Self::parse_header(header)?;
        Ok(Self::planned_bytes(width, depth).expect("checked by parse_header"))
    }

    /// An empty sketch shaped as the header says, its total set.
    pub fn from_header(header: &[u8]) -> Result<Self, &'static str> {
        let (width, depth, total) = Self::parse_header(header)?;
        let mut cms = Self::new(width, depth).ok_or("cannot allocate the Count-Min counters")?;
        cms.total = total;
        Ok(cms)
    }

    /// The dump's chunks after the header: `(iterator, length)`, the iterator being the byte
    /// offset just past the chunk plus one.
    pub fn chunk_plan(&self) -> Vec<(i64, u64)> {
        crate::codec::chunks::plan(4 * self.width * self.depth)
    }

    /// Writes back the chunk that [`Self::chunk_plan`] lists as ending at `iter`.
    pub fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
        let start = crate::codec::chunks::start(iter, data.len()).ok_or("bad Count-Min chunk")?;
        if self.write_cells(start, data) {
            Ok(())
        } else {
            Err("bad Count-Min chunk")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Batched increments and queries answer as one item at a time, duplicates inside a
    /// batch included (each sees its earlier increments), for shallow and deep sketches
    /// (deeper than a chunk: item by item), across chunk boundaries, and saturating.
    #[test]
    fn batched_equals_one_at_a_time() {
        for (width, depth) in [(7, 1), (50, 5), (3, 7), (4, 300)] {
            let mut a = CountMin::new(width, depth).unwrap();
            let mut b = a.clone();
            let names: Vec<Vec<u8>> = (0..200)
                .map(|i| format!("i{}", i % 37).into_bytes())
                .collect();
            let pairs: Vec<(&[u8], u64)> = names
                .iter()
                .enumerate()
                .map(|(n, i)| {
                    (
                        i.as_slice(),
                        if n == 90 {
                            u64::from(u32::MAX)
                        } else {
                            n as u64 % 5
                        },
                    )
                })
                .collect();
            let mut got = Vec::new();
            a.increment_many(&pairs, |n| got.push(n));
            let want: Vec<u64> = pairs.iter().map(|&(i, by)| b.increment(i, by)).collect();
            assert_eq!(got, want, "{width}x{depth}");
            assert_eq!(a, b);
            let single: Vec<u64> = names.iter().map(|i| b.query(i)).collect();
            assert_eq!(a.query_many(&names), single);
        }
        // The estimate after an item's own increment: 1 then 2 for a repeated item.
        let mut cms = CountMin::new(1000, 4).unwrap();
        let mut got = Vec::new();
        cms.increment_many(&[(b"x", 1), (b"y", 1), (b"x", 1)], |n| got.push(n));
        assert_eq!(got, [1, 1, 2]);
    }

    #[test]
    fn increments_saturate_and_queries_take_the_minimum() {
        let mut cms = CountMin::new(10, 3).unwrap();
        assert_eq!(cms.increment(b"a", 5), 5);
        assert_eq!(cms.query(b"a"), 5);
        assert_eq!(
            cms.increment(b"a", u64::from(u32::MAX)),
            u64::from(u32::MAX)
        );
        assert_eq!(cms.query(b"a"), u64::from(u32::MAX));
        assert_eq!(cms.total(), 5 + u64::from(u32::MAX));
    }

    #[test]
    fn dimensions_from_probabilities_use_single_precision_logs() {
        assert_eq!(CountMin::dims_for(0.001, 0.01), (2000, 7));
        assert_eq!(CountMin::dims_for(0.5, 0.5), (4, 1));
    }

    #[test]
    fn refused_merges_change_nothing() {
        let mut a = CountMin::new(4, 2).unwrap();
        let mut b = CountMin::new(4, 2).unwrap();
        a.increment(b"x", 3);
        b.increment(b"x", 2);
        let before = a.clone();
        let b2 = b.clone();
        assert_eq!(a.merge(&[(&before, 1), (&b2, -2)]), Err(MergeOverflow));
        assert_eq!(a, before);
        a.merge(&[(&before, 2), (&b2, 1)]).unwrap();
        assert_eq!(a.query(b"x"), 8);
        assert_eq!(a.total(), 8);
    }

    #[test]
    fn dump_round_trips() {
        let mut a = CountMin::new(1000, 5).unwrap();
        for i in 0..100u32 {
            a.increment(&i.to_le_bytes(), u64::from(i));
        }
        let header = a.dump_header();
        assert_eq!(CountMin::header_bytes(&header), Ok(20_000));
        let mut b = CountMin::from_header(&header).unwrap();
        for (iter, len) in a.chunk_plan() {
            let start = iter as u64 - 1 - len;
            b.load_chunk(iter, &a.cell_bytes(start, len)).unwrap();
        }
        assert_eq!(a, b);
        assert!(CountMin::from_header(&[0; 24]).is_err());
        let mut huge = header.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(CountMin::header_bytes(&huge).is_err());
    }
}
