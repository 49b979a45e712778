//! A run's results: each mode's figures in the shape of the case study's, their JSON, the
//! targets the run is judged against, and the table printed beside the published figures.

use std::fmt::Write as _;

use bloomgate::memory::human_bytes;

use super::{FeedConfig, RUN_RETENTIONS};

/// One mode's results, in the shape of the case study's.
#[derive(Clone, Debug)]
pub struct ModeResult {
    /// Requests served.
    pub requests: u64,
    /// Requests and candidate checks per second of wall time (until every served item is
    /// committed to the store).
    pub requests_per_sec: f64,
    /// Candidate checks per second (see `requests_per_sec`).
    pub checks_per_sec: f64,
    /// Process CPU (user + system, every thread: workload generator, gate, recorder, builder,
    /// SQLite) per request.
    pub cpu_ms_per_request: Option<f64>,
    /// Rows the background recorder committed, in how many group commits.
    pub recorded_rows: u64,
    /// Group commits of the recorder (see `recorded_rows`).
    pub record_batches: u64,
    /// Candidates per request.
    pub candidates_per_request: f64,
    /// Candidates per request that went to the exact path (cache, then store).
    pub exact_lookups_per_request: f64,
    /// Membership checks the store answered (cache misses), plus one per history load.
    pub store_reads: u64,
    /// Request latency quantiles, in ms (`unseen` + `record`).
    pub p50_ms: f64,
    /// See `p50_ms`.
    pub p95_ms: f64,
    /// See `p50_ms`.
    pub p99_ms: f64,
    /// Unseen candidates the gate dropped, over all unseen candidates (by the ground truth).
    pub over_filtered_rate: f64,
    /// Items shown that the user had seen within the retention (must be 0).
    pub duplicates_shown: u64,
    /// Bytes held by the scope filters at the end.
    pub filter_bytes: u64,
    // Lifecycle evidence, shown in the table.
    /// Scope histories loaded from the store (builds, rebuilds, catch-ups, remote loads).
    pub history_loads: u64,
    /// Generation rotations applied to local filters.
    pub rotations: u64,
    /// Filters rebuilt because they outgrew their capacity or FPR budget.
    pub rebuilds: u64,
    /// Filters dropped (local) or deleted (remote) to stay within the memory budget.
    pub evictions: u64,
    /// Store rows the retention schedule expired.
    pub expired_rows: u64,
    /// Trust mode's sampled estimate of its over-filtering.
    pub over_filter_estimate: f64,
    /// Wall time of the requests, in seconds.
    pub wall_secs: f64,
    /// Filter builds run by the request that needed them, and requests that waited for one.
    pub builds_inline: u64,
    /// See `builds_inline`.
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
    /// Requests in the stretch.
    pub requests: u64,
    /// Candidates per request that went to the exact path.
    pub exact_lookups_per_request: f64,
    /// Membership checks the store answered, plus one per history load.
    pub store_reads: u64,
    /// 99th percentile request latency, in ms.
    pub p99_ms: f64,
    /// Filters loaded from the snapshot, and how many caught up with the store (after restart).
    pub restored_filters: u64,
    /// See `restored_filters`.
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
    /// The run met it.
    Met,
    /// The run missed it.
    Missed,
    /// The run's parameters cannot show it (the reason).
    NotJudged(String),
}

/// The three modes of one run.
pub struct FeedReport {
    /// What the run was told.
    pub config: FeedConfig,
    /// Every candidate through the exact path (the baseline).
    pub exact: ModeResult,
    /// Filter "maybe" answers verified against the store.
    pub verify: ModeResult,
    /// Filter "maybe" answers trusted.
    pub trust: ModeResult,
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
        let (store, filters) = (&c.store, &c.filters);
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
