//! CBF.* — counting Bloom filters (a Bloom filter whose items can be deleted), our own command
//! family beside RedisBloom's. Semantics, saturation and the dump format are documented in
//! [`crate::types::counting`].
//!
//! | command | reply |
//! |---|---|
//! | `CBF.RESERVE key error_rate capacity [BITS 4\|8]` | `OK` (4-bit counters by default) |
//! | `CBF.ADD key item` | 1 if the item was definitely absent, else 0 (its counters go up either way); creates the filter with `bf-error-rate` and `bf-initial-size` if missing |
//! | `CBF.MADD key item...` | array of 0/1, stopping at the first error (which ends the array) |
//! | `CBF.DEL key item` | 1 if one occurrence was deleted, 0 if the item is definitely absent |
//! | `CBF.EXISTS key item` / `CBF.MEXISTS key item...` | 0/1; 0 for a missing key |
//! | `CBF.COUNT key item` | the item's smallest counter (an upper bound on its adds); 0 for a missing key |
//! | `CBF.CARD key` | adds minus deletes; 0 if missing |
//! | `CBF.INFO key` | map: Capacity, Size, Number of items inserted, Error rate, Counter bits, Number of counters, Number of hash functions, Saturated counters |
//! | `CBF.SCANDUMP key iter` / `CBF.LOADCHUNK key iter data` | as BF's: `[1, header]`, then the counters in chunks, `[0, ""]` |
//!
//! An add past the capacity is refused ([`crate::types::counting::ERR_FULL`]). An auto-created filter replicates and
//! logs as `CBF.RESERVE` with its explicit parameters followed by the adds, so replay does not
//! depend on the replica's settings.

use super::{
    flags::*, load_chunk, our_family, probe, write, Arg, ArgKind, Args, CommandInfo, Ctx, Host,
    KEY_ITEM, KEY_ITEMS, KEY_ITER, KEY_ITER_DATA, KEY_ONLY, READ,
};
use crate::num::{is, parse_f64, parse_i64};
use crate::reply::Reply;
use crate::types::counting::{CountingFilter, CountingParams, DEFAULT_COUNTER_BITS};
use crate::value::DialectType as _;
use crate::ERR_NOT_FOUND;

const RESERVE_ARGS: &[Arg] = &[
    Arg::key(),
    Arg::plain("error_rate", ArgKind::Double),
    Arg::plain("capacity", ArgKind::Integer),
    Arg::group(
        "bits",
        ArgKind::Block,
        &[Arg::plain("bits", ArgKind::Integer)],
    )
    .token("BITS")
    .optional(),
];

/// The CBF.* command table (our extension: `since` is bloomgate's version).
pub fn commands() -> Vec<CommandInfo> {
    let cbf = our_family("cbf", "is key name for a counting Bloom filter.");
    const K: &str = "O(k), where k is the number of hash functions";
    const K_N: &str = "O(k * n), where n is the number of items";
    const M: &str = "O(m), where m is the number of counters";
    vec![
        cbf(
            "CBF.RESERVE",
            write("cbf.reserve"),
            reserve,
            DENYOOM,
            -4,
            (
                "Creates a counting Bloom filter",
                "O(1)",
                true,
                RESERVE_ARGS,
            ),
        ),
        cbf(
            "CBF.ADD",
            write("cbf.add"),
            add,
            DENYOOM,
            3,
            ("Adds an item to a counting Bloom filter", K, true, KEY_ITEM),
        ),
        cbf(
            "CBF.MADD",
            write("cbf.add"),
            madd,
            DENYOOM,
            -3,
            (
                "Adds items to a counting Bloom filter",
                K_N,
                true,
                KEY_ITEMS,
            ),
        ),
        cbf(
            "CBF.DEL",
            write("cbf.del"),
            del,
            FAST,
            3,
            (
                "Deletes one occurrence of an item from a counting Bloom filter",
                K,
                true,
                KEY_ITEM,
            ),
        ),
        cbf(
            "CBF.EXISTS",
            READ,
            exists,
            FAST,
            3,
            (
                "Checks whether an item may be in a counting Bloom filter",
                K,
                false,
                KEY_ITEM,
            ),
        ),
        cbf(
            "CBF.MEXISTS",
            READ,
            mexists,
            FAST,
            -3,
            (
                "Checks whether items may be in a counting Bloom filter",
                K_N,
                false,
                KEY_ITEMS,
            ),
        ),
        cbf(
            "CBF.COUNT",
            READ,
            count,
            FAST,
            3,
            (
                "Returns an upper bound on how many times an item was added",
                K,
                false,
                KEY_ITEM,
            ),
        ),
        cbf(
            "CBF.CARD",
            READ,
            card,
            FAST,
            2,
            (
                "Returns the number of items added and not deleted",
                "O(1)",
                false,
                KEY_ONLY,
            ),
        ),
        cbf(
            "CBF.INFO",
            READ,
            info,
            Flags::NONE,
            2,
            (
                "Returns information about a counting Bloom filter",
                M,
                false,
                KEY_ONLY,
            ),
        ),
        cbf(
            "CBF.SCANDUMP",
            READ,
            scandump,
            Flags::NONE,
            3,
            (
                "Begins an incremental save of a counting Bloom filter",
                M,
                false,
                KEY_ITER,
            ),
        ),
        cbf(
            "CBF.LOADCHUNK",
            write("cbf.loadchunk"),
            loadchunk,
            DENYOOM,
            4,
            (
                "Restores a counting Bloom filter previously saved using CBF.SCANDUMP",
                M,
                true,
                KEY_ITER_DATA,
            ),
        ),
    ]
}

/// Creates a filter of `params` at `key`, its counters admitted against the memory budget first.
fn create<H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    key: &[u8],
    params: CountingParams,
) -> Result<(), Reply> {
    let shape = params.shape().map_err(Reply::error)?;
    let admitted = ctx.admit(shape)?;
    let filter = CountingFilter::new(admitted).map_err(Reply::error)?;
    ctx.create(key, filter.into_value());
    Ok(())
}

/// CBF.RESERVE: error rate, capacity and BITS checked in that order, then the key.
pub(crate) fn reserve(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if args.len() != 4 && args.len() != 6 {
        return super::wrong_arity("cbf.reserve");
    }
    let Some(error) = parse_f64(args[2]) else {
        return Reply::error("ERR bad error rate");
    };
    let Some(capacity) = parse_i64(args[3]).and_then(|c| u64::try_from(c).ok()) else {
        return Reply::error("ERR bad capacity");
    };
    let counter_bits = match args.get(4) {
        None => DEFAULT_COUNTER_BITS,
        Some(option) if is(option, "BITS") => match parse_i64(args[5]) {
            Some(bits @ (4 | 8)) => bits as u32,
            _ => return Reply::error("ERR BITS must be 4 or 8"),
        },
        Some(_) => return Reply::error("ERR syntax error"),
    };
    let params = CountingParams {
        error,
        capacity,
        counter_bits,
    };
    if let Err(msg) = params.validate() {
        return Reply::error(msg);
    }
    match ctx.typed::<CountingFilter>(args[1]) {
        Err(reply) => return reply,
        Ok(Some(_)) => return Reply::error("ERR item exists"),
        Ok(None) => {}
    }
    match create(ctx, args[1], params) {
        Ok(()) => Reply::ok(),
        Err(reply) => reply,
    }
}

/// Adds `items` in order, creating the filter from the bf-* settings if missing; stops at the
/// first error (the last reply). Every add changes counters, so every add is a change; the
/// write propagates the adds that happened (the command's items before the error), after an
/// explicit `CBF.RESERVE` if it created. `Err`: the command failed as a whole (wrong type, no
/// memory to create).
fn add_items<H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    key: &[u8],
    items: &Args,
) -> Result<Vec<Reply>, Reply> {
    if ctx.typed::<CountingFilter>(key)?.is_none() {
        let c = ctx.config();
        let params = CountingParams {
            error: c.bf_error_rate,
            capacity: c.bf_initial_size.min(crate::types::counting::MAX_CAPACITY),
            counter_bits: DEFAULT_COUNTER_BITS,
        };
        create(ctx, key, params)?;
        ctx.propagate_as(vec![vec![
            b"CBF.RESERVE".to_vec(),
            key.to_vec(),
            params.error.to_string().into_bytes(),
            params.capacity.to_string().into_bytes(),
            b"BITS".to_vec(),
            params.counter_bits.to_string().into_bytes(),
        ]]);
    }
    let mut replies = Vec::with_capacity(items.len());
    let mut added = 0;
    for item in items {
        match ctx.update(key, |f: &mut CountingFilter| f.add(item)) {
            Ok(new) => {
                replies.push(Reply::Bool(new));
                added += 1;
            }
            Err(msg) => {
                replies.push(Reply::error(msg));
                break;
            }
        }
    }
    ctx.changed(added as u64);
    let kept = (added < items.len()).then(|| (0..items.len()).map(|i| i < added).collect());
    ctx.items_applied(items.len(), kept);
    Ok(replies)
}

pub(crate) fn add(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    match add_items(ctx, args[1], &args[2..]) {
        Ok(mut replies) => replies.pop().expect("one item"),
        Err(reply) => reply,
    }
}

pub(crate) fn madd(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    match add_items(ctx, args[1], &args[2..]) {
        Ok(replies) => Reply::Array(replies),
        Err(reply) => reply,
    }
}

/// CBF.DEL `key item`: 1 if deleted, 0 if definitely absent; `ERR not found` if missing.
pub(crate) fn del(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if let Err(reply) = ctx.existing::<CountingFilter>(args[1], ERR_NOT_FOUND) {
        return reply;
    }
    let deleted = ctx.update(args[1], |f: &mut CountingFilter| f.delete(args[2]));
    ctx.changed(u64::from(deleted));
    Reply::Bool(deleted)
}

/// CBF.EXISTS `key item`.
pub(crate) fn exists(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    super::generic::exists(ctx, args, CountingFilter::contains)
}

/// CBF.MEXISTS `key item...`.
pub(crate) fn mexists(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    Reply::Array(probe(
        ctx,
        args[1],
        &args[2..],
        |f: &CountingFilter, items| items.iter().map(|item| f.contains(item)).collect(),
    ))
}

/// CBF.COUNT `key item`: the smallest counter; 0 for a missing key.
pub(crate) fn count(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    match ctx.typed::<CountingFilter>(args[1]) {
        Ok(f) => Reply::Int(f.map_or(0, |f| f.count(args[2])) as i64),
        Err(reply) => reply,
    }
}

/// CBF.CARD `key`: adds minus deletes; 0 for a missing key.
pub(crate) fn card(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    match ctx.typed::<CountingFilter>(args[1]) {
        Ok(f) => Reply::Int(f.map_or(0, |f| f.items()) as i64),
        Err(reply) => reply,
    }
}

pub(crate) fn info(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let f = match ctx.existing::<CountingFilter>(args[1], ERR_NOT_FOUND) {
        Ok(f) => f,
        Err(reply) => return reply,
    };
    let (p, core) = (f.params(), f.filter());
    let label = |s: &str| Reply::Simple(s.into());
    Reply::Map(vec![
        (label("Capacity"), Reply::Int(p.capacity as i64)),
        (label("Size"), Reply::Int(f.memory() as i64)),
        (
            label("Number of items inserted"),
            Reply::Int(f.items() as i64),
        ),
        (label("Error rate"), Reply::bulk(p.error.to_string())),
        (label("Counter bits"), Reply::Int(i64::from(p.counter_bits))),
        (
            label("Number of counters"),
            Reply::Int(core.params().bits as i64),
        ),
        (
            label("Number of hash functions"),
            Reply::Int(i64::from(core.params().hashes)),
        ),
        (
            label("Saturated counters"),
            Reply::Int(core.saturated_counters() as i64),
        ),
    ])
}

pub(crate) fn scandump(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let f = match ctx.existing::<CountingFilter>(args[1], ERR_NOT_FOUND) {
        Ok(f) => f,
        Err(reply) => return reply,
    };
    let Some(iter) = parse_i64(args[2]) else {
        return Reply::error("ERR Second argument must be numeric");
    };
    let (next, data) = f.scandump(iter);
    Reply::Array(vec![Reply::Int(next), Reply::Bulk(data)])
}

pub(crate) fn loadchunk(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    load_chunk::<CountingFilter, _>(ctx, args, "ERR Second argument must be numeric")
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::Propagate;
    use crate::reply::Reply;
    use crate::value::Value;

    #[test]
    fn add_delete_count_and_errors() {
        let mut h = Harness::new();
        assert_eq!(h.run("CBF.RESERVE c 0.01 3 BITS 8"), Reply::ok());
        assert_eq!(
            h.run("CBF.RESERVE c 0.01 3"),
            Reply::error("ERR item exists")
        );
        assert_eq!(
            h.run("CBF.RESERVE d 0.01 3 BITS 5"),
            Reply::error("ERR BITS must be 4 or 8")
        );
        assert_eq!(h.run("CBF.ADD c a"), Reply::Bool(true));
        assert_eq!(h.run("CBF.ADD c a"), Reply::Bool(false));
        assert_eq!(h.run("CBF.COUNT c a"), Reply::Int(2));
        assert_eq!(
            h.run("CBF.MADD c b x"),
            Reply::Array(vec![
                Reply::Bool(true),
                Reply::error(crate::types::counting::ERR_FULL)
            ])
        );
        assert_eq!(h.run("CBF.CARD c"), Reply::Int(3));
        assert_eq!(h.run("CBF.DEL c a"), Reply::Bool(true));
        assert_eq!(h.run("CBF.DEL c zzz-never"), Reply::Bool(false));
        assert_eq!(h.last.take().unwrap().propagate, Propagate::Nothing);
        assert_eq!(h.run("CBF.EXISTS c a"), Reply::Bool(true));
        assert_eq!(h.run("CBF.DEL c a"), Reply::Bool(true));
        assert_eq!(h.last.take().unwrap().propagate, Propagate::Verbatim);
        assert_eq!(h.run("CBF.EXISTS c a"), Reply::Bool(false));
        assert_eq!(h.run("CBF.DEL missing a"), Reply::error("ERR not found"));
        assert_eq!(h.run("CBF.COUNT missing a"), Reply::Int(0));
        assert_eq!(h.run("CBF.INFO missing"), Reply::error("ERR not found"));
        assert_eq!(h.run("BF.ADD bf a"), Reply::Bool(true));
        assert!(matches!(h.run("CBF.ADD bf a"), Reply::Error(e) if e.starts_with("WRONGTYPE")));
    }

    /// An auto-created filter replays from explicit parameters, whatever the settings then,
    /// and SCANDUMP/LOADCHUNK copy it exactly.
    #[test]
    fn auto_create_replays_and_dumps_copy() {
        let mut h = Harness::new();
        h.config.bf_error_rate = 0.02;
        h.config.bf_initial_size = 7;
        h.run("CBF.MADD k a b a");
        let Some(Propagate::Commands(log)) = h.last.take().map(|o| o.propagate) else {
            panic!("an auto-create is rewritten")
        };
        assert_eq!(log.len(), 2);
        let mut replayed = Harness::new();
        for cmd in &log {
            replayed.run_args(cmd);
        }
        let filter = |h: &Harness, key: &[u8]| match h.keys.get(key) {
            Some(Value::Counting(f)) => (**f).clone(),
            _ => panic!("missing"),
        };
        assert_eq!(filter(&h, b"k"), filter(&replayed, b"k"));
        assert_eq!(filter(&h, b"k").params().capacity, 7);
        let chunks = h.scandump("CBF", "k");
        h.loadchunks("CBF", "copy", &chunks);
        assert_eq!(filter(&h, b"copy"), filter(&h, b"k"));
    }
}
