//! bloomgate's Redis-protocol server: hosts the RedisBloom dialect (`bloomgate-dialect`) on its
//! own keyspace, with persistence (snapshots plus a checksummed append-only log) and crash safety.
//!
//! Layers: [`resp`] (wire format), [`keyspace`], [`commands`] (synchronous command layer, no I/O:
//! Redis' own commands here, BF.*/CF.* from the dialect), [`persistence`], and the tokio network
//! layer in [`server`] / [`connection`], with [`metrics`] on a separate port.

pub mod commands;
pub mod connection;
pub mod glob;
pub mod inline;
pub mod keyspace;
pub mod metrics;
pub mod persistence;
pub mod resp;
pub mod server;

pub use server::{run, ServeArgs};

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, recovering it if a thread panicked while holding it.
///
/// Lock-poisoning policy: one panicking request must not take every later client down. A
/// command runs inside [`connection::guarded`], which catches a panic, answers that client
/// `-ERR internal error` and closes its connection; the store lock is released normally, so it
/// is not poisoned. Should a panic escape anywhere else while a lock is held, the data behind
/// the lock is still used as it is (every mutation under these locks keeps the structure valid
/// at each step: a map insert, a counter, a queue push), so later lockers take it over with
/// [`PoisonError::into_inner`] instead of panicking in turn.
pub fn relock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_is_taken_over() {
        let mutex = std::sync::Arc::new(Mutex::new(1));
        let holder = mutex.clone();
        let _ = std::thread::spawn(move || {
            let mut guard = holder.lock().unwrap();
            *guard = 2;
            panic!("deliberate panic while holding the lock");
        })
        .join();
        assert!(mutex.is_poisoned());
        *relock(&mutex) += 1;
        assert_eq!(*relock(&mutex), 3);
    }
}
