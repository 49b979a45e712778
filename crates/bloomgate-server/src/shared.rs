//! The state the network layer shares between connections and background tasks: the store
//! behind its lock, the log writer, snapshots (taken, retried, reloaded) and the shutdown
//! request.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use tokio::sync::Notify;

use crate::commands::{Replayer, Store};
use crate::gate::Recorded;
use crate::keyspace::now_ms;
use crate::lock::relock;
use crate::metrics::Latency;
use crate::persistence::{self, AofWriter};

/// State shared by all connections.
pub struct Shared {
    /// The store, locked by each batch of commands.
    pub store: Mutex<Store>,
    /// Set once the data is loaded.
    pub aof: OnceLock<Arc<AofWriter>>,
    /// The data directory.
    pub dir: PathBuf,
    /// The next CLIENT ID.
    pub next_client_id: AtomicU64,
    /// Connected clients (checked against `max_clients` at accept).
    pub clients: AtomicUsize,
    /// `maxclients`, lowered to what the open-file limit allows after the reserve.
    pub max_clients: usize,
    /// Set (under the store lock) when shutdown starts: no command runs after it.
    pub stopping: AtomicBool,
    /// Why the last snapshot failed, while no later one succeeded (writes get MISCONF).
    pub snapshot_error: Mutex<Option<String>>,
    /// When the last snapshot was attempted (failed snapshots are retried).
    pub last_snapshot_attempt: Mutex<Instant>,
    /// Newest log generation (a snapshot starts the next one).
    pub generation: AtomicU64,
    /// One snapshot at a time.
    pub snapshot_lock: tokio::sync::Mutex<()>,
    /// Gate rows the log held at start while no gate is configured: carried into every new log
    /// generation until a gate takes them.
    pub gate_rows_held: Mutex<Vec<Recorded>>,
    /// Size of the log right after the last snapshot (compaction trigger baseline).
    pub log_baseline: AtomicU64,
    /// Notified when a shutdown is requested (SHUTDOWN, the caller's shutdown future).
    pub shutdown: Notify,
    /// Whether a requested shutdown should snapshot first.
    pub shutdown_save: AtomicBool,
    /// Command latency histogram.
    pub latency: Latency,
    /// The allocator probe installed into every keyspace loaded.
    pub heap_probe: Option<fn() -> u64>,
}

/// Redis' wording when writes are refused because the data cannot be persisted.
const MISCONF_SNAPSHOT: &str = "MISCONF Redis is configured to save RDB snapshots, but it's \
    currently unable to persist to disk. Commands that may modify the data set are disabled, \
    because this instance is configured to report errors during writes if RDB snapshotting \
    fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about \
    the RDB error.";

/// Pause before a failed snapshot is tried again.
pub const SNAPSHOT_RETRY: Duration = Duration::from_secs(2);

impl Shared {
    /// The `-MISCONF` error writes get while the log or the snapshot cannot be written.
    pub fn misconf(&self) -> Option<String> {
        if let Some(e) = self.aof.get().and_then(|aof| aof.error()) {
            return Some(format!("MISCONF Errors writing to the AOF file: {e}"));
        }
        relock(&self.snapshot_error)
            .is_some()
            .then(|| MISCONF_SNAPSHOT.to_string())
    }

    /// Takes a point-in-time copy (O(keys), values shared copy-on-write), switches the log to a
    /// new generation at that instant, writes the snapshot off the async threads, records it in
    /// the manifest, then drops the logs it covers. A failure (full disk) leaves the previous
    /// files in place, removes the partial snapshot, and sets [`Self::snapshot_error`].
    ///
    /// The logs it drops hold the gate's rows too, which are not in the snapshot: the store has
    /// them once committed. Those still uncommitted after the switch (the gate's queue, copied
    /// after it: a row logged before it was queued before that) are written at the head of the
    /// new generation, durably before the manifest lets the old logs go.
    pub async fn snapshot(self: &Arc<Self>) -> anyhow::Result<()> {
        let _one_at_a_time = self.snapshot_lock.lock().await;
        self.snapshot_locked().await
    }

    /// [`Self::snapshot`], the caller holding [`Self::snapshot_lock`].
    async fn snapshot_locked(self: &Arc<Self>) -> anyhow::Result<()> {
        let Some(aof) = self.aof.get() else {
            bail!("the dataset is still loading")
        };
        *relock(&self.last_snapshot_attempt) = Instant::now();
        let (entries, generation, changes, gate) = {
            let mut store = relock(&self.store);
            let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
            aof.rotate(generation);
            store.persistence.bgsave_in_progress = true;
            (
                store.db.snapshot(),
                generation,
                store.persistence.changes_since_save,
                store.gate.clone(),
            )
        };
        let carried = match gate {
            Some(gate) => gate.uncommitted(),
            None => relock(&self.gate_rows_held).clone(),
        };
        let carried = (!carried.is_empty())
            .then(|| aof.append(&carried.iter().map(Recorded::command).collect::<Vec<_>>()));
        let started = Instant::now();
        let dir = self.dir.clone();
        let writer = aof.clone();
        let result = tokio::task::spawn_blocking(move || {
            if carried.is_some() && !writer.sync(Duration::from_secs(30)) {
                bail!(
                    "the gate's uncommitted rows could not be written to the next log generation \
                     ({})",
                    writer.error().unwrap_or_else(|| "timed out".into())
                );
            }
            persistence::write_snapshot_owned(&dir, entries, generation)?;
            writer.snapshot_done(generation)?;
            persistence::remove_logs_before(&dir, generation)?;
            anyhow::Ok(())
        })
        .await
        .context("snapshot task")
        .and_then(|r| r.with_context(|| format!("writing snapshot in {}", self.dir.display())));
        let mut store = relock(&self.store);
        let p = &mut store.persistence;
        p.bgsave_in_progress = false;
        p.last_bgsave_ok = result.is_ok();
        let mut error = relock(&self.snapshot_error);
        match &result {
            Ok(()) => {
                p.last_save_unix = now_ms() / 1000;
                p.changes_since_save = p.changes_since_save.saturating_sub(changes);
                p.last_snapshot_ms = started.elapsed().as_millis() as u64;
                self.log_baseline.store(aof.size(), Ordering::Relaxed);
                if error.take().is_some() {
                    eprintln!("bloomgate: snapshot succeeded again: accepting writes");
                }
            }
            Err(e) => *error = Some(format!("{e:#}")),
        }
        result
    }

    /// DEBUG RELOAD: snapshot, then rebuild the keyspace from disk, with writes held off. No
    /// other snapshot starts until the files are read back (one started in between, by BGSAVE
    /// or the log's compaction, would replace `dump.bgs` and remove the logs being read).
    pub async fn reload(self: &Arc<Self>) -> anyhow::Result<()> {
        let _no_other_snapshot = self.snapshot_lock.lock().await;
        self.snapshot_locked().await?;
        let shared = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut store = relock(&shared.store);
            let aof = shared.aof.get().expect("loaded");
            // Everything queued must be in the files before they are read back.
            let target = aof.queued();
            while !aof.written_up_to(target) {
                std::thread::sleep(Duration::from_millis(1));
            }
            let mut replayer = Replayer::new(store.config.clone());
            let mut db = persistence::load(&shared.dir, false, &mut replayer)?.db;
            db.set_heap_probe(shared.heap_probe);
            store.db = db;
            Ok(())
        })
        .await
        .context("reload task")?
    }

    /// Asks the server to stop (SHUTDOWN, signals).
    pub fn request_shutdown(&self, save: bool) {
        self.shutdown_save.store(save, Ordering::SeqCst);
        self.shutdown.notify_one();
    }
}
