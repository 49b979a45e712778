//! Concurrent filters and parallel bulk builds: no false negatives under concurrent inserts,
//! the same bits as serial inserts, conversions without copying.

mod core_fpr;

use std::thread;

use bloomgate::{
    BlockedBloomFilter, BloomFilter, ConcurrentBlockedBloomFilter, ConcurrentBloomFilter, Layout,
    Params,
};
use core_fpr::{absent_key, assert_fpr_within_tolerance, present_key};
use proptest::prelude::*;

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn concurrent_filters_are_send_and_sync() {
    assert_send_sync::<ConcurrentBloomFilter>();
    assert_send_sync::<ConcurrentBlockedBloomFilter>();
}

/// Four threads insert disjoint quarters of `n` keys into a `$concurrent` filter; evaluates to
/// it converted back to a plain filter, next to a serial `$plain` build of the same keys.
macro_rules! parallel_and_serial {
    ($concurrent:ty, $plain:ty, $params:expr, $n:expr) => {{
        let shared = <$concurrent>::with_params($params, 5).unwrap();
        thread::scope(|s| {
            for t in 0..4 {
                let shared = &shared;
                s.spawn(move || {
                    (t..$n).step_by(4).for_each(|i| {
                        shared.insert(present_key(i));
                    })
                });
            }
        });
        assert!((0..$n).all(|i| shared.contains(present_key(i))));
        let mut serial = <$plain>::with_params($params, 5).unwrap();
        (0..$n).for_each(|i| {
            serial.insert(present_key(i));
        });
        (shared.into_inner(), serial)
    }};
}

/// Four threads insert disjoint quarters; the result has exactly the bits of a serial build
/// (so the same answers), and `len` differs only by keys whose bits others had all set.
#[test]
fn concurrent_inserts_equal_serial_bits() {
    let n = 200_000u64;
    let params = Params::for_items(Layout::Classic, n, 0.01).unwrap();
    let (parallel, serial) = parallel_and_serial!(ConcurrentBloomFilter, BloomFilter, params, n);
    assert_eq!(parallel.bits(), serial.bits());
    assert!(parallel.len().abs_diff(serial.len()) < n / 1000);
    let params = Params::for_items(Layout::Blocked, n, 0.01).unwrap();
    let (parallel, serial) =
        parallel_and_serial!(ConcurrentBlockedBloomFilter, BlockedBloomFilter, params, n);
    assert_eq!(parallel.count_ones(), serial.count_ones());
    assert!(parallel.len().abs_diff(serial.len()) < n / 1000);
    let same = |i| parallel.contains(absent_key(i)) == serial.contains(absent_key(i));
    assert!((0..200_000).all(same), "same bits, same answers");
}

/// build_parallel gives exactly the serial filter (blocked: bits and len; classic: bits).
#[test]
fn build_parallel_equals_serial_build() {
    let keys: Vec<[u8; 16]> = (0..300_000).map(present_key).collect();
    let params = Params::for_items(Layout::Blocked, keys.len() as u64, 0.01).unwrap();
    let parallel = BlockedBloomFilter::build_parallel(params, 9, &keys).unwrap();
    let mut serial = BlockedBloomFilter::with_params(params, 9).unwrap();
    serial.insert_batch(&keys);
    assert_eq!(parallel, serial);

    let params = Params::for_items(Layout::Classic, keys.len() as u64, 0.01).unwrap();
    let parallel = BloomFilter::build_parallel(params, 9, &keys).unwrap();
    let mut serial = BloomFilter::with_params(params, 9).unwrap();
    serial.insert_batch(&keys);
    assert_eq!(parallel.bits(), serial.bits());

    // Small inputs take the serial path and still work.
    let few = &keys[..10];
    let small = BlockedBloomFilter::build_parallel(
        Params::for_items(Layout::Blocked, 10, 0.01).unwrap(),
        0,
        few,
    )
    .unwrap();
    assert!(few.iter().all(|k| small.contains(k)));
}

/// A parallel build of 2M keys delivers the model FPR (tolerance as in core_fpr: max(4σ+3, 5%)).
#[test]
fn build_parallel_fpr() {
    let keys: Vec<[u8; 16]> = (0..2_000_000).map(present_key).collect();
    let params = Params::for_items(Layout::Blocked, keys.len() as u64, 0.01).unwrap();
    let f = BlockedBloomFilter::build_parallel(params, 3, &keys).unwrap();
    let q = 2_000_000;
    let fp = (0..q).filter(|&i| f.contains(absent_key(i))).count() as u64;
    assert_fpr_within_tolerance("blocked build_parallel 2M", fp, q, params.fpr());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Keys inserted from several threads at once are all found, during and after, and after
    /// converting back to the plain filter.
    #[test]
    fn no_false_negatives_under_concurrent_inserts(
        keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..24), 1..400),
        threads in 2usize..5,
        seed in any::<u64>(),
    ) {
        let n = keys.len() as u64;
        let classic = ConcurrentBloomFilter::with_params(Params::for_items(Layout::Classic, n, 0.01).unwrap(), seed).unwrap();
        let blocked = ConcurrentBlockedBloomFilter::with_params(Params::for_items(Layout::Blocked, n, 0.01).unwrap(), seed).unwrap();
        thread::scope(|s| {
            for part in keys.chunks(keys.len().div_ceil(threads)) {
                let (classic, blocked) = (&classic, &blocked);
                s.spawn(move || {
                    for k in part {
                        classic.insert(k);
                        blocked.insert(k);
                        assert!(classic.contains(k) && blocked.contains(k));
                    }
                });
            }
        });
        prop_assert!(keys.iter().all(|k| classic.contains(k) && blocked.contains(k)));
        let (classic, blocked) = (classic.into_inner(), blocked.into_inner());
        prop_assert!(keys.iter().all(|k| classic.contains(k) && blocked.contains(k)));
        prop_assert!(classic.len() <= n && blocked.len() <= n);
    }
}
