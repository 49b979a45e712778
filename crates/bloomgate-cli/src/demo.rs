//! `bloomgate demo …`: reproducible demonstrations. The work is in the gate crate's simulation
//! ([`bloomgate_gate::sim`]); this file parses flags, draws progress bars and prints.

use std::net::SocketAddr;

use bloomgate_gate::sim::{run_feed, FeedConfig, Progress, Stage};
use bloomgate_gate::{FilterUrl, StoreUrl};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    demo: Demo,
}

#[derive(clap::Subcommand)]
enum Demo {
    /// The feed-service case study: exact vs verify vs trust on a real store.
    Feed(FeedArgs),
}

#[derive(clap::Args)]
struct FeedArgs {
    /// Users (scopes) [default: 10000, --quick 1000]
    #[arg(long)]
    users: Option<u64>,
    /// Mean items per user seen within the retention window at the start.
    #[arg(long)]
    history: Option<u64>,
    /// Requests in the stream [default: 500000, --quick 50000]
    #[arg(long)]
    requests: Option<u64>,
    /// Candidate items per request.
    #[arg(long, default_value_t = 120)]
    candidates: usize,
    /// Share of candidates the user has already seen.
    #[arg(long, default_value_t = 0.025)]
    seen_ratio: f64,
    /// Request worker threads.
    #[arg(long)]
    concurrency: Option<usize>,
    /// Exact store: sqlite:PATH, redis://HOST:PORT or postgres://USER@HOST:PORT/DB (one table
    /// per mode) [default: sqlite in the temp dir]
    #[arg(long)]
    store: Option<StoreUrl>,
    /// Scope filters: local, resp://HOST:PORT (a bloomgate server, or Redis with the module) or
    /// redis+cluster://HOST:PORT[,HOST:PORT...] (a Redis Cluster with the module).
    #[arg(long, default_value = "local")]
    filters: FilterUrl,
    /// Fixed delay added to every store query, in microseconds (models a networked store).
    #[arg(long, default_value_t = 0)]
    store_latency_us: u64,
    /// Open loop: requests arrive at this many per second whatever the latency (queueing
    /// shows in the tail) [default: closed loop, each worker waits for its previous reply]
    #[arg(long)]
    rate: Option<f64>,
    /// Build every user's filter before the timed requests, as in a service that has been
    /// running (default: the cold start is timed too; report both when comparing)
    #[arg(long)]
    warm: bool,
    /// Stop and reopen the gate halfway through each mode on the same store and filter
    /// directory (a deploy); reports the first 1,000 requests after reopening
    #[arg(long)]
    restart: bool,
    /// Memory budget of all scope filters together, in KiB (the least recently used are evicted
    /// beyond it).
    #[arg(long, default_value_t = 256 << 10)]
    filter_memory_kib: u64,
    /// Smaller run: finishes in under two minutes on two cores.
    #[arg(long)]
    quick: bool,
    /// Print only JSON on stdout (table and progress go to stderr).
    #[arg(long)]
    json: bool,
    /// Serve Prometheus metrics of the running mode at http://ADDR/metrics.
    #[arg(long)]
    metrics_addr: Option<SocketAddr>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let Demo::Feed(args) = args.demo;
    let defaults = FeedConfig::defaults(args.quick);
    let config = FeedConfig {
        users: args.users.unwrap_or(defaults.users),
        history: args.history.unwrap_or(defaults.history),
        requests: args.requests.unwrap_or(defaults.requests),
        candidates: args.candidates,
        seen_ratio: args.seen_ratio,
        concurrency: args.concurrency.unwrap_or(defaults.concurrency),
        store: args.store.unwrap_or(defaults.store),
        filters: args.filters,
        store_latency_us: args.store_latency_us,
        metrics_addr: args.metrics_addr,
        rate: args.rate,
        warm: args.warm,
        restart: args.restart,
        filter_memory_bytes: args.filter_memory_kib.saturating_mul(1024),
        ..defaults
    };
    let report = run_feed(&config, &Bars)?;
    eprint!("{}", report.table());
    if args.json {
        println!("{}", report.json());
    }
    Ok(())
}

/// The simulation's stages as progress bars on stderr.
struct Bars;

struct Bar(ProgressBar);

impl Progress for Bars {
    type Stage = Bar;
    fn start(&self, name: String, len: u64) -> Bar {
        let bar = ProgressBar::new(len);
        bar.set_style(
            ProgressStyle::with_template("{msg:>22} [{bar:40}] {pos}/{len} ({eta})")
                .expect("static template")
                .progress_chars("=> "),
        );
        bar.set_message(name);
        Bar(bar)
    }
}

impl Stage for Bar {
    fn step(&self) {
        self.0.inc(1);
    }
    fn finish(self) {
        self.0.finish_and_clear();
    }
}
