//! The machine's memory floor for a filter of a given size: on a buffer of the same size, the cost
//! of independent random 64-byte line reads (what a one-line filter query can approach when many
//! queries are in flight) and of a dependent pointer chase (one miss at a time, for reference).
//! Anchors on this machine kind, 1 GiB: independent ≈ 9.8 ns/line, dependent ≈ 253 ns/line.

use crate::keys::mix;
use crate::timing::ns_per_op;
use std::ops::Range;

const LINE_WORDS: usize = 8; // 64-byte lines of u64

/// A floor measurement: ns per line for one access pattern on a buffer of `bytes`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Floor {
    pub bytes: u64,
    pub pattern: &'static str,
    pub ns_per_line: f64,
}

/// Measures both patterns on a fresh buffer of `bytes` (rounded up to whole lines), best of
/// `reps` runs of `reads` accesses each.
pub fn probe(bytes: u64, reads: usize, reps: u32) -> [Floor; 2] {
    let lines = (bytes.div_ceil(64)).max(2) as usize;
    let buf = chase_buffer(lines);
    let independent = ns_per_op(reps, reads, |_, r| independent_reads(&buf, lines as u64, r));
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
            pattern: "dependent",
            ns_per_line: dependent,
        },
    ]
}

/// A buffer of `lines` 64-byte lines linked by Sattolo's algorithm into a single random cycle
/// ("next line" in the first word of each line), so a chase visits every line in an order the
/// prefetcher cannot guess. Building the permutation also touches every page before timing.
fn chase_buffer(lines: usize) -> Vec<u64> {
    let mut buf = vec![0u64; lines * LINE_WORDS];
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

/// `reads` loads of random lines whose addresses come from independent arithmetic on the loop
/// counter (no load depends on another), summed so none can be elided.
fn independent_reads(buf: &[u64], lines: u64, reads: Range<usize>) -> u64 {
    let mut sum = 0u64;
    for i in reads.start as u64..reads.end as u64 {
        let line = ((mix(i) as u128 * lines as u128) >> 64) as usize;
        sum = sum.wrapping_add(buf[line * LINE_WORDS + 1]);
    }
    sum
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
        let [ind, dep] = probe(64 * 1000, 100_000, 1);
        assert!(ind.ns_per_line > 0.0 && dep.ns_per_line > 0.0);
        assert_eq!(ind.pattern, "independent");
        // A single cycle: after `lines` steps from line 0 we are back at line 0, not before.
        let lines = 1000usize;
        let buf = chase_buffer(lines);
        let first_return = (1..=lines).find(|&s| pointer_chase(&buf, 0, s) == 0);
        assert_eq!(first_return, Some(lines));
    }
}
