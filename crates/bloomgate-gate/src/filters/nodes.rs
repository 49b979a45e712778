//! Where the remote filters' commands go: one RESP server, or the masters of a Redis Cluster.
//!
//! For a cluster this is a small router of its own rather than the `redis` crate's cluster
//! client, because the gate needs three things that client keeps to itself: the slot map (a
//! slot whose master changed may have lost writes its old master acknowledged, so the gate
//! verifies its scopes against the store), a pipeline that ends with `WAIT` on the connection
//! that made the writes, and failures that stay with their node (no retry loop sleeping on a
//! node that is down: its scopes answer errors at once, the others carry on).
//!
//! The map comes from `CLUSTER SLOTS`: read at start, every [`WATCH_EVERY`] by a watcher
//! thread, and right away when a command failed or was redirected (`MOVED`: the command is
//! routed again once the map says where its slot went). Each map is compared with the one
//! before: every slot whose master is another node now — another node id, or the same node
//! restarted (another `run_id`: it may have come back without its last writes) — is marked with
//! the new map's generation ([`Nodes::changed_at`]). At start, a master that was promoted from
//! replica since it started (`second_repl_offset` in its `INFO replication`) has its slots
//! marked too. One server is a single slot whose master is known by its `run_id` (a server
//! without one, like `bloomgate serve`, is never marked).
//!
//! Connections come from a small pool per node ([`RedisPool`]); with `scripts`, each new
//! connection first loads them (`SCRIPT LOAD`), so `EVALSHA` finds them on a node that
//! restarted or was promoted since. A node that refused a connection is not tried again for
//! [`DOWN_FOR`]: requests for its slots fail at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redis::{Cmd, ConnectionLike, Value};

use crate::config::Timeouts;
use crate::stores::redis_pool::{Connector, RedisPool};
use crate::url::RemoteSpec;
use crate::{Error, Result};

/// Slots of a Redis Cluster.
const SLOTS: usize = 16_384;
/// How often the watcher reads the cluster's map (or the server's `run_id`).
pub const WATCH_EVERY: Duration = Duration::from_secs(1);
/// How long a node that refused a connection is not tried again.
pub const DOWN_FOR: Duration = Duration::from_millis(500);
/// The shortest time between two reads of the map.
const REFRESH_GAP: Duration = Duration::from_millis(100);

/// A node's connections: one server with the gate's timeouts, loading the scripts first.
struct NodeClient {
    client: redis::Client,
    timeouts: Timeouts,
    scripts: Arc<Vec<String>>,
}

impl Connector for NodeClient {
    type Conn = redis::Connection;
    fn open(&self) -> redis::RedisResult<redis::Connection> {
        let mut conn = self
            .client
            .get_connection_with_timeout(self.timeouts.connect)?;
        conn.set_read_timeout(Some(self.timeouts.io))?;
        conn.set_write_timeout(Some(self.timeouts.io))?;
        for body in self.scripts.iter() {
            redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(body)
                .query::<String>(&mut conn)?;
        }
        Ok(conn)
    }
}

/// A master as a map read shows it: its id, `HOST:PORT` and slot ranges.
type MasterSlots = (String, String, Vec<(usize, usize)>);

/// The masters and which slots each one holds, as read at one time.
struct View {
    /// Counts the maps read that differed from the one before (1 = the first).
    generation: u64,
    /// Per slot (one for a single server): the index of its master in `masters`, or
    /// `u16::MAX` while no master holds it.
    owner: Vec<u16>,
    /// (node id, `HOST:PORT`) of each master.
    masters: Vec<(String, String)>,
    /// Per slot: the generation whose map first had its current master, 0 if that master
    /// held it (and was not promoted) when the gate started.
    changed: Vec<u64>,
}

/// One filter server or a cluster's masters, with connection pools per node.
pub(crate) struct Nodes {
    spec: RemoteSpec,
    timeouts: Timeouts,
    scripts: Arc<Vec<String>>,
    view: RwLock<Arc<View>>,
    pools: Mutex<HashMap<String, Arc<RedisPool<NodeClient>>>>,
    /// Nodes that refused a connection, and until when they are not tried.
    down: Mutex<HashMap<String, Instant>>,
    /// When the map was last read (or tried); serialises the reads.
    refreshed: Mutex<Instant>,
    /// Asks the watcher to read the map now; `stop` ends it.
    nudge: (Mutex<bool>, Condvar),
    stop: AtomicBool,
}

/// The reply to a failed command that says where its key is: `MOVED` or `ASK`.
enum Redirect {
    Moved,
    Ask(String),
}

impl Nodes {
    /// Reads the server's identity or the cluster's map (failing if no node answers), then
    /// starts the watcher thread. Every connection loads `scripts` first.
    pub fn connect(
        spec: RemoteSpec,
        timeouts: Timeouts,
        scripts: Vec<String>,
    ) -> Result<(Arc<Self>, JoinHandle<()>)> {
        let nodes = Arc::new(Nodes {
            spec,
            timeouts,
            scripts: Arc::new(scripts),
            view: RwLock::new(Arc::new(View {
                generation: 0,
                owner: Vec::new(),
                masters: Vec::new(),
                changed: Vec::new(),
            })),
            pools: Mutex::new(HashMap::new()),
            down: Mutex::new(HashMap::new()),
            refreshed: Mutex::new(Instant::now()),
            nudge: (Mutex::new(false), Condvar::new()),
            stop: AtomicBool::new(false),
        });
        nodes.refresh(true)?;
        let watcher = nodes.clone();
        let thread = std::thread::Builder::new()
            .name("bloomgate-filter-nodes".into())
            .spawn(move || watcher.watch())
            .map_err(|e| Error::FilterServer(format!("starting the watcher thread: {e}")))?;
        Ok((nodes, thread))
    }

    /// Ends the watcher thread (soon: it wakes up for it).
    pub fn stop(&self) {
        self.stop.store(true, Relaxed);
        self.wake();
    }

    fn wake(&self) {
        *self.nudge.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.nudge.1.notify_all();
    }

    fn watch(&self) {
        while !self.stop.load(Relaxed) {
            let mut nudged = self.nudge.0.lock().unwrap_or_else(|e| e.into_inner());
            if !*nudged {
                nudged = self
                    .nudge
                    .1
                    .wait_timeout(nudged, WATCH_EVERY)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            *nudged = false;
            drop(nudged);
            if !self.stop.load(Relaxed) {
                let _ = self.refresh(false);
            }
        }
    }

    /// The slot of `key` (0 on one server).
    pub fn slot(&self, key: &[u8]) -> usize {
        if self.spec.cluster {
            usize::from(key_slot(key))
        } else {
            0
        }
    }

    /// The current map's generation and the generation at which `slot`'s master last changed
    /// (0: not since the gate started).
    pub fn changed_at(&self, slot: usize) -> (u64, u64) {
        let view = self.current();
        (
            view.generation,
            view.changed.get(slot).copied().unwrap_or(0),
        )
    }

    fn current(&self) -> Arc<View> {
        self.view.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// `HOST:PORT` of the master holding `slot`.
    fn master_of(&self, slot: usize) -> Result<String> {
        let view = self.current();
        match view.owner.get(slot) {
            Some(&at) if usize::from(at) < view.masters.len() => {
                Ok(view.masters[usize::from(at)].1.clone())
            }
            _ => {
                self.wake();
                Err(Error::FilterServer(format!("no master holds slot {slot}")))
            }
        }
    }

    fn pool(&self, addr: &str) -> Result<Arc<RedisPool<NodeClient>>> {
        if let Some(pool) = self
            .pools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(addr)
        {
            return Ok(pool.clone());
        }
        if let Some(until) = self
            .down
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(addr)
        {
            if Instant::now() < *until {
                return Err(Error::FilterServer(format!(
                    "{addr} refused a connection less than {} ms ago",
                    DOWN_FOR.as_millis()
                )));
            }
        }
        let opened = redis::Client::open(self.spec.node_url(addr))
            .map_err(Error::from)
            .and_then(|client| {
                RedisPool::with_client(NodeClient {
                    client,
                    timeouts: self.timeouts,
                    scripts: self.scripts.clone(),
                })
            });
        match opened {
            Ok(pool) => {
                let pool = Arc::new(pool);
                self.down
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(addr);
                self.pools
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(addr.to_owned(), pool.clone());
                Ok(pool)
            }
            Err(err) => {
                self.down
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(addr.to_owned(), Instant::now() + DOWN_FOR);
                Err(err)
            }
        }
    }

    /// Sends `cmds` to the node at `addr` in one pipeline (after `ASKING` with `asking`, ending
    /// with `WAIT` when the spec asks for replicas and `wait`); returns one reply per command
    /// (server errors among them as [`Value::ServerError`]) and the number of replicas `WAIT`
    /// counted (`u32::MAX` without `WAIT`).
    fn send(
        &self,
        addr: &str,
        cmds: &[Cmd],
        asking: bool,
        wait: bool,
    ) -> Result<(Vec<Value>, u32)> {
        let mut pipe = redis::pipe();
        if asking {
            pipe.cmd("ASKING");
        }
        for cmd in cmds {
            pipe.add_command(cmd.clone());
        }
        let wait = wait && self.spec.wait_replicas > 0;
        if wait {
            pipe.cmd("WAIT")
                .arg(self.spec.wait_replicas)
                .arg(self.spec.wait_timeout_ms);
        }
        let count = cmds.len() + usize::from(asking) + usize::from(wait);
        let packed = pipe.get_packed_pipeline();
        let result = self
            .pool(addr)?
            .with_conn(|conn| conn.req_packed_commands(&packed, 0, count));
        let mut replies = match result {
            Ok(replies) => replies,
            Err(err) => {
                self.wake();
                return Err(err);
            }
        };
        if replies
            .iter()
            .any(|r| matches!(r, Value::ServerError(e) if e.code() == "NOSCRIPT"))
        {
            // The scripts were flushed: new connections load them again.
            self.pools
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(addr);
        }
        let acked = if wait {
            match replies.pop() {
                Some(Value::Int(n)) => u32::try_from(n).unwrap_or(0),
                _ => 0,
            }
        } else {
            u32::MAX
        };
        if asking {
            replies.remove(0);
        }
        Ok((replies, acked))
    }

    /// Runs `cmds`, every one about keys of the slot of `key`, in one pipeline on that slot's
    /// master, then `WAIT`s for the spec's replicas when `wait`. A redirection is followed once
    /// (`MOVED` after the map is read again, `ASK` to the node it names); any other error
    /// reply stays among the replies. A `WAIT` that counts too few replicas is an error.
    pub fn call(&self, key: &[u8], cmds: &[Cmd], wait: bool) -> Result<Vec<Value>> {
        let slot = self.slot(key);
        let mut addr = self.master_of(slot)?;
        let mut asking = false;
        for attempt in 0..2 {
            let (replies, acked) = self.send(&addr, cmds, asking, wait)?;
            match replies.iter().find_map(redirect) {
                None => {
                    if acked < self.spec.wait_replicas {
                        return Err(Error::FilterServer(format!(
                            "{addr}: the write reached {acked} of {} replicas within {} ms",
                            self.spec.wait_replicas, self.spec.wait_timeout_ms
                        )));
                    }
                    return Ok(replies);
                }
                Some(_) if attempt == 1 => break,
                Some(Redirect::Ask(to)) => {
                    addr = to;
                    asking = true;
                }
                Some(Redirect::Moved) => {
                    self.refresh(false)?;
                    addr = self.master_of(slot)?;
                    asking = false;
                }
            }
        }
        self.wake();
        Err(Error::FilterServer(format!(
            "slot {slot} is moving: redirected twice"
        )))
    }

    /// Runs groups of commands, each group about keys of one slot (the slot of its key): one
    /// pipeline per master holding some of them. Returns each group's replies, or its error
    /// (its node failed, or one of its replies is a redirection: the map is read again, the
    /// group is not retried).
    pub fn call_groups(
        &self,
        groups: &[(Vec<u8>, Vec<Cmd>)],
        wait: bool,
    ) -> Vec<Result<Vec<Value>>> {
        let mut by_node: HashMap<String, Vec<usize>> = HashMap::new();
        let mut results: Vec<Option<Result<Vec<Value>>>> =
            (0..groups.len()).map(|_| None).collect();
        for (at, (key, _)) in groups.iter().enumerate() {
            match self.master_of(self.slot(key)) {
                Ok(addr) => by_node.entry(addr).or_default().push(at),
                Err(err) => results[at] = Some(Err(err)),
            }
        }
        for (addr, members) in by_node {
            let cmds: Vec<Cmd> = members
                .iter()
                .flat_map(|&at| groups[at].1.iter().cloned())
                .collect();
            match self.send(&addr, &cmds, false, wait) {
                Ok((replies, acked)) => {
                    let short = acked < self.spec.wait_replicas;
                    let mut replies = replies.into_iter();
                    for &at in &members {
                        let mine: Vec<Value> = replies.by_ref().take(groups[at].1.len()).collect();
                        results[at] = Some(if mine.iter().any(|r| redirect(r).is_some()) {
                            self.wake();
                            Err(Error::FilterServer(format!("{addr}: redirected")))
                        } else if short {
                            Err(Error::FilterServer(format!(
                                "{addr}: the writes reached {acked} of {} replicas",
                                self.spec.wait_replicas
                            )))
                        } else {
                            Ok(mine)
                        });
                    }
                }
                Err(err) => {
                    let why = err.to_string();
                    for &at in &members {
                        results[at] = Some(Err(Error::FilterServer(why.clone())));
                    }
                }
            }
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::FilterServer("not sent".into()))))
            .collect()
    }

    /// Reads the map (or the server's `run_id`) again, at most every [`REFRESH_GAP`] unless
    /// `first`, and installs it with the slots whose master changed marked.
    fn refresh(&self, first: bool) -> Result<()> {
        let mut refreshed = self.refreshed.lock().unwrap_or_else(|e| e.into_inner());
        if !first && refreshed.elapsed() < REFRESH_GAP {
            return Ok(());
        }
        *refreshed = Instant::now();
        let old = self.current();
        let mut candidates: Vec<String> = old.masters.iter().map(|(_, a)| a.clone()).collect();
        candidates.extend(self.spec.nodes.iter().cloned());
        candidates.dedup();
        let mut last = None;
        for addr in candidates {
            let read = self.pool(&addr).and_then(|pool| {
                pool.with_conn(|conn| {
                    if self.spec.cluster {
                        redis::cmd("CLUSTER").arg("SLOTS").query::<Value>(conn)
                    } else {
                        redis::cmd("INFO").arg("server").query::<Value>(conn)
                    }
                })
            });
            match read.and_then(|reply| self.parse_map(&addr, &reply)) {
                Ok(mut masters) => {
                    if self.spec.cluster {
                        self.add_run_ids(&old, &mut masters);
                    }
                    self.install(&old, masters, first);
                    return Ok(());
                }
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| Error::FilterServer("no node to ask".into())))
    }

    /// Makes each master's id `NODE_ID/RUN_ID`: a node that restarted (and may have come back
    /// without its last writes) is another master then. A node that does not answer keeps the
    /// run id it had in `old` (it is marked once it answers with another).
    fn add_run_ids(&self, old: &View, masters: &mut [MasterSlots]) {
        for (id, addr, _) in masters.iter_mut() {
            let run_id = self
                .pool(addr)
                .and_then(|pool| {
                    pool.with_conn(|conn| redis::cmd("INFO").arg("server").query::<Value>(conn))
                })
                .ok()
                .and_then(|reply| text_of(&reply))
                .and_then(|text| field(&text, "run_id"));
            let run_id = run_id.or_else(|| {
                let before = format!("{id}/");
                old.masters
                    .iter()
                    .find_map(|(known, _)| known.strip_prefix(&before).map(str::to_owned))
            });
            *id = format!("{id}/{}", run_id.unwrap_or_default());
        }
    }

    /// The map in a `CLUSTER SLOTS` (or one server's `INFO server`) reply: per master, its id,
    /// address and slot ranges.
    fn parse_map(&self, asked: &str, reply: &Value) -> Result<Vec<MasterSlots>> {
        let bad = || Error::FilterServer(format!("{asked}: unexpected map reply"));
        if !self.spec.cluster {
            let text = text_of(reply).ok_or_else(bad)?;
            let id = field(&text, "run_id").unwrap_or_default();
            return Ok(vec![(id, asked.to_owned(), vec![(0, 0)])]);
        }
        let Value::Array(ranges) = reply else {
            return Err(bad());
        };
        let asked_host = asked.rsplit_once(':').map_or(asked, |(host, _)| host);
        let mut masters: Vec<MasterSlots> = Vec::new();
        for range in ranges {
            let Value::Array(parts) = range else {
                return Err(bad());
            };
            let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(node))) =
                (parts.first(), parts.get(1), parts.get(2))
            else {
                return Err(bad());
            };
            let host = node.first().and_then(text_of).unwrap_or_default();
            let host = if host.is_empty() || host == "?" {
                asked_host.to_owned()
            } else {
                host
            };
            let Some(Value::Int(port)) = node.get(1) else {
                return Err(bad());
            };
            let addr = format!("{host}:{port}");
            let id = node
                .get(2)
                .and_then(text_of)
                .unwrap_or_else(|| addr.clone());
            let (start, end) = (*start as usize, *end as usize);
            if start > end || end >= SLOTS {
                return Err(bad());
            }
            match masters.iter_mut().find(|m| m.0 == id) {
                Some(master) => master.2.push((start, end)),
                None => masters.push((id, addr, vec![(start, end)])),
            }
        }
        Ok(masters)
    }

    /// Installs a map read now; slots whose master differs from `old`'s (and, at start, the
    /// slots of promoted masters) get the new generation.
    fn install(&self, old: &View, masters: Vec<MasterSlots>, first: bool) {
        let slots = if self.spec.cluster { SLOTS } else { 1 };
        let mut owner = vec![u16::MAX; slots];
        for (index, (_, _, ranges)) in masters.iter().enumerate() {
            for &(start, end) in ranges {
                owner[start..=end].fill(index as u16);
            }
        }
        let ids = |view_owner: &[u16], masters: &[(String, String)], slot: usize| {
            masters
                .get(usize::from(
                    view_owner.get(slot).copied().unwrap_or(u16::MAX),
                ))
                .map(|m| m.0.clone())
        };
        let list: Vec<(String, String)> =
            masters.iter().map(|m| (m.0.clone(), m.1.clone())).collect();
        let promoted: Vec<bool> = if first {
            list.iter()
                .map(|(_, addr)| self.was_promoted(addr))
                .collect()
        } else {
            vec![false; list.len()]
        };
        let same = !first && list == old.masters && owner == old.owner;
        if same {
            return;
        }
        let generation = old.generation + 1;
        let changed = (0..slots)
            .map(|slot| {
                let now = ids(&owner, &list, slot);
                let promoted_here = promoted
                    .get(usize::from(owner[slot]))
                    .copied()
                    .unwrap_or(false);
                if first {
                    if promoted_here {
                        generation
                    } else {
                        0
                    }
                } else if now != ids(&old.owner, &old.masters, slot) {
                    generation
                } else {
                    old.changed.get(slot).copied().unwrap_or(0)
                }
            })
            .collect();
        *self.view.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(View {
            generation,
            owner,
            masters: list,
            changed,
        });
    }

    /// Whether the master at `addr` was a replica promoted since it started (it may lack
    /// writes its old master acknowledged): `INFO replication` shows where its old history
    /// ends (`second_repl_offset`, -1 when it never took over).
    fn was_promoted(&self, addr: &str) -> bool {
        let info = self.pool(addr).and_then(|pool| {
            pool.with_conn(|conn| redis::cmd("INFO").arg("replication").query::<Value>(conn))
        });
        info.ok()
            .and_then(|reply| text_of(&reply))
            .and_then(|text| field(&text, "second_repl_offset"))
            .is_some_and(|offset| offset != "-1")
    }
}

/// A reply's text (bulk, simple or verbatim string).
fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) => Some(text.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

/// `name:value` of an INFO text.
fn field(text: &str, name: &str) -> Option<String> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(|value| value.trim().to_owned())
}

/// Whether `reply` redirects its command elsewhere (`MOVED`, `ASK`) or says the cluster is not
/// ready for it (`TRYAGAIN`, `CLUSTERDOWN`): the command did not run.
fn redirect(reply: &Value) -> Option<Redirect> {
    let Value::ServerError(err) = reply else {
        return None;
    };
    match err.code() {
        "MOVED" | "TRYAGAIN" | "CLUSTERDOWN" => Some(Redirect::Moved),
        "ASK" => {
            let to = err.details()?.split_whitespace().nth(1)?;
            Some(Redirect::Ask(to.to_owned()))
        }
        _ => None,
    }
}

/// The Redis Cluster slot of `key`: CRC16 (XMODEM) of its hash tag (the first `{...}` with
/// something inside), or of the whole key, modulo 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let close = key[open + 1..].iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &key[open + 1..open + 1 + close])
        })
        .unwrap_or(key);
    let mut crc: u16 = 0;
    for &byte in tagged {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % SLOTS as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_redis_cluster() {
        // CRC16/XMODEM's check value, and Redis Cluster's documented slot of "foo".
        assert_eq!(key_slot(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        // The first {...} with something inside is the hash tag; an empty one is not.
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"gate:{42}:p"), key_slot(b"42"));
        assert_eq!(key_slot(b"x{a}{b}"), key_slot(b"a"));
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
    }

    #[test]
    fn info_fields_and_redirects_are_read() {
        let text = "# Replication\r\nrole:master\r\nsecond_repl_offset:-1\r\n";
        assert_eq!(field(text, "second_repl_offset").as_deref(), Some("-1"));
        assert_eq!(field(text, "role").as_deref(), Some("master"));
        assert_eq!(field(text, "run_id"), None);
    }
}
