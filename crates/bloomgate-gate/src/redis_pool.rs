//! A small pool of blocking Redis connections, shared by the Redis exact store and the remote
//! (RESP server) filters: take an idle connection or open one, give it back after a successful
//! command. A connection whose command failed may be mid-reply, so it is dropped, not reused.

use std::sync::Mutex;

use redis::Connection;

use crate::Result;

pub(crate) struct RedisPool {
    client: redis::Client,
    idle: Mutex<Vec<Connection>>,
}

impl RedisPool {
    /// Connects once to `url` (`redis://HOST:PORT[/DB]`), so a wrong address fails here.
    pub fn connect(url: &str) -> Result<Self> {
        let client = redis::Client::open(url)?;
        let conn = client.get_connection()?;
        Ok(RedisPool {
            client,
            idle: Mutex::new(vec![conn]),
        })
    }

    /// Runs `f` on a pooled connection.
    pub fn with_conn<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let pooled = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut conn = match pooled {
            Some(conn) => conn,
            None => self.client.get_connection()?,
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
