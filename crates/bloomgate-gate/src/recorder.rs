//! Asynchronous, batched recording of served items: the request path hands its rows to a
//! bounded queue and returns; one background thread commits whatever has queued up in one store
//! call (group commit: one transaction, one prepared upsert, rows sorted by (scope, item) for
//! B-tree locality).
//!
//! Why: one SQLite transaction per request wrote ~7 KB of WAL per recorded row and held the
//! writer lock on the request path. Nothing is lost for the no-duplicate promise: before a row
//! is queued it is already in the [`Pending`](crate::pending::Pending) overlay, the cache and the
//! scope's filter (or, for remote filters, written there by this thread right after the store
//! commit), and it leaves the overlay only after both. The queue is bounded
//! ([`QUEUE_REQUESTS`] requests): when the store falls behind, `record` blocks (backpressure that
//! shows in the request latency) instead of growing memory. A failed commit is sticky: its rows
//! stay in the overlay (still never shown), and every later `record` and `flush` returns the error.

use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::backend::FilterBackend;
use crate::core::Core;
use crate::{Error, Result, Seen};

/// Requests' worth of rows the queue holds before `record` waits for the store.
pub const QUEUE_REQUESTS: usize = 4_096;
/// Most rows one commit takes (a batch is whatever queued up while the previous one committed).
pub const BATCH_ROWS: usize = 8_192;

enum Message {
    Rows(u64, Vec<Seen>),
    Flush(mpsc::Sender<()>),
}

pub(crate) struct Recorder {
    queue: Option<SyncSender<Message>>,
    thread: Option<JoinHandle<()>>,
}

impl Recorder {
    /// Starts the recorder thread: each group commit goes to `core`'s store, then to
    /// `filters` (back-ends that batch their writes).
    pub fn start(core: Arc<Core>, filters: Arc<dyn FilterBackend>) -> Self {
        let (queue, messages) = mpsc::sync_channel(QUEUE_REQUESTS);
        let thread = std::thread::Builder::new()
            .name("bloomgate-recorder".into())
            .spawn(move || commit_loop(&core, &*filters, &messages))
            .expect("spawning the recorder thread");
        Recorder {
            queue: Some(queue),
            thread: Some(thread),
        }
    }

    fn send(&self, message: Message) -> Result<()> {
        self.queue
            .as_ref()
            .expect("the queue lives until drop")
            .send(message)
            .map_err(|_| Error::Recording("the recorder thread has stopped".into()))
    }

    /// Queues one request's rows (waits while the queue is full).
    pub fn queue(&self, scope: u64, rows: Vec<Seen>) -> Result<()> {
        self.send(Message::Rows(scope, rows))
    }

    /// Waits until everything queued before this call has been committed (or has failed).
    pub fn flush(&self) -> Result<()> {
        let (done, wait) = mpsc::channel();
        self.send(Message::Flush(done))?;
        wait.recv()
            .map_err(|_| Error::Recording("the recorder thread has stopped".into()))
    }
}

impl Drop for Recorder {
    /// Commits what is queued, then stops the thread.
    fn drop(&mut self) {
        drop(self.queue.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn commit_loop(core: &Core, filters: &dyn FilterBackend, messages: &Receiver<Message>) {
    let mut batch: Vec<(u64, Seen)> = Vec::with_capacity(BATCH_ROWS);
    let mut flushes = Vec::new();
    while let Ok(first) = messages.recv() {
        let mut next = Some(first);
        while let Some(message) = next.take() {
            match message {
                Message::Rows(scope, rows) => batch.extend(rows.into_iter().map(|s| (scope, s))),
                Message::Flush(done) => flushes.push(done),
            }
            if batch.len() < BATCH_ROWS {
                next = messages.try_recv().ok();
            }
        }
        batch.sort_unstable_by_key(|&(scope, s)| (scope, s.item, s.at_ms));
        core.commit(&batch, |rows| filters.commit(rows));
        batch.clear();
        for done in flushes.drain(..) {
            let _ = done.send(());
        }
    }
}
