//! The feed-service case study, reproduced on a real store (`bloomgate demo feed`).
//!
//! A history database with heavy and light users is generated; then one request stream runs
//! three times on the same starting data — exact (cache + store for every candidate), verify and
//! trust — on a simulated clock spanning several retention windows, so rotation, expiry,
//! rebuilds and history growth (served items are recorded as seen) all happen during the run.
//! A ground-truth model of every user's history, kept outside the gate, counts duplicates shown
//! and unseen items wrongly dropped.
//!
//! Closed loop (default): each worker sends its next request when the previous one is answered.
//! Open loop (`--rate R`): request i arrives at i/R s after the start whatever the latency, and
//! its latency runs from that arrival, so queueing behind slow requests shows in the tail as it
//! would in production. A request's latency is the gate's whole part of it: `unseen` for its
//! candidates plus `record` of the items shown. Expiry runs beside the workers, lagging the
//! slowest one (rows go only once no later request can still see them).
//!
//! Layout: the users, their histories, the request stream and the ground truth are in
//! `workload.rs`; running one mode (its store, its gate, the request workers, the restart) in
//! `run.rs`; the results, the targets they are judged against and the table in `report.rs`.
//! Progress goes to a [`Progress`] the caller supplies (the CLI draws bars).

mod report;
mod run;
mod workload;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::bail;

use crate::{FilterUrl, Gate, LifecycleConfig, Policy, StoreUrl};

pub use report::{FeedReport, ModeResult, PhaseResult, Verdict};

const DAY_MS: u64 = 24 * 3600 * 1000;
/// Start of the simulated clock (any fixed time; histories reach back one retention window).
const CLOCK_START_MS: u64 = 1_700_000_000_000;
/// The product rule: "seen" means seen within the last 30 days.
const RETENTION_MS: u64 = 30 * DAY_MS;
/// The run spans this many retention windows of simulated time.
const RUN_RETENTIONS: u64 = 3;
/// Store expiry runs once per simulated day.
const TICK_MS: u64 = DAY_MS;
/// Items shown (and so recorded as seen) per request: the top of the unseen candidates.
const SHOWN_PER_REQUEST: usize = 10;
/// Size of the article catalogue candidates are drawn from.
const CATALOGUE: u64 = 1_000_000;

/// Everything `demo feed` is told.
#[derive(Clone, Debug)]
pub struct FeedConfig {
    /// Users (scopes).
    pub users: u64,
    /// Mean items per user seen within the retention window at the start.
    pub history: u64,
    /// Requests in the stream.
    pub requests: u64,
    /// Candidate items per request.
    pub candidates: usize,
    /// Share of candidates the user has already seen.
    pub seen_ratio: f64,
    /// Request worker threads.
    pub concurrency: usize,
    /// The exact store (each mode gets its own data set of it, see [`StoreUrl::dataset`]).
    pub store: StoreUrl,
    /// Where the scope filters live.
    pub filters: FilterUrl,
    /// Fixed delay added to every store call, in microseconds (models a networked store).
    pub store_latency_us: u64,
    /// Serve Prometheus metrics of the running mode's gate here (GET /metrics).
    pub metrics_addr: Option<SocketAddr>,
    /// Open loop: requests arrive at this many per second (None: closed loop).
    pub rate: Option<f64>,
    /// Build every user's filter before the timed requests (a service that has been running),
    /// instead of timing the cold start.
    pub warm: bool,
    /// All scope filters together stay within this many bytes (evicting the least recently used).
    pub filter_memory_bytes: u64,
    /// Stop and reopen the gate halfway through each mode, on the same store and filter
    /// directory (a deploy), and report the first [`AFTER_RESTART_REQUESTS`] requests after it.
    pub restart: bool,
    /// Seed of the workload (users, histories, requests, candidates).
    pub seed: u64,
}

/// Requests after a `--restart` reopening that `after_restart` reports on.
pub const AFTER_RESTART_REQUESTS: u64 = 1_000;

impl FeedConfig {
    /// Full-size defaults; `quick` shrinks the run to well under two minutes on two cores.
    pub fn defaults(quick: bool) -> Self {
        let (users, requests) = if quick {
            (1_000, 50_000)
        } else {
            (10_000, 500_000)
        };
        FeedConfig {
            users,
            history: 300,
            requests,
            candidates: 120,
            seen_ratio: 0.025,
            concurrency: 4,
            store: StoreUrl::Sqlite(std::env::temp_dir().join("bloomgate-demo-feed.db")),
            filters: FilterUrl::Local,
            store_latency_us: 0,
            metrics_addr: None,
            rate: None,
            warm: false,
            restart: false,
            filter_memory_bytes: 256 << 20,
            seed: 0x5EED_F00D,
        }
    }

    fn validate(&self) -> anyhow::Result<()> {
        if self.users == 0 || self.requests == 0 || self.candidates == 0 || self.concurrency == 0 {
            bail!("users, requests, candidates and concurrency must be positive");
        }
        if self.candidates as u64 > CATALOGUE / 10 {
            bail!("at most {} candidates per request", CATALOGUE / 10);
        }
        if !(0.0..=1.0).contains(&self.seen_ratio) {
            bail!("seen ratio must be within [0, 1]");
        }
        if self.history > 100_000 {
            bail!("history is the mean items per user; at most 100000");
        }
        if self.restart && self.requests < 4 {
            bail!("--restart needs at least 4 requests");
        }
        if let Some(rate) = self.rate {
            if !(rate.is_finite() && rate >= 1.0) {
                bail!("rate must be at least 1 request per second, got {rate}");
            }
        }
        Ok(())
    }

    fn lifecycle(&self) -> LifecycleConfig {
        LifecycleConfig {
            retention_ms: RETENTION_MS,
            generations: 4, // W = 10 days
            // 1e-4: ~0.012 false positives per 120-candidate request, so verify mode's store
            // round trips are almost only true sightings, which the cache answers.
            fpr: 1e-4,
            fpr_budget: 2e-4,
            headroom: 2.0,
            min_items_per_generation: 32,
            memory_budget_bytes: self.filter_memory_bytes,
        }
    }
}

/// How a run reports its progress: each mode has two stages, generating the history
/// (`"verify: history"`, one step per user) and serving the requests (`"verify: requests"`, one
/// step per request). `()` reports nothing.
pub trait Progress {
    /// One stage's counter.
    type Stage: Stage;
    /// A stage called `name` of `len` steps begins.
    fn start(&self, name: String, len: u64) -> Self::Stage;
}

/// The counter of one stage, stepped from the request workers' threads.
pub trait Stage: Sync {
    /// One more step is done.
    fn step(&self);
    /// The stage is over.
    fn finish(self);
}

impl Progress for () {
    type Stage = ();
    fn start(&self, _name: String, _len: u64) {}
}

impl Stage for () {
    fn step(&self) {}
    fn finish(self) {}
}

/// Runs the demo: generate, then exact, verify and trust on the same starting data.
pub fn run_feed(config: &FeedConfig, progress: &impl Progress) -> anyhow::Result<FeedReport> {
    config.validate()?;
    let workload = workload::Workload::new(config);
    let metrics_slot: Arc<Mutex<Option<Arc<Gate>>>> = Arc::new(Mutex::new(None));
    if let Some(addr) = config.metrics_addr {
        run::serve_metrics(addr, metrics_slot.clone())?;
    }
    let mode = |policy| run::run_mode(config, &workload, policy, &metrics_slot, progress);
    let exact = mode(Policy::Exact)?;
    let verify = mode(Policy::Verify)?;
    let trust = mode(Policy::Trust)?;
    Ok(FeedReport {
        config: config.clone(),
        exact,
        verify,
        trust,
    })
}
