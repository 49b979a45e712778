//! What a `record` that returned promises, by durability: `Durability::Commit` returns once the
//! group commit holding the rows succeeded (shared by concurrent callers) and reports a failed
//! one as an error, the rows staying queued; rows put back with `replay` (a caller's durable log
//! after a restart) are never refused by the recorder's bound and are committed at their
//! original time; `uncommitted` lists what a caller's log must keep.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use bloomgate_gate::{
    Durability, ExactStore, FilterMode, Gate, GateConfig, LatencyStore, LifecycleConfig, Policy,
    Seen, SqliteStore, QUEUE_ROWS,
};

const DAY: u64 = 86_400_000;
const NOW: u64 = 1_700_000_000_000;

fn gate(store: Box<dyn ExactStore>) -> Gate {
    let config = GateConfig::new(
        Policy::Verify,
        FilterMode::Local,
        LifecycleConfig::new(30 * DAY, 4),
    );
    Gate::new(store, config).unwrap()
}

/// A SQLite store that refuses every call while `down` is set (a store outage).
struct Switchable {
    inner: SqliteStore,
    down: Arc<AtomicBool>,
}

impl Switchable {
    fn check(&self) -> bloomgate_gate::Result<()> {
        if self.down.load(Relaxed) {
            return Err(bloomgate_gate::Error::InvalidConfig("store down".into()));
        }
        Ok(())
    }
}

impl ExactStore for Switchable {
    fn contains(
        &self,
        s: u64,
        i: &[u64],
        since: u64,
        out: &mut Vec<bool>,
    ) -> bloomgate_gate::Result<()> {
        self.check()?;
        self.inner.contains(s, i, since, out)
    }
    fn record(&self, scope: u64, seen: &[Seen]) -> bloomgate_gate::Result<()> {
        self.check()?;
        self.inner.record(scope, seen)
    }
    fn record_batch(&self, rows: &[(u64, Seen)]) -> bloomgate_gate::Result<()> {
        self.check()?;
        self.inner.record_batch(rows)
    }
    fn load(&self, scope: u64, since: u64, out: &mut Vec<Seen>) -> bloomgate_gate::Result<()> {
        self.check()?;
        self.inner.load(scope, since, out)
    }
    fn expire(&self, before: u64) -> bloomgate_gate::Result<u64> {
        self.check()?;
        self.inner.expire(before)
    }
}

/// Which of `items` the store (read through its own connection) holds for `scope`.
fn stored(path: &std::path::Path, scope: u64, items: &[u64]) -> Vec<bool> {
    let reader = SqliteStore::open(path).unwrap();
    let mut out = Vec::new();
    reader.contains(scope, items, 0, &mut out).unwrap();
    out
}

/// Eight threads record with `Durability::Commit` through a store taking 3 ms per call: each
/// record returns with its rows in the store (read through another connection), and the
/// threads share commits (fewer group commits than records).
#[test]
fn commit_durability_returns_after_a_shared_commit() {
    let (dir, store) = common::sqlite_store();
    let path = dir.path().join("seen.db");
    let slow = LatencyStore::new(Box::new(store), Duration::from_millis(3));
    let gate = gate(Box::new(slow));
    let (threads, records) = (8u64, 25u64);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (gate, path) = (&gate, &path);
            s.spawn(move || {
                for r in 0..records {
                    let items = [t * 1_000 + r * 2, t * 1_000 + r * 2 + 1];
                    let taken = gate
                        .record_with(t, &items, NOW + r, Durability::Commit)
                        .unwrap();
                    assert_eq!(taken, 2);
                    assert_eq!(
                        stored(path, t, &items),
                        [true, true],
                        "thread {t} record {r}"
                    );
                }
            });
        }
    });
    let stats: HashMap<&str, u64> = gate.stats().into_iter().collect();
    assert_eq!(stats["recorded_rows"], threads * records * 2);
    assert!(
        stats["record_batches"] < threads * records,
        "{} group commits for {} records: commits were not shared",
        stats["record_batches"],
        threads * records
    );
}

/// While the store is down a committed record answers an error (the default one does not: its
/// rows are queued); both keep their rows queued, listed by `uncommitted`, hidden by the gate,
/// and committed once the store answers.
#[test]
fn a_failed_commit_is_an_error_and_the_rows_stay_queued() {
    let (dir, inner) = common::sqlite_store();
    let path = dir.path().join("seen.db");
    let down = Arc::new(AtomicBool::new(false));
    let gate = gate(Box::new(Switchable {
        inner,
        down: down.clone(),
    }));
    assert_eq!(gate.unseen(7, &[1, 2, 3], NOW).unwrap(), [true, true, true]);
    down.store(true, Relaxed);
    assert_eq!(gate.record(7, &[1], NOW).unwrap(), 1, "queued");
    let failed = gate.record_with(7, &[2], NOW + 1, Durability::Commit);
    assert!(failed.is_err(), "{failed:?}");
    let uncommitted: Vec<(u64, u64, u64)> = gate
        .uncommitted()
        .into_iter()
        .map(|(scope, seen)| (scope, seen.item, seen.at_ms))
        .collect();
    assert_eq!(uncommitted, [(7, 1, NOW), (7, 2, NOW + 1)]);
    assert_eq!(
        gate.unseen(7, &[1, 2, 3], NOW + 2).unwrap(),
        [false, false, true]
    );
    down.store(false, Relaxed);
    gate.flush().unwrap();
    assert!(gate.uncommitted().is_empty());
    assert_eq!(stored(&path, 7, &[1, 2, 3]), [true, true, false]);
    // Recording again what answered an error changes nothing.
    assert_eq!(
        gate.record_with(7, &[2], NOW + 1, Durability::Commit)
            .unwrap(),
        1
    );
    assert_eq!(stored(&path, 7, &[2]), [true]);
}

/// Rows put back from a caller's log after a restart go in beyond the recorder's bound during an
/// outage (where `record` takes nothing more), keep their original time (a row older than the
/// window reads unseen), and are committed once the store answers.
#[test]
fn replayed_rows_are_never_refused_and_keep_their_time() {
    let (dir, inner) = common::sqlite_store();
    let path = dir.path().join("seen.db");
    let down = Arc::new(AtomicBool::new(true));
    let gate = gate(Box::new(Switchable {
        inner,
        down: down.clone(),
    }));
    assert_eq!(gate.record(1, &[0], NOW).unwrap(), 1);
    assert!(gate.flush().is_err(), "the store is down");
    let many: Vec<u64> = (1..=QUEUE_ROWS as u64 + 1_000).collect();
    gate.replay(1, &many, NOW).unwrap();
    gate.replay(2, &[5], NOW - 31 * DAY).unwrap();
    assert_eq!(gate.record_backlog(), QUEUE_ROWS + 1_002);
    assert_eq!(gate.record(1, &[0], NOW).unwrap(), 0, "the queue is full");
    assert_eq!(
        gate.metrics().replayed_rows.load(Relaxed),
        QUEUE_ROWS as u64 + 1_001
    );
    down.store(false, Relaxed);
    gate.flush().unwrap();
    assert_eq!(gate.record_backlog(), 0);
    let last = *many.last().unwrap();
    assert_eq!(stored(&path, 1, &[1, last, last + 1]), [true, true, false]);
    assert_eq!(
        gate.unseen(1, &[1, last, last + 1], NOW + 1).unwrap(),
        [false, false, true]
    );
    assert_eq!(
        gate.unseen(2, &[5], NOW).unwrap(),
        [true],
        "recorded 31 days ago"
    );
}
