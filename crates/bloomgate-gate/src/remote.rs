//! Per-scope filters held by a bloomgate (or RedisBloom) server, for gates that share them.
//!
//! Time windows map onto keys: scope s's generation for slot t = ⌊now/W⌋ is `{prefix}{s}:{t}`.
//! A probe asks the G live slots t−G+1..=t with one pipelined `BF.MEXISTS` each — one round
//! trip per request. An item seen at time a ≥ now−R sits in slot ⌊a/W⌋ ≥ ⌊now/W − (G−1)⌋, a live
//! slot, because R ≤ (G−1)·W. On a scope's first use in this process its store rows of the last
//! R are added to their slots (`BF.INSERT`, idempotent), so a server that lost or never had the
//! filter cannot cause a false "unseen". Slots that leave the window are deleted as the scope's
//! writes move past them. Growth is handled by the server's scaling filters.

use std::collections::HashMap;
use std::sync::Mutex;

use redis::Connection;

use crate::lifecycle::{HistoryLoader, LifecycleConfig};
use crate::redis_pool::RedisPool;
use crate::{Result, Seen};

const SHARDS: usize = 64;

struct RemoteScope {
    /// Capacity given to this scope's new slot filters (from its history, with headroom).
    capacity: u64,
    /// Newest slot this process wrote for the scope (older slots beyond the window get deleted).
    newest_slot: u64,
}

/// Scope filters on a RESP server speaking the BF.* commands.
pub(crate) struct RemoteFilters {
    pool: RedisPool,
    prefix: String,
    config: LifecycleConfig,
    known: Vec<Mutex<HashMap<u64, RemoteScope>>>,
}

impl RemoteFilters {
    /// `url` is `resp://HOST:PORT` (or `redis://...`); keys start with `prefix`.
    pub fn connect(url: &str, prefix: &str, config: LifecycleConfig) -> Result<Self> {
        config.validate()?;
        let url = match url.strip_prefix("resp://") {
            Some(rest) => format!("redis://{rest}"),
            None => url.to_owned(),
        };
        Ok(RemoteFilters {
            pool: RedisPool::connect(&url)?,
            prefix: prefix.to_owned(),
            config,
            known: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        })
    }

    fn with_conn<T>(&self, f: impl FnOnce(&mut Connection) -> redis::RedisResult<T>) -> Result<T> {
        self.pool.with_conn(f)
    }
    fn slot(&self, at_ms: u64) -> u64 {
        at_ms / self.config.generation_window_ms()
    }

    fn key(&self, scope: u64, slot: u64) -> String {
        format!("{}{}:{}", self.prefix, scope, slot)
    }

    /// Per-slot error rate so that G slots together stay within the scope's FPR:
    /// 1 − (1 − p_slot)^G ≤ p.
    fn slot_fpr(&self) -> f64 {
        1.0 - (1.0 - self.config.fpr).powf(1.0 / self.config.generations as f64)
    }

    fn insert_cmd(
        &self,
        pipe: &mut redis::Pipeline,
        scope: u64,
        slot: u64,
        capacity: u64,
        items: impl Iterator<Item = u64>,
    ) {
        pipe.cmd("BF.INSERT")
            .arg(self.key(scope, slot))
            .arg("CAPACITY")
            .arg(capacity.min(1 << 30))
            .arg("ERROR")
            .arg(self.slot_fpr())
            .arg("ITEMS");
        for item in items {
            pipe.arg(item);
        }
        pipe.ignore();
    }

    /// Appends to `out`, per item, whether any live slot of the scope's filter says "maybe".
    pub fn probe(
        &self,
        scope: u64,
        items: &[u64],
        now_ms: u64,
        out: &mut Vec<bool>,
        load: &HistoryLoader<'_>,
    ) -> Result<()> {
        self.ensure_loaded(scope, now_ms, load)?;
        if items.is_empty() {
            return Ok(());
        }
        let newest = self.slot(now_ms);
        let oldest = newest.saturating_sub(self.config.generations as u64 - 1);
        let mut pipe = redis::pipe();
        for slot in oldest..=newest {
            pipe.cmd("BF.MEXISTS").arg(self.key(scope, slot)).arg(items);
        }
        let answers: Vec<Vec<bool>> = self.with_conn(|conn| pipe.query(conn))?;
        let start = out.len();
        out.resize(start + items.len(), false);
        for answer in answers {
            for (maybe, hit) in out[start..].iter_mut().zip(answer) {
                *maybe |= hit;
            }
        }
        Ok(())
    }

    /// Adds items the scope just saw (already in the store) to the current slot, deleting slots
    /// that have left the window.
    pub fn record(
        &self,
        scope: u64,
        items: &[u64],
        now_ms: u64,
        load: &HistoryLoader<'_>,
    ) -> Result<()> {
        self.ensure_loaded(scope, now_ms, load)?;
        let slot = self.slot(now_ms);
        let generations = self.config.generations as u64;
        let mut shard = self.known[scope as usize % SHARDS]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let known = shard
            .get_mut(&scope)
            .expect("ensure_loaded registered the scope");
        let mut pipe = redis::pipe();
        if slot > known.newest_slot {
            // Slots newest−G+1..=newest were live; those below slot−G+1 are now dead.
            let dead_from = known.newest_slot.saturating_sub(generations - 1);
            let dead_to = known.newest_slot.min(slot.saturating_sub(generations));
            for dead in dead_from..=dead_to {
                if dead + generations <= slot {
                    pipe.cmd("DEL").arg(self.key(scope, dead)).ignore();
                }
            }
            known.newest_slot = slot;
        }
        if !items.is_empty() {
            self.insert_cmd(
                &mut pipe,
                scope,
                slot,
                known.capacity,
                items.iter().copied(),
            );
        }
        self.with_conn(|conn| pipe.query::<()>(conn))
    }

    /// On a scope's first use in this process, adds its store rows of the last R to their slots.
    fn ensure_loaded(&self, scope: u64, now_ms: u64, load: &HistoryLoader<'_>) -> Result<()> {
        let mut shard = self.known[scope as usize % SHARDS]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if shard.contains_key(&scope) {
            return Ok(());
        }
        let history: Vec<Seen> = load(scope, now_ms.saturating_sub(self.config.retention_ms))?;
        let per_slot = (history.len() as u64).div_ceil(self.config.generations as u64 - 1) as f64;
        let capacity = ((per_slot * self.config.headroom).ceil() as u64)
            .max(self.config.min_items_per_generation);
        let mut pipe = redis::pipe();
        for run in history.chunk_by(|a, b| self.slot(a.at_ms) == self.slot(b.at_ms)) {
            self.insert_cmd(
                &mut pipe,
                scope,
                self.slot(run[0].at_ms),
                capacity,
                run.iter().map(|s| s.item),
            );
        }
        if !history.is_empty() {
            self.with_conn(|conn| pipe.query::<()>(conn))?;
        }
        let newest_slot = history
            .last()
            .map_or(self.slot(now_ms), |s| self.slot(s.at_ms));
        shard.insert(
            scope,
            RemoteScope {
                capacity,
                newest_slot,
            },
        );
        Ok(())
    }
}
