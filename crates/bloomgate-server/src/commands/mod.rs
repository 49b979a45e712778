//! The command layer: the command table (names, arity, flags), dispatch with Redis' checks
//! (unknown command, arity, authentication, loading, maxmemory, MULTI queueing) and the state
//! commands run against. Plain synchronous code with no I/O or async types. Redis' own commands
//! live here, one module per family; BF.* and CF.* come from `bloomgate-dialect`, run through
//! [`ServerHost`], and are logged as the dialect says they propagate.

pub mod acl;
pub mod dump;
pub mod introspect;
pub mod keys;
pub mod server;
pub mod transaction;

use std::time::{SystemTime, UNIX_EPOCH};

use bloomgate_dialect::commands::{self as dialect, Propagate, WrongType};

use crate::keyspace::{Db, Value};
use crate::resp::Reply;

pub type Args = [Vec<u8>];

pub use bloomgate_dialect::{ERR_OOM, ERR_WRONGTYPE};
pub const ERR_NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub const ERR_SYNTAX: &str = "ERR syntax error";
pub const ERR_NOAUTH: &str = "NOAUTH Authentication required.";
pub const ERR_LOADING: &str = "LOADING Redis is loading the dataset in memory";

/// How the append-only log is flushed to disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FsyncPolicy {
    /// fsync before acknowledging each write (group commit).
    Always,
    /// fsync once a second.
    Everysec,
    /// leave flushing to the OS.
    No,
}

impl FsyncPolicy {
    pub fn name(self) -> &'static str {
        match self {
            FsyncPolicy::Always => "always",
            FsyncPolicy::Everysec => "everysec",
            FsyncPolicy::No => "no",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Some(FsyncPolicy::Always),
            "everysec" => Some(FsyncPolicy::Everysec),
            "no" => Some(FsyncPolicy::No),
            _ => None,
        }
    }
}

/// Runtime configuration visible through CONFIG GET/SET.
#[derive(Clone, Debug)]
pub struct Config {
    /// The `bf-*` / `cf-*` settings.
    pub dialect: bloomgate_dialect::Config,
    /// Bytes; 0 = no limit.
    pub maxmemory: u64,
    /// What one allocation may take when `maxmemory` is 0: the machine's physical memory (set
    /// by the server at start), so a forged size fails cleanly instead of exhausting the host.
    pub memory_ceiling: u64,
    pub appendfsync: FsyncPolicy,
    pub requirepass: Option<String>,
    pub dir: String,
    pub bind: String,
    pub port: u16,
    /// Most clients connected at once.
    pub maxclients: u64,
    /// `enable-debug-command`: "no", "yes" or "local" (loopback clients only).
    pub enable_debug_command: String,
    /// Redis' protected mode (off with `--unprotected`): a non-loopback bind needs a password.
    pub protected_mode: bool,
}

impl Config {
    /// Whether protected mode requires a password: on, and bound to a non-loopback address.
    pub fn needs_password(&self) -> bool {
        self.protected_mode && !crate::server::is_loopback(&self.bind)
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            dialect: bloomgate_dialect::Config::default(),
            maxmemory: 0,
            memory_ceiling: u64::MAX,
            appendfsync: FsyncPolicy::Everysec,
            requirepass: None,
            dir: String::new(),
            bind: "127.0.0.1".into(),
            port: 6379,
            maxclients: 10_000,
            enable_debug_command: "no".into(),
            protected_mode: true,
        }
    }
}

/// Counters for INFO stats and metrics.
#[derive(Default, Debug)]
pub struct Stats {
    pub commands_processed: u64,
    pub connections_received: u64,
    pub connected_clients: u64,
    pub expired_keys: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub rejected_oom: u64,
    /// Per command name: (calls, errors).
    pub per_command: std::collections::HashMap<&'static str, (u64, u64)>,
}

/// Persistence status the network layer keeps up to date (INFO persistence).
#[derive(Default, Debug, Clone)]
pub struct PersistenceInfo {
    pub aof_enabled: bool,
    pub bgsave_in_progress: bool,
    pub last_save_unix: i64,
    pub last_bgsave_ok: bool,
    pub changes_since_save: u64,
    pub aof_size: u64,
    pub last_snapshot_ms: u64,
}

/// Everything commands execute against.
pub struct Store {
    pub db: Db,
    pub config: Config,
    pub stats: Stats,
    pub persistence: PersistenceInfo,
    pub loading: bool,
    pub started_unix: i64,
    /// Write commands since start (Redis' `server.dirty`).
    pub dirty: u64,
    /// Users and their permissions.
    pub acl: acl::Acl,
}

impl Store {
    pub fn new(config: Config) -> Self {
        Self {
            db: Db::default(),
            config,
            stats: Stats::default(),
            persistence: PersistenceInfo {
                last_bgsave_ok: true,
                ..Default::default()
            },
            loading: false,
            started_unix: now_ms() / 1000,
            dirty: 0,
            acl: acl::Acl::default(),
        }
    }

    /// Bytes a new allocation may take under `maxmemory` (under the machine's memory when
    /// unset).
    pub fn memory_budget(&self) -> u64 {
        match self.config.maxmemory {
            0 => self.config.memory_ceiling,
            max => max,
        }
        .saturating_sub(self.db.used_memory())
    }
}

/// Per-connection state.
#[derive(Debug)]
pub struct Session {
    pub id: u64,
    pub name: Option<Vec<u8>>,
    pub proto: u8,
    pub authenticated: bool,
    /// The ACL user the session runs as.
    pub user: Vec<u8>,
    /// Commands queued after MULTI.
    pub multi: Option<Vec<Vec<Vec<u8>>>>,
    /// A queued command was rejected: EXEC will abort.
    pub multi_failed: bool,
    pub watched: Vec<(Vec<u8>, u64)>,
    /// Connected from a loopback address (`enable-debug-command local`).
    pub local: bool,
}

impl Session {
    pub fn new(id: u64, needs_auth: bool) -> Self {
        Self {
            id,
            name: None,
            proto: 2,
            authenticated: !needs_auth,
            user: b"default".to_vec(),
            multi: None,
            multi_failed: false,
            watched: Vec::new(),
            local: false,
        }
    }

    /// Drops WATCHes (EXEC, DISCARD, UNWATCH, disconnect).
    pub fn unwatch_all(&mut self, db: &mut Db) {
        for (key, _) in self.watched.drain(..) {
            db.unwatch(&key);
        }
    }
}

/// Work the network layer must do after a command (the command layer does no I/O).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Save,
    Bgsave,
    /// `save`: `Some(false)` = NOSAVE, otherwise snapshot before exiting.
    Shutdown {
        save: bool,
    },
    DebugReload,
}

/// The result of running one command.
#[derive(Debug)]
pub struct Outcome {
    pub reply: Reply,
    /// Commands to append to the log (already rewritten to be deterministic on replay).
    pub log: Vec<Vec<Vec<u8>>>,
    pub action: Option<Action>,
    pub close: bool,
}

/// What a handler sees.
pub struct Ctx<'a> {
    pub store: &'a mut Store,
    pub session: &'a mut Session,
    pub now_ms: i64,
    /// Set by handlers whose effect must be logged differently from their arguments.
    pub log_as: Option<Vec<Vec<Vec<u8>>>>,
    pub action: Option<Action>,
    pub close: bool,
}

impl Ctx<'_> {
    /// Records that the command changed the dataset.
    pub fn changed(&mut self, n: u64) {
        self.store.dirty += n;
        self.store.persistence.changes_since_save += n;
    }

    pub fn db(&mut self) -> &mut Db {
        &mut self.store.db
    }
}

pub type Handler = fn(&mut Ctx, &Args) -> Reply;

/// How a command runs: a handler of this crate, or the dialect's.
#[derive(Clone, Copy)]
pub enum Exec {
    Native(Handler),
    Dialect(&'static dialect::CommandInfo),
}

/// The dialect's view of the server: the store and the calling session.
pub struct ServerHost<'a> {
    pub store: &'a mut Store,
    pub proto: u8,
    pub now_ms: i64,
}

impl dialect::Host for ServerHost<'_> {
    fn proto(&self) -> u8 {
        self.proto
    }
    fn config(&self) -> &bloomgate_dialect::Config {
        &self.store.config.dialect
    }
    fn memory_budget(&self) -> u64 {
        self.store.memory_budget()
    }
    fn value(&mut self, key: &[u8]) -> Result<Option<&Value>, WrongType> {
        Ok(self.store.db.value(key, self.now_ms))
    }
    fn value_mut(&mut self, key: &[u8]) -> Result<Option<&mut Value>, WrongType> {
        Ok(self.store.db.value_mut(key, self.now_ms))
    }
    fn value_quiet(&mut self, key: &[u8]) -> Result<Option<&mut Value>, WrongType> {
        Ok(self.store.db.value_quiet(key, self.now_ms))
    }
    fn create(&mut self, key: &[u8], value: Value) {
        self.store.db.insert(key.to_vec(), value, None);
    }
}

/// Command flags (a subset of Redis').
pub mod flags {
    pub const WRITE: u32 = 1;
    pub const READONLY: u32 = 2;
    /// Refused when used memory exceeds maxmemory.
    pub const DENYOOM: u32 = 4;
    pub const ADMIN: u32 = 8;
    /// Allowed before AUTH.
    pub const NOAUTH: u32 = 16;
    /// Allowed while the dataset is loading.
    pub const LOADING: u32 = 32;
    pub const FAST: u32 = 64;
    /// Runs immediately even inside MULTI (MULTI/EXEC/DISCARD/WATCH/QUIT/RESET).
    pub const TRANSACTION: u32 = 128;
    /// A BF.*/CF.* command (reported as a module's).
    pub const MODULE: u32 = 256;
}

pub struct CommandSpec {
    pub name: &'static str,
    /// Redis arity: N = exactly N arguments (with the name), -N = at least N.
    pub arity: i32,
    pub flags: u32,
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub exec: Exec,
}

impl CommandSpec {
    fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }

    pub fn flag_names(&self) -> Vec<&'static str> {
        let names = [
            (flags::WRITE, "write"),
            (flags::READONLY, "readonly"),
            (flags::DENYOOM, "denyoom"),
            (flags::ADMIN, "admin"),
            (flags::NOAUTH, "no_auth"),
            (flags::LOADING, "loading"),
            (flags::FAST, "fast"),
            (flags::MODULE, "module"),
        ];
        names
            .iter()
            .filter(|(f, _)| self.flags & f != 0)
            .map(|(_, n)| *n)
            .collect()
    }
}

/// A command spec with keys from `first_key` to `last_key` (step 1; 0, 0 for no keys).
pub fn command_spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    first_key: i32,
    last_key: i32,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key,
        last_key,
        step: i32::from(first_key != 0),
        exec: Exec::Native(handler),
    }
}

/// A dialect command, with RedisBloom's registered arity (checked before the handler's own).
fn dialect_command(info: &'static dialect::CommandInfo) -> CommandSpec {
    CommandSpec {
        name: info.name,
        arity: info.arity,
        flags: info.flags | flags::MODULE,
        first_key: info.first_key,
        last_key: info.last_key,
        step: info.step,
        exec: Exec::Dialect(info),
    }
}

/// All commands, from every family.
pub fn table() -> &'static [CommandSpec] {
    static TABLE: std::sync::OnceLock<Vec<CommandSpec>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut all: Vec<CommandSpec> = dialect::table().iter().map(dialect_command).collect();
        all.extend(keys::commands());
        all.extend(dump::commands());
        all.extend(server::commands());
        all.extend(transaction::commands());
        all
    })
}

pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    static INDEX: std::sync::OnceLock<std::collections::HashMap<Vec<u8>, usize>> =
        std::sync::OnceLock::new();
    let index = INDEX.get_or_init(|| {
        table()
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.as_bytes().to_vec(), i))
            .collect()
    });
    // Upper-case into a stack buffer: no allocation on the per-command path. The longest name
    // is TDIGEST.TRIMMED_MEAN (20 bytes).
    let mut upper = [0u8; 24];
    let upper = upper.get_mut(..name.len())?;
    for (u, b) in upper.iter_mut().zip(name) {
        *u = b.to_ascii_uppercase();
    }
    index.get(&*upper).map(|&i| &table()[i])
}

/// Redis' unknown-command wording: each argument quoted and followed by a space, the argument
/// list cut once it reaches 128 characters.
pub fn unknown_command(args: &Args) -> Reply {
    let mut listed = String::new();
    for arg in &args[1..] {
        if listed.len() >= 128 {
            break;
        }
        let room = 128 - listed.len();
        let text = String::from_utf8_lossy(arg);
        let shown: String = text.chars().take(room).collect();
        listed.push_str(&format!("'{shown}' "));
    }
    let name: String = String::from_utf8_lossy(&args[0])
        .chars()
        .take(128)
        .collect();
    Reply::error(format!(
        "ERR unknown command '{name}', with args beginning with: {listed}"
    ))
}

pub use bloomgate_dialect::commands::wrong_arity;

/// Runs one command for `session`. `replaying` is set while the log is replayed at start (no
/// auth, no logging, no MULTI state).
pub fn execute(store: &mut Store, session: &mut Session, args: &Args, replaying: bool) -> Outcome {
    let plain = |reply| Outcome {
        reply,
        log: Vec::new(),
        action: None,
        close: false,
    };
    let Some(first) = args.first() else {
        return plain(Reply::error(ERR_SYNTAX));
    };
    let Some(spec) = lookup(first) else {
        if session.multi.is_some() {
            session.multi_failed = true;
        }
        return plain(unknown_command(args));
    };
    // Redis' order: arity, then authentication, loading, then ACL permissions.
    if !spec.arity_ok(args.len()) {
        if session.multi.is_some() {
            session.multi_failed = true;
        }
        return plain(wrong_arity(spec.name));
    }
    if !replaying {
        if !session.authenticated && spec.flags & flags::NOAUTH == 0 {
            if session.multi.is_some() {
                session.multi_failed = true;
            }
            return plain(Reply::error(ERR_NOAUTH));
        }
        if store.loading && spec.flags & flags::LOADING == 0 {
            return plain(Reply::error(ERR_LOADING));
        }
        if let Err(reply) = acl::check(store, &session.user, spec, args) {
            if session.multi.is_some() {
                session.multi_failed = true;
            }
            return plain(reply);
        }
    }
    if let Some(queue) = session
        .multi
        .as_mut()
        .filter(|_| spec.flags & flags::TRANSACTION == 0)
    {
        queue.push(args.to_vec());
        return plain(Reply::Simple("QUEUED".into()));
    }
    run(store, session, spec, args, replaying)
}

/// Executes a resolved command (also used by EXEC for queued commands).
pub fn run(
    store: &mut Store,
    session: &mut Session,
    spec: &CommandSpec,
    args: &Args,
    replaying: bool,
) -> Outcome {
    if !replaying
        && spec.flags & flags::DENYOOM != 0
        && store.config.maxmemory > 0
        && store.db.used_memory() > store.config.maxmemory
    {
        store.stats.rejected_oom += 1;
        return Outcome {
            reply: Reply::error(ERR_OOM),
            log: Vec::new(),
            action: None,
            close: false,
        };
    }
    if let Exec::Dialect(info) = spec.exec {
        return run_dialect(store, session, spec, info, args, replaying);
    }
    let Exec::Native(handler) = spec.exec else {
        unreachable!("dialect commands returned above")
    };
    let dirty_before = store.dirty;
    let mut ctx = Ctx {
        store,
        session,
        now_ms: now_ms(),
        log_as: None,
        action: None,
        close: false,
    };
    let reply = handler(&mut ctx, args);
    let Ctx {
        store,
        log_as,
        action,
        close,
        ..
    } = ctx;
    let log = if replaying || store.dirty == dirty_before {
        Vec::new()
    } else {
        log_as.unwrap_or_else(|| vec![args.to_vec()])
    };
    count_call(store, spec, &reply);
    Outcome {
        reply,
        log,
        action,
        close,
    }
}

/// Runs a BF.*/CF.* command: the dialect decides the reply, the changes and what to log.
fn run_dialect(
    store: &mut Store,
    session: &Session,
    spec: &CommandSpec,
    info: &'static dialect::CommandInfo,
    args: &Args,
    replaying: bool,
) -> Outcome {
    let slices: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let mut host = ServerHost {
        store,
        proto: session.proto,
        now_ms: now_ms(),
    };
    let outcome = dialect::execute(&mut host, info, &slices);
    store.db.settle();
    store.dirty += outcome.dirty;
    store.persistence.changes_since_save += outcome.dirty;
    let log = match outcome.propagate {
        _ if replaying => Vec::new(),
        Propagate::Nothing => Vec::new(),
        Propagate::Verbatim => vec![args.to_vec()],
        Propagate::Commands(commands) => commands,
    };
    count_call(store, spec, &outcome.reply);
    Outcome {
        reply: outcome.reply,
        log,
        action: None,
        close: false,
    }
}

fn count_call(store: &mut Store, spec: &CommandSpec, reply: &Reply) {
    store.stats.commands_processed += 1;
    let counters = store.stats.per_command.entry(spec.name).or_default();
    counters.0 += 1;
    if reply.is_error() {
        counters.1 += 1;
    }
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub use bloomgate_dialect::num::{is, parse_f64};

pub fn text(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

/// Redis glob matching (`*`, `?`, `[...]` with ranges and `^`, `\` escapes).
pub fn glob_match(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    let (mut p, mut t) = (0, 0);
    let (mut star_p, mut star_t) = (None, 0);
    while t < text.len() {
        let mut matched = false;
        let mut next_p = p;
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    star_p = Some(p);
                    star_t = t;
                    p += 1;
                    continue;
                }
                b'?' => {
                    matched = true;
                    next_p = p + 1;
                }
                b'[' => {
                    let mut i = p + 1;
                    let negate = pattern.get(i) == Some(&b'^');
                    if negate {
                        i += 1;
                    }
                    let mut hit = false;
                    while i < pattern.len() && pattern[i] != b']' {
                        if pattern[i] == b'\\' && i + 1 < pattern.len() {
                            hit |= eq(pattern[i + 1], text[t]);
                            i += 2;
                        } else if i + 2 < pattern.len()
                            && pattern[i + 1] == b'-'
                            && pattern[i + 2] != b']'
                        {
                            let (lo, hi) = (
                                pattern[i].min(pattern[i + 2]),
                                pattern[i].max(pattern[i + 2]),
                            );
                            let c = if nocase {
                                text[t].to_ascii_lowercase()
                            } else {
                                text[t]
                            };
                            hit |= (lo..=hi).contains(&c) || (lo..=hi).contains(&text[t]);
                            i += 3;
                        } else {
                            hit |= eq(pattern[i], text[t]);
                            i += 1;
                        }
                    }
                    matched = hit != negate;
                    next_p = (i + 1).min(pattern.len());
                }
                b'\\' if p + 1 < pattern.len() => {
                    matched = eq(pattern[p + 1], text[t]);
                    next_p = p + 2;
                }
                c => {
                    matched = eq(c, text[t]);
                    next_p = p + 1;
                }
            }
        }
        if matched {
            p = next_p;
            t += 1;
        } else if let Some(sp) = star_p {
            p = sp + 1;
            star_t += 1;
            t = star_t;
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// A store and an authenticated RESP2 session for unit tests.
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

        pub fn run(&mut self, line: &str) -> Reply {
            let args: Vec<Vec<u8>> = line
                .split_whitespace()
                .map(|w| w.as_bytes().to_vec())
                .collect();
            self.run_args(&args)
        }

        pub fn run_args(&mut self, args: &[Vec<u8>]) -> Reply {
            execute(&mut self.store, &mut self.session, args, false).reply
        }
    }

    pub fn err(msg: &str) -> Reply {
        Reply::error(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    /// `lookup` upper-cases into a fixed buffer: every name must fit it, in any case.
    #[test]
    fn every_command_is_found_by_lookup() {
        for spec in table() {
            let lower = spec.name.to_lowercase();
            assert!(lookup(lower.as_bytes()).is_some(), "{}", spec.name);
        }
    }

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

    #[test]
    fn glob() {
        assert!(glob_match(b"bf-*", b"bf-error-rate", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"*", b"", false));
        assert!(!glob_match(b"a*b", b"acbd", false));
        assert!(glob_match(b"a\\*", b"a*", false));
        assert!(glob_match(b"MAXMEM*", b"maxmemory", true));
    }
}
