//! SQLite and Redis stores behave identically under the same random operations, and the gate
//! gives the same answers over either.

mod common;

use bloomgate_gate::{ExactStore, RedisStore, Seen};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

#[test]
fn sqlite_and_redis_stores_behave_identically() {
    let Some(redis_server) = common::start_redis("sqlite_and_redis_stores_behave_identically")
    else {
        return;
    };
    let (_dir, sqlite) = common::sqlite_store();
    let redis = RedisStore::open(&redis_server.url, "test:seen:").expect("connect");
    redis.clear().unwrap();
    let stores: [&dyn ExactStore; 2] = [&sqlite, &redis];
    let mut rng = SmallRng::seed_from_u64(42);
    let mut now = 1_000u64;
    for _ in 0..2_000 {
        now += rng.random_range(0..20);
        let scope = rng.random_range(0..5u64);
        match rng.random_range(0..10) {
            0..=3 => {
                let seen: Vec<Seen> = (0..rng.random_range(1..10))
                    .map(|_| Seen {
                        item: rng.random_range(0..100),
                        at_ms: now - rng.random_range(0..50),
                    })
                    .collect();
                for store in stores {
                    store.record(scope, &seen).unwrap();
                }
            }
            4..=7 => {
                let items: Vec<u64> = (0..rng.random_range(1..30))
                    .map(|_| rng.random_range(0..100))
                    .collect();
                let since = now.saturating_sub(rng.random_range(0..300));
                let answers: Vec<Vec<bool>> = stores
                    .iter()
                    .map(|store| {
                        let mut out = Vec::new();
                        store.contains(scope, &items, since, &mut out).unwrap();
                        out
                    })
                    .collect();
                assert_eq!(
                    answers[0], answers[1],
                    "contains({scope}, {items:?}, {since})"
                );
            }
            8 => {
                let since = now.saturating_sub(rng.random_range(0..300));
                let loads: Vec<Vec<Seen>> = stores
                    .iter()
                    .map(|store| {
                        let mut out = Vec::new();
                        store.load(scope, since, &mut out).unwrap();
                        // Equal times may come back in either order; compare as sorted sets.
                        out.sort_by_key(|s| (s.at_ms, s.item));
                        assert!(out.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
                        out
                    })
                    .collect();
                assert_eq!(loads[0], loads[1], "load({scope}, {since})");
            }
            _ => {
                let before = now.saturating_sub(200);
                let deleted: Vec<u64> = stores
                    .iter()
                    .map(|store| store.expire(before).unwrap())
                    .collect();
                assert_eq!(deleted[0], deleted[1], "expire({before})");
            }
        }
    }
}

#[test]
fn redis_store_errors_surface() {
    let Some(redis_server) = common::start_redis("redis_store_errors_surface") else {
        return;
    };
    let redis = RedisStore::open(&redis_server.url, "test:down:").expect("connect");
    drop(redis_server); // the server goes away under the store
    let mut out = Vec::new();
    assert!(redis.contains(1, &[1, 2], 0, &mut out).is_err());
    assert!(out.is_empty(), "no answers on failure");
    assert!(redis.record(1, &[Seen { item: 1, at_ms: 1 }]).is_err());
}

/// A Redis store whose server stops answering (open connections, no replies) fails with
/// `Error::Timeout` after its read timeout instead of hanging the request thread, and works
/// again once the server answers.
#[test]
fn a_hung_redis_store_times_out() {
    let Some(redis_server) = common::start_redis("a_hung_redis_store_times_out") else {
        return;
    };
    let port: u16 = redis_server
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let proxy = bloomgate_testkit::FreezableProxy::start(([127, 0, 0, 1], port).into());
    let timeouts = bloomgate_gate::Timeouts {
        connect: std::time::Duration::from_millis(500),
        io: std::time::Duration::from_millis(200),
    };
    let url = format!("redis://127.0.0.1:{}", proxy.port);
    let store = RedisStore::open_with_timeouts(&url, "test:hung:", timeouts).expect("connect");
    store.record(1, &[Seen { item: 1, at_ms: 10 }]).unwrap();
    proxy.freeze(true);
    let mut out = Vec::new();
    let err = store.contains(1, &[1, 2], 0, &mut out).unwrap_err();
    assert!(
        matches!(err, bloomgate_gate::Error::Timeout(_)),
        "expected a timeout, got {err}"
    );
    assert!(err.to_string().contains("timeout"), "{err}");
    assert!(out.is_empty(), "no answers on failure");
    proxy.freeze(false);
    // The timed-out connection was dropped (it may be mid-reply); a new one answers.
    store.contains(1, &[1, 2], 0, &mut out).unwrap();
    assert_eq!(out, [true, false]);
}
