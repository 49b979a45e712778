//! DUMP and RESTORE (and RESTORE-ASKING, which `MIGRATE` sends to cluster nodes), with Redis'
//! payload format for RedisBloom's types and for strings (RDB type 0): a `DUMP` taken from Redis + RedisBloom restores here,
//! ours restores there, and `MIGRATE` from a Redis holding BF/CF keys lands in `bloomgate serve`.
//! The payload codec is the dialect's ([`bloomgate_dialect::encoding::rdb_format`]); this module is
//! Redis' command semantics: option parsing, the order of checks, the errors word for word, and
//! an AOF record that replays to the same key (the payload with an absolute expiry).

use bloomgate_dialect::commands::flags::*;
use bloomgate_dialect::encoding::rdb_format::{
    dump_payload, dump_string_payload, restore_capped, PayloadError, Restored,
};

use super::host::{
    command, is, parse_i64, Args, Ctx, ServerCommand, ERR_CAP, ERR_NOT_INTEGER, ERR_OOM, ERR_SYNTAX,
};
use crate::keyspace::Data;
use crate::pubsub::Events;
use crate::resp::Reply;

/// DUMP, RESTORE, RESTORE-ASKING, with Redis' flags and ACL categories.
pub fn commands() -> Vec<ServerCommand> {
    vec![
        command("DUMP", 2, READONLY, (1, 1), "keyspace", dump),
        command(
            "RESTORE",
            -4,
            WRITE | DENYOOM,
            (1, 1),
            "keyspace dangerous",
            restore,
        ),
        command(
            "RESTORE-ASKING",
            -4,
            WRITE | DENYOOM,
            (1, 1),
            "keyspace dangerous",
            restore,
        ),
    ]
}

fn dump(ctx: &mut Ctx, args: &Args) -> Reply {
    // Saving changes some values in place in RedisBloom (a t-digest merges its buffer).
    let now = ctx.now_ms;
    match ctx.store.db.value_quiet(args[1], now) {
        Some(Data::Dialect(value)) => {
            value.prepare_save();
            Reply::bulk(dump_payload(value))
        }
        Some(Data::String(s)) => Reply::bulk(dump_string_payload(s)),
        None => Reply::Nil,
    }
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]`, checked in Redis' order:
/// options, existing key, TTL, payload version and checksum, payload contents. IDLETIME and
/// FREQ are validated and otherwise ignored (the server keeps no LRU/LFU data). A value larger
/// than the memory budget (`maxmemory`, else the machine's memory) gets the OOM error; a dialect
/// value larger than `bloom-memory-usage-limit` gets the cap's error, unless replayed from the
/// log (then it is kept; the load reports keys past the cap).
fn restore(ctx: &mut Ctx, args: &Args) -> Reply {
    let (mut replace, mut absttl, mut idle, mut freq) = (false, false, false, false);
    let mut j = 4;
    while j < args.len() {
        let more = j + 1 < args.len();
        if is(args[j], "REPLACE") {
            replace = true;
        } else if is(args[j], "ABSTTL") {
            absttl = true;
        } else if is(args[j], "IDLETIME") && more && !freq {
            match parse_i64(args[j + 1]) {
                None => return Reply::error(ERR_NOT_INTEGER),
                Some(n) if n < 0 => {
                    return Reply::error("ERR Invalid IDLETIME value, must be >= 0");
                }
                Some(_) => idle = true,
            }
            j += 1;
        } else if is(args[j], "FREQ") && more && !idle {
            match parse_i64(args[j + 1]) {
                None => return Reply::error(ERR_NOT_INTEGER),
                Some(n) if !(0..=255).contains(&n) => {
                    return Reply::error("ERR Invalid FREQ value, must be >= 0 and <= 255");
                }
                Some(_) => freq = true,
            }
            j += 1;
        } else {
            return Reply::error(ERR_SYNTAX);
        }
        j += 1;
    }
    let (key, now) = (&args[1], ctx.now_ms);
    if !replace && ctx.store.db.get(key, now).is_some() {
        return Reply::error("BUSYKEY Target key name already exists.");
    }
    let ttl = match parse_i64(args[2]) {
        None => return Reply::error(ERR_NOT_INTEGER),
        Some(ttl) if ttl < 0 => return Reply::error("ERR Invalid TTL value, must be >= 0"),
        Some(ttl) => ttl,
    };
    let value = match restore_capped(args[3], ctx.store.memory_budget(), ctx.key_cap()) {
        Ok(Restored::Dialect(value)) => Data::Dialect(value),
        Ok(Restored::String(s)) => Data::String(s),
        Err(PayloadError::VersionOrChecksum) => {
            return Reply::error("ERR DUMP payload version or checksum are wrong");
        }
        Err(PayloadError::BadData(_)) => return Reply::error("ERR Bad data format"),
        Err(PayloadError::OverBudget) => {
            ctx.store.stats.rejected_oom += 1;
            return Reply::error(ERR_OOM);
        }
        Err(PayloadError::OverCap) => return Reply::error(ERR_CAP),
    };
    let deleted = replace && ctx.db().remove(key, now);
    let expires_at = match ttl {
        0 => None,
        _ if absttl => Some(ttl),
        _ => Some(ttl.saturating_add(now)),
    };
    if expires_at.is_some_and(|at| at <= now) {
        // Already expired: nothing is created; a replaced key is gone.
        if deleted {
            ctx.changed(1);
            ctx.propagate_as(vec![vec![b"DEL".to_vec(), key.to_vec()]]);
        }
        return Reply::ok();
    }
    if let Data::Dialect(value) = &value {
        bloomgate::memory::charge(value.memory());
    }
    if ctx.store.db.get(key, ctx.now_ms).is_none() {
        ctx.event(Events::NEW, "new", key);
    }
    ctx.db().insert(key.to_vec(), value, expires_at);
    ctx.event(Events::GENERIC, "restore", key);
    ctx.changed(1);
    // Logged with the payload as received (already verified) and an absolute expiry, so replay
    // at any later time rebuilds the same key or, once expired, nothing.
    let mut logged = vec![
        b"RESTORE".to_vec(),
        key.to_vec(),
        expires_at.unwrap_or(0).to_string().into_bytes(),
        args[3].to_vec(),
        b"REPLACE".to_vec(),
    ];
    if expires_at.is_some() {
        logged.push(b"ABSTTL".to_vec());
    }
    ctx.propagate_as(vec![logged]);
    Reply::ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::dispatch::testing::*;
    use crate::commands::execute;

    fn args(parts: &[&[u8]]) -> Vec<Vec<u8>> {
        parts.iter().map(|p| p.to_vec()).collect()
    }

    fn payload(h: &mut Harness, key: &str) -> Vec<u8> {
        match h.run(&format!("DUMP {key}")) {
            Reply::Bulk(p) => p,
            other => panic!("DUMP {key}: {other:?}"),
        }
    }

    #[test]
    fn dump_restore_round_trip_with_redis_errors() {
        let mut h = Harness::new();
        assert_eq!(h.run("DUMP nope"), Reply::Nil);
        h.run("BF.ADD bf a");
        h.run("CF.ADD cf a");
        for key in ["bf", "cf"] {
            let p = payload(&mut h, key);
            let copy = format!("{key}-copy");
            assert_eq!(
                h.run_args(&args(&[b"RESTORE", copy.as_bytes(), b"0", &p])),
                Reply::ok()
            );
            assert_eq!(payload(&mut h, &copy), p);
            assert_eq!(
                h.run_args(&args(&[b"RESTORE", copy.as_bytes(), b"0", &p])),
                err("BUSYKEY Target key name already exists.")
            );
            assert_eq!(
                h.run_args(&args(&[
                    b"RESTORE-ASKING",
                    copy.as_bytes(),
                    b"0",
                    &p,
                    b"REPLACE"
                ])),
                Reply::ok()
            );
        }
        assert_eq!(h.run("BF.EXISTS bf-copy a"), Reply::Bool(true));
        assert_eq!(h.run("CF.EXISTS cf-copy a"), Reply::Bool(true));
        let p = payload(&mut h, "bf");
        let restore = |h: &mut Harness, extra: &[&[u8]]| {
            let mut a = args(&[b"RESTORE", b"new", b"0", &p]);
            a.extend(args(extra));
            h.run_args(&a)
        };
        assert_eq!(restore(&mut h, &[b"BOGUS"]), err(ERR_SYNTAX));
        assert_eq!(restore(&mut h, &[b"IDLETIME"]), err(ERR_SYNTAX));
        assert_eq!(
            restore(&mut h, &[b"IDLETIME", b"-1"]),
            err("ERR Invalid IDLETIME value, must be >= 0")
        );
        assert_eq!(
            restore(&mut h, &[b"FREQ", b"256"]),
            err("ERR Invalid FREQ value, must be >= 0 and <= 255")
        );
        assert_eq!(
            restore(&mut h, &[b"IDLETIME", b"1", b"FREQ", b"1"]),
            err(ERR_SYNTAX)
        );
        let mut bad_ttl = args(&[b"RESTORE", b"new", b"-1", &p]);
        assert_eq!(
            h.run_args(&bad_ttl),
            err("ERR Invalid TTL value, must be >= 0")
        );
        bad_ttl[2] = b"x".to_vec();
        assert_eq!(h.run_args(&bad_ttl), err(ERR_NOT_INTEGER));
        let mut damaged = p.clone();
        damaged[5] ^= 1;
        assert_eq!(
            h.run_args(&args(&[b"RESTORE", b"new", b"0", &damaged])),
            err("ERR DUMP payload version or checksum are wrong")
        );
        assert_eq!(
            h.run_args(&args(&[b"RESTORE", b"new", b"0", b"\x00\x03abc\x0a\x00"])),
            err("ERR DUMP payload version or checksum are wrong")
        );
        assert_eq!(h.run("EXISTS new"), Reply::Int(0));
        assert_eq!(h.run("DBSIZE"), Reply::Int(4));
    }

    #[test]
    fn ttls_and_already_expired_payloads() {
        let mut h = Harness::new();
        h.run("BF.ADD bf a");
        let p = payload(&mut h, "bf");
        h.run_args(&args(&[b"RESTORE", b"t", b"100000", &p]));
        assert!(matches!(h.run("PTTL t"), Reply::Int(ms) if ms > 90_000 && ms <= 100_000));
        let past = b"1000".to_vec();
        h.run_args(&args(&[b"RESTORE", b"gone", &past, &p, b"ABSTTL"]));
        assert_eq!(h.run("EXISTS gone"), Reply::Int(0));
        // REPLACE with an expired absolute TTL deletes the existing key.
        assert_eq!(
            h.run_args(&args(&[
                b"RESTORE", b"bf", &past, &p, b"ABSTTL", b"REPLACE"
            ])),
            Reply::ok()
        );
        assert_eq!(h.run("EXISTS bf"), Reply::Int(0));
    }

    #[test]
    fn a_value_over_the_memory_budget_gets_the_oom_error() {
        let mut h = Harness::new();
        h.run("BF.RESERVE bf 0.001 100000");
        let p = payload(&mut h, "bf");
        h.store.config.maxmemory = h.store.db.used_memory() + 1000;
        assert_eq!(
            h.run_args(&args(&[b"RESTORE", b"copy", b"0", &p])),
            err(ERR_OOM)
        );
        assert_eq!(h.run("EXISTS copy"), Reply::Int(0));
    }

    #[test]
    fn restore_is_logged_with_an_absolute_expiry() {
        let mut h = Harness::new();
        h.run("CF.ADD cf a");
        let p = payload(&mut h, "cf");
        let out = execute(
            &mut h.store,
            &mut h.session,
            &args(&[b"RESTORE", b"k", b"5000", &p]),
            false,
        );
        let log = out
            .propagate
            .into_commands(&args(&[b"RESTORE", b"k", b"5000", &p]));
        let logged = &log[0];
        assert_eq!(logged[0], b"RESTORE");
        assert_eq!(logged[3], p);
        assert_eq!(&logged[4..], &args(&[b"REPLACE", b"ABSTTL"])[..]);
        let at: i64 = String::from_utf8_lossy(&logged[2]).parse().unwrap();
        assert!(at > crate::keyspace::now_ms());
        // Replaying the record rebuilds the key.
        let mut fresh = Harness::new();
        execute(&mut fresh.store, &mut fresh.session, logged, true);
        assert_eq!(fresh.run("CF.EXISTS k a"), Reply::Bool(true));
    }
}
