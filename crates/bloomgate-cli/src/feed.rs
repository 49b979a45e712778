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
    ExactStore, FilterMode, Gate, GateConfig, LatencyStore, LifecycleConfig, Policy, RedisStore,
    Seen, SqliteStore,
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
    /// instead of timing the cold start where each user's first requests take the exact path
    /// until its filter lands.
    pub warm: bool,
    pub seed: u64,
}

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
            memory_budget_bytes: 256 << 20,
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
}

impl ModeResult {
    fn json(&self) -> serde_json::Value {
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
        })
    }
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

fn open_store(config: &FeedConfig, mode: &str) -> anyhow::Result<(Box<dyn ExactStore>, String)> {
    match &config.store {
        StoreSpec::Sqlite(path) => {
            let path = mode_path(path, mode);
            for suffix in ["", "-wal", "-shm"] {
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
            Ok((Box::new(store), format!("sqlite:{}", path.display())))
        }
        StoreSpec::Redis(url) => {
            let store = RedisStore::open(url, &format!("bloomgate:demo:{mode}:seen:"))
                .with_context(|| format!("connecting to {url}"))?;
            store.clear()?;
            Ok((Box::new(store), url.clone()))
        }
    }
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

fn run_mode(
    config: &FeedConfig,
    workload: &Workload,
    policy: Policy,
    metrics_slot: &Mutex<Option<Arc<Gate>>>,
) -> anyhow::Result<ModeResult> {
    let mode = mode_name(policy);
    let (store, _) = open_store(config, mode)?;
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

    let store: Box<dyn ExactStore> = if config.store_latency_us > 0 {
        Box::new(LatencyStore::new(
            store,
            Duration::from_micros(config.store_latency_us),
        ))
    } else {
        store
    };
    let filters = match &config.filters {
        FilterSpec::Local => FilterMode::Local,
        FilterSpec::Remote(url) => FilterMode::Remote {
            url: url.clone(),
            // Unique per run, so filters left by an earlier run are never read.
            key_prefix: format!("bloomgate:demo:{}:{mode}:bf:", std::process::id()),
        },
    };
    let gate = Arc::new(Gate::new(
        store,
        GateConfig {
            policy,
            filters,
            lifecycle: config.lifecycle(),
            cache_capacity: 1_000_000,
            trust_sample_every: 64,
        },
    )?);
    *metrics_slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(gate.clone());
    if config.warm && policy != Policy::Exact {
        // A request with no candidates queues the user's filter build; wait for all of them.
        let first_now = workload.requests.first().map_or(CLOCK_START_MS, |r| r.1);
        for user in 0..config.users {
            gate.unseen(user, &[], first_now)
                .context("warming filters")?;
        }
        gate.flush().context("warming filters")?;
    }

    let bar = progress(config.requests, format!("{mode}: requests"));
    let cpu_before = process_cpu_secs();
    let started = Instant::now();
    // Per worker: the simulated time of the next request it serves (u64::MAX once done). Every
    // later request of that worker is at least this late, so expiry may follow the minimum.
    let next_now: Vec<AtomicU64> = (0..workers).map(|_| AtomicU64::new(0)).collect();
    let mut expired_rows = 0;
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let handles: Vec<_> = states
            .iter_mut()
            .enumerate()
            .map(|(index, state)| {
                let (gate, bar, next_now) = (&gate, &bar, &next_now);
                scope.spawn(move || -> anyhow::Result<()> {
                    let mut serve = || -> anyhow::Result<()> {
                        for (request, &(user, now)) in workload.requests.iter().enumerate() {
                            if user as usize % workers != index {
                                continue;
                            }
                            next_now[index].store(now, Ordering::Release);
                            let arrival = config.rate.map(|rate| {
                                started + Duration::from_secs_f64(request as f64 / rate)
                            });
                            if let Some(arrival) = arrival {
                                let early = arrival.saturating_duration_since(Instant::now());
                                if !early.is_zero() {
                                    std::thread::sleep(early);
                                }
                            }
                            serve_request(config, gate, state, request as u64, user, now, arrival)?;
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
    gate.flush().context("committing served items")?;
    let wall_secs = started.elapsed().as_secs_f64();
    let cpu_secs = process_cpu_secs()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    bar.finish_and_clear();

    let mut latencies: Vec<u64> = states
        .iter()
        .flat_map(|s| s.latencies_ns.iter().copied())
        .collect();
    latencies.sort_unstable();
    let quantile_ms = |q: f64| {
        let rank = ((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len());
        latencies[rank - 1] as f64 / 1e6
    };
    let sum = |f: fn(&WorkerState) -> u64| states.iter().map(f).sum::<u64>();
    let unseen = sum(|s| s.unseen_candidates);
    let metrics = gate.metrics();
    let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    let requests = latencies.len() as u64;
    Ok(ModeResult {
        requests,
        requests_per_sec: requests as f64 / wall_secs,
        checks_per_sec: sum(|s| s.candidates) as f64 / wall_secs,
        cpu_ms_per_request: cpu_secs.map(|cpu| 1e3 * cpu / requests as f64),
        recorded_rows: load(&metrics.recorded_rows),
        record_batches: load(&metrics.record_batches),
        candidates_per_request: sum(|s| s.candidates) as f64 / requests as f64,
        exact_lookups_per_request: load(&metrics.exact_lookups) as f64 / requests as f64,
        store_reads: load(&metrics.store_reads),
        p50_ms: quantile_ms(0.50),
        p95_ms: quantile_ms(0.95),
        p99_ms: quantile_ms(0.99),
        over_filtered_rate: if unseen == 0 {
            0.0
        } else {
            sum(|s| s.over_filtered) as f64 / unseen as f64
        },
        duplicates_shown: sum(|s| s.duplicates_shown),
        filter_bytes: gate.filter_memory_bytes(),
        history_loads: load(&metrics.history_loads),
        rotations: load(&metrics.rotations),
        rebuilds: load(&metrics.rebuilds),
        evictions: load(&metrics.evictions),
        expired_rows,
        over_filter_estimate: metrics.trust_over_filter_estimate(),
        wall_secs,
    })
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

    /// The verdict on each of the targets: (description, met).
    pub fn targets(&self) -> Vec<(String, bool)> {
        let (e, v, t) = (&self.exact, &self.verify, &self.trust);
        let networked = self.config.store_latency_us > 0;
        let p95_bound = if networked { 0.5 } else { 0.9 };
        let lookups = v.exact_lookups_per_request / e.exact_lookups_per_request;
        let reads = t.store_reads as f64 / e.store_reads.max(1) as f64;
        vec![
            (
                format!(
                    "verify exact lookups ≤ 20% of exact: {:.1}%",
                    100.0 * lookups
                ),
                lookups <= 0.20,
            ),
            (
                format!("verify over-filtering = 0: {}", v.over_filtered_rate),
                v.over_filtered_rate == 0.0,
            ),
            (
                format!("trust store reads ≤ 35% of exact: {:.1}%", 100.0 * reads),
                reads <= 0.35,
            ),
            (
                format!(
                    "trust over-filtering ≤ 0.5%: {:.3}%",
                    100.0 * t.over_filtered_rate
                ),
                t.over_filtered_rate <= 0.005,
            ),
            (
                format!(
                    "p95 ≤ {p95_bound}× exact: verify {:.2}×, trust {:.2}×",
                    v.p95_ms / e.p95_ms,
                    t.p95_ms / e.p95_ms
                ),
                v.p95_ms <= p95_bound * e.p95_ms && t.p95_ms <= p95_bound * e.p95_ms,
            ),
            (
                format!(
                    "p99 ≤ 0.5× exact: verify {:.2}×, trust {:.2}×",
                    v.p99_ms / e.p99_ms,
                    t.p99_ms / e.p99_ms
                ),
                v.p99_ms <= 0.5 * e.p99_ms && t.p99_ms <= 0.5 * e.p99_ms,
            ),
            (
                format!(
                    "duplicates shown = 0: {} / {} / {}",
                    e.duplicates_shown, v.duplicates_shown, t.duplicates_shown
                ),
                e.duplicates_shown + v.duplicates_shown + t.duplicates_shown == 0,
            ),
        ]
        .into_iter()
        .chain(self.config.rate.map(|rate| {
            (
                format!(
                    "verify at {rate:.0} requests/s offered (≥ 18000): p99 {:.3} ms ≤ 5 ms, {:.0} requests/s served",
                    v.p99_ms, v.requests_per_sec
                ),
                rate >= 18_000.0 && v.p99_ms <= 5.0 && v.requests_per_sec >= 0.97 * rate,
            )
        }))
        .collect()
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
        let load = if c.warm {
            format!("{load}, filters warmed before timing")
        } else {
            load
        };
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
        let _ = writeln!(out, "\ntargets:");
        for (what, met) in self.targets() {
            let _ = writeln!(out, "  [{}] {what}", if met { "met" } else { "MISSED" });
        }
        out
    }
}
