//! The keyspace: keys → values (the dialect's, or a Redis string) with optional expiry, memory accounting and the key
//! modification tracking WATCH needs. A value's large arrays are copy-on-write segments (see
//! `bloomgate_dialect::types::cow`), so a snapshot clones values in O(keys) without copying their
//! bits, and a writer copies only a segment a snapshot still holds.
//!
//! Memory: an entry is 56 bytes in the table (boxed key, inline value, expiry), and accounting
//! counts what the allocator really hands out (size classes, the table's buckets), so
//! `MEMORY USAGE` and `used_memory` follow resident memory. Where the server is given an
//! allocator probe ([`Db::set_heap_probe`]; `bloomgate serve` on jemalloc passes one in its
//! settings), `used_memory` is the allocator's own count, kept current between readings by the
//! accounted changes.

use std::cell::Cell;
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bloomgate_dialect::types::cow::allocation_size;
pub use bloomgate_dialect::Value;

/// A point-in-time copy of the keyspace (values share their segments with the live keyspace).
pub type Snapshot = Vec<(Vec<u8>, Entry)>;

/// The expiry field's "no expiry" (an `Option<i64>` would take 16 bytes per key).
const NO_EXPIRY: i64 = i64::MIN;

/// A key's value: one of the dialect's, or a Redis string — the server's one native type. The
/// dialect never sees a string: to its commands the key holds another type (WRONGTYPE), as a
/// module's commands learn from Redis.
#[derive(Clone, Debug)]
pub enum Data {
    /// A BF/CF/WF/CMS/TopK/t-digest value.
    Dialect(Value),
    /// A Redis string (SET, GET, APPEND, INCR…).
    String(Vec<u8>),
}

impl Data {
    /// The TYPE reply.
    pub fn type_name(&self) -> &'static str {
        match self {
            Data::Dialect(value) => value.type_name(),
            Data::String(_) => "string",
        }
    }

    /// Heap bytes the value holds beyond its inline size (see [`Value::heap_bytes`]).
    pub fn heap_bytes(&self) -> u64 {
        match self {
            Data::Dialect(value) => value.heap_bytes(),
            Data::String(s) if s.capacity() == 0 => 0,
            Data::String(s) => allocation_size(s.capacity() as u64),
        }
    }

    /// The dialect value, if it is one.
    pub fn dialect(&self) -> Option<&Value> {
        match self {
            Data::Dialect(value) => Some(value),
            Data::String(_) => None,
        }
    }

    /// Mutable [`Data::dialect`].
    pub fn dialect_mut(&mut self) -> Option<&mut Value> {
        match self {
            Data::Dialect(value) => Some(value),
            Data::String(_) => None,
        }
    }
}

impl From<Value> for Data {
    fn from(value: Value) -> Self {
        Data::Dialect(value)
    }
}

#[derive(Clone, Debug)]
/// A key's value and expiry.
pub struct Entry {
    /// The value.
    pub data: Data,
    /// Absolute expiry in Unix milliseconds, or [`NO_EXPIRY`].
    expires: i64,
}

/// One table slot: the key and its entry.
type Slot = (Box<[u8]>, Entry);

/// A slot's share of the table: its bytes and control byte at the table's highest load (7/8).
const SLOT_SHARE: u64 = (size_of::<Slot>() as u64 + 1) * 8 / 7;

impl Entry {
    /// An entry expiring at `expires_at` (Unix milliseconds), or never.
    pub fn new(data: impl Into<Data>, expires_at: Option<i64>) -> Self {
        Self {
            data: data.into(),
            expires: expires_at.unwrap_or(NO_EXPIRY),
        }
    }

    /// Absolute expiry in Unix milliseconds.
    pub fn expires_at(&self) -> Option<i64> {
        (self.expires != NO_EXPIRY).then_some(self.expires)
    }

    /// Heap bytes of the key and value (what accounting tracks per key).
    fn heap(&self, key: &[u8]) -> u64 {
        allocation_size(key.len() as u64) + self.data.heap_bytes()
    }

    /// Bytes this entry costs (MEMORY USAGE): key and value allocations plus its table slot.
    pub fn memory(&self, key: &[u8]) -> u64 {
        SLOT_SHARE + self.heap(key)
    }
}

/// The wall clock in Unix milliseconds: what expiry times are compared with.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// How long an allocator reading stays current (accounted changes are added on top of it).
const HEAP_READING_TTL: Duration = Duration::from_millis(50);

/// The last allocator reading: when, what it said, and the accounted bytes at that moment.
#[derive(Clone, Copy)]
struct HeapReading {
    at: Instant,
    allocated: u64,
    accounted: u64,
}

/// Keys watched by some client: how many WATCHes, and the modification sequence number of the
/// last change.
#[derive(Default)]
struct WatchState {
    watchers: usize,
    last_change: u64,
}

/// The keys and their values, with memory accounting and WATCH bookkeeping.
#[derive(Default)]
pub struct Db {
    entries: HashMap<Box<[u8]>, Entry>,
    /// The allocator's count of allocated bytes, where the binary that picked the allocator
    /// provides one.
    heap_probe: Option<fn() -> u64>,
    /// Heap bytes of keys and values (the table is added from its capacity).
    used_memory: u64,
    heap_reading: Cell<Option<HeapReading>>,
    watched: HashMap<Vec<u8>, WatchState>,
    change_seq: u64,
    /// Keys handed out by [`Db::value_mut`] and their memory before the change.
    unsettled: Vec<(Vec<u8>, u64)>,
}

impl Db {
    /// Makes the allocator's count of allocated bytes the source of `used_memory`.
    pub fn set_heap_probe(&mut self, probe: Option<fn() -> u64>) {
        self.heap_probe = probe;
        self.heap_reading.set(None);
    }

    /// Whether `used_memory` is the allocator's count (which sees every allocation of the
    /// process, not only the keyspace's).
    pub fn heap_probed(&self) -> bool {
        self.heap_probe.is_some()
    }

    fn is_live(entry: &Entry, now_ms: i64) -> bool {
        entry.expires == NO_EXPIRY || entry.expires > now_ms
    }

    /// A live entry (expired entries read as missing).
    pub fn get(&self, key: &[u8], now_ms: i64) -> Option<&Entry> {
        self.entries.get(key).filter(|e| Self::is_live(e, now_ms))
    }

    /// The live dialect value of `key` (`None` if missing or a string).
    pub fn value(&self, key: &[u8], now_ms: i64) -> Option<&Value> {
        self.get(key, now_ms).and_then(|e| e.data.dialect())
    }

    /// Runs `f` on the live value of `key` (segments a snapshot shares are copied as written),
    /// then updates
    /// memory accounting and marks the key changed. `None` if the key is missing.
    pub fn update<R>(
        &mut self,
        key: &[u8],
        now_ms: i64,
        f: impl FnOnce(&mut Data) -> R,
    ) -> Option<R> {
        self.expire_if_due(key, now_ms);
        let entry = self.entries.get_mut(key)?;
        let before = entry.heap(key);
        let result = f(&mut entry.data);
        let after = entry.heap(key);
        self.used_memory = self.used_memory - before + after;
        self.touch(key);
        Some(result)
    }

    /// The live dialect value of `key` for a change (segments copied as written, as above);
    /// memory accounting is brought up to date by [`Db::settle`] once the command is done.
    /// `None` if the key is missing or a string (nothing is marked changed then).
    pub fn value_mut(&mut self, key: &[u8], now_ms: i64) -> Option<&mut Value> {
        self.expire_if_due(key, now_ms);
        let entry = self
            .entries
            .get_mut(key)
            .filter(|e| e.data.dialect().is_some())?;
        if !self.unsettled.iter().any(|(k, _)| k == key) {
            self.unsettled.push((key.to_vec(), entry.heap(key)));
        }
        let value = entry.data.dialect_mut();
        if let Some(state) = self.watched.get_mut(key) {
            self.change_seq += 1;
            state.last_change = self.change_seq;
        }
        value
    }

    /// The live value of `key` for a change that is not a write (a t-digest merging its buffer
    /// on a read or a DUMP): its memory does not change and WATCH does not see it, as in
    /// RedisBloom.
    pub fn value_quiet(&mut self, key: &[u8], now_ms: i64) -> Option<&mut Data> {
        self.expire_if_due(key, now_ms);
        self.entries.get_mut(key).map(|entry| &mut entry.data)
    }

    /// What a foreground save does to the live values in RedisBloom (`SAVE`, `DEBUG RELOAD`):
    /// t-digests merge their buffers in place. Memory does not change; WATCH does not see it.
    pub fn prepare_save_all(&mut self) {
        self.entries
            .values_mut()
            .filter_map(|entry| entry.data.dialect_mut())
            .for_each(Value::prepare_save);
    }

    /// Accounts for the memory of values changed through [`Db::value_mut`].
    pub fn settle(&mut self) {
        for (key, before) in std::mem::take(&mut self.unsettled) {
            if let Some(entry) = self.entries.get(key.as_slice()) {
                self.used_memory = self.used_memory - before + entry.heap(&key);
            }
        }
    }

    /// Inserts or replaces `key` (keeping no previous expiry).
    pub fn insert(&mut self, key: Vec<u8>, value: impl Into<Data>, expires_at: Option<i64>) {
        self.remove_entry(&key);
        let entry = Entry::new(value, expires_at);
        self.used_memory += entry.heap(&key);
        self.touch(&key);
        self.entries.insert(key.into_boxed_slice(), entry);
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
        self.used_memory -= entry.heap(key);
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
        self.used_memory += entry.heap(to);
        self.touch(to);
        self.entries.insert(to.into(), entry);
        true
    }

    /// Sets or clears the expiry of a live key; false if missing.
    pub fn set_expiry(&mut self, key: &[u8], expires_at: Option<i64>, now_ms: i64) -> bool {
        self.expire_if_due(key, now_ms);
        match self.entries.get_mut(key) {
            Some(entry) => {
                entry.expires = expires_at.unwrap_or(NO_EXPIRY);
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

    /// Deletes up to `limit` expired keys (active expiry); returns them.
    pub fn purge_expired(&mut self, now_ms: i64, limit: usize) -> Vec<Box<[u8]>> {
        let due: Vec<Box<[u8]>> = self
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
        due
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

    /// Whether there is no key.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Keys with an expiry (INFO keyspace).
    pub fn keys_with_expiry(&self) -> usize {
        self.entries
            .values()
            .filter(|e| e.expires != NO_EXPIRY)
            .count()
    }

    /// Every live key and its entry, in table order.
    pub fn iter_live(&self, now_ms: i64) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.entries
            .iter()
            .filter(move |(_, e)| Self::is_live(e, now_ms))
            .map(|(k, e)| (&**k, e))
    }

    /// A point-in-time copy for snapshotting: values are cloned, which shares their segments.
    pub fn snapshot(&self) -> Snapshot {
        self.entries
            .iter()
            .map(|(k, e)| (k.to_vec(), e.clone()))
            .collect()
    }

    /// Bytes the keyspace accounts for: keys, values and the table's buckets.
    pub fn dataset_memory(&self) -> u64 {
        let cap = self.entries.capacity() as u64;
        // hashbrown: buckets are the next power of two over capacity × 8/7 (from 4 up).
        let buckets = if cap == 0 {
            0
        } else {
            (cap * 8 / 7).next_power_of_two().max(4)
        };
        self.used_memory + buckets * (size_of::<Slot>() as u64 + 1)
    }

    /// `used_memory`: the allocator's count where a probe is registered (refreshed every
    /// `HEAP_READING_TTL`, with the accounted changes since added), else the dataset's bytes.
    pub fn used_memory(&self) -> u64 {
        let accounted = self.dataset_memory();
        let Some(probe) = self.heap_probe else {
            return accounted;
        };
        let reading = match self.heap_reading.get() {
            Some(r) if r.at.elapsed() < HEAP_READING_TTL => r,
            _ => {
                let r = HeapReading {
                    at: Instant::now(),
                    allocated: probe(),
                    accounted,
                };
                self.heap_reading.set(Some(r));
                r
            }
        };
        (reading.allocated + accounted).saturating_sub(reading.accounted)
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

    /// Stops one WATCH of `key`.
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
