//! Running a table entry against a host: the [`Handler`] trait and [`execute`], which checks
//! the arity, runs the handler and decides, once for every command of every host, what the
//! outcome propagates.

use super::flags;
use super::host::{wrong_arity_in, Args, Ctx, Host, Items, Outcome, Propagate};
use super::info::{Command, CommandInfo};
use crate::reply::Reply;

/// How a table entry's command runs against a host `H`: the dialect's
/// [`Command`](super::Command)s run against any host; a host's own handler type (the server's)
/// implements it for that host.
pub trait Handler<H: Host + ?Sized> {
    /// Runs the command; reports changes and rewrites through `ctx`.
    fn call(&self, ctx: &mut Ctx<H>, args: &Args) -> Reply;
    /// The keyspace event [`execute`] signals with the command's first key when the command
    /// writes and changed something; `None` for commands that signal their own (or nothing).
    fn event(&self) -> Option<&'static str> {
        None
    }
}

/// The dialect's commands run against any host, through the host as a trait object.
impl<H: Host> Handler<H> for Command {
    fn call(&self, ctx: &mut Ctx<H>, args: &Args) -> Reply {
        ctx.erased(|ctx| self.run(ctx, args))
    }
    fn event(&self) -> Option<&'static str> {
        Command::event(*self)
    }
}

/// Runs `info`'s command with `args` (its name first) against `host`: the arity check, the
/// handler, and what the outcome propagates — decided here, once, for every command of every
/// host: nothing unless the command is a write (or runs queued commands, EXEC) that reported a
/// change; then its rewrite if it made one, else the command as sent — for a write over items,
/// only the items that went in (`Ctx::items_applied`).
pub fn execute<H: Host + ?Sized, C: Handler<H>>(
    host: &mut H,
    info: &CommandInfo<C>,
    args: &Args,
) -> Outcome {
    if !info.arity_ok(args.len()) {
        return Outcome {
            reply: wrong_arity_in(host.config().dialect, info.name),
            dirty: 0,
            propagate: Propagate::Nothing,
        };
    }
    let mut ctx = Ctx {
        host,
        dirty: 0,
        rewrite: None,
        items: Items::default(),
        allowance: None,
        after: None,
    };
    let reply = info.command.call(&mut ctx, args);
    let Ctx {
        host,
        dirty,
        rewrite,
        items,
        allowance,
        after,
    } = ctx;
    if let Some(spent) = allowance.map(|a| a.spent()).filter(|&s| s > 0) {
        host.charge(spent);
    }
    let wrote = info.flags.contains(flags::WRITE) && dirty > 0;
    let key = usize::try_from(info.first_key)
        .ok()
        .and_then(|at| args.get(at));
    if let (true, Some(key)) = (wrote, key) {
        for event in info.command.event().into_iter().chain(after) {
            host.notify(event, key);
        }
    }
    let propagate = if !info.flags.intersects(flags::WRITE | flags::RUNS_QUEUED) || dirty == 0 {
        Propagate::Nothing
    } else {
        items.propagate(rewrite, args)
    };
    Outcome {
        reply,
        dirty,
        propagate,
    }
}
