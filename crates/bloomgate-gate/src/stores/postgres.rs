//! The exact store on a PostgreSQL server (14 or later): one table `seen (scope, item, seen_at)`
//! keyed by PRIMARY KEY (scope, item), shared by every gate process that connects to it.
//!
//! URL: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAM=VALUE&...]` (or `postgresql://`).
//! Five parameters are the store's own ([`PgOptions`] gives their defaults): `prepared=false`,
//! `statement_timeout=MS`, `read_timeout=MS`, `partition=hour|day|week` (retention by dropping
//! time partitions, see `postgres_partitions`) and `table=NAME` (the rows table, `seen` by
//! default, so one database can hold several data sets; its identity is kept in `{NAME}_meta`,
//! or in `meta` for the default `seen`, the table existing databases already have); every other
//! parameter is libpq's, read by `tokio_postgres` (`connect_timeout` in seconds,
//! `tcp_user_timeout` in seconds (tokio-postgres reads it so, not in libpq's ms), `application_name`, `options`, `sslmode`, ...). This build has
//! no TLS: `sslmode=disable` and `sslmode=prefer` (the default, which then connects without
//! TLS) work, `sslmode=require` is refused when the store is opened rather than silently
//! ignored; reach a server that demands TLS through a TLS tunnel or a local pooler.
//!
//! Connections: a small pool of blocking clients with deadlines (`postgres_client`; taken idle
//! or opened on demand, as [`crate::SqliteStore`]'s readers and the Redis pool are), rather than
//! an `r2d2` pool: the
//! store needs no pool size limit, health-check thread or wait queue, and dropping a broken
//! connection is the one rule that matters. A call that fails because the connection is gone
//! (the server restarted, a pooler or firewall closed it) empties the pool — its other idle
//! connections are as stale — and runs once more on a new connection; every call is idempotent
//! (upserts that keep the later time, deletes of old rows, reads), so that retry is safe. A
//! connection whose call failed otherwise is dropped too, never reused mid-reply.
//!
//! Statements: each connection prepares its statements once and reuses them (one round trip per
//! call). Behind a transaction pooler (PgBouncer's `pool_mode = transaction`), named prepared
//! statements and session settings do not follow the client from one server connection to the
//! next: there, `prepared=false` sends every call as an unnamed statement with its parameter
//! types (`query_typed`: parse, bind and execute in the same round trip) and sets nothing on
//! the session, so `statement_timeout` is not sent either — set it on the role or database
//! (`ALTER ROLE ... SET statement_timeout = '5s'`) or use the pooler's `query_timeout`.
//!
//! Timeouts: [`PgOptions::connect_timeout`] bounds opening a connection — TCP, startup and
//! authentication (a stopped server fails at once, an unreachable or frozen one after the
//! timeout); [`PgOptions::statement_timeout`] is set on each connection (`SET
//! statement_timeout`), so the server cancels a call that runs longer; and
//! [`PgOptions::read_timeout`] bounds the wait for each call's answer on the client
//! (`postgres_client`): a server that keeps the connection open but stops answering (frozen,
//! swapped out, a proxy that stopped forwarding), which neither the server's timeout nor the
//! kernel's (`tcp_user_timeout`, keepalives: its kernel still acknowledges) can end, costs a
//! caller at most that long, then its connection is dropped and the call is an error. Unless the
//! URL sets libpq's `tcp_user_timeout`, it is the read timeout too (unacknowledged data: a
//! network that lost the server).
//!
//! Ids are u64 stored as BIGINT (the same bits, bit-cast to i64, as the SQLite store does).
//! - `contains`: `item = ANY($2)` over the primary key, one round trip per batch.
//! - `record`/`record_batch`: one statement per call (so one transaction): the rows travel as
//!   three arrays and `unnest` them, duplicates within the batch are merged (`max`), and the
//!   upsert only writes a row whose time is later (`ON CONFLICT ... DO UPDATE ... WHERE
//!   seen.seen_at < excluded.seen_at`: a later time replaces an earlier one, an earlier one never
//!   replaces a later one, and an unchanged row is not rewritten, so it leaves no dead tuple).
//!   The rows are inserted in key order, so two concurrent batches lock shared keys in the same
//!   order and cannot deadlock.
//! - `load`: the scope's rows through the primary key, put in time order here.
//! - `expire` (unpartitioned; a partitioned table drops whole partitions instead): there is no
//!   index on `seen_at`. It would be updated by every upsert that moves a
//!   time (and would make those updates non-HOT: a new entry in both indexes per update), to
//!   serve one sweep per retention period. The sweep instead walks the heap in physical order,
//!   [`EXPIRE_PAGES`] pages (about 5,000 rows) per statement, with a TID range scan
//!   (PostgreSQL 14+): each page is read once per sweep, each statement is a short transaction
//!   holding few row locks, and nothing restarts from the table's start (a `LIMIT`ed
//!   `DELETE ... WHERE seen_at < $1` without an index would rescan the already-swept pages each
//!   time). Nothing here was measured; rows that an upsert moves to an already-swept page during
//!   the sweep wait for the next one.
//! - `identity`: a random token in the meta table, created with the schema;
//!   [`PostgresStore::clear`] empties the rows table and replaces it.
//!
//! The table name is the one piece of text put into SQL rather than bound: it is checked to be a
//! plain lower-case identifier ([`valid_table`]) before any statement is built.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_postgres::config::SslMode;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Row, Statement};

use crate::error::describe;
use crate::stores::postgres_client::{CallError, PgClient};
use crate::stores::postgres_partitions::{self, Known, Partition};
use crate::{Error, ExactStore, Result, Seen};

/// How the store connects and keeps its rows; a parameter in the URL overrides the field.
#[derive(Clone, Debug)]
pub struct PgOptions {
    /// Longest wait to open a connection (URL: libpq's `connect_timeout`, in seconds).
    pub connect_timeout: Duration,
    /// The server cancels a statement that runs longer (`SET statement_timeout`; zero: no
    /// limit). URL: `statement_timeout=MS`.
    pub statement_timeout: Duration,
    /// Named statements prepared once per connection (true), or unnamed statements for
    /// transaction poolers (false). URL: `prepared=true|false`.
    pub prepared: bool,
    /// The rows table (`[a-z_][a-z0-9_]{0,40}`); its identity is kept in `{table}_meta`, or in
    /// `meta` for the default `seen`. URL: `table=NAME`.
    pub table: String,
    /// Retention by time partitions (see `postgres_partitions`): the rows table partitioned by
    /// period, expiry dropping whole partitions. None: one plain table, batched deletes. URL:
    /// `partition=hour|day|week|none`.
    pub partition: Option<Partition>,
    /// Longest wait for the server's answer to one call, on the client: past it the connection
    /// is dropped and the call fails ([`crate::Error::PostgresTimeout`]), so a server that
    /// stops answering cannot hold the gate's threads (zero: no limit). Keep it above
    /// `statement_timeout`, so that a statement the server cancels reports the server's error.
    /// URL: `read_timeout=MS`.
    pub read_timeout: Duration,
}

impl Default for PgOptions {
    /// 5 s to connect, 5 s per statement, 6 s for an answer, prepared statements, table `seen`,
    /// not partitioned.
    fn default() -> Self {
        PgOptions {
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(6),
            statement_timeout: Duration::from_secs(5),
            prepared: true,
            table: DEFAULT_TABLE.to_owned(),
            partition: None,
        }
    }
}

/// The rows table when none is named (with its identity in `meta`).
pub(crate) const DEFAULT_TABLE: &str = "seen";

/// Longest table name: `[a-z_][a-z0-9_]{0,40}`, so `{table}_meta` stays far within
/// PostgreSQL's 63-byte identifiers.
const TABLE_MAX: usize = 41;

/// Whether `name` is a plain SQL identifier the store may put into its statements:
/// `[a-z_][a-z0-9_]{0,40}` (lower case, so it needs no quoting and means the same quoted or not).
pub(crate) fn valid_table(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'_'))
        && name.len() <= TABLE_MAX
        && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_'))
}

/// The table holding the identity of rows table `table`.
fn meta_table(table: &str) -> String {
    if table == DEFAULT_TABLE {
        "meta".to_owned()
    } else {
        format!("{table}_meta")
    }
}

/// Heap pages one expiry statement sweeps: at about 150 rows per 8 KiB page (a 48-byte tuple
/// and its line pointer), about 5,000 rows.
const EXPIRE_PAGES: u64 = 32;

/// Serialises schema creation between processes (`CREATE TABLE IF NOT EXISTS` races otherwise).
const SCHEMA_LOCK: i64 = 0x626c_6f6f_6d67_6174; // "bloomgat"

/// The statements, each with its parameter types (given, not inferred: an unnamed statement
/// is sent with them).
#[derive(Clone, Copy)]
enum Sql {
    Contains,
    Upsert,
    Load,
    ExpirePages,
    Identity,
    Pages,
}

impl Sql {
    const COUNT: usize = 6;

    const ALL: [Sql; Sql::COUNT] = [
        Sql::Contains,
        Sql::Upsert,
        Sql::Load,
        Sql::ExpirePages,
        Sql::Identity,
        Sql::Pages,
    ];

    /// The statement over rows table `t` (a [`valid_table`] name) and its meta table `meta`;
    /// a partitioned table keeps a row per (scope, item, period), and its reads let the server
    /// skip the partitions before the window (`period >= since / P`).
    fn text(self, t: &str, meta: &str, partition: Option<Partition>) -> String {
        if let Some(p) = partition.map(Partition::period_ms) {
            match self {
                Sql::Contains => {
                    return format!(
                        "SELECT item FROM {t} WHERE scope = $1 AND item = ANY($2) AND seen_at >= $3
                         AND period >= $3 / {p}"
                    )
                }
                Sql::Upsert => {
                    return format!(
                        "INSERT INTO {t} (scope, item, seen_at, period)
                         SELECT scope, item, max(seen_at), seen_at / {p}
                         FROM unnest($1, $2, $3) AS r(scope, item, seen_at)
                         GROUP BY scope, item, seen_at / {p} ORDER BY scope, item, 4
                         ON CONFLICT (scope, item, period) DO UPDATE SET seen_at = excluded.seen_at
                         WHERE {t}.seen_at < excluded.seen_at"
                    )
                }
                Sql::Load => {
                    return format!(
                        "SELECT item, max(seen_at) FROM {t} WHERE scope = $1 AND seen_at >= $2
                         AND period >= $2 / {p} GROUP BY item"
                    )
                }
                Sql::ExpirePages | Sql::Identity | Sql::Pages => {}
            }
        }
        match self {
            Sql::Contains => {
                format!(
                    "SELECT item FROM {t} WHERE scope = $1 AND item = ANY($2) AND seen_at >= $3"
                )
            }
            Sql::Upsert => format!(
                "INSERT INTO {t} (scope, item, seen_at)
                 SELECT scope, item, max(seen_at) FROM unnest($1, $2, $3) AS r(scope, item, seen_at)
                 GROUP BY scope, item ORDER BY scope, item
                 ON CONFLICT (scope, item) DO UPDATE SET seen_at = excluded.seen_at
                 WHERE {t}.seen_at < excluded.seen_at"
            ),
            Sql::Load => {
                format!("SELECT item, seen_at FROM {t} WHERE scope = $1 AND seen_at >= $2")
            }
            Sql::ExpirePages => format!(
                "WITH gone AS (DELETE FROM {t} WHERE ctid >= $1::text::tid AND ctid < $2::text::tid
                 AND seen_at < $3 RETURNING 1) SELECT count(*) FROM gone"
            ),
            Sql::Identity => format!("SELECT value FROM {meta} WHERE key = 'identity'"),
            Sql::Pages => {
                format!("SELECT pg_relation_size('{t}') / current_setting('block_size')::bigint")
            }
        }
    }

    fn types(self) -> Vec<Type> {
        match self {
            Sql::Contains => vec![Type::INT8, Type::INT8_ARRAY, Type::INT8],
            Sql::Upsert => vec![Type::INT8_ARRAY; 3],
            Sql::Load => vec![Type::INT8, Type::INT8],
            Sql::ExpirePages => vec![Type::TEXT, Type::TEXT, Type::INT8],
            Sql::Identity | Sql::Pages => Vec::new(),
        }
    }
}

/// One pooled connection and, in prepared mode, its statements (prepared on first use).
struct Conn {
    client: PgClient,
    /// The statements' text over the store's tables, indexed by [`Sql`].
    texts: Arc<[String; Sql::COUNT]>,
    prepared: Option<[Option<Statement>; Sql::COUNT]>,
}

impl Conn {
    fn query(
        &mut self,
        sql: Sql,
        params: &[&(dyn ToSql + Sync)],
    ) -> std::result::Result<Vec<Row>, CallError> {
        let Conn {
            client,
            texts,
            prepared,
        } = self;
        let text = &texts[sql as usize];
        match prepared {
            Some(statements) => {
                let slot = &mut statements[sql as usize];
                let statement = match slot {
                    Some(statement) => statement,
                    None => slot.insert(client.prepare_typed(text, &sql.types())?),
                };
                client.query(&*statement, params)
            }
            None => {
                let typed: Vec<(&(dyn ToSql + Sync), Type)> =
                    params.iter().copied().zip(sql.types()).collect();
                client.query_typed(text, &typed)
            }
        }
    }
}

/// PostgreSQL-backed [`ExactStore`] (see the module docs for the URL and the schema).
pub struct PostgresStore {
    config: tokio_postgres::Config,
    /// Longest wait to open a connection, and for one call's answer (None: unbounded).
    connect_timeout: Duration,
    read_timeout: Option<Duration>,
    prepared: bool,
    /// `SET statement_timeout` on each new connection, in ms (None: not set).
    statement_timeout_ms: Option<u128>,
    /// The rows table and its meta table (checked names).
    table: String,
    meta: String,
    partition: Option<Partition>,
    /// Partitions known to exist (partitioned tables only).
    known: Known,
    texts: Arc<[String; Sql::COUNT]>,
    idle: Mutex<Vec<Conn>>,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?...]`), creating the
    /// schema if it is missing, so a wrong address or credentials fail here. Parameters in the
    /// URL override `options`.
    pub fn connect(url: &str, options: PgOptions) -> Result<Self> {
        let (config, options) = parse_url(url, options)?;
        let table = options.table;
        let meta = meta_table(&table);
        let partition = options.partition;
        let store = PostgresStore {
            connect_timeout: config
                .get_connect_timeout()
                .copied()
                .unwrap_or(options.connect_timeout),
            read_timeout: (!options.read_timeout.is_zero()).then_some(options.read_timeout),
            config,
            prepared: options.prepared,
            statement_timeout_ms: (options.prepared && !options.statement_timeout.is_zero())
                .then_some(options.statement_timeout.as_millis()),
            texts: Arc::new(Sql::ALL.map(|sql| sql.text(&table, &meta, partition))),
            table,
            meta,
            partition,
            known: Known::default(),
            idle: Mutex::new(Vec::new()),
        };
        let (table, meta) = (&store.table, &store.meta);
        let mut conn = store.open()?;
        let rows_table = match partition {
            Some(_) => postgres_partitions::create_table_sql(table),
            None => format!(
                "CREATE TABLE IF NOT EXISTS {table} (
                     scope   BIGINT NOT NULL,
                     item    BIGINT NOT NULL,
                     seen_at BIGINT NOT NULL,
                     PRIMARY KEY (scope, item)
                 );"
            ),
        };
        // An existing table keeps its layout: say so rather than use it the other way.
        let partitioned = postgres_partitions::is_partitioned(&mut conn.client, table)?;
        if let Some(partitioned) = partitioned.filter(|&p| p != partition.is_some()) {
            let found = if partitioned {
                "partitioned"
            } else {
                "not partitioned"
            };
            return Err(postgres_partitions::layout_mismatch(
                table, partition, found,
            ));
        }
        conn.client.batch_execute(&format!(
            "BEGIN;
             SELECT pg_advisory_xact_lock({SCHEMA_LOCK});
             {rows_table}
             CREATE TABLE IF NOT EXISTS {meta} (
                 key   TEXT PRIMARY KEY,
                 value TEXT NOT NULL
             );
             INSERT INTO {meta} (key, value) VALUES ('identity', '{}') ON CONFLICT (key) DO NOTHING;
             COMMIT;",
            crate::stores::random_token()
        ))?;
        if let Some(partition) = partition {
            // The period is fixed when the table is made: partitions of another length would
            // overlap the existing ones.
            let made: String = conn.client.query_typed(
                &format!(
                    "WITH added AS (INSERT INTO {meta} (key, value) VALUES ('partition', $1)
                     ON CONFLICT (key) DO NOTHING RETURNING value)
                     SELECT value FROM added UNION ALL
                     SELECT value FROM {meta} WHERE key = 'partition'"
                ),
                &[(&partition.name(), Type::TEXT)],
            )?[0]
                .get(0);
            if made != partition.name() {
                let found = format!("partitioned by {made}");
                return Err(postgres_partitions::layout_mismatch(
                    table,
                    Some(partition),
                    &found,
                ));
            }
        }
        store.put_back(conn);
        Ok(store)
    }

    /// The rows table this store keeps (`seen` unless the URL or [`PgOptions::table`] named
    /// another).
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Empties the store: every row deleted (`TRUNCATE`) and a new identity token, in one
    /// transaction, so filters persisted against the old contents are rebuilt, not believed. Other
    /// tables of the database are untouched.
    pub fn clear(&self) -> Result<()> {
        let sql = format!(
            "BEGIN;
             TRUNCATE {table};
             UPDATE {meta} SET value = '{token}' WHERE key = 'identity';
             COMMIT;",
            table = self.table,
            meta = self.meta,
            token = crate::stores::random_token()
        );
        self.with_conn(|conn| conn.client.batch_execute(&sql))
    }

    fn open(&self) -> Result<Conn> {
        let mut client = PgClient::connect(&self.config, self.connect_timeout, self.read_timeout)?;
        if let Some(ms) = self.statement_timeout_ms {
            client.batch_execute(&format!("SET statement_timeout = {ms}"))?;
        }
        Ok(Conn {
            client,
            texts: Arc::clone(&self.texts),
            prepared: self.prepared.then(Default::default),
        })
    }

    fn put_back(&self, conn: Conn) {
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(conn);
    }

    /// Runs `f` on a pooled connection (see the module docs for when it runs twice). A
    /// connection whose call failed is dropped, never reused mid-reply; one that timed out takes
    /// the idle ones with it (they reach the same server: each would wait out its own timeout),
    /// and the call is not run again (it would double the wait).
    fn with_conn<T>(
        &self,
        mut f: impl FnMut(&mut Conn) -> std::result::Result<T, CallError>,
    ) -> Result<T> {
        let pooled = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let fresh = pooled.is_none();
        let mut conn = match pooled {
            Some(conn) => conn,
            None => self.open()?,
        };
        match f(&mut conn) {
            Ok(value) => {
                self.put_back(conn);
                Ok(value)
            }
            Err(CallError::Db(err)) if !fresh && connection_lost(&err) => {
                drop(conn);
                self.idle.lock().unwrap_or_else(|e| e.into_inner()).clear();
                let mut conn = self.open()?;
                let value = f(&mut conn)?;
                self.put_back(conn);
                Ok(value)
            }
            Err(err @ CallError::Timeout(_)) => {
                drop(conn);
                let idle =
                    std::mem::take(&mut *self.idle.lock().unwrap_or_else(|e| e.into_inner()));
                drop(idle);
                Err(err.into())
            }
            Err(err) => Err(err.into()),
        }
    }
}

/// Splits the store's own parameters (`prepared`, `statement_timeout`, `table`, `partition`) off
/// `url` and
/// hands the rest to the `postgres` crate's parser. Opens no connection: [`crate::StoreUrl`]
/// parses URLs through it too.
pub(crate) fn parse_url(
    url: &str,
    mut options: PgOptions,
) -> Result<(tokio_postgres::Config, PgOptions)> {
    let invalid = |what: String| Error::InvalidConfig(format!("postgres URL: {what}"));
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "prepared" => {
                options.prepared = match value {
                    "true" | "on" | "1" => true,
                    "false" | "off" | "0" => false,
                    _ => return Err(invalid(format!("prepared={value}: expected true or false"))),
                }
            }
            "statement_timeout" => {
                let ms = value.parse().map_err(|_| {
                    invalid(format!("statement_timeout={value}: expected milliseconds"))
                })?;
                options.statement_timeout = Duration::from_millis(ms);
            }
            "read_timeout" => {
                let ms = value
                    .parse()
                    .map_err(|_| invalid(format!("read_timeout={value}: expected milliseconds")))?;
                options.read_timeout = Duration::from_millis(ms);
            }
            "table" => options.table = value.to_owned(),
            "partition" => {
                options.partition = match value {
                    "none" => None,
                    _ => Some(Partition::parse(value).ok_or_else(|| {
                        invalid(format!(
                            "partition={value}: expected hour, day, week or none"
                        ))
                    })?),
                }
            }
            _ => rest.push(pair),
        }
    }
    let url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    if !valid_table(&options.table) {
        return Err(invalid(format!(
            "table={:?}: expected a plain name, [a-z_][a-z0-9_]{{0,40}}",
            options.table
        )));
    }
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(invalid(format!(
            "{url}: expected postgres:// or postgresql://"
        )));
    }
    let mut config: tokio_postgres::Config = url.parse().map_err(|e| invalid(describe(&e)))?;
    if !matches!(config.get_ssl_mode(), SslMode::Disable | SslMode::Prefer) {
        return Err(invalid(
            "sslmode=require: this build has no TLS support (use sslmode=disable or prefer, \
             through a TLS tunnel if the network is not trusted)"
                .to_owned(),
        ));
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(options.connect_timeout);
    }
    if config.get_tcp_user_timeout().is_none() && !options.read_timeout.is_zero() {
        config.tcp_user_timeout(options.read_timeout);
    }
    Ok((config, options))
}

/// Whether `err` means the connection is gone (closed, reset, or the server shutting down), as
/// opposed to a statement that failed on a live connection.
fn connection_lost(err: &tokio_postgres::Error) -> bool {
    if err.is_closed() {
        return true;
    }
    match err.code() {
        // 08: connection exception; 57P: the server is shutting down or restarting.
        Some(code) => code.code().starts_with("08") || code.code().starts_with("57P"),
        // No SQLSTATE: an I/O error on the socket.
        None => true,
    }
}

impl ExactStore for PostgresStore {
    /// The random token the schema was created with (the meta table), replaced by
    /// [`PostgresStore::clear`]: a new database or table (or one whose tables were dropped) is a
    /// new store.
    fn identity(&self) -> Result<Option<String>> {
        let rows = self.with_conn(|conn| conn.query(Sql::Identity, &[]))?;
        Ok(rows.first().map(|row| row.get(0)))
    }

    fn contains(&self, scope: u64, items: &[u64], since: u64, out: &mut Vec<bool>) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let ids: Vec<i64> = items.iter().map(|&item| item as i64).collect();
        let (scope, since) = (scope as i64, since as i64);
        let rows = self.with_conn(|conn| conn.query(Sql::Contains, &[&scope, &ids, &since]))?;
        let found: HashSet<u64> = rows.iter().map(|row| row.get::<_, i64>(0) as u64).collect();
        out.extend(items.iter().map(|item| found.contains(item)));
        Ok(())
    }

    fn record(&self, scope: u64, seen: &[Seen]) -> Result<()> {
        let rows: Vec<(u64, Seen)> = seen.iter().map(|&s| (scope, s)).collect();
        self.record_batch(&rows)
    }

    /// One statement for all rows: the columns travel as three arrays.
    fn record_batch(&self, rows: &[(u64, Seen)]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let scopes: Vec<i64> = rows.iter().map(|&(scope, _)| scope as i64).collect();
        let items: Vec<i64> = rows.iter().map(|(_, s)| s.item as i64).collect();
        let times: Vec<i64> = rows.iter().map(|(_, s)| s.at_ms as i64).collect();
        let Some(partition) = self.partition else {
            self.with_conn(|conn| conn.query(Sql::Upsert, &[&scopes, &items, &times]))?;
            return Ok(());
        };
        let mut periods: Vec<i64> = times.iter().map(|&t| partition.period_of(t)).collect();
        periods.sort_unstable();
        periods.dedup();
        self.with_conn(|conn| {
            self.known
                .ensure(&mut conn.client, &self.table, SCHEMA_LOCK, &periods)?;
            match conn.query(Sql::Upsert, &[&scopes, &items, &times]) {
                // No partition for a row: another process dropped one this store had made.
                Err(CallError::Db(err)) if err.code() == Some(&SqlState::CHECK_VIOLATION) => {
                    self.known.forget();
                    self.known
                        .ensure(&mut conn.client, &self.table, SCHEMA_LOCK, &periods)?;
                    conn.query(Sql::Upsert, &[&scopes, &items, &times])
                }
                other => other,
            }
        })?;
        Ok(())
    }

    fn load(&self, scope: u64, since_ms: u64, out: &mut Vec<Seen>) -> Result<()> {
        let (scope, since) = (scope as i64, since_ms as i64);
        let rows = self.with_conn(|conn| conn.query(Sql::Load, &[&scope, &since]))?;
        let start = out.len();
        out.extend(rows.iter().map(|row| Seen {
            item: row.get::<_, i64>(0) as u64,
            at_ms: row.get::<_, i64>(1) as u64,
        }));
        out[start..].sort_unstable_by_key(|s| s.at_ms);
        Ok(())
    }

    fn expire(&self, before_ms: u64) -> Result<u64> {
        if let Some(partition) = self.partition {
            let before = before_ms.min(i64::MAX as u64) as i64;
            return self.with_conn(|conn| {
                self.known
                    .drop_before(&mut conn.client, &self.table, partition, before)
            });
        }
        let pages: i64 = self.with_conn(|conn| conn.query(Sql::Pages, &[]))?[0].get(0);
        let before = before_ms as i64;
        let mut total = 0;
        for first in (0..pages.max(0) as u64).step_by(EXPIRE_PAGES as usize) {
            let (from, to) = (
                format!("({first},0)"),
                format!("({},0)", first + EXPIRE_PAGES),
            );
            let rows =
                self.with_conn(|conn| conn.query(Sql::ExpirePages, &[&from, &to, &before]))?;
            total += rows[0].get::<_, i64>(0) as u64;
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Result<(tokio_postgres::Config, PgOptions)> {
        parse_url(url, PgOptions::default())
    }

    #[test]
    fn the_url_takes_the_stores_parameters_and_passes_the_rest_on() {
        let (config, options) =
            parse("postgres://u:pw@db.example:6000/feed?prepared=false&application_name=gate&statement_timeout=250&table=seen_verify")
                .unwrap();
        assert!(!options.prepared);
        assert_eq!(options.table, "seen_verify");
        assert_eq!(options.statement_timeout, Duration::from_millis(250));
        assert_eq!(config.get_user(), Some("u"));
        assert_eq!(config.get_password(), Some(&b"pw"[..]));
        assert_eq!(config.get_dbname(), Some("feed"));
        assert_eq!(config.get_ports(), [6000]);
        assert_eq!(config.get_application_name(), Some("gate"));
        assert_eq!(config.get_connect_timeout(), Some(&Duration::from_secs(5)));
        assert_eq!(options.read_timeout, Duration::from_secs(6));
        assert_eq!(config.get_tcp_user_timeout(), Some(&Duration::from_secs(6)));

        let (config, options) =
            parse("postgresql://u@h/db?connect_timeout=2&read_timeout=1500&tcp_user_timeout=7")
                .unwrap();
        assert_eq!(options.read_timeout, Duration::from_millis(1500));
        assert_eq!(config.get_tcp_user_timeout(), Some(&Duration::from_secs(7)));
        assert!(options.prepared);
        assert_eq!(options.table, "seen");
        assert_eq!(config.get_connect_timeout(), Some(&Duration::from_secs(2)));
    }

    #[test]
    fn tls_requirements_and_bad_parameters_are_refused() {
        for url in [
            "postgres://u@h/db?sslmode=disable",
            "postgres://u@h/db?sslmode=prefer",
        ] {
            parse(url).unwrap();
        }
        for (url, says) in [
            ("postgres://u@h/db?sslmode=require", "no TLS support"),
            ("postgres://u@h/db?prepared=maybe", "prepared=maybe"),
            ("postgres://u@h/db?statement_timeout=5s", "milliseconds"),
            ("postgres://u@h/db?read_timeout=never", "read_timeout=never"),
            ("postgres://u@h/db?no_such_option=1", "no_such_option"),
            ("mysql://u@h/db", "expected postgres://"),
            ("postgres://u@h/db?table=Seen", "table=\"Seen\""),
            ("postgres://u@h/db?table=seen;drop", "plain name"),
            ("postgres://u@h/db?table=", "plain name"),
        ] {
            let err = parse(url).unwrap_err().to_string();
            assert!(err.contains(says), "{url}: {err}");
        }
    }

    #[test]
    fn table_names_are_plain_identifiers() {
        for good in ["seen", "_x", "seen_verify", "a1_2", &"a".repeat(41)] {
            assert!(valid_table(good), "{good}");
        }
        for bad in [
            "",
            "1seen",
            "Seen",
            "seen-x",
            "seen x",
            "se\"en",
            "s;drop",
            &"a".repeat(42),
        ] {
            assert!(!valid_table(bad), "{bad}");
        }
        assert_eq!(meta_table("seen"), "meta");
        assert_eq!(meta_table("seen_trust"), "seen_trust_meta");
    }
}
