//! bloomgate-bench: bloomgate side by side with the best Rust filters and with the machine's
//! memory floor, on identical keys in one run, so ratios hold on a noisy machine.
//!
//! `cargo run --release -p bloomgate-bench -- [--quick] [--json] [--plots DIR] [--sweep]
//! [--only NAME,...] [--bits B,...]`
//! - default (full, ≈ 30 min on 2 cores): every contender at 1M, 10M and 100M items, the four
//!   Bloom contenders that scale at a 1 GiB filter, the headline cases (100M usernames
//!   at 1%, 1B keys at 1% built in parallel) and the accuracy sweep;
//! - `--quick` (< 4 min on 2 cores): every contender at 1M items, and the four Bloom contenders
//!   that scale at a 256 MiB filter, with the floor;
//! - `--sweep`: only the accuracy sweep (bits per item 4…24 and power-of-two sizes);
//! - `--bits 8,10,16`: run every timed size at each of these bits per item (default 10);
//! - `--json`: one JSON object on stdout; the table always goes to stderr;
//! - `--plots DIR`: SVG plots (FPR vs bits per item; ns/query vs filter size with the floor).
//!
//! Filters of 100M items and more are filled untimed (by several threads where the filter can
//! merge copies) and `insert` is timed on a sample of further keys (`contender::Sampled`).
//! `BLOOMGATE_BENCH_SCALE=N` divides every size by N: a smoke test of a mode's whole path.

#![forbid(unsafe_code)]

use bloomgate_bench::{contender, floor, keys, ours, peers, plots, report, results, sweep, timing};

use contender::{measure, Contender, Plan, Probes, Sampled};
use floor::Floor;
use keys::{keys, present_sample, usernames, Key, Stream};
use report::{Document, Group, Machine};
use results::{Row, Summary};
use std::path::PathBuf;
use sweep::SweepPoint;

/// Every contender, in table order.
const ALL: &[&str] = &[
    "bloomgate-classic",
    "bloomgate-blocked",
    "bloomgate-fastlocal",
    "bloomgate-concurrent",
    "bloomgate-counting",
    "bloomgate-scalable",
    "bloomgate-cuckoo",
    "fastbloom",
    "fastbloom-samehash",
    "fastbloom-samehash-counted",
    "bloomfilter",
    "sbbf-rs",
    "xorf-binaryfuse8",
    "cuckoofilter",
    "qfilter",
    "hashset",
];
/// The Bloom filters (the accuracy sweep's subjects).
const BLOOM: &[&str] = &[
    "bloomgate-classic",
    "bloomgate-blocked",
    "bloomgate-fastlocal",
    "fastbloom",
    "fastbloom-samehash",
    "bloomfilter",
    "sbbf-rs",
];
/// The contenders run on filters larger than the last-level cache.
const LARGE: &[&str] = &[
    "bloomgate-classic",
    "bloomgate-blocked",
    "bloomgate-fastlocal",
    "fastbloom",
    "sbbf-rs",
];

/// Bits per item of the timed comparisons unless `--bits` says otherwise (the 1M-key
/// comparison is judged at 10 bits/item).
const BITS_PER_ITEM: f64 = 10.0;

/// A contender is skipped at a size when its projected time there exceeds this: build time at
/// its previous size of ≥ 10M items scaled by the item ratio, plus that size's query time. It
/// bounds full mode on a slow or loaded machine, and the output says which were skipped.
const CONTENDER_LIMIT_S: f64 = 300.0;

/// Keys per half of the timed insert sample of a large filter (see `contender::Sampled`).
const INSERT_SAMPLE: u64 = 500_000;

/// `BLOOMGATE_BENCH_SCALE` (default 1): every item count, byte size and sample is divided by it.
fn scale() -> u64 {
    static SCALE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SCALE.get_or_init(|| {
        std::env::var("BLOOMGATE_BENCH_SCALE")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n >= 1)
            .unwrap_or(1)
    })
}

/// `n` divided by the scale, at least 1000.
fn scaled(n: u64) -> u64 {
    (n / scale()).max(1000)
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Calls `$f::<ContenderType>($args...)` for the contender named `$name`.
macro_rules! dispatch {
    ($name:expr, $f:ident ( $($arg:expr),* )) => {
        match $name {
            "bloomgate-classic" => $f::<ours::Classic>($($arg),*),
            "bloomgate-blocked" => $f::<ours::Blocked>($($arg),*),
            "bloomgate-fastlocal" => $f::<ours::FastLocal>($($arg),*),
            "bloomgate-concurrent" => $f::<ours::Concurrent>($($arg),*),
            "bloomgate-counting" => $f::<ours::Counting>($($arg),*),
            "bloomgate-scalable" => $f::<ours::Scalable>($($arg),*),
            "bloomgate-cuckoo" => $f::<ours::Cuckoo>($($arg),*),
            "fastbloom" => $f::<peers::Fastbloom>($($arg),*),
            "fastbloom-samehash" => $f::<peers::FastbloomSameHash>($($arg),*),
            "fastbloom-samehash-counted" => $f::<peers::FastbloomSameHashCounted>($($arg),*),
            "bloomfilter" => $f::<peers::Bloomfilter>($($arg),*),
            "sbbf-rs" => $f::<peers::SbbfRs>($($arg),*),
            "xorf-binaryfuse8" => $f::<peers::XorfBinaryFuse8>($($arg),*),
            "cuckoofilter" => $f::<peers::Cuckoofilter>($($arg),*),
            "qfilter" => $f::<peers::Qfilter>($($arg),*),
            "hashset" => $f::<peers::StdHashSet>($($arg),*),
            other => unreachable!("unknown contender {other}"),
        }
    };
}

struct Args {
    /// Run only these contenders (`--only a,b`), for a focused re-measurement.
    only: Option<Vec<String>>,
    quick: bool,
    json: bool,
    sweep_only: bool,
    plots: Option<PathBuf>,
    /// Bits per item of the timed groups (`--bits 8,10,16`; default 10): each size is run once
    /// per value.
    bits: Vec<f64>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        only: None,
        quick: false,
        json: false,
        sweep_only: false,
        plots: None,
        bits: vec![BITS_PER_ITEM],
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => args.quick = true,
            "--json" => args.json = true,
            "--sweep" => args.sweep_only = true,
            "--bits" => {
                args.bits = it
                    .next()
                    .ok_or("--bits needs B[,B...]")?
                    .split(',')
                    .map(|b| match b.parse::<f64>() {
                        Ok(v) if (2.0..=64.0).contains(&v) => Ok(v),
                        _ => Err(format!(
                            "--bits: {b:?} is not a number of bits per item in 2..=64"
                        )),
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--plots" => args.plots = Some(it.next().ok_or("--plots needs a directory")?.into()),
            "--only" => {
                let names: Vec<String> = it
                    .next()
                    .ok_or("--only needs NAME[,NAME...]")?
                    .split(',')
                    .map(str::to_string)
                    .collect();
                if let Some(bad) = names.iter().find(|n| !ALL.contains(&n.as_str())) {
                    return Err(format!(
                        "unknown contender {bad:?}; known: {}",
                        ALL.join(", ")
                    ));
                }
                args.only = Some(names);
            }
            "-h" | "--help" => {
                return Err("usage: bloomgate-bench [--quick] [--json] [--plots DIR] [--sweep] [--only NAME,...] [--bits B,...]".into());
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    Ok(args)
}

/// Everything one run measured.
#[derive(Default)]
struct Run {
    only: Option<Vec<String>>,
    /// Per contender at its last size of ≥ 10M items: items, build seconds and the other
    /// seconds (queries), to project its next size.
    last: std::collections::HashMap<&'static str, (u64, f64, f64)>,
    rows: Vec<Row>,
    floors: Vec<Floor>,
    groups: Vec<Group>,
    sweep: Vec<SweepPoint>,
}

impl Run {
    fn selected(&self, name: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|only| only.iter().any(|o| o == name))
    }
}

/// CPU time of this process so far (user + system), from /proc/self/stat; 0 if unreadable.
/// Wall time on a shared machine overstates what the run costs; CPU time is closer to it.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields
        .get(11..13)
        .map_or(0, |f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum());
    ticks as f64 / 100.0 // USER_HZ is 100 on Linux
}

/// Wall and CPU time at a start point; displays as the time elapsed since, e.g. `12.3 s (20.1 s
/// CPU)`: on a shared machine the CPU time tells what a step costs, the wall time what it took.
struct Started(std::time::Instant, f64);

impl Started {
    fn now() -> Started {
        Started(std::time::Instant::now(), cpu_seconds())
    }
}

impl std::fmt::Display for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.1} s ({:.1} s CPU)",
            self.0.elapsed().as_secs_f64(),
            cpu_seconds() - self.1
        )
    }
}

/// MemAvailable from /proc/meminfo, in bytes.
fn available_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(u64::MAX, |kib| kib * 1024)
}

/// Measures `C` at `plan` unless it cannot fit in memory, reporting either way; true if it ran.
fn run_one<C: Contender>(
    plan: &Plan,
    probes: &Probes,
    rows: &mut Vec<Row>,
    summaries: &mut Vec<Summary>,
) -> bool {
    let copies = match (probes.sampled, C::FILL) {
        (Some(s), contender::Fill::Merge) => s.threads as u64,
        _ => 1,
    };
    if !fits(C::NAME, C::memory_estimate(plan) * copies) {
        return false;
    }
    eprint!("  {:<22}", C::NAME);
    let started = Started::now();
    match measure::<C>(plan, probes) {
        Ok((r, s)) => {
            eprintln!(" done in {started}");
            rows.extend(r);
            summaries.push(s);
            true
        }
        Err(e) => {
            eprintln!(" FAILED: {e}");
            false
        }
    }
}

/// XXH3-128 of every key, alone: the hashing share of every query.
fn hash_only_ns(keys: &[Key], reps: u32) -> f64 {
    timing::ns_per_op(reps, keys.len(), |_, r| {
        keys[r]
            .iter()
            .fold(0u64, |acc, k| acc ^ (xxhash_rust::xxh3::xxh3_128(k) as u64))
    })
}

/// Measures the floor for a buffer of `bytes` and reports it.
fn probe_floor(run: &mut Run, bytes: u64) {
    let [independent, hashed, dependent] = floor::probe(bytes, scaled(20_000_000) as usize, 3);
    eprintln!(
        "  floor at {}: {:.2} ns/line independent ({} in flight), {:.2} hashing each key too, {:.1} ns/line dependent",
        report::human_bytes(bytes),
        independent.ns_per_line,
        floor::AHEAD,
        hashed.ns_per_line,
        dependent.ns_per_line
    );
    run.floors.extend([independent, hashed, dependent]);
}

/// Runs the named contenders at one size, with the floor for a buffer of the filter's size;
/// `names` are those run at this size, and the rest of `ALL` are reported as not run.
fn run_group(run: &mut Run, title: String, plan: Plan, names: &[&'static str], probes: Probes) {
    let left_out: Vec<&str> = ALL
        .iter()
        .copied()
        .filter(|n| run.selected(n) && !names.contains(n))
        .collect();
    let names: Vec<&str> = names.iter().copied().filter(|n| run.selected(n)).collect();
    if names.is_empty() {
        return;
    }
    eprintln!(
        "\n-- {title}: {} items, {} bits/item",
        plan.items, plan.bits_per_item
    );
    if !left_out.is_empty() {
        eprintln!(
            "  not run at this size (only the Bloom filters that scale): {}",
            left_out.join(", ")
        );
    }
    if let Some(s) = probes.sampled {
        eprintln!(
            "  filled untimed ({} threads where copies merge), insert timed on 2 × {} further keys",
            s.threads, s.sample
        );
    }
    probe_floor(run, plan.bits / 8);
    let hash_ns = hash_only_ns(&probes.miss, probes.reps);
    run.rows.push(Row {
        filter: "hash-only".into(),
        config: "XXH3-128 seed 0 of each 16-byte key".into(),
        op: "hash",
        items: plan.items,
        bits_per_item: 0.0,
        ns_per_op: hash_ns,
        fpr: None,
    });
    let mut summaries = Vec::new();
    for &name in &names {
        if let Some(&(items, build, rest)) = run.last.get(name) {
            let projected = build * plan.items as f64 / items as f64 + rest;
            if projected > CONTENDER_LIMIT_S {
                eprintln!(
                    "  skip {name:<20} would take ≈{projected:.0} s (build {build:.0} s at {items} items, scaled, + {rest:.0} s of queries; limit {CONTENDER_LIMIT_S:.0} s)"
                );
                continue;
            }
        }
        let started = std::time::Instant::now();
        let ran = dispatch!(name, run_one(&plan, &probes, &mut run.rows, &mut summaries));
        if ran && plan.items >= scaled(10_000_000) {
            let wall = started.elapsed().as_secs_f64();
            let build = summaries.last().map_or(0.0, |s| s.build_s).min(wall);
            run.last.insert(name, (plan.items, build, wall - build));
        }
    }
    report::print_table(&title, &summaries, &run.floors, hash_ns);
    run.groups.push(Group { summaries, hash_ns });
}

/// Probe keys for `items`: up to `sample` present keys and max(1M, sample) absent keys (both
/// scaled). Filters of 100M items or more are built the `Sampled` way.
fn probes(items: u64, sample: u64, reps: u32, build_reps: u32) -> Probes {
    let sample = scaled(sample);
    Probes {
        hit: present_sample(items, sample as usize),
        miss: keys(Stream::Absent, 0, sample.max(scaled(1_000_000)) as usize),
        reps,
        build_reps,
        sampled: (items >= scaled(100_000_000)).then(|| Sampled {
            sample: scaled(INSERT_SAMPLE),
            threads: threads(),
        }),
    }
}

fn run_sweep(run: &mut Run, items: u64, bits_per_item: &[f64], pow2_bits: u64, absent: usize) {
    eprintln!("\n-- accuracy sweep: {items} items, {absent} absent keys per point");
    let miss = keys(Stream::Absent, 0, absent);
    for (plan, pow2) in sweep::plans(items, bits_per_item, pow2_bits) {
        let names: Vec<&str> = BLOOM.iter().copied().filter(|n| run.selected(n)).collect();
        for name in names {
            match dispatch!(name, sweep_point(&plan, &miss, pow2)) {
                Ok(p) => run.sweep.push(p),
                Err(e) => eprintln!("  {name} at {:.1} bits/item: {e}", plan.bits_per_item),
            }
        }
    }
    sweep::print(&run.sweep);
}

/// Reports `need` bytes as not fitting when they exceed 80% of available memory.
fn fits(name: &str, need: u64) -> bool {
    let avail = available_memory();
    let fits = need <= avail / 10 * 8;
    if !fits {
        eprintln!(
            "  skip {name:<20} needs ≈{} but {} is available",
            report::human_bytes(need),
            report::human_bytes(avail)
        );
    }
    fits
}

/// Prints and records one headline table.
fn headline_table(run: &mut Run, title: &str, results: Vec<(Vec<Row>, Summary)>, hash_ns: f64) {
    let mut summaries = Vec::new();
    for (rows, summary) in results {
        run.rows.extend(rows);
        summaries.push(summary);
    }
    report::print_table(title, &summaries, &run.floors, hash_ns);
    run.groups.push(Group { summaries, hash_ns });
}

/// The headline cases at 1%: 100M usernames in about 120 MB (memory and build time),
/// and 1B keys in about 1.2 GB built in parallel on every core (build time and FPR).
fn run_headlines(run: &mut Run) {
    let items = scaled(100_000_000);
    let layouts = [
        ("bloomgate-classic", bloomgate::Layout::Classic),
        ("bloomgate-blocked", bloomgate::Layout::Blocked),
        ("bloomgate-fastlocal", bloomgate::Layout::FastLocal),
    ];
    let layouts: Vec<_> = layouts.iter().filter(|(n, _)| run.selected(n)).collect();
    if let Some(bytes) = layouts
        .iter()
        .filter_map(|(_, l)| bloomgate::Params::for_items(*l, items, 0.01).ok())
        .map(|p| p.bytes())
        .max()
    {
        let title = format!("headline: {items} usernames at 1% (Params::for_items)");
        eprintln!("\n-- {title}");
        probe_floor(run, bytes);
        let sample = scaled(4_000_000) as usize;
        let probes = ours::NameProbes {
            hit: usernames(Stream::Present, items, sample),
            miss: usernames(Stream::Absent, 0, sample),
            reps: 3,
        };
        let hash_ns = timing::ns_per_op(probes.reps, probes.miss.len(), |_, r| {
            probes.miss[r].iter().fold(0u64, |acc, k| {
                acc ^ (xxhash_rust::xxh3::xxh3_128(k.as_ref()) as u64)
            })
        });
        let mut results = Vec::new();
        for (name, layout) in layouts {
            let need = bloomgate::Params::for_items(*layout, items, 0.01).map_or(0, |p| p.bytes());
            if !fits(name, need) {
                continue;
            }
            eprint!("  {name:<22}");
            let started = Started::now();
            let result = match layout {
                bloomgate::Layout::Classic => {
                    ours::usernames::<bloomgate::BloomFilter>(items, 0.01, &probes)
                }
                bloomgate::Layout::Blocked => {
                    ours::usernames::<bloomgate::BlockedBloomFilter>(items, 0.01, &probes)
                }
                bloomgate::Layout::FastLocal => {
                    ours::usernames::<bloomgate::FastLocalBloomFilter>(items, 0.01, &probes)
                }
            };
            match result {
                Ok(r) => {
                    eprintln!(" done in {started}");
                    results.push(r);
                }
                Err(e) => eprintln!(" FAILED: {e}"),
            }
        }
        headline_table(run, &title, results, hash_ns);
    }

    if !run.selected("bloomgate-blocked") {
        return;
    }
    let items = scaled(1_000_000_000);
    let title = format!(
        "headline: {items} keys at 1%, parallel build on {} threads",
        threads()
    );
    eprintln!("\n-- {title}");
    let Ok(params) = bloomgate::Params::for_items(bloomgate::Layout::Blocked, items, 0.01) else {
        eprintln!("  bloomgate-blocked: cannot size {items} keys at 1%");
        return;
    };
    if !fits("bloomgate-blocked", params.bytes()) {
        return;
    }
    probe_floor(run, params.bytes());
    let probes = probes(items, 4_000_000, 3, 1);
    let hash_ns = hash_only_ns(&probes.miss, probes.reps);
    eprint!("  {:<22}", "bloomgate-blocked");
    let started = Started::now();
    match ours::parallel_blocked(items, 0.01, &probes) {
        Ok(result) => {
            eprintln!(" done in {started}");
            headline_table(run, &title, vec![result], hash_ns);
        }
        Err(e) => eprintln!(" FAILED: {e}"),
    }
}

fn sweep_point<C: Contender>(plan: &Plan, miss: &[Key], pow2: bool) -> Result<SweepPoint, String> {
    sweep::point::<C>(plan, miss, pow2)
}

/// Items for a filter of `bytes` (scaled) at `bits_per_item`.
fn items_for_bytes(bytes: u64, bits_per_item: f64) -> u64 {
    scaled((bytes as f64 * 8.0 / bits_per_item) as u64)
}

/// Runs `names` at one size once per bits/item in `bits` (`items` of each), the title naming
/// the bits when there are several.
fn run_size(
    run: &mut Run,
    bits: &[f64],
    size: &str,
    items: impl Fn(f64) -> u64,
    names: &[&'static str],
    probes_for: impl Fn(u64) -> Probes,
) {
    for &b in bits {
        let plan = Plan::at_bits(items(b), b);
        let title = if bits.len() > 1 {
            format!("{size}, {b} bits/item")
        } else {
            size.to_string()
        };
        run_group(run, title, plan, names, probes_for(plan.items));
    }
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mode = if args.sweep_only {
        "sweep"
    } else if args.quick {
        "quick"
    } else {
        "full"
    };
    let machine = Machine::detect(mode);
    eprintln!(
        "bloomgate-bench ({mode}) on {} ({} cores), {}",
        machine.cpu, machine.cores, machine.date
    );
    if scale() > 1 {
        eprintln!(
            "BLOOMGATE_BENCH_SCALE={}: every size divided by {} (smoke test, not a measurement)",
            scale(),
            scale()
        );
    }
    let started = Started::now();
    let mut run = Run {
        only: args.only.clone(),
        ..Run::default()
    };
    // The accuracy sweep of `--sweep` and full mode: every bits/item 4..=24 at 1M items, plus
    // power-of-two sizes.
    let every_bits: Vec<f64> = (4..=24).map(f64::from).collect();
    let full_sweep = |run: &mut Run| {
        run_sweep(
            run,
            scaled(1_000_000),
            &every_bits,
            scaled(1 << 24),
            scaled(4_000_000) as usize,
        )
    };

    if args.sweep_only {
        full_sweep(&mut run);
    } else if args.quick {
        let one_million = |_| scaled(1_000_000);
        run_size(&mut run, &args.bits, "1M items", one_million, ALL, |n| {
            probes(n, 1_000_000, 5, 3)
        });
        let fill = |bits| items_for_bytes(256 << 20, bits);
        run_size(&mut run, &args.bits, "256 MiB filter", fill, LARGE, |n| {
            probes(n, 1_000_000, 2, 1)
        });
        if args.plots.is_some() {
            let some_bits: Vec<f64> = (2..=12).map(|h| f64::from(h * 2)).collect();
            run_sweep(
                &mut run,
                scaled(100_000),
                &some_bits,
                scaled(1 << 20),
                scaled(1_000_000) as usize,
            );
        }
    } else {
        for items in [1_000_000u64, 10_000_000, 100_000_000] {
            let (sample, reps, build_reps) = if items <= 1_000_000 {
                (1_000_000, 7, 5)
            } else {
                (4_000_000, 3, 1)
            };
            let size = format!("{}M items", items / 1_000_000);
            run_size(
                &mut run,
                &args.bits,
                &size,
                |_| scaled(items),
                ALL,
                |n| probes(n, sample, reps, build_reps),
            );
        }
        let fill = |bits| items_for_bytes(1 << 30, bits);
        run_size(&mut run, &args.bits, "1 GiB filter", fill, LARGE, |n| {
            probes(n, 4_000_000, 2, 1)
        });
        run_headlines(&mut run);
        full_sweep(&mut run);
    }
    eprintln!("\ntotal {started}");

    if let Some(dir) = &args.plots {
        if let Err(e) = plots::write(dir, &run.groups, &run.floors, &run.sweep) {
            eprintln!("plots: {e}");
            std::process::exit(1);
        }
        eprintln!("plots written to {}", dir.display());
    }
    if args.json {
        let doc = Document {
            machine: &machine,
            results: &run.rows,
            floor: &run.floors,
            sweep: (!run.sweep.is_empty() && !args.quick).then_some(&run.sweep[..]),
        };
        match serde_json::to_string(&doc) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("json: {e}");
                std::process::exit(1);
            }
        }
    }
}
