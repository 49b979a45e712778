//! `bloomgate info`: describes a filter file (kind, size, fill, estimated items and FPR).

use std::path::PathBuf;

use anyhow::Result;
use bloomgate::any::InfoValue;
use serde_json::{Map, Value};

use crate::input::load_filter;

#[derive(clap::Args)]
pub struct Args {
    /// Filter file.
    filter: PathBuf,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let filter = load_filter(&args.filter)?;
    let info = filter.info();
    if args.json {
        let object: Map<String, Value> = info
            .into_iter()
            .map(|(key, value)| {
                let value = match value {
                    InfoValue::Int(i) => Value::from(i),
                    InfoValue::Float(f) => Value::from(f),
                    InfoValue::Text(t) => Value::from(t),
                };
                (key.to_string(), value)
            })
            .collect();
        println!("{}", Value::Object(object));
    } else {
        for (key, value) in info {
            match value {
                InfoValue::Int(i) => println!("{key:<20} {i}"),
                InfoValue::Float(f) => println!("{key:<20} {f:.6}"),
                InfoValue::Text(t) => println!("{key:<20} {t}"),
            }
        }
    }
    Ok(())
}
