//! The state commands run against: the [`Store`] (keyspace, settings, counters, users) shared
//! by every client, and one client's [`Session`].

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::users::Acl;
use crate::config::Config;
use crate::gate::{GateCall, GateService};
use crate::keyspace::{now_ms, Db};
use crate::pubsub::{Outbox, Registry};

/// Counters for INFO stats and metrics.
#[derive(Default, Debug)]
pub struct Stats {
    /// Commands run (`total_commands_processed`).
    pub commands_processed: u64,
    /// Connections accepted.
    pub connections_received: u64,
    /// Clients connected now.
    pub connected_clients: u64,
    /// Keys removed by active expiry.
    pub expired_keys: u64,
    /// Reads that found their key.
    pub keyspace_hits: u64,
    /// Reads that did not.
    pub keyspace_misses: u64,
    /// Commands refused with the OOM error.
    pub rejected_oom: u64,
    /// Per command name: (calls, errors).
    pub per_command: HashMap<&'static str, (u64, u64)>,
}

/// Persistence status the network layer keeps up to date (INFO persistence).
#[derive(Default, Debug, Clone)]
pub struct PersistenceInfo {
    /// The log is open.
    pub aof_enabled: bool,
    /// A snapshot is being written.
    pub bgsave_in_progress: bool,
    /// When the last snapshot succeeded (Unix seconds).
    pub last_save_unix: i64,
    /// Whether the last snapshot succeeded.
    pub last_bgsave_ok: bool,
    /// Changes since the last snapshot.
    pub changes_since_save: u64,
    /// Bytes in the current log.
    pub aof_size: u64,
    /// How long the last snapshot took.
    pub last_snapshot_ms: u64,
}

/// Everything commands execute against.
pub struct Store {
    /// The keys.
    pub db: Db,
    /// The runtime configuration.
    pub config: Config,
    /// Counters.
    pub stats: Stats,
    /// Persistence status.
    pub persistence: PersistenceInfo,
    /// The dataset is being loaded: commands without the LOADING flag get `-LOADING`.
    pub loading: bool,
    /// When the server started (Unix seconds).
    pub started_unix: i64,
    /// Write commands since start (Redis' `server.dirty`).
    pub dirty: u64,
    /// Users and their permissions.
    pub acl: Acl,
    /// Pub/sub subscriptions and keyspace notifications.
    pub pubsub: Registry,
    /// The gate behind `GATE.*` (`None`: not configured).
    pub gate: Option<Arc<GateService>>,
}

impl Store {
    /// An empty store with `config`.
    pub fn new(config: Config) -> Self {
        let mut pubsub = Registry::default();
        pubsub.configure(config.notify_events, config.pubsub_limits);
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
            acl: Acl::default(),
            pubsub,
            gate: None,
        }
    }

    /// `used_memory`: the keyspace's, plus the gate's filters unless the allocator's count
    /// (which already includes them) is the source.
    pub fn used_memory(&self) -> u64 {
        let gate = match &self.gate {
            Some(gate) if !self.db.heap_probed() => gate.memory_bytes(),
            _ => 0,
        };
        self.db.used_memory() + gate
    }

    /// Bytes a new allocation may take under `maxmemory` (under the machine's memory when
    /// unset).
    pub fn memory_budget(&self) -> u64 {
        let used = self.used_memory();
        match self.config.maxmemory {
            // What the machine can hold: its physical memory less what the keyspace uses, and
            // no more than is available now (memory, cgroup limit, address space).
            0 => self
                .config
                .memory_ceiling
                .saturating_sub(used)
                .min(bloomgate::memory::allowance(false)),
            max => max.saturating_sub(used),
        }
    }

    /// Records `n` changes to the dataset (Redis' `dirty`, and the snapshot trigger's count).
    pub fn changed(&mut self, n: u64) {
        self.dirty += n;
        self.persistence.changes_since_save += n;
    }
}

/// Work the network layer must do after a command (the command layer does no I/O).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// SAVE: snapshot, then reply.
    Save,
    /// BGSAVE: start a snapshot.
    Bgsave,
    /// SHUTDOWN; `save`: snapshot before exiting (not NOSAVE).
    Shutdown {
        /// Snapshot first.
        save: bool,
    },
    /// DEBUG RELOAD: snapshot and load it back.
    DebugReload,
    /// A GATE.* call: run it off the event loop, its result is the reply.
    Gate(GateCall),
}

/// Per-connection state.
#[derive(Debug)]
pub struct Session {
    /// CLIENT ID.
    pub id: u64,
    /// CLIENT SETNAME.
    pub name: Option<Vec<u8>>,
    /// RESP version (2 or 3).
    pub proto: u8,
    /// AUTH succeeded (or no password is needed).
    pub authenticated: bool,
    /// The ACL user the session runs as.
    pub user: Vec<u8>,
    /// Commands queued after MULTI.
    pub multi: Option<Vec<Vec<Vec<u8>>>>,
    /// A queued command was rejected: EXEC will abort.
    pub multi_failed: bool,
    /// WATCHed keys and the change sequence number when watched.
    pub watched: Vec<(Vec<u8>, u64)>,
    /// Connected from a loopback address (`enable-debug-command local`).
    pub local: bool,
    /// What the network layer must do after the command that set it (taken by it).
    pub action: Option<Action>,
    /// Close the connection once the reply is written (QUIT, SHUTDOWN).
    pub close: bool,
    /// Channels subscribed to.
    pub channels: BTreeSet<Vec<u8>>,
    /// Patterns subscribed to.
    pub patterns: BTreeSet<Vec<u8>>,
    /// Messages published to this client, written out by its connection.
    pub outbox: Arc<Outbox>,
    /// Frames the command wrote itself instead of a reply ((P)(UN)SUBSCRIBE: one frame per
    /// channel); the connection sends these and not the command's reply.
    pub frames: Option<Vec<u8>>,
}

impl Session {
    /// A new session; `needs_auth`: a password is configured.
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
            action: None,
            close: false,
            channels: BTreeSet::new(),
            patterns: BTreeSet::new(),
            outbox: Outbox::new(),
            frames: None,
        }
    }

    /// Channels and patterns subscribed to.
    pub fn subscriptions(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// Drops WATCHes (EXEC, DISCARD, UNWATCH, disconnect).
    pub fn unwatch_all(&mut self, db: &mut Db) {
        for (key, _) in self.watched.drain(..) {
            db.unwatch(&key);
        }
    }
}
