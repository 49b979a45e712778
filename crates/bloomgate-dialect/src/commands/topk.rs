//! TOPK.* commands with RedisBloom's replies, errors and checking order. The table's arity is
//! checked first ([`super::execute`]); a handler checks what is stricter (RESERVE's 3 or 6
//! arguments, INCRBY's pairs, LIST's optional WITHCOUNT).

use super::{
    flags::*, sketch_table, spec, write, wrong_arity, Arg, ArgKind, Args, CommandInfo, Ctx, Docs,
    Host, KEY_ONLY, N_ITEMS, READ,
};
use crate::num::{parse_f64, parse_i64};
use crate::reply::Reply;
use crate::types::topk::TopK;
use crate::value::DialectType as _;

/// RedisBloom's missing-key error.
const ERR_MISSING: &str = "TopK: key does not exist";
/// RedisBloom's INCRBY range error, its inner spaces included (a line continuation inside
/// the C string literal).
const ERR_INCREMENT: &str = "TopK: increment must be an integer greater or equal to 0                            and smaller or equal to 100,000";
/// Largest TOPK.INCRBY increment.
const MAX_INCREMENT: i64 = 100_000;
/// RedisBloom's defaults when RESERVE gives only k.
const DEFAULT_WIDTH: u32 = 8;
const DEFAULT_DEPTH: u32 = 7;
const DEFAULT_DECAY: f64 = 0.9;

const RESERVE_ARGS: &[Arg] = &[
    Arg::key(),
    Arg::plain("topk", ArgKind::Integer),
    Arg::group(
        "params",
        ArgKind::Block,
        &[
            Arg::plain("width", ArgKind::Integer),
            Arg::plain("depth", ArgKind::Integer),
            Arg::plain("decay", ArgKind::Double),
        ],
    )
    .optional(),
];
const ITEMS_ARGS: &[Arg] = &[Arg::key(), Arg::plain("item", ArgKind::String).multiple()];
const INCRBY_ARGS: &[Arg] = &[
    Arg::key(),
    Arg::group(
        "item_increment",
        ArgKind::Block,
        &[
            Arg::plain("item", ArgKind::String),
            Arg::plain("increment", ArgKind::Integer),
        ],
    )
    .multiple(),
];
const LIST_ARGS: &[Arg] = &[
    Arg::key(),
    Arg::plain("withcount", ArgKind::PureToken)
        .token("WITHCOUNT")
        .optional(),
];

/// The TOPK.* command table: RedisBloom 8.2's arities, flags, ACL categories and documentation
/// (it files RESERVE and INFO under `@fast` without the `fast` flag).
pub fn commands() -> Vec<CommandInfo> {
    sketch_table! { "topk";
        fast "TOPK.RESERVE", write("topk.reserve"), reserve, DENYOOM, -3, RESERVE_ARGS, "O(1)",
            "Initializes a Top-K sketch with specified parameters";
        slow "TOPK.ADD", write("topk.add"), add, DENYOOM, -3, ITEMS_ARGS,
            "O(n * k) where n is the number of items and k is the depth",
            "Adds an item to a Top-k sketch. Multiple items can be added at the same time.";
        slow "TOPK.INCRBY", write("topk.incrby"), incrby, DENYOOM, -4, INCRBY_ARGS,
            "O(n * k * incr) where n is the number of items, k is the depth and incr is \
             the increment",
            "Increases the count of one or more items by increment";
        slow "TOPK.QUERY", READ, query, Flags::NONE, -3, ITEMS_ARGS, N_ITEMS,
            "Checks whether one or more items are in a sketch";
        slow "TOPK.COUNT", READ, count, Flags::NONE, -3, ITEMS_ARGS, N_ITEMS,
            "Return the count for one or more items are in a sketch",
            history &[(
                "2.4.0",
                "As of Bloom version 2.4, this command is regarded as deprecated. The count \
                 value is not a representative of the number of appearances of an item",
            )];
        slow "TOPK.LIST", READ, list, Flags::NONE, -2, LIST_ARGS,
            "O(k*log(k)) where k is the value of top-k",
            "Return the full list of items in Top-K sketch.";
        fast "TOPK.INFO", READ, info, Flags::NONE, 2, KEY_ONLY, "O(1)",
            "Returns information about a sketch";
    }
}

/// An item as RedisBloom replies it: a C string, so only the bytes before a NUL.
fn item_reply(item: &[u8]) -> Reply {
    let end = item.iter().position(|&b| b == 0).unwrap_or(item.len());
    Reply::bulk(&item[..end])
}

/// A dimension of RESERVE: an integer in `1..=u32::MAX`.
fn dimension(arg: &[u8], msg: &'static str) -> Result<u32, Reply> {
    parse_i64(arg)
        .and_then(|v| u32::try_from(v).ok())
        .filter(|&v| v >= 1)
        .ok_or_else(|| Reply::error(msg))
}

/// TOPK.RESERVE `key topk [width depth decay]`: 3 or 6 arguments; the key must not exist
/// (whatever it holds); then k, width, depth and decay in `(0, 1]`; then the memory budget.
pub(crate) fn reserve(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if args.len() != 3 && args.len() != 6 {
        return wrong_arity("topk.reserve");
    }
    let key = args[1];
    if ctx.key_exists(key) {
        return Reply::error("TopK: key already exists");
    }
    let parsed = (|| -> Result<(u32, u32, u32, f64), Reply> {
        let k = dimension(args[2], "TopK: invalid k")?;
        if args.len() == 3 {
            return Ok((k, DEFAULT_WIDTH, DEFAULT_DEPTH, DEFAULT_DECAY));
        }
        let width = dimension(args[3], "TopK: invalid width")?;
        let depth = dimension(args[4], "TopK: invalid depth")?;
        let decay = parse_f64(args[5])
            .filter(|&d| crate::types::topk::valid_decay(d))
            .ok_or_else(|| Reply::error("TopK: invalid decay value. must be '<= 1' & '> 0'"))?;
        Ok((k, width, depth, decay))
    })();
    let (k, width, depth, decay) = match parsed {
        Ok(p) => p,
        Err(reply) => return reply,
    };
    // Admitted against the memory budget and the per-key cap before anything is allocated.
    const NO_MEMORY: &str = "ERR Insufficient memory to create topk data structure";
    let admitted = match TopK::planned_bytes(k, width, depth) {
        Some(b) => ctx.admit_or(crate::budget::Buffer(b), NO_MEMORY).map(drop),
        None => Err(Reply::error(NO_MEMORY)),
    };
    if let Err(reply) = admitted {
        return reply;
    }
    match TopK::new(k, width, depth, decay) {
        Some(topk) => {
            ctx.create(key, topk.into_value());
            Reply::ok()
        }
        None => Reply::error(NO_MEMORY),
    }
}

/// Adds each `(item, increment)` in order; one reply per item: the item it pushed out of the
/// heap, or nil.
fn add_all<H: Host + ?Sized>(ctx: &mut Ctx<H>, key: &[u8], items: &[(&[u8], u32)]) -> Vec<Reply> {
    ctx.update(key, |topk: &mut TopK| {
        items
            .iter()
            .map(|&(item, by)| match topk.add(item, by) {
                Some(expelled) => item_reply(&expelled),
                None => Reply::Nil,
            })
            .collect()
    })
}

/// TOPK.ADD `key item...`.
pub(crate) fn add(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let key = args[1];
    if let Err(reply) = ctx.existing::<TopK>(key, ERR_MISSING) {
        return reply;
    }
    let items: Vec<(&[u8], u32)> = args[2..].iter().map(|&item| (item, 1)).collect();
    let replies = add_all(ctx, key, &items);
    ctx.changed(1);
    Reply::Array(replies)
}

/// TOPK.INCRBY `key item increment [item increment ...]`: the pairs are applied in order until
/// one's increment is not an integer in `0..=100000`; that one's reply is the error and the
/// rest are not applied. (RedisBloom announces a reply per pair and then sends fewer, which
/// desynchronises the connection; we send the replies made.)
pub(crate) fn incrby(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if args.len() % 2 == 1 {
        return wrong_arity("topk.incrby");
    }
    let key = args[1];
    if let Err(reply) = ctx.existing::<TopK>(key, ERR_MISSING) {
        return reply;
    }
    let mut items = Vec::with_capacity(args.len() / 2 - 1);
    let mut bad = false;
    for pair in args[2..].chunks_exact(2) {
        match parse_i64(pair[1]).filter(|n| (0..=MAX_INCREMENT).contains(n)) {
            Some(n) => items.push((pair[0], n as u32)),
            None => {
                bad = true;
                break;
            }
        }
    }
    let mut replies = add_all(ctx, key, &items);
    if bad {
        replies.push(Reply::error(ERR_INCREMENT));
    }
    ctx.changed(1);
    Reply::Array(replies)
}

/// TOPK.QUERY `key item...`: whether each item is in the heap (a boolean in RESP3).
pub(crate) fn query(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    match ctx.existing::<TopK>(args[1], ERR_MISSING) {
        Ok(topk) => Reply::Array(
            args[2..]
                .iter()
                .map(|item| Reply::Bool(topk.contains(item)))
                .collect(),
        ),
        Err(reply) => reply,
    }
}

/// TOPK.COUNT `key item...`: each item's count estimate.
pub(crate) fn count(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    match ctx.existing::<TopK>(args[1], ERR_MISSING) {
        Ok(topk) => Reply::Array(
            args[2..]
                .iter()
                .map(|item| Reply::Int(i64::from(topk.count(item))))
                .collect(),
        ),
        Err(reply) => reply,
    }
}

/// TOPK.LIST `key [WITHCOUNT]`: the option is checked before the key, and RedisBloom accepts
/// any case-insensitive prefix of WITHCOUNT (the empty string included).
pub(crate) fn list(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if args.len() > 3 {
        return wrong_arity("topk.list");
    }
    let with_count = match args.get(2) {
        None => false,
        Some(opt) if opt.len() <= 9 && opt.eq_ignore_ascii_case(&b"WITHCOUNT"[..opt.len()]) => true,
        Some(_) => return Reply::error("WITHCOUNT keyword expected"),
    };
    let topk = match ctx.existing::<TopK>(args[1], ERR_MISSING) {
        Ok(topk) => topk,
        Err(reply) => return reply,
    };
    let mut out = Vec::new();
    for entry in topk.list() {
        out.push(item_reply(entry.item.as_deref().unwrap_or_default()));
        if with_count {
            out.push(Reply::Int(i64::from(entry.count)));
        }
    }
    Reply::Array(out)
}

/// TOPK.INFO `key`: k, width, depth and decay (a double).
pub(crate) fn info(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    match ctx.existing::<TopK>(args[1], ERR_MISSING) {
        Ok(topk) => Reply::Map(vec![
            (Reply::Simple("k".into()), Reply::Int(topk.k().into())),
            (
                Reply::Simple("width".into()),
                Reply::Int(topk.width().into()),
            ),
            (
                Reply::Simple("depth".into()),
                Reply::Int(topk.depth().into()),
            ),
            (Reply::Simple("decay".into()), Reply::Double(topk.decay())),
        ]),
        Err(reply) => reply,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::ERR_INCREMENT;
    use crate::reply::Reply;

    fn bulks(v: &[&str]) -> Reply {
        Reply::Array(v.iter().map(|s| Reply::bulk(s.as_bytes())).collect())
    }

    #[test]
    fn reserve_checks_in_redisbloom_order() {
        let mut h = Harness::new();
        h.foreign.push(b"s".to_vec());
        assert_eq!(
            h.run("TOPK.RESERVE t 1 2"),
            super::wrong_arity("topk.reserve")
        );
        assert_eq!(h.run("TOPK.RESERVE s 0"), err("TopK: key already exists"));
        assert_eq!(h.run("TOPK.RESERVE t 0"), err("TopK: invalid k"));
        assert_eq!(h.run("TOPK.RESERVE t 4294967296"), err("TopK: invalid k"));
        assert_eq!(h.run("TOPK.RESERVE t 1 0 1 1"), err("TopK: invalid width"));
        assert_eq!(h.run("TOPK.RESERVE t 1 1 x 1"), err("TopK: invalid depth"));
        for decay in ["0", "1.5", "nan", "x"] {
            assert_eq!(
                h.run(&format!("TOPK.RESERVE t 1 1 1 {decay}")),
                err("TopK: invalid decay value. must be '<= 1' & '> 0'")
            );
        }
        h.memory_limit = 1 << 30;
        assert_eq!(
            h.run("TOPK.RESERVE t 4294967295 4294967295 4294967295 0.9"),
            err("ERR Insufficient memory to create topk data structure")
        );
        h.memory_limit = 10_000;
        assert_eq!(
            h.run("TOPK.RESERVE t 10 1000 10 0.9"),
            err("ERR Insufficient memory to create topk data structure")
        );
        h.memory_limit = 0;
        assert_eq!(h.run("TOPK.RESERVE t 2"), Reply::ok());
        assert_eq!(
            h.run("TOPK.INFO t"),
            Reply::Map(vec![
                (Reply::Simple("k".into()), Reply::Int(2)),
                (Reply::Simple("width".into()), Reply::Int(8)),
                (Reply::Simple("depth".into()), Reply::Int(7)),
                (Reply::Simple("decay".into()), Reply::Double(0.9)),
            ])
        );
    }

    #[test]
    fn add_incrby_list_and_count() {
        let mut h = Harness::new();
        assert_eq!(h.run("TOPK.ADD t a"), err("TopK: key does not exist"));
        h.run("TOPK.RESERVE t 2 50 5 0.9");
        assert_eq!(
            h.run("TOPK.ADD t a b c"),
            Reply::Array(vec![Reply::Nil, Reply::Nil, Reply::bulk("a")])
        );
        assert_eq!(
            h.run("TOPK.INCRBY t a 5 b x c 1"),
            Reply::Array(vec![Reply::bulk("b"), err(ERR_INCREMENT)])
        );
        assert_eq!(
            h.run("TOPK.INCRBY t a 100001"),
            Reply::Array(vec![err(ERR_INCREMENT)])
        );
        assert_eq!(h.run("TOPK.LIST t"), bulks(&["a", "c"]));
        assert_eq!(
            h.run("TOPK.LIST t withc"),
            Reply::Array(vec![
                Reply::bulk("a"),
                Reply::Int(6),
                Reply::bulk("c"),
                Reply::Int(1)
            ])
        );
        assert_eq!(
            h.run("TOPK.LIST t WITHCOUNTS"),
            err("WITHCOUNT keyword expected")
        );
        assert_eq!(
            h.run("TOPK.QUERY t a c"),
            Reply::Array(vec![Reply::Bool(true), Reply::Bool(true)])
        );
        assert_eq!(
            h.run("TOPK.COUNT t a b c"),
            Reply::Array(vec![Reply::Int(6), Reply::Int(1), Reply::Int(1)])
        );
    }
}
