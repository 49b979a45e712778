//! BF.INFO's reply, over any chain link type, in the dialect's shape: RedisBloom's (a map in
//! RESP3, a one-element array or one-entry map for one field, `Layout` after the five fields of
//! a non-classic chain) or valkey-bloom's (always an array of names and values, the bare value
//! for one field, its lower-case refusal of an unknown field; in 1.0, of a `bloomfltr` filter,
//! also `Error rate` and, when it scales, `Tightening ratio` and `Max scaled capacity`).

use super::{Args, Ctx, Host};
use crate::config::ValkeyFlavour;
use crate::num::is;
use crate::reply::Reply;
use crate::types::sbchain::{Chain, ValkeyChain};
use crate::value::{ChainValue, Kind};
use crate::ERR_NOT_FOUND;

/// BF.INFO `key [field]` on the chain of link type `L` at `key`.
pub(super) fn info_of<L: ChainValue, H: Host + ?Sized>(ctx: &mut Ctx<H>, args: &Args) -> Reply {
    let proto = ctx.proto();
    let flavour = ctx.config().dialect.valkey();
    let valkey = flavour.is_some();
    let chain = match ctx.existing::<Chain<L>>(args[1], ERR_NOT_FOUND) {
        Ok(chain) => chain,
        Err(reply) => return reply,
    };
    let expansion = match chain.is_scaling() {
        true => Reply::Int(i64::from(chain.growth())),
        false => Reply::Nil,
    };
    let mut fields: Vec<Field> = vec![
        ("Capacity", "CAPACITY", Reply::Int(chain.capacity() as i64)),
        ("Size", "SIZE", Reply::Int(chain.size_bytes() as i64)),
        (
            "Number of filters",
            "FILTERS",
            Reply::Int(chain.links().len() as i64),
        ),
        (
            "Number of items inserted",
            "ITEMS",
            Reply::Int(chain.items() as i64),
        ),
        ("Expansion rate", "EXPANSION", expansion),
    ];
    if L::KIND != Kind::Bloom && !valkey {
        fields.push(("Layout", "LAYOUT", Reply::bulk(L::LAYOUT)));
    }
    if flavour == Some(ValkeyFlavour::V1_0) && L::KIND == Kind::BloomValkey {
        let limit = ctx.config().memory_usage_limit;
        if let Ok(chain) = ctx.existing::<ValkeyChain>(args[1], ERR_NOT_FOUND) {
            let (error, tail) = valkey_1_0_fields(chain, limit);
            fields.insert(4, error);
            fields.extend(tail);
        }
    }
    if let Some(selector) = args.get(2) {
        let found = fields.into_iter().find(|(_, name, _)| is(selector, name));
        return match found {
            Some((_, _, value)) if valkey => value,
            // RESP2: an array of one element; RESP3: a one-entry map.
            Some((label, _, value)) if proto >= 3 => {
                Reply::Map(vec![(Reply::Simple(label.into()), value)])
            }
            Some((_, _, value)) => Reply::Array(vec![value]),
            None if valkey => Reply::error("ERR invalid information value"),
            None => Reply::error("Invalid information value"),
        };
    }
    let pairs = fields
        .into_iter()
        .map(|(label, _, value)| (Reply::Simple(label.into()), value));
    if valkey {
        Reply::Array(pairs.flat_map(|(label, value)| [label, value]).collect())
    } else {
        Reply::Map(pairs.collect())
    }
}

/// A field: its name in the full reply, its single-field selector, its value.
type Field = (&'static str, &'static str, Reply);

/// valkey-bloom 1.0's fields of a `bloomfltr` filter: `Error rate` (placed before `Expansion
/// rate`), and when it scales `Tightening ratio` and `Max scaled capacity` (after it; within
/// the per-object `limit`).
fn valkey_1_0_fields(chain: &ValkeyChain, limit: u64) -> (Field, Vec<Field>) {
    let settings = chain.settings();
    let error = ("Error rate", "ERROR", Reply::Double(settings.fp));
    let mut tail = Vec::new();
    if chain.is_scaling() {
        let most = chain.max_scaled_capacity(limit).min(i64::MAX as u64) as i64;
        tail.push((
            "Tightening ratio",
            "TIGHTENING",
            Reply::Double(settings.tightening),
        ));
        tail.push(("Max scaled capacity", "MAXSCALEDCAPACITY", Reply::Int(most)));
    }
    (error, tail)
}
