//! One PostgreSQL connection, used blocking, whose every call has a deadline.
//!
//! The `postgres` crate's blocking client waits for the server's answer without a limit: a
//! server that keeps its TCP connections open but stops answering (frozen, swapped out, stuck on
//! a storage stall, behind a proxy that stopped forwarding) held every caller — the gate's
//! request threads and its recorder — until it came back. The kernel cannot tell such a server
//! from a busy one (it acknowledges the bytes and keepalives), so `tcp_user_timeout` and
//! keepalives do not end the wait, and the server's own `statement_timeout` cannot run. This
//! client is the same thing (tokio-postgres driven by a current-thread runtime of its own, as
//! the `postgres` crate does) with the wait bounded: opening a connection (TCP, startup,
//! authentication) within the connect timeout, each call within the read timeout. A call that
//! runs out of time returns [`CallError::Timeout`] and the connection must be dropped (the pool
//! never reuses it): dropping it closes the socket, so nothing waits on it any more.
//!
//! A statement abandoned that way may still run once the server answers again; the store's
//! calls are idempotent (upserts keeping the later time, deletes of old rows, reads), so the
//! caller's retry is safe either way.

use std::future::Future;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Config, NoTls, Row, Statement};

use crate::error::Error;

/// Why a call failed.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The server answered an error, or the connection failed.
    Db(tokio_postgres::Error),
    /// No answer within this long: the connection must be dropped.
    Timeout(Duration),
    /// The client's runtime could not be started.
    Runtime(std::io::Error),
}

impl From<tokio_postgres::Error> for CallError {
    fn from(err: tokio_postgres::Error) -> Self {
        CallError::Db(err)
    }
}

impl From<CallError> for Error {
    fn from(err: CallError) -> Self {
        match err {
            CallError::Db(err) => Error::Postgres(err),
            CallError::Timeout(after) => Error::PostgresTimeout(after),
            CallError::Runtime(err) => Error::Open {
                action: "starting the PostgreSQL client".into(),
                cause: Box::new(err),
            },
        }
    }
}

/// A connection and the runtime that drives it.
pub(crate) struct PgClient {
    /// Declared before the runtime: dropped first.
    client: Client,
    runtime: Runtime,
    /// Longest wait for one call's answer (None: unbounded).
    read_timeout: Option<Duration>,
}

impl PgClient {
    /// Opens a connection: TCP, startup and authentication together within `connect_timeout`.
    pub fn connect(
        config: &Config,
        connect_timeout: Duration,
        read_timeout: Option<Duration>,
    ) -> Result<Self, CallError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(CallError::Runtime)?;
        let connecting =
            async { tokio::time::timeout(connect_timeout, config.connect(NoTls)).await };
        let (client, connection) = runtime
            .block_on(connecting)
            .map_err(|_| CallError::Timeout(connect_timeout))??;
        // Driven whenever a call runs the runtime (between calls nothing reads the socket, as in
        // the `postgres` crate); it ends when the socket closes.
        runtime.spawn(async move {
            let _ = connection.await;
        });
        Ok(PgClient {
            client,
            runtime,
            read_timeout,
        })
    }

    /// Runs one call against the client, within the read timeout.
    fn call<'a, T, F>(&'a self, call: impl FnOnce(&'a Client) -> F) -> Result<T, CallError>
    where
        F: Future<Output = Result<T, tokio_postgres::Error>> + 'a,
    {
        let answer = call(&self.client);
        match self.read_timeout {
            // The timer is made inside the runtime, whose clock it needs.
            Some(limit) => self
                .runtime
                .block_on(async { tokio::time::timeout(limit, answer).await })
                .map_err(|_| CallError::Timeout(limit))?
                .map_err(CallError::Db),
            None => self.runtime.block_on(answer).map_err(CallError::Db),
        }
    }

    /// Runs `sql` (one or more statements, no parameters, no rows wanted).
    pub fn batch_execute(&mut self, sql: &str) -> Result<(), CallError> {
        self.call(|client| client.batch_execute(sql))
    }

    /// Prepares a named statement with its parameter types.
    pub fn prepare_typed(&mut self, sql: &str, types: &[Type]) -> Result<Statement, CallError> {
        self.call(|client| client.prepare_typed(sql, types))
    }

    /// Runs a prepared statement.
    pub fn query(
        &mut self,
        statement: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, CallError> {
        self.call(|client| client.query(statement, params))
    }

    /// Runs an unnamed statement with its parameter types (parse, bind and execute in one round
    /// trip).
    pub fn query_typed(
        &mut self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>, CallError> {
        self.call(|client| client.query_typed(sql, params))
    }
}
