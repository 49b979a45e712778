//! BF.* and CF.* command semantics over any host.
//!
//! A host (the server's keyspace, or Redis' through the module API) implements [`Host`]: the
//! calling client's protocol version, the settings, a memory budget and typed access to keys.
//! [`execute`] runs one command and returns an [`Outcome`]: the reply, how many changes it made
//! (Redis' `dirty`), and what to replicate or log. Propagation is derived here from the
//! command's write flag and the changes it reported, never left to each host: a write that
//! changed nothing propagates nothing; one that must be replayed differently from how it was
//! sent (an auto-created filter, whose shape must not depend on the replica's settings) carries
//! its rewrite.

pub mod bloom;
pub mod countmin;
pub mod cuckoo;
#[cfg(test)]
mod redisbloom_replies;
pub mod tdigest;
#[cfg(test)]
mod tdigest_fixture;
pub mod topk;
pub mod windowed;

use crate::budget::{Admitted, Allowance, Shape};
use crate::config::Config;
use crate::cuckoo::CuckooChain;
use crate::num::parse_i64;
use crate::reply::Reply;
use crate::sbchain::BloomChain;
use crate::value::{DialectType, Value};
use crate::windowed::WindowedFilter;
use crate::{ERR_NOT_FOUND, ERR_OOM, ERR_WRONGTYPE};

/// Command arguments, the command name first.
pub type Args<'a> = [&'a [u8]];

/// A key holds a value that is not one of the dialect's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrongType;

/// What a command runs against.
pub trait Host {
    /// The calling client's protocol version (2 or 3).
    fn proto(&self) -> u8;
    /// The `bf-*` / `cf-*` settings in force.
    fn config(&self) -> &Config;
    /// Bytes new allocations may take now (under `maxmemory`, or what the machine can hold).
    /// Asked at most once per command: the command's [`Allowance`] is charged from there.
    fn memory_budget(&self) -> u64;
    /// Called after a command with the bytes it admitted (and so allocated), for hosts that
    /// cache their budget between commands.
    fn charge(&mut self, bytes: u64) {
        let _ = bytes;
    }
    /// The value at `key`: `Ok(None)` if missing, `Err(WrongType)` for a non-dialect value.
    fn value(&mut self, key: &[u8]) -> Result<Option<&Value>, WrongType>;
    /// Mutable [`Host::value`]; the host accounts for the change after the command.
    fn value_mut(&mut self, key: &[u8]) -> Result<Option<&mut Value>, WrongType>;
    /// Stores `value` at `key`, which the command has just found missing.
    fn create(&mut self, key: &[u8], value: Value);
    /// The value at `key` for a read that changes it in place without that being a write (a
    /// t-digest merges its buffer before answering, as RedisBloom's does on reads): nothing is
    /// replicated, logged or signalled to WATCH, and its memory does not change. Hosts that
    /// can reach the value without opening the key for writing override this.
    fn value_quiet(&mut self, key: &[u8]) -> Result<Option<&mut Value>, WrongType> {
        self.value_mut(key)
    }
    /// The time commands see, in Unix milliseconds (time-windowed filters). Hosts with a
    /// simulated clock override it.
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// What to send to replicas and the log after a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Propagate {
    /// The command changed nothing.
    Nothing,
    /// The command as it was sent.
    Verbatim,
    /// These commands instead (each a full argument list), applied atomically.
    Commands(Vec<Vec<Vec<u8>>>),
}

impl Propagate {
    /// The commands to replicate or log for a command that was sent as `args`.
    pub fn into_commands<A: AsRef<[u8]>>(self, args: &[A]) -> Vec<Vec<Vec<u8>>> {
        match self {
            Propagate::Nothing => Vec::new(),
            Propagate::Verbatim => vec![args.iter().map(|a| a.as_ref().to_vec()).collect()],
            Propagate::Commands(commands) => commands,
        }
    }
}

/// The result of one command.
#[derive(Debug)]
pub struct Outcome {
    /// The reply to send.
    pub reply: Reply,
    /// Changes made (Redis' `dirty` increment).
    pub dirty: u64,
    /// What to replicate / log.
    pub propagate: Propagate,
}

/// What a handler sees: the host plus the command's bookkeeping.
pub struct Ctx<'a, H: Host + ?Sized> {
    host: &'a mut H,
    dirty: u64,
    rewrite: Option<Vec<Vec<Vec<u8>>>>,
    /// The memory budget when first asked, charged with what the command admitted since.
    allowance: Option<Allowance>,
}

impl<H: Host + ?Sized> std::ops::Deref for Ctx<'_, H> {
    type Target = H;
    /// The host itself, for a host's own commands (the server's natives reach its state here).
    fn deref(&self) -> &H {
        self.host
    }
}

impl<H: Host + ?Sized> std::ops::DerefMut for Ctx<'_, H> {
    fn deref_mut(&mut self) -> &mut H {
        self.host
    }
}

impl<H: Host + ?Sized> Ctx<'_, H> {
    /// The settings in force.
    pub fn config(&self) -> &Config {
        self.host.config()
    }

    /// The calling client's protocol version.
    pub fn proto(&self) -> u8 {
        self.host.proto()
    }

    /// Bytes new allocations may still take in this command.
    pub fn budget(&self) -> u64 {
        self.allowance
            .map_or_else(|| self.host.memory_budget(), |a| a.left())
    }

    /// The command's allowance: the host's memory budget when first asked, less what the
    /// command admitted since. A handler that hands it to a filter (growth on write) gives it
    /// back with [`Ctx::set_allowance`].
    pub fn allowance(&mut self) -> Allowance {
        *self
            .allowance
            .get_or_insert_with(|| Allowance::new(self.host.memory_budget()))
    }

    /// Runs `change` on the filter at `key` (which the command has just found with type `T`)
    /// with the command's allowance — but asks the host for it only if the change needs memory:
    /// first with an allowance of nothing, and if that fails for want of memory (`out_of_memory`:
    /// the change then allocated and altered nothing, as every growth admits before it
    /// allocates), again with the real one. Most writes allocate nothing, so most commands never
    /// read the memory budget. `allowance` holds the real one once asked, across calls.
    pub fn update_lazily<T: DialectType, R, E>(
        &mut self,
        key: &[u8],
        allowance: &mut Option<Allowance>,
        change: impl Fn(&mut T, &mut Allowance) -> Result<R, E>,
        out_of_memory: impl Fn(&E) -> bool,
    ) -> Result<R, E> {
        if let Some(real) = allowance {
            return self.update(key, |filter: &mut T| change(filter, real));
        }
        let mut nothing = Allowance::new(0);
        match self.update(key, |filter: &mut T| change(filter, &mut nothing)) {
            Err(e) if out_of_memory(&e) => {
                let real = allowance.insert(self.allowance());
                self.update(key, |filter: &mut T| change(filter, real))
            }
            done => done,
        }
    }

    /// Stores the allowance back after a filter charged it.
    pub fn set_allowance(&mut self, allowance: Allowance) {
        self.allowance = Some(allowance);
    }

    /// Admits `shape` against the command's allowance, or refuses with Redis' OOM error.
    pub fn admit<S: Shape>(&mut self, shape: S) -> Result<Admitted<S>, Reply> {
        let mut allowance = self.allowance();
        let admitted = allowance.admit(shape).map_err(|_| Reply::error(ERR_OOM));
        self.set_allowance(allowance);
        admitted
    }

    /// The host's clock, in Unix milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.host.now_ms()
    }

    /// Records `n` changes to the keyspace.
    pub fn changed(&mut self, n: u64) {
        self.dirty += n;
    }

    /// Replicate and log `commands` instead of the command as sent.
    pub fn propagate_as(&mut self, commands: Vec<Vec<Vec<u8>>>) {
        self.rewrite = Some(commands);
    }

    /// The filter of type `T` at `key`: `Ok(None)` if missing, WRONGTYPE if another type.
    pub fn typed<T: DialectType>(&mut self, key: &[u8]) -> Result<Option<&T>, Reply> {
        match self.host.value(key) {
            Ok(Some(value)) => T::of(value).map(Some).ok_or_else(wrongtype),
            Ok(None) => Ok(None),
            Err(WrongType) => Err(wrongtype()),
        }
    }

    /// The filter of type `T` at `key`, or the error `missing` if there is none.
    pub fn existing<T: DialectType>(
        &mut self,
        key: &[u8],
        missing: &'static str,
    ) -> Result<&T, Reply> {
        self.typed(key)?.ok_or_else(|| Reply::error(missing))
    }

    /// [`Ctx::typed`] for a read that changes the value in place (see [`Host::value_quiet`]).
    pub fn typed_quiet<T: DialectType>(&mut self, key: &[u8]) -> Result<Option<&mut T>, Reply> {
        match self.host.value_quiet(key) {
            Ok(Some(value)) => T::of_mut(value).map(Some).ok_or_else(wrongtype),
            Ok(None) => Ok(None),
            Err(WrongType) => Err(wrongtype()),
        }
    }

    /// Replaces the value at an existing `key` (same type) and counts the change.
    pub fn replace(&mut self, key: &[u8], value: Value) {
        if let Ok(Some(slot)) = self.host.value_mut(key) {
            *slot = value;
        }
        self.changed(1);
    }

    /// Whether `key` holds any value (a dialect one or not).
    pub fn key_exists(&mut self, key: &[u8]) -> bool {
        !matches!(self.host.value(key), Ok(None))
    }

    /// Mutable [`Ctx::typed`].
    pub fn typed_mut<T: DialectType>(&mut self, key: &[u8]) -> Result<Option<&mut T>, Reply> {
        match self.host.value_mut(key) {
            Ok(Some(value)) => T::of_mut(value).map(Some).ok_or_else(wrongtype),
            Ok(None) => Ok(None),
            Err(WrongType) => Err(wrongtype()),
        }
    }

    /// Runs `f` on the filter at `key`, which the command has just found with type `T`.
    pub fn update<T: DialectType, R>(&mut self, key: &[u8], f: impl FnOnce(&mut T) -> R) -> R {
        match self.typed_mut(key) {
            Ok(Some(filter)) => f(filter),
            _ => unreachable!("the caller found the key with this type"),
        }
    }

    /// Stores a new filter at a missing `key` and counts the change.
    pub fn create(&mut self, key: &[u8], value: Value) {
        self.host.create(key, value);
        self.changed(1);
    }
}

fn wrongtype() -> Reply {
    Reply::error(ERR_WRONGTYPE)
}

/// Redis' wrong-arity error (lower-case command name).
pub fn wrong_arity(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{}' command",
        name.to_lowercase()
    ))
}

/// Command flags, as Redis names them: the one flags type of every command table (the
/// dialect's and the server's own commands).
pub mod flags {
    /// A set of command flags.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct Flags(u32);

    impl Flags {
        /// No flag.
        pub const NONE: Flags = Flags(0);

        /// Whether every flag of `other` is set.
        pub const fn contains(self, other: Flags) -> bool {
            self.0 & other.0 == other.0
        }

        /// Whether any flag of `other` is set.
        pub const fn intersects(self, other: Flags) -> bool {
            self.0 & other.0 != 0
        }

        /// Both sets (`|` in const context).
        pub const fn union(self, other: Flags) -> Flags {
            Flags(self.0 | other.0)
        }
    }

    impl std::ops::BitOr for Flags {
        type Output = Flags;
        fn bitor(self, other: Flags) -> Flags {
            self.union(other)
        }
    }

    impl std::ops::BitOrAssign for Flags {
        fn bitor_assign(&mut self, other: Flags) {
            *self = self.union(other);
        }
    }

    /// Changes the keyspace.
    pub const WRITE: Flags = Flags(1);
    /// Only reads.
    pub const READONLY: Flags = Flags(1 << 1);
    /// Refused when used memory exceeds maxmemory.
    pub const DENYOOM: Flags = Flags(1 << 2);
    /// An administrative command (`@admin`, `@dangerous`).
    pub const ADMIN: Flags = Flags(1 << 3);
    /// Allowed before AUTH (`no_auth`).
    pub const NOAUTH: Flags = Flags(1 << 4);
    /// Allowed while the dataset is loading.
    pub const LOADING: Flags = Flags(1 << 5);
    /// O(1) or O(log N).
    pub const FAST: Flags = Flags(1 << 6);
    /// A module's command (every dialect command: RedisBloom is a module).
    pub const MODULE: Flags = Flags(1 << 7);
    /// Runs at once even inside MULTI (MULTI, EXEC, DISCARD, WATCH, QUIT). Not shown by
    /// `COMMAND INFO` (Redis keys this off the command itself).
    pub const TRANSACTION: Flags = Flags(1 << 8);
    /// Runs queued commands (EXEC): what they changed propagates, as one unit, although the
    /// command itself is not a write. Not shown by `COMMAND INFO`.
    pub const RUNS_QUEUED: Flags = Flags(1 << 9);

    /// The names `COMMAND INFO` shows, in Redis' order for a server command.
    pub(super) const NAMES: [(Flags, &str); 8] = [
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (NOAUTH, "no_auth"),
        (LOADING, "loading"),
        (FAST, "fast"),
        (MODULE, "module"),
    ];
}

pub use flags::Flags;

/// Redis' ACL categories in its `ACL CAT` order. A module's own categories (`bloom`, …) follow
/// them, in the order of the command table.
pub const ACL_CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Which handler a command runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Command {
    BfReserve,
    BfAdd,
    BfMadd,
    BfInsert,
    BfExists,
    BfMexists,
    BfCard,
    BfInfo,
    BfScandump,
    BfLoadchunk,
    BfDebug,
    CfReserve,
    CfAdd,
    CfAddnx,
    CfInsert,
    CfInsertnx,
    CfExists,
    CfMexists,
    CfCount,
    CfDel,
    CfCompact,
    CfInfo,
    CfDebug,
    CfScandump,
    CfLoadchunk,
    WfReserve,
    WfAdd,
    WfMadd,
    WfInsert,
    WfExists,
    WfMexists,
    WfMexistsat,
    WfCard,
    WfInfo,
    WfScandump,
    WfLoadchunk,
    TdCreate,
    TdReset,
    TdAdd,
    TdMerge,
    TdMin,
    TdMax,
    TdQuantile,
    TdCdf,
    TdRank,
    TdRevrank,
    TdByrank,
    TdByrevrank,
    TdTrimmedMean,
    TdInfo,
    CmsInitbydim,
    CmsInitbyprob,
    CmsIncrby,
    CmsQuery,
    CmsMerge,
    CmsInfo,
    TopkReserve,
    TopkAdd,
    TopkIncrby,
    TopkQuery,
    TopkCount,
    TopkList,
    TopkInfo,
}

/// A command's metadata and handler: the one command table entry type of every host. The
/// dialect's entries (`CommandInfo<Command>`) are the same for both hosts (registration,
/// COMMAND INFO / DOCS, ACL, routing) and RedisBloom 8.2's: arity, flags, key spec and
/// documentation as `COMMAND INFO` and `COMMAND DOCS` report them there. A host with commands of
/// its own (the server) uses the same type with its own handler type `C`, and runs every entry
/// through [`execute`] (see [`Handler`]).
#[derive(Clone, Debug)]
pub struct CommandInfo<C = Command> {
    /// Upper-case name.
    pub name: &'static str,
    /// The handler.
    pub command: C,
    /// What Redis knows the command by ([`flags`]).
    pub flags: Flags,
    /// Redis arity: N = exactly N arguments (with the name), -N = at least N. Checked by
    /// [`execute`] before the handler runs (as Redis checks a registered arity first); handlers
    /// add their own stricter checks.
    pub arity: i32,
    /// First key argument (1-based).
    pub first_key: i32,
    /// Last key argument.
    pub last_key: i32,
    /// Step between keys.
    pub step: i32,
    /// ACL categories beyond those the flags imply (`@read`/`@write`, `@admin`/`@dangerous`,
    /// `@fast`/`@slow`), space-separated as `RedisModule_SetCommandACLCategories` takes them: a
    /// dialect family's own (`bloom`, `cuckoo`, `windowed`), or Redis' for a server command
    /// (`keyspace dangerous`, `connection`, …); may be empty.
    pub category: &'static str,
    /// Documentation; `None` for the commands RedisBloom registers without any (BF.DEBUG,
    /// CF.DEBUG, CF.COMPACT), which also keep Redis' default arity -1.
    pub docs: Option<Docs>,
}

/// What `COMMAND DOCS` shows and the key spec `COMMAND INFO` shows.
#[derive(Clone, Debug)]
pub struct Docs {
    /// One-line summary.
    pub summary: &'static str,
    /// Time complexity.
    pub complexity: &'static str,
    /// RedisBloom version that introduced the command.
    pub since: &'static str,
    /// The key spec's notes.
    pub key_notes: &'static str,
    /// Whether the key spec is `RW` (else `RO`).
    pub key_rw: bool,
    /// The arguments, in order.
    pub args: &'static [Arg],
    /// `COMMAND DOCS`' history: `(version, change)` pairs.
    pub history: &'static [(&'static str, &'static str)],
}

impl Docs {
    /// The documentation of a RedisBloom command that dates from 1.0.0 (every one it documents
    /// but BF.CARD; override `since` with struct update syntax).
    pub const fn redisbloom(
        summary: &'static str,
        complexity: &'static str,
        key_notes: &'static str,
        key_rw: bool,
        args: &'static [Arg],
    ) -> Docs {
        Docs {
            summary,
            complexity,
            since: "1.0.0",
            key_notes,
            key_rw,
            args,
            history: &[],
        }
    }

    /// The documentation of a sketch command (CMS.*, TOPK.*: since 2.0.0, no key notes).
    pub const fn sketch(
        summary: &'static str,
        complexity: &'static str,
        key_rw: bool,
        args: &'static [Arg],
    ) -> Docs {
        Docs {
            since: "2.0.0",
            ..Docs::redisbloom(summary, complexity, "", key_rw, args)
        }
    }
}

/// One documented argument.
#[derive(Debug)]
pub struct Arg {
    /// Argument name.
    pub name: &'static str,
    /// Its type.
    pub kind: ArgKind,
    /// The literal token that introduces it, if any.
    pub token: Option<&'static str>,
    /// May be left out.
    pub optional: bool,
    /// May repeat.
    pub multiple: bool,
    /// Sub-arguments of a block / one-of.
    pub sub: &'static [Arg],
}

/// Redis' argument types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum ArgKind {
    Key,
    String,
    Integer,
    Double,
    PureToken,
    Block,
    OneOf,
}

/// `key`: the argument list of the commands that take only a key.
const KEY_ONLY: &[Arg] = &[Arg::key()];
/// `key item`.
const KEY_ITEM: &[Arg] = &[Arg::key(), Arg::plain("item", ArgKind::String)];
/// `key item...`.
const KEY_ITEMS: &[Arg] = &[Arg::key(), Arg::plain("item", ArgKind::String).multiple()];
/// `key iterator` (SCANDUMP).
const KEY_ITER: &[Arg] = &[Arg::key(), Arg::plain("iterator", ArgKind::Integer)];
/// `key iterator data` (LOADCHUNK).
const KEY_ITER_DATA: &[Arg] = &[
    Arg::key(),
    Arg::plain("iterator", ArgKind::Integer),
    Arg::plain("data", ArgKind::String),
];

/// `[EXPANSION expansion]`.
const EXPANSION_OPTION: Arg = Arg::group(
    "expansion",
    ArgKind::Block,
    &[Arg::plain("expansion", ArgKind::Integer)],
)
.token("EXPANSION")
.optional();
/// `[CAPACITY capacity]`.
const CAPACITY_OPTION: Arg = Arg::group(
    "capacity",
    ArgKind::Block,
    &[Arg::plain("capacity", ArgKind::Integer)],
)
.token("CAPACITY")
.optional();
/// `[ERROR error]`.
const ERROR_OPTION: Arg = Arg::group(
    "error",
    ArgKind::Block,
    &[Arg::plain("error", ArgKind::Double)],
)
.token("ERROR")
.optional();
/// `[NOCREATE]`.
const NOCREATE: Arg = Arg::plain("nocreate", ArgKind::PureToken)
    .token("NOCREATE")
    .optional();

impl ArgKind {
    /// The name `COMMAND DOCS` uses.
    pub fn name(self) -> &'static str {
        match self {
            ArgKind::Key => "key",
            ArgKind::String => "string",
            ArgKind::Integer => "integer",
            ArgKind::Double => "double",
            ArgKind::PureToken => "pure-token",
            ArgKind::Block => "block",
            ArgKind::OneOf => "oneof",
        }
    }
}

impl Arg {
    /// A required argument without a token.
    pub const fn plain(name: &'static str, kind: ArgKind) -> Self {
        Self {
            name,
            kind,
            token: None,
            optional: false,
            multiple: false,
            sub: &[],
        }
    }

    /// `key`.
    pub const fn key() -> Self {
        Self::plain("key", ArgKind::Key)
    }

    /// The same argument, optional.
    pub const fn optional(self) -> Self {
        Self {
            optional: true,
            ..self
        }
    }

    /// The same argument, repeatable.
    pub const fn multiple(self) -> Self {
        Self {
            multiple: true,
            ..self
        }
    }

    /// The same argument, introduced by `token`.
    pub const fn token(self, token: &'static str) -> Self {
        Self {
            token: Some(token),
            ..self
        }
    }

    /// A block / one-of of `sub`.
    pub const fn group(name: &'static str, kind: ArgKind, sub: &'static [Arg]) -> Self {
        Self {
            sub,
            ..Self::plain(name, kind)
        }
    }
}

/// The name the module registers under (`COMMAND DOCS`' `module` field).
pub const MODULE_NAME: &str = "bf";

impl<C> CommandInfo<C> {
    /// Lower-case name, as Redis lists module commands.
    pub fn lower_name(&self) -> String {
        self.name.to_ascii_lowercase()
    }

    /// The same metadata with the handler `f` makes of this one's (a host listing the
    /// dialect's commands in its own table).
    pub fn map<D>(&self, f: impl FnOnce(&C) -> D) -> CommandInfo<D> {
        CommandInfo {
            name: self.name,
            command: f(&self.command),
            flags: self.flags,
            arity: self.arity,
            first_key: self.first_key,
            last_key: self.last_key,
            step: self.step,
            category: self.category,
            docs: self.docs.clone(),
        }
    }

    /// The flag names as `COMMAND INFO` lists them: a module command's as Redis lists them
    /// (`write`, `readonly`, `denyoom`, `module`, then `fast`), a server command's in Redis'
    /// order of its own flags.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = flags::NAMES
            .iter()
            .filter(|(f, _)| self.flags.contains(*f))
            .map(|(_, n)| *n)
            .collect();
        if self.flags.contains(flags::MODULE) {
            // Redis puts `module` before `fast` for a module command.
            if let Some(fast) = names.iter().position(|&n| n == "fast") {
                names.remove(fast);
                names.push("fast");
            }
        }
        names
    }

    /// ACL categories without the `@`, in Redis' order ([`ACL_CATEGORIES`]): those implied by
    /// the flags (`read` / `write`, `admin` and `dangerous`, `fast` / `slow`) and the declared
    /// [`CommandInfo::category`] ones, then a module's own categories.
    pub fn acl_categories(&self) -> Vec<&'static str> {
        let mut cats = Vec::new();
        if self.flags.contains(flags::READONLY) {
            cats.push("read");
        }
        if self.flags.contains(flags::WRITE) {
            cats.push("write");
        }
        if self.flags.contains(flags::ADMIN) {
            cats.extend(["admin", "dangerous"]);
        }
        // RedisBloom sets a module command's categories apart from its flags: CMS.INITBYDIM
        // is `write deny-oom`, yet `@write @fast @cms` (its category says `fast cms`).
        let fast = self.flags.contains(flags::FAST)
            || self.category.split_ascii_whitespace().any(|c| c == "fast");
        cats.push(if fast { "fast" } else { "slow" });
        for c in self.category.split_ascii_whitespace() {
            if !cats.contains(&c) {
                cats.push(c);
            }
        }
        let rank = |c: &str| {
            ACL_CATEGORIES
                .iter()
                .position(|&r| r == c)
                .unwrap_or(ACL_CATEGORIES.len())
        };
        cats.sort_by_key(|c| rank(c));
        cats
    }

    /// Whether `argc` arguments (with the name) satisfy [`CommandInfo::arity`].
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = i64::from(self.arity);
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }
}

/// Every dialect command.
pub fn table() -> &'static [CommandInfo] {
    static TABLE: std::sync::OnceLock<Vec<CommandInfo>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut all = bloom::commands();
        all.extend(cuckoo::commands());
        all.extend(windowed::commands());
        all.extend(tdigest::commands());
        all.extend(countmin::commands());
        all.extend(topk::commands());
        all
    })
}

/// The dialect's own ACL categories (those not Redis' own), in the order the table first
/// names them: what a module registers with `RedisModule_AddACLCategory`.
pub fn categories() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for c in table()
        .iter()
        .flat_map(|info| info.category.split_ascii_whitespace())
    {
        if !ACL_CATEGORIES.contains(&c) && !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// The dialect command called `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static CommandInfo> {
    table()
        .iter()
        .find(|c| c.name.as_bytes().eq_ignore_ascii_case(name))
}

/// A one-key module command (keys at argument 1).
pub(crate) fn spec(
    name: &'static str,
    command: Command,
    flags: Flags,
    category: &'static str,
    arity: i32,
    docs: Option<Docs>,
) -> CommandInfo {
    CommandInfo {
        name,
        command,
        flags: flags | flags::MODULE,
        arity,
        first_key: 1,
        last_key: 1,
        step: 1,
        category,
        docs,
    }
}

/// How a table entry's command runs against a host `H`: the dialect's [`Command`]s run against
/// any host; a host's own handler type (the server's) implements it for that host.
pub trait Handler<H: Host + ?Sized> {
    /// Runs the command; reports changes and rewrites through `ctx`.
    fn call(&self, ctx: &mut Ctx<H>, args: &Args) -> Reply;
}

/// Runs `info`'s command with `args` (its name first) against `host`: the arity check, the
/// handler, and what the outcome propagates — decided here, once, for every command of every
/// host: nothing unless the command is a write (or runs queued commands, EXEC) that reported a
/// change; then its rewrite if it made one, else the command as sent.
pub fn execute<H: Host + ?Sized, C: Handler<H>>(
    host: &mut H,
    info: &CommandInfo<C>,
    args: &Args,
) -> Outcome {
    if !info.arity_ok(args.len()) {
        return Outcome {
            reply: wrong_arity(info.name),
            dirty: 0,
            propagate: Propagate::Nothing,
        };
    }
    let mut ctx = Ctx {
        host,
        dirty: 0,
        rewrite: None,
        allowance: None,
    };
    let reply = info.command.call(&mut ctx, args);
    let Ctx {
        host,
        dirty,
        rewrite,
        allowance,
    } = ctx;
    if let Some(spent) = allowance.map(|a| a.spent()).filter(|&s| s > 0) {
        host.charge(spent);
    }
    let propagate = if !info.flags.intersects(flags::WRITE | flags::RUNS_QUEUED) || dirty == 0 {
        Propagate::Nothing
    } else {
        rewrite.map_or(Propagate::Verbatim, Propagate::Commands)
    };
    Outcome {
        reply,
        dirty,
        propagate,
    }
}

impl<H: Host + ?Sized> Handler<H> for Command {
    fn call(&self, ctx: &mut Ctx<H>, args: &Args) -> Reply {
        match self {
            Command::BfReserve => bloom::reserve(ctx, args),
            Command::BfAdd => bloom::add(ctx, args),
            Command::BfMadd => bloom::madd(ctx, args),
            Command::BfInsert => bloom::insert(ctx, args),
            Command::BfExists => exists(ctx, args, BloomChain::contains),
            Command::BfMexists => mexists(ctx, args, BloomChain::contains),
            Command::BfCard => bloom::card(ctx, args),
            Command::BfInfo => bloom::info(ctx, args),
            Command::BfScandump => bloom::scandump(ctx, args),
            Command::BfLoadchunk => bloom::loadchunk(ctx, args),
            Command::BfDebug => bloom::debug(ctx, args),
            Command::CfReserve => cuckoo::reserve(ctx, args),
            Command::CfAdd => cuckoo::add(ctx, args),
            Command::CfAddnx => cuckoo::addnx(ctx, args),
            Command::CfInsert => cuckoo::insert(ctx, args),
            Command::CfInsertnx => cuckoo::insertnx(ctx, args),
            Command::CfExists => exists(ctx, args, CuckooChain::contains),
            Command::CfMexists => mexists(ctx, args, CuckooChain::contains),
            Command::CfCount => cuckoo::count(ctx, args),
            Command::CfDel => cuckoo::del(ctx, args),
            Command::CfCompact => cuckoo::compact(ctx, args),
            Command::CfInfo => cuckoo::info(ctx, args),
            Command::CfDebug => cuckoo::debug(ctx, args),
            Command::CfScandump => cuckoo::scandump(ctx, args),
            Command::CfLoadchunk => cuckoo::loadchunk(ctx, args),
            Command::WfReserve => windowed::reserve(ctx, args),
            Command::WfAdd => windowed::add(ctx, args),
            Command::WfMadd => windowed::madd(ctx, args),
            Command::WfInsert => windowed::insert(ctx, args),
            Command::WfExists => {
                let at = ctx.now_ms();
                exists(ctx, args, |f: &WindowedFilter, item| f.contains(item, at))
            }
            Command::WfMexists => {
                let at = ctx.now_ms();
                mexists(ctx, args, |f: &WindowedFilter, item| f.contains(item, at))
            }
            Command::WfMexistsat => windowed::mexistsat(ctx, args),
            Command::WfCard => windowed::card(ctx, args),
            Command::WfInfo => windowed::info(ctx, args),
            Command::WfScandump => windowed::scandump(ctx, args),
            Command::WfLoadchunk => windowed::loadchunk(ctx, args),
            Command::TdCreate => tdigest::create(ctx, args),
            Command::TdReset => tdigest::reset(ctx, args),
            Command::TdAdd => tdigest::add(ctx, args),
            Command::TdMerge => tdigest::merge(ctx, args),
            Command::TdMin => tdigest::min_max(ctx, args, false),
            Command::TdMax => tdigest::min_max(ctx, args, true),
            Command::TdQuantile => tdigest::quantile(ctx, args),
            Command::TdCdf => tdigest::cdf(ctx, args),
            Command::TdRank => tdigest::rank(ctx, args, false),
            Command::TdRevrank => tdigest::rank(ctx, args, true),
            Command::TdByrank => tdigest::by_rank(ctx, args, false),
            Command::TdByrevrank => tdigest::by_rank(ctx, args, true),
            Command::TdTrimmedMean => tdigest::trimmed_mean(ctx, args),
            Command::TdInfo => tdigest::info(ctx, args),
            Command::CmsInitbydim => countmin::init_by_dim(ctx, args),
            Command::CmsInitbyprob => countmin::init_by_prob(ctx, args),
            Command::CmsIncrby => countmin::incrby(ctx, args),
            Command::CmsQuery => countmin::query(ctx, args),
            Command::CmsMerge => countmin::merge(ctx, args),
            Command::CmsInfo => countmin::info(ctx, args),
            Command::TopkReserve => topk::reserve(ctx, args),
            Command::TopkAdd => topk::add(ctx, args),
            Command::TopkIncrby => topk::incrby(ctx, args),
            Command::TopkQuery => topk::query(ctx, args),
            Command::TopkCount => topk::count(ctx, args),
            Command::TopkList => topk::list(ctx, args),
            Command::TopkInfo => topk::info(ctx, args),
        }
    }
}

/// EXISTS `key item` over filters of type `T` (0 for a missing key or another type, as
/// [`probe`] answers), without the array MEXISTS builds.
fn exists<T: DialectType, H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    args: &Args,
    contains: impl Fn(&T, &[u8]) -> bool,
) -> Reply {
    let filter = ctx.typed::<T>(args[1]).ok().flatten();
    Reply::Bool(filter.is_some_and(|f| contains(f, args[2])))
}

/// MEXISTS `key item...` over filters of type `T`.
fn mexists<T: DialectType, H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    args: &Args,
    contains: impl Fn(&T, &[u8]) -> bool,
) -> Reply {
    Reply::Array(probe(ctx, args[1], &args[2..], contains))
}

/// Whether the filter of type `T` at `key` contains each of `items`: 0 for every item when the
/// key is missing or holds another type (EXISTS never answers WRONGTYPE, as in RedisBloom).
pub(crate) fn probe<T: DialectType, H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    key: &[u8],
    items: &Args,
    contains: impl Fn(&T, &[u8]) -> bool,
) -> Vec<Reply> {
    let filter = ctx.typed::<T>(key).ok().flatten();
    items
        .iter()
        .map(|item| Reply::Bool(filter.is_some_and(|f| contains(f, item))))
        .collect()
}

/// Adds `items` in order to the filter of type `T` at `key` (which must exist), one Bool reply
/// per item, stopping at the first error (its message is the last reply), as MADD and INSERT
/// reply. The items newly added count as changes.
pub(crate) fn add_each<T: DialectType, H: Host + ?Sized, E: Copy>(
    ctx: &mut Ctx<H>,
    key: &[u8],
    items: &Args,
    add: impl Fn(&mut T, &[u8], &mut Allowance) -> Result<bool, E>,
    message: impl Fn(E) -> &'static str,
) -> Vec<Reply> {
    let mut replies = Vec::with_capacity(items.len());
    let mut added = 0;
    let mut allowance = None;
    for item in items {
        match ctx.update_lazily(
            key,
            &mut allowance,
            |filter: &mut T, a| add(filter, item, a),
            |e| message(*e) == ERR_OOM,
        ) {
            Ok(new) => {
                added += u64::from(new);
                replies.push(Reply::Bool(new));
            }
            Err(e) => {
                replies.push(Reply::error(message(e)));
                break;
            }
        }
    }
    if let Some(allowance) = allowance {
        ctx.set_allowance(allowance);
    }
    ctx.changed(added);
    replies
}

/// BF.LOADCHUNK / CF.LOADCHUNK `key iter data`: iterator 1 on a missing key creates the filter
/// from a dump header — validated into a shape, admitted against the memory budget, then
/// allocated; later iterators write chunks into an existing filter. `bad_iter` is the family's
/// wording for a non-numeric iterator.
pub(crate) fn load_chunk<T: DialectType, H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    args: &Args,
    bad_iter: &'static str,
) -> Reply {
    let Some(iter) = parse_i64(args[2]) else {
        return Reply::error(bad_iter);
    };
    let (key, data) = (args[1], args[3]);
    let result = match ctx.typed::<T>(key) {
        Err(reply) => return reply,
        Ok(None) if iter == 1 => match T::shape(data) {
            Err(msg) => Err(msg),
            Ok(shape) => match ctx.admit(shape) {
                Err(reply) => return reply,
                Ok(admitted) => T::from_shape(admitted).map(|filter| {
                    ctx.create(key, filter.into_value());
                }),
            },
        },
        Ok(None) => Err(ERR_NOT_FOUND),
        Ok(Some(_)) => ctx
            .update(key, |f: &mut T| f.load_chunk(iter, data))
            .map(|()| ctx.changed(1)),
    };
    match result {
        Ok(()) => Reply::ok(),
        Err(msg) => Reply::error(msg),
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A minimal host over a map, so command semantics are tested without a server.
    use super::*;
    use std::collections::HashMap;

    /// Keys, settings and a budget; `memory_limit` 0 means unlimited.
    pub struct Harness {
        pub config: Config,
        pub proto: u8,
        pub memory_limit: u64,
        pub keys: HashMap<Vec<u8>, Value>,
        /// Keys holding a non-dialect value (a string, say).
        pub foreign: Vec<Vec<u8>>,
        pub last: Option<Outcome>,
        /// The simulated clock.
        pub now_ms: u64,
    }

    impl Host for Harness {
        fn proto(&self) -> u8 {
            self.proto
        }
        fn config(&self) -> &Config {
            &self.config
        }
        fn memory_budget(&self) -> u64 {
            let used: u64 = self.keys.values().map(Value::memory).sum();
            match self.memory_limit {
                0 => u64::MAX,
                limit => limit.saturating_sub(used),
            }
        }
        fn value(&mut self, key: &[u8]) -> Result<Option<&Value>, WrongType> {
            if self.foreign.iter().any(|k| k == key) {
                return Err(WrongType);
            }
            Ok(self.keys.get(key))
        }
        fn value_mut(&mut self, key: &[u8]) -> Result<Option<&mut Value>, WrongType> {
            if self.foreign.iter().any(|k| k == key) {
                return Err(WrongType);
            }
            Ok(self.keys.get_mut(key))
        }
        fn create(&mut self, key: &[u8], value: Value) {
            self.keys.insert(key.to_vec(), value);
        }
        fn now_ms(&self) -> u64 {
            self.now_ms
        }
    }

    impl Harness {
        pub fn new() -> Self {
            Self {
                config: Config::default(),
                proto: 2,
                memory_limit: 0,
                keys: HashMap::new(),
                foreign: Vec::new(),
                last: None,
                now_ms: 0,
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
            let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let info = lookup(args[0]).expect("a dialect command");
            let outcome = execute(self, info, &args);
            let reply = outcome.reply.clone();
            self.last = Some(outcome);
            reply
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

    /// The table's arity answers every command's too-short (and, for a fixed arity, too-long)
    /// argument list before its handler runs, with RedisBloom's error text.
    #[test]
    fn table_arity_is_checked_before_every_handler() {
        let mut h = Harness::new();
        for info in table() {
            let need = info.arity.unsigned_abs() as usize;
            let mut counts = vec![need - 1];
            if info.arity > 0 {
                counts.push(need + 1);
            }
            for argc in counts.into_iter().filter(|&n| n > 0) {
                let mut args = vec![info.name.as_bytes().to_vec(); 1];
                args.resize(argc, b"1".to_vec());
                assert_eq!(
                    h.run_args(&args),
                    wrong_arity(info.name),
                    "{} with {argc} arguments",
                    info.name
                );
                assert_eq!(h.last.as_ref().unwrap().propagate, Propagate::Nothing);
            }
        }
    }
}
