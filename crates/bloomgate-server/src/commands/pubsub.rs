//! Pub/sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE (each answers with one
//! frame per channel, written as the session's `frames`), PUBLISH, PUBSUB CHANNELS / NUMSUB /
//! NUMPAT, RESET; and what a RESP2 client in subscribed mode may still run.

use bloomgate_dialect::commands::flags::*;

use super::host::{command, text, Args, Ctx, ServerCommand};
use crate::pubsub::{frame, Part};
use crate::resp::Reply;

/// The pub/sub commands, with Redis 7's arities, flags and ACL categories.
pub fn commands() -> Vec<ServerCommand> {
    let spec =
        |name, arity, flags, handler| command(name, arity, flags | PUBSUB, (0, 0), "", handler);
    let subscribing = NOSCRIPT | LOADING | STALE;
    vec![
        spec("SUBSCRIBE", -2, subscribing, subscribe),
        spec("UNSUBSCRIBE", -1, subscribing, subscribe),
        spec("PSUBSCRIBE", -2, subscribing, subscribe),
        spec("PUNSUBSCRIBE", -1, subscribing, subscribe),
        spec("PUBLISH", 3, LOADING | STALE | FAST, publish),
        spec("PUBSUB", -2, LOADING | STALE, pubsub),
        command(
            "RESET",
            1,
            NOAUTH | LOADING | STALE | FAST | NOSCRIPT,
            (0, 0),
            "connection",
            reset,
        ),
    ]
}

/// Whether `name` is one of the (P)(UN)SUBSCRIBE commands.
pub fn subscribes(name: &str) -> bool {
    matches!(
        name,
        "SUBSCRIBE" | "UNSUBSCRIBE" | "PSUBSCRIBE" | "PUNSUBSCRIBE"
    )
}

/// What a RESP2 client with subscriptions may run (Redis' error for anything else).
pub fn allowed_while_subscribed(name: &str) -> Result<(), Reply> {
    if subscribes(name) || matches!(name, "PING" | "QUIT" | "RESET") {
        return Ok(());
    }
    Err(Reply::error(format!(
        "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET \
         are allowed in this context",
        name.to_lowercase()
    )))
}

/// (P)(UN)SUBSCRIBE `name...`: one confirmation frame per channel or pattern, carrying the
/// session's subscription count after it (UNSUBSCRIBE of nothing: one frame with a null).
fn subscribe(ctx: &mut Ctx, args: &Args) -> Reply {
    let verb = text(args[0]).to_lowercase();
    let pattern = verb.starts_with('p');
    let adding = !verb.contains("unsub");
    let id = ctx.session.id;
    let outbox = ctx.session.outbox.clone();
    outbox.set_proto(ctx.session.proto);
    let names: Vec<Vec<u8>> = if args.len() > 1 {
        args[1..].iter().map(|a| a.to_vec()).collect()
    } else if pattern {
        ctx.session.patterns.iter().cloned().collect()
    } else {
        ctx.session.channels.iter().cloned().collect()
    };
    let proto = ctx.session.proto;
    let mut out = Vec::new();
    for name in &names {
        let host = &mut **ctx;
        let (session, registry) = (&mut *host.session, &mut host.store.pubsub);
        match (pattern, adding) {
            (false, true) => {
                registry.subscribe(name, id, &outbox);
                session.channels.insert(name.clone());
            }
            (false, false) => {
                registry.unsubscribe(name, id);
                session.channels.remove(name);
            }
            (true, true) => {
                registry.psubscribe(name, id, &outbox);
                session.patterns.insert(name.clone());
            }
            (true, false) => {
                registry.punsubscribe(name, id);
                session.patterns.remove(name);
            }
        }
        let count = session.subscriptions() as i64;
        frame(
            proto,
            &[
                Part::Bulk(verb.as_bytes()),
                Part::Bulk(name),
                Part::Int(count),
            ],
            &mut out,
        );
    }
    if names.is_empty() {
        let count = ctx.session.subscriptions() as i64;
        frame(
            proto,
            &[Part::Bulk(verb.as_bytes()), Part::Nil, Part::Int(count)],
            &mut out,
        );
    }
    ctx.session.frames = Some(out);
    Reply::ok()
}

/// PUBLISH channel message: the number of clients that received it.
fn publish(ctx: &mut Ctx, args: &Args) -> Reply {
    Reply::Int(ctx.store.pubsub.publish(args[1], args[2]) as i64)
}

/// PUBSUB CHANNELS [pattern] | NUMSUB [channel...] | NUMPAT | HELP.
fn pubsub(ctx: &mut Ctx, args: &Args) -> Reply {
    let sub = text(args[1]).to_uppercase();
    let registry = &ctx.store.pubsub;
    match sub.as_str() {
        "CHANNELS" if args.len() <= 3 => Reply::Array(
            registry
                .channels(args.get(2).copied())
                .into_iter()
                .map(Reply::bulk)
                .collect(),
        ),
        "NUMSUB" => Reply::Array(
            args[2..]
                .iter()
                .flat_map(|c| [Reply::bulk(*c), Reply::Int(registry.numsub(c) as i64)])
                .collect(),
        ),
        "NUMPAT" if args.len() == 2 => Reply::Int(registry.numpat() as i64),
        "HELP" if args.len() == 2 => Reply::Array(
            HELP.iter()
                .map(|l| Reply::Simple((*l).to_string()))
                .collect(),
        ),
        "CHANNELS" | "NUMPAT" | "HELP" => Reply::error(format!(
            "ERR wrong number of arguments for 'pubsub|{}' command",
            sub.to_lowercase()
        )),
        _ => Reply::error(format!(
            "ERR unknown subcommand '{}'. Try PUBSUB HELP.",
            text(args[1])
        )),
    }
}

const HELP: [&str; 8] = [
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
];

/// RESET: leaves subscribed mode, discards MULTI and WATCHes, back to RESP2 as the default
/// user with no name; answers `+RESET`.
fn reset(ctx: &mut Ctx, _args: &Args) -> Reply {
    leave_subscriptions(ctx);
    ctx.unwatch_all();
    let needs_auth = ctx.store.config.requirepass.is_some();
    let session = &mut *ctx.session;
    session.multi = None;
    session.multi_failed = false;
    session.proto = 2;
    session.outbox.set_proto(2);
    session.name = None;
    session.user = b"default".to_vec();
    session.authenticated = !needs_auth;
    Reply::Simple("RESET".into())
}

/// Drops every subscription of the session.
fn leave_subscriptions(ctx: &mut Ctx) {
    let host = &mut **ctx;
    let session = &mut *host.session;
    host.store
        .pubsub
        .forget(session.id, &session.channels, &session.patterns);
    session.channels.clear();
    session.patterns.clear();
}
