//! Retention by time partitions for the PostgreSQL store (`partition=hour|day|week` on its URL).
//!
//! The rows table is partitioned by range on a `period` column, `seen_at / P` for the period
//! length P, one partition per period named `{table}_p{period}` (`seen_p20425`: the 20,425th day
//! since the Unix epoch). The primary key becomes (scope, item, period) — a partitioned table's
//! unique keys must hold its partition key — so a scope shown an item in several periods keeps
//! one row per period, each with the latest time in it; reads take the newest. A group commit
//! first makes sure the partitions of its rows exist, and the next period's too, so the commit
//! after a period boundary usually finds its partition already made. Expiry drops every
//! partition whose whole period lies before the retention cutoff (`DROP TABLE`: no row-by-row
//! delete, no dead tuples, no vacuum), and deletes nothing inside the partition the cutoff falls
//! in: rows outlive the window by up to one period, and are never answered as seen past it
//! (every read bounds `seen_at`).
//!
//! Every statement here is unnamed (`query_typed`, `batch_execute`), as the store's are with
//! `prepared=false`, so a transaction pooler in front of the server does not break them.

use std::collections::HashSet;

use tokio_postgres::types::Type;

use crate::stores::postgres_client::{CallError, PgClient};
use crate::Error;

/// The period of one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partition {
    /// One partition per hour (URL: `partition=hour`).
    Hour,
    /// One partition per day (URL: `partition=day`).
    Day,
    /// One partition per week of 7 days from the epoch (a Thursday; URL: `partition=week`).
    Week,
}

impl Partition {
    /// The URL value's partition: `hour`, `day` or `week`.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "hour" => Some(Partition::Hour),
            "day" => Some(Partition::Day),
            "week" => Some(Partition::Week),
            _ => None,
        }
    }

    /// The URL value.
    pub fn name(self) -> &'static str {
        match self {
            Partition::Hour => "hour",
            Partition::Day => "day",
            Partition::Week => "week",
        }
    }

    /// P, the period's length in milliseconds.
    pub fn period_ms(self) -> i64 {
        const HOUR_MS: i64 = 3_600_000;
        match self {
            Partition::Hour => HOUR_MS,
            Partition::Day => 24 * HOUR_MS,
            Partition::Week => 7 * 24 * HOUR_MS,
        }
    }

    /// The period a time (ms) falls in: `seen_at / P` as the statements compute it (truncating,
    /// as SQL's integer division does).
    pub(crate) fn period_of(self, at_ms: i64) -> i64 {
        at_ms / self.period_ms()
    }
}

/// The partition of `table` holding `period`.
fn partition_name(table: &str, period: i64) -> String {
    format!("{table}_p{period}")
}

/// The partitioned rows table's definition (`period` is the partition key).
pub(crate) fn create_table_sql(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (
             scope   BIGINT NOT NULL,
             item    BIGINT NOT NULL,
             seen_at BIGINT NOT NULL,
             period  BIGINT NOT NULL,
             PRIMARY KEY (scope, item, period)
         ) PARTITION BY RANGE (period);"
    )
}

/// Whether `table` is partitioned (true), a plain table (false), or missing (None).
pub(crate) fn is_partitioned(
    client: &mut PgClient,
    table: &str,
) -> std::result::Result<Option<bool>, CallError> {
    let rows = client.query_typed(
        "SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1)",
        &[(&table, Type::TEXT)],
    )?;
    Ok(rows.first().map(|row| row.get::<_, String>(0) == "p"))
}

/// Partitions made by this store (or found made), so a group commit creates only new ones.
#[derive(Default)]
pub(crate) struct Known(std::sync::Mutex<HashSet<i64>>);

impl Known {
    /// Creates the partitions of `periods` (and of the period after the newest) that this store
    /// has not made yet, under the schema lock: `CREATE TABLE IF NOT EXISTS ... PARTITION OF`
    /// races between processes otherwise.
    pub(crate) fn ensure(
        &self,
        client: &mut PgClient,
        table: &str,
        lock: i64,
        periods: &[i64],
    ) -> std::result::Result<(), CallError> {
        let mut wanted: Vec<i64> = periods.to_vec();
        if let Some(&newest) = periods.iter().max() {
            wanted.push(newest + 1);
        }
        wanted.sort_unstable();
        wanted.dedup();
        let missing: Vec<i64> = {
            let known = self.0.lock().unwrap_or_else(|e| e.into_inner());
            wanted.into_iter().filter(|p| !known.contains(p)).collect()
        };
        if missing.is_empty() {
            return Ok(());
        }
        let mut sql = format!("BEGIN; SELECT pg_advisory_xact_lock({lock});");
        for &period in &missing {
            sql.push_str(&format!(
                "CREATE TABLE IF NOT EXISTS {} PARTITION OF {table} FOR VALUES FROM ({period}) TO ({});",
                partition_name(table, period),
                period + 1
            ));
        }
        sql.push_str("COMMIT;");
        client.batch_execute(&sql)?;
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(missing);
        Ok(())
    }

    /// Forgets every partition (after a commit found one missing: another process dropped it).
    pub(crate) fn forget(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Drops every partition of `table` whose whole period lies before `before_ms`; returns the
    /// rows they held. Each partition is counted and dropped in one transaction.
    pub(crate) fn drop_before(
        &self,
        client: &mut PgClient,
        table: &str,
        partition: Partition,
        before_ms: i64,
    ) -> std::result::Result<u64, CallError> {
        let children = client.query_typed(
            "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = to_regclass($1)",
            &[(&table, Type::TEXT)],
        )?;
        let prefix = format!("{table}_p");
        let mut gone = 0;
        for row in children {
            let name: String = row.get(0);
            let Some(period) = name
                .strip_prefix(&prefix)
                .and_then(|n| n.parse::<i64>().ok())
            else {
                continue; // not one of ours: left alone
            };
            if (period + 1).saturating_mul(partition.period_ms()) > before_ms {
                continue;
            }
            // One transaction; a failure leaves it open on this connection, which the store
            // then drops (never reused after an error).
            client.batch_execute("BEGIN")?;
            let rows: i64 =
                client.query_typed(&format!("SELECT count(*) FROM {name}"), &[])?[0].get(0);
            client.batch_execute(&format!("DROP TABLE {name}; COMMIT"))?;
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&period);
            gone += rows as u64;
        }
        Ok(gone)
    }
}

/// The error of a store whose table exists with the other layout, or another period.
pub(crate) fn layout_mismatch(table: &str, wanted: Option<Partition>, found: &str) -> Error {
    let wanted = wanted.map_or("not partitioned", Partition::name);
    Error::InvalidConfig(format!(
        "postgres table {table} is {found}, but the URL asks for {wanted}: name another table \
         (table=NAME) or drop this one"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_and_names() {
        assert_eq!(Partition::parse("day"), Some(Partition::Day));
        assert_eq!(Partition::parse("month"), None);
        for p in [Partition::Hour, Partition::Day, Partition::Week] {
            assert_eq!(Partition::parse(p.name()), Some(p));
        }
        let day = Partition::Day;
        assert_eq!(day.period_of(0), 0);
        assert_eq!(day.period_of(86_399_999), 0);
        assert_eq!(day.period_of(86_400_000), 1);
        assert_eq!(
            Partition::Hour.period_of(1_700_000_000_000),
            1_700_000_000_000 / 3_600_000
        );
        assert_eq!(partition_name("seen", 20_425), "seen_p20425");
    }
}
