//! A small pool of blocking Redis connections, shared by the Redis exact store and the remote
//! (RESP server) filters: take an idle connection or open one, give it back after a successful
//! command. A connection whose command failed may be mid-reply, so it is dropped, not reused.

use std::sync::Mutex;

use redis::Connection;

use crate::Result;

/// What opens the pool's connections: a `redis::Client` (one server) or the remote filters'
/// client for one server or a cluster.
pub(crate) trait Connector {
    type Conn;
    fn open(&self) -> redis::RedisResult<Self::Conn>;
}

impl Connector for redis::Client {
    type Conn = Connection;
    fn open(&self) -> redis::RedisResult<Connection> {
        self.get_connection()
    }
}

pub(crate) struct RedisPool<C: Connector = redis::Client> {
    client: C,
    idle: Mutex<Vec<C::Conn>>,
}

impl RedisPool {
    /// Connects once to `url` (`redis://HOST:PORT[/DB]`), so a wrong address fails here.
    pub fn connect(url: &str) -> Result<Self> {
        Self::with_client(redis::Client::open(url)?)
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
