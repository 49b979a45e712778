//! The command table's entry type, [`CommandInfo`]: name, arity, flags, key positions, ACL
//! categories, documentation (`COMMAND INFO` / `COMMAND DOCS`) and a handler — for the
//! dialect's commands a [`Command`] (the handler and its keyspace event); [`spec`], the one
//! place a dialect command is declared, with its [`Access`] (a read, or a write and its event);
//! the argument shapes the families' documentation shares.

use super::flags::{self, Flags, ACL_CATEGORIES};
use super::host::{Args, Ctx, Host};
use crate::reply::Reply;

/// A dialect command's handler: a function of the command's context over any host (the host
/// as a trait object, so each handler is compiled once for every host).
pub type Run = fn(&mut Ctx<'_, dyn Host + '_>, &Args<'_>) -> Reply;

/// What a dialect command does to its key: reads it, or writes it — and then signals this
/// keyspace event whenever it changed it. The only way to make a write command (`spec`), so
/// no write can lack its event.
///
/// Event names: the Bloom family uses valkey-bloom's (`bloom.reserve`, `bloom.add`), so
/// subscribers written for it keep working; every other family is the command's lower-case
/// family prefix and verb (`cf.add`, `cms.incrby`, `tdigest.merge`, …). Every command that adds
/// items (ADD, MADD, INSERT and their NX forms) signals `<family>.add`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Only reads (`readonly`).
    Read,
    /// Writes (`write`) and signals the event named when it changed its key.
    Write(&'static str),
}

/// A read command.
pub(super) const READ: Access = Access::Read;

/// A write command signalling `event`.
pub(super) const fn write(event: &'static str) -> Access {
    Access::Write(event)
}

/// The dialect's handler of a table entry: the function it runs and the keyspace event it
/// signals (see [`Access`]).
#[derive(Clone, Copy)]
pub struct Command {
    run: Run,
    event: Option<&'static str>,
}

impl Command {
    /// The keyspace event this command signals when it changes its key, `None` for a read.
    pub fn event(self) -> Option<&'static str> {
        self.event
    }

    /// Runs the handler.
    pub(super) fn run(self, ctx: &mut Ctx<'_, dyn Host + '_>, args: &Args) -> Reply {
        (self.run)(ctx, args)
    }
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Command")
            .field("event", &self.event)
            .finish_non_exhaustive()
    }
}

/// A command's metadata and handler: the one command table entry type of every host. The
/// dialect's entries (`CommandInfo<Command>`) are the same for both hosts (registration,
/// COMMAND INFO / DOCS, ACL, routing) and RedisBloom 8.2's: arity, flags, key spec and
/// documentation as `COMMAND INFO` and `COMMAND DOCS` report them there. A host with commands of
/// its own (the server) uses the same type with its own handler type `C`, and runs every entry
/// through [`execute`](crate::commands::execute) (see [`Handler`](crate::commands::Handler)).
#[derive(Clone, Debug)]
pub struct CommandInfo<C = Command> {
    /// Upper-case name.
    pub name: &'static str,
    /// The handler.
    pub command: C,
    /// What Redis knows the command by ([`flags`]).
    pub flags: Flags,
    /// Redis arity: N = exactly N arguments (with the name), -N = at least N. Checked by
    /// [`execute`](crate::commands::execute) before the handler runs (as Redis checks a
    /// registered arity first); handlers add their own stricter checks.
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
    /// A second key spec, read-only (a merge's sources): the keys counted by the integer at
    /// this argument index, which follow it (Redis' `keynum` spec: `keynumidx 0`,
    /// `firstkey 1`, `keystep 1`). `None` for a command with one key.
    pub numkeys_at: Option<i32>,
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
            numkeys_at: None,
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
pub(super) const KEY_ONLY: &[Arg] = &[Arg::key()];
/// `key item`.
pub(super) const KEY_ITEM: &[Arg] = &[Arg::key(), Arg::plain("item", ArgKind::String)];
/// `key item...`.
pub(super) const KEY_ITEMS: &[Arg] = &[Arg::key(), Arg::plain("item", ArgKind::String).multiple()];
/// `key iterator` (SCANDUMP).
pub(super) const KEY_ITER: &[Arg] = &[Arg::key(), Arg::plain("iterator", ArgKind::Integer)];
/// `key iterator data` (LOADCHUNK).
pub(super) const KEY_ITER_DATA: &[Arg] = &[
    Arg::key(),
    Arg::plain("iterator", ArgKind::Integer),
    Arg::plain("data", ArgKind::String),
];

/// `[EXPANSION expansion]`.
pub(super) const EXPANSION_OPTION: Arg = Arg::group(
    "expansion",
    ArgKind::Block,
    &[Arg::plain("expansion", ArgKind::Integer)],
)
.token("EXPANSION")
.optional();
/// `[CAPACITY capacity]`.
pub(super) const CAPACITY_OPTION: Arg = Arg::group(
    "capacity",
    ArgKind::Block,
    &[Arg::plain("capacity", ArgKind::Integer)],
)
.token("CAPACITY")
.optional();
/// `[ERROR error]`.
pub(super) const ERROR_OPTION: Arg = Arg::group(
    "error",
    ArgKind::Block,
    &[Arg::plain("error", ArgKind::Double)],
)
.token("ERROR")
.optional();
/// `[NOCREATE]`.
pub(super) const NOCREATE: Arg = Arg::plain("nocreate", ArgKind::PureToken)
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
            // Redis puts `module` before `fast` for a module command, and marks one whose key
            // spec counts its keys (a merge's) `movablekeys` after `module`.
            let fast = names.iter().position(|&n| n == "fast");
            if let Some(fast) = fast {
                names.remove(fast);
            }
            if self.docs.as_ref().is_some_and(|d| d.numkeys_at.is_some()) {
                names.push("movablekeys");
            }
            if fast.is_some() {
                names.push("fast");
            }
        }
        names
    }

    /// The key arguments of `args` (the command name first) and whether the command writes
    /// each (else only reads it), in order, as the key specs find them: the keys at
    /// `first_key..=last_key` by `step` (a negative `last_key` counts from the end), then a
    /// merge's sources counted by [`Docs::numkeys_at`]. `None` when the arguments do not hold
    /// the keys the spec promises (numkeys not a positive integer, or more keys than
    /// arguments): Redis' `COMMAND GETKEYS` then answers "Invalid arguments".
    pub fn key_positions<A: AsRef<[u8]>>(&self, args: &[A]) -> Option<Vec<(usize, bool)>> {
        let mut out = Vec::new();
        let rw = self
            .docs
            .as_ref()
            .map_or(!self.flags.contains(flags::READONLY), |d| d.key_rw);
        if self.first_key > 0 {
            let last = match self.last_key {
                n if n < 0 => args.len() as i64 + i64::from(n),
                n => i64::from(n),
            };
            let mut at = i64::from(self.first_key);
            while at <= last && (at as usize) < args.len() {
                out.push((at as usize, rw));
                at += i64::from(self.step.max(1));
            }
        }
        if let Some(numkeys_at) = self.docs.as_ref().and_then(|d| d.numkeys_at) {
            let numkeys_at = numkeys_at as usize;
            let n = args
                .get(numkeys_at)
                .and_then(|a| std::str::from_utf8(a.as_ref()).ok())
                .and_then(|a| a.parse::<usize>().ok())
                .filter(|&n| n >= 1 && n < args.len() - numkeys_at)?;
            out.extend((numkeys_at + 1..=numkeys_at + n).map(|i| (i, false)));
        }
        Some(out)
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
        if self.flags.contains(flags::PUBSUB) {
            cats.push("pubsub");
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

/// A dialect command: its name, what it does to its key ([`Access`]: read, or write with its
/// keyspace event), its handler, its other flags (`DENYOOM`, `FAST`; never `WRITE` or `READONLY`, which
/// come from `access`), its ACL category, its arity and its documentation — all
/// the table, `COMMAND INFO`/`DOCS`, ACL and keyspace events know of it. A module command
/// with one key, at argument 1.
pub(crate) fn spec(
    name: &'static str,
    access: Access,
    run: Run,
    flags: Flags,
    category: &'static str,
    arity: i32,
    docs: Option<Docs>,
) -> CommandInfo {
    assert!(
        !flags.intersects(flags::WRITE.union(flags::READONLY)),
        "{name}: WRITE and READONLY come from its Access"
    );
    let (access_flag, event) = match access {
        Access::Read => (flags::READONLY, None),
        Access::Write(event) => (flags::WRITE, Some(event)),
    };
    CommandInfo {
        name,
        command: Command { run, event },
        flags: flags | access_flag | flags::MODULE,
        arity,
        first_key: 1,
        last_key: 1,
        step: 1,
        category,
        docs,
    }
}

/// `spec` for the rows of a RedisBloom family of ACL `category`: `(name, access, handler,
/// flags, arity, docs)`.
pub(super) fn family(
    category: &'static str,
) -> impl Fn(&'static str, Access, Run, Flags, i32, Option<Docs>) -> CommandInfo {
    move |name, access, run, flags, arity, docs| {
        spec(name, access, run, flags, category, arity, docs)
    }
}

/// The documented parts of a row of one of our families (WF, CBF): summary, complexity,
/// whether the key is written, the arguments.
pub(super) type OurDocs = (&'static str, &'static str, bool, &'static [Arg]);

/// `spec` for the rows of one of our families of ACL `category`, documented since bloomgate's
/// first version with the family's `key_notes`: `(name, access, handler, flags, arity, docs)`.
pub(super) fn our_family(
    category: &'static str,
    key_notes: &'static str,
) -> impl Fn(&'static str, Access, Run, Flags, i32, OurDocs) -> CommandInfo {
    move |name, access, run, flags, arity, (summary, complexity, key_rw, args)| {
        let docs = Docs {
            since: "0.1.0",
            ..Docs::redisbloom(summary, complexity, key_notes, key_rw, args)
        };
        spec(name, access, run, flags, category, arity, Some(docs))
    }
}

/// Complexity of a command over the items it names.
pub(super) const N_ITEMS: &str = "O(n) where n is the number of items";

/// The table of a sketch family (CMS, TOPK), one row per command: `fast` or `slow` (`fast`
/// where RedisBloom files the command under `@fast` without the `fast` flag), name, access
/// ([`READ`] or [`write`]`(event)`; the key spec is `RW` for a write), handler, other flags,
/// arity, the argument shapes, the complexity and the summary (documented since 2.0.0,
/// [`Docs::sketch`]), optionally a `history`.
macro_rules! sketch_table {
    ($category:literal; $($fast:ident $name:literal, $access:expr, $run:expr, $flags:expr,
        $arity:literal, $args:expr, $complexity:expr, $summary:literal
        $(, history $history:expr)?;)*) => {
        vec![$(spec(
            $name,
            $access,
            $run,
            $flags,
            sketch_table!(@category $fast $category),
            $arity,
            Some(Docs {
                $(history: $history,)?
                ..Docs::sketch(
                    $summary,
                    $complexity,
                    matches!($access, $crate::commands::Access::Write(_)),
                    $args,
                )
            }),
        )),*]
    };
    (@category fast $category:literal) => { concat!("fast ", $category) };
    (@category slow $category:literal) => { $category };
}
pub(super) use sketch_table;
