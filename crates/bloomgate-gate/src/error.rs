//! The gate's error type: a store or filter failure is always an error, never an "unseen" answer.

/// Everything that can go wrong in the gate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The SQLite store failed.
    #[error("sqlite store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The PostgreSQL store failed (connection, statement, or its statement timeout).
    #[error("postgres store: {}", describe(.0))]
    Postgres(tokio_postgres::Error),
    /// The PostgreSQL server did not answer within the store's read (or connect) timeout: the
    /// connection was dropped (the call may still have run there; every call is idempotent).
    #[error("postgres store: no answer within {0:?} (the connection was dropped)")]
    PostgresTimeout(std::time::Duration),
    /// A Redis server (store or filters) answered an error or the connection failed.
    #[error("redis: {0}")]
    Redis(redis::RedisError),
    /// A Redis server did not connect, answer or accept a write within the configured timeout.
    #[error("redis: no answer within the timeout ({0})")]
    Timeout(redis::RedisError),
    /// The remote filters' server (or a cluster node) failed, answered something unexpected,
    /// or did not get a write to as many replicas as asked.
    #[error("filter server: {0}")]
    FilterServer(String),
    /// A filter could not be created or decoded.
    #[error("filter: {0}")]
    Filter(#[from] bloomgate::Error),
    /// The configuration cannot work.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// The background recorder could not write served items; they stay visible to the gate
    /// (never shown again by this process) but are not durable, so every later record fails.
    #[error("recording served items failed: {0}")]
    Recording(String),
    /// The local filters' snapshot could not be written.
    #[error("filter snapshot: {0}")]
    Snapshot(String),
    /// A store named by URL could not be opened or emptied (`crate::StoreUrl::open`).
    #[error("{action}")]
    Open {
        /// What was being done: `opening PATH`, `removing FILE`, `connecting to URL`.
        action: String,
        /// Why it failed.
        #[source]
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl From<redis::RedisError> for Error {
    fn from(err: redis::RedisError) -> Self {
        if err.is_timeout() {
            Error::Timeout(err)
        } else {
            Error::Redis(err)
        }
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(err: tokio_postgres::Error) -> Self {
        Error::Postgres(err)
    }
}

/// `err` with its cause: the `postgres` crate's own message only names the kind ("db error").
pub(crate) fn describe(err: &tokio_postgres::Error) -> String {
    match std::error::Error::source(err) {
        Some(cause) => format!("{err}: {cause}"),
        None => err.to_string(),
    }
}

/// The gate's result type.
pub type Result<T> = std::result::Result<T, Error>;
