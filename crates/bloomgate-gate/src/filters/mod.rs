//! The gate's filter back-ends behind one interface.
//!
//! A back-end answers "may this scope have seen this item?" for a request's candidates
//! ([`FilterBackend::probe`]) and learns what the scope was just shown
//! ([`FilterBackend::record`]). Three implement it: [`NoFilters`] (the exact baseline: nothing
//! is filtered), the local filters (`lifecycle::LocalFilters`, in this process) and the remote
//! ones (`remote::RemoteFilters`, `WF.*` keys on a RESP server or a Redis Cluster). The gate
//! holds one as `Box<dyn FilterBackend>` and never asks which.
//!
//! Back-ends build filters from the exact side through [`HistorySource`] (implemented by the
//! gate's `Core`: the pending overlay plus the store, with the gate's accounting).

pub(crate) mod build_queue;
pub(crate) mod costs;
pub(crate) mod lifecycle;
pub(crate) mod nodes;
pub(crate) mod remote;
pub(crate) mod scripts;
pub(crate) mod snapshot;

use crate::metrics::{FilterGauges, SATURATION_BOUNDS};
use crate::{Result, Seen};

/// Where filter builds read a scope's history.
pub(crate) trait HistorySource: Send + Sync {
    /// The scope's rows seen at or after `since_ms`, oldest first: the gate's uncommitted
    /// overlay and the store.
    fn load_history(&self, scope: u64, since_ms: u64) -> Result<Vec<Seen>>;

    /// Sets `maybe[i]` for each item the gate recorded for `scope` at or after `since_ms` that
    /// is not committed yet (for back-ends whose writes trail the request path).
    fn overlay_seen(&self, scope: u64, items: &[u64], since_ms: u64, maybe: &mut [bool]);
}

/// What a probe could say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// `out` holds the filter's answers: `false` = definitely not seen within R.
    Filtered,
    /// No usable filter for this scope (no filters, or the exact path is faster than building
    /// one now, or the filter server failed): every item reads "maybe" and the caller takes the
    /// exact path for all of them, under every policy.
    Unfiltered,
    /// Some items were recorded (by this gate or another one sharing the filters) and are not
    /// committed to the store yet: they are seen, `seen` lists their indices (`out` is `false`
    /// for them); the others are answered as `filtered` says (`Filtered` or `Unfiltered`).
    Pending {
        /// Whether `out` holds the filter's answers for the other items.
        filtered: bool,
        /// The indices of the items known seen.
        seen: Vec<usize>,
    },
}

/// One kind of scope filters (none, local, remote).
pub(crate) trait FilterBackend: Send + Sync {
    /// Appends to `out` one answer per item: `false` only if the scope definitely did not see
    /// the item within R at `now_ms`. With [`Probe::Unfiltered`], every answer appended is `true`.
    fn probe(&self, scope: u64, items: &[u64], now_ms: u64, out: &mut Vec<bool>) -> Result<Probe>;

    /// `scope` was shown `items` at `now_ms` (they are already in the gate's pending overlay):
    /// the scope's filter must answer "maybe" for them from the next probe on.
    fn record(&self, scope: u64, items: &[u64], now_ms: u64) -> Result<()>;

    /// Called by the recorder after a group commit reached the store and before its rows leave
    /// the overlay: back-ends whose filter writes are batched do them here.
    fn commit(&self, _rows: &[(u64, Seen)]) -> Result<()> {
        Ok(())
    }

    /// Waits until every build queued so far is installed.
    fn flush(&self) {}

    /// Writes the filters to their directory, if the back-end persists them.
    fn persist(&self) -> Result<()> {
        Ok(())
    }

    /// Stops background work (persisting a last time where configured).
    fn shutdown(&self) -> Result<()> {
        Ok(())
    }

    /// Filter count, memory and saturation, for the metrics.
    fn gauges(&self) -> FilterGauges;

    /// Whether the pending rows live with the filters, shared by every gate process: a probe
    /// that fails is then an error for its request (the exact path alone does not know the
    /// rows other processes recorded and have not committed), and "not seen" answers of the
    /// store may not be cached (another process may record the item any moment).
    fn shares_pending(&self) -> bool {
        false
    }

    /// Estimated false-positive rate of a scope's resident filter (None if none is resident).
    fn estimated_fpr(&self, _scope: u64) -> Option<f64> {
        None
    }
}

/// The exact baseline: no filters, every candidate to the exact path.
pub(crate) struct NoFilters;

impl FilterBackend for NoFilters {
    fn probe(&self, _: u64, items: &[u64], _: u64, out: &mut Vec<bool>) -> Result<Probe> {
        out.resize(out.len() + items.len(), true);
        Ok(Probe::Unfiltered)
    }

    fn record(&self, _: u64, _: &[u64], _: u64) -> Result<()> {
        Ok(())
    }

    fn gauges(&self) -> FilterGauges {
        FilterGauges {
            resident_filters: 0,
            memory_bytes: 0,
            saturation: [0; SATURATION_BOUNDS.len() + 1],
        }
    }
}
