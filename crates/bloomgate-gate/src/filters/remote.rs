//! Per-scope filters held by a RESP server with the module's `WF.*` commands (Redis or Valkey
//! with the bloomgate module, a Redis Cluster of them, or `bloomgate serve`), shared by every
//! gate process that uses the same server and key prefix: one time-windowed filter per scope at
//! `{prefix}{SCOPE}` (the scope's id in braces: a hash tag), so a scope's retention is the same
//! remotely as locally.
//!
//! The filter has G generations of W = ⌈R/(G−1)⌉ (the local rule): an item recorded at time t
//! answers "maybe" at every time before t + (G−1)·W ≥ t + R. The gate passes its own clock:
//! writes go `AT t`, probes as `WF.MEXISTSAT key now ...`, so a simulated clock (the demo) and
//! the server's clock never disagree. Keys expire G·W (at least an hour) after their last write.
//!
//! **Rows recorded and not yet committed to the store** ("pending") are, with `pending=shared`
//! (the default), in a hash beside the scope's filter, written before `record` returns, read by
//! every probe in the same step as the filter and cleared after the group commit once the rows
//! are in the filter: the Lua scripts in `scripts.rs` keep this consistent for any number of
//! gate processes (see its invariants). A probe answers one round trip: the candidates pending
//! (seen for sure, whatever the policy), the filter's "maybe"s and whether the filter exists.
//! With `pending=local` (one gate process; a server without Lua, like `bloomgate serve`) the
//! pending rows stay in this process's overlay, read before the server's answer, and the
//! probe is `WF.MEXISTSAT` and `EXISTS` in one MULTI/EXEC.
//!
//! **A filter that exists is complete**: it is created only from the store's history of the
//! last R (plus the pending rows) in one step, and the recorder's writes never create one
//! (`NOCREATE`): so a gate that finds a scope's filter uses it without reading the store, and
//! one that does not builds it. Two things can break that, and both make the gate add the
//! store's history to the filter again before using it ("merge"): the slot's master changed
//! (a failover may have lost writes: see `nodes.rs`), or, with `pending=local`, a write of
//! this process failed (the rows left the overlay without reaching the filter).
//!
//! Every [`CHECK_EVERY`] recorded batches of a scope its `WF.INFO` is read with the writes;
//! past `fpr_budget` the filter is rebuilt from the history with twice the capacity, and the
//! sizes read feed this process's memory budget: beyond it the least recently used scopes are
//! forgotten here (shared filters stay, for the other gates: their expiry and the server's
//! memory bound them) or, with `pending=local`, their filters deleted (the next use builds them
//! again). Both run on the recorder thread.
//!
//! Failures: a probe or a pending write that fails is an error for its request (the node
//! holding the scope is down or failing over: other scopes carry on); the next use of the
//! scope retries. With `pending=local` a probe that fails sends the request to the exact path
//! instead (this process's overlay and the store know every row), as before pending rows were
//! shared. `wait=N` in the URL makes every pending write (with `pending=local`: every
//! write after a group commit) wait for N replicas (`WAIT`), so a failover that promotes one
//! of them loses no acknowledged record.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use redis::{Cmd, Value};

use crate::config::{LifecycleConfig, Timeouts};
use crate::filters::nodes::Nodes;
use crate::filters::scripts::{self, Shape};
use crate::filters::{FilterBackend, HistorySource, Probe};
use crate::metrics::{FilterGauges, Metrics, SATURATION_BOUNDS};
use crate::url::{PendingRows, RemoteSpec};
use crate::{Error, Result, Seen};

const SHARDS: usize = 64;
/// Recorded batches of a scope between two reads of its `WF.INFO` (size and estimated FPR).
pub const CHECK_EVERY: u64 = 64;
/// Most items one command carries when a history is loaded (`pending=local`).
const ITEMS_PER_COMMAND: usize = 10_000;
/// Most committed rows kept to clear from the pending hashes later (beyond: they stay pending
/// until their hash expires, which is harmless).
const UNCLEAR_ROWS: usize = 262_144;
/// The shortest time a filter or pending hash lives after its last write: the gate's clock may
/// be simulated, running faster than the server's.
const MIN_TTL_MS: u64 = 3_600_000;

struct RemoteScope {
    /// Capacity per generation given to this scope's filter (or read from it).
    capacity: u64,
    /// The filter's size as last read (or estimated from its parameters).
    bytes: u64,
    /// Recorded batches since the last `WF.INFO`.
    since_check: u64,
    /// Use counter value at the last probe or record (for eviction order).
    last_used: u64,
    /// Changes whenever a write of this process failed (`pending=local`): a probe that saw
    /// it change while in flight takes the exact path.
    epoch: u64,
    /// The latest request time the filter was loaded for or written at. A probe for an earlier
    /// time takes the exact path: the load read only rows seen within R of its own time, and
    /// writes at later times may have dropped generations an earlier request still needs
    /// (requests of one scope may run with clocks a little apart; per-scope clocks that never go
    /// backwards always pass).
    clock_ms: u64,
    /// The map generation at which the filter was last known complete.
    verified: u64,
    /// A write of this process failed: merge the history before the next use.
    stale: bool,
}

/// What a probe knew of its scope before asking the server.
#[derive(Clone, Copy)]
struct Known {
    epoch: u64,
}

/// Scope filters on a RESP server speaking the WF.* commands.
pub(crate) struct RemoteFilters {
    nodes: Arc<Nodes>,
    watcher: Mutex<Option<JoinHandle<()>>>,
    shared: bool,
    prefix: String,
    config: LifecycleConfig,
    known: Vec<Mutex<HashMap<u64, RemoteScope>>>,
    /// Σ `bytes` over known scopes.
    bytes: AtomicU64,
    uses: AtomicU64,
    epochs: AtomicU64,
    history: Arc<dyn HistorySource>,
    metrics: Arc<Metrics>,
    /// Shared: committed rows whose pending entries a commit could not clear (the server
    /// failed, or a build was reading the store): cleared with the next commit. They stay
    /// pending meanwhile, which answers what the store does.
    unclear: Mutex<Vec<(u64, Seen)>>,
}

impl RemoteFilters {
    /// `url` is `resp://HOST:PORT` or `redis+cluster://HOST:PORT[,...]` (or `resp+cluster://`)
    /// with the parameters `url::RemoteSpec` reads; keys start with `prefix`. Every connection
    /// has the given connect and read/write timeouts.
    pub fn connect(
        url: &str,
        prefix: &str,
        config: LifecycleConfig,
        timeouts: Timeouts,
        history: Arc<dyn HistorySource>,
        metrics: Arc<Metrics>,
    ) -> Result<Self> {
        config.validate()?;
        if prefix.contains(['{', '}']) {
            return Err(Error::InvalidConfig(format!(
                "the remote filters' key prefix {prefix:?} has a brace: the scope's id is the keys' hash tag"
            )));
        }
        let spec = RemoteSpec::parse(url).map_err(|e| Error::InvalidConfig(e.to_string()))?;
        let shared = spec.pending == PendingRows::Shared;
        let scripts = if shared { scripts::all() } else { Vec::new() };
        let (nodes, watcher) = Nodes::connect(spec, timeouts, scripts).map_err(|err| {
            let text = err.to_string();
            if shared && (text.contains("SCRIPT") || text.contains("unknown command")) {
                Error::FilterServer(format!(
                    "{text}: shared pending rows need a server that runs Lua scripts (Redis or \
                     Valkey with the module); add pending=local to the URL to keep them in this \
                     process (one gate process per scope)"
                ))
            } else {
                err
            }
        })?;
        Ok(RemoteFilters {
            nodes,
            watcher: Mutex::new(Some(watcher)),
            shared,
            prefix: prefix.to_owned(),
            config,
            known: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            bytes: AtomicU64::new(0),
            uses: AtomicU64::new(0),
            epochs: AtomicU64::new(0),
            history,
            metrics,
            unclear: Mutex::new(Vec::new()),
        })
    }

    fn lock_unclear(&self) -> MutexGuard<'_, Vec<(u64, Seen)>> {
        self.unclear.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The scope's filter, pending hash and build marker.
    fn keys(&self, scope: u64) -> [String; 3] {
        let filter = format!("{}{{{scope}}}", self.prefix);
        [filter.clone(), format!("{filter}:p"), format!("{filter}:l")]
    }

    fn shard(&self, scope: u64) -> MutexGuard<'_, HashMap<u64, RemoteScope>> {
        self.known[scope as usize % SHARDS]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// How long a filter or pending hash lives after its last write.
    fn ttl_ms(&self) -> u64 {
        (self.config.generation_window_ms() * self.config.generations as u64).max(MIN_TTL_MS)
    }

    fn resize(&self, known: &mut RemoteScope, bytes: u64) {
        self.bytes.fetch_add(bytes, Relaxed);
        self.bytes.fetch_sub(known.bytes, Relaxed);
        known.bytes = bytes;
    }

    /// G generations of `capacity` items at the per-generation rate, as the server sizes them.
    fn estimated_bytes(&self, capacity: u64) -> u64 {
        let g = self.config.generations as f64;
        let per_generation = -((-self.config.fpr).ln_1p() / g).exp_m1();
        let bits_per_item = -(per_generation / 2.0).ln() / std::f64::consts::LN_2.powi(2);
        (g * capacity as f64 * bits_per_item / 8.0) as u64
    }

    /// Builds the scope's filter, or adds the store's history to the one there (`replace`:
    /// deletes it first), and knows it as complete at map generation `generation`. The history
    /// is the last R of the store and this process's overlay (and, shared, every gate's
    /// pending rows). `capacity`: per generation, else from the history's size.
    fn load(
        &self,
        scope: u64,
        now_ms: u64,
        generation: u64,
        replace: bool,
        capacity: Option<u64>,
    ) -> Result<()> {
        let keys = self.keys(scope);
        let since = now_ms.saturating_sub(self.config.retention_ms);
        if self.shared {
            // Before the store is read: commits meanwhile leave their rows pending for us.
            let marked =
                self.nodes
                    .call(keys[2].as_bytes(), &scripts::mark_build(&keys[2]), false)?;
            no_errors(&marked)?;
        }
        let history: Vec<Seen> = self.history.load_history(scope, since)?;
        let capacity = capacity.unwrap_or_else(|| {
            let per_window =
                (history.len() as u64).div_ceil(self.config.generations as u64 - 1) as f64;
            ((per_window * self.config.headroom).ceil() as u64)
                .max(self.config.min_items_per_generation)
        });
        let shape = Shape {
            fpr: self.config.fpr,
            capacity,
            window_ms: self.config.generation_window_ms(),
            generations: self.config.generations,
        };
        let replies = if self.shared {
            let [f, p, l] = &keys;
            let load = scripts::load([f, p, l], replace, self.ttl_ms(), since, &shape, &history);
            self.nodes.call(keys[0].as_bytes(), &[load], false)?
        } else {
            let exec = self.local_load(&keys[0], replace, &shape, &history);
            let mut replies = self.nodes.call(keys[0].as_bytes(), &exec, false)?;
            match replies.pop() {
                // Inside EXEC, only WF.RESERVE may fail: the filter exists.
                Some(Value::Array(_)) => Vec::new(),
                other => other.into_iter().collect(),
            }
        };
        no_errors(&replies)?;
        let bytes = self.estimated_bytes(capacity);
        let mut shard = self.shard(scope);
        let known = shard.entry(scope).or_insert_with(|| RemoteScope {
            capacity,
            bytes: 0,
            since_check: 0,
            last_used: 0,
            epoch: 0,
            clock_ms: now_ms,
            verified: generation,
            stale: false,
        });
        known.capacity = capacity;
        known.last_used = self.uses.fetch_add(1, Relaxed);
        known.clock_ms = known.clock_ms.max(now_ms);
        known.verified = generation;
        known.stale = false;
        self.resize(known, bytes);
        Ok(())
    }

    /// `pending=local`: the filter built (or added to) in one MULTI/EXEC.
    fn local_load(&self, key: &str, replace: bool, shape: &Shape, history: &[Seen]) -> Vec<Cmd> {
        let mut cmds = vec![redis::cmd("MULTI")];
        if replace {
            let mut del = redis::cmd("DEL");
            del.arg(key);
            cmds.push(del);
        }
        let mut reserve = redis::cmd("WF.RESERVE");
        reserve
            .arg(key)
            .arg(shape.fpr)
            .arg(shape.capacity.min(1 << 30))
            .arg(shape.window_ms)
            .arg(shape.generations);
        cmds.push(reserve);
        for run in history.chunk_by(|a, b| a.at_ms == b.at_ms) {
            for part in run.chunks(ITEMS_PER_COMMAND) {
                let items: Vec<u64> = part.iter().map(|s| s.item).collect();
                cmds.push(insert_cmd(key, part[0].at_ms, &items));
            }
        }
        let mut expire = redis::cmd("PEXPIRE");
        expire.arg(key).arg(self.ttl_ms());
        cmds.push(expire);
        cmds.push(redis::cmd("EXEC"));
        cmds
    }

    /// What this process knows of the scope (marking it used), and whether its filter must
    /// get the store's history again before it answers.
    fn known(&self, scope: u64, changed: u64) -> (Option<Known>, bool) {
        let mut shard = self.shard(scope);
        match shard.get_mut(&scope) {
            Some(known) => {
                known.last_used = self.uses.fetch_add(1, Relaxed);
                let state = Known { epoch: known.epoch };
                (Some(state), known.stale || changed > known.verified)
            }
            None => (None, changed > 0),
        }
    }

    /// A scope whose filter another gate (or an earlier run) built: known from now on, its
    /// size and capacity read with its next write.
    fn adopt(&self, scope: u64, now_ms: u64, generation: u64) {
        let mut shard = self.shard(scope);
        if shard.contains_key(&scope) {
            return;
        }
        let capacity = self.config.min_items_per_generation;
        let bytes = self.estimated_bytes(capacity);
        self.bytes.fetch_add(bytes, Relaxed);
        shard.insert(
            scope,
            RemoteScope {
                capacity,
                bytes,
                since_check: CHECK_EVERY - 1,
                last_used: self.uses.fetch_add(1, Relaxed),
                epoch: 0,
                clock_ms: now_ms,
                verified: generation,
                stale: false,
            },
        );
    }

    /// Forgets the scope here (its filter is gone from the server).
    fn forget(&self, scope: u64) {
        if let Some(gone) = self.shard(scope).remove(&scope) {
            self.bytes.fetch_sub(gone.bytes, Relaxed);
        }
    }

    /// A write of this process to the scope's filter failed (`pending=local`), or a read of it
    /// did: its next use merges the store's history, and probes in flight take the exact path.
    fn mark_stale(&self, scope: u64, now_ms: u64) {
        let epoch = self.epochs.fetch_add(1, Relaxed) + 1;
        let capacity = self.config.min_items_per_generation;
        let mut shard = self.shard(scope);
        let known = shard.entry(scope).or_insert_with(|| RemoteScope {
            capacity,
            bytes: 0,
            since_check: CHECK_EVERY - 1,
            last_used: 0,
            epoch,
            clock_ms: now_ms,
            verified: 0,
            stale: true,
        });
        known.epoch = epoch;
        known.stale = true;
    }

    /// Whether the scope is as the probe found it before asking: same epoch, and no write at a
    /// later time than the probe's (its generations may be gone).
    fn unchanged(&self, scope: u64, before: Option<Known>, now_ms: u64) -> bool {
        self.shard(scope).get(&scope).is_some_and(|known| {
            known.clock_ms <= now_ms && before.is_none_or(|b| b.epoch == known.epoch)
        })
    }

    /// Forgets `scopes` here and, with `pending=local` (this process owns the filters), deletes
    /// their filters, node by node. A delete that fails leaves a complete filter: nothing is
    /// lost. Shared filters stay: other gates may be using them, and their expiry and the
    /// server's memory bound them.
    fn drop_scopes(&self, scopes: &[u64]) -> u64 {
        let mut groups = Vec::new();
        let mut dropped = 0;
        for &scope in scopes {
            if let Some(gone) = self.shard(scope).remove(&scope) {
                self.bytes.fetch_sub(gone.bytes, Relaxed);
                dropped += 1;
                if !self.shared {
                    let key = self.keys(scope)[0].clone();
                    let mut del = redis::cmd("DEL");
                    del.arg(&key);
                    groups.push((key.into_bytes(), vec![del]));
                }
            }
        }
        let failed = self
            .nodes
            .call_groups(&groups, false)
            .iter()
            .filter(|r| r.is_err())
            .count() as u64;
        self.metrics.filter_errors.fetch_add(failed.min(1), Relaxed);
        dropped
    }

    /// Past the memory budget, drops the least recently used scopes (`drop_scopes`) until the
    /// total is back under 90% of it: scopes not in `keep` (the batch just written) first, then,
    /// if that is not enough, those too (a deleted filter is built again from the store on use,
    /// a forgotten one found again).
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
        let evicted = self.drop_scopes(&victims);
        self.metrics.evictions.fetch_add(evicted, Relaxed);
    }

    /// One probe round trip: per item 2 = pending, 1 = "maybe", 0 = not; and whether the
    /// filter exists.
    fn ask(&self, scope: u64, items: &[u64], now_ms: u64) -> Result<(bool, Vec<u8>)> {
        let keys = self.keys(scope);
        let since = now_ms.saturating_sub(self.config.retention_ms);
        let (cmds, at) = if self.shared {
            let probe = scripts::probe(&keys[0], &keys[1], now_ms, since, items);
            (vec![probe], 0)
        } else {
            let mut exists = redis::cmd("EXISTS");
            exists.arg(&keys[0]);
            let mut probe = redis::cmd("WF.MEXISTSAT");
            probe.arg(&keys[0]).arg(now_ms).arg(items);
            let exec = vec![redis::cmd("MULTI"), exists, probe, redis::cmd("EXEC")];
            (exec, 3)
        };
        let replies = self.nodes.call(keys[0].as_bytes(), &cmds, false)?;
        let bad = |what: &str| Error::FilterServer(format!("probe of {}: {what}", keys[0]));
        let values: Vec<i64> = match replies.get(at) {
            Some(Value::Array(values)) if self.shared => values.iter().map(int).collect(),
            Some(Value::Array(exec)) => match exec.as_slice() {
                [Value::Int(exists), Value::Array(bits)] => std::iter::once(*exists)
                    .chain(bits.iter().map(int))
                    .collect(),
                _ => return Err(bad(&format!("{exec:?}"))),
            },
            other => return Err(bad(&format!("{other:?}"))),
        };
        if values.len() != items.len() + 1 {
            return Err(bad(&format!(
                "{} answers for {} items",
                values.len().saturating_sub(1),
                items.len()
            )));
        }
        let answers = values[1..].iter().map(|&v| v.clamp(0, 2) as u8).collect();
        Ok((values[0] == 1, answers))
    }
}

/// `WF.INSERT key NOCREATE AT at ITEMS items...`: never creates a filter.
fn insert_cmd(key: &str, at_ms: u64, items: &[u64]) -> Cmd {
    let mut cmd = redis::cmd("WF.INSERT");
    cmd.arg(key)
        .arg("NOCREATE")
        .arg("AT")
        .arg(at_ms)
        .arg("ITEMS")
        .arg(items);
    cmd
}

fn int(value: &Value) -> i64 {
    match value {
        Value::Int(n) => *n,
        _ => 0,
    }
}

/// The first error among `replies`, as an error.
fn no_errors(replies: &[Value]) -> Result<()> {
    match replies.iter().find(|r| matches!(r, Value::ServerError(_))) {
        Some(Value::ServerError(err)) => Err(Error::FilterServer(format!("{err:?}"))),
        _ => Ok(()),
    }
}

/// Whether `reply` is the error of a `NOCREATE` write to a filter that does not exist.
fn not_found(reply: &Value) -> bool {
    matches!(reply, Value::ServerError(err) if err.details().is_some_and(|d| d.starts_with("not found")))
}

impl FilterBackend for RemoteFilters {
    /// One round trip (after a build or merge, when the scope needs one): pending rows, the
    /// filter's answers and whether it exists.
    fn probe(&self, scope: u64, items: &[u64], now_ms: u64, out: &mut Vec<bool>) -> Result<Probe> {
        let slot = self.nodes.slot(self.keys(scope)[0].as_bytes());
        let mut built = false;
        loop {
            let (generation, changed) = self.nodes.changed_at(slot);
            let (before, merge) = self.known(scope, changed);
            if merge && !built {
                self.load(scope, now_ms, generation, false, None)?;
                built = true;
                continue;
            }
            let mut answers = vec![0u8; items.len()];
            if !self.shared {
                // The overlay first, the server second: an item leaves the overlay only after
                // the recorder's write of it reached the server (or its scope went stale).
                let since = now_ms.saturating_sub(self.config.retention_ms);
                let mut seen = vec![false; items.len()];
                self.history.overlay_seen(scope, items, since, &mut seen);
                answers = seen.iter().map(|&s| u8::from(s)).collect();
            }
            let (exists, server) = match self.ask(scope, items, now_ms) {
                Ok(answer) => answer,
                Err(err) => {
                    // Whatever happened to the node, the store's history goes into the filter
                    // again before it answers next.
                    self.mark_stale(scope, now_ms);
                    return Err(err);
                }
            };
            if !exists && !built {
                self.forget(scope);
                self.load(scope, now_ms, generation, false, None)?;
                built = true;
                continue;
            }
            if exists && before.is_none() {
                self.adopt(scope, now_ms, generation);
            }
            for (answer, on_server) in answers.iter_mut().zip(server) {
                *answer = (*answer).max(on_server);
            }
            // A filter deleted again right after it was built (another gate's memory budget):
            // the pending rows and the exact path answer this request.
            let usable = exists && !merge && self.unchanged(scope, before, now_ms);
            let seen: Vec<usize> = (0..items.len()).filter(|&i| answers[i] == 2).collect();
            out.extend(answers.iter().map(|&a| a == 1 || (a == 0 && !usable)));
            return Ok(match (usable, seen.is_empty()) {
                (true, true) => Probe::Filtered,
                (false, true) => Probe::Unfiltered,
                (filtered, false) => Probe::Pending { filtered, seen },
            });
        }
    }

    /// Shared: the items are pending on the server (and its replicas, with `wait=`) before
    /// this returns, so every gate's next probe finds them. Local: nothing to send now (the
    /// overlay has them; the recorder writes them after their store commit).
    fn record(&self, scope: u64, items: &[u64], now_ms: u64) -> Result<()> {
        if let Some(known) = self.shard(scope).get_mut(&scope) {
            known.last_used = self.uses.fetch_add(1, Relaxed);
            known.clock_ms = known.clock_ms.max(now_ms);
        }
        if self.shared && !items.is_empty() {
            let pending = &self.keys(scope)[1];
            let cmd = scripts::record(pending, now_ms, self.ttl_ms(), items);
            no_errors(&self.nodes.call(pending.as_bytes(), &[cmd], true)?)?;
        }
        Ok(())
    }

    /// The batch's writes, per scope one script (shared: into the filter, out of the pending
    /// hash) or one `WF.INSERT NOCREATE` per time (local), pipelined per node, with a
    /// `WF.INFO` for each scope due a check; then rebuilds and evictions. A failure never fails
    /// the recorder: shared, the rows stay pending; local, the scope is merged on next use.
    fn commit(&self, rows: &[(u64, Seen)]) -> Result<()> {
        let ttl = self.ttl_ms();
        let mut again = std::mem::take(&mut *self.lock_unclear());
        let rows = if again.is_empty() {
            rows
        } else {
            again.extend_from_slice(rows);
            again.sort_unstable_by_key(|&(scope, seen)| (scope, seen.item, seen.at_ms));
            &again[..]
        };
        let mut groups: Vec<(Vec<u8>, Vec<Cmd>)> = Vec::new();
        let mut meta: Vec<(u64, bool, u64)> = Vec::new(); // (scope, check due, latest time)
        let mut runs = Vec::new();
        for run in rows.chunk_by(|a, b| a.0 == b.0) {
            runs.push(run);
            let scope = run[0].0;
            let keys = self.keys(scope);
            let mut by_time: Vec<Seen> = run.iter().map(|&(_, s)| s).collect();
            by_time.sort_unstable_by_key(|s| s.at_ms);
            let latest = by_time.last().map_or(0, |s| s.at_ms);
            let mut cmds = Vec::new();
            if self.shared {
                let [f, p, l] = &keys;
                cmds.push(scripts::commit([f, p, l], ttl, &by_time));
            } else {
                for same in by_time.chunk_by(|a, b| a.at_ms == b.at_ms) {
                    for part in same.chunks(ITEMS_PER_COMMAND) {
                        let items: Vec<u64> = part.iter().map(|s| s.item).collect();
                        cmds.push(insert_cmd(&keys[0], part[0].at_ms, &items));
                    }
                }
                let mut expire = redis::cmd("PEXPIRE");
                expire.arg(&keys[0]).arg(ttl);
                cmds.push(expire);
            }
            let due = self.shard(scope).get_mut(&scope).is_some_and(|known| {
                known.clock_ms = known.clock_ms.max(latest);
                known.since_check += 1;
                let due = known.since_check >= CHECK_EVERY;
                if due {
                    known.since_check = 0;
                }
                due
            });
            if due {
                let mut info = redis::cmd("WF.INFO");
                info.arg(&keys[0]);
                cmds.push(info);
            }
            groups.push((keys[0].clone().into_bytes(), cmds));
            meta.push((scope, due, latest));
        }
        let results = self.nodes.call_groups(&groups, !self.shared);
        let mut scopes = Vec::with_capacity(meta.len());
        let mut unclear = Vec::new();
        for (((scope, due, latest), result), run) in meta.into_iter().zip(results).zip(runs) {
            scopes.push(scope);
            let replies: Vec<Value> = result.unwrap_or_default();
            let failed = replies.is_empty()
                || replies
                    .iter()
                    .any(|r| matches!(r, Value::ServerError(_)) && !not_found(r));
            // Shared: a build was reading the store, so the rows stayed pending: clear later.
            let held = self.shared
                && matches!(replies.first(), Some(Value::Array(r)) if r.get(1) == Some(&Value::Int(1)));
            if self.shared && (failed || held) {
                unclear.extend_from_slice(run);
            }
            if failed {
                self.metrics.filter_errors.fetch_add(1, Relaxed);
                if !self.shared {
                    self.mark_stale(scope, latest);
                }
                continue;
            }
            if !due {
                continue;
            }
            let (size, fpr, capacity) = replies.last().map_or((None, None, None), parse_info);
            if let Some(known) = self.shard(scope).get_mut(&scope) {
                if let Some(size) = size {
                    self.resize(known, size);
                }
                if let Some(capacity) = capacity {
                    known.capacity = capacity;
                }
            }
            let saturated = fpr.is_some_and(|fpr| fpr > self.config.fpr_budget);
            let capacity = self.shard(scope).get(&scope).map(|k| k.capacity * 2);
            if saturated {
                let slot = self.nodes.slot(self.keys(scope)[0].as_bytes());
                let (generation, _) = self.nodes.changed_at(slot);
                match self.load(scope, latest, generation, true, capacity) {
                    Ok(()) => {
                        self.metrics.rebuilds.fetch_add(1, Relaxed);
                    }
                    Err(_) => {
                        self.metrics.filter_errors.fetch_add(1, Relaxed);
                        if !self.shared {
                            self.mark_stale(scope, latest);
                        }
                    }
                }
            }
        }
        if !unclear.is_empty() {
            let mut kept = self.lock_unclear();
            let room = UNCLEAR_ROWS.saturating_sub(kept.len());
            kept.extend(unclear.into_iter().take(room));
        }
        self.enforce_memory_budget(&scopes);
        Ok(())
    }

    /// Clears what it can of the pending rows still to clear, then stops the thread watching
    /// the server's (or cluster's) map.
    fn shutdown(&self) -> Result<()> {
        if !self.lock_unclear().is_empty() {
            let _ = self.commit(&[]);
        }
        self.nodes.stop();
        if let Some(thread) = self
            .watcher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = thread.join();
        }
        Ok(())
    }

    fn shares_pending(&self) -> bool {
        self.shared
    }

    fn gauges(&self) -> FilterGauges {
        FilterGauges {
            resident_filters: 0,
            memory_bytes: self.bytes.load(Relaxed),
            saturation: [0; SATURATION_BOUNDS.len() + 1],
        }
    }
}

impl Drop for RemoteFilters {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// `Size`, `Estimated error rate` and `Capacity` from a `WF.INFO` reply (a map, or a flat
/// RESP2 array).
fn parse_info(info: &Value) -> (Option<u64>, Option<f64>, Option<u64>) {
    let pairs: Vec<(&Value, &Value)> = match info {
        Value::Map(pairs) => pairs.iter().map(|(k, v)| (k, v)).collect(),
        Value::Array(flat) => flat
            .chunks(2)
            .filter_map(|p| Some((p.first()?, p.get(1)?)))
            .collect(),
        _ => return (None, None, None),
    };
    let text = |v: &Value| match v {
        Value::SimpleString(s) => Some(s.clone()),
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        _ => None,
    };
    let number = |v: &Value| match v {
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    };
    let (mut size, mut fpr, mut capacity) = (None, None, None);
    for (k, v) in pairs {
        match text(k).as_deref() {
            Some("Size") => size = number(v),
            Some("Capacity") => capacity = number(v),
            Some("Estimated error rate") => fpr = text(v).and_then(|t| t.parse().ok()),
            _ => {}
        }
    }
    (size, fpr, capacity)
}
