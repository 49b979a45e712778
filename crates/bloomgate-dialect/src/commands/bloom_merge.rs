//! BF.MERGE `destkey numkeys srckey [srckey ...] [OVERRIDE]`: the union of Bloom filters of one
//! shape, by a bitwise OR of their bits (our extension; RedisBloom has no BF.MERGE), over the
//! chain's link type: RedisBloom's filters (`MBbloom--`) or valkey-bloom's (`bloomfltr`, of one
//! seed), as the first source is. Its table entry has two key specs, as TDIGEST.MERGE's: the
//! destination read-write at argument 1, the sources read-only after numkeys at argument 2.

use super::{flags::*, spec, write, Arg, ArgKind, Args, CommandInfo, Ctx, Docs, Host};
use crate::num::{is, parse_i64};
use crate::reply::Reply;
use crate::types::sbchain::{Chain, Link, MergeLink, ValkeyLink};
use crate::value::{ChainValue, Kind};

/// numkeys is not an integer.
pub const ERR_BAD_NUMKEYS: &str = "ERR bad numkeys";
/// numkeys is below 1 or names more source keys than were given.
pub const ERR_NUMKEYS_RANGE: &str = "ERR numkeys out of range";
/// Something other than OVERRIDE follows the sources.
pub const ERR_SYNTAX: &str = "ERR syntax error";
/// A source key does not exist.
pub const ERR_NO_SOURCE: &str = "ERR source key does not exist";
/// The filters (sources, or the destination joining them) differ in shape.
pub const ERR_SHAPE: &str =
    "ERR filters differ in shape (sub-filters, their bits, hashes, capacity or options)";

const MERGE_ARGS: &[Arg] = &[
    Arg::plain("destkey", ArgKind::Key),
    Arg::plain("numkeys", ArgKind::Integer),
    Arg::plain("srckey", ArgKind::Key).multiple(),
    Arg::plain("override", ArgKind::PureToken)
        .token("OVERRIDE")
        .optional(),
];

/// BF.MERGE's table entry (our extension: `since` is bloomgate's version).
pub fn commands() -> Vec<CommandInfo> {
    vec![spec(
        "BF.MERGE",
        write("bloom.merge"),
        merge,
        DENYOOM,
        "bloom",
        -4,
        Some(Docs {
            since: "0.1.0",
            numkeys_at: Some(2),
            ..Docs::redisbloom(
                "Merges Bloom filters of the same shape into one (their union)",
                "O(m), where m is the filters' total size",
                "is key name for the Bloom filter that receives the union.",
                true,
                MERGE_ARGS,
            )
        }),
    )]
}

/// BF.MERGE, checked in this order: numkeys (an integer, at least 1, no more than the keys
/// given), nothing but OVERRIDE after the sources; the destination's type; each source (it
/// must exist and be a Bloom filter) and its shape against the first's; the destination's
/// shape, when it joins the union. A new destination (missing, or replaced by OVERRIDE) is
/// admitted against the memory budget before it is allocated. Replies OK.
pub(crate) fn merge(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let Some(num_keys) = parse_i64(args[2]) else {
        return Reply::error(ERR_BAD_NUMKEYS);
    };
    let given = args.len() as i64 - 3;
    if num_keys < 1 || num_keys > given {
        return Reply::error(ERR_NUMKEYS_RANGE);
    }
    let sources_end = 3 + num_keys as usize;
    let overriding = match &args[sources_end..] {
        [] => false,
        [word] if is(word, "OVERRIDE") => true,
        _ => return Reply::error(ERR_SYNTAX),
    };
    // The link type is the first source's (classic when it is missing or of another type,
    // which then answers as before).
    let kind = match ctx.value(args[3]) {
        Ok(Some(v)) => v.kind(),
        _ => Kind::Bloom,
    };
    let merge = Merge {
        dest: args[1],
        sources: &args[3..sources_end],
        overriding,
    };
    match kind {
        Kind::BloomValkey => merge.run::<ValkeyLink>(ctx),
        _ => merge.run::<Link>(ctx),
    }
}

/// A checked BF.MERGE: its destination, sources and OVERRIDE.
struct Merge<'a> {
    dest: &'a [u8],
    sources: &'a [&'a [u8]],
    overriding: bool,
}

impl Merge<'_> {
    /// The union over chains of link type `L`.
    fn run<L: ChainValue + MergeLink>(self, ctx: &mut Ctx<dyn Host + '_>) -> Reply {
        let Merge {
            dest,
            sources: keys,
            overriding,
        } = self;
        let num_keys = keys.len();
        let dest_exists = match ctx.typed::<Chain<L>>(dest) {
            Ok(found) => found.is_some(),
            Err(reply) => return reply,
        };
        // Clones share the bits' segments: cheap, and stable while the destination (possibly
        // one of the sources) is written.
        let mut sources: Vec<Chain<L>> = Vec::with_capacity(num_keys);
        for key in keys {
            let source = match ctx.typed::<Chain<L>>(key) {
                Ok(Some(source)) => source,
                Ok(None) => return Reply::error(ERR_NO_SOURCE),
                Err(reply) => return reply,
            };
            if sources
                .first()
                .is_some_and(|first| !first.same_shape(source))
            {
                return Reply::error(ERR_SHAPE);
            }
            sources.push(source.clone());
        }
        let refs: Vec<&Chain<L>> = sources.iter().collect();
        if dest_exists && !overriding {
            let fits = ctx.update(dest, |d: &mut Chain<L>| d.same_shape(refs[0]));
            if !fits {
                return Reply::error(ERR_SHAPE);
            }
            ctx.update(dest, |d: &mut Chain<L>| d.merge_from(&refs));
            ctx.changed(1);
            return Reply::ok();
        }
        let shape = match Chain::<L>::shape(&refs[0].dump_header()) {
            Ok(shape) => shape,
            Err(e) => return Reply::error(e),
        };
        let admitted = match ctx.admit(shape) {
            Ok(admitted) => admitted,
            Err(reply) => return reply,
        };
        let mut union = match Chain::<L>::from_shape(admitted) {
            Ok(chain) => chain,
            Err(e) => return Reply::error(e),
        };
        union.merge_from(&refs);
        if dest_exists {
            ctx.replace(dest, L::into_value(union));
        } else {
            ctx.create(dest, L::into_value(union));
        }
        Reply::ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::testing::*;
    use crate::commands::{lookup, Propagate};
    use crate::value::Value;

    fn fill(h: &mut Harness, key: &str, range: std::ops::Range<u32>) {
        h.run(&format!("BF.RESERVE {key} 0.01 100000"));
        let mut args = words(&format!("BF.MADD {key}"));
        args.extend(range.map(|i| format!("item{i}").into_bytes()));
        h.run_args(&args);
    }

    fn card(h: &mut Harness, key: &str) -> i64 {
        match h.run(&format!("BF.CARD {key}")) {
            Reply::Int(n) => n,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn union_of_two_100k_filters() {
        let mut h = Harness::new();
        fill(&mut h, "a", 0..40_000);
        fill(&mut h, "b", 30_000..70_000);
        assert_eq!(h.run("BF.MERGE dest 2 a b"), Reply::ok());
        assert_eq!(h.last.as_ref().unwrap().propagate, Propagate::Verbatim);
        let mut probe = words("BF.MEXISTS dest");
        probe.extend((0..70_000u32).map(|i| format!("item{i}").into_bytes()));
        let Reply::Array(found) = h.run_args(&probe) else {
            panic!()
        };
        let missing = found.iter().filter(|r| **r != Reply::Bool(true)).count();
        assert_eq!(missing, 0, "of 70k added");
        let mut absent = words("BF.MEXISTS dest");
        absent.extend((0..100_000u32).map(|i| format!("absent{i}").into_bytes()));
        let Reply::Array(found) = h.run_args(&absent) else {
            panic!()
        };
        let fp = found.iter().filter(|r| **r == Reply::Bool(true)).count();
        assert!(fp <= 2_000, "{fp} false positives in 100k");
        let n = card(&mut h, "dest");
        assert!((n - 70_000).abs() <= 3_500, "BF.CARD {n}");
        let Reply::Map(info) = h.run("BF.INFO dest") else {
            panic!()
        };
        assert_eq!(info[3].1, Reply::Int(n));
        // The sources are unchanged; joining an existing destination keeps its items.
        assert_eq!(card(&mut h, "a"), 40_000);
        fill(&mut h, "c", 100_000..100_010);
        assert_eq!(h.run("BF.MERGE c 1 a"), Reply::ok());
        assert_eq!(h.run("BF.EXISTS c item100005"), Reply::Bool(true));
        assert_eq!(h.run("BF.EXISTS c item5"), Reply::Bool(true));
        // OVERRIDE replaces it by the union of the sources alone (the destination may be one).
        assert_eq!(h.run("BF.MERGE c 1 b OVERRIDE"), Reply::ok());
        assert_eq!(h.run("BF.EXISTS c item100005"), Reply::Bool(false));
        assert_eq!(h.run("BF.EXISTS c item50000"), Reply::Bool(true));
        assert_eq!(h.run("BF.MERGE a 2 a b"), Reply::ok());
        assert_eq!(h.run("BF.EXISTS a item65000"), Reply::Bool(true));
    }

    #[test]
    fn errors() {
        let mut h = Harness::new();
        h.run("BF.RESERVE a 0.01 1000");
        h.run("BF.RESERVE b 0.01 1000");
        h.run("BF.RESERVE other 0.01 2000");
        h.run("CF.RESERVE cf 1000");
        h.foreign.push(b"str".to_vec());
        assert_eq!(h.run("BF.MERGE d x a"), err(ERR_BAD_NUMKEYS));
        assert_eq!(h.run("BF.MERGE d 0 a"), err(ERR_NUMKEYS_RANGE));
        assert_eq!(h.run("BF.MERGE d 2 a"), err(ERR_NUMKEYS_RANGE));
        assert_eq!(h.run("BF.MERGE d 1 a b"), err(ERR_SYNTAX));
        assert_eq!(h.run("BF.MERGE str 1 a"), err(crate::ERR_WRONGTYPE));
        assert_eq!(h.run("BF.MERGE cf 1 a"), err(crate::ERR_WRONGTYPE));
        assert_eq!(h.run("BF.MERGE d 2 a cf"), err(crate::ERR_WRONGTYPE));
        assert_eq!(h.run("BF.MERGE d 2 a str"), err(crate::ERR_WRONGTYPE));
        assert_eq!(h.run("BF.MERGE d 2 a nosuch"), err(ERR_NO_SOURCE));
        assert_eq!(h.run("BF.MERGE d 2 a other"), err(ERR_SHAPE));
        assert_eq!(h.run("BF.MERGE other 1 a"), err(ERR_SHAPE));
        assert!(!h.keys.contains_key(&b"d"[..]));
        assert_eq!(h.last.as_ref().unwrap().propagate, Propagate::Nothing);
        // The new destination is admitted against the budget before it is allocated.
        h.memory_limit = 1;
        assert_eq!(h.run("BF.MERGE d 2 a b"), err(crate::ERR_OOM));
        h.memory_limit = 0;
        assert_eq!(h.run("BF.MERGE d 2 a b override"), Reply::ok());
    }

    /// valkey-bloom's filters (`bloomfltr`) merge as RedisBloom's do, when of one seed (1.0's
    /// random seeds differ, so their bits do not line up). Capacity 100: no false positive at
    /// add time changes a filter's shape.
    #[test]
    fn valkey_bloom_filters_of_one_seed_merge() {
        use crate::config::{Dialect, ValkeyFlavour};
        let mut h = Harness::new();
        h.config = Dialect::ValkeyBloom(ValkeyFlavour::V1_0).defaults();
        let seed = "s".repeat(32);
        for (key, items) in [("a", "a1 a2 a3 a4 a5"), ("b", "b1 b2 b3 b4 b5")] {
            let line = format!("BF.INSERT {key} CAPACITY 100 SEED {seed} ITEMS {items}");
            h.run(&line);
        }
        h.run("BF.ADD random x");
        h.run("BF.RESERVE classic 0.01 100 LAYOUT classic");
        assert_eq!(h.run("BF.MERGE d 2 a b"), Reply::ok());
        for item in ["a1", "a3", "b1", "b5"] {
            assert_eq!(h.run(&format!("BF.EXISTS d {item}")), Reply::Bool(true));
        }
        assert_eq!(h.run("BF.INFO d FILTERS"), Reply::Int(1));
        assert!(matches!(h.keys.get(&b"d"[..]), Some(Value::BloomValkey(_))));
        assert_eq!(h.run("BF.MERGE a 1 b"), Reply::ok());
        assert_eq!(h.run("BF.EXISTS a b4"), Reply::Bool(true));
        assert_eq!(h.run("BF.MERGE e 2 a random"), err(ERR_SHAPE));
        assert_eq!(h.run("BF.MERGE classic 1 a"), err(crate::ERR_WRONGTYPE));
        assert_eq!(h.run("BF.MERGE e 2 a classic"), err(crate::ERR_WRONGTYPE));
    }

    #[test]
    fn key_positions_from_both_specs() {
        let info = lookup(b"bf.merge").unwrap();
        let args = words("BF.MERGE d 2 a b OVERRIDE");
        assert_eq!(
            info.key_positions(&args),
            Some(vec![(1, true), (3, false), (4, false)])
        );
        assert_eq!(info.key_positions(&words("BF.MERGE d 3 a b")), None);
        assert_eq!(info.key_positions(&words("BF.MERGE d x a b")), None);
        assert_eq!(
            info.flag_names(),
            ["write", "denyoom", "module", "movablekeys"]
        );
        let td = lookup(b"tdigest.merge").unwrap();
        assert_eq!(
            td.key_positions(&words("TDIGEST.MERGE d 1 s COMPRESSION 10")),
            Some(vec![(1, true), (3, false)])
        );
    }
}
