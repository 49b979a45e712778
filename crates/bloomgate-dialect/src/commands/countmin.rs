//! CMS.* commands with RedisBloom's replies, errors and checking order. The table's arity is
//! checked first ([`super::execute`]); a handler checks what is stricter (INCRBY's pairs).

use super::{
    flags::*, sketch_table, spec, write, wrong_arity, Arg, ArgKind, Args, CommandInfo, Ctx, Docs,
    Host, KEY_ONLY, N_ITEMS, READ,
};
use crate::num::{is, parse_f64, parse_i64};
use crate::reply::Reply;
use crate::types::countmin::CountMin;
use crate::value::DialectType as _;

/// RedisBloom's missing-key error for every CMS command but the creations.
const ERR_MISSING: &str = "CMS: key does not exist";

const DIM_ARGS: &[Arg] = &[
    Arg::key(),
    Arg::plain("width", ArgKind::Integer),
    Arg::plain("depth", ArgKind::Integer),
];
const PROB_ARGS: &[Arg] = &[
    Arg::key(),
    Arg::plain("error", ArgKind::Double),
    Arg::plain("probability", ArgKind::Double),
];
const INCRBY_ARGS: &[Arg] = &[
    Arg::key(),
    Arg::group(
        "items",
        ArgKind::Block,
        &[
            Arg::plain("item", ArgKind::String),
            Arg::plain("increment", ArgKind::Integer),
        ],
    )
    .multiple(),
];
const QUERY_ARGS: &[Arg] = &[Arg::key(), Arg::plain("item", ArgKind::String).multiple()];
const MERGE_ARGS: &[Arg] = &[
    Arg::key(),
    Arg::plain("numKeys", ArgKind::Integer),
    Arg::plain("source", ArgKind::Key).multiple(),
    Arg::group(
        "weights",
        ArgKind::Block,
        &[
            Arg::plain("weights", ArgKind::PureToken).token("WEIGHTS"),
            Arg::plain("weight", ArgKind::Double).multiple(),
        ],
    )
    .optional(),
];

/// The CMS.* command table: RedisBloom 8.2's arities, flags, ACL categories and documentation
/// (it files the creations and INFO under `@fast` without the `fast` flag).
pub fn commands() -> Vec<CommandInfo> {
    sketch_table! { "cms";
        fast "CMS.INITBYDIM", write("cms.initbydim"), init_by_dim, DENYOOM, 4, DIM_ARGS, "O(1)",
            "Initializes a Count-Min Sketch to dimensions specified by user";
        fast "CMS.INITBYPROB", write("cms.initbyprob"), init_by_prob, DENYOOM, 4, PROB_ARGS, "O(1)",
            "Initializes a Count-Min Sketch to accommodate requested tolerances.";
        slow "CMS.INCRBY", write("cms.incrby"), incrby, DENYOOM, -4, INCRBY_ARGS, N_ITEMS,
            "Increases the count of one or more items by increment";
        slow "CMS.QUERY", READ, query, Flags::NONE, -3, QUERY_ARGS, N_ITEMS,
            "Returns the count for one or more items in a sketch";
        slow "CMS.MERGE", write("cms.merge"), merge, DENYOOM, -4, MERGE_ARGS,
            "O(n) where n is the number of sketches",
            "Merges several sketches into one sketch";
        fast "CMS.INFO", READ, info, Flags::NONE, 2, KEY_ONLY, "O(1)",
            "Returns information about a sketch";
    }
}

/// Creates the sketch after RedisBloom's checks: the key must not exist (whatever it holds),
/// then `dims` parses the arguments; `width × depth` must fit a signed 64-bit integer; and the
/// counters must fit in the memory budget (else RedisBloom's allocation-failure error).
fn create<H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    args: &Args,
    dims: impl FnOnce(&Args) -> Result<(i64, i64), &'static str>,
) -> Reply {
    let key = args[1];
    if ctx.key_exists(key) {
        return Reply::error("CMS: key already exists");
    }
    let (width, depth) = match dims(args) {
        Ok(dims) => dims,
        Err(msg) => return Reply::error(msg),
    };
    if width < 1 || depth < 1 || width > i64::MAX / depth {
        return Reply::error("CMS: invalid init arguments");
    }
    let (width, depth) = (width as u64, depth as u64);
    // Admitted against the memory budget and the per-key cap before anything is allocated.
    const NO_MEMORY: &str = "CMS: Insufficient memory to create the key";
    let admitted = match CountMin::planned_bytes(width, depth) {
        Some(b) => ctx.admit_or(crate::budget::Buffer(b), NO_MEMORY).map(drop),
        None => Err(Reply::error(NO_MEMORY)),
    };
    if let Err(reply) = admitted {
        return reply;
    }
    match CountMin::new(width, depth) {
        Some(cms) => {
            ctx.create(key, cms.into_value());
            Reply::ok()
        }
        None => Reply::error(NO_MEMORY),
    }
}

/// CMS.INITBYDIM `key width depth`.
pub(crate) fn init_by_dim(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    create(ctx, args, |args| {
        let positive = |arg, msg| parse_i64(arg).filter(|&v| v >= 1).ok_or(msg);
        Ok((
            positive(args[2], "CMS: invalid width")?,
            positive(args[3], "CMS: invalid depth")?,
        ))
    })
}

/// CMS.INITBYPROB `key error probability`: both in (0, 1); the dimensions as
/// [`CountMin::dims_for`] derives them (a value beyond `i64` reads as negative there, hence
/// invalid).
pub(crate) fn init_by_prob(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    create(ctx, args, |args| {
        let open_unit = |arg, msg| parse_f64(arg).filter(|&v| v > 0.0 && v < 1.0).ok_or(msg);
        let error = open_unit(args[2], "CMS: invalid overestimation value")?;
        let prob = open_unit(args[3], "CMS: invalid prob value")?;
        let (width, depth) = CountMin::dims_for(error, prob);
        Ok((width as i64, depth as i64))
    })
}

/// CMS.INCRBY `key item increment [item increment ...]`: the key, then every pair's increment
/// (an integer, not negative) before any is applied; each reply is the item's new estimate, or
/// an overflow error in its place once a counter saturates.
pub(crate) fn incrby(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if args.len() % 2 == 1 {
        return wrong_arity("cms.incrby");
    }
    let key = args[1];
    if let Err(reply) = ctx.existing::<CountMin>(key, ERR_MISSING) {
        return reply;
    }
    let mut pairs = Vec::with_capacity(args.len() / 2 - 1);
    for pair in args[2..].chunks_exact(2) {
        match parse_i64(pair[1]) {
            None => return Reply::error("CMS: Cannot parse number"),
            Some(n) if n < 0 => return Reply::error("CMS: Number cannot be negative"),
            Some(n) => pairs.push((pair[0], n as u64)),
        }
    }
    let mut replies = Vec::with_capacity(pairs.len());
    ctx.update(key, |cms: &mut CountMin| {
        cms.increment_many(&pairs, |n| {
            replies.push(match n {
                n if n == u64::from(u32::MAX) => Reply::error("CMS: INCRBY overflow"),
                n => Reply::Int(n as i64),
            })
        })
    });
    ctx.changed(1);
    Reply::Array(replies)
}

/// CMS.QUERY `key item...`.
pub(crate) fn query(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    match ctx.existing::<CountMin>(args[1], ERR_MISSING) {
        Ok(cms) => Reply::Array(
            cms.query_many(&args[2..])
                .into_iter()
                .map(|n| Reply::Int(n as i64))
                .collect(),
        ),
        Err(reply) => reply,
    }
}

/// CMS.MERGE `destination numKeys source... [WEIGHTS weight...]`, checked in RedisBloom's
/// order: the destination; numKeys (an integer, positive); the argument count (with WEIGHTS
/// — its first occurrence after numKeys, case-insensitive — exactly after the sources, one
/// weight each); then per source its weight (an integer), the key and its dimensions; then the
/// merge's overflow check. The destination may also be a source.
pub(crate) fn merge(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let dest = args[1];
    if let Err(reply) = ctx.existing::<CountMin>(dest, ERR_MISSING) {
        return reply;
    }
    let Some(num_keys) = parse_i64(args[2]) else {
        return Reply::error("CMS: invalid numkeys");
    };
    if num_keys <= 0 {
        return Reply::error("CMS: Number of keys must be positive");
    }
    let rest = &args[3..];
    let weights_at = rest.iter().position(|a| is(a, "WEIGHTS"));
    let n = rest.len() as i64;
    match weights_at {
        None if num_keys != n => return Reply::error("CMS: wrong number of keys"),
        Some(at) if at as i64 != num_keys || n != 1 + 2 * num_keys => {
            return Reply::error("CMS: wrong number of keys/weights")
        }
        _ => {}
    }
    let num_keys = num_keys as usize;
    let (width, depth) = {
        let d = ctx
            .existing::<CountMin>(dest, ERR_MISSING)
            .expect("checked");
        (d.width(), d.depth())
    };
    let mut sources: Vec<(CountMin, i64)> = Vec::with_capacity(num_keys);
    for i in 0..num_keys {
        let weight = match weights_at {
            None => 1,
            Some(_) => match parse_i64(rest[num_keys + 1 + i]) {
                Some(w) => w,
                None => return Reply::error("CMS: invalid weight value"),
            },
        };
        let source = match ctx.existing::<CountMin>(rest[i], ERR_MISSING) {
            Ok(source) => source,
            Err(reply) => return reply,
        };
        if source.width() != width || source.depth() != depth {
            return Reply::error("CMS: width/depth is not equal");
        }
        // A clone shares the counters' segments: cheap, and stable while the destination
        // (possibly one of the sources) is written.
        sources.push((source.clone(), weight));
    }
    let refs: Vec<(&CountMin, i64)> = sources.iter().map(|(s, w)| (s, *w)).collect();
    match ctx.update(dest, |d: &mut CountMin| d.merge(&refs)) {
        Ok(()) => {
            ctx.changed(1);
            Reply::ok()
        }
        Err(_) => Reply::error("CMS: MERGE overflow"),
    }
}

/// CMS.INFO `key`: width, depth and the total count (signed, as RedisBloom replies it).
pub(crate) fn info(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    match ctx.existing::<CountMin>(args[1], ERR_MISSING) {
        Ok(cms) => Reply::Map(vec![
            (
                Reply::Simple("width".into()),
                Reply::Int(cms.width() as i64),
            ),
            (
                Reply::Simple("depth".into()),
                Reply::Int(cms.depth() as i64),
            ),
            (
                Reply::Simple("count".into()),
                Reply::Int(cms.total() as i64),
            ),
        ]),
        Err(reply) => reply,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::reply::Reply;

    fn ints(v: &[i64]) -> Reply {
        Reply::Array(v.iter().map(|&n| Reply::Int(n)).collect())
    }

    #[test]
    fn create_checks_in_redisbloom_order() {
        let mut h = Harness::new();
        h.foreign.push(b"s".to_vec());
        assert_eq!(h.run("CMS.INITBYDIM s 0 0"), err("CMS: key already exists"));
        assert_eq!(h.run("CMS.INITBYDIM c 0 x"), err("CMS: invalid width"));
        assert_eq!(h.run("CMS.INITBYDIM c 5 -1"), err("CMS: invalid depth"));
        assert_eq!(
            h.run("CMS.INITBYDIM c 9223372036854775807 2"),
            err("CMS: invalid init arguments")
        );
        assert_eq!(
            h.run("CMS.INITBYPROB c 1 0.5"),
            err("CMS: invalid overestimation value")
        );
        assert_eq!(
            h.run("CMS.INITBYPROB c 0.1 0"),
            err("CMS: invalid prob value")
        );
        assert_eq!(
            h.run("CMS.INITBYPROB c 1e-300 0.5"),
            err("CMS: invalid init arguments")
        );
        h.memory_limit = 1000;
        assert_eq!(
            h.run("CMS.INITBYDIM c 1000 1000"),
            err("CMS: Insufficient memory to create the key")
        );
        // RedisBloom's test_insufficient_memory: refused before anything is allocated.
        h.memory_limit = 1 << 30;
        for line in [
            "CMS.INITBYPROB x 0.0000000000000001 0.0000000000000001",
            "CMS.INITBYDIM x 1000000000 1000000000",
            "CMS.INITBYDIM x 2294967296 2294967296",
        ] {
            assert_eq!(
                h.run(line),
                err("CMS: Insufficient memory to create the key")
            );
        }
        assert_eq!(
            h.run("CMS.INITBYDIM x 100000000000000 100000000000000"),
            err("CMS: invalid init arguments")
        );
        h.memory_limit = 0;
        assert_eq!(h.run("CMS.INITBYPROB c 0.001 0.01"), Reply::ok());
        assert_eq!(
            h.run("CMS.INFO c"),
            Reply::Map(vec![
                (Reply::Simple("width".into()), Reply::Int(2000)),
                (Reply::Simple("depth".into()), Reply::Int(7)),
                (Reply::Simple("count".into()), Reply::Int(0)),
            ])
        );
        assert_eq!(h.run("CMS.INITBYDIM c 1 1"), err("CMS: key already exists"));
    }

    #[test]
    fn incrby_validates_every_pair_first_and_saturates() {
        let mut h = Harness::new();
        assert_eq!(h.run("CMS.INCRBY c a 1"), err("CMS: key does not exist"));
        h.run("CMS.INITBYDIM c 10 2");
        assert_eq!(
            h.run("CMS.INCRBY c a 1 b"),
            super::wrong_arity("cms.incrby")
        );
        assert_eq!(
            h.run("CMS.INCRBY c a 1 b x"),
            err("CMS: Cannot parse number")
        );
        assert_eq!(
            h.run("CMS.INCRBY c a 1 b -1"),
            err("CMS: Number cannot be negative")
        );
        assert_eq!(h.run("CMS.QUERY c a b"), ints(&[0, 0]));
        assert_eq!(h.run("CMS.INCRBY c a 1 b 3"), ints(&[1, 3]));
        assert_eq!(
            h.run("CMS.INCRBY c a 4294967295 b 3"),
            Reply::Array(vec![err("CMS: INCRBY overflow"), Reply::Int(6)])
        );
        assert_eq!(h.run("CMS.QUERY c a b"), ints(&[4294967295, 6]));
        let Reply::Map(info) = h.run("CMS.INFO c") else {
            panic!()
        };
        assert_eq!(info[2].1, Reply::Int(4294967302));
    }

    #[test]
    fn merge_checks_and_weights() {
        let mut h = Harness::new();
        h.run("CMS.INITBYDIM a 20 3");
        h.run("CMS.INITBYDIM b 20 3");
        h.run("CMS.INITBYDIM d 20 3");
        h.run("CMS.INITBYDIM small 10 3");
        h.run("CMS.INCRBY a x 5 y 1");
        h.run("CMS.INCRBY b x 2");
        assert_eq!(
            h.run("CMS.MERGE nosuch 1 a"),
            err("CMS: key does not exist")
        );
        assert_eq!(h.run("CMS.MERGE d x a"), err("CMS: invalid numkeys"));
        assert_eq!(
            h.run("CMS.MERGE d 0 a"),
            err("CMS: Number of keys must be positive")
        );
        assert_eq!(h.run("CMS.MERGE d 2 a"), err("CMS: wrong number of keys"));
        assert_eq!(
            h.run("CMS.MERGE d 2 a b WEIGHTS 1"),
            err("CMS: wrong number of keys/weights")
        );
        assert_eq!(
            h.run("CMS.MERGE d 2 a b weights 1 z"),
            err("CMS: invalid weight value")
        );
        assert_eq!(
            h.run("CMS.MERGE d 2 a nosuch"),
            err("CMS: key does not exist")
        );
        assert_eq!(
            h.run("CMS.MERGE d 2 a small"),
            err("CMS: width/depth is not equal")
        );
        assert_eq!(
            h.run("CMS.MERGE d 2 a b WEIGHTS 1 -3"),
            err("CMS: MERGE overflow")
        );
        assert_eq!(h.run("CMS.MERGE d 2 a b WEIGHTS 2 3"), Reply::ok());
        assert_eq!(h.run("CMS.QUERY d x y"), ints(&[16, 2]));
        // The destination as a source.
        assert_eq!(h.run("CMS.MERGE d 2 d a"), Reply::ok());
        assert_eq!(h.run("CMS.QUERY d x y"), ints(&[21, 3]));
        let Reply::Map(info) = h.run("CMS.INFO d") else {
            panic!()
        };
        assert_eq!(info[2].1, Reply::Int(2 * 6 + 3 * 2 + 6));
    }
}
