//! The gate hosted by `bloomgate serve` (`--gate-store`): one [`bloomgate_gate::Gate`] over the
//! configured exact store, answering `GATE.*` (the commands are in `commands/gate.rs`).
//!
//! The gate's calls block (store round trips, filter builds), so they never run on the event
//! loop: a command handler only parses its arguments into a [`GateCall`] and hands it to the
//! network layer as an action; [`GateService::run`] runs it on tokio's blocking pool, at most
//! [`WORKERS`] at a time, and the connection writes the reply when it is ready (the client's
//! later pipelined commands wait for it, other clients do not). A call that takes longer than
//! [`REPLY_TIMEOUT`] (a store that stopped answering) is answered with an error; the call itself
//! ends within the store's own timeouts.

use std::sync::Arc;
use std::time::Duration;

use bloomgate_gate::{FilterMode, Gate, GateConfig, LifecycleConfig, Persistence, Policy};
use tokio::sync::Semaphore;

use crate::config::GateSettings;
use crate::keyspace::now_ms;
use crate::resp::Reply;

/// Gate calls running at once (each holds a blocking-pool thread while its store call runs).
pub const WORKERS: usize = 8;
/// Longest a client waits for a gate call's reply (queueing for a worker included).
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// Generations of each scope's filter (the window is split in `GENERATIONS - 1` parts).
const GENERATIONS: usize = 4;

/// One GATE.* call, parsed, waiting for a worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateCall {
    /// GATE.UNSEEN: for each candidate, 1 = not seen by the scope within the window.
    Unseen {
        /// The scope's id.
        scope: u64,
        /// The candidates' ids.
        candidates: Vec<u64>,
    },
    /// GATE.RECORD: the scope was shown these items now.
    Record {
        /// The scope's id.
        scope: u64,
        /// The items' ids.
        items: Vec<u64>,
    },
    /// GATE.EXPIRE: drop the rows past retention now.
    Expire,
}

/// The gate and what `GATE.INFO` says about it.
pub struct GateService {
    /// Always `Some` until drop.
    gate: Option<Gate>,
    policy: Policy,
    store: String,
    workers: Arc<Semaphore>,
}

impl GateService {
    /// Opens the store and starts the gate (blocking: connects to the store and loads the
    /// filters' snapshot). Local filters are persisted under `filter_dir`.
    pub fn open(settings: &GateSettings, filter_dir: &std::path::Path) -> anyhow::Result<Self> {
        let store = settings.store.open("bloomgate:gate:", false)?;
        let lifecycle = LifecycleConfig {
            memory_budget_bytes: settings.memory_bytes,
            ..LifecycleConfig::new(settings.retention_ms, GENERATIONS)
        };
        let config = GateConfig {
            persistence: Some(Persistence::new(filter_dir)),
            ..GateConfig::new(settings.policy, FilterMode::Local, lifecycle)
        };
        Ok(GateService {
            gate: Some(Gate::new(store, config)?),
            policy: settings.policy,
            store: settings.store.redacted(),
            workers: Arc::new(Semaphore::new(WORKERS)),
        })
    }

    /// The gate itself.
    pub fn gate(&self) -> &Gate {
        self.gate.as_ref().expect("the gate lives until drop")
    }

    /// Bytes held by the gate's filters (counted in `used_memory`).
    pub fn memory_bytes(&self) -> u64 {
        self.gate().filter_memory_bytes()
    }

    /// Runs `call` on a worker and answers it (an error reply if it fails or takes longer than
    /// [`REPLY_TIMEOUT`]).
    pub async fn run(self: &Arc<Self>, call: GateCall) -> Reply {
        let service = self.clone();
        let answer = async move {
            let permit = service.workers.clone().acquire_owned().await;
            tokio::task::spawn_blocking(move || {
                let _permit = permit;
                service.execute(call)
            })
            .await
        };
        match tokio::time::timeout(REPLY_TIMEOUT, answer).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Reply::error("ERR gate: internal error (see the server log)"),
            Err(_) => Reply::error(format!(
                "ERR gate: the store did not answer within {} s",
                REPLY_TIMEOUT.as_secs()
            )),
        }
    }

    /// Runs `call` on this thread (blocking).
    pub fn execute(&self, call: GateCall) -> Reply {
        let now = now_ms().max(0) as u64;
        let failed = |e: bloomgate_gate::Error| Reply::error(format!("ERR gate: {e}"));
        match call {
            GateCall::Unseen { scope, candidates } => {
                match self.gate().unseen(scope, &candidates, now) {
                    Ok(verdict) => Reply::Array(
                        verdict
                            .into_iter()
                            .map(|unseen| Reply::Int(i64::from(unseen)))
                            .collect(),
                    ),
                    Err(e) => failed(e),
                }
            }
            GateCall::Record { scope, items } => match self.gate().record(scope, &items, now) {
                Ok(taken) => Reply::Int(taken as i64),
                Err(e) => failed(e),
            },
            GateCall::Expire => match self.gate().expire(now) {
                Ok(dropped) => Reply::Int(dropped as i64),
                Err(e) => failed(e),
            },
        }
    }

    /// `GATE.INFO`: the policy, the store, and the gate's counters.
    pub fn info(&self) -> Reply {
        use std::sync::atomic::Ordering::Relaxed;
        let m = self.gate().metrics();
        let policy = match self.policy {
            Policy::Verify => "verify",
            Policy::Trust => "trust",
            Policy::Exact => "exact",
        };
        let history_loads = m.history_loads.load(Relaxed);
        let counters = [
            ("requests", m.requests.load(Relaxed)),
            ("candidates", m.candidates.load(Relaxed)),
            // Candidates the store itself answered (not the cache or the pending overlay).
            (
                "store_lookups",
                m.store_reads.load(Relaxed).saturating_sub(history_loads),
            ),
            ("filter_negatives", m.filter_negatives.load(Relaxed)),
            ("filter_maybe", m.filter_maybe.load(Relaxed)),
            ("exact_lookups", m.exact_lookups.load(Relaxed)),
            ("cache_hits", m.cache_hits.load(Relaxed)),
            ("history_loads", history_loads),
            ("filter_errors", m.filter_errors.load(Relaxed)),
            ("recorded_rows", m.recorded_rows.load(Relaxed)),
            ("record_failures", m.record_failures.load(Relaxed)),
            ("record_backlog", self.gate().record_backlog() as u64),
            ("filter_memory_bytes", self.memory_bytes()),
        ];
        let text = |s: &str| Reply::bulk(s.as_bytes().to_vec());
        let mut map = vec![
            (text("policy"), text(policy)),
            (text("store"), text(&self.store)),
        ];
        map.extend(
            counters
                .into_iter()
                .map(|(name, value)| (text(name), Reply::Int(value.min(i64::MAX as u64) as i64))),
        );
        Reply::Map(map)
    }
}

impl Drop for GateService {
    /// Drops the gate on a thread of its own: its last reference may go on the event loop's
    /// thread, where the gate's shutdown (a final commit, joining its threads) must not block,
    /// and where the PostgreSQL client, which runs a runtime of its own, refuses to be dropped.
    fn drop(&mut self) {
        if let Some(gate) = self.gate.take() {
            let _ = std::thread::Builder::new()
                .name("bloomgate-gate-close".into())
                .spawn(move || drop(gate))
                .map(|closing| closing.join());
        }
    }
}
