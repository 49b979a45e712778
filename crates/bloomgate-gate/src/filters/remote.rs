//! Per-scope filters held by a bloomgate server (or Redis with the bloomgate module), for gates
//! that share them: one time-windowed filter (`WF.*`) per scope at `{prefix}{scope}`, so a
//! scope's retention is the same remotely as locally.
//!
//! The filter has G generations of W = ⌈R/(G−1)⌉ (the local rule): an item recorded at time t
//! answers "maybe" at every time before t + (G−1)·W ≥ t + R. The gate passes its own clock:
//! writes go as `WF.INSERT ... AT t`, probes as `WF.MEXISTSAT key now ...`, so a simulated clock
//! (the demo) and the server's clock never disagree. The server drops dead generations as writes
//! move past them.
//!
//! One round trip per request: a probe is one `WF.MEXISTSAT` on a pooled connection (on a
//! cluster, to the node holding the key's slot). Writes leave the request path: the gate's
//! recorder, right after each group commit to the store, sends every scope's `WF.INSERT` of the
//! batch in one pipeline (on a cluster, one pipeline per node, the client grouping the commands
//! by slot). Until then the items are in the gate's pending overlay, which every probe
//! consults after the server's answer, so the next request never shows them.
//!
//! On a scope's first use in this process its history of the last R (store rows plus the
//! overlay) is added, each run of rows `AT` its own time, so it lands in the generation it
//! belongs to (`WF.INSERT` is idempotent): a server that lost or never had the filter cannot
//! cause a false "unseen".
//!
//! Every [`CHECK_EVERY`] recorded batches of a scope its `WF.INFO` is read with the writes;
//! past `fpr_budget` the filter is rebuilt from the history with twice the capacity (`DEL` and
//! the history in one MULTI/EXEC, so no probe sees it half built), and the sizes read feed one
//! memory budget for all scopes: beyond it the least recently used scopes' filters are deleted
//! (their next use reloads them). Both run on the recorder thread.
//!
//! A failed write (timeout, server error) makes the scopes of the batch unknown: their next
//! use reloads them from the store. Every scope carries an epoch that changes whenever it is
//! dropped (eviction, failed write); a probe whose scope's epoch changed while its
//! `WF.MEXISTSAT` was in flight answers [`Probe::Unfiltered`] (the exact path), so a key deleted
//! under a probe never reads as "definitely not".
//!
//! The server may be a Redis Cluster running the module (`redis+cluster://H:P[,H:P...]`): the
//! cluster client keeps one connection per node in each pooled connection, routes each command
//! by its key's slot and follows MOVED/ASK during resharding. A rebuild's MULTI/EXEC goes whole
//! to the key's node, so it stays atomic there; evictions delete keys node by node.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use redis::cluster::{cluster_pipe, ClusterClient, ClusterClientBuilder, ClusterConnection};
use redis::{Connection, ConnectionLike, FromRedisValue, RedisResult, Value};

use crate::config::{LifecycleConfig, Timeouts};
use crate::filters::{FilterBackend, HistorySource, Probe};
use crate::metrics::{FilterGauges, Metrics, SATURATION_BOUNDS};
use crate::stores::redis_pool::{Connector, RedisPool};
use crate::{Result, Seen};

const SHARDS: usize = 64;
/// Recorded batches of a scope between two reads of its `WF.INFO` (size and estimated FPR).
pub const CHECK_EVERY: u64 = 64;
/// Most items one command carries when a history is loaded.
const ITEMS_PER_COMMAND: usize = 10_000;

struct RemoteScope {
    /// Capacity per generation given to this scope's filter.
    capacity: u64,
    /// The filter's size as last read (or estimated from its parameters).
    bytes: u64,
    /// Recorded batches since the last `WF.INFO`.
    since_check: u64,
    /// Use counter value at the last probe or record (for eviction order).
    last_used: u64,
    /// Changes whenever the scope is dropped and loaded again.
    epoch: u64,
    /// The latest request time the filter was loaded for or written at. A probe for an earlier
    /// time takes the exact path: the load read only rows seen within R of its own time, and
    /// writes at later times may have dropped generations an earlier request still needs
    /// (requests of one scope may run with clocks a little apart; per-scope clocks that never go
    /// backwards always pass).
    clock_ms: u64,
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
    epochs: AtomicU64,
    history: Arc<dyn HistorySource>,
    metrics: Arc<Metrics>,
}

impl RemoteFilters {
    /// `url` is `resp://HOST:PORT` (or `redis://...`), or `redis+cluster://HOST:PORT[,...]`
    /// (or `resp+cluster://...`) for a cluster's seed nodes; keys start with `prefix`. Every
    /// connection has the given connect and read/write timeouts.
    pub fn connect(
        url: &str,
        prefix: &str,
        config: LifecycleConfig,
        timeouts: Timeouts,
        history: Arc<dyn HistorySource>,
        metrics: Arc<Metrics>,
    ) -> Result<Self> {
        config.validate()?;
        let cluster = ["redis+cluster://", "resp+cluster://"]
            .iter()
            .find_map(|scheme| url.strip_prefix(scheme));
        let server = match (cluster, url.strip_prefix("resp://")) {
            (Some(nodes), _) => Server::Cluster(
                ClusterClientBuilder::new(
                    nodes
                        .split(',')
                        .filter(|node| !node.is_empty())
                        .map(|node| format!("redis://{node}")),
                )
                .connection_timeout(timeouts.connect)
                .response_timeout(timeouts.io)
                .build()?,
            ),
            (None, Some(rest)) => {
                Server::Single(redis::Client::open(format!("redis://{rest}"))?, timeouts)
            }
            (None, None) => Server::Single(redis::Client::open(url)?, timeouts),
        };
        Ok(RemoteFilters {
            pool: RedisPool::with_client(server)?,
            prefix: prefix.to_owned(),
            config,
            known: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            bytes: AtomicU64::new(0),
            uses: AtomicU64::new(0),
            epochs: AtomicU64::new(0),
            history,
            metrics,
        })
    }

    fn with_conn<T>(&self, f: impl FnOnce(&mut ServerConnection) -> RedisResult<T>) -> Result<T> {
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
    fn insert_cmd(&self, scope: u64, capacity: u64, at_ms: u64, items: &[u64]) -> redis::Cmd {
        let mut cmd = redis::cmd("WF.INSERT");
        cmd.arg(self.key(scope))
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
        cmd
    }

    fn resize(&self, known: &mut RemoteScope, bytes: u64) {
        self.bytes.fetch_add(bytes, Relaxed);
        self.bytes.fetch_sub(known.bytes, Relaxed);
        known.bytes = bytes;
    }

    /// Adds the scope's history of the last R to its filter (replacing the filter, atomically,
    /// when `replace`); returns the filter's size estimated from its parameters.
    fn load_history(&self, scope: u64, capacity: u64, now_ms: u64, replace: bool) -> Result<u64> {
        let history: Vec<Seen> = self
            .history
            .load_history(scope, now_ms.saturating_sub(self.config.retention_ms))?;
        self.send_history(scope, capacity, &history, replace)
    }

    /// Writes `history` (oldest first) to the scope's filter, each run of a window `AT` its own
    /// time, in one pipeline (a MULTI/EXEC after a `DEL` when `replace`).
    fn send_history(
        &self,
        scope: u64,
        capacity: u64,
        history: &[Seen],
        replace: bool,
    ) -> Result<u64> {
        let window = self.config.generation_window_ms();
        let mut pipe = redis::pipe();
        if replace {
            pipe.atomic().cmd("DEL").arg(self.key(scope));
        }
        for run in history.chunk_by(|a, b| a.at_ms / window == b.at_ms / window) {
            for part in run.chunks(ITEMS_PER_COMMAND) {
                let items: Vec<u64> = part.iter().map(|s| s.item).collect();
                pipe.add_command(self.insert_cmd(scope, capacity, part[0].at_ms, &items));
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

    /// On a scope's first use (in this process, or since it was dropped), adds its history of
    /// the last R to the server's filter. Returns the scope's epoch. The shard stays locked
    /// while the history loads, so the recorder cannot skip a write for a scope becoming known.
    fn ensure_loaded(&self, scope: u64, now_ms: u64) -> Result<(u64, u64)> {
        let mut shard = self.shard(scope);
        if let Some(known) = shard.get_mut(&scope) {
            known.last_used = self.uses.fetch_add(1, Relaxed);
            return Ok((known.epoch, known.clock_ms));
        }
        let history = self
            .history
            .load_history(scope, now_ms.saturating_sub(self.config.retention_ms))?;
        let per_window = (history.len() as u64).div_ceil(self.config.generations as u64 - 1) as f64;
        let capacity = ((per_window * self.config.headroom).ceil() as u64)
            .max(self.config.min_items_per_generation);
        let bytes = self.send_history(scope, capacity, &history, false)?;
        self.bytes.fetch_add(bytes, Relaxed);
        let epoch = self.epochs.fetch_add(1, Relaxed) + 1;
        shard.insert(
            scope,
            RemoteScope {
                capacity,
                bytes,
                since_check: 0,
                last_used: self.uses.fetch_add(1, Relaxed),
                epoch,
                clock_ms: now_ms,
            },
        );
        Ok((epoch, now_ms))
    }

    /// Drops `scopes` here (their next use reloads them from the store) and, with `delete`,
    /// deletes their keys, shard by shard with the shard locked (so no request reloads a scope
    /// between the two). A key not deleted (not asked, or the delete failed) stays stale on the
    /// server: a reload only adds to it, so it never misses an item. Returns how many were known.
    fn drop_scopes(&self, scopes: &[u64], mut delete: bool) -> u64 {
        let mut by_shard: Vec<Vec<u64>> = vec![Vec::new(); SHARDS];
        for &scope in scopes {
            by_shard[scope as usize % SHARDS].push(scope);
        }
        let mut dropped = 0;
        for (index, victims) in by_shard.into_iter().enumerate() {
            if victims.is_empty() {
                continue;
            }
            let mut shard = self.known[index].lock().unwrap_or_else(|e| e.into_inner());
            let mut keys = Vec::new();
            for scope in victims {
                if let Some(gone) = shard.remove(&scope) {
                    self.bytes.fetch_sub(gone.bytes, Relaxed);
                    keys.push(self.key(scope));
                }
            }
            dropped += keys.len() as u64;
            if delete && self.with_conn(|conn| conn.delete(&keys)).is_err() {
                self.metrics.filter_errors.fetch_add(1, Relaxed);
                delete = false; // the server is failing: do not wait on it shard after shard
            }
        }
        dropped
    }

    /// Past the memory budget, deletes the least recently used scopes' filters until the total
    /// is back under 90% of it: scopes not in `keep` (the batch just written) first, then, if
    /// that is not enough, those too — a slow recorder's batch can touch more scopes than the
    /// budget holds, and the budget must hold anyway (a dropped scope reloads its history from
    /// the store, which has every row the recorder wrote, so nothing is missed).
    fn enforce_memory_budget(&self, keep: &[u64]) {
        let budget = self.config.memory_budget_bytes;
        let total = self.bytes.load(Relaxed);
        if total <= budget {
            return;
        }
        let mut by_age: Vec<(u64, u64, u64)> = Vec::new(); // (last used, scope, bytes)
        for shard in &self.known {
            let shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            by_age.extend(
                shard
                    .iter()
                    .map(|(&scope, s)| (s.last_used, scope, s.bytes)),
            );
        }
        by_age.sort_unstable();
        let keep: std::collections::HashSet<u64> = keep.iter().copied().collect();
        let (batch, others): (Vec<_>, Vec<_>) = by_age
            .into_iter()
            .partition(|(_, scope, _)| keep.contains(scope));
        let mut excess = total.saturating_sub(budget / 10 * 9);
        let mut victims = Vec::new();
        for (_, scope, bytes) in others.into_iter().chain(batch) {
            if excess == 0 {
                break;
            }
            victims.push(scope);
            excess = excess.saturating_sub(bytes);
        }
        let evicted = self.drop_scopes(&victims, true);
        self.metrics.evictions.fetch_add(evicted, Relaxed);
    }

    /// Rebuilds a scope's filter at twice its capacity (DEL + history in one MULTI/EXEC).
    fn rebuild(&self, scope: u64, now_ms: u64) -> Result<()> {
        let mut shard = self.shard(scope);
        let Some(known) = shard.get_mut(&scope) else {
            return Ok(());
        };
        let capacity = known.capacity.saturating_mul(2);
        let bytes = self.load_history(scope, capacity, now_ms, true)?;
        known.capacity = capacity;
        self.resize(known, bytes);
        self.metrics.rebuilds.fetch_add(1, Relaxed);
        Ok(())
    }
}

impl FilterBackend for RemoteFilters {
    /// One `WF.MEXISTSAT` round trip (after the scope's first-use load), then the overlay.
    fn probe(&self, scope: u64, items: &[u64], now_ms: u64, out: &mut Vec<bool>) -> Result<Probe> {
        let (epoch, clock_ms) = self.ensure_loaded(scope, now_ms)?;
        if now_ms < clock_ms {
            out.resize(out.len() + items.len(), true);
            return Ok(Probe::Unfiltered);
        }
        if items.is_empty() {
            return Ok(Probe::Filtered);
        }
        // The overlay first, the server second: an item leaves the overlay only after the
        // recorder's write of it reached the server, so it is found in one or the other. (The
        // other order misses an item whose write lands between the two reads.)
        let since = now_ms.saturating_sub(self.config.retention_ms);
        let mut answers = vec![false; items.len()];
        self.history.overlay_seen(scope, items, since, &mut answers);
        let server: Vec<bool> = self.with_conn(|conn| {
            conn.query(
                redis::cmd("WF.MEXISTSAT")
                    .arg(self.key(scope))
                    .arg(now_ms)
                    .arg(items),
            )
        })?;
        if server.len() != items.len() {
            return Err(crate::Error::InvalidConfig(format!(
                "WF.MEXISTSAT answered {} values for {} items",
                server.len(),
                items.len()
            )));
        }
        for (answer, on_server) in answers.iter_mut().zip(server) {
            *answer |= on_server;
        }
        // Re-read after the server answered: a record at a later time (its clock is raised
        // before its write is queued) may have dropped generations this probe still needs.
        let unchanged = self
            .shard(scope)
            .get(&scope)
            .is_some_and(|known| known.epoch == epoch && known.clock_ms <= now_ms);
        if !unchanged {
            // Dropped (evicted, failed write) while the probe was in flight: the server's
            // answer may come from a deleted key.
            out.resize(out.len() + items.len(), true);
            return Ok(Probe::Unfiltered);
        }
        out.extend(answers);
        Ok(Probe::Filtered)
    }

    /// Nothing to send now: the recorder writes the items right after their store commit, and
    /// until then probes find them in the overlay.
    fn record(&self, scope: u64, _items: &[u64], now_ms: u64) -> Result<()> {
        if let Some(known) = self.shard(scope).get_mut(&scope) {
            known.last_used = self.uses.fetch_add(1, Relaxed);
            known.clock_ms = known.clock_ms.max(now_ms);
        }
        Ok(())
    }

    /// The batch's writes, one `WF.INSERT` per (scope, time) run, pipelined (per node on a
    /// cluster), with a `WF.INFO` for each scope due a check; then rebuilds and evictions. Scopes
    /// not known here are skipped: their next use loads them from the store, which has the rows.
    /// A failed write drops the batch's scopes instead of failing the recorder.
    fn commit(&self, rows: &[(u64, Seen)]) -> Result<()> {
        let mut commands = Vec::new();
        let mut checks: Vec<(usize, u64, u64)> = Vec::new(); // (reply index, scope, time)
        let mut scopes = Vec::new();
        for run in rows.chunk_by(|a, b| a.0 == b.0) {
            let scope = run[0].0;
            let mut shard = self.shard(scope);
            let Some(known) = shard.get_mut(&scope) else {
                continue;
            };
            scopes.push(scope);
            let mut by_time: Vec<Seen> = run.iter().map(|&(_, s)| s).collect();
            by_time.sort_unstable_by_key(|s| s.at_ms);
            let latest = by_time.last().map_or(0, |s| s.at_ms);
            known.clock_ms = known.clock_ms.max(latest);
            for same in by_time.chunk_by(|a, b| a.at_ms == b.at_ms) {
                let items: Vec<u64> = same.iter().map(|s| s.item).collect();
                commands.push(self.insert_cmd(scope, known.capacity, same[0].at_ms, &items));
            }
            known.since_check += 1;
            if known.since_check >= CHECK_EVERY {
                known.since_check = 0;
                checks.push((commands.len(), scope, latest));
                let mut info = redis::cmd("WF.INFO");
                info.arg(self.key(scope));
                commands.push(info);
            }
        }
        if commands.is_empty() {
            return Ok(());
        }
        let replies = match self.with_conn(|conn| conn.batch(&commands)) {
            Ok(replies) => replies,
            Err(_) => {
                // The server may hold some of the writes or none: drop the scopes (their next
                // use reloads the history, which has these rows).
                self.metrics.filter_errors.fetch_add(1, Relaxed);
                self.drop_scopes(&scopes, false);
                return Ok(());
            }
        };
        for (at, scope, now_ms) in checks {
            let (size, fpr) = replies.get(at).map_or((None, None), parse_info);
            if let Some(size) = size {
                if let Some(known) = self.shard(scope).get_mut(&scope) {
                    self.resize(known, size);
                }
            }
            let saturated = fpr.is_some_and(|fpr| fpr > self.config.fpr_budget);
            if saturated && self.rebuild(scope, now_ms).is_err() {
                self.metrics.filter_errors.fetch_add(1, Relaxed);
                self.drop_scopes(&[scope], false);
            }
        }
        self.enforce_memory_budget(&scopes);
        Ok(())
    }

    fn gauges(&self) -> FilterGauges {
        FilterGauges {
            resident_filters: 0,
            memory_bytes: self.bytes.load(Relaxed),
            saturation: [0; SATURATION_BOUNDS.len() + 1],
        }
    }
}

/// One server (with the gate's timeouts), or a Redis Cluster whose client routes each command
/// to its key's node (its builder carries the timeouts).
enum Server {
    Single(redis::Client, Timeouts),
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
            Server::Single(client, timeouts) => {
                let conn = client.get_connection_with_timeout(timeouts.connect)?;
                conn.set_read_timeout(Some(timeouts.io))?;
                conn.set_write_timeout(Some(timeouts.io))?;
                ServerConnection::Single(conn)
            }
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

    /// Runs independent commands in one pipelined round trip (on a cluster, one pipeline per
    /// node, the client grouping them by slot); replies in command order.
    fn batch(&mut self, commands: &[redis::Cmd]) -> RedisResult<Vec<Value>> {
        match self {
            ServerConnection::Single(conn) => {
                let mut pipe = redis::pipe();
                for cmd in commands {
                    pipe.add_command(cmd.clone());
                }
                pipe.query(conn)
            }
            ServerConnection::Cluster(conn) => {
                let mut pipe = cluster_pipe();
                for cmd in commands {
                    pipe.add_command(cmd.clone());
                }
                pipe.query(conn)
            }
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
