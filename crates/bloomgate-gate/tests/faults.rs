//! Store outages: a failed commit is not sticky, records made meanwhile are kept and committed
//! when the store answers again, a full queue is reported as items not recorded.

mod common;

use bloomgate_gate::{
    ExactStore, FilterMode, Gate, GateConfig, LifecycleConfig, Policy, SqliteStore,
};
use bloomgate_testkit::gate::HookedStore;

fn gate(store: Box<dyn ExactStore>) -> Gate {
    let lifecycle = LifecycleConfig {
        min_items_per_generation: 8,
        memory_budget_bytes: 1 << 20,
        ..LifecycleConfig::new(10_000, 3)
    };
    let config = GateConfig {
        cache_capacity: 64,
        ..GateConfig::new(Policy::Verify, FilterMode::Local, lifecycle)
    };
    Gate::new(store, config).expect("valid config")
}

/// A SQLite store that can be switched off and on: models a store outage.
fn switched_store(
    inner: SqliteStore,
    down: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> impl ExactStore {
    HookedStore {
        inner,
        before: move |_| {
            if down.load(std::sync::atomic::Ordering::SeqCst) {
                Err(bloomgate_gate::Error::InvalidConfig("store down".into()))
            } else {
                Ok(())
            }
        },
    }
}

/// A store outage is not sticky: what is recorded meanwhile is kept (and hidden) and committed
/// once the store answers again; a full queue takes fewer items and says so; everything works
/// afterwards without a new gate.
#[test]
fn records_made_during_an_outage_are_committed_when_the_store_returns() {
    use std::sync::atomic::Ordering::SeqCst;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seen.db");
    let down = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let store = switched_store(SqliteStore::open(&path).unwrap(), down.clone());
    let gate = gate(Box::new(store));
    assert_eq!(gate.unseen(1, &[1, 2], 1_000).unwrap(), vec![true, true]);
    down.store(true, SeqCst);
    assert_eq!(gate.record(1, &[1, 2], 1_000).unwrap(), 2);
    assert!(
        gate.flush().is_err(),
        "the commit fails while the store is down"
    );
    // Still hidden from this process, and a scope never loaded is an error, not "unseen".
    assert_eq!(
        gate.unseen(1, &[1, 2, 3], 1_001).unwrap(),
        vec![false, false, true]
    );
    assert!(gate.unseen(2, &[1], 1_001).is_err());
    // Fill the queue: the rest of a record is refused, and counted as such.
    let many: Vec<u64> = (100..100 + bloomgate_gate::QUEUE_ROWS as u64).collect();
    let taken = gate.record(3, &many, 1_002).unwrap();
    assert_eq!(taken, bloomgate_gate::QUEUE_ROWS - 2);
    assert_eq!(
        gate.record(3, &[7], 1_002).unwrap(),
        0,
        "a full queue takes nothing"
    );
    down.store(false, SeqCst);
    // The recorder's backoff is at most RETRY_MAX; flush waits for the commit.
    let mut flushed = gate.flush();
    for _ in 0..50 {
        if flushed.is_ok() {
            break;
        }
        std::thread::sleep(bloomgate_gate::RETRY_FIRST);
        flushed = gate.flush();
    }
    flushed.expect("committed once the store is back");
    assert_eq!(gate.record_backlog(), 0);
    let check = SqliteStore::open(&path).unwrap();
    let mut out = Vec::new();
    check.contains(1, &[1, 2], 0, &mut out).unwrap();
    check
        .contains(3, &[100, many[taken - 1], many[taken]], 0, &mut out)
        .unwrap();
    assert_eq!(out, vec![true, true, true, true, false]);
    assert_eq!(gate.unseen(2, &[1], 1_003).unwrap(), vec![true]);
    assert_eq!(gate.record(3, &[7], 1_003).unwrap(), 1);
    gate.flush().unwrap();
}
