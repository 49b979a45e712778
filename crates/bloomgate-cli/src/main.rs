//! The one `bloomgate` binary. Thin: argument parsing and output formatting only; the work is
//! done by the library crates.

#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};

mod build;
mod calc;
mod demo;
mod feed;
mod import_rdb;
mod info;
mod input;
mod query;
mod remove;
mod serve;
mod units;

/// jemalloc: its size classes cost small keys less than glibc's malloc (measured in
/// BENCHMARKS.md, "Snapshots and memory"), and its statistics give `used_memory`.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "bloomgate",
    version,
    about = "Bloom filters as a production lever"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Size a filter: any sufficient subset of items, FPR, bits and hashes.
    Calc(calc::Args),
    /// Build a filter file from one key per line.
    Build(build::Args),
    /// Ask a filter file whether keys are present.
    Query(query::Args),
    /// Describe a filter file.
    Info(info::Args),
    /// Remove keys from a counting or cuckoo filter file.
    Remove(remove::Args),
    /// Import the BF/CF keys of a Redis RDB file into a server or a data directory.
    ImportRdb(import_rdb::Args),
    /// Run the Redis-protocol server (RedisBloom-compatible BF.*/CF.* commands).
    Serve(serve::Args),
    /// Reproducible demonstrations (`demo feed`).
    Demo(demo::Args),
}

/// `--layout` / `--kind` values shared by several subcommands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LayoutArg {
    Classic,
    Blocked,
    Fastlocal,
}

impl LayoutArg {
    fn name(self) -> &'static str {
        match self {
            LayoutArg::Classic => "classic",
            LayoutArg::Blocked => "blocked",
            LayoutArg::Fastlocal => "fastlocal",
        }
    }
}

impl From<LayoutArg> for bloomgate::Layout {
    fn from(arg: LayoutArg) -> Self {
        match arg {
            LayoutArg::Classic => bloomgate::Layout::Classic,
            LayoutArg::Blocked => bloomgate::Layout::Blocked,
            LayoutArg::Fastlocal => bloomgate::Layout::FastLocal,
        }
    }
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Calc(args) => calc::run(args),
        Command::Build(args) => build::run(args),
        Command::Query(args) => query::run(args),
        Command::Info(args) => info::run(args),
        Command::Remove(args) => remove::run(args),
        Command::ImportRdb(args) => import_rdb::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Demo(args) => demo::run(args),
    };
    if let Err(err) = result {
        eprintln!("bloomgate: {err:#}");
        std::process::exit(1);
    }
}
