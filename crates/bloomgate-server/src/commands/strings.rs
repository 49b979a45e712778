//! Redis strings, the server's one native value type (`keyspace::Data::String`): SET (NX/XX,
//! GET, EX/PX/EXAT/PXAT/KEEPTTL), GET, MGET, MSET, SETNX, STRLEN, APPEND, GETDEL and the
//! INCR/DECR family, with Redis 7's replies, errors, arity, flags and ACL categories. They exist
//! so a key can hold "another type": every dialect command on a string answers WRONGTYPE (the
//! host tells the dialect so, as Redis tells a module), and a string command on a filter too.
//!
//! Every write that stores bytes admits them against the memory budget first (Redis' OOM error
//! when `maxmemory` would be exceeded); a SET with a relative expiry is logged with its absolute
//! one (`PXAT`), so a replay at any later time rebuilds the same key or, once expired, nothing.

use bloomgate_dialect::budget::Buffer;
use bloomgate_dialect::commands::flags::*;
use bloomgate_dialect::commands::CommandInfo;

use super::host::{
    command, is, parse_i64, Args, Ctx, ServerCommand, ERR_NOT_INTEGER, ERR_SYNTAX, ERR_WRONGTYPE,
};
use crate::keyspace::Data;
use crate::pubsub::Events;
use crate::resp::Reply;

/// Redis' largest string (`proto-max-bulk-len`'s default).
const MAX_STRING: usize = 512 * 1024 * 1024;

/// The string family, with Redis' flags, key positions and ACL categories.
pub fn commands() -> Vec<ServerCommand> {
    const ONE: (i32, i32) = (1, 1);
    let string =
        |name, arity, flags, keys, handler| command(name, arity, flags, keys, "string", handler);
    vec![
        string("SET", -3, WRITE | DENYOOM, ONE, set),
        string("GET", 2, READONLY | FAST, ONE, get),
        string("MGET", -2, READONLY | FAST, (1, -1), mget),
        // MSET's keys are every other argument: step 2.
        CommandInfo {
            step: 2,
            ..string("MSET", -3, WRITE | DENYOOM, (1, -1), mset)
        },
        string("SETNX", 3, WRITE | DENYOOM | FAST, ONE, setnx),
        string("STRLEN", 2, READONLY | FAST, ONE, strlen),
        string("APPEND", 3, WRITE | DENYOOM | FAST, ONE, append),
        string("GETDEL", 2, WRITE | FAST, ONE, getdel),
        string("INCR", 2, WRITE | DENYOOM | FAST, ONE, incr),
        string("DECR", 2, WRITE | DENYOOM | FAST, ONE, incr),
        string("INCRBY", 3, WRITE | DENYOOM | FAST, ONE, incr),
        string("DECRBY", 3, WRITE | DENYOOM | FAST, ONE, incr),
    ]
}

/// The string at `key`: `Ok(None)` if missing, WRONGTYPE if the key holds another type.
fn string<'a>(ctx: &'a Ctx, key: &[u8]) -> Result<Option<&'a [u8]>, Reply> {
    match ctx.store.db.get(key, ctx.now_ms).map(|e| &e.data) {
        None => Ok(None),
        Some(Data::String(s)) => Ok(Some(s)),
        Some(Data::Dialect(_)) => Err(Reply::error(ERR_WRONGTYPE)),
    }
}

/// Admits `bytes` new bytes against the memory budget, or Redis' OOM error.
fn admit(ctx: &mut Ctx, bytes: usize) -> Result<(), Reply> {
    let admitted = ctx.admit_uncapped(Buffer(bytes as u64)).map(|_| ());
    if admitted.is_err() {
        ctx.store.stats.rejected_oom += 1;
    }
    admitted
}

/// Stores `value` at `key` with `expires_at`, replacing any value of any type; signals `new`
/// for a key that did not exist, then the string event (`set`, `append`, `incrby`: the
/// caller's command).
fn store(ctx: &mut Ctx, key: &[u8], value: &[u8], expires_at: Option<i64>) {
    let now = ctx.now_ms;
    if ctx.store.db.get(key, now).is_none() {
        ctx.event(Events::NEW, "new", key);
    }
    ctx.db()
        .insert(key.to_vec(), Data::String(value.to_vec()), expires_at);
}

fn invalid_expire() -> Reply {
    Reply::error("ERR invalid expire time in 'set' command")
}

/// SET's options as Redis parses them: every option once, NX/XX and the expiry forms exclusive.
#[derive(Default)]
struct SetOptions<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    /// The expiry argument, its unit (milliseconds per unit), whether it is absolute, and
    /// which form (EX, PX, EXAT, PXAT) gave it.
    expire: Option<(&'a [u8], i64, bool, usize)>,
}

fn set_options<'a>(args: &Args<'a>) -> Result<SetOptions<'a>, Reply> {
    let mut o = SetOptions::default();
    let mut j = 3;
    while j < args.len() {
        let arg = args[j];
        let next = args.get(j + 1).copied();
        // An expiry form may repeat (the last wins) but not meet another one or KEEPTTL.
        let form = ["EX", "PX", "EXAT", "PXAT"]
            .into_iter()
            .position(|f| is(arg, f));
        let other_form = |i: usize| o.keepttl || o.expire.is_some_and(|e| e.3 != i);
        if is(arg, "NX") && !o.xx {
            o.nx = true;
        } else if is(arg, "XX") && !o.nx {
            o.xx = true;
        } else if is(arg, "GET") {
            o.get = true;
        } else if is(arg, "KEEPTTL") && o.expire.is_none() {
            o.keepttl = true;
        } else if let (Some(i), Some(value)) = (form.filter(|&i| !other_form(i)), next) {
            o.expire = Some((value, [1000, 1, 1000, 1][i], i >= 2, i));
            j += 1;
        } else {
            return Err(Reply::error(ERR_SYNTAX));
        }
        j += 1;
    }
    Ok(o)
}

/// The absolute expiry (Unix milliseconds) of SET's expiry argument, with Redis' checks.
fn expiry(now: i64, (arg, unit, absolute, _): (&[u8], i64, bool, usize)) -> Result<i64, Reply> {
    let n = parse_i64(arg).ok_or_else(|| Reply::error(ERR_NOT_INTEGER))?;
    if n <= 0 || (unit == 1000 && n > i64::MAX / 1000) {
        return Err(invalid_expire());
    }
    let ms = n * unit;
    if absolute {
        Ok(ms)
    } else {
        ms.checked_add(now).ok_or_else(invalid_expire)
    }
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`.
fn set(ctx: &mut Ctx, args: &Args) -> Reply {
    let (key, value, now) = (args[1], args[2], ctx.now_ms);
    let o = match set_options(args) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let expires_at = match o.expire.map(|e| expiry(now, e)).transpose() {
        Ok(at) => at,
        Err(e) => return e,
    };
    let old = if o.get {
        match string(ctx, key) {
            Ok(old) => Some(old.map(<[u8]>::to_vec)),
            Err(e) => return e,
        }
    } else {
        None
    };
    let found = ctx.store.db.get(key, now);
    let kept = found.and_then(|e| e.expires_at()).filter(|_| o.keepttl);
    let reply = |old: Option<Option<Vec<u8>>>| match old {
        Some(Some(s)) => Reply::bulk(s),
        Some(None) => Reply::Nil,
        None => Reply::ok(),
    };
    if (o.nx && found.is_some()) || (o.xx && found.is_none()) {
        return match old {
            Some(old) => reply(Some(old)),
            None => Reply::Nil,
        };
    }
    if let Err(oom) = admit(ctx, key.len() + value.len()) {
        return oom;
    }
    let expires_at = expires_at.or(kept);
    ctx.changed(1);
    if expires_at.is_some_and(|at| at <= now) {
        // Already expired: whatever was there is gone, and nothing is created.
        ctx.db().remove(key, now);
        ctx.propagate_as(vec![vec![b"DEL".to_vec(), key.to_vec()]]);
        return reply(old);
    }
    store(ctx, key, value, expires_at);
    ctx.event(Events::STRING, "set", key);
    let mut logged = vec![b"SET".to_vec(), key.to_vec(), value.to_vec()];
    if let Some(at) = expires_at {
        logged.extend([b"PXAT".to_vec(), at.to_string().into_bytes()]);
    }
    ctx.propagate_as(vec![logged]);
    reply(old)
}

fn get(ctx: &mut Ctx, args: &Args) -> Reply {
    match string(ctx, args[1]) {
        Ok(Some(s)) => Reply::bulk(s.to_vec()),
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

/// MGET: a nil for each key that is missing or holds another type.
fn mget(ctx: &mut Ctx, args: &Args) -> Reply {
    Reply::Array(
        args[1..]
            .iter()
            .map(|key| match string(ctx, key) {
                Ok(Some(s)) => Reply::bulk(s.to_vec()),
                _ => Reply::Nil,
            })
            .collect(),
    )
}

fn mset(ctx: &mut Ctx, args: &Args) -> Reply {
    if args.len().is_multiple_of(2) {
        return super::host::wrong_arity("mset");
    }
    let bytes = args[1..].iter().map(|a| a.len()).sum();
    if let Err(oom) = admit(ctx, bytes) {
        return oom;
    }
    for pair in args[1..].chunks_exact(2) {
        store(ctx, pair[0], pair[1], None);
        ctx.event(Events::STRING, "set", pair[0]);
    }
    ctx.changed((args.len() / 2) as u64);
    Reply::ok()
}

fn setnx(ctx: &mut Ctx, args: &Args) -> Reply {
    if ctx.store.db.get(args[1], ctx.now_ms).is_some() {
        return Reply::Int(0);
    }
    if let Err(oom) = admit(ctx, args[1].len() + args[2].len()) {
        return oom;
    }
    store(ctx, args[1], args[2], None);
    ctx.event(Events::STRING, "set", args[1]);
    ctx.changed(1);
    Reply::Int(1)
}

fn strlen(ctx: &mut Ctx, args: &Args) -> Reply {
    match string(ctx, args[1]) {
        Ok(s) => Reply::Int(s.map_or(0, <[u8]>::len) as i64),
        Err(e) => e,
    }
}

fn append(ctx: &mut Ctx, args: &Args) -> Reply {
    let (key, tail, now) = (args[1], args[2], ctx.now_ms);
    let (len, capacity) = match ctx.store.db.get(key, now).map(|e| &e.data) {
        None => {
            if let Err(oom) = admit(ctx, key.len() + tail.len()) {
                return oom;
            }
            store(ctx, key, tail, None);
            ctx.event(Events::STRING, "append", key);
            ctx.changed(1);
            return Reply::Int(tail.len() as i64);
        }
        Some(Data::String(s)) => (s.len(), s.capacity()),
        Some(Data::Dialect(_)) => return Reply::error(ERR_WRONGTYPE),
    };
    let total = len + tail.len();
    if total > MAX_STRING {
        return Reply::error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    }
    // A growing buffer at least doubles (amortized appends): admit what it may take.
    let growth = if total > capacity {
        total.max(capacity * 2) - capacity
    } else {
        0
    };
    if let Err(oom) = admit(ctx, growth) {
        return oom;
    }
    ctx.db().update(key, now, |data| {
        if let Data::String(s) = data {
            s.extend_from_slice(tail);
        }
    });
    ctx.event(Events::STRING, "append", key);
    ctx.changed(1);
    Reply::Int(total as i64)
}

fn getdel(ctx: &mut Ctx, args: &Args) -> Reply {
    let now = ctx.now_ms;
    match string(ctx, args[1]) {
        Ok(Some(s)) => {
            let s = s.to_vec();
            ctx.db().remove(args[1], now);
            ctx.event(Events::GENERIC, "del", args[1]);
            ctx.changed(1);
            Reply::bulk(s)
        }
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

/// INCR, DECR, INCRBY, DECRBY: the value read as Redis' strict 64-bit integer, the result
/// stored as its decimal form, the key's expiry kept.
fn incr(ctx: &mut Ctx, args: &Args) -> Reply {
    let name = args[0];
    let by = if args.len() == 3 {
        match parse_i64(args[2]) {
            Some(n) => n,
            None => return Reply::error(ERR_NOT_INTEGER),
        }
    } else {
        1
    };
    let by = if is(name, "DECR") || is(name, "DECRBY") {
        match by.checked_neg() {
            Some(n) => n,
            None => return Reply::error("ERR decrement would overflow"),
        }
    } else {
        by
    };
    let (key, now) = (args[1], ctx.now_ms);
    let current = match string(ctx, key) {
        Ok(None) => None,
        Ok(Some(s)) => match parse_i64(s) {
            Some(n) => Some(n),
            None => return Reply::error(ERR_NOT_INTEGER),
        },
        Err(e) => return e,
    };
    let Some(result) = current.unwrap_or(0).checked_add(by) else {
        return Reply::error("ERR increment or decrement would overflow");
    };
    let digits = result.to_string().into_bytes();
    if current.is_none() {
        if let Err(oom) = admit(ctx, key.len() + digits.len()) {
            return oom;
        }
        store(ctx, key, &digits, None);
        ctx.event(Events::STRING, "incrby", key);
    } else {
        ctx.db()
            .update(key, now, |data| *data = Data::String(digits));
    }
    ctx.changed(1);
    Reply::Int(result)
}
