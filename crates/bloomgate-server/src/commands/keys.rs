//! Generic keyspace commands (DEL, EXISTS, TYPE, KEYS, SCAN, RENAME, the expiry family,
//! FLUSHDB/FLUSHALL, DBSIZE, MEMORY USAGE) with Redis' replies and errors.

use bloomgate_dialect::codec::murmur::murmur64a;
use bloomgate_dialect::commands::flags::*;

use super::host::{
    command, is, parse_i64, text, Args, Ctx, ServerCommand, ERR_NOT_INTEGER, ERR_SYNTAX,
};
use crate::glob::{glob_match, matches_all};
use crate::pubsub::Events;
use crate::resp::Reply;

/// The keyspace family, with Redis' flags, key positions and ACL categories.
pub fn commands() -> Vec<ServerCommand> {
    const NONE: (i32, i32) = (0, 0);
    const ONE: (i32, i32) = (1, 1);
    const ALL: (i32, i32) = (1, -1);
    let keyspace =
        |name, arity, flags, keys, handler| command(name, arity, flags, keys, "keyspace", handler);
    vec![
        keyspace("DEL", -2, WRITE, ALL, del),
        keyspace("UNLINK", -2, WRITE | FAST, ALL, del),
        keyspace("EXISTS", -2, READONLY | FAST, ALL, exists),
        keyspace("TYPE", 2, READONLY | FAST, ONE, type_),
        command("KEYS", 2, READONLY, NONE, "keyspace dangerous", keys),
        keyspace("SCAN", -2, READONLY, NONE, scan),
        keyspace("RENAME", 3, WRITE, (1, 2), rename),
        keyspace("EXPIRE", -3, WRITE | FAST, ONE, expire),
        keyspace("PEXPIRE", -3, WRITE | FAST, ONE, expire),
        keyspace("EXPIREAT", -3, WRITE | FAST, ONE, expire),
        keyspace("PEXPIREAT", -3, WRITE | FAST, ONE, expire),
        keyspace("TTL", 2, READONLY | FAST, ONE, ttl),
        keyspace("PTTL", 2, READONLY | FAST, ONE, ttl),
        keyspace("PERSIST", 2, WRITE | FAST, ONE, persist),
        command("FLUSHDB", -1, WRITE, NONE, "keyspace dangerous", flush),
        command("FLUSHALL", -1, WRITE, NONE, "keyspace dangerous", flush),
        keyspace("DBSIZE", 1, READONLY | FAST, NONE, dbsize),
        keyspace("MEMORY", -2, READONLY, NONE, memory),
    ]
}

fn del(ctx: &mut Ctx, args: &Args) -> Reply {
    let now = ctx.now_ms;
    let mut removed = 0;
    for key in &args[1..] {
        if ctx.db().remove(key, now) {
            ctx.event(Events::GENERIC, "del", key);
            removed += 1;
        }
    }
    ctx.changed(removed);
    Reply::Int(removed as i64)
}

fn exists(ctx: &mut Ctx, args: &Args) -> Reply {
    let n = args[1..]
        .iter()
        .filter(|k| ctx.store.db.get(k, ctx.now_ms).is_some())
        .count();
    Reply::Int(n as i64)
}

fn type_(ctx: &mut Ctx, args: &Args) -> Reply {
    let name = ctx
        .store
        .db
        .get(args[1], ctx.now_ms)
        .map_or("none", |e| e.data.type_name());
    Reply::Simple(name.into())
}

fn keys(ctx: &mut Ctx, args: &Args) -> Reply {
    let pattern = &args[1];
    Reply::Array(
        ctx.store
            .db
            .iter_live(ctx.now_ms)
            .filter(|(k, _)| matches_all(pattern) || glob_match(pattern, k, false))
            .map(|(k, _)| Reply::bulk(k.to_vec()))
            .collect(),
    )
}

/// SCAN's cursor is a position in a fixed hash order of keys (MurmurHash64A with a constant
/// seed), so a full iteration returns every key present throughout it, across restarts too.
fn scan_order(key: &[u8]) -> u64 {
    murmur64a(key, 0x5ca9_5ca9_5ca9_5ca9)
}

fn scan(ctx: &mut Ctx, args: &Args) -> Reply {
    let Some(cursor) = text(args[1]).parse::<u64>().ok() else {
        return Reply::error("ERR invalid cursor");
    };
    let (mut pattern, mut count, mut type_filter) = (None, 10usize, None);
    let mut i = 2;
    while i < args.len() {
        let Some(value) = args.get(i + 1) else {
            return Reply::error(ERR_SYNTAX);
        };
        if is(args[i], "MATCH") {
            pattern = Some(*value);
        } else if is(args[i], "COUNT") {
            match parse_i64(value) {
                Some(n) if n >= 1 => count = n as usize,
                Some(_) => return Reply::error(ERR_SYNTAX),
                None => return Reply::error(ERR_NOT_INTEGER),
            }
        } else if is(args[i], "TYPE") {
            type_filter = Some(text(value));
        } else {
            return Reply::error(ERR_SYNTAX);
        }
        i += 2;
    }
    let mut candidates: Vec<(u64, &[u8], &str)> = ctx
        .store
        .db
        .iter_live(ctx.now_ms)
        .map(|(k, e)| (scan_order(k), k, e.data.type_name()))
        .filter(|(h, _, _)| *h >= cursor)
        .collect();
    candidates.sort_unstable_by_key(|(h, _, _)| *h);
    let next = candidates.get(count).map_or(0, |(h, _, _)| *h);
    let keys = candidates
        .iter()
        .take(count)
        .filter(|(_, k, _)| {
            pattern
                .as_ref()
                .is_none_or(|p| matches_all(p) || glob_match(p, k, false))
        })
        .filter(|(_, _, t)| {
            type_filter
                .as_ref()
                .is_none_or(|f| f.eq_ignore_ascii_case(t))
        })
        .map(|(_, k, _)| Reply::bulk(k.to_vec()))
        .collect();
    Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(keys)])
}

fn rename(ctx: &mut Ctx, args: &Args) -> Reply {
    let now = ctx.now_ms;
    if ctx.store.db.get(args[1], now).is_none() {
        return Reply::error("ERR no such key");
    }
    if args[1] != args[2] {
        ctx.db().rename(args[1], args[2], now);
        ctx.event(Events::GENERIC, "rename_from", args[1]);
        ctx.event(Events::GENERIC, "rename_to", args[2]);
        ctx.changed(1);
    }
    Reply::ok()
}

/// EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT with NX/XX/GT/LT. Logged as an absolute PEXPIREAT (or DEL
/// when the time is already past) so replay is independent of when it happens.
fn expire(ctx: &mut Ctx, args: &Args) -> Reply {
    let name = text(args[0]).to_lowercase();
    let (unit, absolute) = match name.as_str() {
        "expire" => (1000, false),
        "pexpire" => (1, false),
        "expireat" => (1000, true),
        _ => (1, true),
    };
    let Some(when) = parse_i64(args[2]) else {
        return Reply::error(ERR_NOT_INTEGER);
    };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &args[3..] {
        match text(opt).to_uppercase().as_str() {
            "NX" => nx = true,
            "XX" => xx = true,
            "GT" => gt = true,
            "LT" => lt = true,
            _ => return Reply::error(format!("ERR Unsupported option {}", text(opt))),
        }
    }
    if nx && (xx || gt || lt) {
        return Reply::error("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return Reply::error("ERR GT and LT options at the same time are not compatible");
    }
    let now = ctx.now_ms;
    let at = when.checked_mul(unit).and_then(|ms| {
        if absolute {
            Some(ms)
        } else {
            ms.checked_add(now)
        }
    });
    let Some(at) = at else {
        return Reply::error(format!("ERR invalid expire time in '{name}' command"));
    };
    let Some(entry) = ctx.store.db.get(args[1], now) else {
        return Reply::Int(0);
    };
    let current = entry.expires_at();
    let allowed = match current {
        _ if nx => current.is_none(),
        None if xx || gt => false,
        Some(cur) if gt => at > cur,
        Some(cur) if lt => at < cur,
        _ => true,
    };
    if !allowed {
        return Reply::Int(0);
    }
    if at <= now {
        ctx.db().remove(args[1], now);
        ctx.event(Events::GENERIC, "del", args[1]);
        ctx.propagate_as(vec![vec![b"DEL".to_vec(), args[1].to_vec()]]);
    } else {
        ctx.db().set_expiry(args[1], Some(at), now);
        ctx.event(Events::GENERIC, "expire", args[1]);
        ctx.propagate_as(vec![vec![
            b"PEXPIREAT".to_vec(),
            args[1].to_vec(),
            at.to_string().into_bytes(),
        ]]);
    }
    ctx.changed(1);
    Reply::Int(1)
}

fn ttl(ctx: &mut Ctx, args: &Args) -> Reply {
    let Some(entry) = ctx.store.db.get(args[1], ctx.now_ms) else {
        return Reply::Int(-2);
    };
    let Some(at) = entry.expires_at() else {
        return Reply::Int(-1);
    };
    let ms = (at - ctx.now_ms).max(0);
    if is(args[0], "TTL") {
        Reply::Int((ms + 500) / 1000)
    } else {
        Reply::Int(ms)
    }
}

fn persist(ctx: &mut Ctx, args: &Args) -> Reply {
    let now = ctx.now_ms;
    match ctx.store.db.get(args[1], now) {
        Some(entry) if entry.expires_at().is_some() => {
            ctx.db().set_expiry(args[1], None, now);
            ctx.event(Events::GENERIC, "persist", args[1]);
            ctx.changed(1);
            Reply::Int(1)
        }
        _ => Reply::Int(0),
    }
}

fn flush(ctx: &mut Ctx, args: &Args) -> Reply {
    match args.get(1) {
        None => {}
        Some(mode) if args.len() == 2 && (is(mode, "ASYNC") || is(mode, "SYNC")) => {}
        Some(_) => return Reply::error(ERR_SYNTAX),
    }
    let n = ctx.store.db.len() as u64;
    ctx.db().clear();
    ctx.changed(n.max(1));
    Reply::ok()
}

fn dbsize(ctx: &mut Ctx, _args: &Args) -> Reply {
    Reply::Int(ctx.store.db.len() as i64)
}

fn memory(ctx: &mut Ctx, args: &Args) -> Reply {
    if !is(args[1], "USAGE") {
        return Reply::error(format!(
            "ERR unknown subcommand '{}'. Try MEMORY HELP.",
            text(args[1])
        ));
    }
    if args.len() != 3 && !(args.len() == 5 && is(args[3], "SAMPLES")) {
        return Reply::error(if args.len() < 3 {
            "ERR wrong number of arguments for 'memory|usage' command"
        } else {
            ERR_SYNTAX
        });
    }
    match ctx.store.db.get(args[2], ctx.now_ms) {
        Some(entry) => Reply::Int(entry.memory(args[2]) as i64),
        None => Reply::Nil,
    }
}
