//! `bloomgate remove`: removes keys from a counting or cuckoo filter file, all or nothing.
//!
//! The whole batch is applied to the filter in memory first, in order (arguments, then
//! `--input` lines), so a key listed twice must have been inserted twice. If any key is
//! definitely absent at its turn, the file is left untouched and the command fails naming that
//! key. Only a fully successful batch is written back, atomically (temp file + rename).

use anyhow::{anyhow, bail, Result};
use bloomgate::codec::FilterKind;
use bloomgate::Error;
use serde_json::json;

use crate::input::{for_each_line, open_input, with_stdout, write_atomically, FilterKeys};

#[derive(clap::Args)]
#[command(mut_arg("filter", |a| a.help("Filter file (counting or cuckoo); rewritten in place")))]
#[command(mut_arg("keys", |a| a.help("Keys to remove")))]
pub struct Args {
    #[command(flatten)]
    target: FilterKeys,
}

pub fn run(args: Args) -> Result<()> {
    let args = args.target;
    let mut filter = args.load()?;
    if !matches!(filter.kind(), FilterKind::Counting | FilterKind::Cuckoo) {
        bail!(
            "{} is a {} filter, which cannot remove keys; only counting and cuckoo filters can",
            args.filter.display(),
            filter.kind().name()
        );
    }
    let mut removed = 0u64;
    let mut remove = |key: &[u8]| -> Result<()> {
        match filter.remove(key) {
            Ok(()) => {
                removed += 1;
                Ok(())
            }
            Err(Error::NotPresent) => Err(anyhow!(
                "key {:?} (#{} of the batch) is definitely not in {}; nothing was removed",
                String::from_utf8_lossy(key),
                removed + 1,
                args.filter.display()
            )),
            Err(err) => Err(err.into()),
        }
    };
    for key in &args.keys {
        remove(key.as_bytes())?;
    }
    if let Some(path) = &args.input {
        for_each_line(open_input(path)?, |key| remove(key))?;
    }
    write_atomically(&args.filter, &filter.to_bytes())?;
    with_stdout(|out| {
        writeln!(
            out,
            "{}",
            json!({"removed": removed, "items": filter.len()})
        )
    })
}
