//! Results: one JSON object (`machine`, `results`, `floor`) on stdout and a
//! human-readable table on stderr, with each query cost as a ratio to the memory floor.

use crate::floor::Floor;
use crate::results::{Row, Summary};
use crate::sweep::SweepPoint;
use serde::Serialize;

/// One table: a size with its contenders' summaries and the hash-only cost.
pub struct Group {
    /// One line per contender.
    pub summaries: Vec<Summary>,
    /// The hash-only cost per key (XXH3-128).
    pub hash_ns: f64,
}

/// The machine the numbers come from.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// The CPU model, from /proc/cpuinfo (`unknown` elsewhere).
    pub cpu: String,
    /// Threads the machine can run at once.
    pub cores: usize,
    /// Total memory, from /proc/meminfo (0 elsewhere).
    pub memory_bytes: u64,
    /// `rustc --version`, when rustc is on the PATH.
    pub rustc: Option<String>,
    /// When the run started, UTC.
    pub date: String,
    /// The run's mode: `full`, `quick` or `sweep`.
    pub mode: &'static str,
}

impl Machine {
    /// This machine, for a run in `mode`.
    pub fn detect(mode: &'static str) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .and_then(|r| r.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_kib: u64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0);
        let rustc = std::process::Command::new("rustc")
            .arg("--version")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes: memory_kib * 1024,
            rustc,
            date: utc_now(),
            mode,
        }
    }
}

/// Current UTC time as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, Howard Hinnant's algorithm).
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The whole JSON document.
#[derive(Debug, Serialize)]
pub struct Document<'a> {
    /// The machine the numbers come from.
    pub machine: &'a Machine,
    /// One row per contender, size and operation.
    pub results: &'a [Row],
    /// The memory-floor probes.
    pub floor: &'a [Floor],
    /// The accuracy sweep, when one ran (full and `--sweep` modes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep: Option<&'a [SweepPoint]>,
}

/// Formats `bytes` as KiB/MiB/GiB.
pub fn human_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1 << 20) as f64 {
        format!("{:.1} MiB", b / (1 << 20) as f64)
    } else {
        format!("{:.0} KiB", b / 1024.0)
    }
}

/// The floor to compare a filter of `bytes` against: the probe on the nearest buffer size, the
/// latest one when a size was probed more than once (`--bits` probes each size per group, and
/// a group's table follows its own probe).
pub fn floor_for(floors: &[Floor], bytes: u64, pattern: &str) -> Option<f64> {
    floors
        .iter()
        .rev()
        .filter(|f| f.pattern == pattern)
        .min_by(|a, b| {
            let da = (a.bytes as f64 / bytes as f64).ln().abs();
            let db = (b.bytes as f64 / bytes as f64).ln().abs();
            da.total_cmp(&db)
        })
        .map(|f| f.ns_per_line)
}

/// Prints the result table for one size group on stderr. `hash_ns` is the hash-only cost per key;
/// `miss/fl` = query_miss ÷ (hash-only + independent floor at the filter's size), the
/// single-query floor (hash the key, then one random line read); `bat/fl` = query_miss_batch ÷
/// independent floor; `bat/fh` = query_miss_batch ÷ hashed floor (the same reads, each key
/// hashed too).
pub fn print_table(title: &str, rows: &[Summary], floors: &[Floor], hash_ns: f64) {
    eprintln!("\n== {title}   (hash-only XXH3-128: {hash_ns:.2} ns/key)");
    eprintln!(
        "{:<26} {:>10} {:>9} {:>7} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7}",
        "filter",
        "memory",
        "bits/it",
        "build s",
        "ins ns",
        "hit ns",
        "miss ns",
        "batch ns",
        "FPR %",
        "model %",
        "fpr/mdl",
        "miss/fl",
        "bat/fl",
        "bat/fh"
    );
    for s in rows {
        let floor = floor_for(floors, s.bytes, "independent").unwrap_or(f64::NAN);
        let hashed = floor_for(floors, s.bytes, "hashed").unwrap_or(f64::NAN);
        let model = s
            .model_fpr
            .map_or("-".to_string(), |m| format!("{:.4}", m * 100.0));
        let fpr_ratio = match s.model_fpr {
            Some(m) if m > 0.0 => format!("{:.3}", s.fpr / m),
            _ => "-".into(),
        };
        eprintln!(
            "{:<26} {:>10} {:>9.2} {:>7.2} {:>8.2} {:>8.2} {:>8.2} {:>8} {:>9.4} {:>9} {:>7} {:>7.2} {:>7} {:>7}",
            s.filter,
            human_bytes(s.bytes),
            s.bits_per_item,
            s.build_s,
            s.insert_ns,
            s.hit_ns,
            s.miss_ns,
            s.batch_ns.map_or("-".into(), |b| format!("{b:.2}")),
            s.fpr * 100.0,
            model,
            fpr_ratio,
            s.miss_ns / (hash_ns + floor),
            s.batch_ns.map_or("-".into(), |b| format!("{:.2}", b / floor)),
            s.batch_ns.map_or("-".into(), |b| format!("{:.2}", b / hashed)),
        );
    }
    for s in rows {
        eprintln!("  {:<20} {}", s.filter, s.config);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nearest size wins; of two probes of one size, the later one (a group's own).
    #[test]
    fn floor_for_takes_the_nearest_size_and_the_latest_probe() {
        let floor = |bytes, pattern, ns_per_line| Floor {
            bytes,
            pattern,
            ns_per_line,
        };
        let floors = [
            floor(1 << 20, "independent", 1.0),
            floor(256 << 20, "independent", 6.7),
            floor(256 << 20, "hashed", 8.3),
            floor(256 << 20, "independent", 6.5),
            floor(256 << 20, "hashed", 8.2),
        ];
        assert_eq!(floor_for(&floors, 1_250_000, "independent"), Some(1.0));
        assert_eq!(floor_for(&floors, 256 << 20, "independent"), Some(6.5));
        assert_eq!(floor_for(&floors, 200 << 20, "hashed"), Some(8.2));
        assert_eq!(floor_for(&floors, 1 << 20, "dependent"), None);
    }
}
