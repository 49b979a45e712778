//! BF.INFO's reply, over any chain link type, in the dialect's shape: RedisBloom's (a map in
//! RESP3, a one-element array or one-entry map for one field, `Layout` after the five fields of
//! a non-classic chain) or valkey-bloom's (always an array of names and values, the bare value
//! for one field, its lower-case refusal of an unknown field).

use super::{Args, Ctx, Host};
use crate::num::is;
use crate::reply::Reply;
use crate::types::sbchain::Chain;
use crate::value::{ChainValue, Kind};
use crate::ERR_NOT_FOUND;

/// BF.INFO `key [field]` on the chain of link type `L` at `key`.
pub(super) fn info_of<L: ChainValue, H: Host + ?Sized>(ctx: &mut Ctx<H>, args: &Args) -> Reply {
    let proto = ctx.proto();
    let valkey = ctx.config().dialect.valkey().is_some();
    let chain = match ctx.existing::<Chain<L>>(args[1], ERR_NOT_FOUND) {
        Ok(chain) => chain,
        Err(reply) => return reply,
    };
    let expansion = match chain.is_scaling() {
        true => Reply::Int(i64::from(chain.growth())),
        false => Reply::Nil,
    };
    let mut fields = vec![
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
