//! The lock-poisoning policy of every lock in the server ([`relock`]): a leaf, used by every
//! layer that shares state between threads.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, recovering it if a thread panicked while holding it.
///
/// Lock-poisoning policy: one panicking request must not take every later client down. A
/// command runs inside [`crate::connection::guarded`], which catches a panic, answers that client
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
