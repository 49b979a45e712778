//! Prometheus text exposition on `--metrics-addr`: commands and errors by name, a command latency
//! histogram, clients, keys, memory, persistence (last snapshot, log size, fsync latency) and
//! filter health (items, fill ratio, estimated false-positive rate across Bloom filters), and
//! the gate's `bloomgate_gate_*` families when serve hosts one.
//!
//! Everything is read under the store lock, in place: no value is shared out of the keyspace
//! (an `Arc` clone held across writes would make the next write to that filter copy it). Only
//! `GET /metrics` is answered (by the shared `bloomgate-metrics` listener, on its own thread,
//! which the server starts with [`render`]); the listener binds loopback unless the operator
//! opts out of protected mode (see `server`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use bloomgate_metrics::{Exposition, Kind};

use crate::commands::Store;
use crate::keyspace::{now_ms, Data, Value};
use crate::lock::relock;
use crate::persistence::AofWriter;

/// Latency bucket upper bounds in microseconds (10 µs … 1 s).
const BUCKETS_MICROS: [u64; 11] = [
    10, 25, 50, 100, 250, 500, 1_000, 5_000, 25_000, 100_000, 1_000_000,
];

/// Command latency histogram, updated lock-free from connection tasks.
#[derive(Default)]
pub struct Latency {
    buckets: [AtomicU64; BUCKETS_MICROS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Latency {
    /// Counts one command that took `elapsed`.
    pub fn observe(&self, elapsed: Duration) {
        let micros = elapsed.as_micros() as u64;
        if let Some(i) = BUCKETS_MICROS.iter().position(|&b| micros <= b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }
}

/// Filter health totals.
#[derive(Default)]
struct Health {
    filters: u64,
    items: u64,
    fill_sum: f64,
    fpr_sum: f64,
    fpr_max: f64,
    cuckoo_filters: u64,
    cuckoo_items: u64,
}

/// Renders the exposition text: the store's counters and filters (read under its lock), the
/// command latency histogram and the log's statistics.
pub fn render(store: &Mutex<Store>, latency: &Latency, aof: Option<&AofWriter>) -> String {
    let gate = relock(store).gate.clone();
    let mut health = Health::default();
    let (per_command, clients, used, maxmemory, keys, last_save, changes, snapshot_ok) = {
        let store = relock(store);
        for (_, entry) in store.db.iter_live(now_ms()) {
            let Data::Dialect(value) = &entry.data else {
                continue;
            };
            if let Some((items, fill, fpr)) = value.chain_health() {
                health.filters += 1;
                health.items += items;
                health.fill_sum += fill;
                health.fpr_sum += fpr;
                health.fpr_max = health.fpr_max.max(fpr);
            } else if let Value::Cuckoo(filter) = value {
                health.cuckoo_filters += 1;
                health.cuckoo_items += filter.items();
            }
        }
        (
            {
                let mut counts: Vec<(String, (u64, u64))> = store
                    .stats
                    .per_command
                    .iter()
                    .map(|(name, counts)| (name.to_lowercase(), *counts))
                    .collect();
                counts.sort();
                counts
            },
            store.stats.connected_clients,
            store.used_memory(),
            store.config.maxmemory,
            store.db.len(),
            store.persistence.last_save_unix,
            store.persistence.changes_since_save,
            store.persistence.last_bgsave_ok,
        )
    };
    let mut out = Exposition::new();
    out.family(
        "bloomgate_commands_total",
        Kind::Counter,
        help("bloomgate_commands_total"),
    );
    for (name, (calls, _)) in &per_command {
        out.sample("bloomgate_commands_total", &[("cmd", name)], calls);
    }
    out.family(
        "bloomgate_command_errors_total",
        Kind::Counter,
        help("bloomgate_command_errors_total"),
    );
    for (name, (_, errors)) in &per_command {
        out.sample("bloomgate_command_errors_total", &[("cmd", name)], errors);
    }
    let lat = latency;
    let bounds = BUCKETS_MICROS.map(|micros| micros as f64 / 1e6);
    let counts = lat.buckets.each_ref().map(|b| b.load(Ordering::Relaxed));
    out.histogram(
        "bloomgate_command_duration_seconds",
        help("bloomgate_command_duration_seconds"),
        &bounds,
        &counts,
        lat.count.load(Ordering::Relaxed),
        lat.sum_micros.load(Ordering::Relaxed) as f64 / 1e6,
    );
    let gauges = [
        ("bloomgate_connected_clients", clients as f64),
        ("bloomgate_keys", keys as f64),
        ("bloomgate_used_memory_bytes", used as f64),
        ("bloomgate_maxmemory_bytes", maxmemory as f64),
        (
            "bloomgate_last_snapshot_timestamp_seconds",
            last_save as f64,
        ),
        ("bloomgate_changes_since_snapshot", changes as f64),
    ];
    for (name, value) in gauges {
        out.gauge(name, help(name), value);
    }
    if let Some(aof) = aof {
        let (fsyncs, micros) = aof.fsync_stats();
        out.gauge(
            "bloomgate_aof_size_bytes",
            help("bloomgate_aof_size_bytes"),
            aof.size(),
        );
        out.counter(
            "bloomgate_aof_fsyncs_total",
            help("bloomgate_aof_fsyncs_total"),
            fsyncs,
        );
        out.counter(
            "bloomgate_aof_fsync_seconds_total",
            help("bloomgate_aof_fsync_seconds_total"),
            micros as f64 / 1e6,
        );
        let ok = u8::from(aof.error().is_none());
        out.gauge("bloomgate_aof_write_ok", help("bloomgate_aof_write_ok"), ok);
    }
    let ok = u8::from(snapshot_ok);
    out.gauge("bloomgate_snapshot_ok", help("bloomgate_snapshot_ok"), ok);
    let Health {
        filters,
        items,
        fill_sum,
        fpr_sum,
        fpr_max,
        cuckoo_filters,
        cuckoo_items,
    } = health;
    let mean = |sum: f64| {
        if filters == 0 {
            0.0
        } else {
            sum / filters as f64
        }
    };
    let health = [
        ("bloomgate_bloom_filters", filters as f64),
        ("bloomgate_bloom_items", items as f64),
        ("bloomgate_bloom_fill_ratio_mean", mean(fill_sum)),
        ("bloomgate_bloom_estimated_fpr_mean", mean(fpr_sum)),
        ("bloomgate_bloom_estimated_fpr_max", fpr_max),
        ("bloomgate_cuckoo_filters", cuckoo_filters as f64),
        ("bloomgate_cuckoo_items", cuckoo_items as f64),
    ];
    for (name, value) in health {
        out.gauge(name, help(name), value);
    }
    let mut text = out.finish();
    // The gate's own families (`bloomgate_gate_*`), rendered outside the store lock.
    if let Some(gate) = gate {
        text.push_str(&gate.gate().render_metrics());
    }
    text
}

/// The `# HELP` text of every metric serve exposes (a test checks that none is missing).
fn help(name: &str) -> &'static str {
    match name {
        "bloomgate_commands_total" => "Commands executed, by command name.",
        "bloomgate_command_errors_total" => "Commands that answered an error, by command name.",
        "bloomgate_command_duration_seconds" => {
            "Time to execute a command (parsing to reply encoded), in seconds."
        }
        "bloomgate_connected_clients" => "Client connections open now.",
        "bloomgate_keys" => "Keys in the dataset.",
        "bloomgate_used_memory_bytes" => {
            "Bytes allocated by the server (jemalloc's count; what maxmemory is checked against)."
        }
        "bloomgate_maxmemory_bytes" => "The configured memory limit in bytes (0: unlimited).",
        "bloomgate_last_snapshot_timestamp_seconds" => {
            "Unix time of the last successful snapshot (or of the start, before the first)."
        }
        "bloomgate_changes_since_snapshot" => "Writes since the last successful snapshot.",
        "bloomgate_aof_size_bytes" => "Size of the current append-only log generation in bytes.",
        "bloomgate_aof_fsyncs_total" => "fsync calls on the append-only log.",
        "bloomgate_aof_fsync_seconds_total" => {
            "Time spent in fsync of the append-only log, in seconds."
        }
        "bloomgate_aof_write_ok" => {
            "1 while the append-only log is written; 0 while a write fails (writes get MISCONF)."
        }
        "bloomgate_snapshot_ok" => {
            "1 if the last snapshot succeeded; 0 after a failed one (writes get MISCONF)."
        }
        "bloomgate_bloom_filters" => "Bloom filter (BF) keys.",
        "bloomgate_bloom_items" => "Items added to Bloom filter keys (as BF.CARD counts them).",
        "bloomgate_bloom_fill_ratio_mean" => "Mean fraction of bits set over Bloom filter keys.",
        "bloomgate_bloom_estimated_fpr_mean" => {
            "Mean false-positive rate estimated from each Bloom filter's fill."
        }
        "bloomgate_bloom_estimated_fpr_max" => {
            "Highest false-positive rate estimated from a Bloom filter's fill."
        }
        "bloomgate_cuckoo_filters" => "Cuckoo filter (CF) keys.",
        "bloomgate_cuckoo_items" => "Items in cuckoo filter keys.",
        _ => "",
    }
}
