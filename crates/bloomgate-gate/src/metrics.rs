//! Operational signals of the gate, rendered as Prometheus text exposition (format 0.0.4).
//!
//! The case study's list: pass-through rate (candidates sent to the exact path), the
//! false-positive proxy (exact misses after a filter "maybe"), the trust-mode over-filter
//! estimate from a small verified sample, saturation, filter memory, request and store latency,
//! rebuilds and rotations. Counters are relaxed atomics: a scrape may see a request half counted,
//! never a torn value.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use bloomgate_metrics::{Exposition, Kind};

use crate::filters::costs::Costs;

/// Latency bucket bounds in seconds: 25 µs to 1 s, roughly ×2 apart.
const LATENCY_BOUNDS: [f64; 16] = [
    25e-6, 50e-6, 100e-6, 200e-6, 400e-6, 800e-6, 1.6e-3, 3.2e-3, 6.4e-3, 12.8e-3, 25.6e-3,
    51.2e-3, 102.4e-3, 204.8e-3, 409.6e-3, 1.0,
];

/// Saturation bounds: a filter's estimated FPR as a fraction of its budget (> 1 triggers a rebuild).
pub(crate) const SATURATION_BOUNDS: [f64; 6] = [0.1, 0.25, 0.5, 0.75, 1.0, 2.0];

/// A fixed-bucket latency histogram.
pub struct Histogram {
    buckets: [AtomicU64; LATENCY_BOUNDS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Histogram {
    fn new() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_nanos: AtomicU64::new(0),
        }
    }

    /// Counts one observation of `elapsed`.
    pub fn observe(&self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let slot = LATENCY_BOUNDS
            .iter()
            .position(|&bound| secs <= bound)
            .unwrap_or(LATENCY_BOUNDS.len());
        self.buckets[slot].fetch_add(1, Relaxed);
        self.sum_nanos
            .fetch_add(elapsed.as_nanos().min(u64::MAX as u128) as u64, Relaxed);
    }

    fn render(&self, out: &mut Exposition, name: &str, help: &str) {
        let counts = self.buckets.each_ref().map(|bucket| bucket.load(Relaxed));
        let sum = self.sum_nanos.load(Relaxed) as f64 * 1e-9;
        let total = counts.iter().sum();
        out.histogram(name, help, &LATENCY_BOUNDS, &counts, total, sum);
    }
}

/// All counters of one gate.
pub struct Metrics {
    /// Requests answered (`Gate::unseen` calls).
    pub requests: AtomicU64,
    /// Candidate items checked.
    pub candidates: AtomicU64,
    /// Candidates the filter answered "maybe" for.
    pub filter_maybe: AtomicU64,
    /// Candidates the filter answered "definitely not seen" for: answered without the exact
    /// path, under every policy.
    pub filter_negatives: AtomicU64,
    /// Candidates sent to the exact path (cache, then store).
    pub exact_lookups: AtomicU64,
    /// Exact lookups the cache answered.
    pub cache_hits: AtomicU64,
    /// Membership checks answered by the store (cache misses) plus one per history load.
    pub store_reads: AtomicU64,
    /// Filter "maybe" that the exact path answered "unseen" (verify mode): false-positive proxy.
    pub exact_misses_after_maybe: AtomicU64,
    /// Trust mode sample: filter "maybe" answers verified against the store.
    pub trust_sample_maybe: AtomicU64,
    /// Trust mode sample: of those, how many the store says are unseen.
    pub trust_sample_false_positives: AtomicU64,
    /// Trust mode sample: candidates in sampled requests that the store says are unseen.
    pub trust_sample_unseen: AtomicU64,
    /// Scope histories loaded from the store (builds, rebuilds, catch-ups, remote loads).
    pub history_loads: AtomicU64,
    /// Filters rebuilt because they outgrew their capacity or FPR budget.
    pub rebuilds: AtomicU64,
    /// Generation rotations applied to local filters.
    pub rotations: AtomicU64,
    /// Filters dropped (local) or deleted (remote) to stay within the memory budget.
    pub evictions: AtomicU64,
    /// Group commits of served items by the background recorder.
    pub record_batches: AtomicU64,
    /// Rows those group commits wrote.
    pub recorded_rows: AtomicU64,
    /// Filter builds a request ran itself (its scope had no filter and building was cheaper
    /// than the exact path).
    pub builds_inline: AtomicU64,
    /// Requests that waited for their scope's build running on another thread.
    pub build_waits: AtomicU64,
    /// Requests sent to the exact path because the filter back-end failed (timeout, server
    /// error): under every policy their answers come from the store.
    pub filter_errors: AtomicU64,
    /// Local filters loaded from the snapshot at start.
    pub restored_filters: AtomicU64,
    /// Restored filters brought up to date with the store rows recorded after their snapshot.
    pub catch_ups: AtomicU64,
    /// Snapshot files (or single filters in one) refused as damaged or stale, and rebuilt.
    pub snapshots_refused: AtomicU64,
    /// Snapshots of the local filters written.
    pub snapshot_writes: AtomicU64,
    /// Group commits that failed (the store was down or refused them); their rows stay queued
    /// and are committed by a later attempt.
    pub record_failures: AtomicU64,
    /// Rows put back into the recorder after a restart from a log of the caller's
    /// ([`crate::Gate::replay`]: serve's append-only log), committed again (idempotently).
    pub replayed_rows: AtomicU64,
    /// Time per request inside the gate (`unseen`).
    pub request_latency: Histogram,
    /// Time per exact-store call.
    pub store_latency: Histogram,
    /// Measured costs for the cold-path rule.
    pub(crate) costs: Costs,
}

/// Filter-side gauges, sampled at scrape time.
pub(crate) struct FilterGauges {
    pub resident_filters: u64,
    pub memory_bytes: u64,
    /// Count of resident filters per saturation bucket (last slot = above every bound).
    pub saturation: [u64; SATURATION_BOUNDS.len() + 1],
}

impl Default for Metrics {
    fn default() -> Self {
        let zero = || AtomicU64::new(0);
        Metrics {
            requests: zero(),
            candidates: zero(),
            filter_maybe: zero(),
            filter_negatives: zero(),
            exact_lookups: zero(),
            cache_hits: zero(),
            store_reads: zero(),
            exact_misses_after_maybe: zero(),
            trust_sample_maybe: zero(),
            trust_sample_false_positives: zero(),
            trust_sample_unseen: zero(),
            history_loads: zero(),
            rebuilds: zero(),
            rotations: zero(),
            evictions: zero(),
            record_batches: zero(),
            recorded_rows: zero(),
            builds_inline: zero(),
            build_waits: zero(),
            filter_errors: zero(),
            restored_filters: zero(),
            catch_ups: zero(),
            snapshots_refused: zero(),
            snapshot_writes: zero(),
            record_failures: zero(),
            replayed_rows: zero(),
            request_latency: Histogram::new(),
            store_latency: Histogram::new(),
            costs: Costs::default(),
        }
    }
}

fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

impl Metrics {
    /// Estimated trust-mode over-filter rate: false positives among sampled "maybe" answers per
    /// unseen candidate in the same sampled requests.
    pub fn trust_over_filter_estimate(&self) -> f64 {
        ratio(
            self.trust_sample_false_positives.load(Relaxed),
            self.trust_sample_unseen.load(Relaxed),
        )
    }

    /// One group commit of `rows` rows that took `elapsed` (its time counts as a store call).
    pub(crate) fn record_batch(&self, rows: usize, elapsed: Duration) {
        self.record_batches.fetch_add(1, Relaxed);
        self.recorded_rows.fetch_add(rows as u64, Relaxed);
        self.store_latency.observe(elapsed);
    }

    /// The cold-path rule's measured costs in nanoseconds: [exact-path store time per item
    /// looked up, filter build time per history row]; zeros before the first sample.
    pub fn cost_estimates(&self) -> [f64; 2] {
        self.costs.snapshot()
    }

    /// One exact-path store batch of `items` that took `elapsed` (for the cold-path rule).
    pub(crate) fn exact_batch(&self, items: usize, elapsed: Duration) {
        self.costs.observe_lookups(items, elapsed);
    }

    pub(crate) fn render(&self, gauges: &FilterGauges) -> String {
        let mut out = Exposition::new();
        let counters: [(&str, &str, &AtomicU64); 25] = [
            (
                "bloomgate_gate_requests_total",
                "Requests answered by the gate.",
                &self.requests,
            ),
            (
                "bloomgate_gate_candidates_total",
                "Candidate items checked.",
                &self.candidates,
            ),
            (
                "bloomgate_gate_filter_maybe_total",
                "Candidates the filter answered maybe for.",
                &self.filter_maybe,
            ),
            (
                "bloomgate_gate_filter_negatives_total",
                "Candidates the filter answered definitely not seen for (no exact lookup).",
                &self.filter_negatives,
            ),
            (
                "bloomgate_gate_exact_lookups_total",
                "Candidates sent to the exact path (cache, then store).",
                &self.exact_lookups,
            ),
            (
                "bloomgate_gate_cache_hits_total",
                "Exact lookups answered by the cache.",
                &self.cache_hits,
            ),
            (
                "bloomgate_gate_store_reads_total",
                "Checks answered by the store plus history loads.",
                &self.store_reads,
            ),
            (
                "bloomgate_gate_exact_misses_after_maybe_total",
                "Filter maybe answered unseen by the exact path (false-positive proxy).",
                &self.exact_misses_after_maybe,
            ),
            (
                "bloomgate_gate_trust_sample_maybe_total",
                "Trust mode: sampled maybe answers verified against the store.",
                &self.trust_sample_maybe,
            ),
            (
                "bloomgate_gate_trust_sample_false_positives_total",
                "Trust mode: sampled maybe answers the store says are unseen.",
                &self.trust_sample_false_positives,
            ),
            (
                "bloomgate_gate_history_loads_total",
                "Scope histories loaded from the store (builds and rebuilds).",
                &self.history_loads,
            ),
            (
                "bloomgate_gate_rebuilds_total",
                "Filters rebuilt (in the background) because they outgrew their capacity or FPR budget.",
                &self.rebuilds,
            ),
            (
                "bloomgate_gate_rotations_total",
                "Filter generation rotations.",
                &self.rotations,
            ),
            (
                "bloomgate_gate_evictions_total",
                "Idle filters evicted to stay within the memory budget.",
                &self.evictions,
            ),
            (
                "bloomgate_gate_record_batches_total",
                "Group commits of served items to the store.",
                &self.record_batches,
            ),
            (
                "bloomgate_gate_recorded_rows_total",
                "Served items written to the store.",
                &self.recorded_rows,
            ),
            (
                "bloomgate_gate_builds_inline_total",
                "Filter builds run by the request that needed them (cheaper than the exact path).",
                &self.builds_inline,
            ),
            (
                "bloomgate_gate_build_waits_total",
                "Requests that waited for their scope's filter build on another thread.",
                &self.build_waits,
            ),
            (
                "bloomgate_gate_filter_errors_total",
                "Requests sent to the exact path because the filter back-end failed.",
                &self.filter_errors,
            ),
            (
                "bloomgate_gate_restored_filters_total",
                "Local filters loaded from the snapshot at start.",
                &self.restored_filters,
            ),
            (
                "bloomgate_gate_catch_ups_total",
                "Restored filters brought up to date with the store.",
                &self.catch_ups,
            ),
            (
                "bloomgate_gate_snapshots_refused_total",
                "Snapshot files or filters refused as damaged or stale (rebuilt from the store).",
                &self.snapshots_refused,
            ),
            (
                "bloomgate_gate_snapshot_writes_total",
                "Snapshots of the local filters written.",
                &self.snapshot_writes,
            ),
            (
                "bloomgate_gate_record_failures_total",
                "Group commits that failed; their rows stay queued and are retried.",
                &self.record_failures,
            ),
            (
                "bloomgate_gate_replayed_rows_total",
                "Rows put back into the recorder from a log after a restart (committed again).",
                &self.replayed_rows,
            ),
        ];
        for (name, help, value) in counters {
            out.counter(name, help, value.load(Relaxed));
        }
        let candidates = self.candidates.load(Relaxed);
        let gauges_f64 = [
            (
                "bloomgate_gate_pass_through_ratio",
                "Exact lookups per candidate.",
                ratio(self.exact_lookups.load(Relaxed), candidates),
            ),
            (
                "bloomgate_gate_false_positive_proxy_ratio",
                "Exact misses after maybe per maybe.",
                ratio(
                    self.exact_misses_after_maybe.load(Relaxed),
                    self.filter_maybe.load(Relaxed),
                ),
            ),
            (
                "bloomgate_gate_trust_over_filter_estimate_ratio",
                "Trust mode: estimated unseen candidates wrongly dropped per unseen candidate.",
                self.trust_over_filter_estimate(),
            ),
            (
                "bloomgate_gate_filters_resident",
                "Scope filters in memory.",
                gauges.resident_filters as f64,
            ),
            (
                "bloomgate_gate_filter_memory_bytes",
                "Bytes held by all scope filters.",
                gauges.memory_bytes as f64,
            ),
        ];
        let [lookup_ns, row_ns] = self.costs.snapshot();
        let gauges_f64 = gauges_f64.into_iter().chain([
            (
                "bloomgate_gate_exact_lookup_cost_seconds",
                "Measured exact-path store time per candidate looked up (cold-path rule).",
                lookup_ns * 1e-9,
            ),
            (
                "bloomgate_gate_build_row_cost_seconds",
                "Measured filter build time per history row (cold-path rule).",
                row_ns * 1e-9,
            ),
        ]);
        for (name, help, value) in gauges_f64 {
            out.gauge(name, help, value);
        }
        let name = "bloomgate_gate_filters_by_saturation";
        out.family(
            name,
            Kind::Gauge,
            "Resident filters whose estimated FPR is at most `at_most` times the FPR budget.",
        );
        // Cumulative like histogram buckets, but a gauge: the label is not `le`, which
        // Prometheus reserves for histograms.
        let mut cumulative = 0;
        for (bound, count) in SATURATION_BOUNDS.iter().zip(&gauges.saturation) {
            cumulative += count;
            out.sample(name, &[("at_most", &bound.to_string())], cumulative);
        }
        let total: u64 = gauges.saturation.iter().sum();
        out.sample(name, &[("at_most", "+Inf")], total);
        self.request_latency.render(
            &mut out,
            "bloomgate_gate_request_duration_seconds",
            "Gate time per request.",
        );
        self.store_latency.render(
            &mut out,
            "bloomgate_gate_store_call_duration_seconds",
            "Time per exact-store call.",
        );
        out.finish()
    }
}
