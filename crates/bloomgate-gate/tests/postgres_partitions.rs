//! The PostgreSQL store partitioned by time (`partition=hour|day|week`): the same answers as the
//! SQLite store, expiry by dropping whole partitions, and a table's layout kept as it was made.

mod common;

use bloomgate_gate::{Error, ExactStore, Partition, PgOptions, PostgresStore, Seen, StoreUrl};
use bloomgate_testkit::postgres::Postgres;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const HOUR_MS: u64 = 3_600_000;
const T0: u64 = 1_700_000_000_000;

/// The partitions of `table` that exist, as their periods, ascending.
fn partitions(url: &str, table: &str) -> Vec<i64> {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let prefix = format!("{table}_p");
    let mut periods: Vec<i64> = client
        .query(
            "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = $1::text::regclass",
            &[&table],
        )
        .unwrap()
        .iter()
        .map(|row| {
            let name: String = row.get(0);
            name.strip_prefix(&prefix).unwrap().parse().unwrap()
        })
        .collect();
    periods.sort_unstable();
    periods
}

use common::{contains, load};

/// Random records over many hours, with lookups and loads compared with SQLite's; then expiry
/// drops the hours wholly before the cutoff, and every read within the window still agrees.
#[test]
fn a_partitioned_store_answers_as_sqlite_and_expires_whole_partitions() {
    let Some(pg) = Postgres::start("a_partitioned_store_answers_as_sqlite") else {
        return;
    };
    for prepared in [true, false] {
        let table = format!("parts_{prepared}");
        let url = format!(
            "{}?table={table}&partition=hour&prepared={prepared}",
            pg.url
        );
        let parsed: StoreUrl = url.parse().unwrap();
        assert_eq!(parsed.to_string(), url);
        let partitioned = PostgresStore::connect(&url, PgOptions::default()).unwrap();
        let (_dir, sqlite) = common::sqlite_store();
        let stores: [&dyn ExactStore; 2] = [&sqlite, &partitioned];
        let mut rng = SmallRng::seed_from_u64(11);
        let mut now = T0;
        let mut newest = 0;
        for _ in 0..1_500 {
            now += rng.random_range(0..HOUR_MS / 30);
            let scope = rng.random_range(0..4u64);
            match rng.random_range(0..10) {
                0..=4 => {
                    let seen = common::random_seen(&mut rng, now, 60, 3 * HOUR_MS);
                    newest = seen.iter().map(|s| s.at_ms).max().unwrap().max(newest);
                    for store in stores {
                        store.record(scope, &seen).unwrap();
                    }
                }
                5..=8 => {
                    let items: Vec<u64> = (0..20).map(|_| rng.random_range(0..60)).collect();
                    let since = now.saturating_sub(rng.random_range(0..6 * HOUR_MS));
                    let answers = stores.map(|s| contains(s, scope, &items, since));
                    assert_eq!(answers[0], answers[1], "contains at {since}");
                }
                _ => {
                    let since = now.saturating_sub(rng.random_range(0..6 * HOUR_MS));
                    let loads = stores.map(|s| load(s, scope, since));
                    assert_eq!(loads[0], loads[1], "load at {since}");
                }
            }
        }
        let hours = (now - T0) / HOUR_MS;
        assert!(hours >= 10, "the run spans hours: {hours}");
        let before = now - 4 * HOUR_MS - HOUR_MS / 2;
        let first_kept = (before / HOUR_MS) as i64;
        let made = partitions(&pg.url, &table);
        assert!(made.first() < Some(&first_kept), "{made:?}");
        // The partition after the newest record's was made ahead.
        assert_eq!(made.last(), Some(&((newest / HOUR_MS) as i64 + 1)));

        let dropped = partitioned.expire(before).unwrap();
        assert!(dropped > 0);
        let left = partitions(&pg.url, &table);
        assert_eq!(left.first(), Some(&first_kept), "{left:?}");
        sqlite.expire(before).unwrap();
        for scope in 0..4 {
            let all: Vec<u64> = (0..60).collect();
            for since in [before, before + HOUR_MS, now - HOUR_MS] {
                let answers = stores.map(|s| contains(s, scope, &all, since));
                assert_eq!(answers[0], answers[1], "contains after expiry at {since}");
                let loads = stores.map(|s| load(s, scope, since));
                assert_eq!(loads[0], loads[1], "load after expiry at {since}");
            }
        }
        assert_eq!(partitioned.expire(before).unwrap(), 0);
        // Recording into a dropped period makes its partition again (and the next expiry drops
        // it); a later time for a row in a kept period replaces the earlier one.
        let old = Seen { item: 1, at_ms: T0 };
        partitioned.record(9, &[old]).unwrap();
        assert_eq!(load(&partitioned, 9, 0), [old]);
        assert_eq!(partitioned.expire(before).unwrap(), 1);
        let at = now - 10;
        partitioned
            .record_batch(&[
                (9, Seen { item: 2, at_ms: at }),
                (
                    9,
                    Seen {
                        item: 2,
                        at_ms: at + 5,
                    },
                ),
            ])
            .unwrap();
        partitioned
            .record(
                9,
                &[Seen {
                    item: 2,
                    at_ms: at + 1,
                }],
            )
            .unwrap();
        assert_eq!(
            load(&partitioned, 9, 0),
            [Seen {
                item: 2,
                at_ms: at + 5
            }]
        );
        // Clearing empties every partition.
        partitioned.clear().unwrap();
        assert!(load(&partitioned, 9, 0).is_empty());
    }
}

/// A table keeps the layout it was made with: a plain table is not used as a partitioned one,
/// nor a table of days as one of hours.
#[test]
fn a_tables_layout_is_kept() {
    let Some(pg) = Postgres::start("a_tables_layout_is_kept") else {
        return;
    };
    let connect = |params: &str| {
        PostgresStore::connect(&format!("{}?{params}", pg.url), PgOptions::default())
    };
    connect("table=plain").unwrap();
    let err = connect("table=plain&partition=day").err().expect("refused");
    assert!(matches!(err, Error::InvalidConfig(_)), "{err}");
    assert!(
        err.to_string()
            .contains("postgres table plain is not partitioned, but the URL asks for day"),
        "{err}"
    );
    connect("table=plain&partition=none").unwrap();

    let days = PostgresStore::connect(
        &format!("{}?table=days", pg.url),
        PgOptions {
            partition: Some(Partition::Day),
            ..PgOptions::default()
        },
    )
    .unwrap();
    days.record(1, &[Seen { item: 1, at_ms: T0 }]).unwrap();
    let err = connect("table=days&partition=hour").err().expect("refused");
    assert!(
        err.to_string()
            .contains("is partitioned by day, but the URL asks for hour"),
        "{err}"
    );
    let err = connect("table=days").err().expect("refused");
    assert!(
        err.to_string()
            .contains("is partitioned, but the URL asks for not partitioned"),
        "{err}"
    );
    let again = connect("table=days&partition=day").unwrap();
    assert_eq!(load(&again, 1, 0), [Seen { item: 1, at_ms: T0 }]);
    assert_eq!(
        "postgres://u@h/db?partition=month"
            .parse::<StoreUrl>()
            .unwrap_err()
            .to_string(),
        "postgres URL: partition=month: expected hour, day, week or none"
    );
}
