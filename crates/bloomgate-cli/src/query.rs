//! `bloomgate query`: asks a filter file about keys given as arguments and/or one per line.

use std::io::Write;

use anyhow::Result;
use serde_json::json;

use crate::input::{for_each_line, open_input, with_stdout, FilterKeys};

#[derive(clap::Args)]
#[command(mut_arg("keys", |a| a.help("Keys to look up")))]
pub struct Args {
    #[command(flatten)]
    target: FilterKeys,
    /// Print only `{"queried": N, "present": P}`.
    #[arg(long)]
    count: bool,
}

pub fn run(args: Args) -> Result<()> {
    let filter = args.target.load()?;
    let (mut queried, mut present) = (0u64, 0u64);
    let input = args.target.input.as_deref().map(open_input).transpose()?;
    let mut failure = None;
    with_stdout(|out| {
        let mut answer = |key: &[u8], out: &mut dyn Write| -> std::io::Result<()> {
            let hit = filter.contains(key);
            queried += 1;
            present += u64::from(hit);
            if !args.count {
                out.write_all(key)?;
                out.write_all(if hit { b"\tpresent\n" } else { b"\tabsent\n" })?;
            }
            Ok(())
        };
        for key in &args.target.keys {
            answer(key.as_bytes(), out)?;
        }
        if let Some(reader) = input {
            let result = for_each_line(reader, |key| Ok(answer(key, out)?));
            if let Err(err) = result {
                match err.downcast::<std::io::Error>() {
                    Ok(io) => return Err(io),
                    Err(other) => failure = Some(other),
                }
            }
        }
        if args.count {
            writeln!(out, "{}", json!({"queried": queried, "present": present}))?;
        }
        Ok(())
    })?;
    match failure {
        Some(err) => Err(err),
        None => Ok(()),
    }
}
