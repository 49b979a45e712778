//! bloomgate's Redis-protocol server: hosts the RedisBloom dialect (`bloomgate-dialect`) on its
//! own keyspace, with persistence (snapshots plus a checksummed append-only log) and crash safety.
//!
//! Layers, each depending only on those before it: [`inline`] and [`resp`] (wire format),
//! [`glob`],
//! [`keyspace`], [`persistence`] (files and records; it replays commands through a trait the
//! command layer implements), [`config`] (options, settings, `CONFIG`'s parameters), [`gate`]
//! (the gate behind `GATE.*`, its calls run off the event loop),
//! [`commands`] (the synchronous command layer, no I/O: one table, one command model, BF.*/CF.*/
//! WF.* from the dialect and the server's own), [`metrics`], and the tokio network layer:
//! [`shared`] (state shared by connections), [`connection`], [`server`] ([`run`]).
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! let settings = bloomgate_server::Options::default().resolve()?;
//! let listener = bloomgate_server::bind(&settings)?;
//! bloomgate_server::run(listener, settings, bloomgate_server::shutdown_signal())
//! # }
//! ```

#![deny(missing_docs)]

pub mod commands;
pub mod config;
pub mod connection;
pub mod gate;
pub mod glob;
pub mod inline;
pub mod keyspace;
pub mod metrics;
pub mod persistence;
pub mod pubsub;
pub mod resp;
pub mod server;
pub mod shared;

pub use config::{GateSettings, Options, Settings};
pub use persistence::FsyncPolicy;
pub use server::{bind, run, serve, shutdown_signal};

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
