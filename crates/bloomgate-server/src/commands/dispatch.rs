//! The command table and dispatch: one lookup, then Redis' checks in Redis' order (unknown
//! command, arity, authentication, loading, ACL permissions, MULTI queueing, maxmemory), then
//! the command runs through `bloomgate_dialect::commands::execute` — the same entry point, the
//! same `Outcome` and the same propagation rule for BF.*/CF.*/WF.* and the server's own
//! commands. Changes are counted here, once per command the client sent.

use std::collections::HashMap;
use std::sync::OnceLock;

use bloomgate_dialect::commands::{self as dialect, flags, Outcome, Propagate};

use super::acl;
use super::host::{
    wrong_arity, Args, Ctx, Handler, ServerCommand, ServerHost, ERR_LOADING, ERR_NOAUTH, ERR_OOM,
    ERR_SYNTAX,
};
use super::state::{Session, Store};
use super::{dump, gate, keys, pubsub, server, strings, transaction};
use crate::config::Config;
use crate::gate::Recorded;
use crate::keyspace::{now_ms, Db};
use crate::persistence::Replay;
use crate::resp::Reply;

/// Every command: the dialect's (from its table, with their RedisBloom metadata), then the
/// server's families.
pub fn table() -> &'static [ServerCommand] {
    static TABLE: OnceLock<Vec<ServerCommand>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut all: Vec<ServerCommand> = dialect::table()
            .iter()
            .map(|info| info.map(|&c| Handler::Dialect(c)))
            .collect();
        all.extend(keys::commands());
        all.extend(strings::commands());
        all.extend(dump::commands());
        all.extend(server::commands());
        all.extend(transaction::commands());
        all.extend(pubsub::commands());
        all.extend(gate::commands());
        all
    })
}

/// The command called `name` (any case): one hash lookup, no allocation.
pub fn lookup(name: &[u8]) -> Option<&'static ServerCommand> {
    static INDEX: OnceLock<HashMap<Vec<u8>, usize>> = OnceLock::new();
    let index = INDEX.get_or_init(|| {
        table()
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.as_bytes().to_vec(), i))
            .collect()
    });
    // Upper-case into a stack buffer: no allocation on the per-command path.
    let mut upper = [0u8; 32];
    let upper = upper.get_mut(..name.len())?;
    for (u, b) in upper.iter_mut().zip(name) {
        *u = b.to_ascii_uppercase();
    }
    index.get(&*upper).map(|&i| &table()[i])
}

/// Redis' unknown-command wording: each argument quoted and followed by a space, the argument
/// list cut once it reaches 128 characters.
pub fn unknown_command<A: AsRef<[u8]>>(args: &[A]) -> Reply {
    let mut listed = String::new();
    for arg in &args[1..] {
        if listed.len() >= 128 {
            break;
        }
        let room = 128 - listed.len();
        let text = String::from_utf8_lossy(arg.as_ref());
        let shown: String = text.chars().take(room).collect();
        listed.push_str(&format!("'{shown}' "));
    }
    let name: String = String::from_utf8_lossy(args[0].as_ref())
        .chars()
        .take(128)
        .collect();
    Reply::error(format!(
        "ERR unknown command '{name}', with args beginning with: {listed}"
    ))
}

/// An outcome that changed nothing.
fn refused(reply: Reply) -> Outcome {
    Outcome {
        reply,
        dirty: 0,
        propagate: Propagate::Nothing,
    }
}

/// Calls `f` with `args` as the dialect's argument slices (on the stack for up to 16).
fn with_slices<R>(args: &[Vec<u8>], f: impl FnOnce(&Args) -> R) -> R {
    const ON_STACK: usize = 16;
    if args.len() <= ON_STACK {
        let mut slices: [&[u8]; ON_STACK] = [&[]; ON_STACK];
        for (slice, arg) in slices.iter_mut().zip(args) {
            *slice = arg;
        }
        f(&slices[..args.len()])
    } else {
        let slices: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        f(&slices)
    }
}

/// Runs one command `session` sent. `replaying` is set while the log is replayed at start (no
/// authentication, permission, loading or memory checks, no MULTI state). What the outcome
/// propagates is what the log must record (the caller appends it unless replaying); its changes
/// are counted in the store here.
pub fn execute(
    store: &mut Store,
    session: &mut Session,
    args: &[Vec<u8>],
    replaying: bool,
) -> Outcome {
    let Some(first) = args.first() else {
        return refused(Reply::error(ERR_SYNTAX));
    };
    let Some(info) = lookup(first) else {
        if session.multi.is_some() {
            session.multi_failed = true;
        }
        return refused(unknown_command(args));
    };
    // Redis' order: arity, then authentication, loading, then ACL permissions.
    let refusal = if !info.arity_ok(args.len()) {
        Some(wrong_arity(info.name))
    } else if replaying {
        None
    } else if !session.authenticated && !info.flags.contains(flags::NOAUTH) {
        Some(Reply::error(ERR_NOAUTH))
    } else if store.loading && !info.flags.contains(flags::LOADING) {
        return refused(Reply::error(ERR_LOADING));
    } else if let Err(reply) = acl::check(store, &session.user, info, args) {
        Some(reply)
    } else if session.proto == 2 && session.subscriptions() > 0 {
        pubsub::allowed_while_subscribed(info.name).err()
    } else if session.multi.is_some() && pubsub::subscribes(info.name) {
        Some(Reply::error("ERR Command not allowed inside a transaction"))
    } else {
        None
    };
    if let Some(reply) = refusal {
        if session.multi.is_some() {
            session.multi_failed = true;
        }
        return refused(reply);
    }
    if session.multi.is_some() && info.flags.contains(flags::NO_MULTI) {
        session.multi_failed = true;
        return refused(Reply::error(format!(
            "ERR Command not allowed inside a transaction: {} replies from the gate's workers, \
             off the event loop (run it outside MULTI)",
            info.name.to_lowercase()
        )));
    }
    if let Some(queue) = session
        .multi
        .as_mut()
        .filter(|_| !info.flags.contains(flags::TRANSACTION))
    {
        queue.push(args.to_vec());
        return refused(Reply::Simple("QUEUED".into()));
    }
    let outcome = with_slices(args, |args| run(store, session, info, args, replaying));
    store.changed(outcome.dirty);
    outcome
}

/// Runs a resolved command (also each command EXEC runs): the maxmemory check, the command, the
/// keyspace's memory accounting, the per-command counters.
pub fn run(
    store: &mut Store,
    session: &mut Session,
    info: &ServerCommand,
    args: &Args,
    replaying: bool,
) -> Outcome {
    if !replaying
        && info.flags.contains(flags::DENYOOM)
        && store.config.maxmemory > 0
        && store.used_memory() > store.config.maxmemory
    {
        store.stats.rejected_oom += 1;
        return refused(Reply::error(ERR_OOM));
    }
    let mut host = ServerHost {
        store,
        session,
        now_ms: now_ms(),
        table: table(),
        lookup,
        replaying,
    };
    let outcome = dialect::execute(&mut host, info, args);
    store.db.settle();
    let counters = store.stats.per_command.entry(info.name).or_default();
    counters.0 += 1;
    counters.1 += u64::from(outcome.reply.is_error());
    store.stats.commands_processed += 1;
    outcome
}

impl dialect::Handler<ServerHost<'_>> for Handler {
    fn call(&self, ctx: &mut Ctx, args: &Args) -> Reply {
        match self {
            Handler::Dialect(command) => command.call(ctx, args),
            Handler::Native(native) => native(ctx, args),
            Handler::Exec => exec(ctx),
        }
    }

    fn event(&self) -> Option<&'static str> {
        match self {
            Handler::Dialect(command) => dialect::Command::event(*command),
            _ => None,
        }
    }
}

/// EXEC: runs the queued commands one after another (atomically: nothing else runs meanwhile)
/// unless a queued command was refused or a WATCHed key changed. What they propagate goes to
/// the log as one record, so a crash never replays half a transaction.
fn exec(ctx: &mut Ctx) -> Reply {
    let host: &mut ServerHost = ctx;
    let Some(queued) = host.session.multi.take() else {
        return Reply::error("ERR EXEC without MULTI");
    };
    let failed = std::mem::take(&mut host.session.multi_failed);
    let aborted = host
        .session
        .watched
        .iter()
        .any(|(key, seq)| host.store.db.changed_since(key, *seq));
    host.session.unwatch_all(&mut host.store.db);
    if failed {
        return Reply::error("EXECABORT Transaction discarded because of previous errors.");
    }
    if aborted {
        return Reply::NilArray;
    }
    let mut replies = Vec::with_capacity(queued.len());
    let mut log = Vec::new();
    let mut dirty = 0;
    for args in &queued {
        let info = lookup(&args[0]).expect("queued commands were resolved");
        let outcome = with_slices(args, |slices| {
            run(host.store, host.session, info, slices, false)
        });
        replies.push(outcome.reply);
        dirty += outcome.dirty;
        log.extend(outcome.propagate.into_commands(args));
    }
    ctx.changed(dirty);
    if !log.is_empty() {
        ctx.propagate_as(log);
    }
    Reply::Array(replies)
}

/// Replays logged commands into a keyspace at start (`persistence::load`): every command runs
/// as a client's would, without the checks a live client gets. The gate's logged rows
/// (`GATE.RECORDED`) are not commands of the keyspace: they are collected for the gate
/// ([`Replayer::take_gate_rows`]).
pub struct Replayer {
    store: Store,
    session: Session,
    gate_rows: Vec<Recorded>,
}

impl Replayer {
    /// A replayer with the settings `config` (its `maxmemory` ignored: replay must rebuild what
    /// was acknowledged even if the limit has been lowered since).
    pub fn new(mut config: Config) -> Self {
        config.maxmemory = 0;
        Self {
            store: Store::new(config),
            session: Session::new(0, false),
            gate_rows: Vec::new(),
        }
    }

    /// The gate's rows the replayed logs held, in log order.
    pub fn take_gate_rows(&mut self) -> Vec<Recorded> {
        std::mem::take(&mut self.gate_rows)
    }
}

impl Replay for Replayer {
    fn db(&mut self) -> &mut Db {
        &mut self.store.db
    }

    fn apply(&mut self, args: &[Vec<u8>]) {
        match Recorded::parse(args) {
            Some(Ok(rows)) => self.gate_rows.push(rows),
            // Checksummed, so written so: left out as a logged command that fails is.
            Some(Err(_)) => {}
            None => {
                execute(&mut self.store, &mut self.session, args, true);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A store and an authenticated RESP2 session for unit tests.
    use super::*;
    pub use bloomgate_dialect::commands::testing::err;
    use bloomgate_dialect::commands::testing::words;

    /// A store and one session.
    pub struct Harness {
        pub store: Store,
        pub session: Session,
    }

    impl Harness {
        pub fn new() -> Self {
            Self {
                store: Store::new(Config::default()),
                session: Session::new(1, false),
            }
        }

        /// Runs a command given as space-separated words.
        pub fn run(&mut self, line: &str) -> Reply {
            self.run_args(&words(line))
        }

        pub fn run_args(&mut self, args: &[Vec<u8>]) -> Reply {
            execute(&mut self.store, &mut self.session, args, false).reply
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn unknown_command_wording() {
        let mut h = Harness::new();
        assert_eq!(
            h.run("FOO a b"),
            err("ERR unknown command 'FOO', with args beginning with: 'a' 'b' ")
        );
        assert_eq!(
            h.run("foo"),
            err("ERR unknown command 'foo', with args beginning with: ")
        );
    }

    #[test]
    fn arity_errors_use_lower_case_names() {
        let mut h = Harness::new();
        assert_eq!(
            h.run("BF.ADD k"),
            err("ERR wrong number of arguments for 'bf.add' command")
        );
        assert_eq!(
            h.run("ECHO"),
            err("ERR wrong number of arguments for 'echo' command")
        );
    }

    /// Every write the server runs is logged by the one rule: DEL of a present key is logged
    /// verbatim, of a missing key not at all; EXPIRE as its absolute rewrite; a read never.
    #[test]
    fn propagation_is_decided_by_the_write_flag_and_the_changes() {
        let mut h = Harness::new();
        let mut run = |line: &str| {
            let args: Vec<Vec<u8>> = line.split(' ').map(|w| w.as_bytes().to_vec()).collect();
            let outcome = execute(&mut h.store, &mut h.session, &args, false);
            outcome.propagate.into_commands(&args)
        };
        assert_eq!(run("BF.ADD k a").len(), 1);
        assert!(run("BF.ADD k a").is_empty(), "no change, nothing logged");
        assert!(run("BF.EXISTS k a").is_empty());
        assert!(run("DEL nope").is_empty());
        let expire = run("EXPIRE k 100");
        assert_eq!(expire[0][0], b"PEXPIREAT");
        assert_eq!(run("DEL k"), vec![vec![b"DEL".to_vec(), b"k".to_vec()]]);
        assert!(run("PING").is_empty());
    }

    /// One command table: every server command has a handler of this crate or the dialect's,
    /// and the names are unique.
    #[test]
    fn the_table_has_unique_names() {
        let mut names: Vec<&str> = table().iter().map(|c| c.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
        assert!(lookup(b"bf.add").is_some() && lookup(b"exec").is_some());
    }
}
