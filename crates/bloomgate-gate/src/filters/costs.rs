//! The measured costs behind the cold-path rule: is building a scope's filter now cheaper than
//! the exact-path lookups it saves?
//!
//! Two running averages, kept from the gate's own calls (so they follow the store in use and
//! its latency): the time of an exact-path store batch per item it asked, and the time of a
//! filter build (history load from the store plus inserts) per history row — each from calls of
//! at least [`MIN_UNITS`] units (smaller ones measure the call's fixed part, which both sides
//! pay once), as geometric means (robust to calls stalled by a loaded machine's scheduler). A
//! request whose scope has no filter builds it (or waits for the build already running) when
//!
//! ```text
//!     estimated rows × time per row  ≤  INLINE_FACTOR × (1 + waiting) × candidates × time per lookup
//! ```
//!
//! and otherwise takes the exact path while the build runs in the background (and raises the
//! build's priority in the pool). `waiting` counts the scope's requests that already took the
//! exact path while its build was queued: each is lookups a build would have saved, so a busy
//! scope whose history is too large for one request soon qualifies. The rows are the scope's own
//! count from an earlier build when known, else the mean over builds so far.
//!
//! [`INLINE_FACTOR`] = 16: a filter serves every later request of its scope, so a build is worth
//! several exact-path requests. Measured on `demo feed --quick` (SQLite, docs/gate.md): a
//! lookup costs about a seventh of a history row (≈ 0.55 µs against ≈ 4 µs on a loaded machine),
//! so a user with the mean history (300 rows) builds in about five exact-path requests' time,
//! and a user makes 50 requests on average; at 16, users up to about a thousand rows build on
//! their first request and the heaviest take the exact path until the pool (which builds them
//! first: highest demand) or their own growing `waiting` count gets to them. Until the build cost
//! has a sample the rule builds: a cold gate has nothing to compare with, and a build is what it
//! needs.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// How many exact-path requests' worth of time a build may cost and still run on the request
/// path (see the module docs).
pub const INLINE_FACTOR: f64 = 16.0;

/// Weight of a new sample in the running averages.
const ALPHA: f64 = 1.0 / 32.0;

/// Calls smaller than this many units are not sampled: their time is mostly the call's fixed
/// part (a round trip, a transaction), which both sides of the rule pay once.
pub const MIN_UNITS: u64 = 32;

/// A running geometric mean of a cost per unit, in an atomic (f64 bits of the mean log; racing
/// updates may drop a sample, never tear one; 0 bits = no sample yet). Geometric: a call stalled
/// 100× by the scheduler on a loaded machine moves it by a factor, not by a hundred samples'
/// worth.
#[derive(Default)]
struct PerUnit(AtomicU64);

impl PerUnit {
    fn observe(&self, units: u64, elapsed: Duration) {
        let nanos = elapsed.as_nanos() as f64;
        if units < MIN_UNITS || nanos <= 0.0 {
            return;
        }
        let sample = (nanos / units as f64).ln();
        let next = match self.mean_log() {
            None => sample,
            Some(mean) => mean + ALPHA * (sample - mean),
        };
        // A mean log of exactly 0.0 (1 ns per unit) would read as "no sample": nudge it.
        let bits = if next.to_bits() == 0 {
            f64::MIN_POSITIVE.to_bits()
        } else {
            next.to_bits()
        };
        self.0.store(bits, Relaxed);
    }

    fn mean_log(&self) -> Option<f64> {
        match self.0.load(Relaxed) {
            0 => None,
            bits => Some(f64::from_bits(bits)),
        }
    }

    /// Nanoseconds per unit, if sampled.
    fn get(&self) -> Option<f64> {
        self.mean_log().map(f64::exp)
    }
}

/// The mean rows per build (the estimate for a scope never built).
#[derive(Default)]
struct MeanRows(AtomicU64);

/// The gate's measured costs (see the module docs).
#[derive(Default)]
pub(crate) struct Costs {
    /// Exact-path store time per candidate asked.
    lookup: PerUnit,
    /// Build time (history load and inserts) per history row.
    row: PerUnit,
    /// Mean history rows per build (f64 bits).
    rows: MeanRows,
}

impl Costs {
    /// An exact-path store batch of `items` took `elapsed`.
    pub fn observe_lookups(&self, items: usize, elapsed: Duration) {
        self.lookup.observe(items as u64, elapsed);
    }

    /// A filter build over `rows` history rows took `elapsed`.
    pub fn observe_build(&self, rows: u64, elapsed: Duration) {
        self.row.observe(rows, elapsed);
        let mean = f64::from_bits(self.rows.0.load(Relaxed));
        let next = if mean == 0.0 {
            rows as f64
        } else {
            mean + ALPHA * (rows as f64 - mean)
        };
        self.rows.0.store(next.to_bits(), Relaxed);
    }

    /// Whether a request with `candidates` candidates should build (or wait for) its scope's
    /// filter of about `rows` history rows (None: unknown, use the mean) instead of taking the
    /// exact path, when `waiting` earlier requests of the scope already took the exact path
    /// while its build was queued (each one more that a build would have saved).
    pub fn build_pays(&self, rows: Option<u64>, candidates: usize, waiting: u64) -> bool {
        let Some(per_row) = self.row.get() else {
            return true;
        };
        // Until a large exact-path batch has been timed, a lookup is taken to cost what a history
        // row does (measured on SQLite it costs about a seventh: the rule then builds less).
        let per_lookup = self.lookup.get().unwrap_or(per_row);
        let rows = rows.map_or_else(|| f64::from_bits(self.rows.0.load(Relaxed)), |r| r as f64);
        let saved = (1 + waiting) as f64 * candidates as f64 * per_lookup;
        rows * per_row <= INLINE_FACTOR * saved
    }

    /// (ns per exact-path lookup, ns per history row built), zeros before the first sample.
    pub fn snapshot(&self) -> [f64; 2] {
        [
            self.lookup.get().unwrap_or(0.0),
            self.row.get().unwrap_or(0.0),
        ]
    }
}
