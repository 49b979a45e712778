//! The keyspace: keys → dialect values with optional expiry, memory accounting and the key
//! modification tracking WATCH needs. Values are `Arc`-shared so a snapshot can take a
//! point-in-time copy in O(keys) and writers copy a filter only if a snapshot still holds it.

use std::collections::HashMap;
use std::sync::Arc;

pub use bloomgate_dialect::Value;

/// Per-key bookkeeping overhead counted in memory usage (dict entry + key object), matching the
/// order of magnitude Redis reports.
const KEY_OVERHEAD: u64 = 56;

/// A point-in-time copy of the keyspace (values shared with the live keyspace).
pub type Snapshot = Vec<(Vec<u8>, Entry)>;

#[derive(Clone, Debug)]
pub struct Entry {
    pub value: Arc<Value>,
    /// Absolute expiry in Unix milliseconds.
    pub expires_at: Option<i64>,
}

impl Entry {
    /// Bytes this entry accounts for (MEMORY USAGE).
    pub fn memory(&self, key: &[u8]) -> u64 {
        KEY_OVERHEAD + key.len() as u64 + self.value.memory()
    }
}

/// Keys watched by some client: how many WATCHes, and the modification sequence number of the
/// last change.
#[derive(Default)]
struct WatchState {
    watchers: usize,
    last_change: u64,
}

#[derive(Default)]
pub struct Db {
    entries: HashMap<Vec<u8>, Entry>,
    used_memory: u64,
    watched: HashMap<Vec<u8>, WatchState>,
    change_seq: u64,
    /// Keys handed out by [`Db::value_mut`] and their memory before the change.
    unsettled: Vec<(Vec<u8>, u64)>,
}

impl Db {
    fn is_live(entry: &Entry, now_ms: i64) -> bool {
        entry.expires_at.is_none_or(|at| at > now_ms)
    }

    /// A live entry (expired entries read as missing).
    pub fn get(&self, key: &[u8], now_ms: i64) -> Option<&Entry> {
        self.entries.get(key).filter(|e| Self::is_live(e, now_ms))
    }

    pub fn value(&self, key: &[u8], now_ms: i64) -> Option<&Value> {
        self.get(key, now_ms).map(|e| &*e.value)
    }

    /// Runs `f` on the live value of `key` (copied first if a snapshot shares it), then updates
    /// memory accounting and marks the key changed. `None` if the key is missing.
    pub fn update<R>(
        &mut self,
        key: &[u8],
        now_ms: i64,
        f: impl FnOnce(&mut Value) -> R,
    ) -> Option<R> {
        self.expire_if_due(key, now_ms);
        let entry = self.entries.get_mut(key)?;
        let before = entry.memory(key);
        let result = f(Arc::make_mut(&mut entry.value));
        let after = entry.memory(key);
        self.used_memory = self.used_memory - before + after;
        self.touch(key);
        Some(result)
    }

    /// The live value of `key` for a change (copied first if a snapshot shares it); memory
    /// accounting is brought up to date by [`Db::settle`] once the command is done.
    pub fn value_mut(&mut self, key: &[u8], now_ms: i64) -> Option<&mut Value> {
        self.expire_if_due(key, now_ms);
        let entry = self.entries.get_mut(key)?;
        if !self.unsettled.iter().any(|(k, _)| k == key) {
            self.unsettled.push((key.to_vec(), entry.memory(key)));
        }
        let value = Arc::make_mut(&mut entry.value);
        if let Some(state) = self.watched.get_mut(key) {
            self.change_seq += 1;
            state.last_change = self.change_seq;
        }
        Some(value)
    }

    /// Accounts for the memory of values changed through [`Db::value_mut`].
    pub fn settle(&mut self) {
        for (key, before) in std::mem::take(&mut self.unsettled) {
            if let Some(entry) = self.entries.get(&key) {
                self.used_memory = self.used_memory - before + entry.memory(&key);
            }
        }
    }

    /// Inserts or replaces `key` (keeping no previous expiry).
    pub fn insert(&mut self, key: Vec<u8>, value: Value, expires_at: Option<i64>) {
        self.remove_entry(&key);
        let entry = Entry {
            value: Arc::new(value),
            expires_at,
        };
        self.used_memory += entry.memory(&key);
        self.touch(&key);
        self.entries.insert(key, entry);
    }

    /// Deletes a live key; true if it existed.
    pub fn remove(&mut self, key: &[u8], now_ms: i64) -> bool {
        self.expire_if_due(key, now_ms);
        let existed = self.remove_entry(key).is_some();
        if existed {
            self.touch(key);
        }
        existed
    }

    fn remove_entry(&mut self, key: &[u8]) -> Option<Entry> {
        let entry = self.entries.remove(key)?;
        self.used_memory -= entry.memory(key);
        Some(entry)
    }

    /// Moves a live `from` to `to` with its expiry, replacing `to`.
    pub fn rename(&mut self, from: &[u8], to: &[u8], now_ms: i64) -> bool {
        self.expire_if_due(from, now_ms);
        let Some(entry) = self.remove_entry(from) else {
            return false;
        };
        self.touch(from);
        self.remove_entry(to);
        self.used_memory += entry.memory(to);
        self.touch(to);
        self.entries.insert(to.to_vec(), entry);
        true
    }

    /// Sets or clears the expiry of a live key; false if missing.
    pub fn set_expiry(&mut self, key: &[u8], expires_at: Option<i64>, now_ms: i64) -> bool {
        self.expire_if_due(key, now_ms);
        match self.entries.get_mut(key) {
            Some(entry) => {
                entry.expires_at = expires_at;
                self.touch(key);
                true
            }
            None => false,
        }
    }

    fn expire_if_due(&mut self, key: &[u8], now_ms: i64) {
        if self
            .entries
            .get(key)
            .is_some_and(|e| !Self::is_live(e, now_ms))
        {
            self.remove_entry(key);
            self.touch(key);
        }
    }

    /// Deletes up to `limit` expired keys (active expiry); returns how many.
    pub fn purge_expired(&mut self, now_ms: i64, limit: usize) -> usize {
        let due: Vec<Vec<u8>> = self
            .entries
            .iter()
            .filter(|(_, e)| !Self::is_live(e, now_ms))
            .take(limit)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &due {
            self.remove_entry(key);
            self.touch(key);
        }
        due.len()
    }

    /// Removes everything (FLUSHDB/FLUSHALL, reload).
    pub fn clear(&mut self) {
        let keys: Vec<Vec<u8>> = self.watched.keys().cloned().collect();
        self.entries.clear();
        self.used_memory = 0;
        for key in keys {
            self.touch(&key);
        }
    }

    /// Live key count (DBSIZE counts keys not yet purged, as Redis does).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn keys_with_expiry(&self) -> usize {
        self.entries
            .values()
            .filter(|e| e.expires_at.is_some())
            .count()
    }

    pub fn iter_live(&self, now_ms: i64) -> impl Iterator<Item = (&Vec<u8>, &Entry)> {
        self.entries
            .iter()
            .filter(move |(_, e)| Self::is_live(e, now_ms))
    }

    /// A point-in-time copy for snapshotting (shares values).
    pub fn snapshot(&self) -> Snapshot {
        self.entries
            .iter()
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect()
    }

    pub fn used_memory(&self) -> u64 {
        self.used_memory
    }

    fn touch(&mut self, key: &[u8]) {
        if let Some(state) = self.watched.get_mut(key) {
            self.change_seq += 1;
            state.last_change = self.change_seq;
        }
    }

    /// Starts watching `key`; returns the sequence number to compare at EXEC.
    pub fn watch(&mut self, key: &[u8]) -> u64 {
        self.watched.entry(key.to_vec()).or_default().watchers += 1;
        self.change_seq
    }

    pub fn unwatch(&mut self, key: &[u8]) {
        if let Some(state) = self.watched.get_mut(key) {
            state.watchers -= 1;
            if state.watchers == 0 {
                self.watched.remove(key);
            }
        }
    }

    /// Whether `key` changed since `seq`.
    pub fn changed_since(&self, key: &[u8], seq: u64) -> bool {
        self.watched.get(key).is_some_and(|s| s.last_change > seq)
    }
}
