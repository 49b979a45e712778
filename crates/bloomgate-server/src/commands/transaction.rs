//! MULTI/EXEC/DISCARD/WATCH/UNWATCH. Commands run one at a time against the store, so a queued
//! transaction executes atomically; its writes are logged as one record so a crash never
//! replays half of it. Queueing is the dispatcher's (Redis' checks come first), and so is
//! running the queue (EXEC, [`Handler::Exec`]).

use bloomgate_dialect::commands::{flags::*, CommandInfo};

use super::host::{command, Args, Ctx, Handler, ServerCommand};
use crate::resp::Reply;

/// The transaction family, with Redis' flags and ACL categories.
pub fn commands() -> Vec<ServerCommand> {
    let spec = |name, arity, flags, keys, handler| {
        command(name, arity, flags, keys, "transaction", handler)
    };
    vec![
        spec("MULTI", 1, TRANSACTION | FAST | LOADING, (0, 0), multi),
        CommandInfo {
            command: Handler::Exec,
            ..spec(
                "EXEC",
                1,
                TRANSACTION | RUNS_QUEUED | LOADING,
                (0, 0),
                discard,
            )
        },
        spec("DISCARD", 1, TRANSACTION | FAST | LOADING, (0, 0), discard),
        spec("WATCH", -2, TRANSACTION | FAST | LOADING, (1, -1), watch),
        spec("UNWATCH", 1, FAST | LOADING, (0, 0), unwatch),
    ]
}

fn multi(ctx: &mut Ctx, _args: &Args) -> Reply {
    if ctx.session.multi.is_some() {
        return Reply::error("ERR MULTI calls can not be nested");
    }
    ctx.session.multi = Some(Vec::new());
    ctx.session.multi_failed = false;
    Reply::ok()
}

fn discard(ctx: &mut Ctx, _args: &Args) -> Reply {
    if ctx.session.multi.take().is_none() {
        return Reply::error("ERR DISCARD without MULTI");
    }
    ctx.session.multi_failed = false;
    ctx.unwatch_all();
    Reply::ok()
}

fn watch(ctx: &mut Ctx, args: &Args) -> Reply {
    if ctx.session.multi.is_some() {
        return Reply::error("ERR WATCH inside MULTI is not allowed");
    }
    for key in &args[1..] {
        let seq = ctx.db().watch(key);
        ctx.session.watched.push((key.to_vec(), seq));
    }
    Reply::ok()
}

fn unwatch(ctx: &mut Ctx, _args: &Args) -> Reply {
    ctx.unwatch_all();
    Reply::ok()
}

#[cfg(test)]
mod tests {
    use crate::commands::dispatch::testing::*;
    use crate::commands::{execute, Session};
    use crate::resp::Reply;

    #[test]
    fn exec_runs_queue_and_watch_aborts() {
        let mut h = Harness::new();
        assert_eq!(h.run("MULTI"), Reply::ok());
        assert_eq!(h.run("BF.ADD k a"), Reply::Simple("QUEUED".into()));
        assert_eq!(h.run("BF.EXISTS k a"), Reply::Simple("QUEUED".into()));
        assert_eq!(
            h.run("EXEC"),
            Reply::Array(vec![Reply::Bool(true), Reply::Bool(true)])
        );

        assert_eq!(h.run("WATCH k"), Reply::ok());
        let mut other = Session::new(2, false);
        let args: Vec<Vec<u8>> = ["BF.ADD", "k", "b"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        execute(&mut h.store, &mut other, &args, false);
        assert_eq!(h.run("MULTI"), Reply::ok());
        assert_eq!(h.run("BF.ADD k c"), Reply::Simple("QUEUED".into()));
        assert_eq!(h.run("EXEC"), Reply::NilArray);
        assert_eq!(h.run("BF.EXISTS k c"), Reply::Bool(false));
    }

    #[test]
    fn queue_errors_abort_exec() {
        let mut h = Harness::new();
        assert_eq!(h.run("EXEC"), err("ERR EXEC without MULTI"));
        assert_eq!(h.run("DISCARD"), err("ERR DISCARD without MULTI"));
        h.run("MULTI");
        assert_eq!(h.run("MULTI"), err("ERR MULTI calls can not be nested"));
        assert_eq!(
            h.run("WATCH x"),
            err("ERR WATCH inside MULTI is not allowed")
        );
        assert!(h.run("NOPE").is_error());
        assert_eq!(
            h.run("EXEC"),
            err("EXECABORT Transaction discarded because of previous errors.")
        );
        h.run("MULTI");
        h.run("BF.ADD k a");
        assert_eq!(h.run("DISCARD"), Reply::ok());
        assert_eq!(h.run("EXISTS k"), Reply::Int(0));
    }
}
