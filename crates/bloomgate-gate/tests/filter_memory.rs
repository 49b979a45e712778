//! The filters' memory as the gate reports it (`filter_memory_bytes`, `GATE.INFO`'s field and
//! the budget's input): what the filters hold as they take items and rotate.

mod common;

use common::lifecycle;

use std::collections::HashMap;

use bloomgate_gate::{ExactStore, FilterMode, Gate, GateConfig, LifecycleConfig, Policy};

fn gate(store: Box<dyn ExactStore>, policy: Policy, lifecycle: LifecycleConfig) -> Gate {
    Gate::new(store, GateConfig::new(policy, FilterMode::Local, lifecycle)).expect("valid config")
}

/// `filter_memory_bytes` is what the filters hold: a scope's first filter, built from an empty
/// history, allocates nothing until it takes items, and the total follows every record (it
/// answered 0 after 200 scopes and 80,000 recorded rows when it was counted at builds only);
/// a total driven past the budget by records evicts filters, not only one driven by builds.
#[test]
fn filter_memory_follows_what_the_filters_take() {
    let (_dir, store) = common::sqlite_store();
    let day = 86_400_000;
    let big = gate(
        Box::new(store),
        Policy::Verify,
        lifecycle(30 * day, 4, 64, 256 << 20),
    );
    let now = 1_700_000_000_000u64;
    for scope in 0..200u64 {
        let candidates: Vec<u64> = (0..120).map(|i| scope * 10_000 + i).collect();
        big.unseen(scope, &candidates, now).unwrap();
    }
    big.flush().unwrap();
    let empty = big.filter_memory_bytes();
    for scope in 0..200u64 {
        let items: Vec<u64> = (0..400).map(|i| scope * 10_000 + i).collect();
        assert_eq!(big.record(scope, &items, now + 1).unwrap(), 400);
    }
    big.flush().unwrap();
    let full = big.filter_memory_bytes();
    // At a 1% false-positive rate a filter needs at least 9.58 bits per item.
    assert!(full >= 80_000 * 958 / 800, "{full} bytes for 80,000 rows");
    assert!(full > empty, "{empty} -> {full}");
    let stats: HashMap<&str, u64> = big.stats().into_iter().collect();
    assert_eq!(stats["filter_memory_bytes"], full);
    drop(big);

    let (_dir, store) = common::sqlite_store();
    let budget = 64 << 10;
    let small = gate(
        Box::new(store),
        Policy::Verify,
        lifecycle(30 * day, 4, 64, budget),
    );
    for scope in 0..200u64 {
        small.unseen(scope, &[1], now).unwrap();
        let items: Vec<u64> = (0..400).map(|i| scope * 10_000 + i).collect();
        small.record(scope, &items, now + 1).unwrap();
    }
    small.flush().unwrap();
    let held = small.filter_memory_bytes();
    assert!(held <= budget, "{held} bytes over a {budget}-byte budget");
    let evictions = &small.metrics().evictions;
    assert!(evictions.load(std::sync::atomic::Ordering::Relaxed) > 0);
}
