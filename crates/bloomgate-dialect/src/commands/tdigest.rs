//! TDIGEST.* commands with RedisBloom 8's replies, errors and validation order.
//!
//! Facts these follow (from RedisBloom's behaviour, checked against a live RedisBloom 8):
//! - Every command but CREATE and MERGE first needs the key: `ERR T-Digest: key does not exist`,
//!   or WRONGTYPE. Arguments are then parsed in order, the first bad one answering.
//! - Reads (QUANTILE, CDF, RANK, ...) merge the digest's buffer in place before answering, as
//!   RedisBloom's do; this changes INFO's counts and later answers, so it is done here too,
//!   through [`Ctx::typed_quiet`] (not a write: nothing is replicated or signalled).
//! - Doubles are replied as doubles (RESP3 `,`; RESP2 bulk strings), `nan` and `±inf` included.

use super::{
    flags::*, spec, write, wrong_arity, Arg, ArgKind, Args, CommandInfo, Ctx, Docs, Run, READ,
};
use super::{Host, KEY_ONLY};
use crate::num::{is, parse_f64, parse_i64};
use crate::reply::Reply;
use crate::types::tdigest::{TDigest, DEFAULT_COMPRESSION, I64_LIMIT};
use crate::value::DialectType;

const ERR_MISSING: &str = "ERR T-Digest: key does not exist";
const ERR_EXISTS: &str = "ERR T-Digest: key already exists";
const ERR_KEYWORD: &str = "ERR T-Digest: wrong keyword";
const ERR_COMPRESSION: &str = "ERR T-Digest: error parsing compression parameter";
const ERR_COMPRESSION_RANGE: &str =
    "ERR T-Digest: compression parameter needs to be a positive integer";
const ERR_OVERFLOW: &str = "ERR T-Digest: overflow detected";

/// `[COMPRESSION compression]`, as RedisBloom documents it.
const COMPRESSION_BLOCK: Arg = Arg::group(
    "compression_block",
    ArgKind::Block,
    &[
        Arg::plain("compression_token", ArgKind::PureToken).token("COMPRESSION"),
        Arg::plain("compression", ArgKind::Integer),
    ],
)
.optional();

const fn key_doubles(name: &'static str) -> [Arg; 2] {
    [Arg::key(), Arg::plain(name, ArgKind::Double).multiple()]
}

const CREATE_ARGS: &[Arg] = &[Arg::key(), COMPRESSION_BLOCK];
const VALUES: &[Arg] = &key_doubles("value");
const RANKS: &[Arg] = &key_doubles("rank");
const REVRANKS: &[Arg] = &key_doubles("reverse_rank");
const QUANTILES: &[Arg] = &key_doubles("quantile");
const MERGE_ARGS: &[Arg] = &[
    Arg::plain("destination-key", ArgKind::Key),
    Arg::plain("numkeys", ArgKind::Integer),
    Arg::plain("source-key", ArgKind::Key).multiple(),
    COMPRESSION_BLOCK,
    Arg::plain("override", ArgKind::PureToken)
        .token("OVERRIDE")
        .optional(),
];
const TRIMMED_ARGS: &[Arg] = &[
    Arg::key(),
    Arg::plain("low_cut_quantile", ArgKind::Double),
    Arg::plain("high_cut_quantile", ArgKind::Double),
];

/// Documentation of a TDIGEST command (all date from 2.4.0; key specs carry no notes).
const fn docs(
    summary: &'static str,
    complexity: &'static str,
    rw: bool,
    args: &'static [Arg],
) -> Docs {
    Docs {
        summary,
        complexity,
        since: "2.4.0",
        key_notes: "",
        key_rw: rw,
        numkeys_at: None,
        args,
        history: &[],
    }
}

/// The TDIGEST.* command table: RedisBloom 8's arities, flags, ACL categories and docs.
pub fn commands() -> Vec<CommandInfo> {
    // RedisBloom registers them without the `fast` flag, most in the `@fast` category.
    let td = |name, access, run: Run, flags, category, arity, docs| {
        spec(name, access, run, flags, category, arity, Some(docs))
    };
    let (fast, slow) = ("fast tdigest", "tdigest");
    vec![
        td(
            "TDIGEST.CREATE",
            write("tdigest.create"),
            create,
            DENYOOM,
            fast,
            -2,
            docs("Allocates memory and initializes a new t-digest sketch", "O(1)", true, CREATE_ARGS),
        ),
        td(
            "TDIGEST.RESET",
            write("tdigest.reset"),
            reset,
            DENYOOM,
            fast,
            2,
            docs(
                "Resets a t-digest sketch: empty the sketch and re-initializes it.",
                "O(1)",
                true,
                KEY_ONLY,
            ),
        ),
        td(
            "TDIGEST.ADD",
            write("tdigest.add"),
            add,
            DENYOOM,
            slow,
            -3,
            docs(
                "Adds one or more observations to a t-digest sketch",
                "O(N), where N is the number of samples to add",
                true,
                VALUES,
            ),
        ),
        td(
            "TDIGEST.MERGE",
            write("tdigest.merge"),
            merge,
            DENYOOM,
            slow,
            -4,
            // The sources are RedisBloom's second key spec: read-only, counted by numkeys.
            Docs {
                numkeys_at: Some(2),
                ..docs(
                    "Merges multiple t-digest sketches into a single sketch",
                    "O(N*K), where N is the number of centroids and K being the number of input sketches",
                    true,
                    MERGE_ARGS,
                )
            },
        ),
        td(
            "TDIGEST.MIN",
            READ,
            |ctx, args| min_max(ctx, args, false),
            Flags::NONE,
            fast,
            2,
            docs(
                "Returns the minimum observation value from a t-digest sketch",
                "O(1)",
                false,
                KEY_ONLY,
            ),
        ),
        td(
            "TDIGEST.MAX",
            READ,
            |ctx, args| min_max(ctx, args, true),
            Flags::NONE,
            fast,
            2,
            docs(
                "Returns the maximum observation value from a t-digest sketch",
                "O(1)",
                false,
                KEY_ONLY,
            ),
        ),
        td(
            "TDIGEST.QUANTILE",
            READ,
            quantile,
            Flags::NONE,
            fast,
            -3,
            docs(
                "Returns, for each input fraction, an estimation of the value (floating point) that is smaller than the given fraction of observations",
                "O(N) where N is the number of quantiles specified.",
                false,
                QUANTILES,
            ),
        ),
        td(
            "TDIGEST.CDF",
            READ,
            cdf,
            Flags::NONE,
            fast,
            -3,
            docs(
                "Returns, for each input value, an estimation of the floating-point fraction of (observations smaller than the given value + half the observations equal to the given value). Multiple fractions can be retrieved in a single call.",
                "O(N) where N is the number of values specified.",
                false,
                VALUES,
            ),
        ),
        td(
            "TDIGEST.RANK",
            READ,
            |ctx, args| rank(ctx, args, false),
            Flags::NONE,
            fast,
            -3,
            docs(
                "Returns, for each input value (floating-point), the estimated rank of the value (the number of observations in the sketch that are smaller than the value + half the number of observations that are equal to the value)",
                "O(N) where N is the number of values specified.",
                false,
                VALUES,
            ),
        ),
        td(
            "TDIGEST.REVRANK",
            READ,
            |ctx, args| rank(ctx, args, true),
            Flags::NONE,
            fast,
            -3,
            docs(
                "Returns, for each input value (floating-point), the estimated reverse rank of the value (the number of observations in the sketch that are larger than the value + half the number of observations that are equal to the value)",
                "O(N) where N is the number of values specified.",
                false,
                VALUES,
            ),
        ),
        td(
            "TDIGEST.BYRANK",
            READ,
            |ctx, args| by_rank(ctx, args, false),
            Flags::NONE,
            fast,
            -3,
            docs(
                "Returns, for each input rank, an estimation of the value (floating-point) with that rank",
                "O(N) where N is the number of ranks specified",
                false,
                RANKS,
            ),
        ),
        td(
            "TDIGEST.BYREVRANK",
            READ,
            |ctx, args| by_rank(ctx, args, true),
            Flags::NONE,
            fast,
            -3,
            docs(
                "Returns, for each input reverse rank, an estimation of the value (floating-point) with that reverse rank",
                "O(N) where N is the number of reverse ranks specified.",
                false,
                REVRANKS,
            ),
        ),
        td(
            "TDIGEST.TRIMMED_MEAN",
            READ,
            trimmed_mean,
            Flags::NONE,
            slow,
            4,
            docs(
                "Returns an estimation of the mean value from the sketch, excluding observation values outside the low and high cutoff quantiles",
                "O(N) where N is the number of centroids",
                false,
                TRIMMED_ARGS,
            ),
        ),
        td(
            "TDIGEST.INFO",
            READ,
            info,
            Flags::NONE,
            fast,
            2,
            docs(
                "Returns information and statistics about a t-digest sketch",
                "O(1)",
                false,
                KEY_ONLY,
            ),
        ),
    ]
}

/// A compression argument: a positive integer.
fn compression(arg: &[u8]) -> Result<i64, Reply> {
    match parse_i64(arg) {
        None => Err(Reply::error(ERR_COMPRESSION)),
        Some(c) if c <= 0 => Err(Reply::error(ERR_COMPRESSION_RANGE)),
        Some(c) => Ok(c),
    }
}

/// Where RedisBloom's option search finds `name` among `args` (any case, whole argument).
fn position(args: &Args, name: &str) -> Option<usize> {
    args.iter().position(|a| is(a, name))
}

/// The digest at `key`, which a read may compress in place.
fn digest<'a, H: Host + ?Sized>(ctx: &'a mut Ctx<H>, key: &[u8]) -> Result<&'a mut TDigest, Reply> {
    ctx.typed_quiet::<TDigest>(key)?
        .ok_or_else(|| Reply::error(ERR_MISSING))
}

/// C's `(long long)` of a double on x86-64: NaN and out-of-range values become `i64::MIN`.
fn c_long_long(v: f64) -> i64 {
    if v.is_nan() || !(-I64_LIMIT..I64_LIMIT).contains(&v) {
        i64::MIN
    } else {
        v as i64
    }
}

/// Rounds half toward zero (RedisBloom's rounding of a forward rank).
fn round_half_down(v: f64) -> f64 {
    let whole = v.trunc();
    let frac = v - whole;
    if frac.abs() <= 0.5 {
        whole
    } else if whole >= 0.0 {
        whole + 1.0
    } else {
        whole - 1.0
    }
}

/// TDIGEST.CREATE `key [COMPRESSION c]`: the key is checked before the options.
pub(crate) fn create(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if args.len() != 2 && args.len() != 4 {
        return wrong_arity("tdigest.create");
    }
    match ctx.typed::<TDigest>(args[1]) {
        Err(reply) => return reply,
        Ok(Some(_)) => return Reply::error(ERR_EXISTS),
        Ok(None) => {}
    }
    let mut c = DEFAULT_COMPRESSION;
    if args.len() == 4 {
        if position(&args[2..], "COMPRESSION").is_none() {
            return Reply::error(ERR_KEYWORD);
        }
        c = match compression(args[3]) {
            Ok(c) => c,
            Err(reply) => return reply,
        };
    }
    const FAILED: &str = "ERR T-Digest: allocation failed";
    let shape = match TDigest::shape(c).map(|shape| ctx.admit_or(shape, FAILED)) {
        Some(Ok(shape)) => shape,
        Some(Err(reply)) => return reply,
        None => return Reply::error(FAILED),
    };
    let Some(digest) = TDigest::new(shape) else {
        return Reply::error(FAILED);
    };
    ctx.create(args[1], digest.into_value());
    Reply::ok()
}

/// TDIGEST.RESET `key`.
pub(crate) fn reset(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if let Err(reply) = existing_for_write(ctx, args[1]) {
        return reply;
    }
    ctx.update(args[1], TDigest::reset);
    ctx.changed(1);
    Reply::ok()
}

fn existing_for_write<H: Host + ?Sized>(ctx: &mut Ctx<H>, key: &[u8]) -> Result<(), Reply> {
    ctx.existing::<TDigest>(key, ERR_MISSING).map(|_| ())
}

/// TDIGEST.ADD `key value...`: every value parsed (finite) before any is added; an overflow
/// stops the adds there (those before it stay) and answers an error.
pub(crate) fn add(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if let Err(reply) = existing_for_write(ctx, args[1]) {
        return reply;
    }
    let mut values = Vec::with_capacity(args.len() - 2);
    for arg in &args[2..] {
        match parse_f64(arg) {
            None => return Reply::error("ERR T-Digest: error parsing val parameter"),
            Some(v) if v.is_infinite() => {
                return Reply::error("ERR T-Digest: val parameter needs to be a finite number")
            }
            Some(v) => values.push(v),
        }
    }
    let result = ctx.update(args[1], |d: &mut TDigest| {
        values.iter().try_for_each(|&v| d.add(v, 1))
    });
    // An overflow stops the values part-way: those before it, and the compression it began,
    // changed the digest. The stop is decided by the digest and the values alone, so the
    // command is replicated and logged as sent and a replay stops at the same place.
    ctx.changed(1);
    match result {
        Ok(()) => Reply::ok(),
        Err(_) => Reply::error(ERR_OVERFLOW),
    }
}

/// TDIGEST.MERGE `dest numkeys src... [COMPRESSION c] [OVERRIDE]`.
///
/// Checked in RedisBloom's order: the destination's type, numkeys, the options after the
/// sources (a keyword anywhere among them; other words ignored once one is found), then each
/// source. The result is a new digest of the given compression, or of the destination's when
/// it exists (without OVERRIDE), else of the largest among the sources; the old destination
/// (unless OVERRIDE) and then each source are merged into it in order, each compressed in place
/// first, as RedisBloom's merge does to them.
pub(crate) fn merge(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let dest = args[1];
    let dest_compression = match ctx.typed::<TDigest>(dest) {
        Err(reply) => return reply,
        Ok(found) => found.map(TDigest::compression),
    };
    let numkeys = match parse_i64(args[2]) {
        None => return Reply::error("ERR T-Digest: error parsing numkeys"),
        Some(n) if n <= 0 => {
            return Reply::error("ERR T-Digest: numkeys needs to be a positive integer")
        }
        Some(n) if n > (args.len() - 3) as i64 => return wrong_arity("tdigest.merge"),
        Some(n) => n as usize,
    };
    let mut c = dest_compression.unwrap_or(0);
    let mut use_max = dest_compression.is_none();
    let mut override_dest = false;
    let rest = &args[3 + numkeys..];
    if !rest.is_empty() {
        let at_compression = position(rest, "COMPRESSION");
        if let Some(at) = at_compression {
            use_max = false;
            let Some(arg) = rest.get(at + 1) else {
                return wrong_arity("tdigest.merge");
            };
            c = match compression(arg) {
                Ok(c) => c,
                Err(reply) => return reply,
            };
        }
        let at_override = position(rest, "OVERRIDE");
        if at_override.is_some() {
            override_dest = true;
            if at_compression.is_none() {
                use_max = true;
                c = 0;
            }
        }
        if at_compression.is_none() && at_override.is_none() {
            return Reply::error(ERR_KEYWORD);
        }
    }
    let sources = &args[3..3 + numkeys];
    for &source in sources {
        let found = if source == dest {
            dest_compression
        } else {
            match ctx.typed::<TDigest>(source) {
                Err(reply) => return reply,
                Ok(found) => found.map(TDigest::compression),
            }
        };
        let Some(source_compression) = found else {
            return Reply::error(ERR_MISSING);
        };
        if use_max {
            c = c.max(source_compression);
        }
    }
    const FAILED: &str = "ERR T-Digest: allocation of destination digest failed";
    let shape = match TDigest::shape(c).map(|shape| ctx.admit_or(shape, FAILED)) {
        Some(Ok(shape)) => shape,
        Some(Err(reply)) => return reply,
        None => return Reply::error(FAILED),
    };
    let Some(mut merged) = TDigest::new(shape) else {
        return Reply::error(FAILED);
    };
    if dest_compression.is_some() && !override_dest {
        // RedisBloom ignores an overflow here.
        let _ = merge_key(ctx, &mut merged, dest);
    }
    for &source in sources {
        if merge_key(ctx, &mut merged, source).is_err() {
            return Reply::error(ERR_OVERFLOW);
        }
    }
    let value = merged.into_value();
    if dest_compression.is_some() {
        ctx.replace(dest, value);
    } else {
        ctx.create(dest, value);
    }
    Reply::ok()
}

/// Compresses the digest at `key` in place and adds its centroids to `into`.
fn merge_key<H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    into: &mut TDigest,
    key: &[u8],
) -> Result<(), crate::types::tdigest::Overflow> {
    let Ok(Some(from)) = ctx.typed_quiet::<TDigest>(key) else {
        return Ok(());
    };
    into.merge_from(from)
}

/// TDIGEST.MIN / TDIGEST.MAX `key`: `nan` when empty.
pub(crate) fn min_max<H: Host + ?Sized>(ctx: &mut Ctx<H>, args: &Args, max: bool) -> Reply {
    let d = match ctx.existing::<TDigest>(args[1], ERR_MISSING) {
        Ok(d) => d,
        Err(reply) => return reply,
    };
    Reply::Double(match (d.size() > 0, max) {
        (false, _) => f64::NAN,
        (true, false) => d.min(),
        (true, true) => d.max(),
    })
}

/// Parses every argument from index 2 with `parse`, the first failure answering.
fn parse_all<T>(args: &Args, parse: impl Fn(&[u8]) -> Result<T, Reply>) -> Result<Vec<T>, Reply> {
    args[2..].iter().map(|a| parse(a)).collect()
}

/// TDIGEST.QUANTILE `key q...`: each in [0, 1].
pub(crate) fn quantile(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let d = match digest(ctx, args[1]) {
        Ok(d) => d,
        Err(reply) => return reply,
    };
    let qs = match parse_all(args, |a| match parse_f64(a) {
        None => Err(Reply::error("ERR T-Digest: error parsing quantile")),
        Some(q) if !(0.0..=1.0).contains(&q) => {
            Err(Reply::error("ERR T-Digest: quantile should be in [0,1]"))
        }
        Some(q) => Ok(q),
    }) {
        Ok(qs) => qs,
        Err(reply) => return reply,
    };
    doubles(d.quantiles(&qs))
}

fn doubles(values: Vec<f64>) -> Reply {
    Reply::Array(values.into_iter().map(Reply::Double).collect())
}

/// TDIGEST.CDF `key value...`.
pub(crate) fn cdf(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let d = match digest(ctx, args[1]) {
        Ok(d) => d,
        Err(reply) => return reply,
    };
    let values = match parse_all(args, |a| {
        parse_f64(a).ok_or_else(|| Reply::error("ERR T-Digest: error parsing cdf"))
    }) {
        Ok(v) => v,
        Err(reply) => return reply,
    };
    doubles(values.into_iter().map(|v| d.cdf(v)).collect())
}

/// TDIGEST.RANK / REVRANK `key value...`: -2 for an empty digest, -1 / the count beyond the
/// extremes, else the CDF scaled to the count and rounded (half down forward, half away from
/// zero in reverse).
pub(crate) fn rank<H: Host + ?Sized>(ctx: &mut Ctx<H>, args: &Args, reverse: bool) -> Reply {
    let d = match digest(ctx, args[1]) {
        Ok(d) => d,
        Err(reply) => return reply,
    };
    let values = match parse_all(args, |a| {
        parse_f64(a).ok_or_else(|| Reply::error("ERR T-Digest: error parsing value"))
    }) {
        Ok(v) => v,
        Err(reply) => return reply,
    };
    let size = d.size() as f64;
    let (min, max) = (d.min(), d.max());
    let ranks = values.into_iter().map(|v| {
        let rank = if size == 0.0 {
            -2.0
        } else if v < min {
            if reverse {
                size
            } else {
                -1.0
            }
        } else if v > max {
            if reverse {
                -1.0
            } else {
                size
            }
        } else {
            let scaled = d.cdf(v) * size;
            if reverse {
                (size - scaled.round()).round()
            } else {
                round_half_down(scaled)
            }
        };
        Reply::Int(c_long_long(rank))
    });
    Reply::Array(ranks.collect())
}

/// TDIGEST.BYRANK / BYREVRANK `key rank...`: integers ≥ 0; `nan` for an empty digest, the
/// extreme for rank 0, `±inf` at or past the count, else the quantile of the rank.
pub(crate) fn by_rank<H: Host + ?Sized>(ctx: &mut Ctx<H>, args: &Args, reverse: bool) -> Reply {
    let d = match digest(ctx, args[1]) {
        Ok(d) => d,
        Err(reply) => return reply,
    };
    let ranks = match parse_all(args, |a| match parse_i64(a) {
        None => Err(Reply::error("ERR T-Digest: error parsing rank")),
        Some(r) if r < 0 => Err(Reply::error("ERR T-Digest: rank needs to be non negative")),
        Some(r) => Ok(r as f64),
    }) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let size = d.size() as f64;
    let (min, max) = (d.min(), d.max());
    let values = ranks.into_iter().map(|rank| {
        if size == 0.0 {
            f64::NAN
        } else if rank == 0.0 {
            if reverse {
                max
            } else {
                min
            }
        } else if rank >= size {
            if reverse {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        } else {
            let at = if reverse { size - rank - 1.0 } else { rank };
            d.quantile(at / size)
        }
    });
    doubles(values.collect())
}

/// TDIGEST.TRIMMED_MEAN `key low high`.
pub(crate) fn trimmed_mean(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let d = match digest(ctx, args[1]) {
        Ok(d) => d,
        Err(reply) => return reply,
    };
    let Some(low) = parse_f64(args[2]) else {
        return Reply::error("ERR T-Digest: error parsing low_cut_percentile");
    };
    let Some(high) = parse_f64(args[3]) else {
        return Reply::error("ERR T-Digest: error parsing high_cut_percentile");
    };
    if !(0.0..=1.0).contains(&low) || !(0.0..=1.0).contains(&high) {
        return Reply::error(
            "ERR T-Digest: low_cut_percentile and high_cut_percentile should be in [0,1]",
        );
    }
    if low >= high {
        return Reply::error(
            "ERR T-Digest: low_cut_percentile should be lower than high_cut_percentile",
        );
    }
    Reply::Double(d.trimmed_mean(low, high))
}

/// TDIGEST.INFO `key`: nine fields, a map in RESP3.
pub(crate) fn info(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let d = match ctx.existing::<TDigest>(args[1], ERR_MISSING) {
        Ok(d) => d,
        Err(reply) => return reply,
    };
    let fields = [
        ("Compression", d.compression()),
        ("Capacity", d.cap() as i64),
        ("Merged nodes", d.merged_nodes() as i64),
        ("Unmerged nodes", d.unmerged_nodes() as i64),
        ("Merged weight", d.merged_weight()),
        ("Unmerged weight", d.unmerged_weight()),
        ("Observations", d.size()),
        ("Total compressions", d.total_compressions()),
        ("Memory usage", d.memory() as i64),
    ];
    Reply::Map(
        fields
            .into_iter()
            .map(|(k, v)| (Reply::Simple(k.into()), Reply::Int(v)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    fn d(v: f64) -> Reply {
        Reply::Double(v)
    }

    fn text(r: &Reply) -> String {
        match r {
            Reply::Double(v) => crate::reply::format_double(*v),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn errors_and_validation_order() {
        let mut h = Harness::new();
        assert_eq!(h.run("TDIGEST.MIN t"), err(ERR_MISSING));
        assert_eq!(
            h.run("TDIGEST.CREATE t COMPRESSION 0"),
            err(ERR_COMPRESSION_RANGE)
        );
        assert_eq!(
            h.run("TDIGEST.CREATE t 100 COMPRESSION"),
            err(ERR_COMPRESSION)
        );
        assert_eq!(h.run("TDIGEST.CREATE t FOO 100"), err(ERR_KEYWORD));
        assert_eq!(
            h.run("TDIGEST.CREATE t COMPRESSION 10 1"),
            wrong_arity("tdigest.create")
        );
        assert_eq!(h.run("TDIGEST.CREATE t"), Reply::ok());
        assert_eq!(h.run("TDIGEST.CREATE t FOO 100"), err(ERR_EXISTS));
        assert_eq!(
            h.run("TDIGEST.ADD t 1 nan"),
            err("ERR T-Digest: error parsing val parameter")
        );
        assert_eq!(
            h.run("TDIGEST.ADD t 1 -inf"),
            err("ERR T-Digest: val parameter needs to be a finite number")
        );
        assert_eq!(
            h.run("TDIGEST.QUANTILE t 2 abc"),
            err("ERR T-Digest: quantile should be in [0,1]")
        );
        assert_eq!(
            h.run("TDIGEST.QUANTILE t abc 2"),
            err("ERR T-Digest: error parsing quantile")
        );
        assert_eq!(
            h.run("TDIGEST.BYRANK t -1 abc"),
            err("ERR T-Digest: rank needs to be non negative")
        );
        assert_eq!(
            h.run("TDIGEST.BYRANK t 1.5"),
            err("ERR T-Digest: error parsing rank")
        );
        assert_eq!(
            h.run("TDIGEST.MERGE z 0 t"),
            err("ERR T-Digest: numkeys needs to be a positive integer")
        );
        assert_eq!(h.run("TDIGEST.MERGE z 3 t"), wrong_arity("tdigest.merge"));
        assert_eq!(h.run("TDIGEST.MERGE z 1 t FOO"), err(ERR_KEYWORD));
        assert_eq!(
            h.run("TDIGEST.MERGE z 1 t COMPRESSION"),
            wrong_arity("tdigest.merge")
        );
        assert_eq!(h.run("TDIGEST.MERGE z 1 z"), err(ERR_MISSING));
        assert_eq!(h.run("TDIGEST.MERGE z 1 t OVERRIDE FOO"), Reply::ok());
        assert_eq!(
            h.run("TDIGEST.TRIMMED_MEAN t 0.5 0.5"),
            err("ERR T-Digest: low_cut_percentile should be lower than high_cut_percentile")
        );
        h.foreign.push(b"s".to_vec());
        assert!(h.run("TDIGEST.MERGE s 1 t").is_error());
        assert!(h.run("TDIGEST.MERGE z 1 s").is_error());
        assert_eq!(
            h.run("TDIGEST.MERGE z abc s"),
            err("ERR T-Digest: error parsing numkeys")
        );
    }

    #[test]
    fn replies_as_redisbloom_gives_them() {
        let mut h = Harness::new();
        h.run("TDIGEST.CREATE t");
        assert_eq!(text(&h.run("TDIGEST.MIN t")), "nan");
        h.run("TDIGEST.ADD t 5");
        // One observation stays buffered: RedisBloom answers nan and C's (long long)nan.
        assert_eq!(
            h.run("TDIGEST.RANK t 5 4 6"),
            Reply::Array(vec![Reply::Int(i64::MIN), Reply::Int(-1), Reply::Int(1)])
        );
        assert_eq!(
            h.run("TDIGEST.BYRANK t 0 1 2"),
            Reply::Array(vec![d(5.0), d(f64::INFINITY), d(f64::INFINITY)])
        );
        h.run("TDIGEST.ADD t 1 2 3 4");
        h.run("TDIGEST.ADD t 1 2 3 4 5 6 7 8 9 10 1 2 3 4 5 6 7");
        assert_eq!(
            h.run("TDIGEST.RANK t 5 4 6"),
            Reply::Array(vec![Reply::Int(13), Reply::Int(10), Reply::Int(16)])
        );
        assert_eq!(
            h.run("TDIGEST.REVRANK t 5 4 6"),
            Reply::Array(vec![Reply::Int(8), Reply::Int(11), Reply::Int(6)])
        );
        let Reply::Map(info) = h.run("TDIGEST.INFO t") else {
            panic!()
        };
        assert_eq!(
            info[0],
            (Reply::Simple("Compression".into()), Reply::Int(100))
        );
        assert_eq!(
            info[8],
            (Reply::Simple("Memory usage".into()), Reply::Int(9840))
        );
    }
}
