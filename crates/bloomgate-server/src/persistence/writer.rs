//! The log writer: connections queue records (under the store lock, so log order is execution
//! order); one thread writes them, fsyncs per `appendfsync`, and publishes how far the log has
//! reached. A connection replies only once its records are written to the OS — and, under
//! `always`, fsynced — so a process crash or kill loses no acknowledged write under any policy
//! (only an OS crash can, within the fsync interval of `everysec`/`no`), as in Redis.
//!
//! Write failures (a full disk) never stop the process: a partial record is cut off again
//! (`ftruncate` to the last whole record), the failure is reported through [`AofWriter::error`]
//! (the server then refuses writes with `-MISCONF`), and the thread retries until the disk
//! accepts the records; the commands waiting for them are acknowledged only then.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::log::{aof_path, encode_record, open_log};
use super::manifest::Manifest;
use super::relock;
use crate::commands::FsyncPolicy;

/// Segment tag for "whatever generation the writer has open".
const CURRENT_GENERATION: u64 = u64::MAX;
/// Pause between attempts while the disk refuses writes.
const RETRY: Duration = Duration::from_millis(200);

/// Records waiting to be written, tagged with their log generation.
struct Queue {
    segments: VecDeque<(u64, Vec<u8>)>,
    /// Total bytes ever queued (record sequence numbers are offsets in this stream).
    queued: u64,
    /// Sequence number an explicit fsync was asked for (shutdown).
    sync_requested: u64,
    shutdown: bool,
}

pub struct AofWriter {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// How far the log has reached: written (and fsynced under `always`).
    acknowledged: tokio::sync::watch::Sender<u64>,
    /// How far the log is fsynced.
    synced: tokio::sync::watch::Sender<u64>,
    policy: AtomicU8,
    size: AtomicU64,
    fsync_micros_total: AtomicU64,
    fsyncs: AtomicU64,
    /// The last write/fsync error, while it persists.
    error: Mutex<Option<String>>,
    manifest: Mutex<Manifest>,
    dir: PathBuf,
}

fn policy_code(p: FsyncPolicy) -> u8 {
    match p {
        FsyncPolicy::Always => 0,
        FsyncPolicy::Everysec => 1,
        FsyncPolicy::No => 2,
    }
}

/// What the writer thread owns.
struct Open {
    file: File,
    generation: u64,
    /// File length after the last whole record written.
    good_len: u64,
    written: u64,
    synced: u64,
    last_sync: Instant,
}

impl AofWriter {
    /// Opens (creating if needed) generation `generation` for appending, records it in the
    /// manifest and starts the writer thread.
    pub fn start(
        dir: &Path,
        generation: u64,
        policy: FsyncPolicy,
        mut manifest: Manifest,
    ) -> anyhow::Result<Arc<Self>> {
        let file = open_log(dir, &aof_path(dir, generation))?;
        manifest.last = manifest.last.max(generation);
        manifest.write(dir)?;
        let size = file.metadata()?.len();
        let writer = Arc::new(Self {
            queue: Mutex::new(Queue {
                segments: VecDeque::new(),
                queued: 0,
                sync_requested: 0,
                shutdown: false,
            }),
            wake: Condvar::new(),
            acknowledged: tokio::sync::watch::channel(0).0,
            synced: tokio::sync::watch::channel(0).0,
            policy: AtomicU8::new(policy_code(policy)),
            size: AtomicU64::new(size),
            fsync_micros_total: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
            error: Mutex::new(None),
            manifest: Mutex::new(manifest),
            dir: dir.to_path_buf(),
        });
        let open = Open {
            file,
            generation,
            good_len: size,
            written: 0,
            synced: 0,
            last_sync: Instant::now(),
        };
        let thread_writer = writer.clone();
        std::thread::Builder::new()
            .name("aof-writer".into())
            .spawn(move || thread_writer.run(open))?;
        Ok(writer)
    }

    pub fn set_policy(&self, policy: FsyncPolicy) {
        self.policy.store(policy_code(policy), Ordering::Relaxed);
    }

    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Relaxed)
    }

    /// (number of fsyncs, total fsync microseconds).
    pub fn fsync_stats(&self) -> (u64, u64) {
        (
            self.fsyncs.load(Ordering::Relaxed),
            self.fsync_micros_total.load(Ordering::Relaxed),
        )
    }

    /// The write error the log is stuck on, if any (writes are then refused with MISCONF).
    pub fn error(&self) -> Option<String> {
        relock(&self.error).clone()
    }

    /// Queues commands as one record; returns its sequence number for
    /// [`Self::wait_acknowledgeable`].
    pub fn append(&self, commands: &[Vec<Vec<u8>>]) -> u64 {
        let record = encode_record(commands);
        let mut q = relock(&self.queue);
        q.queued += record.len() as u64;
        // Records join the newest segment (its generation, or the current one if none).
        match q.segments.back_mut() {
            Some((_, bytes)) => bytes.extend_from_slice(&record),
            None => q.segments.push_back((CURRENT_GENERATION, record)),
        }
        let seq = q.queued;
        drop(q);
        self.wake.notify_one();
        seq
    }

    /// Switches later records to log generation `generation` (called under the store lock at the
    /// instant a snapshot copy is taken).
    pub fn rotate(&self, generation: u64) {
        relock(&self.queue)
            .segments
            .push_back((generation, Vec::new()));
        self.wake.notify_one();
    }

    /// Records a snapshot of `generation` in the manifest (its file is in place): the logs
    /// before it are no longer part of the dataset.
    pub fn snapshot_done(&self, generation: u64) -> io::Result<()> {
        let mut m = relock(&self.manifest);
        let mut next = *m;
        next.snapshot = Some(generation);
        next.first = generation;
        next.write(&self.dir)?;
        *m = next;
        Ok(())
    }

    /// Resolves once every record up to `seq` may be acknowledged: written to the OS, and
    /// fsynced under `always`.
    pub async fn wait_acknowledgeable(&self, seq: u64) {
        let mut rx = self.acknowledged.subscribe();
        let _ = rx.wait_for(|&d| d >= seq).await;
    }

    /// Sequence number of the last queued record.
    pub fn queued(&self) -> u64 {
        relock(&self.queue).queued
    }

    /// Whether every record up to `seq` has been written to the file (not necessarily fsynced).
    pub fn written_up_to(&self, seq: u64) -> bool {
        *self.acknowledged.borrow() >= seq
    }

    /// Writes and fsyncs everything queued so far; false if that did not happen within
    /// `timeout` (the disk keeps refusing).
    pub fn sync(&self, timeout: Duration) -> bool {
        let target = {
            let mut q = relock(&self.queue);
            q.sync_requested = q.queued;
            q.queued
        };
        self.wake.notify_one();
        let deadline = Instant::now() + timeout;
        let rx = self.synced.subscribe();
        while *rx.borrow() < target {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }

    /// Stops the thread once everything queued is written and fsynced (or at once if the disk
    /// refuses: callers [`Self::sync`] first).
    pub fn shutdown(&self) {
        relock(&self.queue).shutdown = true;
        self.wake.notify_one();
    }

    fn run(&self, mut open: Open) {
        let mut backlog: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
        loop {
            let (sync_requested, shutdown) = {
                let mut q = relock(&self.queue);
                if q.segments.is_empty() && backlog.is_empty() && !q.shutdown {
                    q = self
                        .wake
                        .wait_timeout(q, Duration::from_millis(100))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                backlog.extend(q.segments.drain(..));
                (q.sync_requested, q.shutdown)
            };
            let result = self.flush(&mut open, &mut backlog, sync_requested, shutdown);
            let always = self.policy.load(Ordering::Relaxed) == 0;
            self.acknowledged
                .send_replace(if always { open.synced } else { open.written });
            self.synced.send_replace(open.synced);
            match result {
                Ok(()) => {
                    let mut error = relock(&self.error);
                    if let Some(e) = error.take() {
                        eprintln!("bloomgate: the append-only log is writable again (was: {e})");
                    }
                }
                Err(e) => {
                    let mut error = relock(&self.error);
                    if error.is_none() {
                        eprintln!(
                            "bloomgate: writing the append-only log failed: {e}; refusing writes \
                             (MISCONF) and retrying"
                        );
                    }
                    *error = Some(e.to_string());
                    drop(error);
                    if shutdown {
                        return;
                    }
                    std::thread::sleep(RETRY);
                    continue;
                }
            }
            if shutdown && backlog.is_empty() && open.synced == open.written {
                return;
            }
        }
    }

    /// Writes the backlog in order (switching generations where a snapshot rotated the log),
    /// then fsyncs as the policy (or a pending sync request) wants.
    fn flush(
        &self,
        open: &mut Open,
        backlog: &mut VecDeque<(u64, Vec<u8>)>,
        sync_requested: u64,
        shutdown: bool,
    ) -> io::Result<()> {
        while let Some((gen, bytes)) = backlog.front_mut() {
            if *gen != CURRENT_GENERATION && *gen != open.generation {
                open.file.sync_data()?;
                open.synced = open.written;
                let file = open_log(&self.dir, &aof_path(&self.dir, *gen))?;
                {
                    let mut m = relock(&self.manifest);
                    let mut next = *m;
                    next.last = next.last.max(*gen);
                    next.write(&self.dir)?;
                    *m = next;
                }
                open.good_len = file.metadata()?.len();
                open.file = file;
                open.generation = *gen;
                self.size.store(open.good_len, Ordering::Relaxed);
                *gen = CURRENT_GENERATION;
            }
            if !bytes.is_empty() {
                if let Err(e) = open.file.write_all(bytes) {
                    // Keep whole records only: cut off what part of this one got in.
                    let _ = open.file.set_len(open.good_len);
                    return Err(e);
                }
                open.good_len += bytes.len() as u64;
                open.written += bytes.len() as u64;
                self.size.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            }
            backlog.pop_front();
        }
        let policy = self.policy.load(Ordering::Relaxed);
        let due = policy == 0
            || (policy == 1 && open.last_sync.elapsed() >= Duration::from_secs(1))
            || sync_requested > open.synced
            || shutdown;
        if open.synced < open.written && due {
            let started = Instant::now();
            if let Err(e) = open.file.sync_data() {
                if policy == 0 {
                    // After a failed fsync the kernel may have dropped the dirty pages, so a
                    // retry proves nothing; nothing unsynced was acknowledged: stop, as Redis
                    // does under `always`.
                    eprintln!("bloomgate: fatal: fsync of the append-only log failed: {e}");
                    std::process::exit(1);
                }
                return Err(e);
            }
            self.fsyncs.fetch_add(1, Ordering::Relaxed);
            self.fsync_micros_total
                .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
            open.last_sync = Instant::now();
            open.synced = open.written;
        }
        Ok(())
    }
}
