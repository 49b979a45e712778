//! The default exact store: one SQLite file in WAL mode, rows keyed by PRIMARY KEY (scope, item).
//!
//! Readers are pooled (one connection per concurrent caller); writes go through one writer
//! connection behind a mutex, because SQLite admits one writer at a time and its busy handler
//! resolves collisions by sleeping (1 ms, 2 ms, … up to 100 ms): measured with 4 request threads,
//! that put the exact mode's p95 at ~16 ms. Every statement is prepared once per connection
//! (`prepare_cached`). A batch `contains` runs its point lookups inside one read transaction:
//! one snapshot, one lock acquisition.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::{ExactStore, Result, Seen};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS seen (
    scope   INTEGER NOT NULL,
    item    INTEGER NOT NULL,
    seen_at INTEGER NOT NULL,
    PRIMARY KEY (scope, item)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS seen_by_time ON seen (seen_at);
";

/// SQLite-backed [`ExactStore`]. Ids are stored as INTEGER (u64 bit-cast to i64).
pub struct SqliteStore {
    path: PathBuf,
    idle_readers: Mutex<Vec<Connection>>,
    writer: Mutex<Connection>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and its schema.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let writer = connect(&path)?;
        writer.execute_batch(SCHEMA)?;
        Ok(SqliteStore {
            path,
            idle_readers: Mutex::new(Vec::new()),
            writer: Mutex::new(writer),
        })
    }

    fn with_reader<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        let pooled = self
            .idle_readers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        let mut conn = match pooled {
            Some(conn) => conn,
            None => connect(&self.path)?,
        };
        let result = f(&mut conn);
        self.idle_readers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(conn);
        result
    }

    fn with_writer<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        f(&mut self.writer.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

fn connect(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)?;
    // WAL: readers never block the writer; NORMAL sync is durable across process crashes
    // (fsync at checkpoints only). The busy timeout makes concurrent writers queue instead
    // of failing with SQLITE_BUSY.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    conn.set_prepared_statement_cache_capacity(16);
    Ok(conn)
}

impl ExactStore for SqliteStore {
    fn contains(
        &self,
        scope: u64,
        items: &[u64],
        since_ms: u64,
        out: &mut Vec<bool>,
    ) -> Result<()> {
        self.with_reader(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
            {
                let mut lookup =
                    tx.prepare_cached("SELECT seen_at FROM seen WHERE scope = ?1 AND item = ?2")?;
                for &item in items {
                    let seen_at: Option<i64> = lookup
                        .query_row(params![scope as i64, item as i64], |row| row.get(0))
                        .optional()?;
                    out.push(seen_at.is_some_and(|at| at as u64 >= since_ms));
                }
            }
            tx.commit()?;
            Ok(())
        })
    }

    fn record(&self, scope: u64, seen: &[Seen]) -> Result<()> {
        if seen.is_empty() {
            return Ok(());
        }
        self.with_writer(|conn| {
            // IMMEDIATE takes the write lock up front: no deadlock-prone read→write upgrade.
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            {
                let mut upsert = tx.prepare_cached(
                    "INSERT INTO seen (scope, item, seen_at) VALUES (?1, ?2, ?3)
                     ON CONFLICT (scope, item) DO UPDATE SET seen_at = max(seen_at, excluded.seen_at)",
                )?;
                for s in seen {
                    upsert.execute(params![scope as i64, s.item as i64, s.at_ms as i64])?;
                }
            }
            tx.commit()?;
            Ok(())
        })
    }

    fn load(&self, scope: u64, since_ms: u64, out: &mut Vec<Seen>) -> Result<()> {
        self.with_reader(|conn| {
            let mut query = conn.prepare_cached(
                "SELECT item, seen_at FROM seen WHERE scope = ?1 AND seen_at >= ?2 ORDER BY seen_at",
            )?;
            let rows = query.query_map(params![scope as i64, since_ms as i64], |row| {
                Ok(Seen { item: row.get::<_, i64>(0)? as u64, at_ms: row.get::<_, i64>(1)? as u64 })
            })?;
            for row in rows {
                out.push(row?);
            }
            Ok(())
        })
    }

    fn expire(&self, before_ms: u64) -> Result<u64> {
        self.with_writer(|conn| {
            let deleted = conn
                .prepare_cached("DELETE FROM seen WHERE seen_at < ?1")?
                .execute(params![before_ms as i64])?;
            Ok(deleted as u64)
        })
    }
}
