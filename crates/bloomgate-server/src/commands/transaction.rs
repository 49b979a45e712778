//! MULTI/EXEC/DISCARD/WATCH/UNWATCH. Commands run one at a time against the store, so a queued
//! transaction executes atomically; its writes are logged as one record so a crash never
//! replays half of it.

use super::{command_spec as spec, flags::*, lookup, run, Args, CommandSpec, Ctx};
use crate::resp::Reply;

pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("MULTI", 1, TRANSACTION | FAST | LOADING, 0, 0, multi),
        spec("EXEC", 1, TRANSACTION | LOADING, 0, 0, exec),
        spec("DISCARD", 1, TRANSACTION | FAST | LOADING, 0, 0, discard),
        spec("WATCH", -2, TRANSACTION | FAST | LOADING, 1, -1, watch),
        spec("UNWATCH", 1, FAST | LOADING, 0, 0, unwatch),
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

fn exec(ctx: &mut Ctx, _args: &Args) -> Reply {
    let Some(queued) = ctx.session.multi.take() else {
        return Reply::error("ERR EXEC without MULTI");
    };
    let failed = std::mem::take(&mut ctx.session.multi_failed);
    let aborted = ctx
        .session
        .watched
        .iter()
        .any(|(key, seq)| ctx.store.db.changed_since(key, *seq));
    ctx.session.unwatch_all(&mut ctx.store.db);
    if failed {
        return Reply::error("EXECABORT Transaction discarded because of previous errors.");
    }
    if aborted {
        return Reply::NilArray;
    }
    let mut replies = Vec::with_capacity(queued.len());
    let mut log = Vec::new();
    for args in &queued {
        let spec = lookup(&args[0]).expect("queued commands were resolved");
        let outcome = run(ctx.store, ctx.session, spec, args, false);
        replies.push(outcome.reply);
        log.extend(outcome.log);
        ctx.action = outcome.action.or(ctx.action);
        ctx.close |= outcome.close;
    }
    if !log.is_empty() {
        // Counted once more so the whole transaction is logged as one record.
        ctx.changed(1);
        ctx.log_as = Some(log);
    }
    Reply::Array(replies)
}

fn discard(ctx: &mut Ctx, _args: &Args) -> Reply {
    if ctx.session.multi.take().is_none() {
        return Reply::error("ERR DISCARD without MULTI");
    }
    ctx.session.multi_failed = false;
    ctx.session.unwatch_all(&mut ctx.store.db);
    Reply::ok()
}

fn watch(ctx: &mut Ctx, args: &Args) -> Reply {
    if ctx.session.multi.is_some() {
        return Reply::error("ERR WATCH inside MULTI is not allowed");
    }
    for key in &args[1..] {
        let seq = ctx.store.db.watch(key);
        ctx.session.watched.push((key.clone(), seq));
    }
    Reply::ok()
}

fn unwatch(ctx: &mut Ctx, _args: &Args) -> Reply {
    ctx.session.unwatch_all(&mut ctx.store.db);
    Reply::ok()
}

#[cfg(test)]
mod tests {
    use crate::commands::testing::*;
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
