//! Windowed filter: the retention guarantee under a simulated clock, growth instead of early
//! rotation, FPR of the union of generations, copy-on-write clones, round-trips, and version-1
//! files (golden images written by the ring-of-blocked-generations filter) still loading.

use bloomgate::codec::FilterCodec;
use bloomgate::{Error, Inserted, KeyHash, WindowConfig, WindowedBloomFilter};
use proptest::prelude::*;

mod variant_keys;
use variant_keys::*;

fn config(generations: usize, items: u64, window_ms: Option<u64>) -> WindowConfig {
    WindowConfig::new(generations, items, 0.01, window_ms)
}

const W: u64 = 1000;

fn golden(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Present for at least (G−1)·W, gone once the clock passes G·W (with no newer inserts the
/// filter is then empty, so "gone" is exact, not probabilistic).
#[test]
fn items_live_at_least_g_minus_one_windows_and_at_most_g() {
    for g in [2usize, 3, 5] {
        for offset in [0, 1, W / 2, W - 1] {
            let start = 10_000;
            let mut filter = WindowedBloomFilter::new(config(g, 1000, Some(W)), start).unwrap();
            let t = start + offset;
            filter.insert(b"item", t).unwrap();
            let g = g as u64;
            filter.rotate_if_due(t + (g - 1) * W - 1);
            assert!(
                filter.contains(b"item"),
                "G={g} offset={offset}: forgotten too early"
            );
            assert!(filter.contains_at(b"item", t + (g - 1) * W - 1));
            assert!(!filter.contains_at(b"item", t + g * W), "read-only expiry");
            filter.rotate_if_due(t + g * W);
            assert!(
                !filter.contains(b"item"),
                "G={g} offset={offset}: kept too long"
            );
            assert!(filter.is_empty());
        }
    }
}

#[test]
fn slots_are_aligned_and_clocks_only_move_forward() {
    let mut filter = WindowedBloomFilter::new(config(4, 100, Some(W)), 0).unwrap();
    filter.insert(b"a", 0).unwrap();
    assert!(!filter.rotate_if_due(999));
    assert!(filter.rotate_if_due(2500));
    assert_eq!(filter.clock_slot(), 2);
    assert!(filter.contains(b"a"));
    assert!(
        !filter.rotate_if_due(100),
        "a clock going backwards changes nothing"
    );
    // A write into a slot still live lands in its own generation; into a dead one, nowhere.
    let h = filter.hash(b"late");
    assert_eq!(filter.insert_hash_at(h, 1200).unwrap(), Inserted::New);
    assert_eq!(filter.retained().count(), 2);
    assert!(filter.rotate_if_due(u64::MAX), "far future: no overflow");
    assert!(!filter.contains(b"a") && filter.is_empty());
    assert_eq!(
        filter.insert_hash_at(h, 5000).unwrap(),
        Inserted::Expired,
        "its slot is long dead"
    );
}

/// A generation that overflows its capacity grows instead of rotating: nothing added within
/// the window is lost, and the false-positive rate stays near the target.
#[test]
fn a_full_generation_grows_instead_of_rotating() {
    let mut filter = WindowedBloomFilter::new(config(2, 100, Some(60_000)), 0).unwrap();
    for i in 0..5_000u64 {
        filter.insert(key(i), 10).unwrap();
    }
    assert!((0..5_000).all(|i| filter.contains_at(key(i), 59_999)));
    assert_eq!(filter.retained().count(), 1);
    assert!(filter.retained().next().unwrap().filter().unwrap().links() > 5);
    assert!(filter.newest_len() >= 4_900, "{}", filter.newest_len());
    let fpr = measured_fpr(|k| filter.contains(k), 100_000);
    assert!(fpr < 0.01, "{fpr}");
}

/// The budget helper names the allocation an insert is about to make.
#[test]
fn allocations_are_known_before_they_happen() {
    let mut filter = WindowedBloomFilter::new(config(2, 100, Some(W)), 0).unwrap();
    let h = filter.hash(b"x");
    let first = filter.allocation_for(h, 0).unwrap();
    assert_eq!(first, filter.config().generation_bytes().unwrap());
    filter.insert_hash_at(h, 0).unwrap();
    assert_eq!(filter.allocation_for(h, 0).unwrap(), 0);
    let mut i = 0;
    while !filter
        .retained()
        .next()
        .unwrap()
        .filter()
        .unwrap()
        .is_full()
    {
        filter.insert(key(i), 0).unwrap();
        i += 1;
    }
    let next = filter.allocation_for(filter.hash(b"new"), 0).unwrap();
    let before = filter.memory_bytes();
    filter.insert(b"new", 0).unwrap();
    assert!(next > 0 && filter.memory_bytes() as u64 >= before as u64 + next);
}

/// Every generation at capacity: the union's FPR meets the target. G = 4 × 50k.
#[test]
fn fpr_of_all_generations_meets_the_target() {
    const TRIALS: u64 = 500_000;
    let mut filter = WindowedBloomFilter::new(config(4, 50_000, Some(W)), 0).unwrap();
    let mut i = 0;
    for slot in 0..4u64 {
        while filter.newest_len() < 50_000 {
            filter.insert(key(i), slot * W).unwrap();
            i += 1;
        }
        if slot < 3 {
            filter.rotate_if_due((slot + 1) * W);
        }
    }
    assert_eq!(filter.retained().count(), 4);
    let fpr = (0..TRIALS).filter(|&i| filter.contains(unseen(i))).count() as f64 / TRIALS as f64;
    let model = filter.estimated_fpr();
    assert!(fpr <= 0.01 + four_sigma(0.01, TRIALS), "FPR {fpr}");
    assert!(
        (fpr - model).abs() <= four_sigma(model, TRIALS) + 0.05 * model,
        "{fpr} vs {model}"
    );
    // 1 − (1 − 0.01)^(1/4)
    assert!((filter.config().generation_fpr() - 0.002509).abs() < 1e-6);
}

#[test]
fn config_is_validated() {
    let bad = [
        config(1, 100, None),
        config(0, 100, None),
        config(2, 0, None),
        config(2, 100, Some(0)),
        config(100_000, 100, None),
        WindowConfig {
            fpr: 1.0,
            ..config(2, 100, None)
        },
        WindowConfig {
            fpr: f64::NAN,
            ..config(2, 100, None)
        },
        WindowConfig {
            growth: 0,
            ..config(2, 100, None)
        },
    ];
    for c in bad {
        assert!(
            matches!(
                WindowedBloomFilter::new(c, 0),
                Err(Error::InvalidParameter(_))
            ),
            "{c:?}"
        );
    }
    assert!(matches!(
        WindowedBloomFilter::new(config(1000, 1 << 40, None), 0),
        Err(Error::TooLarge(_))
    ));
}

#[test]
fn hash_once_and_codec() {
    let mut filter = WindowedBloomFilter::with_seed(config(3, 100, Some(W)), 9, 0).unwrap();
    let h = KeyHash::of(b"k", 9);
    assert_eq!(filter.hash(b"k"), h);
    assert!(!filter.insert_hash(h, 10).unwrap());
    assert!(filter.insert(b"k", 20).unwrap());
    assert!(filter.contains_hash(h));
    filter.insert(b"later", 1500).unwrap();
    let copy = WindowedBloomFilter::from_bytes(&filter.to_bytes()).unwrap();
    assert_eq!(copy, filter);
    assert_eq!(copy.seed(), 9);
    assert_eq!(copy.generations(), 3);
    assert_eq!(copy.retained().count(), 2);
}

/// Without a window the clock moves only by `rotate`.
#[test]
fn rotation_by_hand() {
    let mut filter = WindowedBloomFilter::new(config(2, 10, None), 0).unwrap();
    for i in 0..100 {
        filter.insert(key(i), i).unwrap();
    }
    assert!(
        (0..100).all(|i| filter.contains(key(i))),
        "grows, no rotation"
    );
    filter.rotate(0);
    assert!((0..100).all(|i| filter.contains(key(i))));
    assert_eq!(filter.newest_len(), 0);
    filter.insert(b"new", 0).unwrap();
    filter.rotate(0);
    assert!(!filter.contains(key(1)) && filter.contains(b"new"));
}

/// A clone shares every generation; a write copies only the generation it writes to.
#[test]
fn clones_copy_on_write_per_generation() {
    let mut filter = WindowedBloomFilter::new(config(3, 1000, Some(W)), 0).unwrap();
    for slot in 0..3 {
        for i in 0..100 {
            filter.insert(key(slot * 1000 + i), slot * W).unwrap();
        }
    }
    let snapshot = filter.clone();
    assert!(filter.retained().all(|g| g.is_shared()));
    filter.insert(b"during the save", 2 * W + 5).unwrap();
    let shared: Vec<bool> = filter.retained().map(|g| g.is_shared()).collect();
    assert_eq!(shared, [true, true, false]);
    assert!(!snapshot.contains(b"during the save"));
    assert!(filter.contains(b"during the save"));
    drop(snapshot);
    assert!(filter.retained().all(|g| !g.is_shared()));
}

/// A version-1 file (G blocked generations rotated on a schedule from creation, written by the
/// previous filter: `tests/golden/windowed-v1.bgf`, W = 1 s, G = 3, seed 7, created at 10.5 s,
/// 150 keys at 10.6 s, 150 at 11.7 s, 100 at 12.8 s) loads, answers, keeps every key at least
/// as long as version 1 promised (t + (G−1)·W), and is written back as version 2.
#[test]
fn version_1_files_still_load() {
    let bytes = golden("windowed-v1.bgf");
    let mut filter = WindowedBloomFilter::from_bytes(&bytes).unwrap();
    assert_eq!(filter.seed(), 7);
    assert_eq!(filter.config().generation_window_ms, Some(W));
    let keys = |w: u32, n: u32| (0..n).map(move |i| format!("w{w}-{i}"));
    assert!(keys(0, 150)
        .chain(keys(1, 150))
        .chain(keys(2, 100))
        .all(|k| filter.contains(&k)));
    assert_eq!(filter.len(), 400);
    let v2 = filter.to_bytes();
    assert_ne!(v2, bytes);
    assert_eq!(WindowedBloomFilter::from_bytes(&v2).unwrap(), filter);
    // Retention as version 1 promised: w0 (at 10.6 s) until 12.6 s, w2 (12.8 s) until 14.8 s.
    filter.rotate_if_due(12_599);
    assert!(keys(0, 150).all(|k| filter.contains(&k)));
    filter.insert(b"new", 12_700).unwrap();
    filter.rotate_if_due(14_799);
    assert!(keys(2, 100).all(|k| filter.contains(&k)) && filter.contains(b"new"));
    filter.rotate_if_due(100_000);
    assert!(filter.is_empty());

    // Without a window: two generations rotated by capacity (50 each, 80 keys, seed 3).
    let bytes = golden("windowed-v1-nowindow.bgf");
    let mut filter = WindowedBloomFilter::from_bytes(&bytes).unwrap();
    assert!((0..80).all(|i| filter.contains(format!("n-{i}"))));
    filter.rotate(0);
    assert!((50..80).all(|i| filter.contains(format!("n-{i}"))));
    assert_eq!(
        WindowedBloomFilter::from_bytes(&filter.to_bytes()).unwrap(),
        filter
    );
}

#[derive(Clone, Debug)]
enum Op {
    Advance(u64),
    Insert(u16),
    RoundTrip,
    Snapshot,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random inserts on a random clock (steps up to 2.5 windows), small generations that must
    /// grow: every key whose last insert is younger than (G−1)·W is present at every step,
    /// including after round-trips and in snapshots taken along the way.
    #[test]
    fn retention_guarantee_holds_on_a_random_clock(
        g in 2usize..6,
        ops in prop::collection::vec(prop_oneof![
            6 => (0u64..2500).prop_map(Op::Advance),
            12 => any::<u16>().prop_map(Op::Insert),
            1 => Just(Op::RoundTrip),
            1 => Just(Op::Snapshot),
        ], 1..300),
    ) {
        let mut now = 1_000_000u64;
        let mut filter = WindowedBloomFilter::new(config(g, 5, Some(W)), now).unwrap();
        let mut last_insert = std::collections::HashMap::new();
        let mut snapshots = Vec::new();
        for op in ops {
            match op {
                Op::Advance(d) => {
                    now += d;
                    filter.rotate_if_due(now);
                }
                Op::Insert(k) => {
                    filter.insert(k.to_le_bytes(), now).unwrap();
                    last_insert.insert(k, now);
                }
                Op::RoundTrip => filter = WindowedBloomFilter::from_bytes(&filter.to_bytes()).unwrap(),
                Op::Snapshot => snapshots.push((filter.clone(), last_insert.clone(), now)),
            }
            for (k, &t) in &last_insert {
                if now < t + (g as u64 - 1) * W {
                    prop_assert!(filter.contains(k.to_le_bytes()), "key {} from {} lost at {}", k, t, now);
                }
            }
        }
        for (snapshot, inserted, at) in &snapshots {
            for (k, &t) in inserted {
                if *at < t + (g as u64 - 1) * W {
                    prop_assert!(snapshot.contains(k.to_le_bytes()), "snapshot lost {}", k);
                }
            }
        }
        filter.rotate_if_due(now + g as u64 * W);
        prop_assert!(filter.is_empty());
    }
}
