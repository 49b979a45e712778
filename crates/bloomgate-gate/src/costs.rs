//! The measured costs behind the cold-path rule: is building a scope's filter now cheaper than
//! the exact-path lookups it saves?
//!
//! Two running averages, kept from the gate's own calls (so they follow the store in use, its
//! latency and the machine's load): the time of an exact-path store batch per item it asked, and
//! the time of a filter build (history load from the store plus inserts) per history row. A
//! request whose scope has no filter builds it (or waits for the build already running) when
//!
//! ```text
//!     estimated rows × build time per row  ≤  INLINE_FACTOR × candidates × lookup time per item
//! ```
//!
//! and otherwise takes the exact path while the build runs in the background. The rows are the
//! scope's own count from an earlier build when known, else the mean over builds so far. The
//! factor counts the requests a build serves that the exact path would not: a scope that is
//! asked about once is answered by the build *and* served by the filter afterwards, so the
//! build pays for itself when it costs about as much as one exact-path request, and
//! [`INLINE_FACTOR`] = 4 covers the requests of the same scope that arrive while a background
//! build waits in its queue (measured in docs/gate.md). Until both averages have a sample the
//! rule builds: a cold gate has nothing to compare with, and a build is what it needs.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// How many exact-path requests' worth of time a build may cost and still run on the request
/// path (see the module docs).
pub const INLINE_FACTOR: f64 = 4.0;

/// Weight of a new sample in the running averages.
const ALPHA: f64 = 1.0 / 32.0;

/// An exponentially weighted average in an atomic (f64 bits; racing updates may drop a sample,
/// never tear one). 0 bits = no sample yet.
#[derive(Default)]
struct Average(AtomicU64);

impl Average {
    fn get(&self) -> Option<f64> {
        match self.0.load(Relaxed) {
            0 => None,
            bits => Some(f64::from_bits(bits)),
        }
    }

    fn observe(&self, sample: f64) {
        if !sample.is_finite() || sample <= 0.0 {
            return;
        }
        let next = match self.get() {
            None => sample,
            Some(mean) => mean + ALPHA * (sample - mean),
        };
        self.0.store(next.to_bits(), Relaxed);
    }
}

/// The gate's measured costs (see the module docs).
#[derive(Default)]
pub(crate) struct Costs {
    lookup_ns_per_item: Average,
    build_ns_per_row: Average,
    rows_per_build: Average,
}

impl Costs {
    /// An exact-path store batch of `items` took `elapsed`.
    pub fn observe_lookups(&self, items: usize, elapsed: Duration) {
        if items > 0 {
            self.lookup_ns_per_item
                .observe(elapsed.as_nanos() as f64 / items as f64);
        }
    }

    /// A filter build over `rows` history rows (at least one counted) took `elapsed`.
    pub fn observe_build(&self, rows: u64, elapsed: Duration) {
        let rows = rows.max(1) as f64;
        self.build_ns_per_row
            .observe(elapsed.as_nanos() as f64 / rows);
        self.rows_per_build.observe(rows);
    }

    /// Whether a request with `candidates` candidates should build (or wait for) its scope's
    /// filter of about `rows` history rows (None: unknown, use the mean) instead of taking the
    /// exact path.
    pub fn build_pays(&self, rows: Option<u64>, candidates: usize) -> bool {
        let (Some(per_row), Some(per_item)) =
            (self.build_ns_per_row.get(), self.lookup_ns_per_item.get())
        else {
            return true;
        };
        let rows = rows
            .map(|r| r.max(1) as f64)
            .or_else(|| self.rows_per_build.get())
            .unwrap_or(1.0);
        rows * per_row <= INLINE_FACTOR * candidates as f64 * per_item
    }

    /// (ns per exact-path item, ns per build row), for the metrics.
    pub fn snapshot(&self) -> (f64, f64) {
        (
            self.lookup_ns_per_item.get().unwrap_or(0.0),
            self.build_ns_per_row.get().unwrap_or(0.0),
        )
    }
}
