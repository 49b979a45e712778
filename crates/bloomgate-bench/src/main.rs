//! bloomgate-bench: bloomgate side by side with the best Rust filters and with the machine's
//! memory floor, on identical keys in one run, so ratios hold on a noisy machine (issue 3).
//!
//! `cargo run --release -p bloomgate-bench -- [--quick] [--json] [--plots DIR] [--sweep]`
//! - default (full): 1M, 10M, 100M items, a ≥ 1 GiB filter, the primer's headline cases
//!   (100M usernames at 1%, 1B keys at 1% built in parallel) and the accuracy sweep;
//! - `--quick` (< 4 min on 2 cores): every contender at 1M items, one 256 MiB filter for the
//!   Bloom contenders that scale, with the floor;
//! - `--sweep`: only the accuracy sweep (bits per item 4…24 and power-of-two sizes);
//! - `--json`: one JSON object on stdout; the table always goes to stderr;
//! - `--plots DIR`: SVG plots (FPR vs bits per item; ns/query vs filter size with the floor).

use bloomgate_bench::{contender, floor, keys, ours, peers, plots, report, sweep, timing};

use contender::{measure, Contender, Plan, Probes};
use floor::Floor;
use keys::{keys, present_sample, Key, Stream};
use report::{Document, Group, Machine, Row, Summary};
use std::path::PathBuf;
use sweep::SweepPoint;

/// Every contender, in table order.
const ALL: &[&str] = &[
    "bloomgate-classic",
    "bloomgate-blocked",
    "bloomgate-concurrent",
    "bloomgate-counting",
    "bloomgate-scalable",
    "bloomgate-cuckoo",
    "fastbloom",
    "fastbloom-samehash",
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
    "fastbloom",
    "fastbloom-samehash",
    "bloomfilter",
    "sbbf-rs",
];
/// The contenders run on filters larger than the last-level cache.
const LARGE: &[&str] = &[
    "bloomgate-classic",
    "bloomgate-blocked",
    "fastbloom",
    "sbbf-rs",
];

/// Bits per item of every timed comparison (the 1M-keys target is at 10 bits/item).
const BITS_PER_ITEM: f64 = 10.0;

/// Calls `$f::<ContenderType>($args...)` for the contender named `$name`.
macro_rules! dispatch {
    ($name:expr, $f:ident ( $($arg:expr),* )) => {
        match $name {
            "bloomgate-classic" => $f::<ours::Classic>($($arg),*),
            "bloomgate-blocked" => $f::<ours::Blocked>($($arg),*),
            "bloomgate-concurrent" => $f::<ours::Concurrent>($($arg),*),
            "bloomgate-counting" => $f::<ours::Counting>($($arg),*),
            "bloomgate-scalable" => $f::<ours::Scalable>($($arg),*),
            "bloomgate-cuckoo" => $f::<ours::Cuckoo>($($arg),*),
            "fastbloom" => $f::<peers::Fastbloom>($($arg),*),
            "fastbloom-samehash" => $f::<peers::FastbloomSameHash>($($arg),*),
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
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        only: None,
        quick: false,
        json: false,
        sweep_only: false,
        plots: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => args.quick = true,
            "--json" => args.json = true,
            "--sweep" => args.sweep_only = true,
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
                return Err("usage: bloomgate-bench [--quick] [--json] [--plots DIR] [--sweep] [--only NAME,...]".into());
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

/// Measures `C` at `plan` unless it cannot fit in memory, reporting either way.
fn run_one<C: Contender>(
    plan: &Plan,
    probes: &Probes,
    rows: &mut Vec<Row>,
    summaries: &mut Vec<Summary>,
) {
    let need = C::memory_estimate(plan);
    let avail = available_memory();
    if need > avail / 10 * 8 {
        eprintln!(
            "  skip {:<20} needs ≈{} but {} is available",
            C::NAME,
            report::human_bytes(need),
            report::human_bytes(avail)
        );
        return;
    }
    eprint!("  {:<22}", C::NAME);
    let started = std::time::Instant::now();
    match measure::<C>(plan, probes) {
        Ok((r, s)) => {
            eprintln!(" done in {:.1} s", started.elapsed().as_secs_f64());
            rows.extend(r);
            summaries.push(s);
        }
        Err(e) => eprintln!(" FAILED: {e}"),
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

/// Runs the named contenders at one size, with the floor for a buffer of the filter's size.
fn run_group(run: &mut Run, title: String, plan: Plan, names: &[&str], probes: Probes) {
    let names: Vec<&str> = names.iter().copied().filter(|n| run.selected(n)).collect();
    eprintln!(
        "\n-- {title}: {} items, {} bits/item",
        plan.items, plan.bits_per_item
    );
    let bytes = plan.bits / 8;
    let floor_reads = 20_000_000;
    run.floors.extend(floor::probe(bytes, floor_reads, 3));
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
    for name in &names {
        dispatch!(
            *name,
            run_one(&plan, &probes, &mut run.rows, &mut summaries)
        );
    }
    report::print_table(&title, &summaries, &run.floors, hash_ns);
    run.groups.push(Group { summaries, hash_ns });
}

/// Probe keys for `items`: up to `sample` present keys and max(1M, sample) absent keys.
fn probes(items: u64, sample: usize, reps: u32, build_reps: u32) -> Probes {
    Probes {
        hit: present_sample(items, sample),
        miss: keys(Stream::Absent, 0, sample.max(1_000_000)),
        reps,
        build_reps,
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

/// The primer's headline cases at 1%: 100M usernames (≈120 MB, build time) and 1B keys
/// (≈1.2 GB) built in parallel on every core.
fn run_headlines(run: &mut Run) {
    let items = 100_000_000;
    let mut plans = Vec::new();
    for (name, layout) in [
        ("bloomgate-classic", bloomgate::Layout::Classic),
        ("bloomgate-blocked", bloomgate::Layout::Blocked),
    ] {
        match bloomgate::Params::for_items(layout, items, 0.01) {
            Ok(p) => plans.push((name, Plan::sized(items, p.bits))),
            Err(e) => eprintln!("  {name}: {e}"),
        }
    }
    if let Some((_, plan)) = plans.first() {
        let title = "headline: 100M usernames at 1% (sized by Params::for_items)".to_string();
        eprintln!("\n-- {title}");
        run.floors
            .extend(floor::probe(plan.bits / 8, 20_000_000, 3));
        let probes = probes(items, 4_000_000, 3, 1);
        let hash_ns = hash_only_ns(&probes.miss, probes.reps);
        let mut summaries = Vec::new();
        for (name, plan) in &plans {
            dispatch!(*name, run_one(plan, &probes, &mut run.rows, &mut summaries));
        }
        report::print_table(&title, &summaries, &run.floors, hash_ns);
        run.groups.push(Group { summaries, hash_ns });
    }

    let items = 1_000_000_000;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let title = format!("headline: 1B keys at 1%, parallel build on {threads} threads");
    eprintln!("\n-- {title}");
    let probes = probes(items, 4_000_000, 3, 1);
    let hash_ns = hash_only_ns(&probes.miss, probes.reps);
    match ours::parallel_blocked(items, 0.01, threads, &probes) {
        Ok((rows, summary)) => {
            run.floors
                .extend(floor::probe(summary.bytes, 20_000_000, 3));
            run.rows.extend(rows);
            report::print_table(&title, std::slice::from_ref(&summary), &run.floors, hash_ns);
            run.groups.push(Group {
                summaries: vec![summary],
                hash_ns,
            });
        }
        Err(e) => eprintln!("  bloomgate-blocked parallel build FAILED: {e}"),
    }
}

fn sweep_point<C: Contender>(plan: &Plan, miss: &[Key], pow2: bool) -> Result<SweepPoint, String> {
    sweep::point::<C>(plan, miss, pow2)
}

/// Filter size in bits for a ≥ `bytes` filter at `BITS_PER_ITEM`: items = bits / 10.
fn items_for_bytes(bytes: u64) -> u64 {
    bytes * 8 / BITS_PER_ITEM as u64
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
    let started = std::time::Instant::now();
    let mut run = Run {
        only: args.only.clone(),
        ..Run::default()
    };
    let every_bits: Vec<f64> = (4..=24).map(f64::from).collect();

    if args.sweep_only {
        run_sweep(&mut run, 1_000_000, &every_bits, 1 << 24, 4_000_000);
    } else if args.quick {
        let plan = Plan::at_bits(1_000_000, BITS_PER_ITEM);
        run_group(
            &mut run,
            "1M items".into(),
            plan,
            ALL,
            probes(plan.items, 1_000_000, 5, 3),
        );
        let plan = Plan::at_bits(items_for_bytes(256 << 20), BITS_PER_ITEM);
        run_group(
            &mut run,
            "256 MiB filter".into(),
            plan,
            LARGE,
            probes(plan.items, 2_000_000, 2, 1),
        );
        if args.plots.is_some() {
            let some_bits: Vec<f64> = (2..=12).map(|h| f64::from(h * 2)).collect();
            run_sweep(&mut run, 100_000, &some_bits, 1 << 20, 1_000_000);
        }
    } else {
        for items in [1_000_000u64, 10_000_000, 100_000_000] {
            let plan = Plan::at_bits(items, BITS_PER_ITEM);
            let (sample, reps, build_reps) = if items <= 1_000_000 {
                (1_000_000, 7, 5)
            } else {
                (4_000_000, 3, 1)
            };
            run_group(
                &mut run,
                format!("{}M items", items / 1_000_000),
                plan,
                ALL,
                probes(items, sample, reps, build_reps),
            );
        }
        let plan = Plan::at_bits(items_for_bytes(1 << 30), BITS_PER_ITEM);
        run_group(
            &mut run,
            "1 GiB filter".into(),
            plan,
            LARGE,
            probes(plan.items, 4_000_000, 2, 1),
        );
        run_headlines(&mut run);
        run_sweep(&mut run, 1_000_000, &every_bits, 1 << 24, 4_000_000);
    }
    eprintln!(
        "\ntotal {:.1} s wall, {:.1} s CPU",
        started.elapsed().as_secs_f64(),
        cpu_seconds()
    );

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
