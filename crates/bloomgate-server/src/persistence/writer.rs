//! The log writer: connections queue records (under the store lock, so log order is execution
//! order) and publish how far the log has reached. Under `everysec`/`no` the connection writes
//! its batch's records itself right after executing it ([`AofWriter::write_through`]: one
//! `write(2)`, no thread hand-off, as Redis writes its AOF buffer before replying); a thread
//! fsyncs them in the background (on its own file handle, so a slow fsync never holds up those
//! writes), switches generations, and retries after failures. Under `always` the thread writes
//! and fsyncs (group commit). A connection replies only once its records are written to the OS
//! — and, under `always`, fsynced — so a process crash or kill loses no acknowledged write under
//! any policy (only an OS crash can, within the fsync interval of `everysec`/`no`), as in Redis.
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
use std::sync::{Arc, Condvar, Mutex, TryLockError};
use std::time::{Duration, Instant};

use super::log::{aof_path, encode_record, open_log};
use super::manifest::Manifest;
use super::FsyncPolicy;
use crate::lock::relock;

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

/// The append-only log's writer: what connections queue records into and wait on.
pub struct AofWriter {
    queue: Mutex<Queue>,
    /// The open log: whoever holds it writes (a connection, or the thread).
    open: Mutex<Open>,
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
    /// The writer thread, joined by [`Self::shutdown`].
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

fn policy_code(p: FsyncPolicy) -> u8 {
    match p {
        FsyncPolicy::Always => 0,
        FsyncPolicy::Everysec => 1,
        FsyncPolicy::No => 2,
    }
}

/// The open log file and the records taken from the queue but not yet written.
struct Open {
    file: File,
    backlog: VecDeque<(u64, Vec<u8>)>,
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
        let open = Open {
            file,
            backlog: VecDeque::new(),
            generation,
            good_len: size,
            written: 0,
            synced: 0,
            last_sync: Instant::now(),
        };
        let writer = Arc::new(Self {
            queue: Mutex::new(Queue {
                segments: VecDeque::new(),
                queued: 0,
                sync_requested: 0,
                shutdown: false,
            }),
            open: Mutex::new(open),
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
            thread: Mutex::new(None),
        });
        let thread_writer = writer.clone();
        let thread = std::thread::Builder::new()
            .name("aof-writer".into())
            .spawn(move || thread_writer.run())?;
        *relock(&writer.thread) = Some(thread);
        Ok(writer)
    }

    /// Applies a new `appendfsync` policy (CONFIG SET).
    pub fn set_policy(&self, policy: FsyncPolicy) {
        self.policy.store(policy_code(policy), Ordering::Relaxed);
    }

    fn always(&self) -> bool {
        self.policy.load(Ordering::Relaxed) == policy_code(FsyncPolicy::Always)
    }

    /// Bytes in the current log file.
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

    /// Queues commands as one record; returns its sequence number for [`Self::write_through`]
    /// and [`Self::wait_acknowledgeable`]. Under `always` the thread is woken to write and fsync
    /// it; otherwise the caller writes it with [`Self::write_through`] (the thread also picks up
    /// whatever is left queued within 100 ms).
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
        if self.always() {
            self.wake.notify_one();
        }
        seq
    }

    /// Writes everything queued so far from the calling thread, under `everysec`/`no`. True
    /// when the records up to `seq` may then be acknowledged; false when they must be awaited
    /// with [`Self::wait_acknowledgeable`]: under `always`, while the log is failing, while the
    /// thread holds the file (it may be switching generations: the caller, an event loop, must
    /// not block on that), or when a snapshot switched generations (the thread opens the next
    /// file).
    pub fn write_through(&self, seq: u64) -> bool {
        if *self.acknowledged.borrow() >= seq {
            return true;
        }
        if self.always() || relock(&self.error).is_some() {
            return false;
        }
        let mut open = match self.open.try_lock() {
            Ok(open) => open,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                self.wake.notify_one();
                return false;
            }
        };
        self.take_queued(&mut open);
        let generation = open.generation;
        if open
            .backlog
            .iter()
            .any(|&(g, _)| g != CURRENT_GENERATION && g != generation)
        {
            drop(open);
            self.wake.notify_one();
            return false;
        }
        let result = self.write_backlog(&mut open);
        advance(&self.acknowledged, open.written);
        drop(open);
        if let Err(e) = result {
            self.report(Err(e));
            self.wake.notify_one();
            return false;
        }
        true
    }

    /// Moves the queued records into the backlog of the open log.
    fn take_queued(&self, open: &mut Open) -> (u64, bool) {
        let mut q = relock(&self.queue);
        open.backlog.extend(q.segments.drain(..));
        (q.sync_requested, q.shutdown)
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
    /// refuses: callers [`Self::sync`] first), and waits for it to finish, up to `timeout`:
    /// what it still had to do includes work [`Self::sync`] does not wait for (a rotation
    /// queued after the last record opens the next log and rewrites the manifest), and nothing
    /// may touch the data directory once the server has returned. Blocks: call it off the
    /// async runtime. Returns whether the thread finished (false: a write hung past `timeout`).
    pub fn shutdown(&self, timeout: Duration) -> bool {
        relock(&self.queue).shutdown = true;
        self.wake.notify_one();
        let Some(thread) = relock(&self.thread).take() else {
            return true; // already joined
        };
        let deadline = Instant::now() + timeout;
        while !thread.is_finished() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = thread.join();
        true
    }

    fn run(&self) {
        loop {
            {
                let q = relock(&self.queue);
                if q.segments.is_empty() && !q.shutdown {
                    drop(
                        self.wake
                            .wait_timeout(q, Duration::from_millis(100))
                            .unwrap_or_else(|e| e.into_inner()),
                    );
                }
            }
            let mut open = relock(&self.open);
            let (sync_requested, shutdown) = self.take_queued(&mut open);
            let mut result = self.write_backlog(&mut open);
            let (written, pending) = (open.written, !open.backlog.is_empty());
            drop(open);
            if result.is_ok() {
                result = self.sync_if_due(sync_requested, shutdown);
            }
            let synced = relock(&self.open).synced;
            advance(
                &self.acknowledged,
                if self.always() { synced } else { written },
            );
            advance(&self.synced, synced);
            let failed = result.is_err();
            self.report(result);
            if failed {
                if shutdown {
                    return;
                }
                std::thread::sleep(RETRY);
                continue;
            }
            if shutdown && !pending && synced == written {
                return;
            }
        }
    }

    /// Publishes the outcome of a write or fsync: a failure sets [`Self::error`] (writes are
    /// refused with MISCONF); the first success after failures clears it.
    fn report(&self, result: io::Result<()>) {
        let mut error = relock(&self.error);
        match result {
            Ok(()) => {
                if let Some(e) = error.take() {
                    eprintln!("bloomgate: the append-only log is writable again (was: {e})");
                }
            }
            Err(e) => {
                if error.is_none() {
                    eprintln!(
                        "bloomgate: writing the append-only log failed: {e}; refusing writes \
                         (MISCONF) and retrying"
                    );
                }
                *error = Some(e.to_string());
            }
        }
    }

    /// Writes the backlog in order, switching generations where a snapshot rotated the log.
    fn write_backlog(&self, open: &mut Open) -> io::Result<()> {
        while let Some((gen, bytes)) = open.backlog.front_mut() {
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
            open.backlog.pop_front();
        }
        Ok(())
    }

    /// fsyncs what is written, when the policy (or a pending sync request) wants it, on a
    /// second handle to the file so writers carry on meanwhile.
    fn sync_if_due(&self, sync_requested: u64, shutdown: bool) -> io::Result<()> {
        let (file, target) = {
            let open = relock(&self.open);
            let policy = self.policy.load(Ordering::Relaxed);
            let due = policy == policy_code(FsyncPolicy::Always)
                || (policy == policy_code(FsyncPolicy::Everysec)
                    && open.last_sync.elapsed() >= Duration::from_secs(1))
                || sync_requested > open.synced
                || shutdown;
            if open.synced >= open.written || !due {
                return Ok(());
            }
            (open.file.try_clone()?, open.written)
        };
        let started = Instant::now();
        if let Err(e) = file.sync_data() {
            if self.always() {
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
        let mut open = relock(&self.open);
        open.last_sync = Instant::now();
        // A generation switch meanwhile fsynced the old file and moved `synced` on already.
        open.synced = open.synced.max(target);
        Ok(())
    }
}

/// Moves a published position forward (never back: writers publish concurrently).
fn advance(position: &tokio::sync::watch::Sender<u64>, to: u64) {
    position.send_if_modified(|at| {
        let forward = to > *at;
        if forward {
            *at = to;
        }
        forward
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::Value;
    use crate::persistence::tests::{load_default, temp_dir};

    fn add(item: &str) -> Vec<Vec<Vec<u8>>> {
        vec![vec![
            b"BF.ADD".to_vec(),
            b"k".to_vec(),
            item.as_bytes().to_vec(),
        ]]
    }

    fn acknowledged_soon(writer: &AofWriter, seq: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !writer.written_up_to(seq) {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// Under `everysec` the caller's own write puts the record in the file before
    /// `write_through` returns; after a rotation the next record lands in the next generation
    /// (the thread opens it); under `always` the thread writes and fsyncs, the caller waits. A
    /// fresh load replays every acknowledged record.
    #[test]
    fn callers_write_their_records_and_the_thread_switches_files() {
        let dir = temp_dir("writer");
        let loaded = load_default(&dir, false).unwrap();
        let generation = loaded.generation;
        let writer =
            AofWriter::start(&dir, generation, FsyncPolicy::Everysec, loaded.manifest).unwrap();
        let first_len = std::fs::metadata(aof_path(&dir, generation)).unwrap().len();
        let seq = writer.append(&add("a"));
        assert!(writer.write_through(seq));
        assert_eq!(
            std::fs::metadata(aof_path(&dir, generation)).unwrap().len(),
            first_len + encode_record(&add("a")).len() as u64
        );

        writer.rotate(generation + 1);
        let seq = writer.append(&add("b"));
        assert!(writer.write_through(seq) || acknowledged_soon(&writer, seq));
        assert!(acknowledged_soon(&writer, seq));

        writer.set_policy(FsyncPolicy::Always);
        let seq = writer.append(&add("c"));
        assert!(!writer.write_through(seq), "under always the thread writes");
        assert!(acknowledged_soon(&writer, seq));
        assert!(*writer.synced.borrow() >= seq);
        assert!(writer.shutdown(Duration::from_secs(30)));

        let reloaded = load_default(&dir, false).unwrap();
        assert_eq!(reloaded.generation, generation + 1);
        let Some(Value::Bloom(chain)) = reloaded.db.value(b"k", 0) else {
            panic!("the filter was not replayed")
        };
        assert_eq!(chain.items(), 3);
    }

    /// A rotation queued after the last record is not something `sync` waits for: `shutdown`
    /// returns only once the thread has done it (next log open, manifest rewritten), so nothing
    /// touches the directory afterwards (a server restarted on it at once saw the old thread's
    /// `manifest.tmp`).
    #[test]
    fn shutdown_waits_for_a_queued_rotation() {
        let dir = temp_dir("writer-rotation");
        let loaded = load_default(&dir, false).unwrap();
        let generation = loaded.generation;
        let writer =
            AofWriter::start(&dir, generation, FsyncPolicy::Everysec, loaded.manifest).unwrap();
        writer.append(&add("a"));
        assert!(writer.sync(Duration::from_secs(30)));
        // Everything queued is fsynced already, so this `sync` returns at once, before the
        // thread has seen the rotation: what `run` did after the final snapshot.
        writer.rotate(generation + 1);
        assert!(writer.sync(Duration::from_secs(30)));
        assert!(writer.shutdown(Duration::from_secs(30)));
        assert!(
            aof_path(&dir, generation + 1).exists(),
            "the rotation was not done"
        );
        assert!(!dir.join("manifest.tmp").exists());
        assert_eq!(relock(&writer.manifest).last, generation + 1);
        assert!(
            writer.shutdown(Duration::from_secs(30)),
            "a second call returns at once"
        );
    }
}
