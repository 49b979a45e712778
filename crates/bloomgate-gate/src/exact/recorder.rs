//! Asynchronous, batched recording of served items: the request path hands its rows to a
//! bounded queue and returns; one background thread commits whatever has queued up in one store
//! call (group commit: one transaction, one prepared upsert, rows sorted by (scope, item) for
//! B-tree locality).
//!
//! Why: one SQLite transaction per request wrote ~7 KB of WAL per recorded row and held the
//! writer lock on the request path. Nothing is lost for the no-duplicate promise: before a row
//! is queued it is already in the [`Pending`](crate::exact::pending::Pending) overlay, the cache and the
//! scope's filter (or, for remote filters, written there by this thread right after the store
//! commit), and it leaves the overlay only after both.
//!
//! The queue holds at most [`QUEUE_ROWS`] rows. While the store keeps up, a `record` that finds
//! it full waits (up to [`ROOM_WAIT`]: backpressure that shows in the request latency) instead
//! of growing memory. A failed commit is not sticky: its rows stay at the head of the queue (and
//! in the overlay: still never shown by this process) and are committed again after a backoff
//! ([`RETRY_FIRST`] doubling up to [`RETRY_MAX`]) until the store takes them; meanwhile `record`
//! accepts what still fits without waiting and reports how many rows it took, so a caller learns
//! which items were not recorded instead of having them dropped silently, and `flush` returns the
//! commit's error. Once the store answers again everything queued is committed and the gate
//! works on, without a restart.
//!
//! Durability: a row is in memory until its group commit. A caller that must not lose it to a
//! crash either waits for that commit ([`Recorder::wait_committed`]: the library's
//! `Durability::Commit`, sharing the commit with every row queued meanwhile) or keeps it in a
//! durable log of its own and puts it back after a restart ([`Recorder::push`] unbounded: serve's
//! append-only log), carrying the rows still [`uncommitted`](Recorder::uncommitted) when it
//! drops older log records.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::exact::core::Core;
use crate::filters::FilterBackend;
use crate::{Error, Result, Seen};

/// Rows the queue holds (committed or not yet) before `record` waits for, or during a store
/// outage refuses, more.
pub const QUEUE_ROWS: usize = 262_144;
/// Most rows one commit takes (a batch is whatever queued up while the previous one committed).
pub const BATCH_ROWS: usize = 8_192;
/// Longest a `record` waits for room in a full queue while the store is healthy.
pub const ROOM_WAIT: Duration = Duration::from_secs(2);
/// The pause after a first failed commit; it doubles with each further failure.
pub const RETRY_FIRST: Duration = Duration::from_millis(50);
/// The longest pause between two commit attempts.
pub const RETRY_MAX: Duration = Duration::from_secs(2);
/// Attempts made at shutdown for what is still queued while the store keeps failing.
const SHUTDOWN_ATTEMPTS: u32 = 3;

/// The queue and the commit progress, under one lock.
#[derive(Default)]
struct State {
    /// Rows not yet committed, oldest first (the head is the batch being committed).
    rows: VecDeque<(u64, Seen)>,
    /// Rows admitted by `reserve` and not yet queued.
    reserved: usize,
    /// Rows ever queued, and rows ever committed (a flush waits for the second to reach the
    /// first as it was when the flush started).
    queued: u64,
    committed: u64,
    /// Failed commit attempts so far, and the last one's error (cleared by a success).
    failures: u64,
    failing: Option<String>,
    /// The gate is shutting down: commit what is queued, then stop.
    closing: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled on every change of the state (rows queued, a commit done or failed, closing).
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Where a [`Recorder::push`] left its rows in the queue: what
/// [`Recorder::wait_committed`] waits for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Place {
    /// Rows ever queued once these were (they are committed when `committed` reaches it).
    position: u64,
    /// Failed commits before they were queued (a later one fails the wait).
    failures: u64,
}

pub(crate) struct Recorder {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Recorder {
    /// Starts the recorder thread: each group commit goes to `core`'s store, then to
    /// `filters` (back-ends that batch their writes).
    pub fn start(core: Arc<Core>, filters: Arc<dyn FilterBackend>) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("bloomgate-recorder".into())
            .spawn(move || commit_loop(&core, &*filters, &worker))
            .expect("spawning the recorder thread");
        Recorder {
            shared,
            thread: Some(thread),
        }
    }

    /// Admits up to `rows` rows into the queue and returns how many it admitted: all of them
    /// unless the queue is full — then, while the store is healthy, it waits up to
    /// [`ROOM_WAIT`] for room; during an outage (the last commit failed) it does not wait. The
    /// admitted rows must then be [`queued`](Self::queue) or [`released`](Self::release).
    pub fn reserve(&self, rows: usize) -> usize {
        let deadline = Instant::now() + ROOM_WAIT;
        let mut state = self.shared.lock();
        loop {
            let room = QUEUE_ROWS.saturating_sub(state.rows.len() + state.reserved);
            let now = Instant::now();
            if room >= rows || state.failing.is_some() || state.closing || now >= deadline {
                let admitted = room.min(rows);
                state.reserved += admitted;
                return admitted;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Gives back `rows` admitted rows that will not be queued.
    pub fn release(&self, rows: usize) {
        let mut state = self.shared.lock();
        state.reserved -= rows.min(state.reserved);
        self.shared.changed.notify_all();
    }

    /// Queues one request's rows for the next group commit: rows admitted by
    /// [`reserve`](Self::reserve) (`admitted`), or rows a durable log accepted before a restart
    /// (not admitted: the bound does not apply to them, they were taken once already). Returns
    /// the place [`wait_committed`](Self::wait_committed) takes.
    pub fn push(&self, scope: u64, rows: Vec<Seen>, admitted: bool) -> Place {
        let mut state = self.shared.lock();
        if admitted {
            state.reserved -= rows.len().min(state.reserved);
        }
        state.queued += rows.len() as u64;
        state
            .rows
            .extend(rows.into_iter().map(|seen| (scope, seen)));
        self.shared.changed.notify_all();
        Place {
            position: state.queued,
            failures: state.failures,
        }
    }

    /// Waits until the group commit holding the rows at `place` (and everything queued before
    /// them) succeeded; returns the commit's error if an attempt fails meanwhile (the rows stay
    /// queued and are committed when the store answers).
    pub fn wait_committed(&self, place: Place) -> Result<()> {
        let mut state = self.shared.lock();
        loop {
            if state.committed >= place.position {
                return Ok(());
            }
            if state.failures > place.failures {
                let why = state.failing.clone().unwrap_or_default();
                return Err(Error::Recording(format!(
                    "{why} (the rows stay queued and are committed when the store answers)"
                )));
            }
            state = self
                .shared
                .changed
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Waits until everything queued before this call has been committed; returns the commit's
    /// error if an attempt fails meanwhile (the rows stay queued and are retried).
    pub fn flush(&self) -> Result<()> {
        let place = {
            let state = self.shared.lock();
            Place {
                position: state.queued,
                failures: state.failures,
            }
        };
        self.wait_committed(place)
    }

    /// The rows queued and not yet committed, oldest first (the batch being committed
    /// included: it leaves the queue only once the store took it).
    pub fn uncommitted(&self) -> Vec<(u64, Seen)> {
        self.shared.lock().rows.iter().copied().collect()
    }

    /// Rows queued and not yet committed.
    pub fn backlog(&self) -> usize {
        self.shared.lock().rows.len()
    }
}

impl Drop for Recorder {
    /// Commits what is queued (a few attempts while the store fails), then stops the thread.
    fn drop(&mut self) {
        self.shared.lock().closing = true;
        self.shared.changed.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn commit_loop(core: &Core, filters: &dyn FilterBackend, shared: &Shared) {
    let mut batch: Vec<(u64, Seen)> = Vec::with_capacity(BATCH_ROWS);
    let mut backoff = RETRY_FIRST;
    let mut failed_closing = 0;
    loop {
        {
            let mut state = shared.lock();
            while state.rows.is_empty() && !state.closing {
                state = shared
                    .changed
                    .wait(state)
                    .unwrap_or_else(|e| e.into_inner());
            }
            if state.rows.is_empty() || failed_closing >= SHUTDOWN_ATTEMPTS {
                return;
            }
            batch.clear();
            batch.extend(state.rows.iter().take(BATCH_ROWS).copied());
        }
        batch.sort_unstable_by_key(|&(scope, s)| (scope, s.item, s.at_ms));
        let result = core.commit(&batch, |rows| filters.commit(rows));
        let mut state = shared.lock();
        match result {
            Ok(()) => {
                state.rows.drain(..batch.len());
                state.committed += batch.len() as u64;
                state.failing = None;
                backoff = RETRY_FIRST;
                shared.changed.notify_all();
            }
            Err(err) => {
                state.failures += 1;
                failed_closing += u32::from(state.closing);
                state.failing = Some(err.to_string());
                shared.changed.notify_all();
                // Wait before the next attempt (woken early only to stop).
                let _ = shared
                    .changed
                    .wait_timeout_while(state, backoff, |s| !s.closing)
                    .unwrap_or_else(|e| e.into_inner());
                backoff = (backoff * 2).min(RETRY_MAX);
            }
        }
    }
}
