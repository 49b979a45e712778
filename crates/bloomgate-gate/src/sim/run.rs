//! Running one mode: its store (a fresh data set) and history, its gate, the request workers
//! with expiry beside them, the optional restart halfway, and the counters and latencies its
//! results are computed from.

use std::collections::{HashMap, HashSet};
use std::net::{SocketAddr, TcpListener};
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::report::{ModeResult, PhaseResult};
use super::workload::{popular_item, UserTruth, Workload};
use super::{
    FeedConfig, Progress, Stage, AFTER_RESTART_REQUESTS, CLOCK_START_MS, RETENTION_MS,
    SHOWN_PER_REQUEST, TICK_MS,
};
use crate::{ExactStore, Gate, GateConfig, LatencyStore, Metrics, Persistence, Policy};

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

/// Opens the mode's store (its own data set of the configured one); `fresh` empties it first.
fn open_store(config: &FeedConfig, mode: &str, fresh: bool) -> anyhow::Result<Box<dyn ExactStore>> {
    let store = config
        .store
        .dataset(mode)
        .open(&format!("bloomgate:demo:{mode}:seen:"), fresh)?;
    Ok(if config.store_latency_us > 0 {
        Box::new(LatencyStore::new(
            store,
            Duration::from_micros(config.store_latency_us),
        ))
    } else {
        store
    })
}

/// Declares `Counters` with one `u64` per named gate counter (each named as its field of
/// [`Metrics`]), read with `of` and combined field by field with `minus` and `plus`.
macro_rules! counters {
    ($($field:ident),* $(,)?) => {
        /// The gate counters a mode's results are computed from, read at phase boundaries.
        #[derive(Clone, Copy, Default)]
        struct Counters {
            $($field: u64,)*
        }

        impl Counters {
            fn of(metrics: &Metrics) -> Self {
                Counters {
                    $($field: metrics.$field.load(Ordering::Relaxed),)*
                }
            }

            fn minus(self, o: Self) -> Self {
                Counters {
                    $($field: self.$field - o.$field,)*
                }
            }

            fn plus(self, o: Self) -> Self {
                Counters {
                    $($field: self.$field + o.$field,)*
                }
            }
        }
    };
}

counters!(
    requests,
    exact_lookups,
    store_reads,
    recorded_rows,
    record_batches,
    history_loads,
    rotations,
    rebuilds,
    evictions,
    builds_inline,
    build_waits,
    restored_filters,
    catch_ups,
);

impl Counters {
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
    let mode = policy.name();
    // Remote filters' keys are unique per run, so filters left by an earlier run are never read.
    let filters = config
        .filters
        .mode(format!("bloomgate:demo:{}:{mode}:bf:", std::process::id()));
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

/// Runs one mode on a fresh data set: generates the history, opens the gate, serves the
/// requests (restarting the gate halfway with `--restart`) and closes it.
pub(super) fn run_mode<P: Progress>(
    config: &FeedConfig,
    workload: &Workload,
    policy: Policy,
    metrics_slot: &Mutex<Option<Arc<Gate>>>,
    progress: &P,
) -> anyhow::Result<ModeResult> {
    let mode = policy.name();
    let store = open_store(config, mode, true)?;
    let workers = config.concurrency;
    let mut states: Vec<WorkerState> = (0..workers).map(|_| WorkerState::default()).collect();

    // Generate the history database (same rows in every mode) and the ground truth.
    let bar = progress.start(format!("{mode}: history"), config.users);
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
        bar.step();
    }
    bar.finish();

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
    let bar = progress.start(format!("{mode}: requests"), config.requests);
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
    bar.finish();
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
    range: Range<u64>,
    bar: &impl Stage,
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
                            bar.step();
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
    let taken = gate
        .record(user, &shown, now_ms)
        .context("recording shown items")?;
    state.latencies_ns.push(started.elapsed().as_nanos() as u64);
    for &item in &shown[..taken] {
        truth.record(item, now_ms);
    }
    Ok(())
}

/// Serves `GET /metrics` (Prometheus text) for whichever mode is running, on a background
/// thread that lives as long as the process (503 before the first mode's gate exists).
pub(super) fn serve_metrics(
    addr: SocketAddr,
    slot: Arc<Mutex<Option<Arc<Gate>>>>,
) -> anyhow::Result<()> {
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
