//! Per-scope filters held by a bloomgate server (or Redis with the bloomgate module), for gates
//! that share them: one time-windowed filter (`WF.*`) per scope at `{prefix}{scope}`, so a
//! scope's retention is the same remotely as locally.
//!
//! The filter has G generations of W = ⌈R/(G−1)⌉ (the local rule): an item recorded at time t
//! answers "maybe" at every time before t + (G−1)·W ≥ t + R. The gate passes its own clock:
//! writes go as `WF.INSERT ... AT now`, probes as `WF.MEXISTSAT key now ...` — one round trip
//! each — so a simulated clock (the demo) and the server's clock never disagree. The server drops
//! dead generations as writes move past them.
//!
//! On a scope's first use in this process its history of the last R (store rows plus the
//! gate's uncommitted overlay) is added, each run of rows `AT` its own time, so it lands in the
//! generation it belongs to (`WF.INSERT` is idempotent): a server that lost or never had the
//! filter cannot cause a false "unseen".
//!
//! As for local filters: every [`CHECK_EVERY`] records a scope's `WF.INFO` is read; past
//! `fpr_budget` the filter is rebuilt from the history with twice the capacity — `DEL` and the
//! history in one MULTI/EXEC, under the scope's shard lock, so no probe sees it half built and no
//! record is lost — and the sizes read feed one memory budget for all scopes: beyond it the
//! least recently used scopes' filters are deleted (their next use reloads them).
//!
//! The server may be a Redis Cluster running the module (`redis+cluster://H:P[,H:P...]`): the
//! cluster client routes each command, and each pipeline (all of whose commands touch one key),
//! to the node holding the key's slot, so scopes spread over the masters. A rebuild's MULTI/EXEC
//! goes whole to that node, so it stays atomic there; evictions delete keys node by node.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

use redis::cluster::{cluster_pipe, ClusterClient, ClusterConnection};
use redis::{Connection, ConnectionLike, FromRedisValue, RedisResult, Value};

use crate::lifecycle::{HistoryLoader, LifecycleConfig};
use crate::metrics::Metrics;
use crate::redis_pool::{Connector, RedisPool};
use crate::{Result, Seen};

const SHARDS: usize = 64;
/// Records between two reads of a scope's `WF.INFO` (size and estimated FPR).
pub const CHECK_EVERY: u64 = 64;
/// Most items one command carries when a history is loaded.
const ITEMS_PER_COMMAND: usize = 10_000;

struct RemoteScope {
    /// Capacity per generation given to this scope's filter.
    capacity: u64,
    /// The filter's size as last read (or estimated from its parameters).
    bytes: u64,
    /// Records since the last `WF.INFO`.
    since_check: u64,
    /// Use counter value at the last probe or record (for eviction order).
    last_used: u64,
}

/// Scope filters on a RESP server speaking the WF.* commands.
pub(crate) struct RemoteFilters {
    pool: RedisPool<Server>,
    prefix: String,
    config: LifecycleConfig,
    known: Vec<Mutex<HashMap<u64, RemoteScope>>>,
    /// Σ `bytes` over known scopes.
    bytes: AtomicU64,
    uses: AtomicU64,
}

impl RemoteFilters {
    /// `url` is `resp://HOST:PORT` (or `redis://...`), or `redis+cluster://HOST:PORT[,...]`
    /// (or `resp+cluster://...`) for a cluster's seed nodes; keys start with `prefix`.
    pub fn connect(url: &str, prefix: &str, config: LifecycleConfig) -> Result<Self> {
        config.validate()?;
        let cluster = ["redis+cluster://", "resp+cluster://"]
            .iter()
            .find_map(|scheme| url.strip_prefix(scheme));
        let server = match (cluster, url.strip_prefix("resp://")) {
            (Some(nodes), _) => Server::Cluster(ClusterClient::new(
                nodes
                    .split(',')
                    .filter(|node| !node.is_empty())
                    .map(|node| format!("redis://{node}")),
            )?),
            (None, Some(rest)) => Server::Single(redis::Client::open(format!("redis://{rest}"))?),
            (None, None) => Server::Single(redis::Client::open(url)?),
        };
        Ok(RemoteFilters {
            pool: RedisPool::with_client(server)?,
            prefix: prefix.to_owned(),
            config,
            known: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            bytes: AtomicU64::new(0),
            uses: AtomicU64::new(0),
        })
    }

    fn with_conn<T>(
        &self,
        f: impl FnOnce(&mut ServerConnection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.pool.with_conn(f)
    }

    fn key(&self, scope: u64) -> String {
        format!("{}{}", self.prefix, scope)
    }

    fn shard(&self, scope: u64) -> MutexGuard<'_, HashMap<u64, RemoteScope>> {
        self.known[scope as usize % SHARDS]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// `WF.INSERT key <creation parameters> AT at ITEMS items...`.
    fn insert_cmd(
        &self,
        pipe: &mut redis::Pipeline,
        scope: u64,
        capacity: u64,
        at_ms: u64,
        items: &[u64],
    ) {
        pipe.cmd("WF.INSERT")
            .arg(self.key(scope))
            .arg("ERROR")
            .arg(self.config.fpr)
            .arg("CAPACITY")
            .arg(capacity.min(1 << 30))
            .arg("WINDOW")
            .arg(self.config.generation_window_ms())
            .arg("GENERATIONS")
            .arg(self.config.generations)
            .arg("AT")
            .arg(at_ms)
            .arg("ITEMS")
            .arg(items);
    }

    /// Appends to `out`, per item, whether the scope's filter says "maybe" at `now_ms`.
    pub fn probe(
        &self,
        scope: u64,
        items: &[u64],
        now_ms: u64,
        out: &mut Vec<bool>,
        load: &HistoryLoader<'_>,
    ) -> Result<()> {
        self.ensure_loaded(scope, now_ms, load)?;
        if items.is_empty() {
            return Ok(());
        }
        let answers: Vec<bool> = self.with_conn(|conn| {
            conn.query(
                redis::cmd("WF.MEXISTSAT")
                    .arg(self.key(scope))
                    .arg(now_ms)
                    .arg(items),
            )
        })?;
        out.extend(answers);
        Ok(())
    }

    /// Adds items the scope was just shown (already in the gate's pending overlay); every
    /// [`CHECK_EVERY`] records, reads the filter's size and FPR to rebuild or evict.
    pub fn record(
        &self,
        scope: u64,
        items: &[u64],
        now_ms: u64,
        load: &HistoryLoader<'_>,
        metrics: &Metrics,
    ) -> Result<()> {
        self.ensure_loaded(scope, now_ms, load)?;
        let mut shard = self.shard(scope);
        let Some(known) = shard.get_mut(&scope) else {
            // Evicted between the two locks: the next use reloads it with these items (they are
            // in the overlay or the store by now).
            return Ok(());
        };
        known.last_used = self.uses.fetch_add(1, Relaxed);
        known.since_check += 1;
        let check = known.since_check >= CHECK_EVERY;
        let capacity = known.capacity;
        let mut pipe = redis::pipe();
        self.insert_cmd(&mut pipe, scope, capacity, now_ms, items);
        if check {
            pipe.cmd("WF.INFO").arg(self.key(scope));
        }
        let replies = self.with_conn(|conn| conn.pipeline(&pipe))?;
        if !check {
            return Ok(());
        }
        known.since_check = 0;
        // The replies of the WF.INSERT, then of the WF.INFO.
        let (size, fpr) = replies.get(1).map_or((None, None), parse_info);
        if let Some(size) = size {
            self.resize(known, size);
        }
        if fpr.is_some_and(|fpr| fpr > self.config.fpr_budget) {
            let capacity = capacity.saturating_mul(2);
            let bytes = self.load_history(scope, capacity, now_ms, load, true)?;
            known.capacity = capacity;
            self.resize(known, bytes);
            metrics.rebuilds.fetch_add(1, Relaxed);
        }
        drop(shard);
        self.enforce_memory_budget(scope, metrics)
    }

    fn resize(&self, known: &mut RemoteScope, bytes: u64) {
        self.bytes.fetch_add(bytes, Relaxed);
        self.bytes.fetch_sub(known.bytes, Relaxed);
        known.bytes = bytes;
    }

    /// Adds the scope's history of the last R to its filter (replacing the filter, atomically,
    /// when `replace`); returns the filter's size estimated from its parameters.
    fn load_history(
        &self,
        scope: u64,
        capacity: u64,
        now_ms: u64,
        load: &HistoryLoader<'_>,
        replace: bool,
    ) -> Result<u64> {
        let window = self.config.generation_window_ms();
        let history: Vec<Seen> = load(scope, now_ms.saturating_sub(self.config.retention_ms))?;
        let mut pipe = redis::pipe();
        if replace {
            pipe.atomic().cmd("DEL").arg(self.key(scope));
        }
        for run in history.chunk_by(|a, b| a.at_ms / window == b.at_ms / window) {
            for part in run.chunks(ITEMS_PER_COMMAND) {
                let items: Vec<u64> = part.iter().map(|s| s.item).collect();
                self.insert_cmd(&mut pipe, scope, capacity, part[0].at_ms, &items);
            }
        }
        if replace || !history.is_empty() {
            self.with_conn(|conn| conn.pipeline(&pipe))?;
        }
        Ok(self.estimated_bytes(capacity))
    }

    /// G generations of `capacity` items at the per-generation rate, as the server sizes them.
    fn estimated_bytes(&self, capacity: u64) -> u64 {
        let g = self.config.generations as f64;
        let per_generation = -((-self.config.fpr).ln_1p() / g).exp_m1();
        let bits_per_item = -(per_generation / 2.0).ln() / std::f64::consts::LN_2.powi(2);
        (g * capacity as f64 * bits_per_item / 8.0) as u64
    }

    /// On a scope's first use in this process, adds its history of the last R.
    fn ensure_loaded(&self, scope: u64, now_ms: u64, load: &HistoryLoader<'_>) -> Result<()> {
        let mut shard = self.shard(scope);
        if let Some(known) = shard.get_mut(&scope) {
            known.last_used = self.uses.fetch_add(1, Relaxed);
            return Ok(());
        }
        let history_len = load(scope, now_ms.saturating_sub(self.config.retention_ms))?.len();
        let per_window = (history_len as u64).div_ceil(self.config.generations as u64 - 1) as f64;
        let capacity = ((per_window * self.config.headroom).ceil() as u64)
            .max(self.config.min_items_per_generation);
        let bytes = self.load_history(scope, capacity, now_ms, load, false)?;
        self.bytes.fetch_add(bytes, Relaxed);
        shard.insert(
            scope,
            RemoteScope {
                capacity,
                bytes,
                since_check: 0,
                last_used: self.uses.fetch_add(1, Relaxed),
            },
        );
        Ok(())
    }

    /// Past the memory budget, deletes the least recently used scopes' filters (never `keep`)
    /// until the total is back under 90% of it.
    fn enforce_memory_budget(&self, keep: u64, metrics: &Metrics) -> Result<()> {
        let budget = self.config.memory_budget_bytes;
        if self.bytes.load(Relaxed) <= budget {
            return Ok(());
        }
        let mut by_age: Vec<(u64, u64)> = Vec::new();
        for shard in &self.known {
            let shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            by_age.extend(shard.iter().map(|(&scope, s)| (s.last_used, scope)));
        }
        by_age.sort_unstable();
        let target = budget / 10 * 9;
        let mut evicted_keys = Vec::new();
        for (_, scope) in by_age {
            if self.bytes.load(Relaxed) <= target {
                break;
            }
            if scope == keep {
                continue;
            }
            if let Some(evicted) = self.shard(scope).remove(&scope) {
                self.bytes.fetch_sub(evicted.bytes, Relaxed);
                evicted_keys.push(self.key(scope));
                metrics.evictions.fetch_add(1, Relaxed);
            }
        }
        self.with_conn(|conn| conn.delete(&evicted_keys))
    }

    /// Σ sizes of the scopes this process knows (as last read from the server).
    pub fn memory_bytes(&self) -> u64 {
        self.bytes.load(Relaxed)
    }
}

/// One server, or a Redis Cluster whose client routes each command to its key's node.
enum Server {
    Single(redis::Client),
    Cluster(ClusterClient),
}

enum ServerConnection {
    Single(Connection),
    Cluster(Box<ClusterConnection>),
}

impl Connector for Server {
    type Conn = ServerConnection;
    fn open(&self) -> RedisResult<ServerConnection> {
        Ok(match self {
            Server::Single(client) => ServerConnection::Single(client.get_connection()?),
            Server::Cluster(client) => {
                ServerConnection::Cluster(Box::new(client.get_connection()?))
            }
        })
    }
}

impl ServerConnection {
    /// Runs one command (on a cluster, at its key's node).
    fn query<T: FromRedisValue>(&mut self, cmd: &redis::Cmd) -> RedisResult<T> {
        match self {
            ServerConnection::Single(conn) => cmd.query(conn),
            ServerConnection::Cluster(conn) => cmd.query(conn),
        }
    }

    /// Runs `pipe`, all of whose commands touch one key, in one round trip (inside MULTI/EXEC
    /// when it is atomic); returns every command's reply.
    fn pipeline(&mut self, pipe: &redis::Pipeline) -> RedisResult<Vec<Value>> {
        let conn = match self {
            ServerConnection::Single(conn) => return pipe.query(conn),
            ServerConnection::Cluster(conn) => conn,
        };
        // The cluster connection routes a packed pipeline by its first command's key (skipping
        // a leading MULTI) and sends all of it, MULTI and EXEC included, to that key's node: the
        // transaction runs there as on a single server. (`redis::Pipeline::query` refuses a
        // cluster connection; `cluster_pipe` has no transactions.)
        let commands = pipe.cmd_iter().count();
        let packed = pipe.get_packed_pipeline();
        if !pipe.is_transaction() {
            return conn.req_packed_commands(&packed, 0, commands);
        }
        match conn.req_packed_commands(&packed, commands + 1, 1)?.pop() {
            Some(Value::Array(replies)) => Ok(replies),
            other => Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "EXEC did not answer an array",
                format!("{other:?}"),
            ))),
        }
    }

    /// Deletes `keys` in one pipeline, on a cluster one per node holding some of them.
    fn delete(&mut self, keys: &[String]) -> RedisResult<()> {
        if keys.is_empty() {
            return Ok(());
        }
        match self {
            ServerConnection::Single(conn) => {
                let mut pipe = redis::pipe();
                keys.iter().for_each(|key| {
                    pipe.cmd("DEL").arg(key).ignore();
                });
                pipe.query(conn)
            }
            ServerConnection::Cluster(conn) => {
                let mut pipe = cluster_pipe();
                keys.iter().for_each(|key| {
                    pipe.cmd("DEL").arg(key).ignore();
                });
                pipe.query(conn)
            }
        }
    }
}

/// `Size` and `Estimated error rate` from a `WF.INFO` reply (a map, or a flat RESP2 array).
fn parse_info(info: &Value) -> (Option<u64>, Option<f64>) {
    let pairs: Vec<(&Value, &Value)> = match info {
        Value::Map(pairs) => pairs.iter().map(|(k, v)| (k, v)).collect(),
        Value::Array(flat) => flat
            .chunks(2)
            .filter_map(|p| Some((p.first()?, p.get(1)?)))
            .collect(),
        _ => return (None, None),
    };
    let text = |v: &Value| match v {
        Value::SimpleString(s) => Some(s.clone()),
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        _ => None,
    };
    let (mut size, mut fpr) = (None, None);
    for (k, v) in pairs {
        match text(k).as_deref() {
            Some("Size") => {
                if let Value::Int(n) = v {
                    size = u64::try_from(*n).ok();
                }
            }
            Some("Estimated error rate") => fpr = text(v).and_then(|t| t.parse().ok()),
            _ => {}
        }
    }
    (size, fpr)
}
