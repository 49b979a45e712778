//! The gate's test helpers (feature `gate`): an exact store that runs a hook before every call
//! ([`HookedStore`]: a store outage, a store whose commits fall behind), and one request of the
//! never-shown-again check that concurrent tests run against one gate or several
//! ([`checked_request`]).

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::Mutex;

use bloomgate_gate::{ExactStore, Gate, Result, Seen, SqliteStore};

/// What a store call does: reads (`contains`, `load`), commits served items (`record`,
/// `record_batch`) or expires rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `contains` or `load`.
    Read,
    /// `record` or `record_batch`.
    Commit,
    /// `expire`.
    Expire,
}

/// A SQLite store that runs `before` ahead of every call, which may fail it or hold it: a
/// store outage, or a store whose commits fall behind.
pub struct HookedStore<F> {
    /// The store that answers once `before` let the call through.
    pub inner: SqliteStore,
    /// Run ahead of every call; an error fails the call.
    pub before: F,
}

impl<F: Fn(Call) -> Result<()> + Send + Sync> ExactStore for HookedStore<F> {
    fn contains(&self, scope: u64, items: &[u64], since: u64, out: &mut Vec<bool>) -> Result<()> {
        (self.before)(Call::Read)?;
        self.inner.contains(scope, items, since, out)
    }
    fn record(&self, scope: u64, seen: &[Seen]) -> Result<()> {
        (self.before)(Call::Commit)?;
        self.inner.record(scope, seen)
    }
    fn record_batch(&self, rows: &[(u64, Seen)]) -> Result<()> {
        (self.before)(Call::Commit)?;
        self.inner.record_batch(rows)
    }
    fn load(&self, scope: u64, since: u64, out: &mut Vec<Seen>) -> Result<()> {
        (self.before)(Call::Read)?;
        self.inner.load(scope, since, out)
    }
    fn expire(&self, before: u64) -> Result<u64> {
        (self.before)(Call::Expire)?;
        self.inner.expire(before)
    }
}

/// What the never-shown-again check knows was shown: (scope, item) → when.
pub type Shown = Mutex<HashMap<(u64, u64), u64>>;

/// One request of the never-shown-again check at time `now`: asks `ask` which of `candidates`
/// (sorted and deduplicated here) `scope` may be shown, asserts that none of them was shown
/// before the request started (per `shown`; `context` names the request in the failure), then
/// records up to three of those it may show through `record_on` and adds them to `shown`.
pub fn checked_request(
    ask: &Gate,
    record_on: &Gate,
    shown: &Shown,
    scope: u64,
    mut candidates: Vec<u64>,
    now: u64,
    context: impl Display,
) {
    candidates.sort_unstable();
    candidates.dedup();
    let known = shown.lock().unwrap().clone();
    let verdict = ask.unseen(scope, &candidates, now).unwrap();
    let mut served = Vec::new();
    for (&item, &may_show) in candidates.iter().zip(&verdict) {
        assert!(
            !(may_show && known.contains_key(&(scope, item))),
            "{context}: item {item} of scope {scope} shown again"
        );
        if may_show && served.len() < 3 {
            served.push(item);
        }
    }
    record_on.record(scope, &served, now).unwrap();
    let mut shown = shown.lock().unwrap();
    for item in served {
        shown.insert((scope, item), now);
    }
}
