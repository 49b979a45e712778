//! CF.* commands with RedisBloom's exact replies, errors and option-parsing quirks (implemented
//! from RedisBloom's documented behaviour and observed replies, not its source).
//! [`super::execute`] checks each command's table arity;
//! a handler checks only what is stricter than the table (RESERVE's pairs, COMPACT and DEBUG
//! counts, INSERT's ITEMS).

use super::{
    family, flags::*, load_chunk, update_batch, write, wrong_arity, Arg, ArgKind, Args,
    CommandInfo, Ctx, Docs, Host, KEY_ITEM, KEY_ITEMS, KEY_ITER, KEY_ITER_DATA, KEY_ONLY, NOCREATE,
    READ,
};
use crate::num::{is, parse_i64};
use crate::reply::Reply;
use crate::types::cuckoo::{
    CuckooChain, CuckooParams, InsertError, MAX_BUCKET_SIZE, MAX_CAPACITY, MAX_EXPANSION,
    MAX_ITERATIONS,
};
use crate::value::DialectType as _;
use crate::ERR_NOT_FOUND;

const K_SUB: &str = "O(k), where k is the number of sub-filters";
const K_PLUS_I: &str = "O(k + i), where k is the number of sub-filters and i is maxIterations";
const N_K_I: &str = "O(n * (k + i)), where n is the number of items, k is the number of \
                     sub-filters and i is maxIterations";

/// RedisBloom documents each option as a block of two strings, the first named like the
/// token (BUCKETSIZE's is named CAPACITY).
const RESERVE_ARGS: &[Arg] = &[
    Arg::key(),
    Arg::plain("capacity", ArgKind::Integer),
    Arg::group(
        "bucketsize",
        ArgKind::Block,
        &[
            Arg::plain("CAPACITY", ArgKind::String),
            Arg::plain("VALUE", ArgKind::String),
        ],
    )
    .optional(),
    Arg::group(
        "maxiterations",
        ArgKind::Block,
        &[
            Arg::plain("MAXITERATIONS", ArgKind::String),
            Arg::plain("VALUE", ArgKind::String),
        ],
    )
    .optional(),
    Arg::group(
        "expansion",
        ArgKind::Block,
        &[
            Arg::plain("EXPANSION", ArgKind::String),
            Arg::plain("VALUE", ArgKind::String),
        ],
    )
    .optional(),
];
const INSERT_ARGS: &[Arg] = &[
    Arg::key(),
    Arg::group(
        "capacity",
        ArgKind::Block,
        &[
            Arg::plain("capacity", ArgKind::PureToken).token("CAPACITY"),
            Arg::plain("capacity", ArgKind::Integer),
        ],
    )
    .optional(),
    NOCREATE,
    Arg::plain("items", ArgKind::PureToken).token("ITEMS"),
    Arg::plain("item", ArgKind::String).multiple(),
];

/// The CF.* command table: RedisBloom 8.2's arities, flags and documentation.
pub fn commands() -> Vec<CommandInfo> {
    let cf = family("cuckoo");
    let dump = "O(n), where n is the capacity";
    vec![
        cf(
            "CF.RESERVE",
            write("cf.reserve"),
            reserve,
            DENYOOM,
            -3,
            Some(Docs::redisbloom(
                "Creates a new Cuckoo Filter",
                "O(1)",
                "",
                true,
                RESERVE_ARGS,
            )),
        ),
        cf(
            "CF.ADD",
            write("cf.add"),
            add,
            DENYOOM,
            3,
            Some(Docs::redisbloom(
                "Adds an item to a Cuckoo Filter",
                K_PLUS_I,
                "",
                true,
                KEY_ITEM,
            )),
        ),
        cf(
            "CF.ADDNX",
            write("cf.add"),
            addnx,
            DENYOOM,
            3,
            Some(Docs::redisbloom(
                "Adds an item to a Cuckoo Filter if the item did not exist previously.",
                K_PLUS_I,
                "This command is slower than CF.ADD because it first checks whether the item \
                 exists. Since CF.EXISTS can result in false positive, CF.ADDNX may not add an \
                 item because it is supposedly already exist, which may be wrong.",
                true,
                KEY_ITEM,
            )),
        ),
        cf(
            "CF.INSERT",
            write("cf.add"),
            insert,
            DENYOOM,
            -4,
            Some(Docs::redisbloom(
                "Adds one or more items to a Cuckoo Filter. A filter will be created if it \
                 does not exist",
                N_K_I,
                "",
                true,
                INSERT_ARGS,
            )),
        ),
        // RedisBloom registers CF.INSERTNX with CF.INSERT's key spec and arguments.
        cf(
            "CF.INSERTNX",
            write("cf.add"),
            insertnx,
            DENYOOM,
            -4,
            Some(Docs::redisbloom(
                "Adds one or more items to a Cuckoo Filter if the items did not exist \
                 previously. A filter will be created if it does not exist",
                N_K_I,
                "",
                true,
                INSERT_ARGS,
            )),
        ),
        cf(
            "CF.EXISTS",
            READ,
            exists,
            FAST,
            3,
            Some(Docs::redisbloom(
                "Checks whether one or more items exist in a Cuckoo Filter",
                K_SUB,
                "",
                false,
                KEY_ITEM,
            )),
        ),
        cf(
            "CF.MEXISTS",
            READ,
            mexists,
            FAST,
            -3,
            Some(Docs::redisbloom(
                "Checks whether one or more items exist in a Cuckoo Filter",
                "O(k * n), where k is the number of sub-filters and n is the number of items",
                "",
                false,
                KEY_ITEMS,
            )),
        ),
        cf(
            "CF.COUNT",
            READ,
            count,
            FAST,
            3,
            Some(Docs::redisbloom(
                "Return the number of times an item might be in a Cuckoo Filter",
                K_SUB,
                "",
                false,
                KEY_ITEM,
            )),
        ),
        cf(
            "CF.DEL",
            write("cf.del"),
            del,
            FAST,
            3,
            Some(Docs::redisbloom(
                "Deletes an item from a Cuckoo Filter",
                K_SUB,
                "",
                true,
                KEY_ITEM,
            )),
        ),
        cf(
            "CF.COMPACT",
            write("cf.compact"),
            compact,
            Flags::NONE,
            -1,
            None,
        ),
        cf(
            "CF.INFO",
            READ,
            info,
            FAST,
            2,
            Some(Docs::redisbloom(
                "Returns information about a Cuckoo Filter",
                "O(1)",
                "",
                false,
                KEY_ONLY,
            )),
        ),
        cf("CF.DEBUG", READ, debug, Flags::NONE, -1, None),
        // RedisBloom's key spec for SCANDUMP says RW although the command only reads.
        cf(
            "CF.SCANDUMP",
            READ,
            scandump,
            Flags::NONE,
            3,
            Some(Docs::redisbloom(
                "Begins an incremental save of the bloom filter",
                dump,
                "",
                true,
                KEY_ITER,
            )),
        ),
        cf(
            "CF.LOADCHUNK",
            write("cf.loadchunk"),
            loadchunk,
            DENYOOM,
            4,
            Some(Docs::redisbloom(
                "Restores a filter previously saved using SCANDUMP",
                dump,
                "This command overwrites the cuckoo filter stored under key. Make sure that \
                 the cuckoo filter is not changed between invocations.",
                true,
                KEY_ITER_DATA,
            )),
        ),
    ]
}

/// The cf-* configuration in force, with `capacity` for a new filter.
fn configured<H: Host + ?Sized>(ctx: &Ctx<H>, capacity: u64) -> CuckooParams {
    let c = ctx.config();
    CuckooParams {
        capacity,
        bucket_size: c.cf_bucket_size as u16,
        max_iterations: c.cf_max_iterations as u16,
        expansion: c.cf_expansion as u16,
    }
}

/// Creates a filter at `key` after the maxmemory check. The creation is logged as the
/// `CF.LOADCHUNK key 1 <header>` of the empty filter, which rebuilds exactly this shape on
/// replay whatever the configuration is then; the items that went in follow (see
/// [`add_items`]).
fn create<H: Host + ?Sized>(ctx: &mut Ctx<H>, key: &[u8], p: CuckooParams) -> Result<(), Reply> {
    let p = ctx.admit(p)?;
    let filter = CuckooChain::create(p).ok_or_else(|| Reply::error(crate::ERR_OOM))?;
    ctx.propagate_as(vec![vec![
        b"CF.LOADCHUNK".to_vec(),
        key.to_vec(),
        b"1".to_vec(),
        filter.dump_header(),
    ]]);
    ctx.create(key, filter.into_value());
    Ok(())
}

/// How one item went in.
enum Added {
    Yes,
    AlreadyPresent,
    NoRoom(InsertError),
}

/// What to do when the key is missing.
#[derive(Clone, Copy)]
enum Missing {
    /// `ERR not found`.
    Refuse,
    /// Create a filter of `cf-initial-size` (read only then).
    CreateDefault,
    /// Create a filter of this capacity.
    Create(u64),
}

/// Adds `items` (unique-only with `nx`), creating the filter as `missing` says if there is
/// none, and hands each item's outcome to `each`. Stops at an out-of-memory error. The memory
/// budget is read only if an item needs a new sub-filter. The write propagates the items that
/// went in or were there already, not those that found no room: a refused item's kicks are
/// undone, so the filter is as if it had never been tried, and replaying the rest rebuilds it.
fn add_items<H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    args: &Args,
    items: &Args,
    nx: bool,
    missing: Missing,
    mut each: impl FnMut(Added),
) -> Result<(), Reply> {
    let key = args[1];
    let max_filters = match ctx.replaying() {
        false => ctx.config().cf_max_expansions,
        true => u64::MAX,
    };
    match ctx.typed::<CuckooChain>(key)? {
        // `cf-max-expansions` is judged once, when the command starts: a filter already at
        // the limit refuses even items that would fit, and one below it may grow past the
        // limit while this command's items go in (RedisBloom's behaviour). Replayed items went
        // in on the master: a replica or a reload with another setting takes them too.
        Some(f) if f.filters() as u64 >= max_filters => {
            return Err(Reply::error(InsertError::MaxExpansions.message()))
        }
        Some(_) => {}
        None => {
            let capacity = match missing {
                Missing::Refuse => return Err(Reply::error(ERR_NOT_FOUND)),
                Missing::CreateDefault => ctx.config().cf_initial_size,
                Missing::Create(capacity) => capacity,
            };
            create(ctx, key, configured(ctx, capacity))?;
        }
    }
    let mut added = 0;
    let result = update_batch(
        ctx,
        key,
        items,
        |filter: &mut CuckooChain, items, allowance, inserted| {
            filter.insert_many(items, nx, allowance, inserted)
        },
        |e| *e == InsertError::OutOfMemory,
        |inserted| {
            let went_in = inserted.is_ok();
            each(match inserted {
                Ok(true) => {
                    added += 1;
                    Added::Yes
                }
                Ok(false) => Added::AlreadyPresent,
                Err(e) => Added::NoRoom(e),
            });
            went_in
        },
    );
    ctx.changed(added);
    result.map_err(|e| Reply::error(e.message()))
}

/// CF.RESERVE `key capacity [BUCKETSIZE b] [MAXITERATIONS m] [EXPANSION e]`: an odd argument
/// count; the capacity must be an integer; then each option is parsed and range-checked in
/// the order MAXITERATIONS, BUCKETSIZE, EXPANSION; then the capacity's range (which depends on
/// the bucket size); then the key.
pub(crate) fn reserve(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if args.len().is_multiple_of(2) {
        return wrong_arity("cf.reserve");
    }
    let Some(capacity) = parse_i64(args[2]) else {
        return Reply::error("Bad capacity");
    };
    // Options are matched by name anywhere after the capacity (as BF.RESERVE's are).
    let options = &args[3..];
    let option = |name: &'static str, default: u64, min: u64, max: u64| -> Result<u64, Reply> {
        let Some(at) = options.iter().position(|a| is(a, name)) else {
            return Ok(default);
        };
        // RedisBloom reads past its arguments when the option is last (and crashes); we
        // answer as for an unparsable value.
        let value = options
            .get(at + 1)
            .and_then(|v| parse_i64(v))
            .ok_or_else(|| Reply::error(format!("Couldn't parse {name}")))?;
        match u64::try_from(value) {
            Ok(v) if (min..=max).contains(&v) => Ok(v),
            _ => Err(Reply::error(format!(
                "{name}: value must be in the range [{min}, {max}]"
            ))),
        }
    };
    let c = ctx.config().clone();
    let parsed = option("MAXITERATIONS", c.cf_max_iterations, 1, MAX_ITERATIONS).and_then(|m| {
        let b = option("BUCKETSIZE", c.cf_bucket_size, 1, MAX_BUCKET_SIZE)?;
        let e = option("EXPANSION", c.cf_expansion, 0, MAX_EXPANSION)?;
        Ok((m, b, e))
    });
    let (max_iterations, bucket_size, expansion) = match parsed {
        Ok(values) => values,
        Err(reply) => return reply,
    };
    let capacity = match u64::try_from(capacity) {
        Ok(c) if c >= 2 * bucket_size && c <= MAX_CAPACITY => c,
        _ => return Reply::error("Capacity must be in the range [2 * BUCKETSIZE, 1073741824]"),
    };
    let key = args[1];
    match ctx.typed::<CuckooChain>(key) {
        Err(reply) => return reply,
        Ok(Some(_)) => return Reply::error("ERR item exists"),
        Ok(None) => {}
    }
    let params = CuckooParams {
        capacity,
        bucket_size: bucket_size as u16,
        max_iterations: max_iterations as u16,
        expansion: expansion as u16,
    };
    match create(ctx, key, params) {
        Ok(()) => Reply::ok(),
        Err(reply) => reply,
    }
}

/// CF.ADD / CF.ADDNX: one item, the filter created with `cf-initial-size` if missing.
fn add_one<H: Host + ?Sized>(ctx: &mut Ctx<H>, args: &Args, nx: bool) -> Reply {
    let mut outcome = None;
    let each = |added| outcome = Some(added);
    match add_items(ctx, args, &args[2..], nx, Missing::CreateDefault, each) {
        Ok(()) => match outcome.expect("one item") {
            Added::Yes => Reply::Bool(true),
            Added::AlreadyPresent => Reply::Bool(false),
            Added::NoRoom(e) => Reply::error(e.message()),
        },
        Err(reply) => reply,
    }
}

pub(crate) fn add(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    add_one(ctx, args, false)
}

pub(crate) fn addnx(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    add_one(ctx, args, true)
}

/// CF.INSERT / CF.INSERTNX `key [CAPACITY c] [NOCREATE] ITEMS item...`: options are recognised
/// by their first letter (RedisBloom quirk). Replies per item: INSERT 1 / -1 (no room),
/// INSERTNX 1 / 0 (present) / -1; INSERT's 1 is a boolean under RESP3, INSERTNX's are integers.
fn insert_many<H: Host + ?Sized>(ctx: &mut Ctx<H>, args: &Args, nx: bool, name: &str) -> Reply {
    let mut capacity = ctx.config().cf_initial_size;
    let min_capacity = 2 * ctx.config().cf_bucket_size;
    let mut nocreate = false;
    let mut capacity_given = false;
    let mut items_at = None;
    let mut i = 2;
    while i < args.len() {
        match args[i].first().map(u8::to_ascii_lowercase) {
            Some(b'c') => {
                capacity_given = true;
                let Some(value) = args.get(i + 1) else {
                    return wrong_arity(name);
                };
                // Range-checked here, even when the key exists or NOCREATE follows.
                let Some(c) = parse_i64(value) else {
                    return Reply::error("Bad capacity");
                };
                match u64::try_from(c) {
                    Ok(c) if (min_capacity..=MAX_CAPACITY).contains(&c) => capacity = c,
                    _ => {
                        return Reply::error(
                            "Capacity must be in the range [cf-bucket-size * 2, 1073741824]",
                        )
                    }
                }
                i += 2;
            }
            Some(b'n') => {
                nocreate = true;
                i += 1;
            }
            Some(b'i') => {
                items_at = Some(i + 1);
                break;
            }
            _ => return Reply::error("Unknown argument received"),
        }
    }
    let Some(items_at) = items_at.filter(|&at| at < args.len()) else {
        return wrong_arity(name);
    };
    let missing = if nocreate {
        Missing::Refuse
    } else {
        Missing::Create(capacity)
    };
    let items = &args[items_at..];
    if capacity_given {
        // CAPACITY is range-checked against the settings even when the key exists: replayed
        // without it, the items cannot be refused by a replica's other `cf-bucket-size`.
        ctx.propagate_items_after(vec![
            name.to_uppercase().into_bytes(),
            args[1].to_vec(),
            b"NOCREATE".to_vec(),
            b"ITEMS".to_vec(),
        ]);
    }
    let mut replies = Vec::with_capacity(items.len());
    let each = |added| {
        replies.push(match added {
            Added::Yes if nx => Reply::Int(1),
            Added::Yes => Reply::Bool(true),
            Added::AlreadyPresent => Reply::Int(0),
            // The per-key cap answers its error in the item's place, as BF.INSERT does.
            Added::NoRoom(InsertError::OverCap) => Reply::error(crate::ERR_CAP),
            Added::NoRoom(_) => Reply::Int(-1),
        })
    };
    match add_items(ctx, args, items, nx, missing, each) {
        Ok(()) => Reply::Array(replies),
        Err(reply) => reply,
    }
}

pub(crate) fn insert(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    insert_many(ctx, args, false, "cf.insert")
}

pub(crate) fn insertnx(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    insert_many(ctx, args, true, "cf.insertnx")
}

/// The cuckoo filter at `key` for DEL / COMPACT, which answer `missing` for a missing key and
/// for a key of any other type alike (no WRONGTYPE).
fn cuckoo_only<H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    key: &[u8],
    missing: &'static str,
) -> Result<(), Reply> {
    match ctx.typed::<CuckooChain>(key) {
        Ok(Some(_)) => Ok(()),
        _ => Err(Reply::error(missing)),
    }
}

/// COUNT answers 0 for a missing key and for a key of another type.
fn probe<T: Default, H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    key: &[u8],
    f: impl FnOnce(&CuckooChain) -> T,
) -> T {
    match ctx.typed::<CuckooChain>(key) {
        Ok(Some(filter)) => f(filter),
        _ => T::default(),
    }
}

/// CF.EXISTS (0 for a missing key or another type).
pub(crate) fn exists(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    super::generic::exists(ctx, args, CuckooChain::contains)
}

/// CF.MEXISTS.
pub(crate) fn mexists(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    super::generic::mexists(ctx, args, |f: &CuckooChain, items| f.contains_many(items))
}

pub(crate) fn count(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    Reply::Int(probe(ctx, args[1], |f| f.count(args[2])) as i64)
}

pub(crate) fn del(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if let Err(reply) = cuckoo_only(ctx, args[1], "Not found") {
        return reply;
    }
    let deleted = ctx.update(args[1], |f: &mut CuckooChain| f.delete(args[2]));
    if deleted {
        ctx.changed(1);
    }
    Reply::Bool(deleted)
}

pub(crate) fn compact(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if args.len() != 2 {
        return wrong_arity("cf.compact");
    }
    if let Err(reply) = cuckoo_only(ctx, args[1], "Cuckoo filter was not found") {
        return reply;
    }
    ctx.update(args[1], |f: &mut CuckooChain| f.compact(true));
    ctx.changed(1);
    Reply::ok()
}

pub(crate) fn info(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let f = match ctx.existing::<CuckooChain>(args[1], ERR_NOT_FOUND) {
        Ok(f) => f,
        Err(reply) => return reply,
    };
    let fields = [
        ("Size", f.size_bytes()),
        ("Number of buckets", f.buckets()),
        ("Number of filters", f.filters() as u64),
        ("Number of items inserted", f.items()),
        ("Number of items deleted", f.deletes()),
        ("Bucket size", u64::from(f.bucket_size())),
        ("Expansion rate", u64::from(f.expansion())),
        ("Max iterations", u64::from(f.max_iterations())),
    ];
    Reply::Map(
        fields
            .into_iter()
            .map(|(label, value)| (Reply::Simple(label.into()), Reply::Int(value as i64)))
            .collect(),
    )
}

pub(crate) fn debug(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    if args.len() != 2 {
        return wrong_arity("cf.debug");
    }
    match ctx.existing::<CuckooChain>(args[1], ERR_NOT_FOUND) {
        Ok(f) => Reply::bulk(f.debug_line()),
        Err(reply) => reply,
    }
}

/// SCANDUMP: `[1, header]` at 0, then chunks; `[0, nil]` when done — and at once for a filter
/// holding no items (RedisBloom quirk: an empty filter has nothing to dump).
pub(crate) fn scandump(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let Some(iter) = parse_i64(args[2]).filter(|&i| i >= 0) else {
        return Reply::error("Invalid position");
    };
    let filter = match ctx.existing::<CuckooChain>(args[1], ERR_NOT_FOUND) {
        Ok(filter) => filter,
        Err(reply) => return reply,
    };
    let done = Reply::Array(vec![Reply::Int(0), Reply::Nil]);
    if filter.items() == 0 {
        return done;
    }
    if iter == 0 {
        return Reply::Array(vec![Reply::Int(1), Reply::Bulk(filter.dump_header())]);
    }
    match filter.dump_chunk(iter) {
        Some((next, chunk)) => Reply::Array(vec![Reply::Int(next), Reply::Bulk(chunk)]),
        None => done,
    }
}

/// LOADCHUNK: iterator ≤ 0 (or not a number) is `Invalid position`; iterator 1 creates the
/// filter from the 38-byte header and refuses an existing filter (`ERR item exists`; another
/// type is WRONGTYPE); later iterators write chunks into an existing filter.
pub(crate) fn loadchunk(ctx: &mut Ctx<dyn Host + '_>, args: &Args) -> Reply {
    let Some(iter) = parse_i64(args[2]).filter(|&i| i > 0) else {
        return Reply::error("Invalid position");
    };
    if iter == 1 {
        match ctx.typed::<CuckooChain>(args[1]) {
            Ok(None) => {}
            Ok(Some(_)) => return Reply::error("ERR item exists"),
            Err(wrongtype) => return wrongtype,
        }
    }
    load_chunk::<CuckooChain, _>(ctx, args, "Invalid position")
}

#[cfg(test)]
mod tests {
    use crate::commands::testing::*;
    use crate::reply::Reply;

    fn ints(values: &[i64]) -> Reply {
        Reply::Array(values.iter().map(|&v| Reply::Int(v)).collect())
    }

    fn bools(values: &[bool]) -> Reply {
        Reply::Array(values.iter().map(|&v| Reply::Bool(v)).collect())
    }

    #[test]
    fn reserve_validates_like_redisbloom() {
        let mut h = Harness::new();
        assert_eq!(h.run("CF.RESERVE k x"), err("Bad capacity"));
        assert_eq!(
            h.run("CF.RESERVE k 0"),
            err("Capacity must be in the range [2 * BUCKETSIZE, 1073741824]")
        );
        assert_eq!(
            h.run("CF.RESERVE k 3"),
            err("Capacity must be in the range [2 * BUCKETSIZE, 1073741824]")
        );
        assert_eq!(
            h.run("CF.RESERVE k 2000000000"),
            err("Capacity must be in the range [2 * BUCKETSIZE, 1073741824]")
        );
        assert_eq!(
            h.run("CF.RESERVE k 100 BUCKETSIZE x"),
            err("Couldn't parse BUCKETSIZE")
        );
        assert_eq!(
            h.run("CF.RESERVE k 100 FOO MAXITERATIONS"),
            err("Couldn't parse MAXITERATIONS")
        );
        assert_eq!(
            h.run("CF.RESERVE k 100 BUCKETSIZE 256"),
            err("BUCKETSIZE: value must be in the range [1, 255]")
        );
        assert_eq!(
            h.run("CF.RESERVE k 100 MAXITERATIONS 0"),
            err("MAXITERATIONS: value must be in the range [1, 65535]")
        );
        assert_eq!(
            h.run("CF.RESERVE k 100 EXPANSION 32769"),
            err("EXPANSION: value must be in the range [0, 32768]")
        );
        assert_eq!(
            h.run("CF.RESERVE k 10 BUCKETSIZE 6"),
            err("Capacity must be in the range [2 * BUCKETSIZE, 1073741824]")
        );
        assert_eq!(h.run("CF.RESERVE k 1000"), Reply::ok());
        assert_eq!(h.run("CF.RESERVE k 1000"), err("ERR item exists"));
        assert_eq!(
            h.run("CF.RESERVE"),
            err("ERR wrong number of arguments for 'cf.reserve' command")
        );
    }

    #[test]
    fn info_fields_sizes_and_debug() {
        let mut h = Harness::new();
        h.run("CF.RESERVE k 1000 EXPANSION 3 MAXITERATIONS 50");
        h.run("CF.ADD k a");
        let Reply::Map(pairs) = h.run("CF.INFO k") else {
            panic!()
        };
        let got: Vec<(Reply, Reply)> = pairs;
        let want = [
            ("Size", 1080),
            ("Number of buckets", 512),
            ("Number of filters", 1),
            ("Number of items inserted", 1),
            ("Number of items deleted", 0),
            ("Bucket size", 2),
            ("Expansion rate", 4),
            ("Max iterations", 50),
        ];
        let want: Vec<(Reply, Reply)> = want
            .iter()
            .map(|&(k, v)| (Reply::Simple(k.into()), Reply::Int(v)))
            .collect();
        assert_eq!(got, want);
        assert_eq!(
            h.run("CF.DEBUG k"),
            Reply::bulk(
                "bktsize:2 buckets:512 items:1 deletes:0 filters:1 max_iterations:50 expansion:4"
            )
        );
        assert_eq!(h.run("CF.INFO nope"), err("ERR not found"));
    }

    #[test]
    fn add_exists_count_delete() {
        let mut h = Harness::new();
        assert_eq!(h.run("CF.ADD k a"), Reply::Bool(true));
        assert_eq!(h.run("CF.ADD k a"), Reply::Bool(true));
        assert_eq!(h.run("CF.ADDNX k a"), Reply::Bool(false));
        assert_eq!(h.run("CF.ADDNX k b"), Reply::Bool(true));
        assert_eq!(h.run("CF.COUNT k a"), Reply::Int(2));
        assert_eq!(h.run("CF.EXISTS k a"), Reply::Bool(true));
        assert_eq!(h.run("CF.MEXISTS k a b zz"), bools(&[true, true, false]));
        assert_eq!(h.run("CF.DEL k a"), Reply::Bool(true));
        assert_eq!(h.run("CF.COUNT k a"), Reply::Int(1));
        assert_eq!(h.run("CF.DEL k zz"), Reply::Bool(false));
        assert_eq!(h.run("CF.DEL nope a"), err("Not found"));
        assert_eq!(h.run("CF.COMPACT nope"), err("Cuckoo filter was not found"));
        assert_eq!(h.run("CF.COMPACT k"), Reply::ok());
        // Auto-created with cf-initial-size 1024 (512 buckets).
        let Reply::Map(info) = h.run("CF.INFO k") else {
            panic!()
        };
        assert_eq!(info[1].1, Reply::Int(512));
        assert_eq!(info[3].1, Reply::Int(2));
        assert_eq!(info[4].1, Reply::Int(0), "compaction resets deletes");
    }

    #[test]
    fn reads_on_missing_or_wrong_type_answer_zero_writes_refuse() {
        let mut h = Harness::new();
        h.run("BF.ADD bloom a");
        h.run("CF.ADD cuckoo a");
        h.foreign.push(b"string".to_vec());
        for key in ["missing", "bloom", "string"] {
            assert_eq!(h.run(&format!("CF.EXISTS {key} a")), Reply::Bool(false));
            assert_eq!(h.run(&format!("CF.COUNT {key} a")), Reply::Int(0));
            assert_eq!(h.run(&format!("CF.MEXISTS {key} a")), bools(&[false]));
        }
        let wrongtype = err(crate::ERR_WRONGTYPE);
        assert_eq!(h.run("CF.ADD bloom a"), wrongtype);
        assert_eq!(h.run("CF.INFO bloom"), wrongtype);
        assert_eq!(h.run("CF.ADD string a"), wrongtype);
        assert_eq!(h.run("BF.ADD cuckoo a"), wrongtype);
        assert_eq!(h.run("BF.EXISTS cuckoo a"), Reply::Bool(false));
        assert_eq!(h.keys[&b"cuckoo"[..]].type_name(), "MBbloomCF");
    }

    #[test]
    fn insert_options_and_replies() {
        let mut h = Harness::new();
        assert_eq!(h.run("CF.INSERT k NOCREATE ITEMS a"), err("ERR not found"));
        assert_eq!(h.run("CF.INSERT k CAPACITY x ITEMS a"), err("Bad capacity"));
        assert_eq!(
            h.run("CF.INSERT k FOO ITEMS a"),
            err("Unknown argument received")
        );
        assert_eq!(
            h.run("CF.INSERT k ITEMS"),
            err("ERR wrong number of arguments for 'cf.insert' command")
        );
        assert_eq!(h.run("CF.INSERT k cap 100 ITEMS a b"), bools(&[true, true]));
        assert_eq!(h.run("CF.INSERTNX k i a c"), ints(&[0, 1]));
        // One batch, in order: a duplicate inside it is already present the second time.
        assert_eq!(h.run("CF.INSERTNX k ITEMS d d e d"), ints(&[1, 0, 1, 0]));
        assert_eq!(
            h.run("CF.MEXISTS k a d zz e"),
            bools(&[true, true, false, true])
        );
        let Reply::Map(info) = h.run("CF.INFO k") else {
            panic!()
        };
        assert_eq!(info[1].1, Reply::Int(64));
        // A non-growing filter that is full answers -1 per item and "Filter is full" for ADD.
        h.run("CF.RESERVE full 4 BUCKETSIZE 1 EXPANSION 0");
        let items: Vec<String> = (0..40).map(|i| format!("x{i}")).collect();
        let Reply::Array(replies) = h.run(&format!("CF.INSERT full ITEMS {}", items.join(" ")))
        else {
            panic!()
        };
        assert!(replies.contains(&Reply::Int(-1)));
        let full = (0..40).map(|i| h.run(&format!("CF.ADD full y{i}")));
        assert!(full.into_iter().any(|r| r == err("Filter is full")));
    }

    #[test]
    fn max_expansions_reached() {
        let mut h = Harness::new();
        h.config.cf_max_expansions = 2;
        h.run("CF.RESERVE k 4 BUCKETSIZE 1 MAXITERATIONS 1");
        let replies: Vec<Reply> = (0..100).map(|i| h.run(&format!("CF.ADD k {i}"))).collect();
        assert!(replies.contains(&err("Maximum expansions reached")));
        let Reply::Map(info) = h.run("CF.INFO k") else {
            panic!()
        };
        assert_eq!(info[2].1, Reply::Int(2));
    }

    #[test]
    fn resp3_shapes() {
        let mut h = Harness::new();
        h.proto = 3;
        assert_eq!(h.run("CF.ADD k a"), Reply::Bool(true));
        assert_eq!(h.run("CF.EXISTS k a"), Reply::Bool(true));
        assert_eq!(h.run("CF.COUNT k a"), Reply::Int(1));
        assert_eq!(h.run("CF.INSERTNX k ITEMS a"), ints(&[0]));
        assert_eq!(h.run("CF.INSERT k ITEMS b"), bools(&[true]));
        let Reply::Map(info) = h.run("CF.INFO k") else {
            panic!()
        };
        assert_eq!(info[0], (Reply::Simple("Size".into()), Reply::Int(1080)));
    }

    /// SCANDUMP → LOADCHUNK rebuilds the same bytes; an empty filter dumps nothing; forged
    /// headers and stray chunks are refused with RedisBloom's words.
    #[test]
    fn scandump_loadchunk_round_trip_and_refusals() {
        let mut h = Harness::new();
        h.run("CF.RESERVE src 64 EXPANSION 2");
        assert_eq!(
            h.run("CF.SCANDUMP src 0"),
            Reply::Array(vec![Reply::Int(0), Reply::Nil])
        );
        for i in 0..300 {
            h.run(&format!("CF.ADD src i{i}"));
        }
        let chunks = h.scandump("CF", "src");
        assert_eq!(chunks[0].1.len(), 38);
        assert!(chunks.len() > 2, "one chunk per sub-filter");
        h.loadchunks("CF", "dst", &chunks);
        assert_eq!(h.run("CF.DEBUG dst"), h.run("CF.DEBUG src"));
        assert!((0..300).all(|i| h.run(&format!("CF.EXISTS dst i{i}")) == Reply::Bool(true)));
        let load = |h: &mut Harness, key: &str, iter: &str, data: Vec<u8>| {
            h.run_args(&[
                b"CF.LOADCHUNK".to_vec(),
                key.as_bytes().to_vec(),
                iter.as_bytes().to_vec(),
                data,
            ])
        };
        let mut forged = chunks[0].1.clone();
        forged[8] = 3; // bucket count not a power of two
        assert_eq!(
            load(&mut h, "x", "1", forged),
            err("Couldn't create filter!")
        );
        let mut huge = chunks[0].1.clone();
        huge[8..16].copy_from_slice(&(1u64 << 30).to_le_bytes());
        huge[0..8].copy_from_slice(&0u64.to_le_bytes());
        // More buckets than CF.RESERVE can create at this bucket size: refused as forged.
        assert_eq!(
            load(&mut h, "x", "1", huge.clone()),
            err("Couldn't create filter!")
        );
        huge[8..16].copy_from_slice(&(1u64 << 20).to_le_bytes());
        h.memory_limit = 1 << 20;
        assert_eq!(load(&mut h, "x", "1", huge), err(crate::ERR_OOM));
        h.memory_limit = 0;
        assert_eq!(load(&mut h, "x", "1", vec![0; 37]), err("Invalid header"));
        assert_eq!(load(&mut h, "x", "5", vec![0; 4]), err("ERR not found"));
        assert_eq!(load(&mut h, "x", "0", vec![0; 4]), err("Invalid position"));
        assert_eq!(
            load(&mut h, "dst", "999999", vec![0; 4]),
            err("Couldn't load chunk!")
        );
        assert_eq!(
            load(&mut h, "dst", "x", vec![0; 4]),
            err("Invalid position")
        );
        assert_eq!(h.run("CF.SCANDUMP dst -1"), err("Invalid position"));
    }
}
