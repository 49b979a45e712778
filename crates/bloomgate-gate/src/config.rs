//! What a gate is configured with: the policy, where the filters live, their lifecycle
//! (retention, generations, sizing, memory budget), persistence of local filters and the
//! timeouts of Redis connections. Plain data, shared by the gate and its back-ends.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::{Error, Result};

/// What the gate does with a filter "maybe".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// No filter: every candidate goes to the exact path (cache, then store). The baseline.
    Exact,
    /// A "maybe" goes to the exact path; answers are exact.
    Verify,
    /// A "maybe" counts as seen: no exact lookups, over-filtering at the filter's FPR.
    Trust,
}

impl Policy {
    /// The policy's name, `exact`, `verify` or `trust`: what [`Policy::from_str`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Exact => "exact",
            Policy::Verify => "verify",
            Policy::Trust => "trust",
        }
    }
}

impl FromStr for Policy {
    type Err = Error;
    /// `exact`, `verify` or `trust`; anything else is [`Error::InvalidConfig`] naming them.
    fn from_str(name: &str) -> Result<Self> {
        [Policy::Exact, Policy::Verify, Policy::Trust]
            .into_iter()
            .find(|policy| policy.name() == name)
            .ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "policy must be verify, trust or exact, got {name:?}"
                ))
            })
    }
}

/// When [`crate::Gate::record_with`] returns, and so what a crash of the process (or of the
/// machine) can take back from a record that returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Return once the rows are queued for the recorder's next group commit, in memory (the
    /// default, what [`crate::Gate::record`] does): the fastest, and this process never shows
    /// them again, but a crash before that commit loses them — normally the last few
    /// milliseconds of records; while the store is down, everything recorded since the outage
    /// began (up to [`crate::QUEUE_ROWS`] rows). After a restart such items may be shown again.
    #[default]
    Queued,
    /// Return once the group commit holding the rows succeeded: they are in the store, and no
    /// crash takes them back. Concurrent callers share a commit (one store transaction for all
    /// the rows queued meanwhile), so this costs a caller the wait for the next commit, not a
    /// commit of its own. An error means the commit did not succeed yet: the rows stay queued
    /// (and hidden by this process) and are committed when the store answers; recording them
    /// again is safe (the store keeps the latest time of a row, once).
    Commit,
}

/// Where the scope filters live.
#[derive(Clone, Debug)]
pub enum FilterMode {
    /// In this process, within the lifecycle's memory budget.
    Local,
    /// On Redis or Valkey with the bloomgate module (`resp://HOST:PORT`), or a Redis Cluster
    /// running it (`redis+cluster://HOST:PORT[,HOST:PORT...]`), shared by every gate process
    /// using the same server and key prefix, with the rows recorded and not yet committed beside
    /// each filter. URL parameters: `pending=local` keeps those rows in this process instead
    /// (one gate process per scope; the only choice on a server without Lua scripts, like
    /// `bloomgate serve`), `wait=N` makes each record wait for N replicas (`WAIT`) within
    /// `wait_timeout=MS` (default 1000). See docs/gate.md, "The gate across machines".
    Remote {
        /// The server's (or the cluster's seed nodes') address, with its parameters.
        url: String,
        /// Every key starts with this (one filter per scope: `{key_prefix}{SCOPE}`, the scope's
        /// id in braces as the hash tag of the scope's keys). It may not hold a brace.
        key_prefix: String,
    },
}

/// Connect and read/write timeouts of every Redis connection the gate opens (remote filters and
/// the Redis store). A connection that times out is dropped, never reused mid-reply.
///
/// What a timeout does: on the remote filters, the request falls back to the exact path (its
/// candidates all read "maybe" and go to the store, under verify *and* trust: the store is the
/// truth, a slow accelerator must not turn into wrong answers) and
/// `bloomgate_filter_errors_total` counts it; on the Redis store, the call fails with
/// [`crate::Error::Timeout`] (there is nothing behind the store to fall back to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Longest wait for a TCP connection (and the server's first reply).
    pub connect: Duration,
    /// Longest wait for one read or one write on an open connection.
    pub io: Duration,
}

impl Default for Timeouts {
    /// 1 s to connect, 1 s per read or write: far above a healthy server's round trip, far
    /// below what a request can afford to hang.
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(1),
            io: Duration::from_secs(1),
        }
    }
}

/// Persistence of local filters across restarts (see `snapshot`).
#[derive(Clone, Debug)]
pub struct Persistence {
    /// Directory holding the filters' snapshot file (created if missing).
    pub dir: PathBuf,
    /// Writes a snapshot this often while the gate runs (and always at shutdown); `None`: only
    /// at shutdown.
    pub every: Option<Duration>,
    /// On restart a scope's filter catches up with the store rows seen at or after its
    /// high-water mark minus this much, to cover records whose request clock ran behind another
    /// request's for the same scope (see docs/gate.md).
    pub clock_slack_ms: u64,
}

impl Persistence {
    /// Snapshots in `dir` every 60 s and at shutdown, with a 60 s clock slack.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Persistence {
            dir: dir.into(),
            every: Some(Duration::from_secs(60)),
            clock_slack_ms: 60_000,
        }
    }
}

/// Everything a gate is configured with.
#[derive(Clone, Debug)]
pub struct GateConfig {
    /// What a filter "maybe" leads to.
    pub policy: Policy,
    /// Where the scope filters live (ignored under [`Policy::Exact`]).
    pub filters: FilterMode,
    /// Retention, generations, sizing and the memory budget of the scope filters.
    pub lifecycle: LifecycleConfig,
    /// (scope, item) answers the LRU cache holds.
    pub cache_capacity: usize,
    /// Trust mode verifies every N-th request's "maybe" answers against the store to estimate
    /// over-filtering (0 = never).
    pub trust_sample_every: u64,
    /// Background threads building local filters (0: one per available core).
    pub build_threads: usize,
    /// Local filters only: persist them here and load them on start.
    pub persistence: Option<Persistence>,
    /// Timeouts of the remote filters' connections.
    pub timeouts: Timeouts,
}

impl GateConfig {
    /// A configuration with the given policy, filters and lifecycle, a 100,000-entry cache,
    /// trust sampling every 64th request, automatic build threads, no persistence and the
    /// default timeouts.
    pub fn new(policy: Policy, filters: FilterMode, lifecycle: LifecycleConfig) -> Self {
        GateConfig {
            policy,
            filters,
            lifecycle,
            cache_capacity: 100_000,
            trust_sample_every: 64,
            build_threads: 0,
            persistence: None,
            timeouts: Timeouts::default(),
        }
    }
}

/// How scope filters follow the product's retention rule and share memory.
#[derive(Clone, Debug)]
pub struct LifecycleConfig {
    /// R: an item counts as seen for this long after it was last seen (ms).
    pub retention_ms: u64,
    /// G ≥ 2 generations; the generation window is W = ⌈R / (G−1)⌉.
    pub generations: usize,
    /// Target false-positive rate of one scope's filter (all generations together).
    pub fpr: f64,
    /// Rebuild a filter from the store once its estimated FPR exceeds this.
    pub fpr_budget: f64,
    /// Capacity per generation = expected items per generation × headroom.
    pub headroom: f64,
    /// Floor on capacity per generation (new or quiet scopes).
    pub min_items_per_generation: u64,
    /// All scopes' filters together stay within this many bytes: the least recently used are
    /// dropped (local) or deleted (remote) and rebuilt from the store on next use.
    pub memory_budget_bytes: u64,
}

impl LifecycleConfig {
    /// Retention `retention_ms` over `generations` generations, each scope's filter at a 1%
    /// false-positive rate rebuilt past 2%, 1.5× headroom over its history, at least 64 items
    /// per generation, and all filters within 256 MiB.
    pub fn new(retention_ms: u64, generations: usize) -> Self {
        LifecycleConfig {
            retention_ms,
            generations,
            fpr: 0.01,
            fpr_budget: 0.02,
            headroom: 1.5,
            min_items_per_generation: 64,
            memory_budget_bytes: 256 << 20,
        }
    }

    /// W = ⌈R/(G−1)⌉, the smallest window with (G−1)·W ≥ R.
    pub fn generation_window_ms(&self) -> u64 {
        self.retention_ms.div_ceil(self.generations as u64 - 1)
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(Error::InvalidConfig(what.to_owned()));
        if self.generations < 2 {
            return bad("generations must be at least 2 (one is always being filled)");
        }
        if self.retention_ms == 0 {
            return bad("retention must be positive");
        }
        let rates_ok = self.fpr > 0.0 && self.fpr <= self.fpr_budget && self.fpr_budget < 1.0;
        if !rates_ok {
            return bad("need 0 < fpr <= fpr_budget < 1");
        }
        if !(self.headroom >= 1.0 && self.headroom.is_finite())
            || self.min_items_per_generation == 0
        {
            return bad("need headroom >= 1 and min_items_per_generation >= 1");
        }
        Ok(())
    }
}
