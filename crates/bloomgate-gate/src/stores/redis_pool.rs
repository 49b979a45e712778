//! A small pool of blocking Redis connections, shared by the Redis exact store and the remote
//! (RESP server) filters: take an idle connection or open one, give it back after a successful
//! command. A connection whose command failed (or timed out) may be mid-reply, so it is dropped,
//! not reused. Connections are opened only when none is idle: a request never pays for a
//! connection setup once the pool has as many as there are concurrent callers.

use std::sync::Mutex;

use redis::Connection;

use crate::config::Timeouts;
use crate::Result;

/// What opens the pool's connections: one server with timeouts (the store), or the remote
/// filters' client for one server or a cluster.
pub(crate) trait Connector {
    type Conn;
    fn open(&self) -> redis::RedisResult<Self::Conn>;
}

/// One server; every connection gets the connect and read/write timeouts.
pub(crate) struct TimedClient {
    client: redis::Client,
    timeouts: Timeouts,
}

impl Connector for TimedClient {
    type Conn = Connection;
    fn open(&self) -> redis::RedisResult<Connection> {
        let conn = self
            .client
            .get_connection_with_timeout(self.timeouts.connect)?;
        conn.set_read_timeout(Some(self.timeouts.io))?;
        conn.set_write_timeout(Some(self.timeouts.io))?;
        Ok(conn)
    }
}

pub(crate) struct RedisPool<C: Connector = TimedClient> {
    client: C,
    idle: Mutex<Vec<C::Conn>>,
}

impl RedisPool {
    /// Connects once to `url` (`redis://HOST:PORT[/DB]`), so a wrong address fails here.
    pub fn connect(url: &str, timeouts: Timeouts) -> Result<Self> {
        Self::with_client(TimedClient {
            client: redis::Client::open(url)?,
            timeouts,
        })
    }
}

impl<C: Connector> RedisPool<C> {
    /// Opens one connection through `client`, so a wrong address fails here.
    pub fn with_client(client: C) -> Result<Self> {
        let conn = client.open()?;
        Ok(RedisPool {
            client,
            idle: Mutex::new(vec![conn]),
        })
    }

    /// Runs `f` on a pooled connection.
    pub fn with_conn<T>(&self, f: impl FnOnce(&mut C::Conn) -> redis::RedisResult<T>) -> Result<T> {
        let pooled = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut conn = match pooled {
            Some(conn) => conn,
            None => self.client.open()?,
        };
        let result = f(&mut conn);
        if result.is_ok() {
            self.idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(conn);
        }
        Ok(result?)
    }
}
