//! valkey-bloom's policy for the `BF.*` commands it has, where it differs from RedisBloom's:
//! how BF.RESERVE and BF.INSERT read their arguments (values parsed as Rust parses them: an f32
//! error rate and a u32 capacity in 0.1.0, f64 and i64 in 1.0; options read left to right, the
//! last one winning), its error texts, and its wrong-type reply. The commands themselves are
//! `bloom.rs`'s, one each for both dialects: this file only turns arguments into the creation
//! options they run with, or into valkey-bloom's refusal — and declares the one command
//! RedisBloom has not, 1.0's `BF.LOAD key data` (its table is [`commands`]).

use super::flags::DENYOOM;
use super::host::wrong_arity_in;
use super::{family, write, Args, CommandInfo, Ctx, Host};
use crate::config::{Dialect, ValkeyFlavour};
use crate::num::is;
use crate::reply::Reply;
use crate::types::sbchain::valkey::{decode_load_payload, scaled_capacity, ScaleStop, FIXED_SEED};
use crate::types::sbchain::{ValkeyChain, ValkeyLink};
use crate::value::{ChainValue, Kind};
use crate::ERR_WRONGTYPE;

use super::bloom_layout::layout_named;

/// The commands only valkey-bloom 1.0's dialect has (appended to its table): `BF.LOAD`, which
/// valkey-bloom's AOF rewrite writes — `write denyoom`, not `fast`, no command info.
pub(super) fn commands() -> Vec<CommandInfo> {
    let bf = family("bloom");
    vec![bf(
        "BF.LOAD",
        write("bloom.reserve"),
        load,
        DENYOOM,
        3,
        None,
    )]
}

/// BF.LOAD `key data`: a new `bloomfltr` filter from valkey-bloom 1.0's payload (every field
/// checked, the whole admitted before anything is allocated; the per-object limit is skipped
/// for replayed data, as 1.0 skips it for replicated commands). Another type is `WRONGTYPE`, a
/// filter already there `BUSYKEY`. Replicated as sent: the replica decodes the same bits.
fn load(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let flavour = ctx.config().dialect.valkey().unwrap_or_default();
    match ctx.value(args[1]) {
        Ok(None) => {}
        Ok(Some(v)) if v.kind() == Kind::BloomValkey => {
            return Reply::error("BUSYKEY Target key name already exists.")
        }
        _ => return wrong_type(flavour),
    }
    let mut allowance = ctx.allowance_for(0);
    let decoded = decode_load_payload(args[2], &mut allowance);
    ctx.set_allowance(allowance);
    match decoded {
        Ok(chain) => {
            ctx.create(args[1], ValkeyLink::into_value(chain));
            Reply::ok()
        }
        Err(e) => Reply::error(e.message()),
    }
}

/// How a filter is created, as valkey-bloom's arguments give it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Options {
    /// Items the first sub-filter holds.
    pub capacity: u64,
    /// The object's error rate.
    pub error: f64,
    /// Growth of each new sub-filter; 0 = non-scaling.
    pub expansion: u32,
    /// Our `LAYOUT` extension, last (`classic`, `blocked`: filters `BF.MERGE` and
    /// `BF.SCANDUMP` of RedisBloom's format serve); `None`, valkey-bloom's own filter.
    pub layout: Option<Kind>,
    /// 1.0's `TIGHTENING t`: the ratio each new sub-filter's error rate shrinks by.
    pub tightening: Option<f64>,
    /// 1.0's `SEED s`: the 32-byte seed every sub-filter hashes with.
    pub seed: Option<[u8; 32]>,
}

/// What BF.INSERT's arguments say.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Insert {
    /// The options a missing filter is created with.
    pub options: Options,
    /// `NOCREATE`: a missing filter is `ERR not found`.
    pub nocreate: bool,
    /// Where the items start (the argument count when there are none: 1.0 creates the filter).
    pub items_at: usize,
    /// 1.0's `VALIDATESCALETO n`: the filter must be able to scale to `n` items.
    pub scale_to: Option<u64>,
}

/// The reply to a `BF.*` command on a key of another type: 0.1.0's generic `ERROR`, 1.0's
/// `WRONGTYPE`.
pub(super) fn wrong_type(flavour: ValkeyFlavour) -> Reply {
    match flavour {
        ValkeyFlavour::V0_1 => Reply::error("ERROR"),
        ValkeyFlavour::V1_0 => Reply::error(ERR_WRONGTYPE),
    }
}

fn arity(flavour: ValkeyFlavour, name: &str) -> Reply {
    wrong_arity_in(Dialect::ValkeyBloom(flavour), name)
}

/// `arg` parsed as Rust's `str::parse` parses a `T` (a leading `+`, `inf`, `nan`, `1e-3`, `.5`
/// as Rust takes them; no whitespace), which is what valkey-bloom does.
fn parsed<T: std::str::FromStr>(arg: &[u8]) -> Option<T> {
    std::str::from_utf8(arg).ok()?.parse().ok()
}

/// An error rate strictly inside (0, 1): 0.1.0 reads an f32 (so `0.999999999` is 1 and
/// refused), 1.0 an f64.
fn error_rate(flavour: ValkeyFlavour, arg: &[u8]) -> Result<f64, Reply> {
    let rate = match flavour {
        ValkeyFlavour::V0_1 => parsed::<f32>(arg).map(f64::from),
        ValkeyFlavour::V1_0 => parsed::<f64>(arg),
    };
    match rate {
        None => Err(Reply::error("ERR bad error rate")),
        Some(e) if e > 0.0 && e < 1.0 => Ok(e),
        Some(_) => Err(Reply::error("ERR (0 < error rate range < 1)")),
    }
}

/// A capacity above 0: a u32 in 0.1.0, a non-negative i64 in 1.0.
fn capacity(flavour: ValkeyFlavour, arg: &[u8]) -> Result<u64, Reply> {
    let capacity = match flavour {
        ValkeyFlavour::V0_1 => parsed::<u32>(arg).map(u64::from),
        ValkeyFlavour::V1_0 => parsed::<i64>(arg).and_then(|c| u64::try_from(c).ok()),
    };
    match capacity {
        None => Err(Reply::error("ERR bad capacity")),
        Some(0) => Err(Reply::error("ERR (capacity should be larger than 0)")),
        Some(c) => Ok(c),
    }
}

/// An expansion: 1..=10 in 0.1.0, 1..=u32::MAX in 1.0.
fn expansion(flavour: ValkeyFlavour, arg: &[u8]) -> Result<u32, Reply> {
    let most = match flavour {
        ValkeyFlavour::V0_1 => 10,
        ValkeyFlavour::V1_0 => u32::MAX,
    };
    parsed::<u32>(arg)
        .filter(|x| (1..=most).contains(x))
        .ok_or_else(|| Reply::error("ERR bad expansion"))
}

/// 1.0's tightening ratio: an f64 strictly inside (0, 1).
fn tightening(arg: &[u8]) -> Result<f64, Reply> {
    match parsed::<f64>(arg) {
        None => Err(Reply::error("ERR bad tightening ratio")),
        Some(t) if t > 0.0 && t < 1.0 => Ok(t),
        Some(_) => Err(Reply::error("ERR (0 < tightening ratio range < 1)")),
    }
}

/// After a valkey-bloom filter was created at `key` with `options`: sets 1.0's `TIGHTENING`
/// and `SEED` on it (else `bloom-tightening-ratio`'s, and the fixed seed under
/// `bloom-use-random-seed no`), and gives what its replicated `BF.INSERT` adds so a replica builds the
/// same bits (1.0: `TIGHTENING t SEED s`; nothing in 0.1.0, which has one fixed seed).
pub(super) fn created<H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    key: &[u8],
    options: Option<Options>,
) -> Result<Vec<Vec<u8>>, Reply> {
    let flavour = ctx.config().dialect.valkey();
    let Ok(Some(_)) = ctx.typed::<ValkeyChain>(key) else {
        return Ok(Vec::new());
    };
    let (mut t, mut seed) = options.map_or((None, None), |o| (o.tightening, o.seed));
    // 1.0's defaults for what the command did not give: `bloom-tightening-ratio`, and the
    // fixed seed under `bloom-use-random-seed no`.
    if flavour == Some(ValkeyFlavour::V1_0) {
        let config = ctx.config();
        t = t.or(Some(config.tightening_ratio));
        seed = seed.or((!config.use_random_seed).then_some(FIXED_SEED));
    }
    let settings = ctx
        .update(key, |c: &mut ValkeyChain| {
            c.set_valkey_options(t, seed).map(|()| *c.settings())
        })
        .map_err(Reply::error)?;
    if flavour != Some(ValkeyFlavour::V1_0) {
        return Ok(Vec::new());
    }
    Ok(vec![
        b"TIGHTENING".to_vec(),
        settings.tightening.to_string().into_bytes(),
        b"SEED".to_vec(),
        settings.seed.to_vec(),
    ])
}

/// After BF.RESERVE created the filter at `key` (`head`: the `BF.INSERT … ITEMS` that makes it
/// again): in 1.0, its `TIGHTENING`/`SEED` set as [`created`] sets them and the creation
/// replicated as that `BF.INSERT` without items, so a replica holds the same bits; as sent
/// otherwise. Replies OK.
pub(super) fn reserved<H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    key: &[u8],
    mut head: Vec<Vec<u8>>,
    options: Option<Options>,
) -> Reply {
    if ctx.config().dialect.valkey() != Some(ValkeyFlavour::V1_0) {
        return Reply::ok();
    }
    let extra = match created(ctx, key, options) {
        Ok(extra) if !extra.is_empty() => extra,
        Ok(_) => return Reply::ok(),
        Err(reply) => return reply,
    };
    head.pop(); // ITEMS
    head.extend(extra);
    ctx.propagate_as(vec![head]);
    Reply::ok()
}

/// BF.RESERVE `key error_rate capacity [NONSCALING | EXPANSION n]`: 4 to 6 arguments, the
/// error rate, the capacity, then the option (anything else there is `ERROR`); the key is the
/// caller's. `defaults` gives the expansion when none is named.
pub(super) fn reserve(
    flavour: ValkeyFlavour,
    args: &Args,
    defaults: Options,
) -> Result<Options, Reply> {
    // Our extension, after valkey-bloom's arguments: `LAYOUT name`.
    let tail = args.len().saturating_sub(2);
    if args.len() >= 6 && is(args[tail], "LAYOUT") {
        let layout = layout_named(args[tail + 1]).ok_or_else(|| Reply::error("ERR bad layout"))?;
        let options = reserve(flavour, &args[..tail], defaults)?;
        return Ok(Options {
            layout: Some(layout),
            ..options
        });
    }
    if !(4..=6).contains(&args.len()) {
        return Err(arity(flavour, "BF.RESERVE"));
    }
    let error = error_rate(flavour, args[2])?;
    let capacity = capacity(flavour, args[3])?;
    let expansion = match args.len() {
        4 => defaults.expansion,
        5 if is(args[4], "NONSCALING") => 0,
        6 if is(args[4], "EXPANSION") => expansion(flavour, args[5])?,
        _ => return Err(Reply::error("ERROR")),
    };
    Ok(Options {
        capacity,
        error,
        expansion,
        ..defaults
    })
}

/// BF.INSERT `key [ERROR e] [CAPACITY c] [EXPANSION n] [NOCREATE] [NONSCALING] ITEMS item…`
/// (1.0 also `TIGHTENING t`, `SEED s`, `VALIDATESCALETO n`): options left to right, any case, the last one winning (`NONSCALING EXPANSION 2` scales);
/// an option without its value, or no item after `ITEMS`, is an arity error; `ITEMS` ends the
/// options. 0.1.0 needs 4 arguments and `ITEMS`; 1.0 creates the filter without items.
pub(super) fn insert(
    flavour: ValkeyFlavour,
    args: &Args,
    defaults: Options,
) -> Result<Insert, Reply> {
    if flavour == ValkeyFlavour::V0_1 && args.len() < 4 {
        return Err(arity(flavour, "BF.INSERT"));
    }
    let mut options = defaults;
    let mut nocreate = false;
    let mut items_at = None;
    let mut scale_to = None;
    let mut i = 2;
    while i < args.len() {
        let arg = args[i];
        if is(arg, "ITEMS") {
            items_at = Some(i + 1);
            break;
        }
        if is(arg, "NOCREATE") {
            nocreate = true;
            i += 1;
            continue;
        }
        if is(arg, "NONSCALING") {
            options.expansion = 0;
            i += 1;
            continue;
        }
        let valued = [
            "ERROR",
            "CAPACITY",
            "EXPANSION",
            "LAYOUT",
            "TIGHTENING",
            "SEED",
            "VALIDATESCALETO",
        ];
        let known = &valued[..if flavour == ValkeyFlavour::V1_0 { 7 } else { 4 }];
        if !known.iter().any(|name| is(arg, name)) {
            return Err(Reply::error("ERR unknown argument received"));
        }
        let Some(value) = args.get(i + 1) else {
            return Err(arity(flavour, "BF.INSERT"));
        };
        if is(arg, "ERROR") {
            options.error = error_rate(flavour, value)?;
        } else if is(arg, "CAPACITY") {
            options.capacity = capacity(flavour, value)?;
        } else if is(arg, "TIGHTENING") {
            options.tightening = Some(tightening(value)?);
        } else if is(arg, "SEED") {
            let seed = <[u8; 32]>::try_from(*value);
            options.seed = Some(seed.map_err(|_| Reply::error("ERR invalid seed"))?);
        } else if is(arg, "VALIDATESCALETO") {
            scale_to = Some(capacity(flavour, value)?);
        } else if is(arg, "LAYOUT") {
            let layout = layout_named(value).ok_or_else(|| Reply::error("ERR bad layout"))?;
            options.layout = Some(layout);
        } else {
            options.expansion = expansion(flavour, value)?;
        }
        i += 2;
    }
    let items_at = match items_at {
        Some(at) if at < args.len() => at,
        None if flavour == ValkeyFlavour::V1_0 => args.len(),
        _ => return Err(arity(flavour, "BF.INSERT")),
    };
    if scale_to.is_some() && options.expansion == 0 {
        return Err(Reply::error(
            "ERR cannot use NONSCALING and VALIDATESCALETO options together",
        ));
    }
    Ok(Insert {
        options,
        nocreate,
        items_at,
        scale_to,
    })
}

/// [`insert`], then 1.0's `VALIDATESCALETO n` check (skipped for replayed commands, as 1.0
/// skips it for replicated ones): a filter of these options must reach `n` items by scaling,
/// within the per-object limit and before its error rate degrades to 0.
pub(super) fn insert_checked<H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    flavour: ValkeyFlavour,
    args: &Args,
    defaults: Options,
) -> Result<Insert, Reply> {
    let insert = insert(flavour, args, defaults)?;
    let Some(want) = insert.scale_to.filter(|_| !ctx.replaying()) else {
        return Ok(insert);
    };
    let o = insert.options;
    let tightening = o.tightening.unwrap_or(ctx.config().tightening_ratio);
    let limit = ctx.config().memory_usage_limit;
    match scaled_capacity(o.capacity, o.error, tightening, o.expansion, limit, want) {
        Ok(_) => Ok(insert),
        Err((_, ScaleStop::MemoryLimit)) => Err(Reply::error(
            "ERR provided VALIDATESCALETO causes bloom object to exceed memory limit",
        )),
        Err((_, ScaleStop::ErrorDegrades)) => Err(Reply::error(
            "ERR provided VALIDATESCALETO causes false positive to degrade to 0",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ValkeyFlavour::{V0_1, V1_0};

    const DEFAULTS: Options = Options {
        capacity: 100,
        error: 0.01,
        expansion: 2,
        layout: None,
        tightening: None,
        seed: None,
    };

    fn args(line: &str) -> Vec<&[u8]> {
        line.split(' ').map(str::as_bytes).collect()
    }

    fn error_of<T: std::fmt::Debug>(r: Result<T, Reply>) -> String {
        match r {
            Err(Reply::Error(e)) => e,
            other => panic!("not an error: {other:?}"),
        }
    }

    #[test]
    fn reserve_reads_values_as_each_flavour_does() {
        let reserve = |f, line| reserve(f, &args(line), DEFAULTS);
        let cases = [
            ("BF.RESERVE k String 100", "ERR bad error rate"),
            (
                "BF.RESERVE k 0.999999999 3000",
                "ERR (0 < error rate range < 1)",
            ),
            ("BF.RESERVE k 2 100", "ERR (0 < error rate range < 1)"),
            ("BF.RESERVE k nan 100", "ERR (0 < error rate range < 1)"),
            ("BF.RESERVE k 0.01 0.01", "ERR bad capacity"),
            ("BF.RESERVE k 0.01 -1", "ERR bad capacity"),
            ("BF.RESERVE k 0.01 4394967295", "ERR bad capacity"),
            (
                "BF.RESERVE k 0.5 0",
                "ERR (capacity should be larger than 0)",
            ),
            ("BF.RESERVE k 0.01 1 EXPANSION 11", "ERR bad expansion"),
            ("BF.RESERVE k 0.01 1 EXPANSION 0", "ERR bad expansion"),
            ("BF.RESERVE k 0.01 1 FOO", "ERROR"),
            ("BF.RESERVE k 0.01 1 NONSCALING 2", "ERROR"),
            (
                "BF.RESERVE k 0.01 1 NONSCALING EXPANSION 1",
                "ERR wrong number of arguments for 'BF.RESERVE' command",
            ),
        ];
        for (line, want) in cases {
            assert_eq!(error_of(reserve(V0_1, line)), want, "{line}");
        }
        // 1.0: f64 and i64.
        assert_eq!(
            reserve(V1_0, "BF.RESERVE k 0.999999999 4394967295")
                .unwrap()
                .capacity,
            4394967295
        );
        assert_eq!(
            reserve(V1_0, "BF.RESERVE k 0.01 1 EXPANSION 11")
                .unwrap()
                .expansion,
            11
        );
        let o = reserve(V0_1, "BF.RESERVE k 1e-3 +5 nonscaling").unwrap();
        assert_eq!(
            (o.error, o.capacity, o.expansion),
            (f64::from(0.001f32), 5, 0)
        );
        assert_eq!(reserve(V0_1, "BF.RESERVE k .5 5").unwrap().expansion, 2);
    }

    #[test]
    fn insert_reads_options_left_to_right_the_last_winning() {
        let insert = |f, line| insert(f, &args(line), DEFAULTS);
        let arity = "ERR wrong number of arguments for 'BF.INSERT' command";
        let cases = [
            ("BF.INSERT k HELLO WORLD", "ERR unknown argument received"),
            (
                "BF.INSERT k error 2 ITEMS a",
                "ERR (0 < error rate range < 1)",
            ),
            (
                "BF.INSERT k CAPACITY 4394967295 ITEMS a",
                "ERR bad capacity",
            ),
            (
                "BF.INSERT k CAPACITY 0 ITEMS a",
                "ERR (capacity should be larger than 0)",
            ),
            ("BF.INSERT k EXPANSION 0.99 ITEMS a", "ERR bad expansion"),
            ("BF.INSERT k LAYOUT nope ITEMS a", "ERR bad layout"),
            ("BF.INSERT k HELLO", arity),
            ("BF.INSERT k EXPANSION 2", arity),
            ("BF.INSERT k EXPANSION 2 ITEMS", arity),
            ("BF.INSERT k EXPANSION 1 error", arity),
        ];
        for (line, want) in cases {
            assert_eq!(error_of(insert(V0_1, line)), want, "{line}");
        }
        let i = insert(
            V0_1,
            "BF.INSERT k NONSCALING EXPANSION 3 NOCREATE ITEMS 1 EXPANSION",
        )
        .unwrap();
        assert_eq!((i.options.expansion, i.nocreate, i.items_at), (3, true, 7));
        let i = insert(V0_1, "BF.INSERT k EXPANSION 3 nonscaling items 1").unwrap();
        assert_eq!(i.options.expansion, 0);
        // Our LAYOUT extension, in both.
        let i = insert(V0_1, "BF.INSERT k LAYOUT classic ITEMS 1").unwrap();
        assert_eq!(i.options.layout, Some(Kind::Bloom));
        let line = "BF.RESERVE k 0.01 10 EXPANSION 3 LAYOUT blocked";
        let o = reserve(V0_1, &args(line), DEFAULTS).unwrap();
        assert_eq!((o.expansion, o.layout), (3, Some(Kind::BloomBlocked)));
        // 1.0's TIGHTENING and SEED; unknown to 0.1.0.
        let seed = "s".repeat(32);
        let line = format!("BF.INSERT k TIGHTENING 0.25 SEED {seed} ITEMS a");
        let i = insert(V1_0, &line).unwrap();
        assert_eq!(
            (i.options.tightening, i.options.seed),
            (Some(0.25), Some([b's'; 32]))
        );
        let unknown = "ERR unknown argument received";
        assert_eq!(error_of(insert(V0_1, &line)), unknown);
        let bad = [
            (
                "BF.INSERT k TIGHTENING x ITEMS a",
                "ERR bad tightening ratio",
            ),
            (
                "BF.INSERT k TIGHTENING 1 ITEMS a",
                "ERR (0 < tightening ratio range < 1)",
            ),
            ("BF.INSERT k SEED short ITEMS a", "ERR invalid seed"),
        ];
        for (line, want) in bad {
            assert_eq!(error_of(insert(V1_0, line)), want, "{line}");
        }
        // 1.0's VALIDATESCALETO: a capacity; not with NONSCALING, wherever it is.
        let i = insert(V1_0, "BF.INSERT k VALIDATESCALETO 1000 ITEMS a").unwrap();
        assert_eq!(i.scale_to, Some(1000));
        assert_eq!(
            error_of(insert(V0_1, "BF.INSERT k VALIDATESCALETO 1000 ITEMS a")),
            unknown
        );
        let both = "ERR cannot use NONSCALING and VALIDATESCALETO options together";
        for line in [
            "BF.INSERT k NONSCALING VALIDATESCALETO 10 ITEMS a",
            "BF.INSERT k VALIDATESCALETO 10 NONSCALING ITEMS a",
        ] {
            assert_eq!(error_of(insert(V1_0, line)), both, "{line}");
        }
        let line = "BF.INSERT k VALIDATESCALETO 0 ITEMS a";
        let zero = "ERR (capacity should be larger than 0)";
        assert_eq!(error_of(insert(V1_0, line)), zero);
        // 1.0 creates without items, but not after an empty ITEMS.
        assert_eq!(insert(V1_0, "BF.INSERT k").unwrap().items_at, 2);
        assert_eq!(insert(V1_0, "BF.INSERT k EXPANSION 2").unwrap().items_at, 4);
        assert_eq!(error_of(insert(V1_0, "BF.INSERT k ITEMS")), arity);
    }

    #[test]
    fn the_wrong_type_reply_is_the_flavour_s() {
        assert_eq!(wrong_type(V0_1), Reply::error("ERROR"));
        assert_eq!(wrong_type(V1_0), Reply::error(ERR_WRONGTYPE));
    }

    /// The commands over a harness in each flavour: defaults, the INFO shape, the wrong-type
    /// reply, arity errors naming the command as valkey-bloom registers it, and replication
    /// (0.1.0 verbatim, 1.0 a creation without items on its own).
    #[test]
    fn the_commands_answer_in_the_flavour() {
        use crate::commands::testing::Harness;
        use crate::commands::Propagate;
        let mut h = Harness::new();
        h.config = Dialect::ValkeyBloom(V0_1).defaults();
        h.foreign.push(b"str".to_vec());
        assert_eq!(h.run("BF.ADD k a"), Reply::Bool(true));
        assert_eq!(h.last.as_ref().unwrap().propagate, Propagate::Verbatim);
        // Both events when an add creates, `bloom.add` first; one after.
        let events: Vec<_> = h.events.drain(..).map(|(e, _)| e).collect();
        assert_eq!(events, ["bloom.add", "bloom.reserve"]);
        h.run("BF.ADD k b");
        assert_eq!(
            h.events.drain(..).map(|(e, _)| e).collect::<Vec<_>>(),
            ["bloom.add"]
        );
        assert_eq!(h.run("BF.INFO k CAPACITY"), Reply::Int(100_000));
        assert_eq!(h.run("BF.INFO k ITEMS"), Reply::Int(2));
        let Reply::Array(fields) = h.run("BF.INFO k") else {
            panic!("not an array")
        };
        assert_eq!(fields[0], Reply::Simple("Capacity".into()));
        assert_eq!(
            h.run("BF.INFO k nope"),
            Reply::error("ERR invalid information value")
        );
        assert_eq!(h.run("BF.EXISTS str a"), Reply::error("ERROR"));
        assert_eq!(
            h.run("BF.ADD k"),
            Reply::error("ERR wrong number of arguments for 'BF.ADD' command")
        );
        assert_eq!(
            h.run("BF.INFO k a b"),
            Reply::error("ERR wrong number of arguments for 'BF.INFO' command")
        );
        // CF is unchanged, lower-case in its errors as RedisBloom's.
        assert_eq!(
            h.run("CF.ADD c"),
            Reply::error("ERR wrong number of arguments for 'cf.add' command")
        );

        h.config = Dialect::ValkeyBloom(V1_0).defaults();
        assert_eq!(h.run("BF.INSERT n EXPANSION 3"), Reply::Array(vec![]));
        let Propagate::Commands(sent) = h.last.as_ref().unwrap().propagate.clone() else {
            panic!("a rewrite")
        };
        assert!(sent[0].iter().all(|a| a.as_slice() != b"ITEMS"), "{sent:?}");
        // 1.0's creation carries the seed and tightening ratio, so a replica has the same bits.
        let words: Vec<&[u8]> = sent[0].iter().map(Vec::as_slice).collect();
        assert!(words.contains(&&b"SEED"[..]) && words.contains(&&b"TIGHTENING"[..]));
        let mut replica = Harness::new();
        replica.config = Dialect::ValkeyBloom(V1_0).defaults();
        replica.run_args(&sent[0]);
        h.run("BF.MADD n a b c");
        replica.run("BF.MADD n a b c");
        // The same bits (the header differs only in the seed being marked given).
        assert_eq!(replica.run("BF.SCANDUMP n 1"), h.run("BF.SCANDUMP n 1"));
        assert_eq!(h.run("BF.INFO n CAPACITY"), Reply::Int(100));
        assert_eq!(h.run("BF.EXISTS str a"), Reply::error(ERR_WRONGTYPE));
    }

    /// 1.0's BF.LOAD: only in 1.0's table; the filter a payload describes, or valkey-bloom's
    /// refusals; replicated as sent, with the `bloom.reserve` event.
    #[test]
    fn bf_load_is_1_0_s() {
        use crate::commands::testing::Harness;
        use crate::commands::{table_for, Propagate};
        use crate::types::sbchain::valkey::encode_load_payload;
        use crate::value::Value;
        let has_load = |d: Dialect| table_for(d).iter().any(|c| c.name == "BF.LOAD");
        assert!(has_load(Dialect::ValkeyBloom(V1_0)));
        assert!(!has_load(Dialect::ValkeyBloom(V0_1)) && !has_load(Dialect::RedisBloom));
        let mut h = Harness::new();
        h.config = Dialect::ValkeyBloom(V1_0).defaults();
        h.foreign.push(b"str".to_vec());
        h.run("BF.INSERT src CAPACITY 5 ITEMS a b c d e f g h");
        let Some(Value::BloomValkey(src)) = h.keys.get(&b"src"[..]) else {
            panic!("a bloomfltr filter")
        };
        let payload = encode_load_payload(src);
        let load = |h: &mut Harness, key: &str, data: &[u8]| {
            h.run_args(&[b"BF.LOAD".to_vec(), key.as_bytes().to_vec(), data.to_vec()])
        };
        h.events.clear();
        assert_eq!(load(&mut h, "k", &payload), Reply::ok());
        assert_eq!(h.last.as_ref().unwrap().propagate, Propagate::Verbatim);
        assert_eq!(h.events, [("bloom.reserve".to_string(), b"k".to_vec())]);
        assert_eq!(h.run("BF.CARD k"), h.run("BF.CARD src"));
        assert_eq!(h.run("BF.SCANDUMP k 1"), h.run("BF.SCANDUMP src 1"));
        assert_eq!(
            load(&mut h, "k", &payload),
            Reply::error("BUSYKEY Target key name already exists.")
        );
        assert_eq!(load(&mut h, "str", &payload), Reply::error(ERR_WRONGTYPE));
        let failed = Reply::error("ERR bloom object decoding failed");
        assert_eq!(load(&mut h, "x", &payload[..payload.len() - 1]), failed);
        assert_eq!(
            h.run("BF.LOAD x"),
            Reply::error("ERR wrong number of arguments for 'BF.LOAD' command")
        );
        // Over the per-object limit: refused from a client, kept when replayed.
        h.config.memory_usage_limit = 1;
        assert_eq!(load(&mut h, "y", &payload), Reply::error(crate::ERR_CAP));
        h.replaying = true;
        assert_eq!(load(&mut h, "y", &payload), Reply::ok());
    }

    /// 1.0's VALIDATESCALETO over a harness: within the 128 MB limit and the error rate's
    /// reach, or refused with 1.0's texts; not checked for a replayed command.
    #[test]
    fn validatescaleto_checks_the_reach() {
        use crate::commands::testing::Harness;
        let mut h = Harness::new();
        h.config = Dialect::ValkeyBloom(V1_0).defaults();
        let ok = h.run("BF.INSERT a VALIDATESCALETO 26214300 ITEMS x");
        assert_eq!(ok, Reply::Array(vec![Reply::Bool(true)]));
        let memory = "ERR provided VALIDATESCALETO causes bloom object to exceed memory limit";
        let line = "BF.INSERT b VALIDATESCALETO 26214301 ITEMS x";
        assert_eq!(h.run(line), Reply::error(memory));
        let degrade = "ERR provided VALIDATESCALETO causes false positive to degrade to 0";
        let line = "BF.INSERT c CAPACITY 1 EXPANSION 1 TIGHTENING 0.01 VALIDATESCALETO 1000";
        assert_eq!(h.run(line), Reply::error(degrade));
        h.replaying = true;
        assert_eq!(
            h.run("BF.INSERT b VALIDATESCALETO 26214301 ITEMS x"),
            Reply::Array(vec![Reply::Bool(true)])
        );
    }

    /// 1.0's `bloom-tightening-ratio` and `bloom-use-random-seed` give what a creation does not
    /// name; a fixed seed is valkey-bloom's, so two filters' bits line up.
    #[test]
    fn the_1_0_settings_are_creation_defaults() {
        use crate::commands::testing::Harness;
        use crate::commands::Propagate;
        let mut h = Harness::new();
        h.config = Dialect::ValkeyBloom(V1_0).defaults();
        h.config.tightening_ratio = 0.25;
        h.config.use_random_seed = false;
        h.run("BF.ADD a x");
        h.run("BF.ADD b x");
        assert_eq!(h.run("BF.INFO a TIGHTENING"), Reply::Double(0.25));
        assert_eq!(h.run("BF.SCANDUMP a 1"), h.run("BF.SCANDUMP b 1"));
        h.run("BF.INSERT c TIGHTENING 0.75 ITEMS x");
        assert_eq!(h.run("BF.INFO c TIGHTENING"), Reply::Double(0.75));
        // BF.RESERVE too, replicated as the BF.INSERT that makes the same bits.
        h.run("BF.RESERVE r 0.01 100");
        let propagate = h.last.as_ref().unwrap().propagate.clone();
        assert_eq!(h.run("BF.INFO r TIGHTENING"), Reply::Double(0.25));
        let Propagate::Commands(sent) = propagate else {
            panic!("a rewrite: {propagate:?}")
        };
        assert_eq!(sent[0][0], b"BF.INSERT");
        let mut replica = Harness::new();
        replica.config = Dialect::ValkeyBloom(V1_0).defaults();
        replica.run_args(&sent[0]);
        assert_eq!(replica.run("BF.INFO r TIGHTENING"), Reply::Double(0.25));
        h.run("BF.ADD r x");
        replica.run("BF.ADD r x");
        assert_eq!(replica.run("BF.SCANDUMP r 1"), h.run("BF.SCANDUMP r 1"));
        h.config.use_random_seed = true;
        h.run("BF.ADD d x");
        assert_ne!(h.run("BF.SCANDUMP a 1"), h.run("BF.SCANDUMP d 1"));
    }

    /// 1.0's BF.INFO: `Error rate` before `Expansion rate`, `Tightening ratio` and `Max scaled
    /// capacity` after it for a scaling filter, each also alone; 0.1.0 has none of them.
    #[test]
    fn info_has_1_0_s_fields_in_1_0() {
        use crate::commands::testing::Harness;
        let mut h = Harness::new();
        h.config = Dialect::ValkeyBloom(V1_0).defaults();
        h.run("BF.ADD s a");
        h.run("BF.INSERT n NONSCALING ITEMS a");
        let names = |h: &mut Harness, key: &str| -> Vec<Reply> {
            let Reply::Array(all) = h.run(&format!("BF.INFO {key}")) else {
                panic!("not an array")
            };
            all.into_iter().step_by(2).collect()
        };
        let scaling = [
            "Capacity",
            "Size",
            "Number of filters",
            "Number of items inserted",
            "Error rate",
            "Expansion rate",
            "Tightening ratio",
            "Max scaled capacity",
        ];
        let want =
            |n: &[&str]| -> Vec<Reply> { n.iter().map(|s| Reply::Simple(s.to_string())).collect() };
        assert_eq!(names(&mut h, "s"), want(&scaling));
        assert_eq!(names(&mut h, "n"), want(&scaling[..6]));
        assert_eq!(h.run("BF.INFO s error"), Reply::Double(0.01));
        assert_eq!(h.run("BF.INFO s TIGHTENING"), Reply::Double(0.5));
        assert_eq!(h.run("BF.INFO s MAXSCALEDCAPACITY"), Reply::Int(26_214_300));
        assert_eq!(h.run("BF.INFO n EXPANSION"), Reply::Nil);
        let invalid = Reply::error("ERR invalid information value");
        assert_eq!(h.run("BF.INFO n TIGHTENING"), invalid);
        assert_eq!(h.run("BF.INFO n MAXSCALEDCAPACITY"), invalid);
        assert_eq!(h.run("BF.INFO n ERROR"), Reply::Double(0.01));
        h.config = Dialect::ValkeyBloom(V0_1).defaults();
        assert_eq!(
            names(&mut h, "s"),
            want(&[&scaling[..4], &scaling[5..6]].concat())
        );
        assert_eq!(h.run("BF.INFO s ERROR"), invalid);
    }
}
