//! The one `bloomgate` binary. Thin: argument parsing and output formatting only; the work is
//! done by the library crates.

#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};

mod build;
mod calc;
mod demo;
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
    propagate_version = true,
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
    /// Import the RedisBloom keys (BF, CF, CMS, TopK, t-digest, WF) of a Redis RDB file into a
    /// server or a data directory.
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
    let cli = Cli::try_parse().unwrap_or_else(|err| usage_error(err));
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
        // One line on stderr (the error and its causes, joined by ": "), exit status 1:
        // docs/cli.md, "Errors and exit codes".
        eprintln!("bloomgate: {}", one_line(&format!("{err:#}")));
        std::process::exit(EXIT_FAILURE);
    }
}

/// The command could not do its work (a file, an I/O error, a refused configuration, a server
/// that could not start or stopped on an error).
const EXIT_FAILURE: i32 = 1;
/// The command line is wrong (unknown command or option, missing or malformed argument).
const EXIT_USAGE: i32 = 2;

/// `--help` and `--version` print as clap prints them (exit 0); every other parse error is one
/// line in the CLI's error style, naming the command whose `--help` explains it, exit status 2.
fn usage_error(err: clap::Error) -> ! {
    use clap::error::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        err.exit();
    }
    let text = err.render().to_string();
    let message = match err.kind() {
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
            "a command is required".to_string()
        }
        _ => text
            .lines()
            .next()
            .unwrap_or("invalid arguments")
            .trim_start_matches("error: ")
            .to_string(),
    };
    // "Usage: bloomgate query [OPTIONS] <FILTER> ..." names the command to ask for help.
    let command = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Usage: "))
        .map(|usage| {
            usage
                .split_whitespace()
                .take_while(|w| !w.starts_with(['[', '<', '-']))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "bloomgate".to_string());
    eprintln!("bloomgate: {} (see {command} --help)", one_line(&message));
    std::process::exit(EXIT_USAGE);
}

/// Messages stay on one line whatever their causes contain.
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}
