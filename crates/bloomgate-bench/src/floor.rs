//! The machine's memory floor for a filter of a given size, so that query costs can be judged
//! against what the memory system allows rather than against each other only. On a buffer of the
//! filter's size, allocated like the filters (advised onto transparent huge pages with
//! `bloomgate::advise_huge_pages`, so the floor pays the same TLB costs as the filters), two
//! access patterns are timed:
//! - `independent`: random 64-byte line reads with many in flight — each address is computed
//!   [`AHEAD`] reads early and prefetched, the way the filters' batched queries work. This is the
//!   random-line *throughput* of the memory system: the floor a one-line query can approach when
//!   queries overlap (`query_miss_batch` is judged against it).
//! - `hashed`: the independent pattern plus, for read i, XXH3-128 (`KeyHash::of`, as the filters
//!   hash) of the i-th of [`HASHED_KEYS`] 16-byte keys, folded into the sum; no address depends
//!   on it. The floor of any batched query that must hash each key and read one random line:
//!   on the development machine the hash's work does not overlap the memory stalls, so this is
//!   about the independent floor plus the hash-only cost, not the larger of the two
//!   (`query_miss_batch` is judged against it as well).
//! - `dependent`: a pointer chase through a random cycle of all lines, each address read from the
//!   previous line, so one miss at a time: the random-line *latency*, for reference (what a query
//!   that cannot overlap with the next one pays).

use crate::keys::{keys, mix, Key, Stream};
use crate::timing::ns_per_op;
use bloomgate::KeyHash;
use std::ops::Range;

const LINE_WORDS: usize = 8; // 64-byte lines of u64

/// Reads in flight in the independent pattern: prefetch distance, in lines.
pub const AHEAD: usize = 32;

/// Keys cycled through by the hashed pattern (16 MiB of keys, like the bench's query sets).
pub const HASHED_KEYS: usize = 1 << 20;

/// A floor measurement: ns per line for one access pattern on a buffer of `bytes`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Floor {
    /// Size of the buffer read.
    pub bytes: u64,
    /// The access pattern: `independent`, `hashed` or `dependent`.
    pub pattern: &'static str,
    /// Time per cache line read.
    pub ns_per_line: f64,
}

/// The library's prefetch hint, so the floor and the filters issue the same instruction.
pub use bloomgate::prefetch;

/// Measures the three patterns on a fresh buffer of `bytes` (rounded up to whole lines), best of
/// `reps` runs of `reads` accesses each (fewer for the slow chase on large buffers).
pub fn probe(bytes: u64, reads: usize, reps: u32) -> [Floor; 3] {
    let lines = (bytes.div_ceil(64)).max(2) as usize;
    let buf = chase_buffer(lines);
    let independent = ns_per_op(reps, reads, |_, r| {
        independent_reads(&buf, lines as u64, r, |_| 0)
    });
    let keys = keys(Stream::Absent, 0, HASHED_KEYS);
    let hashed = ns_per_op(reps, reads, |_, r| {
        independent_reads(&buf, lines as u64, r, hash_of(&keys))
    });
    // The chase continues from block to block and restarts at line 0 with each repetition, so
    // block i covers the same lines in every repetition.
    let steps = reads.min(if bytes > (64 << 20) {
        2_000_000
    } else {
        10_000_000
    });
    let mut line = 0usize;
    let dependent = ns_per_op(reps, steps, |_, r| {
        if r.start == 0 {
            line = 0;
        }
        line = pointer_chase(&buf, line, r.len());
        line as u64
    });
    [
        Floor {
            bytes,
            pattern: "independent",
            ns_per_line: independent,
        },
        Floor {
            bytes,
            pattern: "hashed",
            ns_per_line: hashed,
        },
        Floor {
            bytes,
            pattern: "dependent",
            ns_per_line: dependent,
        },
    ]
}

/// A buffer of `lines` 64-byte lines linked by Sattolo's algorithm into a single random cycle
/// ("next line" in the first word of each line), so a chase visits every line in an order the
/// prefetcher cannot guess. Advised onto huge pages before first touch, like the filters;
/// building the permutation then touches every page before timing.
fn chase_buffer(lines: usize) -> Vec<u64> {
    // vec![0; n] comes from alloc_zeroed: a large buffer's pages are untouched until written.
    let mut buf = vec![0u64; lines * LINE_WORDS];
    bloomgate::advise_huge_pages(buf.as_mut_ptr(), lines * 64);
    let mut order: Vec<u32> = (0..lines as u32).collect();
    let mut rng = 0x0123_4567_89AB_CDEFu64;
    for i in (1..lines).rev() {
        rng = mix(rng);
        let j = ((rng as u128 * i as u128) >> 64) as usize; // j < i
        order.swap(i, j);
    }
    for w in 0..lines {
        buf[order[w] as usize * LINE_WORDS] = order[(w + 1) % lines] as u64;
    }
    buf
}

/// Reads one word from each of the random lines numbered by `reads` (line of read i: a hash of
/// i, so no address depends on a load), prefetching the line of read i + [`AHEAD`] before reading
/// that of read i; summed, with `also(i)` xored in, so that no read can be elided. `also` is the
/// per-read work of the pattern (`|_| 0` for none: the xor compiles away).
fn independent_reads(
    buf: &[u64],
    lines: u64,
    reads: Range<usize>,
    also: impl Fn(usize) -> u64,
) -> u64 {
    let word_of = |i: usize| ((mix(i as u64) as u128 * lines as u128) >> 64) as usize * LINE_WORDS;
    // ring[j % AHEAD] holds the word of read j, for the AHEAD reads ahead of the current one.
    let mut ring = [0usize; AHEAD];
    for j in reads.start..reads.start + AHEAD {
        ring[j % AHEAD] = word_of(j);
        prefetch(buf.as_ptr().wrapping_add(ring[j % AHEAD]));
    }
    let mut sum = 0u64;
    for i in reads {
        let ahead = word_of(i + AHEAD);
        prefetch(buf.as_ptr().wrapping_add(ahead));
        let slot = &mut ring[i % AHEAD];
        sum = sum.wrapping_add(buf[*slot + 1]) ^ also(i);
        *slot = ahead;
    }
    sum
}

/// The hashed pattern's per-read work: XXH3-128 of `keys[i % keys.len()]` the way the filters
/// hash (seed 0), low word.
fn hash_of(keys: &[Key]) -> impl Fn(usize) -> u64 + '_ {
    move |i| KeyHash::of(&keys[i % keys.len()], 0).lo
}

/// `steps` loads from `line` on, each address read from the previous line; returns the last.
fn pointer_chase(buf: &[u64], mut line: usize, steps: usize) -> usize {
    for _ in 0..steps {
        line = buf[line * LINE_WORDS] as usize;
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chase_is_one_cycle_and_numbers_are_sane() {
        let [ind, hashed, dep] = probe(64 * 1000, 100_000, 1);
        assert!(ind.ns_per_line > 0.0 && hashed.ns_per_line > 0.0 && dep.ns_per_line > 0.0);
        assert_eq!(
            [ind.pattern, hashed.pattern, dep.pattern],
            ["independent", "hashed", "dependent"]
        );
        // A single cycle: after `lines` steps from line 0 we are back at line 0, not before.
        let lines = 1000usize;
        let buf = chase_buffer(lines);
        let first_return = (1..=lines).find(|&s| pointer_chase(&buf, 0, s) == 0);
        assert_eq!(first_return, Some(lines));
    }

    #[test]
    fn independent_reads_visit_the_hashed_lines() {
        // Each line holds its own number in word 1: the sum is the sum of the line numbers.
        let lines = 1000u64;
        let mut buf = vec![0u64; lines as usize * LINE_WORDS];
        for l in 0..lines as usize {
            buf[l * LINE_WORDS + 1] = l as u64;
        }
        let expected: u64 = (10..500u64)
            .map(|i| ((mix(i) as u128 * lines as u128) >> 64) as u64)
            .sum();
        assert_eq!(independent_reads(&buf, lines, 10..500, |_| 0), expected);
        // The hashed pattern reads the same lines and folds in each key's hash.
        let keys = keys(Stream::Absent, 0, 64);
        let expected = (10..500usize).fold(0u64, |sum, i| {
            let line = ((mix(i as u64) as u128 * lines as u128) >> 64) as u64;
            sum.wrapping_add(line) ^ KeyHash::of(&keys[i % 64], 0).lo
        });
        assert_eq!(
            independent_reads(&buf, lines, 10..500, hash_of(&keys)),
            expected
        );
    }
}
