//! Command flags, as Redis names them: the one flags type of every command table (the
//! dialect's and the server's own commands).
//! Also Redis' own ACL categories ([`ACL_CATEGORIES`]), which the flags imply or add to.

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
/// Refused inside MULTI (at queue time): the command replies later, off the event loop, which
/// a transaction's all-at-once execution cannot wait for (Redis' `no_multi`).
pub const NO_MULTI: Flags = Flags(1 << 13);

/// A pub/sub command (`pubsub`, `@pubsub`).
pub const PUBSUB: Flags = Flags(1 << 10);
/// Not allowed in scripts (`noscript`).
pub const NOSCRIPT: Flags = Flags(1 << 11);
/// Allowed on a replica with stale data (`stale`).
pub const STALE: Flags = Flags(1 << 12);

/// The names `COMMAND INFO` shows, in Redis' order for a server command.
pub(super) const NAMES: [(Flags, &str); 12] = [
    (WRITE, "write"),
    (READONLY, "readonly"),
    (DENYOOM, "denyoom"),
    (ADMIN, "admin"),
    (PUBSUB, "pubsub"),
    (NOSCRIPT, "noscript"),
    (LOADING, "loading"),
    (STALE, "stale"),
    (FAST, "fast"),
    (NOAUTH, "no_auth"),
    (MODULE, "module"),
    (NO_MULTI, "no_multi"),
];

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
