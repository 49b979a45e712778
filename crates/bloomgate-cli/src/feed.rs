//! `bloomgate demo feed`: the case study's feed service, reproduced on a real store.
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

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use bloomgate_gate::{
    ExactStore, FilterMode, Gate, GateConfig, LatencyStore, LifecycleConfig, Metrics, Persistence,
    Policy, RedisStore, Seen, SqliteStore,
};

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

/// Where the demo keeps its exact store.
#[derive(Clone, Debug)]
pub enum StoreSpec {
    Sqlite(PathBuf),
    Redis(String),
}

impl FromStr for StoreSpec {
    type Err = anyhow::Error;
    fn from_str(spec: &str) -> anyhow::Result<Self> {
        if let Some(path) = spec.strip_prefix("sqlite:") {
            if path.is_empty() {
                bail!("sqlite: needs a path, e.g. sqlite:/tmp/feed.db");
            }
            Ok(StoreSpec::Sqlite(PathBuf::from(path)))
        } else if spec.starts_with("redis://") {
            Ok(StoreSpec::Redis(spec.to_owned()))
        } else {
            bail!("store must be sqlite:PATH or redis://HOST:PORT, got {spec:?}")
        }
    }
}

/// Where the demo keeps its scope filters.
#[derive(Clone, Debug)]
pub enum FilterSpec {
    Local,
    Remote(String),
}

impl FromStr for FilterSpec {
    type Err = anyhow::Error;
    fn from_str(spec: &str) -> anyhow::Result<Self> {
        if spec == "local" {
            Ok(FilterSpec::Local)
        } else if ["resp://", "resp+cluster://", "redis+cluster://"]
            .iter()
            .any(|scheme| spec.starts_with(scheme))
        {
            Ok(FilterSpec::Remote(spec.to_owned()))
        } else {
            bail!(
                "filters must be local, resp://HOST:PORT or redis+cluster://HOST:PORT[,HOST:PORT...], got {spec:?}"
            )
        }
    }
}

/// Everything `demo feed` is told.
#[derive(Clone, Debug)]
pub struct FeedConfig {
    pub users: u64,
    /// Mean items per user seen within the retention window at the start.
    pub history: u64,
    pub requests: u64,
    pub candidates: usize,
    pub seen_ratio: f64,
    pub concurrency: usize,
    pub store: StoreSpec,
    pub filters: FilterSpec,
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
            store: StoreSpec::Sqlite(std::env::temp_dir().join("bloomgate-demo-feed.db")),
            filters: FilterSpec::Local,
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

/// One mode's results, in the shape of the case study's.
#[derive(Clone, Debug)]
pub struct ModeResult {
    pub requests: u64,
    /// Requests and candidate checks per second of wall time (until every served item is
    /// committed to the store).
    pub requests_per_sec: f64,
    pub checks_per_sec: f64,
    /// Process CPU (user + system, every thread: workload generator, gate, recorder, builder,
    /// SQLite) per request.
    pub cpu_ms_per_request: Option<f64>,
    /// Rows the background recorder committed, in how many group commits.
    pub recorded_rows: u64,
    pub record_batches: u64,
    pub candidates_per_request: f64,
    pub exact_lookups_per_request: f64,
    pub store_reads: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub over_filtered_rate: f64,
    pub duplicates_shown: u64,
    pub filter_bytes: u64,
    // Lifecycle evidence, shown in the table.
    pub history_loads: u64,
    pub rotations: u64,
    pub rebuilds: u64,
    pub evictions: u64,
    pub expired_rows: u64,
    pub over_filter_estimate: f64,
    pub wall_secs: f64,
    /// Filter builds run by the request that needed them, and requests that waited for one.
    pub builds_inline: u64,
    pub build_waits: u64,
    /// The cold-path rule's measured costs at the end of the run, in ns: [exact-path store time
    /// per lookup, build time per history row].
    pub costs_ns: [f64; 2],
    /// Exact lookups per request over the second quarter of the run (`--restart`: the steady
    /// state before the restart).
    pub steady: Option<PhaseResult>,
    /// The first requests after the restart (`--restart`).
    pub after_restart: Option<PhaseResult>,
}

/// Counters of one stretch of requests.
#[derive(Clone, Debug)]
pub struct PhaseResult {
    pub requests: u64,
    pub exact_lookups_per_request: f64,
    pub store_reads: u64,
    pub p99_ms: f64,
    /// Filters loaded from the snapshot, and how many caught up with the store (after restart).
    pub restored_filters: u64,
    pub catch_ups: u64,
    /// Seconds from closing the gate to the reopened gate's first request.
    pub restart_secs: f64,
}

impl PhaseResult {
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "requests": self.requests,
            "exact_lookups_per_request": self.exact_lookups_per_request,
            "store_reads": self.store_reads,
            "p99_ms": self.p99_ms,
            "restored_filters": self.restored_filters,
            "catch_ups": self.catch_ups,
            "restart_secs": self.restart_secs,
        })
    }
}

impl ModeResult {
    fn json(&self) -> serde_json::Value {
        let mut json = self.json_main();
        for (name, phase) in [
            ("steady", &self.steady),
            ("after_restart", &self.after_restart),
        ] {
            if let Some(phase) = phase {
                json[name] = phase.json();
            }
        }
        json
    }

    fn json_main(&self) -> serde_json::Value {
        serde_json::json!({
            "requests": self.requests,
            "requests_per_sec": self.requests_per_sec,
            "checks_per_sec": self.checks_per_sec,
            "cpu_ms_per_request": self.cpu_ms_per_request,
            "recorded_rows": self.recorded_rows,
            "record_batches": self.record_batches,
            "candidates_per_request": self.candidates_per_request,
            "exact_lookups_per_request": self.exact_lookups_per_request,
            "store_reads": self.store_reads,
            "p50_ms": self.p50_ms,
            "p95_ms": self.p95_ms,
            "p99_ms": self.p99_ms,
            "over_filtered_rate": self.over_filtered_rate,
            "duplicates_shown": self.duplicates_shown,
            "filter_bytes": self.filter_bytes,
            "history_loads": self.history_loads,
            "builds_inline": self.builds_inline,
            "build_waits": self.build_waits,
            "exact_lookup_ns": self.costs_ns[0],
            "build_row_ns": self.costs_ns[1],
            "rotations": self.rotations,
            "rebuilds": self.rebuilds,
            "evictions": self.evictions,
            "wall_secs": self.wall_secs,
        })
    }
}

/// What a run says about one target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Met,
    Missed,
    /// The run's parameters cannot show it (the reason).
    NotJudged(String),
}

/// The three modes of one run.
pub struct FeedReport {
    pub config: FeedConfig,
    pub exact: ModeResult,
    pub verify: ModeResult,
    pub trust: ModeResult,
}

/// Runs the demo: generate, then exact, verify and trust on the same starting data.
pub fn run_feed(config: &FeedConfig) -> anyhow::Result<FeedReport> {
    config.validate()?;
    let workload = Workload::new(config);
    let metrics_slot: Arc<Mutex<Option<Arc<Gate>>>> = Arc::new(Mutex::new(None));
    if let Some(addr) = config.metrics_addr {
        serve_metrics(addr, metrics_slot.clone())?;
    }
    let exact = run_mode(config, &workload, Policy::Exact, &metrics_slot)?;
    let verify = run_mode(config, &workload, Policy::Verify, &metrics_slot)?;
    let trust = run_mode(config, &workload, Policy::Trust, &metrics_slot)?;
    Ok(FeedReport {
        config: config.clone(),
        exact,
        verify,
        trust,
    })
}

fn mode_name(policy: Policy) -> &'static str {
    match policy {
        Policy::Exact => "exact",
        Policy::Verify => "verify",
        Policy::Trust => "trust",
    }
}

/// The users, their starting histories and the request stream: identical for every mode.
struct Workload {
    /// Cumulative activity weights (heavy users request more).
    cumulative_weight: Vec<f64>,
    /// Items each user starts with (a deterministic function of user and seed).
    history_len: Vec<u64>,
    /// (user, time) per request, in time order.
    requests: Vec<(u64, u64)>,
    seed: u64,
}

impl Workload {
    fn new(config: &FeedConfig) -> Self {
        let mut rng = SmallRng::seed_from_u64(config.seed);
        // Activity ~ Pareto(α = 1.5), capped at 100× the minimum: a few heavy users, a long tail
        // of light ones. Histories follow activity with log-normal noise (σ ≈ 0.5), so some users
        // outgrow the filter their history sized and get rebuilt.
        let weights: Vec<f64> = (0..config.users)
            .map(|_| (1.0 - rng.random::<f64>()).powf(-1.0 / 1.5).min(100.0))
            .collect();
        let mean_weight = weights.iter().sum::<f64>() / weights.len() as f64;
        let history_len = weights
            .iter()
            .map(|w| {
                let noise = (0.5 * standard_normal(&mut rng) - 0.125).exp();
                (config.history as f64 * w / mean_weight * noise).round() as u64
            })
            .collect();
        let mut total = 0.0;
        let cumulative_weight = weights
            .iter()
            .map(|w| {
                total += w;
                total
            })
            .collect();
        let span = RETENTION_MS * RUN_RETENTIONS;
        let mut requests: Vec<(u64, u64)> = (0..config.requests)
            .map(|i| (0, CLOCK_START_MS + i * span / config.requests))
            .collect();
        let mut workload = Workload {
            cumulative_weight,
            history_len,
            requests: Vec::new(),
            seed: config.seed,
        };
        for request in &mut requests {
            request.0 = workload.pick_user(&mut rng);
        }
        workload.requests = requests;
        workload
    }

    fn pick_user(&self, rng: &mut SmallRng) -> u64 {
        let total = *self.cumulative_weight.last().expect("at least one user");
        let target = rng.random::<f64>() * total;
        self.cumulative_weight
            .partition_point(|&c| c < target)
            .min(self.cumulative_weight.len() - 1) as u64
    }

    /// The user's starting history: distinct popular items at times spread over the last R.
    fn history(&self, user: u64) -> Vec<Seen> {
        let mut rng = SmallRng::seed_from_u64(self.seed ^ user.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut items = HashSet::new();
        let want = self.history_len[user as usize].min(CATALOGUE / 10);
        while (items.len() as u64) < want {
            items.insert(popular_item(&mut rng));
        }
        let mut seen: Vec<Seen> = items
            .into_iter()
            .map(|item| Seen {
                item,
                at_ms: CLOCK_START_MS - 1 - rng.random_range(0..RETENTION_MS - 1),
            })
            .collect();
        seen.sort_unstable_by_key(|s| (s.at_ms, s.item));
        seen
    }
}

fn standard_normal(rng: &mut SmallRng) -> f64 {
    // Box–Muller.
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Article popularity: id = ⌊N·u²⌋ puts density ∝ 1/√id on the catalogue, so popular articles
/// come back as candidates (and as cache hits) while the tail stays long.
fn popular_item(rng: &mut SmallRng) -> u64 {
    let u = rng.random::<f64>();
    ((CATALOGUE as f64) * u * u) as u64
}

/// Ground truth for one user, outside the gate.
#[derive(Default)]
struct UserTruth {
    last_seen: HashMap<u64, u64>,
    /// Sightings in time order, for sampling a seen item (entries may be superseded).
    sightings: VecDeque<(u64, u64)>,
}

impl UserTruth {
    fn is_seen(&self, item: u64, since_ms: u64) -> bool {
        self.last_seen.get(&item).is_some_and(|&at| at >= since_ms)
    }

    fn record(&mut self, item: u64, at_ms: u64) {
        self.last_seen.insert(item, at_ms);
        self.sightings.push_back((item, at_ms));
    }

    fn sample_seen(&mut self, rng: &mut SmallRng, since_ms: u64) -> Option<u64> {
        while self.sightings.front().is_some_and(|&(_, at)| at < since_ms) {
            self.sightings.pop_front();
        }
        if self.sightings.is_empty() {
            return None;
        }
        Some(self.sightings[rng.random_range(0..self.sightings.len())].0)
    }
}

/// One worker's share: the users with `user % workers == index`, and what it measured.
#[derive(Default)]
struct WorkerState {
    truth: HashMap<u64, UserTruth>,
    latencies_ns: Vec<u64>,
    unseen_candidates: u64,
    over_filtered: u64,
    duplicates_shown: u64,
    candidates: u64,
}

/// Opens the mode's store; `fresh` empties it first (a new file, a cleared prefix).
fn open_store(config: &FeedConfig, mode: &str, fresh: bool) -> anyhow::Result<Box<dyn ExactStore>> {
    let store: Box<dyn ExactStore> = match &config.store {
        StoreSpec::Sqlite(path) => {
            let path = mode_path(path, mode);
            for suffix in ["", "-wal", "-shm"].into_iter().filter(|_| fresh) {
                let file = PathBuf::from(format!("{}{suffix}", path.display()));
                match std::fs::remove_file(&file) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(e).with_context(|| format!("removing {}", file.display()))
                    }
                }
            }
            let store =
                SqliteStore::open(&path).with_context(|| format!("opening {}", path.display()))?;
            Box::new(store)
        }
        StoreSpec::Redis(url) => {
            let store = RedisStore::open(url, &format!("bloomgate:demo:{mode}:seen:"))
                .with_context(|| format!("connecting to {url}"))?;
            if fresh {
                store.clear()?;
            }
            Box::new(store)
        }
    };
    Ok(if config.store_latency_us > 0 {
        Box::new(LatencyStore::new(
            store,
            Duration::from_micros(config.store_latency_us),
        ))
    } else {
        store
    })
}

/// `feed.db` → `feed-verify.db`: one starting copy per mode.
fn mode_path(path: &Path, mode: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(|| "feed".into(), |s| s.to_string_lossy().into_owned());
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{mode}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{mode}"),
    };
    path.with_file_name(name)
}

fn progress(len: u64, message: String) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg:>22} [{bar:40}] {pos}/{len} ({eta})")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_message(message);
    bar
}

/// The gate counters a mode's results are computed from, read at phase boundaries.
#[derive(Clone, Copy, Default)]
struct Counters {
    requests: u64,
    exact_lookups: u64,
    store_reads: u64,
    recorded_rows: u64,
    record_batches: u64,
    history_loads: u64,
    rotations: u64,
    rebuilds: u64,
    evictions: u64,
    builds_inline: u64,
    build_waits: u64,
    restored_filters: u64,
    catch_ups: u64,
}

impl Counters {
    fn of(metrics: &Metrics) -> Self {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Counters {
            requests: load(&metrics.requests),
            exact_lookups: load(&metrics.exact_lookups),
            store_reads: load(&metrics.store_reads),
            recorded_rows: load(&metrics.recorded_rows),
            record_batches: load(&metrics.record_batches),
            history_loads: load(&metrics.history_loads),
            rotations: load(&metrics.rotations),
            rebuilds: load(&metrics.rebuilds),
            evictions: load(&metrics.evictions),
            builds_inline: load(&metrics.builds_inline),
            build_waits: load(&metrics.build_waits),
            restored_filters: load(&metrics.restored_filters),
            catch_ups: load(&metrics.catch_ups),
        }
    }

    fn minus(self, o: Self) -> Self {
        Counters {
            requests: self.requests - o.requests,
            exact_lookups: self.exact_lookups - o.exact_lookups,
            store_reads: self.store_reads - o.store_reads,
            recorded_rows: self.recorded_rows - o.recorded_rows,
            record_batches: self.record_batches - o.record_batches,
            history_loads: self.history_loads - o.history_loads,
            rotations: self.rotations - o.rotations,
            rebuilds: self.rebuilds - o.rebuilds,
            evictions: self.evictions - o.evictions,
            builds_inline: self.builds_inline - o.builds_inline,
            build_waits: self.build_waits - o.build_waits,
            restored_filters: self.restored_filters - o.restored_filters,
            catch_ups: self.catch_ups - o.catch_ups,
        }
    }

    fn plus(self, o: Self) -> Self {
        Counters {
            requests: self.requests + o.requests,
            exact_lookups: self.exact_lookups + o.exact_lookups,
            store_reads: self.store_reads + o.store_reads,
            recorded_rows: self.recorded_rows + o.recorded_rows,
            record_batches: self.record_batches + o.record_batches,
            history_loads: self.history_loads + o.history_loads,
            rotations: self.rotations + o.rotations,
            rebuilds: self.rebuilds + o.rebuilds,
            evictions: self.evictions + o.evictions,
            builds_inline: self.builds_inline + o.builds_inline,
            build_waits: self.build_waits + o.build_waits,
            restored_filters: self.restored_filters + o.restored_filters,
            catch_ups: self.catch_ups + o.catch_ups,
        }
    }

    fn lookups_per_request(&self) -> f64 {
        self.exact_lookups as f64 / self.requests.max(1) as f64
    }
}

/// Everything one mode's gate is opened with.
fn open_gate(
    config: &FeedConfig,
    store: Box<dyn ExactStore>,
    policy: Policy,
    filter_dir: Option<&Path>,
) -> anyhow::Result<Arc<Gate>> {
    let mode = mode_name(policy);
    let filters = match &config.filters {
        FilterSpec::Local => FilterMode::Local,
        FilterSpec::Remote(url) => FilterMode::Remote {
            url: url.clone(),
            // Unique per run, so filters left by an earlier run are never read.
            key_prefix: format!("bloomgate:demo:{}:{mode}:bf:", std::process::id()),
        },
    };
    let gate = Gate::new(
        store,
        GateConfig {
            cache_capacity: 1_000_000,
            trust_sample_every: 64,
            persistence: filter_dir.map(|dir| Persistence {
                every: None, // the demo's restart is a clean shutdown
                ..Persistence::new(dir)
            }),
            ..GateConfig::new(policy, filters, config.lifecycle())
        },
    )
    .context("opening the gate")?;
    Ok(Arc::new(gate))
}

/// Closes the mode's gate (waiting for the metrics endpoint to let go of it): commits what is
/// queued and writes the filters' snapshot.
fn close_gate(gate: Arc<Gate>, metrics_slot: &Mutex<Option<Arc<Gate>>>) -> anyhow::Result<()> {
    *metrics_slot.lock().unwrap_or_else(|e| e.into_inner()) = None;
    let mut gate = gate;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Arc::try_unwrap(gate) {
            Ok(gate) => return gate.close().context("closing the gate"),
            Err(shared) if Instant::now() < deadline => {
                gate = shared;
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => bail!("the gate is still in use after 10 s"),
        }
    }
}

fn run_mode(
    config: &FeedConfig,
    workload: &Workload,
    policy: Policy,
    metrics_slot: &Mutex<Option<Arc<Gate>>>,
) -> anyhow::Result<ModeResult> {
    let mode = mode_name(policy);
    let store = open_store(config, mode, true)?;
    let workers = config.concurrency;
    let mut states: Vec<WorkerState> = (0..workers).map(|_| WorkerState::default()).collect();

    // Generate the history database (same rows in every mode) and the ground truth.
    let bar = progress(config.users, format!("{mode}: history"));
    let mut rows = Vec::new();
    for user in 0..config.users {
        let history = workload.history(user);
        let truth = states[user as usize % workers]
            .truth
            .entry(user)
            .or_default();
        for seen in &history {
            truth.record(seen.item, seen.at_ms);
        }
        rows.extend(history.into_iter().map(|seen| (user, seen)));
        if rows.len() >= 50_000 || user + 1 == config.users {
            store.record_batch(&rows).context("writing history")?;
            rows.clear();
        }
        bar.inc(1);
    }
    bar.finish_and_clear();

    let filter_dir = config.restart.then(|| {
        std::env::temp_dir().join(format!(
            "bloomgate-demo-filters-{}-{mode}",
            std::process::id()
        ))
    });
    if let Some(dir) = &filter_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    let mut gate = open_gate(config, store, policy, filter_dir.as_deref())?;
    *metrics_slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(gate.clone());
    if config.warm && policy != Policy::Exact {
        // A request with no candidates creates the user's filter build; wait for all of them.
        let first_now = workload.requests.first().map_or(CLOCK_START_MS, |r| r.1);
        for user in 0..config.users {
            gate.unseen(user, &[], first_now)
                .context("warming filters")?;
        }
        gate.flush().context("warming filters")?;
    }

    let n = workload.requests.len() as u64;
    let bar = progress(config.requests, format!("{mode}: requests"));
    let cpu_before = process_cpu_secs();
    let started = Instant::now();
    let mut expired_rows = 0;
    let mut totals = Counters::default();
    let (mut steady, mut after_restart) = (None, None);
    if config.restart {
        let (quarter, half) = (n / 4, n / 2);
        let after_end = (half + AFTER_RESTART_REQUESTS).min(n);
        let at_quarter = {
            expired_rows += run_phase(config, workload, &gate, &mut states, 0..quarter, &bar)?;
            Counters::of(gate.metrics())
        };
        let (latencies_before, _) = latency_marks(&states);
        expired_rows += run_phase(config, workload, &gate, &mut states, quarter..half, &bar)?;
        gate.flush().context("committing served items")?;
        let at_half = Counters::of(gate.metrics());
        steady = Some(phase_result(
            at_half.minus(at_quarter),
            &states,
            latencies_before,
            0.0,
        ));
        totals = totals.plus(at_half);
        // The deploy: close (commit, snapshot), reopen on the same store and filter directory.
        let restarting = Instant::now();
        close_gate(gate, metrics_slot)?;
        gate = open_gate(
            config,
            open_store(config, mode, false)?,
            policy,
            filter_dir.as_deref(),
        )?;
        *metrics_slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(gate.clone());
        let restart_secs = restarting.elapsed().as_secs_f64();
        let (latencies_before, _) = latency_marks(&states);
        expired_rows += run_phase(config, workload, &gate, &mut states, half..after_end, &bar)?;
        after_restart = Some(phase_result(
            Counters::of(gate.metrics()),
            &states,
            latencies_before,
            restart_secs,
        ));
        expired_rows += run_phase(config, workload, &gate, &mut states, after_end..n, &bar)?;
    } else {
        expired_rows += run_phase(config, workload, &gate, &mut states, 0..n, &bar)?;
    }
    gate.flush().context("committing served items")?;
    let wall_secs = started.elapsed().as_secs_f64();
    let cpu_secs = process_cpu_secs()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    bar.finish_and_clear();
    let totals = totals.plus(Counters::of(gate.metrics()));
    let filter_bytes = gate.filter_memory_bytes();
    let over_filter_estimate = gate.metrics().trust_over_filter_estimate();
    let costs_ns = gate.metrics().cost_estimates();
    close_gate(gate, metrics_slot)?;
    if let Some(dir) = &filter_dir {
        let _ = std::fs::remove_dir_all(dir);
    }

    let mut latencies: Vec<u64> = states
        .iter()
        .flat_map(|s| s.latencies_ns.iter().copied())
        .collect();
    latencies.sort_unstable();
    let sum = |f: fn(&WorkerState) -> u64| states.iter().map(f).sum::<u64>();
    let unseen = sum(|s| s.unseen_candidates);
    let requests = latencies.len() as u64;
    Ok(ModeResult {
        requests,
        requests_per_sec: requests as f64 / wall_secs,
        checks_per_sec: sum(|s| s.candidates) as f64 / wall_secs,
        cpu_ms_per_request: cpu_secs.map(|cpu| 1e3 * cpu / requests as f64),
        recorded_rows: totals.recorded_rows,
        record_batches: totals.record_batches,
        candidates_per_request: sum(|s| s.candidates) as f64 / requests as f64,
        exact_lookups_per_request: totals.exact_lookups as f64 / requests as f64,
        store_reads: totals.store_reads,
        p50_ms: quantile_ms(&latencies, 0.50),
        p95_ms: quantile_ms(&latencies, 0.95),
        p99_ms: quantile_ms(&latencies, 0.99),
        over_filtered_rate: if unseen == 0 {
            0.0
        } else {
            sum(|s| s.over_filtered) as f64 / unseen as f64
        },
        duplicates_shown: sum(|s| s.duplicates_shown),
        filter_bytes,
        history_loads: totals.history_loads,
        rotations: totals.rotations,
        rebuilds: totals.rebuilds,
        evictions: totals.evictions,
        expired_rows,
        over_filter_estimate,
        wall_secs,
        builds_inline: totals.builds_inline,
        build_waits: totals.build_waits,
        costs_ns,
        steady,
        after_restart,
    })
}

/// `sorted[⌈q·n⌉ − 1]` in ms (0 for no samples).
fn quantile_ms(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1e6
}

/// How many latencies each worker has recorded so far (a phase's own are the ones after).
fn latency_marks(states: &[WorkerState]) -> (Vec<usize>, usize) {
    let marks: Vec<usize> = states.iter().map(|s| s.latencies_ns.len()).collect();
    let total = marks.iter().sum();
    (marks, total)
}

fn phase_result(
    counters: Counters,
    states: &[WorkerState],
    marks: Vec<usize>,
    restart_secs: f64,
) -> PhaseResult {
    let mut latencies: Vec<u64> = states
        .iter()
        .zip(marks)
        .flat_map(|(s, from)| s.latencies_ns[from..].iter().copied())
        .collect();
    latencies.sort_unstable();
    PhaseResult {
        requests: counters.requests,
        exact_lookups_per_request: counters.lookups_per_request(),
        store_reads: counters.store_reads,
        p99_ms: quantile_ms(&latencies, 0.99),
        restored_filters: counters.restored_filters,
        catch_ups: counters.catch_ups,
        restart_secs,
    }
}

/// Serves the requests with index in `range` on the workers (user u on worker u mod W, in
/// order), with expiry beside them; returns the rows expired. Open loop: request i arrives
/// (i − range.start)/rate after the phase starts.
fn run_phase(
    config: &FeedConfig,
    workload: &Workload,
    gate: &Gate,
    states: &mut [WorkerState],
    range: std::ops::Range<u64>,
    bar: &ProgressBar,
) -> anyhow::Result<u64> {
    let workers = states.len();
    let started = Instant::now();
    // Per worker: the simulated time of the next request it serves (u64::MAX once done). Every
    // later request of that worker is at least this late, so expiry may follow the minimum.
    let next_now: Vec<AtomicU64> = (0..workers).map(|_| AtomicU64::new(0)).collect();
    let mut expired_rows = 0;
    let requests = &workload.requests[range.start as usize..range.end as usize];
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let handles: Vec<_> = states
            .iter_mut()
            .enumerate()
            .map(|(index, state)| {
                let next_now = &next_now;
                scope.spawn(move || -> anyhow::Result<()> {
                    let mut serve = || -> anyhow::Result<()> {
                        for (offset, &(user, now)) in requests.iter().enumerate() {
                            if user as usize % workers != index {
                                continue;
                            }
                            next_now[index].store(now, Ordering::Release);
                            let arrival = config.rate.map(|rate| {
                                started + Duration::from_secs_f64(offset as f64 / rate)
                            });
                            if let Some(arrival) = arrival {
                                let early = arrival.saturating_duration_since(Instant::now());
                                if !early.is_zero() {
                                    std::thread::sleep(early);
                                }
                            }
                            let request = range.start + offset as u64;
                            serve_request(config, gate, state, request, user, now, arrival)?;
                            bar.inc(1);
                        }
                        Ok(())
                    };
                    let result = serve();
                    next_now[index].store(u64::MAX, Ordering::Release);
                    result
                })
            })
            .collect();
        // Retention schedule, beside the workers: rows before (slowest worker's time − R).
        let mut expired_to = 0;
        loop {
            let slowest = next_now
                .iter()
                .map(|n| n.load(Ordering::Acquire))
                .min()
                .unwrap_or(u64::MAX);
            if slowest == u64::MAX {
                break;
            }
            let cutoff = slowest / TICK_MS * TICK_MS;
            if cutoff > expired_to {
                expired_rows += gate.expire(cutoff).context("expiring store rows")?;
                expired_to = cutoff;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        for handle in handles {
            handle
                .join()
                .map_err(|_| anyhow::anyhow!("request worker panicked"))??;
        }
        Ok(())
    })?;
    Ok(expired_rows)
}

/// One request: draw candidates (about `seen_ratio` of them from the user's recent history),
/// ask the gate, check its answer against the truth, show the top unseen and record them.
fn serve_request(
    config: &FeedConfig,
    gate: &Gate,
    state: &mut WorkerState,
    request: u64,
    user: u64,
    now_ms: u64,
    arrival: Option<Instant>,
) -> anyhow::Result<()> {
    let since_ms = now_ms.saturating_sub(RETENTION_MS);
    let mut rng =
        SmallRng::seed_from_u64(config.seed ^ request.wrapping_mul(0xD1B5_4A32_D192_ED03));
    let truth = state.truth.entry(user).or_default();
    let mut candidates = Vec::with_capacity(config.candidates);
    let mut chosen = HashSet::with_capacity(config.candidates);
    while candidates.len() < config.candidates {
        let item = if rng.random::<f64>() < config.seen_ratio {
            truth
                .sample_seen(&mut rng, since_ms)
                .unwrap_or_else(|| popular_item(&mut rng))
        } else {
            popular_item(&mut rng)
        };
        if chosen.insert(item) {
            candidates.push(item);
        }
    }

    let started = arrival.unwrap_or_else(Instant::now);
    let verdict = gate
        .unseen(user, &candidates, now_ms)
        .context("gate lookup")?;

    let mut shown = Vec::with_capacity(SHOWN_PER_REQUEST);
    for (&item, &may_show) in candidates.iter().zip(&verdict) {
        let seen = truth.is_seen(item, since_ms);
        if !seen {
            state.unseen_candidates += 1;
            state.over_filtered += u64::from(!may_show);
        }
        if may_show {
            state.duplicates_shown += u64::from(seen);
            if shown.len() < SHOWN_PER_REQUEST {
                shown.push(item);
            }
        }
    }
    state.candidates += candidates.len() as u64;
    gate.record(user, &shown, now_ms)
        .context("recording shown items")?;
    state.latencies_ns.push(started.elapsed().as_nanos() as u64);
    for &item in &shown {
        truth.record(item, now_ms);
    }
    Ok(())
}

/// Serves `GET /metrics` (Prometheus text) for whichever mode is running, on a background
/// thread that lives as long as the process (503 before the first mode's gate exists).
fn serve_metrics(addr: SocketAddr, slot: Arc<Mutex<Option<Arc<Gate>>>>) -> anyhow::Result<()> {
    let listener =
        TcpListener::bind(addr).with_context(|| format!("binding metrics listener on {addr}"))?;
    bloomgate_metrics::spawn(listener, move || {
        let gate = slot.lock().unwrap_or_else(|e| e.into_inner()).clone();
        gate.map(|gate| gate.render_metrics())
    })
    .context("starting the metrics thread")?;
    Ok(())
}

/// User + system CPU seconds of this process so far, from `/proc/self/stat` (Linux; None
/// elsewhere). utime and stime are fields 14 and 15, in USER_HZ = 100 ticks per second.
fn process_cpu_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may contain spaces; fields after it are space-separated.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

fn human_bytes(bytes: u64) -> String {
    match bytes {
        0 => "0".to_owned(),
        b if b < 1 << 20 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
    }
}

impl FeedReport {
    /// `{"modes": {"exact": M, "verify": M, "trust": M}}`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({ "modes": {
            "exact": self.exact.json(),
            "verify": self.verify.json(),
            "trust": self.trust.json(),
        }})
    }

    /// The verdict on each target this run can show: (description, verdict). A target the
    /// run's parameters cannot reach (a rate below the target's, a seen ratio above the lookup
    /// budget, too few requests per user for history loads to amortise) is reported as not
    /// judged, with the reason, never as missed.
    pub fn targets(&self) -> Vec<(String, Verdict)> {
        let c = &self.config;
        let (e, v, t) = (&self.exact, &self.verify, &self.trust);
        let judged = |met: bool| if met { Verdict::Met } else { Verdict::Missed };
        let mut out = Vec::new();
        let lookups =
            v.exact_lookups_per_request / e.exact_lookups_per_request.max(f64::MIN_POSITIVE);
        // Verify must look up every candidate the user really saw: the seen ratio is its floor.
        let lookup_budget = 0.05;
        out.push((
            format!(
                "verify exact lookups ≤ 5% of exact: {:.1}%",
                100.0 * lookups
            ),
            if c.seen_ratio <= lookup_budget - 0.01 {
                judged(lookups <= lookup_budget)
            } else {
                Verdict::NotJudged(format!(
                    "seen ratio {} leaves no room under 5%: every seen candidate is verified",
                    c.seen_ratio
                ))
            },
        ));
        out.push((
            format!("verify over-filtering = 0: {}", v.over_filtered_rate),
            judged(v.over_filtered_rate == 0.0),
        ));
        let reads = t.store_reads as f64 / e.store_reads.max(1) as f64;
        // Each user's filter costs one history load: the floor of trust's store reads.
        let load_floor = c.users.min(c.requests) as f64 / e.store_reads.max(1) as f64;
        out.push((
            format!("trust store reads ≤ 5% of exact: {:.1}%", 100.0 * reads),
            if load_floor <= 0.025 {
                judged(reads <= 0.05)
            } else {
                Verdict::NotJudged(format!(
                    "{} users' history loads alone are {:.1}% of exact's store reads at {} requests",
                    c.users,
                    100.0 * load_floor,
                    c.requests
                ))
            },
        ));
        out.push((
            format!(
                "trust over-filtering ≤ 0.5%: {:.3}%",
                100.0 * t.over_filtered_rate
            ),
            judged(t.over_filtered_rate <= 0.005),
        ));
        let networked = c.store_latency_us > 0;
        let p95_bound = if networked { 0.5 } else { 0.9 };
        out.push((
            format!(
                "p95 ≤ {p95_bound}× exact: verify {:.2}×, trust {:.2}×",
                v.p95_ms / e.p95_ms,
                t.p95_ms / e.p95_ms
            ),
            judged(v.p95_ms <= p95_bound * e.p95_ms && t.p95_ms <= p95_bound * e.p95_ms),
        ));
        out.push((
            format!(
                "duplicates shown = 0: {} / {} / {}",
                e.duplicates_shown, v.duplicates_shown, t.duplicates_shown
            ),
            judged(e.duplicates_shown + v.duplicates_shown + t.duplicates_shown == 0),
        ));
        if let Some(rate) = c.rate {
            out.push((
                format!(
                    "verify at 18000 requests/s x {} candidates: p99 {:.3} ms ≤ 5 ms, {:.0} requests/s served (≥ 97% of {rate:.0})",
                    c.candidates, v.p99_ms, v.requests_per_sec
                ),
                if rate >= 18_000.0 {
                    judged(v.p99_ms <= 5.0 && v.requests_per_sec >= 0.97 * rate)
                } else {
                    Verdict::NotJudged(format!("this run offered {rate:.0} requests/s"))
                },
            ));
        }
        for (name, m) in [("verify", v), ("trust", t)] {
            let (Some(steady), Some(after)) = (&m.steady, &m.after_restart) else {
                continue;
            };
            // Trust looks nothing up once its filters are built: its steady state is ~0, so
            // "2×" becomes an absolute bound of 0.2 lookups per request.
            let bound = (2.0 * steady.exact_lookups_per_request).max(0.2);
            out.push((
                format!(
                    "{name} after restart: first {} requests {:.2} exact lookups/request ≤ {bound:.2} (2× steady {:.2})",
                    after.requests,
                    after.exact_lookups_per_request,
                    steady.exact_lookups_per_request
                ),
                judged(after.exact_lookups_per_request <= bound),
            ));
        }
        out
    }

    /// The human table, next to the case study's published figures.
    pub fn table(&self) -> String {
        let c = &self.config;
        let (e, v, t) = (&self.exact, &self.verify, &self.trust);
        let mut out = String::new();
        let store = match &c.store {
            StoreSpec::Sqlite(path) => format!("sqlite:{}", path.display()),
            StoreSpec::Redis(url) => url.clone(),
        };
        let filters = match &c.filters {
            FilterSpec::Local => "local".to_owned(),
            FilterSpec::Remote(url) => url.clone(),
        };
        let load = match c.rate {
            Some(rate) => format!("open loop at {rate:.0} requests/s"),
            None => "closed loop".to_owned(),
        };
        let start = match (c.warm, c.restart) {
            (false, false) => "cold start (filters built as users arrive, timed)",
            (true, false) => "warm (every filter built before timing)",
            (false, true) => "cold start, gate restarted halfway (snapshot + catch-up)",
            (true, true) => "warm, gate restarted halfway (snapshot + catch-up)",
        };
        let load = format!("{load}, {start}");
        let _ = writeln!(
            out,
            "bloomgate demo feed: {} users, mean history {}, {} requests x {} candidates, seen ratio {}, concurrency {}, {load}\n\
             store {store} (+{} us per query), filters {filters}, retention 30 d, {} simulated days, filters G=4 x W=10 d, FPR 1e-4\n\
             latency = unseen + record per request (open loop: from its scheduled arrival)\n",
            c.users, c.history, c.requests, c.candidates, c.seen_ratio, c.concurrency, c.store_latency_us, RUN_RETENTIONS * 30
        );
        let pct = |x: f64, base: f64| {
            if base > 0.0 {
                format!("({:.0}%)", 100.0 * x / base)
            } else {
                String::new()
            }
        };
        let _ = writeln!(
            out,
            "{:<26} {:>12} {:>20} {:>20}   case study (exact -> filtered)",
            "", "exact", "verify", "trust"
        );
        let row = |out: &mut String, name: &str, cells: [String; 3], study: &str| {
            let _ = writeln!(
                out,
                "{name:<26} {:>12} {:>20} {:>20}   {study}",
                cells[0], cells[1], cells[2]
            );
        };
        let lookups = |m: &ModeResult| {
            format!(
                "{:.2} {}",
                m.exact_lookups_per_request,
                pct(m.exact_lookups_per_request, e.exact_lookups_per_request)
            )
        };
        row(
            &mut out,
            "exact lookups / request",
            [
                format!("{:.2}", e.exact_lookups_per_request),
                lookups(v),
                lookups(t),
            ],
            "~120 -> ~24 (-80%)",
        );
        let reads = |m: &ModeResult| {
            format!(
                "{} {}",
                m.store_reads,
                pct(m.store_reads as f64, e.store_reads as f64)
            )
        };
        row(
            &mut out,
            "store reads",
            [e.store_reads.to_string(), reads(v), reads(t)],
            "-65-70%",
        );
        let ms = |x: f64, base: f64| format!("{x:.3} {}", pct(x, base));
        row(
            &mut out,
            "p50 latency (ms)",
            [
                format!("{:.3}", e.p50_ms),
                ms(v.p50_ms, e.p50_ms),
                ms(t.p50_ms, e.p50_ms),
            ],
            "n/a",
        );
        row(
            &mut out,
            "p95 latency (ms)",
            [
                format!("{:.3}", e.p95_ms),
                ms(v.p95_ms, e.p95_ms),
                ms(t.p95_ms, e.p95_ms),
            ],
            "~140 -> ~96 ms (69%; the whole feed request)",
        );
        row(
            &mut out,
            "p99 latency (ms)",
            [
                format!("{:.3}", e.p99_ms),
                ms(v.p99_ms, e.p99_ms),
                ms(t.p99_ms, e.p99_ms),
            ],
            "n/a",
        );
        row(
            &mut out,
            "requests/s",
            [
                format!("{:.0}", e.requests_per_sec),
                format!("{:.0}", v.requests_per_sec),
                format!("{:.0}", t.requests_per_sec),
            ],
            "~18,000 (fleet)",
        );
        let checks = |m: &ModeResult| format!("{:.2}M", m.checks_per_sec / 1e6);
        row(
            &mut out,
            "checks/s",
            [checks(e), checks(v), checks(t)],
            "~2.16M (fleet)",
        );
        let cpu = |m: &ModeResult| {
            m.cpu_ms_per_request
                .map_or_else(|| "n/a".to_owned(), |ms| format!("{ms:.3}"))
        };
        row(
            &mut out,
            "CPU ms / request (all)",
            [cpu(e), cpu(v), cpu(t)],
            "",
        );
        let rate = |m: &ModeResult| format!("{:.4}%", 100.0 * m.over_filtered_rate);
        row(
            &mut out,
            "over-filtered rate",
            [rate(e), rate(v), rate(t)],
            "< 0.5% (trusting positives)",
        );
        row(
            &mut out,
            "duplicates shown",
            [
                e.duplicates_shown.to_string(),
                v.duplicates_shown.to_string(),
                t.duplicates_shown.to_string(),
            ],
            "(must be 0)",
        );
        row(
            &mut out,
            "filter memory",
            [
                human_bytes(e.filter_bytes),
                human_bytes(v.filter_bytes),
                human_bytes(t.filter_bytes),
            ],
            "",
        );
        let _ = writeln!(out);
        row(
            &mut out,
            "history loads",
            [
                e.history_loads.to_string(),
                v.history_loads.to_string(),
                t.history_loads.to_string(),
            ],
            "",
        );
        row(
            &mut out,
            "rotations / rebuilds",
            [
                format!("{}/{}", e.rotations, e.rebuilds),
                format!("{}/{}", v.rotations, v.rebuilds),
                format!("{}/{}", t.rotations, t.rebuilds),
            ],
            "",
        );
        row(
            &mut out,
            "evictions",
            [
                e.evictions.to_string(),
                v.evictions.to_string(),
                t.evictions.to_string(),
            ],
            "",
        );
        let commits = |m: &ModeResult| format!("{}/{}", m.recorded_rows, m.record_batches);
        row(
            &mut out,
            "rows recorded / commits",
            [commits(e), commits(v), commits(t)],
            "",
        );
        row(
            &mut out,
            "store rows expired",
            [
                e.expired_rows.to_string(),
                v.expired_rows.to_string(),
                t.expired_rows.to_string(),
            ],
            "",
        );
        row(
            &mut out,
            "over-filter est. (sample)",
            [
                "".into(),
                "".into(),
                format!("{:.4}%", 100.0 * t.over_filter_estimate),
            ],
            "",
        );
        row(
            &mut out,
            "wall time (s)",
            [
                format!("{:.1}", e.wall_secs),
                format!("{:.1}", v.wall_secs),
                format!("{:.1}", t.wall_secs),
            ],
            "",
        );
        row(
            &mut out,
            "builds inline / waits",
            [
                format!("{}/{}", e.builds_inline, e.build_waits),
                format!("{}/{}", v.builds_inline, v.build_waits),
                format!("{}/{}", t.builds_inline, t.build_waits),
            ],
            "",
        );
        if let (Some(_), Some(_)) = (&v.steady, &v.after_restart) {
            let _ = writeln!(out);
            let phase = |m: &ModeResult, f: fn(&PhaseResult) -> String, after: bool| {
                let p = if after { &m.after_restart } else { &m.steady };
                p.as_ref().map_or_else(String::new, f)
            };
            let lookups = |p: &PhaseResult| format!("{:.2}", p.exact_lookups_per_request);
            row(
                &mut out,
                "steady lookups / request",
                [
                    phase(e, lookups, false),
                    phase(v, lookups, false),
                    phase(t, lookups, false),
                ],
                "2nd quarter of the run",
            );
            row(
                &mut out,
                "after restart lookups/req",
                [
                    phase(e, lookups, true),
                    phase(v, lookups, true),
                    phase(t, lookups, true),
                ],
                "first 1,000 requests after reopening",
            );
            let p99 = |p: &PhaseResult| format!("{:.3}", p.p99_ms);
            row(
                &mut out,
                "after restart p99 (ms)",
                [
                    phase(e, p99, true),
                    phase(v, p99, true),
                    phase(t, p99, true),
                ],
                "",
            );
            let restored = |p: &PhaseResult| format!("{}/{}", p.restored_filters, p.catch_ups);
            row(
                &mut out,
                "restored / caught up",
                [
                    phase(e, restored, true),
                    phase(v, restored, true),
                    phase(t, restored, true),
                ],
                "filters from the snapshot",
            );
            let secs = |p: &PhaseResult| format!("{:.2}", p.restart_secs);
            row(
                &mut out,
                "restart (s)",
                [
                    phase(e, secs, true),
                    phase(v, secs, true),
                    phase(t, secs, true),
                ],
                "close + snapshot + reopen",
            );
        }
        let _ = writeln!(out, "\ntargets:");
        for (what, verdict) in self.targets() {
            let _ = match verdict {
                Verdict::Met => writeln!(out, "  [met] {what}"),
                Verdict::Missed => writeln!(out, "  [MISSED] {what}"),
                Verdict::NotJudged(why) => writeln!(out, "  [n/a] {what} (not judged: {why})"),
            };
        }
        out
    }
}
