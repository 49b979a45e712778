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
//!
//! An acknowledged `GATE.RECORD` is a logged write, as a `BF.ADD` is: the gate queues the rows
//! for its group commit to the store, and the connection appends them to serve's append-only
//! log as a [`Recorded`] record — its scope, items and the time they were recorded at — and
//! replies only once the log has them under `appendfsync` (fsynced under `always`, written to
//! the OS otherwise). At start, the records the log holds are put back into the gate
//! ([`GateService::replay`]): committed again (the store's upserts keep a row's latest time, so
//! rows it has change nothing) and hidden meanwhile. A snapshot ends the log generations it
//! covers, so the rows still not committed at that instant ([`GateService::uncommitted`]) are
//! written at the head of the next generation: the log holds every row the store may lack, and
//! rows the store took stop being replayed.

use std::sync::Arc;
use std::time::Duration;

use bloomgate_gate::{FilterUrl, Gate, GateConfig, LifecycleConfig, Persistence, Policy};
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

/// Rows the gate recorded, as the log keeps them: the scope was shown the items at `at_ms`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// When they were recorded (the server's clock, ms): a replay keeps it.
    pub at_ms: u64,
    /// The scope's id.
    pub scope: u64,
    /// The items' ids.
    pub items: Vec<u64>,
}

impl Recorded {
    /// The command name of the logged form, `GATE.RECORDED at_ms scope item [item ...]` (ids
    /// and time as decimals: a decimal id is its own id, so the form is what a client sending
    /// the ids would send). Only replay reads it: it is not in the command table.
    pub const COMMAND: &'static str = "GATE.RECORDED";

    /// The logged form.
    pub fn command(&self) -> Vec<Vec<u8>> {
        let mut args = Vec::with_capacity(3 + self.items.len());
        args.push(Self::COMMAND.as_bytes().to_vec());
        args.push(self.at_ms.to_string().into_bytes());
        args.push(self.scope.to_string().into_bytes());
        args.extend(self.items.iter().map(|id| id.to_string().into_bytes()));
        args
    }

    /// The rows of a logged command: `None` for another command; `Some(Err)` for a
    /// `GATE.RECORDED` that does not parse.
    pub fn parse(args: &[Vec<u8>]) -> Option<Result<Self, String>> {
        if !args.first()?.eq_ignore_ascii_case(Self::COMMAND.as_bytes()) {
            return None;
        }
        let number = |arg: &[u8]| -> Result<u64, String> {
            std::str::from_utf8(arg)
                .ok()
                .and_then(|text| text.parse().ok())
                .ok_or_else(|| format!("{} with a bad number", Self::COMMAND))
        };
        Some((|| {
            let [_, at_ms, scope, items @ ..] = args else {
                return Err(format!("{} with too few arguments", Self::COMMAND));
            };
            Ok(Recorded {
                at_ms: number(at_ms)?,
                scope: number(scope)?,
                items: items
                    .iter()
                    .map(|item| number(item))
                    .collect::<Result<_, _>>()?,
            })
        })())
    }

    /// `rows` (scope, row) grouped into records: consecutive rows of one scope and time (the
    /// rows of one `GATE.RECORD`, in the recorder's order) share one.
    pub fn group(rows: &[(u64, bloomgate_gate::Seen)]) -> Vec<Recorded> {
        rows.chunk_by(|a, b| a.0 == b.0 && a.1.at_ms == b.1.at_ms)
            .map(|run| Recorded {
                at_ms: run[0].1.at_ms,
                scope: run[0].0,
                items: run.iter().map(|(_, seen)| seen.item).collect(),
            })
            .collect()
    }
}

/// A gate call's answer: the reply, and for a `GATE.RECORD` that took items, what the log must
/// hold before the reply is sent.
#[derive(Debug)]
pub struct Answer {
    /// The reply to send.
    pub reply: Reply,
    /// The rows to log first.
    pub log: Option<Recorded>,
}

impl From<Reply> for Answer {
    fn from(reply: Reply) -> Self {
        Answer { reply, log: None }
    }
}

/// Every remote filter key of serve's gate starts with this (then the scope's id in braces):
/// the keys Python's `bloomgate.Gate` uses with its default `key_prefix`, so both kinds of
/// gate process share filters and pending rows.
pub const FILTER_KEY_PREFIX: &str = "bloomgate:gate:bf:";

/// The gate and what `GATE.INFO` says about it.
pub struct GateService {
    /// Always `Some` until drop.
    gate: Option<Gate>,
    policy: Policy,
    store: String,
    /// Where the filters live (password hidden).
    filters: String,
    /// The filters live in this process (their bytes count in `used_memory`).
    local: bool,
    workers: Arc<Semaphore>,
}

impl GateService {
    /// Opens the store and starts the gate (blocking: connects to the store, and loads the
    /// filters' snapshot or connects to the filter server). Local filters are persisted under
    /// `filter_dir`; remote ones live on their server, keys `bloomgate:gate:bf:{SCOPE}`.
    pub fn open(settings: &GateSettings, filter_dir: &std::path::Path) -> anyhow::Result<Self> {
        let store = settings.store.open("bloomgate:gate:", false)?;
        let lifecycle = LifecycleConfig {
            memory_budget_bytes: settings.memory_bytes,
            ..LifecycleConfig::new(settings.retention_ms, GENERATIONS)
        };
        let local = settings.filters == FilterUrl::Local;
        let config = GateConfig {
            persistence: local.then(|| Persistence::new(filter_dir)),
            ..GateConfig::new(
                settings.policy,
                settings.filters.mode(FILTER_KEY_PREFIX),
                lifecycle,
            )
        };
        Ok(GateService {
            gate: Some(Gate::new(store, config)?),
            policy: settings.policy,
            store: settings.store.redacted(),
            filters: settings.filters.redacted(),
            local,
            workers: Arc::new(Semaphore::new(WORKERS)),
        })
    }

    /// The gate itself.
    pub fn gate(&self) -> &Gate {
        self.gate.as_ref().expect("the gate lives until drop")
    }

    /// Bytes this process holds for the gate's filters (counted in `used_memory`): none when
    /// they live on a filter server.
    pub fn memory_bytes(&self) -> u64 {
        if self.local {
            self.gate().filter_memory_bytes()
        } else {
            0
        }
    }

    /// Puts rows a log of this server's held at start back into the gate (committed again,
    /// hidden meanwhile); returns how many.
    pub fn replay(&self, records: &[Recorded]) -> anyhow::Result<u64> {
        let mut rows = 0;
        for record in records {
            self.gate()
                .replay(record.scope, &record.items, record.at_ms)?;
            rows += record.items.len() as u64;
        }
        Ok(rows)
    }

    /// The rows recorded and not yet committed to the store, as log records.
    pub fn uncommitted(&self) -> Vec<Recorded> {
        Recorded::group(&self.gate().uncommitted())
    }

    /// Runs `call` on a worker and answers it (an error reply if it fails or takes longer than
    /// [`REPLY_TIMEOUT`]: then nothing is logged, and a `GATE.RECORD` may be sent again).
    pub async fn run(self: &Arc<Self>, call: GateCall) -> Answer {
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
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Reply::error("ERR gate: internal error (see the server log)").into(),
            Err(_) => Reply::error(format!(
                "ERR gate: the store did not answer within {} s",
                REPLY_TIMEOUT.as_secs()
            ))
            .into(),
        }
    }

    /// Runs `call` on this thread (blocking).
    pub fn execute(&self, call: GateCall) -> Answer {
        let now = now_ms().max(0) as u64;
        let failed = |e: bloomgate_gate::Error| Reply::error(format!("ERR gate: {e}")).into();
        match call {
            GateCall::Unseen { scope, candidates } => {
                match self.gate().unseen(scope, &candidates, now) {
                    Ok(verdict) => Reply::Array(
                        verdict
                            .into_iter()
                            .map(|unseen| Reply::Int(i64::from(unseen)))
                            .collect(),
                    )
                    .into(),
                    Err(e) => failed(e),
                }
            }
            GateCall::Record { scope, mut items } => match self.gate().record(scope, &items, now) {
                Ok(taken) => {
                    items.truncate(taken);
                    Answer {
                        reply: Reply::Int(taken as i64),
                        log: (taken > 0).then_some(Recorded {
                            at_ms: now,
                            scope,
                            items,
                        }),
                    }
                }
                Err(e) => failed(e),
            },
            GateCall::Expire => match self.gate().expire(now) {
                Ok(dropped) => Reply::Int(dropped as i64).into(),
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
            ("record_replayed", m.replayed_rows.load(Relaxed)),
            ("filter_memory_bytes", self.gate().filter_memory_bytes()),
        ];
        let text = |s: &str| Reply::bulk(s.as_bytes().to_vec());
        let mut map = vec![
            (text("policy"), text(policy)),
            (text("store"), text(&self.store)),
            (text("filters"), text(&self.filters)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persistence::Replay;
    use bloomgate_gate::Seen;

    /// The logged form carries the scope, the items and their time, reads back as it was
    /// written (any case of the name), and is told apart from other commands and from damage.
    #[test]
    fn the_logged_form_round_trips() {
        let rows = Recorded {
            at_ms: 1_700_000_000_123,
            scope: u64::MAX,
            items: vec![0, 42, 1 << 63],
        };
        let command = rows.command();
        assert_eq!(command[0], b"GATE.RECORDED");
        assert_eq!(command[1], b"1700000000123");
        assert_eq!(Recorded::parse(&command), Some(Ok(rows.clone())));
        let mut lower = command.clone();
        lower[0] = b"gate.recorded".to_vec();
        assert_eq!(Recorded::parse(&lower), Some(Ok(rows)));
        let words = |line: &str| -> Vec<Vec<u8>> {
            line.split(' ').map(|w| w.as_bytes().to_vec()).collect()
        };
        assert_eq!(Recorded::parse(&words("BF.ADD k a")), None);
        assert_eq!(Recorded::parse(&words("GATE.RECORD u a")), None);
        for bad in [
            "GATE.RECORDED 1",
            "GATE.RECORDED x 1 2",
            "GATE.RECORDED 1 2 -3",
        ] {
            assert!(
                matches!(Recorded::parse(&words(bad)), Some(Err(_))),
                "{bad}"
            );
        }
    }

    /// The recorder's rows become one record per run of scope and time.
    #[test]
    fn uncommitted_rows_group_into_records() {
        let row = |scope, item, at_ms| (scope, Seen { item, at_ms });
        let rows = [row(1, 10, 5), row(1, 11, 5), row(2, 10, 5), row(1, 12, 6)];
        let records = Recorded::group(&rows);
        let shape: Vec<(u64, u64, Vec<u64>)> = records
            .into_iter()
            .map(|r| (r.scope, r.at_ms, r.items))
            .collect();
        assert_eq!(
            shape,
            [(1, 5, vec![10, 11]), (2, 5, vec![10]), (1, 6, vec![12])]
        );
    }

    /// Replay hands the gate's records to the gate's side and runs every other command.
    #[test]
    fn replay_collects_the_gate_rows() {
        let mut replayer = crate::commands::Replayer::new(crate::config::Config::default());
        let rows = Recorded {
            at_ms: 7,
            scope: 1,
            items: vec![2, 3],
        };
        replayer.apply(&[b"BF.ADD".to_vec(), b"k".to_vec(), b"a".to_vec()]);
        replayer.apply(&rows.command());
        replayer.apply(&[b"GATE.RECORDED".to_vec()]);
        assert_eq!(replayer.take_gate_rows(), [rows]);
        assert!(replayer.db().value(b"k", 0).is_some());
        assert!(replayer.db().value(b"GATE.RECORDED", 0).is_none());
    }
}
