//! The exact store for users whose history lives in Redis: one sorted set per scope
//! (`{prefix}{scope}`), member = item id in decimal, score = last-seen time in ms.
//!
//! A sorted set is still "one set per scope"; the score carries the time the retention rule
//! needs. Scores are f64, exact for ms timestamps below 2^53 (year 287,396). Behaves exactly like
//! [`crate::SqliteStore`]: `ZADD GT` keeps the later time, `ZMSCORE` answers a batch in one round
//! trip, `ZRANGEBYSCORE` loads oldest first.

use redis::{Commands, Connection};

use crate::stores::redis_pool::RedisPool;
use crate::{ExactStore, Result, Seen, Timeouts};

/// Redis-backed [`ExactStore`] (needs Redis ≥ 6.2 for `ZMSCORE` and `ZADD GT`).
pub struct RedisStore {
    pool: RedisPool,
    prefix: String,
}

impl RedisStore {
    /// Connects to `url` (`redis://HOST:PORT[/DB]`) with the default timeouts; every key this
    /// store touches starts with `prefix`.
    pub fn open(url: &str, prefix: &str) -> Result<Self> {
        Self::open_with_timeouts(url, prefix, Timeouts::default())
    }

    /// As [`RedisStore::open`], with these connect and read/write timeouts on every connection
    /// (a call that exceeds them fails with [`crate::Error::Timeout`]).
    pub fn open_with_timeouts(url: &str, prefix: &str, timeouts: Timeouts) -> Result<Self> {
        Ok(RedisStore {
            pool: RedisPool::connect(url, timeouts)?,
            prefix: prefix.to_owned(),
        })
    }

    /// The key holding the store's identity (see [`ExactStore::identity`]); its suffix is not a
    /// scope number, so expiry skips it.
    fn identity_key(&self) -> String {
        format!("{}identity", self.prefix)
    }

    fn key(&self, scope: u64) -> String {
        format!("{}{}", self.prefix, scope)
    }

    fn with_conn<T>(&self, f: impl FnOnce(&mut Connection) -> redis::RedisResult<T>) -> Result<T> {
        self.pool.with_conn(f)
    }
    /// Every scope key under this store's prefix, via SCAN (never KEYS).
    fn scope_keys(&self) -> Result<Vec<String>> {
        let pattern = format!("{}*", self.prefix);
        let keys: Vec<String> =
            self.with_conn(|conn| conn.scan_match::<_, String>(&pattern)?.collect())?;
        Ok(keys
            .into_iter()
            .filter(|key| key[self.prefix.len()..].parse::<u64>().is_ok())
            .collect())
    }

    /// Deletes every key under this store's prefix (a fresh dataset for the demo and tests).
    /// A cleared store is a new store: it gets a new identity.
    pub fn clear(&self) -> Result<()> {
        for chunk in self.scope_keys()?.chunks(512) {
            self.with_conn(|conn| conn.del::<_, ()>(chunk))?;
        }
        self.with_conn(|conn| conn.del::<_, ()>(self.identity_key()))
    }
}

impl ExactStore for RedisStore {
    /// A random token in `{prefix}identity`, set once (`SET NX`) and read back.
    fn identity(&self) -> Result<Option<String>> {
        let token = crate::stores::random_token();
        let key = self.identity_key();
        let identity: String = self.with_conn(|conn| {
            redis::pipe()
                .cmd("SET")
                .arg(&key)
                .arg(&token)
                .arg("NX")
                .ignore()
                .cmd("GET")
                .arg(&key)
                .query::<(String,)>(conn)
                .map(|(identity,)| identity)
        })?;
        Ok(Some(identity))
    }

    fn contains(&self, scope: u64, items: &[u64], since: u64, out: &mut Vec<bool>) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let scores: Vec<Option<f64>> = self.with_conn(|conn| {
            redis::cmd("ZMSCORE")
                .arg(self.key(scope))
                .arg(items)
                .query(conn)
        })?;
        out.extend(
            scores
                .into_iter()
                .map(|score| score.is_some_and(|at| at >= since as f64)),
        );
        Ok(())
    }

    fn record(&self, scope: u64, seen: &[Seen]) -> Result<()> {
        if seen.is_empty() {
            return Ok(());
        }
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(self.key(scope)).arg("GT");
        for s in seen {
            cmd.arg(s.at_ms).arg(s.item);
        }
        self.with_conn(|conn| cmd.query::<()>(conn))
    }

    fn record_batch(&self, rows: &[(u64, Seen)]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        // One ZADD per scope, all in one pipelined round trip.
        let mut pipe = redis::pipe();
        for run in rows.chunk_by(|a, b| a.0 == b.0) {
            pipe.cmd("ZADD").arg(self.key(run[0].0)).arg("GT");
            for (_, s) in run {
                pipe.arg(s.at_ms).arg(s.item);
            }
            pipe.ignore();
        }
        self.with_conn(|conn| pipe.query::<()>(conn))
    }

    fn load(&self, scope: u64, since_ms: u64, out: &mut Vec<Seen>) -> Result<()> {
        let rows: Vec<(u64, u64)> = self
            .with_conn(|conn| conn.zrangebyscore_withscores(self.key(scope), since_ms, "+inf"))?;
        out.extend(rows.into_iter().map(|(item, at_ms)| Seen { item, at_ms }));
        Ok(())
    }

    fn expire(&self, before_ms: u64) -> Result<u64> {
        let mut deleted = 0;
        for chunk in self.scope_keys()?.chunks(512) {
            let mut pipe = redis::pipe();
            for key in chunk {
                pipe.cmd("ZREMRANGEBYSCORE")
                    .arg(key)
                    .arg("-inf")
                    .arg(format!("({before_ms}"));
            }
            let counts: Vec<u64> = self.with_conn(|conn| pipe.query(conn))?;
            deleted += counts.iter().sum::<u64>();
        }
        Ok(deleted)
    }
}
