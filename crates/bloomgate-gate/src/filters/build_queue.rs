//! The local filters' build jobs and the builder pool's queue: a job ([`BuildSlot`]) is claimed
//! by exactly one thread — a builder, or the request that cannot wait — and the others wait for
//! it; queued jobs run busiest scope first.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// A (re)build or catch-up of one scope, claimed by exactly one thread (a builder or the
/// request that needs it); others wait for it.
pub(crate) struct BuildSlot {
    pub scope: u64,
    /// The request time the job builds for.
    pub now_ms: u64,
    /// The capacity of the filter a rebuild replaces (`None`: a first build or a catch-up).
    pub previous_capacity: Option<u64>,
    state: Mutex<SlotState>,
    done: Condvar,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Queued,
    Running,
    Done,
}

impl BuildSlot {
    pub fn new(scope: u64, now_ms: u64, previous_capacity: Option<u64>) -> Arc<Self> {
        Arc::new(BuildSlot {
            scope,
            now_ms,
            previous_capacity,
            state: Mutex::new(SlotState::Queued),
            done: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the job if nobody has: the caller must run it and then call `finish`.
    pub fn claim(&self) -> bool {
        let mut state = self.lock();
        let free = *state == SlotState::Queued;
        if free {
            *state = SlotState::Running;
        }
        free
    }

    pub fn finish(&self) {
        *self.lock() = SlotState::Done;
        self.done.notify_all();
    }

    pub fn wait(&self) {
        let mut state = self.lock();
        while *state != SlotState::Done {
            state = self.done.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Queued jobs, highest demand first (then oldest). A job whose demand rises is pushed again;
/// the stale entry is skipped when popped (its claim fails).
struct Queued {
    demand: u64,
    seq: u64,
    slot: Arc<BuildSlot>,
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        (self.demand, self.seq) == (other.demand, other.seq)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        self.demand
            .cmp(&other.demand)
            .then(other.seq.cmp(&self.seq))
    }
}

#[derive(Default)]
struct QueueState {
    heap: BinaryHeap<Queued>,
    seq: u64,
    /// Jobs created and not finished (queued or running, wherever).
    outstanding: u64,
    stopped: bool,
}

/// The builder pool's work queue.
#[derive(Default)]
pub(crate) struct BuildQueue {
    state: Mutex<QueueState>,
    ready: Condvar,
    idle: Condvar,
}

impl BuildQueue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a new job (counted until `finished`), or re-queues one whose demand rose.
    pub fn push(&self, slot: &Arc<BuildSlot>, demand: u64, new: bool) {
        let mut state = self.lock();
        if new {
            state.outstanding += 1;
        }
        state.seq += 1;
        let seq = state.seq;
        state.heap.push(Queued {
            demand,
            seq,
            slot: slot.clone(),
        });
        drop(state);
        self.ready.notify_one();
    }

    /// The next job a builder should try to claim; None once stopped.
    pub fn pop(&self) -> Option<Arc<BuildSlot>> {
        let mut state = self.lock();
        loop {
            if state.stopped {
                return None;
            }
            if let Some(queued) = state.heap.pop() {
                return Some(queued.slot);
            }
            state = self.ready.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    pub fn finished(&self) {
        let mut state = self.lock();
        state.outstanding -= 1;
        if state.outstanding == 0 {
            self.idle.notify_all();
        }
    }

    /// Waits until every job created so far has finished.
    pub fn flush(&self) {
        let mut state = self.lock();
        while state.outstanding > 0 && !state.stopped {
            state = self.idle.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    pub fn stop(&self) {
        self.lock().stopped = true;
        self.ready.notify_all();
        self.idle.notify_all();
    }
}
