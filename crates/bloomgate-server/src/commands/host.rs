//! What a server command's handler sees. Every command — the dialect's BF/CF/WF and the
//! server's own — is a [`ServerCommand`]: the dialect's `CommandInfo` with the server's
//! [`Handler`], run by `bloomgate_dialect::commands::execute` against a [`ServerHost`]. A native
//! handler is a plain function of the dialect's `Ctx` over that host: it reaches the store and
//! the session through the context (which dereferences to the host), reports changes with
//! `ctx.changed(n)` and a deterministic rewrite with `ctx.propagate_as(..)`; what is logged is
//! then decided by the dialect from the command's WRITE flag, as for BF.* commands.

use bloomgate_dialect::commands::{self as dialect, CommandInfo, Flags, WrongType};

use super::state::{Session, Store};
use crate::keyspace::{Db, Value};
use crate::pubsub::Events;
use crate::resp::Reply;

pub use bloomgate_dialect::commands::{wrong_arity, Args};
pub use bloomgate_dialect::num::{is, parse_f64, parse_i64};
pub use bloomgate_dialect::{ERR_CAP, ERR_OOM, ERR_WRONGTYPE};

/// Redis' error for an argument that must be an integer.
pub const ERR_NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// Redis' generic syntax error.
pub const ERR_SYNTAX: &str = "ERR syntax error";
/// A command before AUTH.
pub const ERR_NOAUTH: &str = "NOAUTH Authentication required.";
/// A command while the dataset loads.
pub const ERR_LOADING: &str = "LOADING Redis is loading the dataset in memory";

/// The context a handler runs in: the dialect's, over the server.
pub type Ctx<'a, 'b> = dialect::Ctx<'a, ServerHost<'b>>;

/// A server command's handler.
pub type Native = fn(&mut Ctx<'_, '_>, &Args) -> Reply;

/// How a server table entry runs.
#[derive(Clone, Copy, Debug)]
pub enum Handler {
    /// A dialect command (BF.*, CF.*, WF.*, CMS.*, TOPK.*, TDIGEST.*).
    Dialect(dialect::Command),
    /// One of the server's own.
    Native(Native),
    /// EXEC: runs the session's queued commands through the dispatcher.
    Exec,
}

/// One command of the server's table: the dialect's metadata type with the server's handler.
pub type ServerCommand = CommandInfo<Handler>;

/// A server command taking the keys `first_key..=last_key` (step 1; `(0, 0)` for none), with
/// Redis' ACL categories beyond those its flags imply (`category`, space-separated).
pub fn command(
    name: &'static str,
    arity: i32,
    flags: Flags,
    (first_key, last_key): (i32, i32),
    category: &'static str,
    handler: Native,
) -> ServerCommand {
    CommandInfo {
        name,
        command: Handler::Native(handler),
        flags,
        arity,
        first_key,
        last_key,
        step: i32::from(first_key != 0),
        category,
        docs: None,
    }
}

/// The server as a host of commands: the store, the calling session, the time the command
/// runs at, and the command table (COMMAND and ACL list it).
pub struct ServerHost<'a> {
    /// Everything shared by all clients.
    pub store: &'a mut Store,
    /// The calling client's state.
    pub session: &'a mut Session,
    /// When the command runs (Unix milliseconds).
    pub now_ms: i64,
    /// Every command.
    pub table: &'static [ServerCommand],
    /// The command called this (any case).
    pub lookup: fn(&[u8]) -> Option<&'static ServerCommand>,
    /// The command replays the append-only log (at start): the per-key cap is not enforced.
    pub replaying: bool,
}

impl ServerHost<'_> {
    /// The keyspace.
    pub fn db(&mut self) -> &mut Db {
        &mut self.store.db
    }

    /// Signals the keyspace event `event` of class `class` ([`Events`]) on `key`.
    pub fn event(&mut self, class: u32, event: &str, key: &[u8]) {
        self.store.pubsub.notify(class, event, key);
    }

    /// Drops the session's WATCHes.
    pub fn unwatch_all(&mut self) {
        self.session.unwatch_all(&mut self.store.db);
    }
}

impl dialect::Host for ServerHost<'_> {
    fn proto(&self) -> u8 {
        self.session.proto
    }
    fn config(&self) -> &bloomgate_dialect::Config {
        &self.store.config.dialect
    }
    fn memory_budget(&self) -> u64 {
        self.store.memory_budget()
    }
    fn charge(&mut self, bytes: u64) {
        bloomgate::memory::charge(bytes);
    }
    // A string is another type to the dialect: WRONGTYPE, as Redis tells a module.
    fn value(&mut self, key: &[u8]) -> Result<Option<&Value>, WrongType> {
        match self.store.db.get(key, self.now_ms) {
            None => Ok(None),
            Some(entry) => entry.data.dialect().map(Some).ok_or(WrongType),
        }
    }
    fn value_mut(&mut self, key: &[u8]) -> Result<Option<&mut Value>, WrongType> {
        self.value(key)?;
        Ok(self.store.db.value_mut(key, self.now_ms))
    }
    fn value_quiet(&mut self, key: &[u8]) -> Result<Option<&mut Value>, WrongType> {
        match self.store.db.value_quiet(key, self.now_ms) {
            None => Ok(None),
            Some(data) => data.dialect_mut().map(Some).ok_or(WrongType),
        }
    }
    fn create(&mut self, key: &[u8], value: Value) {
        self.store.db.insert(key.to_vec(), value, None);
        self.store.pubsub.notify(Events::NEW, "new", key);
    }
    fn now_ms(&self) -> u64 {
        self.now_ms.max(0) as u64
    }
    fn replaying(&self) -> bool {
        self.replaying
    }
    fn warn(&mut self, message: &str) {
        // A replayed log reports its keys past the cap once, when the load ends.
        if !self.replaying {
            eprintln!("bloomgate: warning: {message}");
        }
    }
    fn notify(&mut self, event: &str, key: &[u8]) {
        self.store.pubsub.notify(Events::MODULE, event, key);
    }
}

/// An argument as text (lossy).
pub fn text(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}
