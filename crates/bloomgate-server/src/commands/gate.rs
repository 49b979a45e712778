//! GATE.UNSEEN, GATE.RECORD, GATE.EXPIRE and GATE.INFO: the gate configured with
//! `--gate-store` (see [`crate::gate`]). The handlers do no store or filter work: they turn
//! scopes and items into ids ([`bloomgate_gate::item_id`]) and hand the call to the network
//! layer as an [`Action::Gate`], whose result becomes the reply; GATE.INFO reads counters only
//! and answers at once. GATE.RECORD is a write (refused with `-MISCONF` while the log cannot be
//! written): the network layer logs the rows the gate took, with their time, before replying,
//! so the handler itself reports no change (nothing is logged as sent). Every one is refused inside MULTI (`NO_MULTI`), and without a gate they
//! answer an error saying how to configure one.

use bloomgate_dialect::commands::flags::*;
use bloomgate_dialect::commands::{Arg, ArgKind, Docs, Flags};
use bloomgate_gate::item_id;

use super::host::{command, Args, Ctx, ServerCommand};
use super::state::Action;
use crate::gate::GateCall;
use crate::resp::Reply;

/// The answer of every GATE.* command while no gate is configured.
pub const ERR_NO_GATE: &str =
    "ERR gate not configured: start bloomgate serve with --gate-store URL (sqlite:PATH, redis://HOST:PORT or postgres://USER@HOST:PORT/DB)";

const SCOPE_ITEMS: &[Arg] = &[
    Arg::plain("scope", ArgKind::String),
    Arg::plain("item", ArgKind::String).multiple(),
];
const SCOPE_CANDIDATES: &[Arg] = &[
    Arg::plain("scope", ArgKind::String),
    Arg::plain("candidate", ArgKind::String).multiple(),
];

const fn docs(summary: &'static str, complexity: &'static str, args: &'static [Arg]) -> Docs {
    Docs {
        summary,
        complexity,
        since: "0.1.0",
        key_notes: "",
        key_rw: false,
        args,
        history: &[],
        numkeys_at: None,
    }
}

/// The gate's commands: no keys (scopes live in the gate's store, not the keyspace), ACL
/// categories `@read`/`@write`, `@slow` and `@gate`.
pub fn commands() -> Vec<ServerCommand> {
    let spec = |name, arity, flags, category, handler, doc| ServerCommand {
        docs: Some(doc),
        ..command(name, arity, flags | NO_MULTI, (0, 0), category, handler)
    };
    vec![
        spec(
            "GATE.UNSEEN",
            -3,
            Flags::NONE,
            "read gate",
            unseen,
            docs(
                "For each candidate, 1 if the scope has not seen it within the gate's window, else 0",
                "O(N) where N is the number of candidates, plus the store's lookups",
                SCOPE_CANDIDATES,
            ),
        ),
        spec(
            "GATE.RECORD",
            -3,
            WRITE | DENYOOM,
            "write gate",
            record,
            docs(
                "Records that the scope was shown the items now (logged before the reply); answers how many were recorded",
                "O(N) where N is the number of items",
                SCOPE_ITEMS,
            ),
        ),
        spec(
            "GATE.EXPIRE",
            1,
            Flags::NONE,
            "write gate",
            expire,
            docs(
                "Drops the store's rows past the gate's window now; answers how many",
                "O(N) where N is the number of rows dropped",
                &[],
            ),
        ),
        spec(
            "GATE.INFO",
            1,
            Flags::NONE,
            "read gate",
            info,
            docs(
                "The gate's policy, store and counters",
                "O(1)",
                &[],
            ),
        ),
    ]
}

/// Hands `call` to the network layer (which replies with its result), if a gate is configured.
fn defer(ctx: &mut Ctx, call: impl FnOnce() -> GateCall) -> Reply {
    if ctx.store.gate.is_none() {
        return Reply::error(ERR_NO_GATE);
    }
    ctx.session.action = Some(Action::Gate(call()));
    // Replaced by the call's result before it is sent.
    Reply::Nil
}

fn ids(args: &Args) -> Vec<u64> {
    args.iter().map(|arg| item_id(arg)).collect()
}

/// `GATE.UNSEEN scope candidate [candidate ...]`.
fn unseen(ctx: &mut Ctx, args: &Args) -> Reply {
    defer(ctx, || GateCall::Unseen {
        scope: item_id(args[1]),
        candidates: ids(&args[2..]),
    })
}

/// `GATE.RECORD scope item [item ...]`.
fn record(ctx: &mut Ctx, args: &Args) -> Reply {
    defer(ctx, || GateCall::Record {
        scope: item_id(args[1]),
        items: ids(&args[2..]),
    })
}

/// `GATE.EXPIRE`.
fn expire(ctx: &mut Ctx, _args: &Args) -> Reply {
    defer(ctx, || GateCall::Expire)
}

/// `GATE.INFO`.
fn info(ctx: &mut Ctx, _args: &Args) -> Reply {
    match &ctx.store.gate {
        Some(gate) => gate.info(),
        None => Reply::error(ERR_NO_GATE),
    }
}

#[cfg(test)]
mod tests {
    use crate::commands::dispatch::testing::*;
    use crate::resp::Reply;

    #[test]
    fn without_a_gate_every_command_says_how_to_configure_one() {
        let mut h = Harness::new();
        for line in [
            "GATE.UNSEEN u 1 2",
            "GATE.RECORD u 1",
            "GATE.EXPIRE",
            "GATE.INFO",
        ] {
            assert_eq!(h.run(line), err(super::ERR_NO_GATE), "{line}");
            assert!(h.session.action.is_none());
        }
        assert_eq!(
            h.run("GATE.UNSEEN u"),
            err("ERR wrong number of arguments for 'gate.unseen' command")
        );
    }

    #[test]
    fn gate_commands_are_refused_inside_multi() {
        let mut h = Harness::new();
        assert_eq!(h.run("MULTI"), Reply::ok());
        let refused = h.run("GATE.UNSEEN u 1");
        assert!(
            matches!(&refused, Reply::Error(e) if e.contains("not allowed inside a transaction")),
            "{refused:?}"
        );
        assert_eq!(
            h.run("EXEC"),
            err("EXECABORT Transaction discarded because of previous errors.")
        );
    }

    #[test]
    fn gate_commands_carry_their_acl_categories_and_docs() {
        let info = crate::commands::lookup(b"gate.record").unwrap();
        assert_eq!(info.acl_categories(), vec!["write", "slow", "gate"]);
        assert!(info.flag_names().contains(&"no_multi"));
        assert!(crate::commands::lookup(b"gate.unseen")
            .unwrap()
            .docs
            .is_some());
    }
}
