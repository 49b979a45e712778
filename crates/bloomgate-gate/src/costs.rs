//! The measured costs behind the cold-path rule: is building a scope's filter now cheaper than
//! the exact-path lookups it saves?
//!
//! Two running fits, kept from the gate's own calls (so they follow the store in use, its
//! latency and the machine's load): the time of an exact-path store batch against the items it
//! asked, and the time of a filter build (history load from the store plus inserts) against its
//! history rows, each a fixed part plus a part per unit. A request whose scope has no filter
//! builds it (or waits for the build already running) when
//!
//! ```text
//!     build(estimated rows)  ≤  INLINE_FACTOR × exact path(candidates)
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

use std::sync::Mutex;
use std::time::Duration;

/// How many exact-path requests' worth of time a build may cost and still run on the request
/// path (see the module docs).
pub const INLINE_FACTOR: f64 = 4.0;

/// Weight of a new sample in the running fits.
const ALPHA: f64 = 1.0 / 64.0;

/// A running least-squares fit of time = fixed + per_unit × units, over exponentially weighted
/// sums (recent calls count most). Store calls have a fixed part (a round trip, a transaction)
/// that dominates small ones: a fit through the origin would make a 1-item exact-path batch look
/// like 100 µs per item.
#[derive(Default)]
struct Fit(Mutex<Sums>);

#[derive(Default, Clone, Copy)]
struct Sums {
    samples: u64,
    x: f64,
    y: f64,
    xx: f64,
    xy: f64,
}

impl Fit {
    fn observe(&self, units: f64, nanos: f64) {
        if !(units.is_finite() && nanos.is_finite() && units >= 0.0 && nanos >= 0.0) {
            return;
        }
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let w = if s.samples == 0 { 1.0 } else { ALPHA };
        s.samples += 1;
        s.x += w * (units - s.x);
        s.y += w * (nanos - s.y);
        s.xx += w * (units * units - s.xx);
        s.xy += w * (units * nanos - s.xy);
    }

    /// (fixed ns, ns per unit), or None before the first sample.
    fn line(&self) -> Option<(f64, f64)> {
        let s = *self.0.lock().unwrap_or_else(|e| e.into_inner());
        if s.samples == 0 {
            return None;
        }
        let var = s.xx - s.x * s.x;
        let slope = if var > 1e-9 * s.xx.max(1.0) {
            ((s.xy - s.x * s.y) / var).max(0.0)
        } else {
            0.0
        };
        let fixed = (s.y - slope * s.x).max(0.0);
        Some((fixed, slope))
    }

    fn predict(&self, units: f64) -> Option<f64> {
        self.line().map(|(fixed, slope)| fixed + slope * units)
    }
}

/// The gate's measured costs (see the module docs).
#[derive(Default)]
pub(crate) struct Costs {
    /// Exact-path store batches: time against items asked.
    lookups: Fit,
    /// Filter builds: time against history rows.
    builds: Fit,
    /// Mean rows per build (the estimate for a scope never built).
    rows: Fit,
}

impl Costs {
    /// An exact-path store batch of `items` took `elapsed`.
    pub fn observe_lookups(&self, items: usize, elapsed: Duration) {
        if items > 0 {
            self.lookups
                .observe(items as f64, elapsed.as_nanos() as f64);
        }
    }

    /// A filter build over `rows` history rows took `elapsed`.
    pub fn observe_build(&self, rows: u64, elapsed: Duration) {
        self.builds.observe(rows as f64, elapsed.as_nanos() as f64);
        self.rows.observe(0.0, rows as f64);
    }

    /// Whether a request with `candidates` candidates should build (or wait for) its scope's
    /// filter of about `rows` history rows (None: unknown, use the mean) instead of taking the
    /// exact path.
    pub fn build_pays(&self, rows: Option<u64>, candidates: usize) -> bool {
        let rows = rows
            .map(|r| r as f64)
            .or_else(|| self.rows.predict(0.0))
            .unwrap_or(0.0);
        match (
            self.builds.predict(rows),
            self.lookups.predict(candidates as f64),
        ) {
            (Some(build), Some(exact)) => build <= INLINE_FACTOR * exact,
            _ => true,
        }
    }

    /// The fitted lines, for the metrics and the demo: (exact path: fixed ns, ns per item;
    /// builds: fixed ns, ns per row), zeros before the first sample.
    pub fn snapshot(&self) -> [f64; 4] {
        let (a, b) = self.lookups.line().unwrap_or_default();
        let (c, d) = self.builds.line().unwrap_or_default();
        [a, b, c, d]
    }
}
