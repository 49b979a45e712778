//! `bloomgate calc`: a hur.st-style sizing calculator over the library's exact models. Give any
//! sufficient subset of items, FPR, bits and hashes; the missing values are solved for.

use anyhow::{bail, Result};
use bloomgate::memory::human_bytes;
use bloomgate::params::{Params, MAX_BITS};
use serde_json::json;

use crate::units::{parse_bits, parse_count, parse_probability};
use crate::LayoutArg;

#[derive(clap::Args)]
pub struct Args {
    /// Number of items (n): 1000000, 1e6, 10M.
    #[arg(long, short = 'n', value_parser = parse_count)]
    items: Option<u64>,
    /// Target false-positive rate (p): 0.01, 1%, 1/1000.
    #[arg(long, short = 'p', value_parser = parse_probability)]
    fpr: Option<f64>,
    /// Filter size (m): bits, or bytes with a unit (64MiB, 1GB).
    #[arg(long, short = 'm', value_parser = parse_bits)]
    bits: Option<u64>,
    /// Hash functions / probes per key (k).
    #[arg(long, short = 'k')]
    hashes: Option<u32>,
    /// Size for items × (1 + H), e.g. 0.2 for 20% spare capacity.
    #[arg(long)]
    headroom: Option<f64>,
    /// Bit layout to model.
    #[arg(long, value_enum, default_value_t = LayoutArg::Classic)]
    layout: LayoutArg,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let layout = args.layout.into();
    let headroom = args.headroom.unwrap_or(0.0);
    let design_items = |n: u64| -> Result<u64> {
        if !(headroom >= 0.0 && headroom.is_finite()) {
            bail!("--headroom must be a finite number ≥ 0");
        }
        Ok((n as f64 * (1.0 + headroom)).ceil() as u64)
    };
    let params = match (args.items, args.fpr, args.bits, args.hashes) {
        (Some(n), Some(p), None, None) => {
            Params::builder(layout, n, p).headroom(headroom).build()?
        }
        (Some(n), Some(p), None, Some(k)) => {
            let params = Params::builder(layout, n, p)
                .headroom(headroom)
                .max_hashes(k)
                .build()?;
            Params::new(layout, params.bits, k, params.items)?
        }
        (Some(n), _, Some(m), None) => Params::for_bits(layout, m, design_items(n)?)?,
        (Some(n), _, Some(m), Some(k)) => Params::new(layout, m, k, design_items(n)?)?,
        (None, Some(p), Some(m), k) => capacity_for(layout, m, k, p)?,
        _ => bail!(
            "not enough to size a filter: give --items with --fpr or --bits, or --bits with --fpr \
             (--hashes is optional)"
        ),
    };
    let items = args.items.unwrap_or(params.items);
    let fpr = params.fpr_at(items);
    if args.json {
        let value = json!({
            "items": items,
            "bits": params.bits,
            "bytes": params.bytes(),
            "hashes": params.hashes,
            "bits_per_item": params.bits as f64 / items as f64,
            "fpr": fpr,
            "layout": args.layout.name(),
            "capacity": params.items,
        });
        println!("{value}");
    } else {
        println!("layout         {}", args.layout.name());
        println!("items (n)      {items}");
        if params.items != items {
            println!("capacity       {} (with headroom)", params.items);
        }
        println!("bits (m)       {}", params.bits);
        println!(
            "memory         {} ({} bytes)",
            human_bytes(params.bytes()),
            params.bytes()
        );
        println!("hashes (k)     {}", params.hashes);
        println!("bits per item  {:.3}", params.bits as f64 / items as f64);
        println!("fpr (p)        {fpr:.6e}  (1 in {})", one_in(fpr));
    }
    // The numbers are printed either way (they plan for other machines too); a filter this
    // machine cannot hold is then a failure, in one line.
    if let Err(e) = bloomgate::memory::check(params.bytes()) {
        bail!("a filter of this size {e}: build it on a larger machine, or lower --items or raise --fpr");
    }
    Ok(())
}

/// The largest item count whose model FPR stays ≤ `p` in `bits` (binary search over n).
fn capacity_for(
    layout: bloomgate::Layout,
    bits: u64,
    hashes: Option<u32>,
    p: f64,
) -> Result<Params> {
    if bits > MAX_BITS {
        bail!("{bits} bits exceed the 1 TiB limit");
    }
    let at = |n: u64| -> Result<Params> {
        Ok(match hashes {
            Some(k) => Params::new(layout, bits, k, n)?,
            None => Params::for_bits(layout, bits, n)?,
        })
    };
    if at(1)?.fpr() > p {
        bail!("even one item exceeds fpr {p} in {bits} bits");
    }
    let (mut lo, mut hi) = (1u64, bits.max(2));
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if at(mid)?.fpr() <= p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    at(lo)
}

/// `0.0123` → `81`; very small rates print in scientific notation.
fn one_in(p: f64) -> String {
    if p <= 0.0 {
        return "∞".to_string();
    }
    let x = 1.0 / p;
    if x < 1e9 {
        format!("{}", x.round() as u64)
    } else {
        format!("{x:.3e}")
    }
}
