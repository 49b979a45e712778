//! BF.* commands with RedisBloom's exact replies, errors and option-parsing quirks (implemented
//! from RedisBloom's documented behaviour and observed replies, not its source).
//! [`super::execute`] checks each command's table arity;
//! a handler checks only what is stricter than the table (RESERVE, INFO and DEBUG counts,
//! INSERT's ITEMS).

use super::bloom_layout::{layout_name, layout_named, layout_of_header};
use super::bloom_valkey::{self as valkey, Options};
use super::{
    add_batch, family, flags::*, load_chunk, write, wrong_arity, Arg, ArgKind, Args, CommandInfo,
    Ctx, Docs, Host, CAPACITY_OPTION, ERROR_OPTION, EXPANSION_OPTION, KEY_ITEM, KEY_ITEMS,
    KEY_ITER, KEY_ITER_DATA, KEY_ONLY, NOCREATE, READ,
};
use crate::config::{Dialect, ValkeyFlavour, MAX_ERROR_RATE};
use crate::num::{is, parse_f64, parse_i64};
use crate::reply::Reply;
use crate::types::sbchain::{self, AddError, Chain};
use crate::value::{ChainValue, Kind, OnChain};
use crate::ERR_NOT_FOUND;

const MAX_EXPANSION: i64 = 32768;

/// `O(k * n)` wording shared by the multi-item commands.
const K_TIMES_N: &str =
    "O(k * n), where k is the number of hash functions and n is the number of items";
const K_LAST: &str = "O(k), where k is the number of hash functions used by the last sub-filter";
const ADD_MANY: &str =
    "Adds one or more items to a Bloom Filter. A filter will be created if it does not exist";

/// BF.RESERVE's and BF.INSERT's documented arguments are RedisBloom 8's exactly: `LAYOUT
/// classic|blocked`, our extension, is accepted but not listed in `COMMAND DOCS`, so clients
/// and tools generated from RedisBloom's documentation (and RedisBloom's own docs tests) see the
/// same argument lists. It is documented in docs/module.md.
const RESERVE_ARGS: &[Arg] = &[
    Arg::key(),
    Arg::plain("error_rate", ArgKind::Double),
    Arg::plain("capacity", ArgKind::Integer),
    EXPANSION_OPTION,
    Arg::plain("nonscaling", ArgKind::PureToken)
        .token("NONSCALING")
        .optional(),
];
const INSERT_ARGS: &[Arg] = &[
    Arg::key(),
    CAPACITY_OPTION,
    ERROR_OPTION,
    EXPANSION_OPTION,
    NOCREATE,
    Arg::plain("nonscaling", ArgKind::PureToken)
        .token("NONSCALING")
        .optional(),
    Arg::plain("items", ArgKind::PureToken).token("ITEMS"),
    Arg::plain("item", ArgKind::String).multiple(),
];
/// RedisBloom names the first choice "capcaity" (sic).
const INFO_ARGS: &[Arg] = &[
    Arg::key(),
    Arg::group(
        "single_value",
        ArgKind::OneOf,
        &[
            Arg::plain("capcaity", ArgKind::PureToken).token("CAPACITY"),
            Arg::plain("SIZE", ArgKind::PureToken).token("SIZE"),
            Arg::plain("FILTERS", ArgKind::PureToken).token("FILTERS"),
            Arg::plain("ITEMS", ArgKind::PureToken).token("ITEMS"),
            Arg::plain("EXPANSION", ArgKind::PureToken).token("EXPANSION"),
            Arg::plain("LAYOUT", ArgKind::PureToken).token("LAYOUT"),
        ],
    )
    .optional(),
];

/// The BF.* command table: RedisBloom 8.2's arities, flags and documentation.
pub fn commands() -> Vec<CommandInfo> {
    let bf = family("bloom");
    let filter = "is key name for a Bloom filter.";
    vec![
        bf(
            "BF.RESERVE",
            write("bloom.reserve"),
            reserve,
            DENYOOM,
            -4,
            Some(Docs::redisbloom(
                "Creates a new Bloom Filter",
                "O(1)",
                "is key name for the the Bloom filter to be created.",
                true,
                RESERVE_ARGS,
            )),
        ),
        bf(
            "BF.ADD",
            write("bloom.add"),
            add,
            DENYOOM,
            3,
            Some(Docs::redisbloom(
                "Adds an item to a Bloom Filter",
                K_LAST,
                "is key name for a Bloom filter to add the item to.",
                true,
                KEY_ITEM,
            )),
        ),
        bf(
            "BF.MADD",
            write("bloom.add"),
            madd,
            DENYOOM,
            -3,
            Some(Docs::redisbloom(
                ADD_MANY,
                K_TIMES_N,
                "is key name for a Bloom filter to add the items to.",
                true,
                KEY_ITEMS,
            )),
        ),
        bf(
            "BF.INSERT",
            write("bloom.add"),
            insert,
            DENYOOM,
            -4,
            Some(Docs::redisbloom(
                ADD_MANY,
                K_TIMES_N,
                "is key name for a Bloom filter to insert the item to.",
                true,
                INSERT_ARGS,
            )),
        ),
        bf(
            "BF.EXISTS",
            READ,
            exists,
            FAST,
            3,
            Some(Docs::redisbloom(
                "Checks whether an item exists in a Bloom Filter",
                K_LAST,
                "is key name for a Bloom filter to check the item in.",
                false,
                KEY_ITEM,
            )),
        ),
        bf(
            "BF.MEXISTS",
            READ,
            mexists,
            FAST,
            -3,
            Some(Docs::redisbloom(
                "Checks whether one or more items exist in a Bloom Filter",
                K_TIMES_N,
                filter,
                false,
                KEY_ITEMS,
            )),
        ),
        bf(
            "BF.CARD",
            READ,
            card,
            FAST,
            2,
            Some(Docs {
                since: "2.4.4",
                ..Docs::redisbloom(
                    "Returns the cardinality of a Bloom filter",
                    "O(1)",
                    filter,
                    false,
                    KEY_ONLY,
                )
            }),
        ),
        bf(
            "BF.INFO",
            READ,
            info,
            FAST,
            -2,
            Some(Docs::redisbloom(
                "Returns information about a Bloom Filter",
                "O(1)",
                filter,
                false,
                INFO_ARGS,
            )),
        ),
        // RedisBloom's key spec for SCANDUMP says RW although the command only reads.
        bf(
            "BF.SCANDUMP",
            READ,
            scandump,
            Flags::NONE,
            3,
            Some(Docs::redisbloom(
                "Begins an incremental save of the bloom filter",
                "O(n), where n is the capacity",
                "is key name for a Bloom filter to save.",
                true,
                KEY_ITER,
            )),
        ),
        bf(
            "BF.LOADCHUNK",
            write("bloom.loadchunk"),
            loadchunk,
            DENYOOM,
            4,
            Some(Docs::redisbloom(
                "Restores a filter previously saved using SCANDUMP",
                "O(n), where n is the capacity",
                "is key name for a Bloom filter to load the chunk to.",
                true,
                KEY_ITER_DATA,
            )),
        ),
        bf("BF.DEBUG", READ, debug, Flags::NONE, -1, None),
    ]
}

/// A `BF.*` operation written once over the chain's link type, run for the link type of the
/// chain it is for ([`on_chain`]).
trait ChainOp<H: Host + ?Sized> {
    /// What the operation gives.
    type Out;
    /// Runs over the chain type `Chain<L>`.
    fn run<L: ChainValue>(self, ctx: &mut Ctx<H>) -> Self::Out;
}

/// Runs `op` over the chain type of `kind` (a Bloom chain kind).
fn on_chain<H: Host + ?Sized, O: ChainOp<H>>(kind: Kind, ctx: &mut Ctx<H>, op: O) -> O::Out {
    struct Run<'r, 'c, H: Host + ?Sized, O> {
        ctx: &'r mut Ctx<'c, H>,
        op: O,
    }
    impl<H: Host + ?Sized, O: ChainOp<H>> OnChain for Run<'_, '_, H, O> {
        type Out = O::Out;
        fn on<L: ChainValue>(self) -> O::Out {
            self.op.run::<L>(self.ctx)
        }
    }
    kind.on_chain(Run { ctx, op }).expect("a Bloom chain kind")
}

/// Which Bloom chain kind `key` holds: `Ok(None)` if none, WRONGTYPE if a value of another type.
/// One lookup, and nothing allocated unless it answers WRONGTYPE (BF.ADD and BF.EXISTS on an
/// existing key allocate nothing).
fn chain_at<H: Host + ?Sized>(ctx: &mut Ctx<H>, key: &[u8]) -> Result<Option<Kind>, Reply> {
    match ctx.value(key) {
        Ok(None) => Ok(None),
        Ok(Some(v)) if layout_name(v.kind()).is_some() => Ok(Some(v.kind())),
        _ => Err(match ctx.config().dialect.valkey() {
            Some(flavour) => valkey::wrong_type(flavour),
            None => Reply::error(crate::ERR_WRONGTYPE),
        }),
    }
}

/// The chain kind a command on `key` runs as: the key's, classic when the key is missing or
/// holds another type (which then answers as RedisBloom's commands do).
fn kind_at<H: Host + ?Sized>(ctx: &mut Ctx<H>, key: &[u8]) -> Kind {
    chain_at(ctx, key).ok().flatten().unwrap_or(Kind::Bloom)
}

/// The chain kind a dialect creates: valkey-bloom's filters (`bloomfltr`) in its dialect.
fn chain_kind(dialect: Dialect) -> Kind {
    match dialect.valkey() {
        Some(_) => Kind::BloomValkey,
        None => Kind::Bloom,
    }
}

/// Creation parameters for a chain (explicit or from the bf-* configuration).
#[derive(Clone, Copy)]
struct CreateParams {
    capacity: u64,
    error: f64,
    expansion: u32,
    nonscaling: bool,
    /// The chain kind (its link layout).
    layout: Kind,
    /// valkey-bloom's options, when its arguments gave them.
    valkey: Option<Options>,
}

impl CreateParams {
    fn from_config<H: Host + ?Sized>(ctx: &Ctx<H>) -> Self {
        let c = ctx.config();
        Self {
            capacity: c.bf_initial_size,
            error: c.bf_error_rate,
            expansion: c.bf_expansion,
            nonscaling: c.bf_expansion == 0,
            layout: chain_kind(c.dialect),
            valkey: None,
        }
    }

    /// The chain valkey-bloom's `options` describe (expansion 0: non-scaling; valkey-bloom's
    /// link unless they name a `LAYOUT`).
    fn from_valkey(options: Options) -> Self {
        Self {
            capacity: options.capacity,
            error: options.error,
            expansion: options.expansion,
            nonscaling: options.expansion == 0,
            layout: options.layout.unwrap_or(Kind::BloomValkey),
            valkey: Some(options),
        }
    }

    /// valkey-bloom's view of these parameters (its defaults, from the settings).
    fn as_valkey(&self) -> Options {
        let expansion = if self.nonscaling { 0 } else { self.expansion };
        Options {
            capacity: self.capacity,
            error: self.error,
            expansion,
            layout: None,
            tightening: None,
            seed: None,
        }
    }

    /// The BF.INSERT options that recreate exactly this chain on log replay (the config in force
    /// at replay time may differ). `{}` formatting of f64 round-trips exactly.
    fn as_insert_options(&self, key: &[u8]) -> Vec<Vec<u8>> {
        let mut args: Vec<Vec<u8>> = vec![
            b"BF.INSERT".to_vec(),
            key.to_vec(),
            b"CAPACITY".to_vec(),
            self.capacity.to_string().into_bytes(),
            b"ERROR".to_vec(),
            self.error.to_string().into_bytes(),
        ];
        // valkey-bloom's form: one of NONSCALING or EXPANSION (> 0), its link without LAYOUT.
        let valkey = self.layout == Kind::BloomValkey;
        if !(valkey && self.nonscaling) {
            args.push(b"EXPANSION".to_vec());
            args.push(self.expansion.to_string().into_bytes());
        }
        if self.nonscaling {
            args.push(b"NONSCALING".to_vec());
        }
        if self.layout != Kind::Bloom && !valkey {
            args.push(b"LAYOUT".to_vec());
            args.push(
                layout_name(self.layout)
                    .unwrap_or_default()
                    .as_bytes()
                    .to_vec(),
            );
        }
        args.push(b"ITEMS".to_vec());
        args
    }
}

/// Creates a chain of the requested layout at `key`, its first link admitted against the
/// memory budget first; a link the allocator refuses answers Redis' OOM error.
struct Create<'k> {
    key: &'k [u8],
    params: CreateParams,
}

impl<H: Host + ?Sized> ChainOp<H> for Create<'_> {
    type Out = Result<(), Reply>;
    fn run<L: ChainValue>(self, ctx: &mut Ctx<H>) -> Result<(), Reply> {
        let failed = || Reply::error("ERR could not create filter");
        let refused = || Reply::error(crate::ERR_OOM);
        let p = self.params;
        let plan =
            Chain::<L>::plan(p.capacity, p.error, p.expansion, p.nonscaling).ok_or_else(failed)?;
        let chain = Chain::<L>::create(ctx.admit(plan)?).ok_or_else(refused)?;
        ctx.create(self.key, L::into_value(chain));
        Ok(())
    }
}

fn create<H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    key: &[u8],
    params: CreateParams,
) -> Result<(), Reply> {
    on_chain(params.layout, ctx, Create { key, params })
}

/// Makes sure a chain is at `key` before items go in: creates it with `create_with`'s
/// parameters (asked only then) if missing, logging the creation as `BF.INSERT` with explicit
/// parameters before the items that go in (a new chain always takes its first item: its one
/// link is empty), or fails with `ERR not found` if `create_with` gives none.
fn ensure_chain<H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    key: &[u8],
    no_items: bool,
    create_with: impl FnOnce(&Ctx<H>) -> Option<CreateParams>,
) -> Result<(), Reply> {
    if chain_at(ctx, key)?.is_some() {
        return Ok(());
    }
    let params = create_with(ctx).ok_or_else(|| Reply::error(ERR_NOT_FOUND))?;
    create(ctx, key, params)?;
    // Replay must rebuild the same chain whatever the config is then (valkey-bloom 0.1.0 sends
    // the command as it came; a creation without items, 1.0's BF.INSERT, goes on its own).
    let mut head = params.as_insert_options(key);
    let extra = valkey::created(ctx, key, params.valkey)?;
    head.splice(head.len() - 1..head.len() - 1, extra);
    let flavour = ctx.config().dialect.valkey();
    if flavour.is_some() {
        ctx.notify_after("bloom.reserve");
    }
    match flavour {
        Some(ValkeyFlavour::V0_1) => {}
        _ if no_items => {
            head.pop();
            ctx.propagate_as(vec![head]);
        }
        _ => ctx.propagate_items_after(head),
    }
    Ok(())
}

/// Adds items in order, stopping at the first error (placed as the last element), as MADD and
/// INSERT reply. Creates the filter with `create_with` if missing, or fails with `ERR not found`.
fn add_items<H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    key: &[u8],
    items: &Args,
    create_with: impl FnOnce(&Ctx<H>) -> Option<CreateParams>,
) -> Reply {
    if let Err(reply) = ensure_chain(ctx, key, items.is_empty(), create_with) {
        return reply;
    }
    let kind = kind_at(ctx, key);
    on_chain(kind, ctx, AddAll { key, items })
}

/// Adds a batch in order (batched and prefetched, see the chain's notes).
struct AddAll<'a> {
    key: &'a [u8],
    items: &'a Args<'a>,
}

impl<H: Host + ?Sized> ChainOp<H> for AddAll<'_> {
    type Out = Reply;
    fn run<L: ChainValue>(self, ctx: &mut Ctx<H>) -> Reply {
        Reply::Array(add_batch(
            ctx,
            self.key,
            self.items,
            |chain: &mut Chain<L>, items, allowance, added| chain.add_many(items, allowance, added),
            AddError::message,
        ))
    }
}

/// BF.RESERVE: at most 7 arguments (9 with `LAYOUT`); error rate, capacity, EXPANSION,
/// NONSCALING, LAYOUT checked in that order, then the key.
pub(crate) fn reserve(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if let Some(flavour) = ctx.config().dialect.valkey() {
        let defaults = CreateParams::from_config(ctx).as_valkey();
        return match valkey::reserve(flavour, args, defaults) {
            Ok(options) => create_new(ctx, args[1], CreateParams::from_valkey(options)),
            Err(reply) => reply,
        };
    }
    // RedisBloom's 7, two more for our `LAYOUT l` (only with it: without, RedisBloom's count).
    let limit = if args[4..].iter().any(|a| is(a, "LAYOUT")) {
        9
    } else {
        7
    };
    if args.len() > limit {
        return wrong_arity("bf.reserve");
    }
    let Some(error) = parse_f64(args[2]) else {
        return Reply::error("ERR bad error rate");
    };
    if let Err(e) = sbchain::check_error_rate(error) {
        return Reply::error(e);
    }
    let error = error.min(MAX_ERROR_RATE);
    let Some(capacity) = parse_i64(args[3]) else {
        return Reply::error("ERR bad capacity");
    };
    // A negative capacity is out of range like 0.
    if let Err(e) = sbchain::check_capacity(u64::try_from(capacity).unwrap_or(0)) {
        return Reply::error(e);
    }
    // Options are matched anywhere after the capacity; unknown words are ignored (quirk).
    let options = &args[4..];
    let nonscaling = options.iter().any(|a| is(a, "NONSCALING"));
    let mut expansion = i64::from(ctx.config().bf_expansion);
    if let Some(at) = options.iter().position(|a| is(a, "EXPANSION")) {
        let Some(value) = options.get(at + 1) else {
            return Reply::error("ERR no expansion");
        };
        let Some(value) = parse_i64(value) else {
            return Reply::error("ERR bad expansion");
        };
        // Judged before the range: `NONSCALING EXPANSION -1` is refused with these words.
        if nonscaling && value != 0 {
            // RedisBloom's wording, without the ERR prefix.
            return Reply::error("Nonscaling filters cannot expand");
        }
        if !(0..=MAX_EXPANSION).contains(&value) {
            return Reply::error("ERR expansion must be in the range [0, 32768]");
        }
        expansion = value;
    }
    let mut layout = Kind::Bloom;
    if let Some(at) = options.iter().position(|a| is(a, "LAYOUT")) {
        match options.get(at + 1).map(|name| layout_named(name)) {
            Some(Some(named)) => layout = named,
            Some(None) => return Reply::error("ERR bad layout"),
            None => return Reply::error("ERR no layout"),
        }
    }
    let params = CreateParams {
        capacity: capacity as u64,
        error,
        expansion: expansion as u32,
        nonscaling: nonscaling || expansion == 0,
        layout,
        valkey: None,
    };
    create_new(ctx, args[1], params)
}

/// BF.RESERVE's creation, once its arguments are read: `ERR item exists` if a chain is there.
fn create_new(ctx: &mut Ctx<dyn Host + '_>, key: &[u8], params: CreateParams) -> Reply {
    match chain_at(ctx, key) {
        Err(reply) => return reply,
        Ok(Some(_)) => return Reply::error("ERR item exists"),
        Ok(None) => {}
    }
    match create(ctx, key, params) {
        Ok(()) => valkey::reserved(ctx, key, params.as_insert_options(key), params.valkey),
        Err(reply) => reply,
    }
}

/// BF.ADD `key item`: the settings read only to create, the memory budget only to grow, the
/// reply built without the array MADD answers.
pub(crate) fn add(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let from_config = |ctx: &Ctx<dyn Host + '_>| Some(CreateParams::from_config(ctx));
    if let Err(reply) = ensure_chain(ctx, args[1], false, from_config) {
        return reply;
    }
    let kind = kind_at(ctx, args[1]);
    on_chain(kind, ctx, Add(args))
}

/// BF.ADD once the chain exists.
struct Add<'a>(&'a Args<'a>);

impl<H: Host + ?Sized> ChainOp<H> for Add<'_> {
    type Out = Reply;
    fn run<L: ChainValue>(self, ctx: &mut Ctx<H>) -> Reply {
        let (key, item) = (self.0[1], self.0[2]);
        let mut allowance = None;
        let added = ctx.update_lazily(
            key,
            &mut allowance,
            |chain: &mut Chain<L>, allowance| chain.add(item, allowance),
            |e| *e == AddError::OutOfMemory,
        );
        if let Some(allowance) = allowance {
            ctx.set_allowance(allowance);
        }
        ctx.items_applied(1, added.is_err().then(|| vec![false]));
        match added {
            Ok(new) => {
                ctx.changed(u64::from(new));
                Reply::Bool(new)
            }
            Err(e) => Reply::error(e.message()),
        }
    }
}

pub(crate) fn madd(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    add_items(ctx, args[1], &args[2..], |ctx| {
        Some(CreateParams::from_config(ctx))
    })
}

/// BF.INSERT options are recognised by their first letters (RedisBloom quirk): `i` ITEMS,
/// `e`+`r` ERROR else EXPANSION, `c` CAPACITY, `n` with third letter `c` NOCREATE else
/// NONSCALING; and ours, `l` LAYOUT.
pub(crate) fn insert(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let mut params = CreateParams::from_config(ctx);
    if let Some(flavour) = ctx.config().dialect.valkey() {
        return match valkey::insert_checked(ctx, flavour, args, params.as_valkey()) {
            Ok(insert) => add_items(ctx, args[1], &args[insert.items_at..], |_| {
                (!insert.nocreate).then(|| CreateParams::from_valkey(insert.options))
            }),
            Err(reply) => reply,
        };
    }
    let mut nocreate = false;
    let mut items_at = None;
    let mut i = 2;
    let lower = |arg: &[u8], at: usize| arg.get(at).map(u8::to_ascii_lowercase);
    while i < args.len() {
        let arg = &args[i];
        match lower(arg, 0) {
            Some(b'i') => {
                items_at = Some(i + 1);
                break;
            }
            Some(b'e') | Some(b'c') => {
                let Some(value) = args.get(i + 1) else {
                    return wrong_arity("bf.insert");
                };
                if lower(arg, 0) == Some(b'c') {
                    // Below 2^32 - 1 (RedisBloom's limit here, wider than BF.RESERVE's); the
                    // memory budget still bounds what is allocated.
                    match parse_i64(value) {
                        Some(c) if (1..i64::from(u32::MAX)).contains(&c) => {
                            params.capacity = c as u64
                        }
                        _ => return Reply::error("Bad capacity"),
                    }
                } else if lower(arg, 1) == Some(b'r') {
                    match parse_f64(value) {
                        Some(e) if e > 0.0 && e < 1.0 => params.error = e.min(MAX_ERROR_RATE),
                        _ => return Reply::error("Bad error rate"),
                    }
                } else {
                    match parse_i64(value) {
                        Some(x) if (0..=MAX_EXPANSION).contains(&x) => params.expansion = x as u32,
                        _ => return Reply::error("Bad expansion"),
                    }
                }
                i += 2;
            }
            Some(b'l') => {
                let Some(value) = args.get(i + 1) else {
                    return wrong_arity("bf.insert");
                };
                match layout_named(value) {
                    Some(layout) => params.layout = layout,
                    None => return Reply::error("Bad layout"),
                }
                i += 2;
            }
            Some(b'n') => {
                if lower(arg, 2) == Some(b'c') {
                    nocreate = true;
                } else {
                    params.nonscaling = true;
                }
                i += 1;
            }
            _ => return Reply::error("Unknown argument received"),
        }
    }
    let Some(items_at) = items_at.filter(|&at| at < args.len()) else {
        return wrong_arity("bf.insert");
    };
    params.nonscaling |= params.expansion == 0;
    add_items(ctx, args[1], &args[items_at..], |_| {
        (!nocreate).then_some(params)
    })
}

/// The reads of the chain at a key, each over its layout (0 for a missing key or another type,
/// as RedisBloom's `BF.EXISTS`/`BF.MEXISTS` answer; `ERR not found` where a read needs it).
#[derive(Clone, Copy)]
enum Read<'a> {
    /// BF.EXISTS `key item`.
    Exists(&'a Args<'a>),
    /// BF.MEXISTS `key item...`: batched.
    Mexists(&'a Args<'a>),
    /// BF.CARD `key`.
    Card(&'a Args<'a>),
    /// BF.INFO `key [field]`.
    Info(&'a Args<'a>),
    /// BF.SCANDUMP `key iterator`.
    Scandump(&'a Args<'a>),
    /// BF.DEBUG `key`.
    Debug(&'a Args<'a>),
}

impl<H: Host + ?Sized> ChainOp<H> for Read<'_> {
    type Out = Reply;
    fn run<L: ChainValue>(self, ctx: &mut Ctx<H>) -> Reply {
        match self {
            Read::Exists(args) => super::generic::exists(ctx, args, Chain::<L>::contains),
            Read::Mexists(args) => super::generic::mexists(ctx, args, |chain: &Chain<L>, items| {
                chain.contains_many(items)
            }),
            Read::Card(args) => match ctx.typed::<Chain<L>>(args[1]) {
                Ok(Some(chain)) => Reply::Int(chain.items() as i64),
                Ok(None) => Reply::Int(0),
                Err(reply) => reply,
            },
            Read::Info(args) => super::bloom_info::info_of::<L, H>(ctx, args),
            Read::Scandump(args) => scandump_of::<L, H>(ctx, args),
            Read::Debug(args) => match ctx.existing::<Chain<L>>(args[1], ERR_NOT_FOUND) {
                Ok(chain) => {
                    Reply::Array(chain.debug_lines().into_iter().map(Reply::bulk).collect())
                }
                Err(reply) => reply,
            },
        }
    }
}

/// Runs a read over the layout of the chain at its key.
fn read<H: Host + ?Sized>(ctx: &mut Ctx<H>, args: &Args, read: Read) -> Reply {
    // valkey-bloom refuses another type in every read, BF.EXISTS included.
    if ctx.config().dialect.valkey().is_some() {
        if let Err(reply) = chain_at(ctx, args[1]) {
            return reply;
        }
    }
    let kind = kind_at(ctx, args[1]);
    on_chain(kind, ctx, read)
}

/// BF.EXISTS over either layout (0 for a missing key or another type).
pub(crate) fn exists(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    read(ctx, args, Read::Exists(args))
}

/// BF.MEXISTS over either layout, batched.
pub(crate) fn mexists(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    read(ctx, args, Read::Mexists(args))
}

pub(crate) fn card(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    read(ctx, args, Read::Card(args))
}

/// BF.INFO: RedisBloom's five fields; a non-classic chain appends `Layout` at the end (clients
/// read the reply by position) and answers `BF.INFO key LAYOUT`.
pub(crate) fn info(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if args.len() != 2 && args.len() != 3 {
        return super::wrong_arity_in(ctx.config().dialect, "BF.INFO");
    }
    read(ctx, args, Read::Info(args))
}

pub(crate) fn scandump(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    read(ctx, args, Read::Scandump(args))
}

fn scandump_of<L: ChainValue, H: Host + ?Sized>(ctx: &mut Ctx<H>, args: &Args) -> Reply {
    // The key is looked up before the iterator is parsed.
    let chain = match ctx.existing::<Chain<L>>(args[1], ERR_NOT_FOUND) {
        Ok(chain) => chain,
        Err(reply) => return reply,
    };
    let Some(iter) = parse_i64(args[2]) else {
        return Reply::error("Second argument must be numeric");
    };
    let (next, data) = if iter == 0 {
        (1, chain.dump_header())
    } else {
        chain.dump_chunk(iter)
    };
    Reply::Array(vec![Reply::Int(next), Reply::Bulk(data)])
}

/// BF.LOADCHUNK: into the chain at the key, whatever its layout; a header for a missing key
/// makes the chain whose format its magic names (classic without one).
pub(crate) fn loadchunk(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    struct LoadChunk<'a>(&'a Args<'a>);
    impl<H: Host + ?Sized> ChainOp<H> for LoadChunk<'_> {
        type Out = Reply;
        fn run<L: ChainValue>(self, ctx: &mut Ctx<H>) -> Reply {
            load_chunk::<Chain<L>, H>(ctx, self.0, "ERR Second argument must be numeric")
        }
    }
    let kind = match chain_at(ctx, args[1]) {
        Ok(Some(kind)) => kind,
        Ok(None) => layout_of_header(args[3]),
        Err(_) => Kind::Bloom,
    };
    on_chain(kind, ctx, LoadChunk(args))
}

pub(crate) fn debug(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if args.len() != 2 {
        return wrong_arity("bf.debug");
    }
    read(ctx, args, Read::Debug(args))
}

#[cfg(test)]
mod tests {
    use crate::commands::testing::*;
    use crate::commands::{wrong_arity, Propagate};
    use crate::reply::Reply;
    use crate::value::Value;

    #[test]
    fn reserve_checks_arguments_before_existence() {
        let mut h = Harness::new();
        assert_eq!(h.run("BF.RESERVE k 0.01 100"), Reply::ok());
        assert_eq!(
            h.run("BF.RESERVE k 0 100"),
            err("ERR error rate must be in the range (0.000000, 1.000000)")
        );
        assert_eq!(
            h.run("BF.RESERVE k 0.01 2000000000"),
            err("ERR capacity must be in the range [1, 1073741824]")
        );
        assert_eq!(h.run("BF.RESERVE k 0.01 100"), err("ERR item exists"));
        assert_eq!(h.run("BF.RESERVE z 0.01 100 EXPANSION 0"), Reply::ok());
        assert_eq!(h.run("BF.INFO z EXPANSION"), Reply::Array(vec![Reply::Nil]));
    }

    /// `COMMAND DOCS` lists RedisBloom 8's arguments, in its order; `LAYOUT` is accepted but not
    /// listed.
    #[test]
    fn documented_arguments_are_redisbloom_8s() {
        let names = |command: &str| -> Vec<&str> {
            let info = crate::commands::table::lookup(command.as_bytes()).unwrap();
            info.docs
                .as_ref()
                .unwrap()
                .args
                .iter()
                .map(|a| a.name)
                .collect()
        };
        assert_eq!(
            names("BF.RESERVE"),
            ["key", "error_rate", "capacity", "expansion", "nonscaling"]
        );
        assert_eq!(
            names("BF.INSERT"),
            [
                "key",
                "capacity",
                "error",
                "expansion",
                "nocreate",
                "nonscaling",
                "items",
                "item"
            ]
        );
        let mut h = Harness::new();
        assert_eq!(h.run("BF.RESERVE k 0.01 100 LAYOUT blocked"), Reply::ok());
        assert_eq!(
            h.run("BF.INSERT j LAYOUT blocked ITEMS a"),
            Reply::Array(vec![Reply::Bool(true)])
        );
    }

    /// BF.INFO `key`'s fields: a map whose labels are simple strings.
    fn info(h: &mut Harness, key: &str) -> Vec<(String, Reply)> {
        let Reply::Map(pairs) = h.run(&format!("BF.INFO {key}")) else {
            panic!("BF.INFO answers a map")
        };
        pairs
            .into_iter()
            .map(|(label, value)| match label {
                Reply::Simple(label) => (label, value),
                other => panic!("label {other:?}"),
            })
            .collect()
    }

    /// RedisBloom's five fields, in its order.
    const INFO_LABELS: [&str; 5] = [
        "Capacity",
        "Size",
        "Number of filters",
        "Number of items inserted",
        "Expansion rate",
    ];

    #[test]
    fn info_is_a_map_of_simple_strings() {
        let mut h = Harness::new();
        h.run("BF.ADD k a");
        let pairs = info(&mut h, "k");
        let labels: Vec<&str> = pairs.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, INFO_LABELS);
        assert_eq!(pairs[1].1, Reply::Int(240));
    }

    /// An auto-created filter is logged with explicit parameters, so replay under a different
    /// configuration rebuilds the same bytes.
    #[test]
    fn auto_create_is_logged_deterministically() {
        let mut h = Harness::new();
        h.config.bf_error_rate = 0.02;
        h.config.bf_initial_size = 7;
        h.run("BF.MADD k a b");
        let Some(Propagate::Commands(log)) = h.last.take().map(|o| o.propagate) else {
            panic!("an auto-create is rewritten")
        };
        assert_eq!(log.len(), 1);
        let mut replayed = Harness::new();
        for cmd in &log {
            replayed.run_args(cmd);
        }
        let dump = |h: &Harness| match h.keys.get(&b"k"[..]) {
            Some(Value::Bloom(c)) => (c.dump_header(), c.dump_chunk(1)),
            _ => panic!("missing"),
        };
        assert_eq!(dump(&h), dump(&replayed));
        // A read, or a write that changed nothing, propagates nothing.
        h.run("BF.EXISTS k a");
        assert_eq!(h.last.take().unwrap().propagate, Propagate::Nothing);
        h.run("BF.ADD k a");
        assert_eq!(h.last.take().unwrap().propagate, Propagate::Nothing);
        h.run("BF.ADD k zzz");
        assert_eq!(h.last.take().unwrap().propagate, Propagate::Verbatim);
    }

    #[test]
    fn maxmemory_refuses_growth_and_reservations() {
        let mut h = Harness::new();
        h.memory_limit = 4096;
        assert_eq!(h.run("BF.RESERVE big 0.0001 100000"), err(crate::ERR_OOM));
        assert_eq!(h.run("BF.RESERVE small 0.01 10"), Reply::ok());
    }

    /// Without maxmemory, sizes beyond the machine's memory are refused before allocating:
    /// a 193 GB reservation and a forged dump header both fail cleanly.
    #[test]
    fn machine_memory_bounds_allocations_without_maxmemory() {
        let mut h = Harness::new();
        h.memory_limit = 1 << 30;
        let oom = err(crate::ERR_OOM);
        assert_eq!(h.run("BF.RESERVE huge 1e-300 1073741824"), oom);
        h.run("BF.RESERVE src 0.01 1000");
        let Reply::Array(dump) = h.run("BF.SCANDUMP src 0") else {
            panic!()
        };
        let Reply::Bulk(mut header) = dump[1].clone() else {
            panic!()
        };
        let load = |header: Vec<u8>| {
            vec![
                b"BF.LOADCHUNK".to_vec(),
                b"forged".to_vec(),
                b"1".to_vec(),
                header,
            ]
        };
        // Link 0: bytes at 20..28, bits at 28..36 — claim 8 GiB for 1000 items: the sizes
        // disagree with each other (bad data).
        let mut inconsistent = header.clone();
        let bytes: u64 = 8 << 30;
        inconsistent[20..28].copy_from_slice(&bytes.to_le_bytes());
        inconsistent[28..36].copy_from_slice(&(bytes * 8).to_le_bytes());
        assert_eq!(
            h.run_args(&load(inconsistent)),
            err(crate::types::sbchain::ERR_BAD_DATA)
        );
        // Capacity 2^30 at the link's error rate: a consistent 1.4 GB link, over the budget.
        let capacity = 1u64 << 30;
        let sizing = crate::types::sbchain::LinkSizing::new(capacity, 0.005).unwrap();
        header[20..28].copy_from_slice(&sizing.bytes.to_le_bytes());
        header[28..36].copy_from_slice(&sizing.bits.to_le_bytes());
        header[64..72].copy_from_slice(&capacity.to_le_bytes());
        assert_eq!(h.run_args(&load(header)), oom);
        assert!(!h.keys.contains_key(&b"forged"[..]));
    }

    /// BF.MADD and BF.INSERT add their items in order as one batch: a duplicate answers 1
    /// then 0, a chain scales or fills mid-batch, the budget is asked when growth needs it —
    /// replies, bits and counts as one BF.ADD after another.
    #[test]
    fn batched_adds_answer_as_one_add_after_another() {
        let mut h = Harness::new();
        let bools = |v: &[i64]| Reply::Array(v.iter().map(|&n| Reply::Bool(n == 1)).collect());
        assert_eq!(h.run("BF.MADD k a a b a"), bools(&[1, 0, 1, 0]));
        assert_eq!(h.last.as_ref().unwrap().dirty, 3, "created + 2 added");
        assert_eq!(
            h.run("BF.INSERT f CAPACITY 2 NONSCALING ITEMS x y x z w"),
            Reply::Array(vec![
                Reply::Bool(true),
                Reply::Bool(true),
                Reply::Bool(false),
                err("ERR non scaling filter is full")
            ])
        );
        assert_eq!(h.run("BF.CARD f"), Reply::Int(2));
        // Scaling mid-batch: the same chain as one BF.ADD at a time.
        h.run("BF.RESERVE g 0.01 3");
        h.run("BF.RESERVE one 0.01 3");
        let items: Vec<String> = (0..40).map(|i| format!("i{}", i % 30)).collect();
        let Reply::Array(batched) = h.run(&format!("BF.MADD g {}", items.join(" "))) else {
            panic!()
        };
        let single: Vec<Reply> = items
            .iter()
            .map(|i| h.run(&format!("BF.ADD one {i}")))
            .collect();
        assert_eq!(batched, single);
        let dump = |h: &Harness, k: &[u8]| match h.keys.get(k) {
            Some(Value::Bloom(c)) => {
                assert!(c.links().len() > 1, "scaled");
                (
                    c.dump_header(),
                    c.to_owned()
                        .links()
                        .iter()
                        .map(|l| l.to_le_bytes())
                        .collect::<Vec<_>>(),
                )
            }
            _ => panic!("missing"),
        };
        assert_eq!(dump(&h, b"g"), dump(&h, b"one"));
        // Growth refused by maxmemory mid-batch: the items before it stay added.
        let mut h = Harness::new();
        h.run("BF.RESERVE m 0.01 2");
        h.memory_limit = h.keys.values().map(Value::memory).sum::<u64>() + 1;
        assert_eq!(
            h.run("BF.MADD m a b c"),
            Reply::Array(vec![
                Reply::Bool(true),
                Reply::Bool(true),
                err(crate::ERR_OOM)
            ])
        );
        assert_eq!(h.last.as_ref().unwrap().dirty, 2);
        assert_eq!(h.run("BF.CARD m"), Reply::Int(2));
    }

    /// `LAYOUT blocked` makes the blocked type; every BF.* command serves it; BF.INFO appends
    /// `Layout` last; a classic filter answers as before.
    #[test]
    fn blocked_layout_through_every_command() {
        let mut h = Harness::new();
        assert_eq!(
            h.run("BF.RESERVE b 0.01 100 EXPANSION 4 LAYOUT blocked"),
            Reply::ok()
        );
        assert!(matches!(
            h.keys.get(&b"b"[..]),
            Some(Value::BloomBlocked(_))
        ));
        assert_eq!(
            h.run("BF.RESERVE b 0.01 100 LAYOUT blocked"),
            err("ERR item exists")
        );
        assert_eq!(h.run("BF.RESERVE c 0.01 100 LAYOUT"), err("ERR no layout"));
        assert_eq!(
            h.run("BF.RESERVE c 0.01 100 LAYOUT round"),
            err("ERR bad layout")
        );
        assert_eq!(h.run("BF.RESERVE c 0.01 100 layout CLASSIC"), Reply::ok());
        assert!(matches!(h.keys.get(&b"c"[..]), Some(Value::Bloom(_))));
        assert_eq!(h.run("BF.ADD b x"), Reply::Bool(true));
        assert_eq!(h.run("BF.ADD b x"), Reply::Bool(false));
        assert_eq!(
            h.run("BF.MADD b y x"),
            Reply::Array(vec![Reply::Bool(true), Reply::Bool(false)])
        );
        assert_eq!(h.run("BF.EXISTS b y"), Reply::Bool(true));
        assert_eq!(
            h.run("BF.MEXISTS b x y nope"),
            Reply::Array(vec![
                Reply::Bool(true),
                Reply::Bool(true),
                Reply::Bool(false)
            ])
        );
        assert_eq!(h.run("BF.CARD b"), Reply::Int(2));
        let pairs = info(&mut h, "b");
        let labels: Vec<&str> = pairs.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels[..5], INFO_LABELS);
        assert_eq!(labels[5..], ["Layout"]);
        assert_eq!(pairs[4].1, Reply::Int(4));
        assert_eq!(pairs[5].1, Reply::bulk("blocked"));
        assert_eq!(
            h.run("BF.INFO b LAYOUT"),
            Reply::Array(vec![Reply::bulk("blocked")])
        );
        assert_eq!(info(&mut h, "c").len(), 5);
        assert_eq!(h.run("BF.INFO c LAYOUT"), err("Invalid information value"));
        let Reply::Array(lines) = h.run("BF.DEBUG b") else {
            panic!()
        };
        assert_eq!(lines[0], Reply::bulk("size:2"));
        // Scaling: 100 × 4 capacity on the second link.
        for i in 0..150 {
            h.run(&format!("BF.ADD b i{i}"));
        }
        assert_eq!(
            h.run("BF.INFO b FILTERS"),
            Reply::Array(vec![Reply::Int(2)])
        );
        assert_eq!(
            h.run("BF.INFO b CAPACITY"),
            Reply::Array(vec![Reply::Int(500)])
        );
        // SCANDUMP / LOADCHUNK into a new key rebuild the same blocked chain.
        let chunks = h.scandump("BF", "b");
        h.loadchunks("BF", "copy", &chunks);
        assert!(matches!(
            h.keys.get(&b"copy"[..]),
            Some(Value::BloomBlocked(_))
        ));
        assert_eq!(h.run("BF.INFO copy"), h.run("BF.INFO b"));
        assert_eq!(h.run("BF.EXISTS copy i77"), Reply::Bool(true));
        // A blocked header sent to an existing classic key is a chunk of that key (refused).
        let forged = [
            b"BF.LOADCHUNK".to_vec(),
            b"c".to_vec(),
            b"1".to_vec(),
            chunks[0].1.clone(),
        ];
        assert_eq!(h.run_args(&forged), err("ERR received bad data"));
        // Other types: WRONGTYPE for writes, 0 for reads, as for the classic type.
        h.run("CF.RESERVE cf 100");
        assert_eq!(h.run("BF.EXISTS cf x"), Reply::Bool(false));
        assert_eq!(h.run("BF.ADD cf x"), err(crate::ERR_WRONGTYPE));
        assert_eq!(
            h.run("BF.RESERVE cf 0.01 10 LAYOUT blocked"),
            err(crate::ERR_WRONGTYPE)
        );
    }

    #[test]
    fn insert_takes_layout_and_logs_it() {
        let mut h = Harness::new();
        assert_eq!(
            h.run("BF.INSERT k CAPACITY 2 LAYOUT blocked NONSCALING ITEMS a b"),
            Reply::Array(vec![Reply::Bool(true), Reply::Bool(true)])
        );
        let Some(Propagate::Commands(log)) = h.last.take().map(|o| o.propagate) else {
            panic!("an auto-create is rewritten")
        };
        let mut replayed = Harness::new();
        for cmd in &log {
            replayed.run_args(cmd);
        }
        let dump = |h: &mut Harness| (h.run("BF.SCANDUMP k 0"), h.run("BF.SCANDUMP k 1"));
        assert_eq!(dump(&mut h), dump(&mut replayed));
        assert!(matches!(
            h.keys.get(&b"k"[..]),
            Some(Value::BloomBlocked(_))
        ));
        assert_eq!(h.run("BF.INFO k EXPANSION"), Reply::Array(vec![Reply::Nil]));
        assert_eq!(h.run("BF.ADD k c"), err("ERR non scaling filter is full"));
        assert_eq!(h.run("BF.INSERT z LAYOUT bogus ITEMS a"), err("Bad layout"));
        assert_eq!(h.run("BF.INSERT z LAYOUT"), wrong_arity("bf.insert"));
    }
}
