//! `bloomgate build`: builds a filter file from one key per line, in parallel for the bit-array
//! kinds, and writes it atomically.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use bloomgate::any::AnyFilter;
use bloomgate::hash::DEFAULT_SEED;
use bloomgate::memory::human_bytes;
use bloomgate::{
    BitLayout, Blocked, Bloom, Classic, CountingBloomFilter, CuckooFilter, FastLocal, Layout,
    Params, ScalableBloomFilter,
};
use bloomgate::{DEFAULT_GROWTH, DEFAULT_TIGHTENING};
use indicatif::{ProgressBar, ProgressStyle};

use crate::input::{open_input, write_atomically, Lines};
use crate::units::{parse_bits, parse_count, parse_probability};

/// Inputs at least this large get a progress indicator on a terminal.
const PROGRESS_THRESHOLD_LINES: usize = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    Classic,
    Blocked,
    /// Probes anywhere in one 512-bit line from a 32-bit hash (format id 7; RocksDB's
    /// FastLocalBloom): faster queries and fewer false positives than `blocked` at 10 bits/key.
    Fastlocal,
    Counting,
    Scalable,
    Cuckoo,
}

#[derive(clap::Args)]
pub struct Args {
    /// Keys, one per line (`-` for stdin).
    #[arg(long, short = 'i')]
    input: PathBuf,
    /// Filter file to write.
    #[arg(long, short = 'o')]
    output: PathBuf,
    /// Filter kind.
    #[arg(long, value_enum, default_value_t = Kind::Classic)]
    kind: Kind,
    /// Target false-positive rate: 0.01, 1%, 1/1000.
    #[arg(long, short = 'p', value_parser = parse_probability, conflicts_with_all = ["bits", "hashes"])]
    fpr: Option<f64>,
    /// Items to size for (default: the number of input lines). For `scalable` this is the
    /// initial capacity, not a limit.
    #[arg(long, short = 'n', value_parser = parse_count)]
    items: Option<u64>,
    /// Explicit size: bits, or bytes with a unit (64MiB). Needs --hashes.
    #[arg(long, short = 'm', value_parser = parse_bits, requires = "hashes")]
    bits: Option<u64>,
    /// Explicit probes per key. Needs --bits.
    #[arg(long, short = 'k', requires = "bits")]
    hashes: Option<u32>,
    /// Size for items × (1 + H).
    #[arg(long, default_value_t = 0.0)]
    headroom: f64,
    /// XXH3-128 seed.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
}

pub fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    let lines = Lines::read(open_input(&args.input)?)?;
    let keys = lines.keys();
    let items = match args.items {
        Some(0) => bail!("--items must be at least 1"),
        Some(n) => n,
        None if keys.is_empty() => {
            bail!("the input has no keys; give --items to build an empty filter")
        }
        None => keys.len() as u64,
    };
    let progress = progress_bar(keys.len());
    let filter = build(&args, items, &keys).map_err(|e| {
        // A size this machine cannot hold: one line, with what to change.
        match e.downcast_ref::<bloomgate::Error>() {
            Some(bloomgate::Error::OutOfMemory(_)) => anyhow::anyhow!(
                "{e} (--items {items}); lower --items or raise --fpr (`bloomgate calc` shows \
                 the size)"
            ),
            _ => e,
        }
    })?;
    progress.finish_and_clear();
    let bytes = filter.to_bytes();
    write_atomically(&args.output, &bytes)?;
    eprintln!(
        "built {} filter: {} keys, {} in memory, {} on disk, estimated fpr {:.4e}, {:.2?}",
        filter.kind().name(),
        keys.len(),
        human_bytes(filter.memory_bytes() as u64),
        human_bytes(bytes.len() as u64),
        filter.estimated_fpr(),
        started.elapsed()
    );
    Ok(())
}

/// A bit filter of any layout, built over every core.
fn build_bits<L: BitLayout>(params: Params, seed: u64, keys: &[&[u8]]) -> Result<AnyFilter>
where
    Bloom<L>: Into<AnyFilter>,
{
    Ok(Bloom::<L>::build_parallel(params, seed, keys)?.into())
}

fn build(args: &Args, items: u64, keys: &[&[u8]]) -> Result<AnyFilter> {
    let bit_params = |layout: Layout| -> Result<Params> {
        Ok(match (args.fpr, args.bits, args.hashes) {
            (_, Some(m), Some(k)) => Params::new(layout, m, k, items)?,
            (Some(p), None, None) => Params::builder(layout, items, p)
                .headroom(args.headroom)
                .build()?,
            _ => bail!("give either --fpr (with optional --items) or --bits and --hashes"),
        })
    };
    let fpr_only = || -> Result<f64> {
        match (args.fpr, args.bits) {
            (Some(p), None) => Ok(p),
            _ => bail!(
                "a {:?} filter is sized with --fpr (and --items), not --bits/--hashes",
                args.kind
            ),
        }
    };
    Ok(match args.kind {
        Kind::Classic => build_bits::<Classic>(bit_params(Classic::LAYOUT)?, args.seed, keys)?,
        Kind::Blocked => build_bits::<Blocked>(bit_params(Blocked::LAYOUT)?, args.seed, keys)?,
        Kind::Fastlocal => {
            build_bits::<FastLocal>(bit_params(FastLocal::LAYOUT)?, args.seed, keys)?
        }
        Kind::Counting => {
            let mut filter =
                CountingBloomFilter::with_params(bit_params(Layout::Classic)?, args.seed)?;
            for key in keys {
                filter.insert(key);
            }
            filter.into()
        }
        Kind::Scalable => {
            let mut filter = ScalableBloomFilter::with_options(
                items,
                fpr_only()?,
                DEFAULT_GROWTH,
                DEFAULT_TIGHTENING,
                args.seed,
            )?;
            for key in keys {
                filter.insert(key)?;
            }
            filter.into()
        }
        Kind::Cuckoo => {
            let sized = (items as f64 * (1.0 + args.headroom)).ceil() as u64;
            let mut filter = CuckooFilter::with_seed(sized, fpr_only()?, args.seed)?;
            for (line, key) in keys.iter().enumerate() {
                filter.insert(key).with_context(|| {
                    format!(
                        "cuckoo filter full at line {} of {}; raise --items or --headroom",
                        line + 1,
                        keys.len()
                    )
                })?;
            }
            filter.into()
        }
    })
}

fn progress_bar(lines: usize) -> ProgressBar {
    if lines < PROGRESS_THRESHOLD_LINES {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("valid template"),
    );
    bar.set_message(format!("building from {lines} keys"));
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}
