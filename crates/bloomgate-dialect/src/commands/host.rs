//! What a command runs against: the [`Host`] trait a host implements (protocol, settings,
//! memory budget, typed access to keys), the [`Ctx`] a handler gets over it (typed lookups with
//! RedisBloom's errors, the memory allowance, changes and rewrites), and the [`Outcome`] of a
//! command.

use crate::budget::{Admitted, Allowance, KeyCap, Limit, Shape};
use crate::config::{Config, Dialect};
use crate::reply::Reply;
use crate::value::{DialectType, Value};
use crate::{ERR_CAP, ERR_OOM, ERR_WRONGTYPE};

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
    /// Whether the command replays data already accepted once — replicated from a master, or
    /// loaded from an append-only log or a snapshot — which the per-key cap
    /// (`bloom-memory-usage-limit`) never refuses: a value going past it is kept and
    /// [`Host::warn`]ed about, so a replica cannot diverge nor a restart drop a key.
    fn replaying(&self) -> bool {
        false
    }
    /// Logs `message` as the host logs warnings (a replayed value past the per-key cap).
    fn warn(&mut self, message: &str) {
        let _ = message;
    }
    /// Signals the keyspace event `event` on `key` (Redis' keyspace notifications): called by
    /// [`execute`](super::execute) once after a write command that changed its key, with the
    /// command's event name ([`Access`](super::Access)). Hosts without
    /// notifications ignore it.
    fn notify(&mut self, event: &str, key: &[u8]) {
        let _ = (event, key);
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

/// How a write over a list of items — the command's last arguments (BF.MADD, CF.INSERT,
/// WF.INSERT, …) — propagates: the items that went in, and only those, after the command's own
/// arguments before them or after a family's head for them (an auto-created Bloom filter's
/// explicit parameters, a windowed filter's time). An item the write refused (the per-key cap,
/// the memory budget, a full filter) is left out, so a replica, which never refuses replicated
/// data, and a log replay hold exactly what the master holds.
#[derive(Debug, Default)]
pub(super) struct Items {
    /// How many of the command's last arguments are its items (`None`: not an item write).
    count: Option<usize>,
    /// The propagated command before its items (`None`: the command's own arguments).
    head: Option<Vec<Vec<u8>>>,
    /// Which items went in (or were already there), once one did not (`None`: every one).
    kept: Option<Vec<bool>>,
}

impl Items {
    /// What a write that changed something propagates: `before` (the commands it logged
    /// itself, such as a creation) and then, for an item write, its item command — omitted if
    /// no item went in. The command as sent when nothing had to be rewritten.
    pub(super) fn propagate(self, before: Option<Vec<Vec<Vec<u8>>>>, args: &Args) -> Propagate {
        let Some(count) = self.count else {
            return before.map_or(Propagate::Verbatim, Propagate::Commands);
        };
        if self.head.is_none() && self.kept.is_none() && before.is_none() {
            return Propagate::Verbatim;
        }
        let at = args.len().saturating_sub(count);
        let mut commands = before.unwrap_or_default();
        let mut command = self
            .head
            .unwrap_or_else(|| args[..at].iter().map(|a| a.to_vec()).collect());
        let head_len = command.len();
        let kept = |i: usize| self.kept.as_ref().is_none_or(|kept| kept[i]);
        command.extend(
            args[at..]
                .iter()
                .enumerate()
                .filter(|&(i, _)| kept(i))
                .map(|(_, item)| item.to_vec()),
        );
        if command.len() > head_len {
            commands.push(command);
        }
        if commands.is_empty() {
            Propagate::Nothing
        } else {
            Propagate::Commands(commands)
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
    pub(super) host: &'a mut H,
    pub(super) dirty: u64,
    pub(super) rewrite: Option<Vec<Vec<Vec<u8>>>>,
    /// An item write's items and how they propagate.
    pub(super) items: Items,
    /// The memory budget when first asked, charged with what the command admitted since.
    pub(super) allowance: Option<Allowance>,
    /// A keyspace event signalled after the command's own ([`Ctx::notify_after`]).
    pub(super) after: Option<&'static str>,
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

impl<H: Host> Ctx<'_, H> {
    /// Runs `f` with this context over the host as a trait object, as the dialect's handlers
    /// take it (each compiled once for every host); what `f` records — changes, rewrite,
    /// allowance — is this context's.
    pub(super) fn erased<R>(&mut self, f: impl FnOnce(&mut Ctx<'_, dyn Host + '_>) -> R) -> R {
        let mut erased = Ctx {
            host: &mut *self.host as &mut dyn Host,
            dirty: self.dirty,
            rewrite: self.rewrite.take(),
            items: std::mem::take(&mut self.items),
            allowance: self.allowance.take(),
            after: self.after.take(),
        };
        let out = f(&mut erased);
        self.dirty = erased.dirty;
        self.rewrite = erased.rewrite;
        self.items = erased.items;
        self.allowance = erased.allowance;
        self.after = erased.after;
        out
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
    /// allocates), again with the real one, capped for this value ([`Ctx::allowance_for`]). Most writes allocate nothing, so most commands never
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
                let used = self.update(key, |filter: &mut T| filter.memory());
                let real = allowance.insert(self.allowance_for(used));
                self.update(key, |filter: &mut T| change(filter, real))
            }
            done => done,
        }
    }

    /// The per-key cap as it applies to this command: `bloom-memory-usage-limit`, and whether
    /// the host replays (then the cap is reported, never enforced).
    pub fn key_cap(&self) -> KeyCap {
        KeyCap {
            limit: self.host.config().memory_usage_limit,
            replaying: self.host.replaying(),
        }
    }

    /// The command's allowance for one value that holds `used` bytes now: the memory budget
    /// and what the per-key cap leaves that value. Give it back with [`Ctx::set_allowance`].
    pub fn allowance_for(&mut self, used: u64) -> Allowance {
        let cap = self.key_cap();
        self.allowance().capped(cap, used)
    }

    /// Stores the allowance back after a filter charged it (without the per-key cap of
    /// [`Ctx::allowance_for`]; a replayed value that went past it is logged here).
    pub fn set_allowance(&mut self, allowance: Allowance) {
        if allowance.passed_cap() {
            self.host.warn(&format!(
                "a replicated or loaded value is past bloom-memory-usage-limit ({} bytes): \
                 kept, as replayed data is never refused",
                self.host.config().memory_usage_limit
            ));
        }
        self.allowance = Some(allowance.uncapped());
    }

    /// Admits `shape`, what a new value of the dialect allocates, against the command's
    /// allowance and the per-key cap; refuses with Redis' OOM error or the cap's
    /// ([`ERR_CAP`]).
    pub fn admit<S: Shape>(&mut self, shape: S) -> Result<Admitted<S>, Reply> {
        self.admit_or(shape, ERR_OOM)
    }

    /// [`Ctx::admit`] with a family's own wording (`oom`) for a refusal by the memory budget.
    pub fn admit_or<S: Shape>(
        &mut self,
        shape: S,
        oom: &'static str,
    ) -> Result<Admitted<S>, Reply> {
        let mut allowance = self.allowance_for(0);
        let admitted = allowance.admit(shape);
        self.set_allowance(allowance);
        admitted.map_err(|over| match over.limit {
            Limit::Memory => Reply::error(oom),
            Limit::KeyCap => Reply::error(ERR_CAP),
        })
    }

    /// Admits `shape` against the memory budget only: a host's own values (serve's strings),
    /// which the per-key cap of the dialect's values does not cover.
    pub fn admit_uncapped<S: Shape>(&mut self, shape: S) -> Result<Admitted<S>, Reply> {
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

    /// Signals the keyspace event `event` on `key` (a host's own commands; the dialect's are
    /// signalled by [`execute`](super::execute) from their [`Access`](super::Access)).
    pub fn notify(&mut self, event: &str, key: &[u8]) {
        self.host.notify(event, key);
    }

    /// Signals `event` on the command's key after the command's own event (valkey-bloom's
    /// `bloom.reserve` after `bloom.add` when an add created the filter).
    pub fn notify_after(&mut self, event: &'static str) {
        self.after = Some(event);
    }

    /// Logs `message` as the host logs warnings.
    pub fn warn(&mut self, message: &str) {
        self.host.warn(message);
    }

    /// Replicate and log `commands` instead of the command as sent (for an item write: before
    /// its item command, see `Ctx::items_applied`).
    pub fn propagate_as(&mut self, commands: Vec<Vec<Vec<u8>>>) {
        self.rewrite = Some(commands);
    }

    /// Says the command's last `count` arguments are items, of which those `kept` marks (every
    /// one if `None`) went in or were already there: replicas and the log get only those (see
    /// [`Items`]), after what [`Ctx::propagate_as`] logged (a creation) and after the head
    /// [`Ctx::propagate_items_after`] set, if any. An item write calls this once, after its
    /// items.
    pub(crate) fn items_applied(&mut self, count: usize, kept: Option<Vec<bool>>) {
        self.items.count = Some(count);
        self.items.kept = kept;
    }

    /// Propagates the items of an item write after `head` instead of after the command's own
    /// arguments (an auto-created filter's explicit parameters, a windowed filter's time).
    pub(crate) fn propagate_items_after(&mut self, head: Vec<Vec<u8>>) {
        self.items.head = Some(head);
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

/// The commands valkey-bloom has: in its dialect they keep their upper-case names (Valkey lists
/// and names a module command as registered) and answer as valkey-bloom's (`BF.LOAD`: 1.0's
/// only).
pub const VALKEY_BLOOM_COMMANDS: [&str; 9] = [
    "BF.LOAD",
    "BF.ADD",
    "BF.MADD",
    "BF.EXISTS",
    "BF.MEXISTS",
    "BF.CARD",
    "BF.RESERVE",
    "BF.INFO",
    "BF.INSERT",
];

/// Whether `name` (the table's upper-case name) is one of valkey-bloom's commands in `dialect`.
pub fn speaks_valkey_bloom(dialect: Dialect, name: &str) -> bool {
    dialect.valkey().is_some() && VALKEY_BLOOM_COMMANDS.contains(&name)
}

/// The name a command is registered under in `dialect`, which the server also uses in its own
/// errors (`COMMAND`, `INFO commandstats`): lower case, as RedisBloom registers, but
/// valkey-bloom's commands in its dialect, upper case as valkey-bloom registers them.
pub fn registered_name(dialect: Dialect, name: &str) -> String {
    if speaks_valkey_bloom(dialect, name) {
        name.to_string()
    } else {
        name.to_lowercase()
    }
}

/// The wrong-arity error of `name` in `dialect`, naming it as registered.
pub fn wrong_arity_in(dialect: Dialect, name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{}' command",
        registered_name(dialect, name)
    ))
}
