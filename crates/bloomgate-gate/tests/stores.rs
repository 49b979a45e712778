//! The SQLite, Redis and PostgreSQL stores behave identically under the same random operations,
//! failures surface as errors (never as "unseen") and the gate answers exactly over PostgreSQL.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bloomgate_gate::{
    Error, ExactStore, FilterMode, Gate, GateConfig, LifecycleConfig, PgOptions, Policy,
    PostgresStore, RedisStore, Seen,
};
use bloomgate_testkit::postgres::Postgres;
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
    behave_identically([&sqlite, &redis]);
}

/// Random records, lookups, loads and expiries on both stores: the same answers every time.
fn behave_identically(stores: [&dyn ExactStore; 2]) {
    let mut rng = SmallRng::seed_from_u64(42);
    let mut now = 1_000u64;
    for _ in 0..2_000 {
        now += rng.random_range(0..20);
        let scope = rng.random_range(0..5u64);
        match rng.random_range(0..10) {
            0..=3 => {
                let seen = common::random_seen(&mut rng, now, 100, 50);
                for store in stores {
                    store.record(scope, &seen).unwrap();
                }
            }
            4..=7 => {
                let items: Vec<u64> = (0..rng.random_range(1..30))
                    .map(|_| rng.random_range(0..100))
                    .collect();
                let since = now.saturating_sub(rng.random_range(0..300));
                let answers = stores.map(|s| common::contains(s, scope, &items, since));
                assert_eq!(
                    answers[0], answers[1],
                    "contains({scope}, {items:?}, {since})"
                );
            }
            8 => {
                let since = now.saturating_sub(rng.random_range(0..300));
                let loads = stores.map(|s| common::load(s, scope, since));
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

/// A PostgreSQL store on a fresh database of `pg`, with prepared or unnamed statements.
fn postgres_store(pg: &Postgres, database: &str, prepared: bool) -> PostgresStore {
    let url = format!("{}?prepared={prepared}", pg.create_database(database));
    PostgresStore::connect(&url, PgOptions::default()).expect("connect")
}

/// The PostgreSQL store answers as the SQLite store under random operations, and keeps the
/// trait's contract, with prepared statements and with unnamed ones (transaction poolers).
#[test]
fn sqlite_and_postgres_stores_behave_identically() {
    let Some(pg) = Postgres::start("sqlite_and_postgres_stores_behave_identically") else {
        return;
    };
    for (database, prepared) in [("prepared", true), ("unnamed", false)] {
        let (_dir, sqlite) = common::sqlite_store();
        let postgres = postgres_store(&pg, database, prepared);
        behave_identically([&sqlite, &postgres]);
        let (_dir, sqlite) = common::sqlite_store();
        let postgres = postgres_store(&pg, &format!("{database}_contract"), prepared);
        for store in [&sqlite as &dyn ExactStore, &postgres] {
            keeps_the_contract(store);
        }
    }
}

/// The trait's promises, checked outright: a later time wins (within one batch too), ids on
/// both sides of the i64 sign bit, `since_ms`, oldest first, expiry counts over many rows.
fn keeps_the_contract(store: &dyn ExactStore) {
    let scope = u64::MAX;
    let (a, b, c) = (1u64 << 63, u64::MAX, 0u64);
    let seen = |item, at_ms| Seen { item, at_ms };
    store
        .record(scope, &[seen(a, 10), seen(a, 30), seen(b, 20)])
        .unwrap();
    store.record(scope, &[seen(a, 20), seen(b, 40)]).unwrap();
    let contains = |since| {
        let mut out = Vec::new();
        store
            .contains(scope, &[a, b, c, a], since, &mut out)
            .unwrap();
        out
    };
    assert_eq!(contains(25), [true, true, false, true]);
    assert_eq!(contains(35), [false, true, false, false]);
    let load = |scope, since| {
        let mut out = Vec::new();
        store.load(scope, since, &mut out).unwrap();
        out
    };
    assert_eq!(load(scope, 0), [seen(a, 30), seen(b, 40)]);
    assert_eq!(load(scope, 35), [seen(b, 40)]);
    // Enough rows for several expiry statements (chunks of the table), half of them old.
    let rows: Vec<(u64, Seen)> = (0..20_000u64)
        .map(|item| (7, seen(item, if item % 2 == 0 { 10 } else { 1_000 })))
        .collect();
    store.record_batch(&rows).unwrap();
    assert_eq!(store.expire(35).unwrap(), 10_000 + 1);
    assert_eq!(load(7, 0).len(), 10_000);
    assert_eq!(load(scope, 0), [seen(b, 40)]);
    assert_eq!(store.expire(35).unwrap(), 0);
}

/// The identity lives with the database: the same on reopening it, another for another one.
#[test]
fn postgres_identity_follows_the_database() {
    let Some(pg) = Postgres::start("postgres_identity_follows_the_database") else {
        return;
    };
    let first = PostgresStore::connect(&pg.url, PgOptions::default()).unwrap();
    let identity = first.identity().unwrap().expect("an identity");
    let reopened = PostgresStore::connect(&pg.url, PgOptions::default()).unwrap();
    assert_eq!(reopened.identity().unwrap().as_ref(), Some(&identity));
    let other = postgres_store(&pg, "other", true);
    let other = other.identity().unwrap().expect("an identity");
    assert_ne!(other, identity);
}

/// Two tables of one database are two stores: rows and identities apart; `clear` empties its own
/// table and gives it a new identity, leaving the other untouched. The default table keeps its
/// identity in `meta`, as databases made before tables could be named do.
#[test]
fn postgres_tables_are_independent_and_clear_resets_one() {
    let Some(pg) = Postgres::start("postgres_tables_are_independent_and_clear_resets_one") else {
        return;
    };
    let url = pg.create_database("tables");
    let a = PostgresStore::connect(&format!("{url}?table=feed_a"), PgOptions::default()).unwrap();
    let b = PostgresStore::connect(
        &url,
        PgOptions {
            table: "feed_b".into(),
            ..PgOptions::default()
        },
    )
    .unwrap();
    let default = PostgresStore::connect(&url, PgOptions::default()).unwrap();
    assert_eq!(
        (a.table(), b.table(), default.table()),
        ("feed_a", "feed_b", "seen")
    );
    a.record(1, &[Seen { item: 7, at_ms: 10 }]).unwrap();
    b.record(1, &[Seen { item: 8, at_ms: 20 }]).unwrap();
    let rows = |store: &PostgresStore| {
        let mut out = Vec::new();
        store.load(1, 0, &mut out).unwrap();
        out
    };
    assert_eq!(rows(&a), [Seen { item: 7, at_ms: 10 }]);
    assert_eq!(rows(&b), [Seen { item: 8, at_ms: 20 }]);
    assert!(rows(&default).is_empty());
    let identity = |store: &PostgresStore| store.identity().unwrap().expect("an identity");
    let (id_a, id_b) = (identity(&a), identity(&b));
    assert_ne!(id_a, id_b);
    assert_ne!(id_a, identity(&default));

    a.clear().unwrap();
    assert!(rows(&a).is_empty());
    assert_ne!(identity(&a), id_a, "a cleared store is a new store");
    assert_eq!(rows(&b), [Seen { item: 8, at_ms: 20 }]);
    assert_eq!(identity(&b), id_b);
    // Reconnecting keeps the cleared table's new identity, and the table works on.
    let new_a = identity(&a);
    let reopened =
        PostgresStore::connect(&format!("{url}?table=feed_a"), PgOptions::default()).unwrap();
    assert_eq!(identity(&reopened), new_a);
    reopened.record(1, &[Seen { item: 9, at_ms: 30 }]).unwrap();
    assert_eq!(rows(&a), [Seen { item: 9, at_ms: 30 }]);
    assert_eq!(a.expire(31).unwrap(), 1);

    let mut check = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let metas: Vec<String> = check
        .query(
            "SELECT tablename::text FROM pg_tables WHERE tablename LIKE '%meta' ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(metas, ["feed_a_meta", "feed_b_meta", "meta"]);
    // A name that is not a plain identifier never reaches SQL.
    let err = PostgresStore::connect(&format!("{url}?table=x;drop"), PgOptions::default())
        .err()
        .expect("refused");
    assert!(matches!(err, Error::InvalidConfig(_)), "{err}");
}

/// A stopped server is an error at once (not a hang); after a restart the store works again
/// on the first call, although its pooled connections died with the old server.
#[test]
fn a_stopped_postgres_fails_fast_and_the_store_recovers() {
    let Some(mut pg) = Postgres::start("a_stopped_postgres_fails_fast_and_the_store_recovers")
    else {
        return;
    };
    let options = PgOptions {
        connect_timeout: Duration::from_secs(1),
        ..PgOptions::default()
    };
    let store = PostgresStore::connect(&pg.url, options).unwrap();
    store.record(1, &[Seen { item: 1, at_ms: 10 }]).unwrap();
    let mut out = Vec::new();
    pg.stop();
    let started = Instant::now();
    let err = store.contains(1, &[1, 2], 0, &mut out).unwrap_err();
    assert!(matches!(err, Error::Postgres(_)), "{err}");
    assert!(out.is_empty(), "no answers on failure");
    assert!(store.record(1, &[Seen { item: 2, at_ms: 10 }]).is_err());
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    pg.restart();
    store.contains(1, &[1, 2], 0, &mut out).unwrap();
    assert_eq!(out, [true, false]);
    // Several pooled connections, all killed by a restart: still no error.
    std::thread::scope(|s| {
        for item in 10..14 {
            let store = &store;
            s.spawn(move || store.record(1, &[Seen { item, at_ms: 10 }]).unwrap());
        }
    });
    pg.restart();
    out.clear();
    store.contains(1, &[1, 10, 13], 0, &mut out).unwrap();
    assert_eq!(out, [true, true, true]);
}

/// A frozen server (SIGSTOP: its connections stay open, nothing answers; its kernel still
/// acknowledges, so only the client's own deadline ends the wait): every call — on a pooled
/// connection or a new one — fails within the read or connect timeout instead of hanging, and
/// the same store works again once the server thaws.
#[test]
fn a_frozen_postgres_times_out_and_the_store_recovers() {
    let Some(mut pg) = Postgres::start("a_frozen_postgres_times_out_and_the_store_recovers") else {
        return;
    };
    let url = format!("{}?read_timeout=1000&connect_timeout=1", pg.url);
    let store = PostgresStore::connect(&url, PgOptions::default()).unwrap();
    store.record(1, &[Seen { item: 1, at_ms: 10 }]).unwrap();
    pg.freeze();
    let started = Instant::now();
    let mut out = Vec::new();
    let err = store.contains(1, &[1], 0, &mut out).unwrap_err();
    assert!(matches!(err, Error::PostgresTimeout(_)), "{err}");
    // The pool was emptied: this one opens a connection, which the frozen server never
    // completes.
    let err = store.record(1, &[Seen { item: 2, at_ms: 10 }]).unwrap_err();
    assert!(matches!(err, Error::PostgresTimeout(_)), "{err}");
    assert!(out.is_empty(), "no answers on failure");
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    pg.thaw();
    store.record(1, &[Seen { item: 2, at_ms: 10 }]).unwrap();
    store.contains(1, &[1, 2, 3], 0, &mut out).unwrap();
    assert_eq!(out, [true, true, false]);
}

/// A statement that runs past `statement_timeout` (here: waiting for a lock another session
/// holds) is cancelled by the server and fails; the store works once the lock is gone.
#[test]
fn a_blocked_postgres_statement_times_out() {
    let Some(pg) = Postgres::start("a_blocked_postgres_statement_times_out") else {
        return;
    };
    let url = format!("{}?statement_timeout=200", pg.url);
    let store = PostgresStore::connect(&url, PgOptions::default()).unwrap();
    let mut locker = postgres::Client::connect(&pg.url, postgres::NoTls).unwrap();
    let mut lock = locker.transaction().unwrap();
    lock.batch_execute("LOCK TABLE seen IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    let started = Instant::now();
    let mut out = Vec::new();
    let err = store.contains(1, &[1], 0, &mut out).unwrap_err();
    assert!(err.to_string().contains("statement timeout"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    lock.rollback().unwrap();
    store.contains(1, &[1], 0, &mut out).unwrap();
    assert_eq!(out, [false]);
}

/// The gate in verify mode over PostgreSQL: exact answers (no seen item shown, no unseen item
/// hidden) through filter builds, rotations, group commits and expiry.
#[test]
fn the_gate_over_postgres_verifies_exactly() {
    let Some(pg) = Postgres::start("the_gate_over_postgres_verifies_exactly") else {
        return;
    };
    let store = PostgresStore::connect(&pg.url, PgOptions::default()).unwrap();
    let retention_ms = 1_000;
    let lifecycle = LifecycleConfig {
        retention_ms,
        generations: 3,
        fpr: 0.01,
        fpr_budget: 0.02,
        headroom: 1.5,
        min_items_per_generation: 16,
        memory_budget_bytes: 1 << 30,
    };
    let config = GateConfig {
        cache_capacity: 64,
        ..GateConfig::new(Policy::Verify, FilterMode::Local, lifecycle)
    };
    let gate = Gate::new(Box::new(store), config).unwrap();
    let mut truth: HashMap<(u64, u64), u64> = HashMap::new();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut now = 10_000u64;
    let mut hidden = 0;
    for step in 0..600 {
        now += rng.random_range(0..20);
        if step % 100 == 99 {
            gate.flush().unwrap();
            gate.expire(now).unwrap();
        }
        let scope = rng.random_range(0..8u64);
        let mut candidates: Vec<u64> = (0..40).map(|_| rng.random_range(0..200)).collect();
        candidates.sort_unstable();
        candidates.dedup();
        let verdict = gate.unseen(scope, &candidates, now).unwrap();
        let mut shown = Vec::new();
        for (&item, &unseen) in candidates.iter().zip(&verdict) {
            let seen = truth
                .get(&(scope, item))
                .is_some_and(|&at| at >= now - retention_ms);
            assert_eq!(unseen, !seen, "item {item} of scope {scope} at {now}");
            hidden += usize::from(seen);
            if unseen && shown.len() < 5 {
                shown.push(item);
            }
        }
        gate.record(scope, &shown, now).unwrap();
        for item in shown {
            truth.insert((scope, item), now);
        }
    }
    assert!(
        hidden > 100,
        "the run must show seen items to hide: {hidden}"
    );
    gate.close().unwrap();
}
