//! A filter shared by Python threads: a lock for the calls that let go of the GIL, and a
//! lock-free path for the single-key calls that never do.
//!
//! Batch calls (`update`, `contains_many`, `save`) hash and probe with the GIL released, so the
//! filter needs a lock; but taking and releasing an uncontended `RwLock` costs two atomic
//! read-modify-writes, 11.6 ns on this project's machine — about the whole difference between
//! `key in f` and rbloom's (a Python call of ~55 ns). Every single-key call holds the GIL from
//! start to end, so against each other they are already serialized; only the calls that run
//! without the GIL, or hold the lock while Python code may run, can overlap them. Those register
//! first, under the GIL: [`Shared::fast_read`] / [`Shared::fast_write`] check (under the GIL) that
//! nobody is registered and then use the value without the lock; otherwise they take the lock
//! like everyone else.
//!
//! The rules that make the lock-free path sound:
//! 1. A thread registers (`users += 1`) while holding the GIL, before it waits for or takes the
//!    lock, and deregisters only after it stopped using the value (guards: [`Registration`]).
//! 2. Every use of the value other than the fast path goes through the lock, registered.
//! 3. The fast path runs a closure that cannot run Python code (it is `Send`, so it captures no
//!    `Python` token or `Bound` object — nothing that could call into the interpreter, run a
//!    finalizer, or let the GIL go), from its check of `users` to its end, holding the GIL.
//!
//! So while a fast-path closure runs, no registration can start (that needs the GIL) and none is
//! in force (it checked): no other thread uses the value. The GIL's release and acquire order a
//! fast-path call after every earlier one; an `Acquire` load of `users` orders it after a
//! deregistration that happened without the GIL (a batch call's `Release` decrement).

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{
    PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError, TryLockResult,
};

use pyo3::Python;

/// A value behind a lock, with a lock-free path for GIL-holding calls (see the module docs).
pub(crate) struct Shared<T> {
    value: UnsafeCell<T>,
    /// Guards `value` for every registered user; holds nothing itself.
    lock: RwLock<()>,
    /// Threads registered to use `value` through the lock (waiting for it, or holding it).
    users: AtomicUsize,
}

// SAFETY: `value` is used either through `lock` (shared for `&T`, exclusive for `&mut T`) by
// registered threads, or by one fast-path closure at a time while no thread is registered (rules
// 1–3 in the module docs), so `&Shared<T>` hands out `&T` only alongside other `&T`s and `&mut T`
// only alone: what `RwLock<T>` requires of `T` is enough.
unsafe impl<T: Send + Sync> Sync for Shared<T> {}

/// A registered user of a [`Shared`] value; deregisters when dropped.
pub(crate) struct Registration<'a> {
    users: &'a AtomicUsize,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        // Release: this thread's uses of the value happen before a fast path that sees 0.
        self.users.fetch_sub(1, Ordering::Release);
    }
}

/// Shared access through the lock. Fields drop in order: the lock before the registration.
pub(crate) struct ReadGuard<'a, T> {
    value: &'a T,
    _lock: RwLockReadGuard<'a, ()>,
    _registration: Option<Registration<'a>>,
}

/// Exclusive access through the lock.
pub(crate) struct WriteGuard<'a, T> {
    value: &'a mut T,
    _lock: RwLockWriteGuard<'a, ()>,
    _registration: Option<Registration<'a>>,
}

impl<T> Deref for ReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}

impl<T> Deref for WriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}

impl<T> DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value
    }
}

impl<T: Send + Sync> Shared<T> {
    pub fn new(value: T) -> Self {
        Shared {
            value: UnsafeCell::new(value),
            lock: RwLock::new(()),
            users: AtomicUsize::new(0),
        }
    }

    /// Registers this thread as a user of the value (rule 1: call it holding the GIL, before
    /// waiting for or taking the lock).
    pub fn register(&self, _py: Python<'_>) -> Registration<'_> {
        self.users.fetch_add(1, Ordering::Acquire);
        Registration { users: &self.users }
    }

    /// `f` of the value, lock-free when no thread is registered. `f` must not run Python code
    /// (rule 3; being `Send` it cannot hold a `Python` token or a Python object).
    #[inline]
    pub fn fast_read<R>(&self, py: Python<'_>, f: impl FnOnce(&T) -> R + Send) -> R {
        if self.users.load(Ordering::Acquire) == 0 {
            // SAFETY: nobody is registered and, holding the GIL, nobody can register until `f`
            // returns; `f` runs no Python code. So no other thread uses the value meanwhile
            // (module docs, rules 1–3). Exercised by every single-key query; the Python test
            // `test_single_key_calls_race_batch_calls` races it against registered users.
            return f(unsafe { &*self.value.get() });
        }
        f(&self.read(py))
    }

    /// [`Shared::fast_read`] with exclusive access.
    #[inline]
    pub fn fast_write<R>(&self, py: Python<'_>, f: impl FnOnce(&mut T) -> R + Send) -> R {
        if self.users.load(Ordering::Acquire) == 0 {
            // SAFETY: as in `fast_read`: no other thread uses the value until `f` returns, so
            // this is the only reference to it.
            return f(unsafe { &mut *self.value.get() });
        }
        f(&mut self.write(py))
    }

    /// Shared access through the lock, taken while holding the GIL without ever waiting under
    /// it (the GIL is released to wait, then the lock is tried again).
    pub fn read(&self, py: Python<'_>) -> ReadGuard<'_, T> {
        let registration = self.register(py);
        let lock = self.acquire(py, RwLock::try_read, |lock| drop(lock.read()));
        self.read_guard(lock, Some(registration))
    }

    /// Exclusive access through the lock, as [`Shared::read`].
    pub fn write(&self, py: Python<'_>) -> WriteGuard<'_, T> {
        let registration = self.register(py);
        let lock = self.acquire(py, RwLock::try_write, |lock| drop(lock.write()));
        self.write_guard(lock, Some(registration))
    }

    /// The lock by `attempt` (`try_read` or `try_write`) while holding the GIL; when it would
    /// block, the GIL is released to `wait` for it (a blocking take and release), then tried again.
    fn acquire<'a, G>(
        &'a self,
        py: Python<'_>,
        attempt: impl Fn(&'a RwLock<()>) -> TryLockResult<G>,
        wait: impl Fn(&RwLock<()>) + Sync,
    ) -> G {
        loop {
            match attempt(&self.lock) {
                Ok(lock) => return lock,
                Err(TryLockError::Poisoned(e)) => return e.into_inner(),
                Err(TryLockError::WouldBlock) => py.detach(|| wait(&self.lock)),
            }
        }
    }

    /// `self` exclusively and `other` shared (distinct values), never holding one while
    /// waiting for the other.
    pub fn write_read<'a>(
        &'a self,
        py: Python<'_>,
        other: &'a Shared<T>,
    ) -> (WriteGuard<'a, T>, ReadGuard<'a, T>) {
        let registration = other.register(py);
        loop {
            let first = self.write(py);
            match other.lock.try_read() {
                Ok(lock) => return (first, other.read_guard(lock, Some(registration))),
                Err(TryLockError::Poisoned(e)) => {
                    return (first, other.read_guard(e.into_inner(), Some(registration)))
                }
                Err(TryLockError::WouldBlock) => {
                    drop(first);
                    py.detach(|| drop(other.lock.read()));
                }
            }
        }
    }

    /// Blocking shared access for code running without the GIL, under a registration taken
    /// before the GIL was released.
    pub fn read_detached<'a>(&'a self, registered: &Registration<'a>) -> ReadGuard<'a, T> {
        self.check(registered);
        let lock = self.lock.read().unwrap_or_else(PoisonError::into_inner);
        self.read_guard(lock, None)
    }

    /// Blocking exclusive access for code running without the GIL, as [`Shared::read_detached`].
    pub fn write_detached<'a>(&'a self, registered: &Registration<'a>) -> WriteGuard<'a, T> {
        self.check(registered);
        let lock = self.lock.write().unwrap_or_else(PoisonError::into_inner);
        self.write_guard(lock, None)
    }

    /// Panics unless `registered` is this value's registration (rule 1 for detached code).
    fn check(&self, registered: &Registration<'_>) {
        assert!(
            std::ptr::eq(registered.users, &self.users),
            "another value's registration"
        );
    }

    fn read_guard<'a>(
        &'a self,
        lock: RwLockReadGuard<'a, ()>,
        registration: Option<Registration<'a>>,
    ) -> ReadGuard<'a, T> {
        // SAFETY: the caller holds `lock` shared and is registered (its own registration, or the
        // one `read_detached` checked), so fast paths stay away (rule 1) and every other user
        // holds the lock too (rule 2): only shared references exist while this one lives.
        let value = unsafe { &*self.value.get() };
        ReadGuard {
            value,
            _lock: lock,
            _registration: registration,
        }
    }

    fn write_guard<'a>(
        &'a self,
        lock: RwLockWriteGuard<'a, ()>,
        registration: Option<Registration<'a>>,
    ) -> WriteGuard<'a, T> {
        // SAFETY: as in `read_guard`, with `lock` held exclusively: no other reference exists.
        let value = unsafe { &mut *self.value.get() };
        WriteGuard {
            value,
            _lock: lock,
            _registration: registration,
        }
    }
}
