//! Timing that survives a shared, overloaded machine: the work is cut into short blocks
//! (4096 operations, ≈ 10–500 µs — well inside one scheduler slice), each block is
//! timed in every repetition, and the cost is the sum over blocks of each block's fastest run.
//! A block that was preempted or shared a core in one repetition is simply replaced by a clean run
//! of the same block, so ratios between contenders of one run stay meaningful under load.

use std::hint::black_box;
use std::ops::Range;
use std::time::{Duration, Instant};

/// Operations per timed block.
pub const BLOCK: usize = 1 << 12;

/// Per-block best times across repetitions.
#[derive(Clone, Debug, Default)]
pub struct BlockTimes(Vec<Duration>);

impl BlockTimes {
    /// Records `elapsed` for block `index` of the current repetition, keeping the fastest.
    pub fn record(&mut self, index: usize, elapsed: Duration) {
        if index >= self.0.len() {
            self.0.resize(index + 1, Duration::MAX);
        }
        self.0[index] = self.0[index].min(elapsed);
    }

    /// Keeps, block by block, the faster of `self` and `other` (repetitions of the same work).
    pub fn merge_min(&mut self, other: &BlockTimes) {
        for (i, &t) in other.0.iter().enumerate() {
            self.record(i, t);
        }
    }

    /// The time of all blocks together.
    pub fn total(&self) -> Duration {
        self.0.iter().sum()
    }
}

/// Runs `run(rep, block_range)` over `0..ops` in blocks of [`BLOCK`] for `reps` repetitions and
/// returns the best-per-block ns per operation. `run` returns a value that is black-boxed.
pub fn ns_per_op(reps: u32, ops: usize, mut run: impl FnMut(u32, Range<usize>) -> u64) -> f64 {
    let mut times = BlockTimes::default();
    for rep in 0..reps.max(1) {
        for (index, start) in (0..ops).step_by(BLOCK).enumerate() {
            let range = start..(start + BLOCK).min(ops);
            let started = Instant::now();
            black_box(run(rep, range));
            times.record(index, started.elapsed());
        }
    }
    times.total().as_nanos() as f64 / ops.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_fastest_run_of_each_block() {
        let mut a = BlockTimes::default();
        a.record(0, Duration::from_micros(5));
        a.record(1, Duration::from_micros(9));
        let mut b = BlockTimes::default();
        b.record(0, Duration::from_micros(7));
        b.record(1, Duration::from_micros(2));
        a.merge_min(&b);
        assert_eq!(a.total(), Duration::from_micros(7));
    }

    #[test]
    fn covers_every_operation_once_per_rep() {
        let mut seen = vec![0u32; BLOCK * 2 + 5];
        ns_per_op(3, seen.len(), |_, r| {
            r.for_each(|i| seen[i] += 1);
            0
        });
        assert!(seen.iter().all(|&n| n == 3));
    }
}
