//! WF.* — time-windowed filters ("has this key been seen in the last N windows?"), our own
//! command family beside RedisBloom's (it never changes BF.*/CF.* behaviour). Semantics and the
//! dump format are documented in [`crate::types::windowed`].
//!
//! | command | reply |
//! |---|---|
//! | `WF.RESERVE key error_rate capacity window_ms generations [EXPANSION n]` | `OK` |
//! | `WF.ADD key item` | 1 if new to its generation, else 0 |
//! | `WF.MADD key item...` | array of 0/1 (stops at the first error, which ends the array) |
//! | `WF.INSERT key [ERROR e] [CAPACITY c] [WINDOW ms] [GENERATIONS g] [EXPANSION n] [NOCREATE] [AT ms] ITEMS item...` | like MADD; creates the filter if missing (WINDOW and GENERATIONS then required; ERROR and CAPACITY default to `bf-error-rate` and `bf-initial-size`, EXPANSION to 2). `AT` adds at that time instead of the server's clock — what replicas and the log receive |
//! | `WF.EXISTS key item` / `WF.MEXISTS key item...` | 0/1 as of the server's clock; 0 for a missing key or another type |
//! | `WF.MEXISTSAT key time_ms item...` | like MEXISTS as of `time_ms` (as EXPIREAT is to EXPIRE): for callers that keep their own clock |
//! | `WF.CARD key` | items in live generations; 0 if missing |
//! | `WF.INFO key` | map: Capacity, Error rate, Window, Generations, Expansion rate, Number of items inserted, Size, Estimated error rate, Live generations (per generation: Start, Age, Items, Size) |
//! | `WF.SCANDUMP key iter` / `WF.LOADCHUNK key iter data` | as BF's: `[1, header]`, then one generation per chunk, `[0, ""]` |
//!
//! Every write replicates and logs as `WF.INSERT key ... AT <its time> ITEMS ...`, so replay
//! and replicas rebuild the same bytes whatever their clocks say. An `AT` time a full retention
//! (generations × window) or more ahead of the server's clock is refused
//! ([`crate::types::windowed::ERR_FUTURE`]): such a write would kill every generation live now.

use super::{
    add_batch, flags::*, load_chunk, our_family, probe, write, wrong_arity, Arg, ArgKind, Args,
    CommandInfo, Ctx, Host, CAPACITY_OPTION, ERROR_OPTION, EXPANSION_OPTION, KEY_ITEM, KEY_ITEMS,
    KEY_ITER, KEY_ITER_DATA, KEY_ONLY, NOCREATE, READ,
};
use crate::num::{is, parse_f64, parse_i64};
use crate::reply::Reply;
use crate::types::windowed::{AddError, WindowParams, WindowedFilter};
use crate::value::DialectType as _;
use crate::ERR_NOT_FOUND;

const KEY_TIME_ITEMS: &[Arg] = &[
    Arg::key(),
    Arg::plain("time_ms", ArgKind::Integer),
    Arg::plain("item", ArgKind::String).multiple(),
];
const RESERVE_ARGS: &[Arg] = &[
    Arg::key(),
    Arg::plain("error_rate", ArgKind::Double),
    Arg::plain("capacity", ArgKind::Integer),
    Arg::plain("window_ms", ArgKind::Integer),
    Arg::plain("generations", ArgKind::Integer),
    EXPANSION_OPTION,
];
const INSERT_ARGS: &[Arg] = &[
    Arg::key(),
    ERROR_OPTION,
    CAPACITY_OPTION,
    Arg::group(
        "window",
        ArgKind::Block,
        &[Arg::plain("window_ms", ArgKind::Integer)],
    )
    .token("WINDOW")
    .optional(),
    Arg::group(
        "generations",
        ArgKind::Block,
        &[Arg::plain("generations", ArgKind::Integer)],
    )
    .token("GENERATIONS")
    .optional(),
    EXPANSION_OPTION,
    NOCREATE,
    Arg::group(
        "at",
        ArgKind::Block,
        &[Arg::plain("time_ms", ArgKind::Integer)],
    )
    .token("AT")
    .optional(),
    Arg::plain("items", ArgKind::PureToken).token("ITEMS"),
    Arg::plain("item", ArgKind::String).multiple(),
];

/// The WF.* command table (our extension: `since` is bloomgate's version).
pub fn commands() -> Vec<CommandInfo> {
    let wf = our_family("windowed", "is key name for a time-windowed filter.");
    const K_G: &str = "O(k * g), where g is the number of live generations";
    const K_G_N: &str = "O(k * g * n), where n is the number of items";
    vec![
        wf(
            "WF.RESERVE",
            write("wf.reserve"),
            reserve,
            DENYOOM,
            -6,
            ("Creates a time-windowed filter", "O(1)", true, RESERVE_ARGS),
        ),
        wf(
            "WF.ADD",
            write("wf.add"),
            add,
            DENYOOM,
            3,
            (
                "Adds an item to a time-windowed filter",
                K_G,
                true,
                KEY_ITEM,
            ),
        ),
        wf(
            "WF.MADD",
            write("wf.add"),
            madd,
            DENYOOM,
            -3,
            (
                "Adds items to a time-windowed filter",
                K_G_N,
                true,
                KEY_ITEMS,
            ),
        ),
        wf(
            "WF.INSERT",
            write("wf.add"),
            insert,
            DENYOOM,
            -4,
            (
                "Adds items to a time-windowed filter at a time, creating it if missing",
                K_G_N,
                true,
                INSERT_ARGS,
            ),
        ),
        wf(
            "WF.EXISTS",
            READ,
            exists,
            FAST,
            3,
            (
                "Checks whether an item was added within the retention",
                K_G,
                false,
                KEY_ITEM,
            ),
        ),
        wf(
            "WF.MEXISTS",
            READ,
            mexists,
            FAST,
            -3,
            (
                "Checks whether items were added within the retention",
                K_G_N,
                false,
                KEY_ITEMS,
            ),
        ),
        wf(
            "WF.MEXISTSAT",
            READ,
            mexistsat,
            FAST,
            -4,
            (
                "Checks whether items were added within the retention as of a time",
                K_G_N,
                false,
                KEY_TIME_ITEMS,
            ),
        ),
        wf(
            "WF.CARD",
            READ,
            card,
            FAST,
            2,
            (
                "Returns the number of items in the live generations",
                "O(g)",
                false,
                KEY_ONLY,
            ),
        ),
        wf(
            "WF.INFO",
            READ,
            info,
            FAST,
            2,
            (
                "Returns information about a time-windowed filter",
                "O(g)",
                false,
                KEY_ONLY,
            ),
        ),
        wf(
            "WF.SCANDUMP",
            READ,
            scandump,
            Flags::NONE,
            3,
            (
                "Begins an incremental save of a time-windowed filter",
                "O(n), where n is the capacity",
                false,
                KEY_ITER,
            ),
        ),
        wf(
            "WF.LOADCHUNK",
            write("wf.loadchunk"),
            loadchunk,
            DENYOOM,
            4,
            (
                "Restores a time-windowed filter previously saved using WF.SCANDUMP",
                "O(n), where n is the capacity",
                true,
                KEY_ITER_DATA,
            ),
        ),
    ]
}

const DEFAULT_EXPANSION: u32 = 2;

fn now(ctx: &Ctx<impl Host + ?Sized>) -> u64 {
    ctx.now_ms()
}

/// Parses `value` as an integer in `range`, else `err`.
fn int_in(
    value: &[u8],
    range: std::ops::RangeInclusive<u64>,
    err: &'static str,
) -> Result<u64, Reply> {
    parse_i64(value)
        .and_then(|v| u64::try_from(v).ok())
        .filter(|v| range.contains(v))
        .ok_or_else(|| Reply::error(err))
}

pub(crate) fn reserve(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if args.len() != 6 && args.len() != 8 {
        return wrong_arity("wf.reserve");
    }
    let Some(error) = parse_f64(args[2]) else {
        return Reply::error("ERR bad error rate");
    };
    let parsed = (|| {
        let capacity = int_in(args[3], 0..=u64::MAX, "ERR bad capacity")?;
        let window_ms = int_in(args[4], 0..=u64::MAX, "ERR bad window")?;
        let generations = int_in(args[5], 0..=u64::from(u32::MAX), "ERR bad generations")?;
        let expansion = match args.get(6) {
            None => u64::from(DEFAULT_EXPANSION),
            Some(option) if is(option, "EXPANSION") => {
                int_in(args[7], 0..=u64::from(u32::MAX), "ERR bad expansion")?
            }
            Some(_) => return Err(Reply::error("ERR syntax error")),
        };
        Ok(WindowParams {
            error,
            capacity,
            window_ms,
            generations: generations as u32,
            expansion: expansion as u32,
        })
    })();
    let params = match parsed {
        Ok(params) => params,
        Err(reply) => return reply,
    };
    if let Err(msg) = params.validate() {
        return Reply::error(msg);
    }
    match ctx.typed::<WindowedFilter>(args[1]) {
        Err(reply) => reply,
        Ok(Some(_)) => Reply::error("ERR item exists"),
        Ok(None) => {
            ctx.create(args[1], WindowedFilter::new(params).into_value());
            Reply::ok()
        }
    }
}

/// Adds `items` at `at_ms`, creating the filter with `create` if missing; the write is
/// propagated as `WF.INSERT key AT <time> ITEMS` with the items that went in (after a
/// `WF.RESERVE` with the creation parameters when it created).
fn add_items<H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    key: &[u8],
    items: &Args,
    at_ms: u64,
    create: Option<Result<WindowParams, &'static str>>,
) -> Reply {
    let now_ms = now(ctx);
    match ctx.typed::<WindowedFilter>(key) {
        Err(reply) => return reply,
        Ok(Some(f)) => {
            if let Err(msg) = f.params().check_time(at_ms, now_ms) {
                return Reply::error(msg);
            }
        }
        Ok(None) => {
            let params = match create {
                None => return Reply::error(ERR_NOT_FOUND),
                Some(Err(msg)) => return Reply::error(msg),
                Some(Ok(params)) => params,
            };
            if let Err(msg) = params.check_time(at_ms, now_ms) {
                return Reply::error(msg);
            }
            let mut reserve = vec![b"WF.RESERVE".to_vec(), key.to_vec()];
            reserve.extend(
                [
                    params.error.to_string(),
                    params.capacity.to_string(),
                    params.window_ms.to_string(),
                    params.generations.to_string(),
                    "EXPANSION".into(),
                    params.expansion.to_string(),
                ]
                .map(String::into_bytes),
            );
            ctx.propagate_as(vec![reserve]);
            ctx.create(key, WindowedFilter::new(params).into_value());
        }
    }
    ctx.propagate_items_after(vec![
        b"WF.INSERT".to_vec(),
        key.to_vec(),
        b"AT".to_vec(),
        at_ms.to_string().into_bytes(),
        b"ITEMS".to_vec(),
    ]);
    let replies = add_batch(
        ctx,
        key,
        items,
        |f: &mut WindowedFilter, items, allowance, added| {
            f.add_many(items, at_ms, allowance, added)
        },
        AddError::message,
    );
    Reply::Array(replies)
}

pub(crate) fn add(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let at = now(ctx);
    match add_items(ctx, args[1], &args[2..], at, None) {
        Reply::Array(mut replies) => replies.pop().expect("one item"),
        other => other,
    }
}

pub(crate) fn madd(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let at = now(ctx);
    add_items(ctx, args[1], &args[2..], at, None)
}

pub(crate) fn insert(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let c = ctx.config();
    let mut error = c.bf_error_rate;
    let mut capacity = c.bf_initial_size;
    let (mut window_ms, mut generations) = (None, None);
    let mut expansion = u64::from(DEFAULT_EXPANSION);
    let mut nocreate = false;
    let mut at_ms = None;
    let mut i = 2;
    let items_at = loop {
        let Some(arg) = args.get(i) else {
            return wrong_arity("wf.insert");
        };
        if is(arg, "ITEMS") {
            break i + 1;
        }
        if is(arg, "NOCREATE") {
            nocreate = true;
            i += 1;
            continue;
        }
        let Some(value) = args.get(i + 1) else {
            return wrong_arity("wf.insert");
        };
        let any = 0..=u64::MAX;
        let parsed = if is(arg, "ERROR") {
            parse_f64(value)
                .map(|e| error = e)
                .ok_or_else(|| Reply::error("ERR bad error rate"))
        } else if is(arg, "CAPACITY") {
            int_in(value, any, "ERR bad capacity").map(|v| capacity = v)
        } else if is(arg, "WINDOW") {
            int_in(value, any, "ERR bad window").map(|v| window_ms = Some(v))
        } else if is(arg, "GENERATIONS") {
            int_in(value, 0..=u64::from(u32::MAX), "ERR bad generations")
                .map(|v| generations = Some(v as u32))
        } else if is(arg, "EXPANSION") {
            int_in(value, 0..=u64::from(u32::MAX), "ERR bad expansion").map(|v| expansion = v)
        } else if is(arg, "AT") {
            int_in(value, any, "ERR bad time").map(|v| at_ms = Some(v))
        } else {
            Err(Reply::error("ERR unknown argument"))
        };
        if let Err(reply) = parsed {
            return reply;
        }
        i += 2;
    };
    if items_at >= args.len() {
        return wrong_arity("wf.insert");
    }
    let create = (!nocreate).then(|| match (window_ms, generations) {
        (Some(window_ms), Some(generations)) => {
            let params = WindowParams {
                error,
                capacity,
                window_ms,
                generations,
                expansion: expansion as u32,
            };
            params.validate().map(|()| params)
        }
        _ => Err("ERR WINDOW and GENERATIONS are required to create a windowed filter"),
    });
    let at = at_ms.unwrap_or_else(|| now(ctx));
    add_items(ctx, args[1], &args[items_at..], at, create)
}

/// WF.MEXISTSAT `key time item...`: WF.MEXISTS as of `time`.
/// WF.EXISTS at the host's clock (0 for a missing key or another type).
pub(crate) fn exists(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let at = ctx.now_ms();
    super::generic::exists(ctx, args, |f: &WindowedFilter, item| f.contains(item, at))
}

/// WF.MEXISTS at the host's clock.
pub(crate) fn mexists(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let at = ctx.now_ms();
    super::generic::mexists(ctx, args, |f: &WindowedFilter, items| {
        f.contains_many(items, at)
    })
}

pub(crate) fn mexistsat(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    match int_in(args[2], 0..=u64::MAX, "ERR bad time") {
        Ok(at) => Reply::Array(probe(
            ctx,
            args[1],
            &args[3..],
            |f: &WindowedFilter, items| f.contains_many(items, at),
        )),
        Err(reply) => reply,
    }
}

pub(crate) fn card(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let at = now(ctx);
    match ctx.typed::<WindowedFilter>(args[1]) {
        Ok(f) => Reply::Int(f.map_or(0, |f| f.items(at)) as i64),
        Err(reply) => reply,
    }
}

pub(crate) fn info(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let at = now(ctx);
    let f = match ctx.existing::<WindowedFilter>(args[1], ERR_NOT_FOUND) {
        Ok(f) => f,
        Err(reply) => return reply,
    };
    let p = f.params();
    let label = |s: &str| Reply::Simple(s.into());
    let generations = f
        .generation_stats(at)
        .into_iter()
        .map(|(start, items, bytes, _)| {
            Reply::Map(vec![
                (label("Start"), Reply::Int(start as i64)),
                (label("Age"), Reply::Int(at as i64 - start as i64)),
                (label("Items"), Reply::Int(items as i64)),
                (label("Size"), Reply::Int(bytes as i64)),
            ])
        })
        .collect();
    Reply::Map(vec![
        (label("Capacity"), Reply::Int(p.capacity as i64)),
        (label("Error rate"), Reply::bulk(p.error.to_string())),
        (label("Window"), Reply::Int(p.window_ms as i64)),
        (label("Generations"), Reply::Int(i64::from(p.generations))),
        (label("Expansion rate"), Reply::Int(i64::from(p.expansion))),
        (
            label("Number of items inserted"),
            Reply::Int(f.items(at) as i64),
        ),
        (label("Size"), Reply::Int(f.memory() as i64)),
        (
            label("Estimated error rate"),
            Reply::bulk(f.estimated_fpr(at).to_string()),
        ),
        (label("Live generations"), Reply::Array(generations)),
    ])
}

pub(crate) fn scandump(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let Some(iter) = parse_i64(args[2]) else {
        return Reply::error("ERR Second argument must be numeric");
    };
    match ctx.existing::<WindowedFilter>(args[1], ERR_NOT_FOUND) {
        Ok(f) => {
            let (next, data) = f.scandump(iter);
            Reply::Array(vec![Reply::Int(next), Reply::Bulk(data)])
        }
        Err(reply) => reply,
    }
}

pub(crate) fn loadchunk(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    load_chunk::<WindowedFilter, _>(ctx, args, "ERR Second argument must be numeric")
}

#[cfg(test)]
mod tests {
    use crate::commands::testing::*;
    use crate::commands::Propagate;
    use crate::reply::Reply;

    fn bools(values: &[bool]) -> Reply {
        Reply::Array(values.iter().map(|&v| Reply::Bool(v)).collect())
    }

    #[test]
    fn reserve_add_exists_and_expiry() {
        let mut h = Harness::new();
        h.now_ms = 10_000;
        assert_eq!(h.run("WF.RESERVE k 0.01 100 1000 3"), Reply::ok());
        assert_eq!(
            h.run("WF.RESERVE k 0.01 100 1000 3"),
            err("ERR item exists")
        );
        assert_eq!(h.run("WF.ADD k a"), Reply::Bool(true));
        assert_eq!(h.run("WF.ADD k a"), Reply::Bool(false));
        assert_eq!(h.run("WF.MADD k b c"), bools(&[true, true]));
        h.now_ms = 11_999;
        assert_eq!(h.run("WF.MEXISTS k a b zz"), bools(&[true, true, false]));
        assert_eq!(h.run("WF.MEXISTSAT k 12999 a"), bools(&[true]));
        assert_eq!(h.run("WF.MEXISTSAT k 13000 a"), bools(&[false]));
        assert_eq!(h.run("WF.MEXISTSAT k x a"), err("ERR bad time"));
        assert_eq!(h.run("WF.CARD k"), Reply::Int(3));
        h.now_ms = 13_000;
        assert_eq!(h.run("WF.EXISTS k a"), Reply::Bool(false));
        assert_eq!(h.run("WF.CARD k"), Reply::Int(0));
        assert_eq!(h.run("WF.EXISTS missing a"), Reply::Bool(false));
        assert_eq!(h.run("WF.CARD missing"), Reply::Int(0));
        assert_eq!(h.run("WF.ADD missing a"), err("ERR not found"));
    }

    #[test]
    fn argument_errors() {
        let mut h = Harness::new();
        let cases = [
            ("WF.RESERVE k x 100 1000 3", "ERR bad error rate"),
            (
                "WF.RESERVE k 1.5 100 1000 3",
                "ERR error rate must be in the range (0.000000, 1.000000)",
            ),
            (
                "WF.RESERVE k 0.01 0 1000 3",
                "ERR capacity must be in the range [1, 1073741824]",
            ),
            (
                "WF.RESERVE k 0.01 100 0 3",
                "ERR window must be in the range [1, 3153600000000] milliseconds",
            ),
            (
                "WF.RESERVE k 0.01 100 1000 1",
                "ERR generations must be in the range [2, 1024]",
            ),
            (
                "WF.RESERVE k 0.01 100 1000 3 EXPANSION 0",
                "ERR expansion must be in the range [1, 32768]",
            ),
            ("WF.RESERVE k 0.01 100 1000 3 FOO 2", "ERR syntax error"),
            (
                "WF.RESERVE k 0.01 100 1000",
                "ERR wrong number of arguments for 'wf.reserve' command",
            ),
            (
                "WF.INSERT k ITEMS a",
                "ERR WINDOW and GENERATIONS are required to create a windowed filter",
            ),
            (
                "WF.INSERT k WINDOW 10 GENERATIONS 2 NOCREATE ITEMS a",
                "ERR not found",
            ),
            (
                "WF.INSERT k WINDOW x GENERATIONS 2 ITEMS a",
                "ERR bad window",
            ),
            ("WF.INSERT k FOO 1 ITEMS a", "ERR unknown argument"),
            (
                "WF.INSERT k WINDOW 10 GENERATIONS 2 ITEMS",
                "ERR wrong number of arguments for 'wf.insert' command",
            ),
        ];
        for (line, want) in cases {
            assert_eq!(h.run(line), err(want), "{line}");
        }
        assert!(h.keys.is_empty());
    }

    /// Writes propagate with their time; replaying them with another clock (and later) rebuilds
    /// the same dump.
    #[test]
    fn writes_propagate_with_their_time_and_replay_exactly() {
        let mut h = Harness::new();
        let mut log = Vec::new();
        for (now, line) in [
            (
                1_000,
                "WF.INSERT k WINDOW 1000 GENERATIONS 2 CAPACITY 50 ITEMS a b",
            ),
            (1_500, "WF.ADD k c"),
            (2_100, "WF.MADD k d e"),
            (4_200, "WF.ADD k f"),
        ] {
            h.now_ms = now;
            h.run(line);
            match h.last.take().unwrap().propagate {
                Propagate::Commands(cmds) => log.extend(cmds),
                other => panic!("{other:?}"),
            }
        }
        let line = |cmd: &Vec<Vec<u8>>| String::from_utf8_lossy(&cmd.join(&b' ')).into_owned();
        assert_eq!(line(&log[0]), "WF.RESERVE k 0.01 50 1000 2 EXPANSION 2");
        assert_eq!(line(&log[1]), "WF.INSERT k AT 1000 ITEMS a b");
        assert_eq!(line(&log[2]), "WF.INSERT k AT 1500 ITEMS c");
        let mut replica = Harness::new();
        replica.now_ms = 99_999_999;
        for cmd in &log {
            replica.run_args(cmd);
        }
        let original = h.scandump("WF", "k");
        assert_eq!(original, replica.scandump("WF", "k"));
        // The dump loads back through LOADCHUNK.
        h.loadchunks("WF", "copy", &original);
        h.now_ms = 4_300;
        assert_eq!(h.run("WF.MEXISTS copy f a"), bools(&[true, false]));
        // Reads propagate nothing.
        h.run("WF.EXISTS k f");
        assert_eq!(h.last.take().unwrap().propagate, Propagate::Nothing);
    }

    #[test]
    fn info_and_wrong_types() {
        let mut h = Harness::new();
        h.now_ms = 5_000;
        h.run("WF.RESERVE k 0.01 100 1000 3");
        h.run("WF.ADD k a");
        let Reply::Map(info) = h.run("WF.INFO k") else {
            panic!()
        };
        assert_eq!(info[0], (Reply::Simple("Capacity".into()), Reply::Int(100)));
        assert_eq!(info[5].1, Reply::Int(1));
        let Reply::Array(gens) = &info[8].1 else {
            panic!()
        };
        assert_eq!(gens.len(), 1);
        h.run("BF.ADD bloom a");
        let wrongtype = err(crate::ERR_WRONGTYPE);
        assert_eq!(h.run("WF.ADD bloom a"), wrongtype);
        assert_eq!(h.run("WF.INFO bloom"), wrongtype);
        assert_eq!(h.run("WF.EXISTS bloom a"), Reply::Bool(false));
        assert_eq!(h.run("BF.ADD k a"), wrongtype);
        assert_eq!(h.run("WF.INFO nope"), err("ERR not found"));
    }

    /// `AT` a full retention or more ahead of the clock is refused (it would kill every live
    /// generation and make later writes vanish); anything less is accepted and later writes at
    /// the clock still land.
    #[test]
    fn write_times_are_bounded_by_one_retention() {
        let mut h = Harness::new();
        h.now_ms = 10_500;
        let future = err(crate::types::windowed::ERR_FUTURE);
        let far = "WF.INSERT w WINDOW 1000 GENERATIONS 3 AT 9223372036854775807 ITEMS future";
        assert_eq!(h.run(far), future);
        assert!(h.keys.is_empty(), "nothing created");
        assert_eq!(
            h.run("WF.INSERT w WINDOW 1000 GENERATIONS 3 ITEMS a"),
            bools(&[true])
        );
        assert_eq!(h.run("WF.INSERT w AT 13000 ITEMS b"), future);
        assert_eq!(h.run("WF.INSERT w AT 12999 ITEMS b"), bools(&[true]));
        assert_eq!(h.run("WF.ADD w later"), Reply::Bool(true));
        assert_eq!(h.run("WF.EXISTS w later"), Reply::Bool(true));
        assert_eq!(
            h.run("WF.INSERT w AT 0 ITEMS old"),
            bools(&[false]),
            "dead slot"
        );
    }

    /// A write that needs a new generation is refused when the generation does not fit the
    /// memory budget, before it is allocated.
    #[test]
    fn new_generations_are_checked_against_the_budget() {
        let mut h = Harness::new();
        h.now_ms = 0;
        assert_eq!(h.run("WF.RESERVE w 0.001 1000000 1000 3"), Reply::ok());
        h.memory_limit = 100_000;
        assert_eq!(h.run("WF.ADD w a"), err(crate::ERR_OOM));
        h.memory_limit = 0;
        assert_eq!(h.run("WF.ADD w a"), Reply::Bool(true));
        h.memory_limit = 100_000;
        assert_eq!(
            h.run("WF.ADD w b"),
            Reply::Bool(true),
            "same generation: no allocation"
        );
        h.now_ms = 1000;
        assert_eq!(
            h.run("WF.ADD w c"),
            err(crate::ERR_OOM),
            "a new slot's generation"
        );
    }
}
