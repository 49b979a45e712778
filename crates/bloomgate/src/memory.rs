//! How much memory this process can still take: the machine's available memory (or its cgroup's
//! limit, in a container) and the address space left under `RLIMIT_AS`. Every host checks a
//! filter's size against it *before* allocating (the CLI, the Python package, `bloomgate serve`
//! and the Redis module, where a failed allocation aborts the whole server): a size that does not
//! fit is refused with an error instead of an abort, a swap storm or the OOM killer.
//!
//! Read from Linux's `/proc` and `/sys/fs/cgroup` (no system calls); on other systems every figure
//! is unknown and nothing is refused here. [`Headroom::now`] reads the figures (tens of
//! microseconds); [`allowance`] is the cached form for hot paths: it re-reads at most every
//! 100 ms, and [`charge`] subtracts what callers allocated since, so two large allocations in
//! quick succession cannot both pass on one stale reading.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The memory figures a size is checked against; `None` where the system does not say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Headroom {
    /// Physical memory of the machine (or the cgroup's limit, if lower).
    pub total: Option<u64>,
    /// Memory that can be allocated without swapping: `MemAvailable`, or what the cgroup's
    /// limit leaves, whichever is lower.
    pub available: Option<u64>,
    /// Address space left under `RLIMIT_AS` (`None` when unlimited).
    pub address_space: Option<u64>,
}

/// Why a size was refused: what was asked, what is left, and which limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLarge {
    /// Bytes asked for.
    pub requested: u64,
    /// Bytes the limit leaves.
    pub limit: u64,
    /// Which limit.
    pub reason: Limit,
}

/// The limit a size ran into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The machine's (or cgroup's) available memory.
    Memory,
    /// The process' address-space limit (`ulimit -v`).
    AddressSpace,
}

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.reason {
            Limit::Memory => "of memory available on this machine",
            Limit::AddressSpace => "of address space left under this process' limit (ulimit -v)",
        };
        write!(
            f,
            "needs {}, more than the {} {what}",
            human_bytes(self.requested),
            human_bytes(self.limit)
        )
    }
}

impl std::error::Error for TooLarge {}

/// `1.5 GB`-style size (decimal units, as `df -H` and most tools print them).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "kB", "MB", "GB", "TB", "PB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

impl Headroom {
    /// The figures as the system reports them now.
    pub fn now() -> Self {
        #[cfg(target_os = "linux")]
        {
            linux::read()
        }
        #[cfg(not(target_os = "linux"))]
        {
            Self::default()
        }
    }

    /// The most one allocation may take: the lower of available memory and address space, less
    /// an eighth kept back for the process itself (its own buffers, allocator metadata, the
    /// replies it is about to send). `u64::MAX` when neither is known.
    pub fn usable(&self) -> u64 {
        let least = match (self.available, self.address_space) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => return u64::MAX,
        };
        least - least / 8
    }

    /// Refuses `bytes` if it does not fit in [`Headroom::usable`], naming the limit.
    pub fn check(&self, bytes: u64) -> Result<(), TooLarge> {
        let lowest = [
            (self.available, Limit::Memory),
            (self.address_space, Limit::AddressSpace),
        ]
        .into_iter()
        .filter_map(|(v, reason)| v.map(|v| (v - v / 8, reason)))
        .min_by_key(|&(v, _)| v);
        match lowest {
            Some((limit, reason)) if bytes > limit => Err(TooLarge {
                requested: bytes,
                limit,
                reason,
            }),
            _ => Ok(()),
        }
    }
}

/// Checks `bytes` against the memory available now (a fresh reading): what a command-line tool
/// or a library constructor calls before building a filter of that size.
pub fn check(bytes: u64) -> Result<(), TooLarge> {
    Headroom::now().check(bytes)
}

/// Filter allocations at least this large are checked against a fresh [`Headroom::now`] before
/// they are made (smaller ones cannot matter, and skip the `/proc` reads).
pub const CHECK_FROM_BYTES: u64 = 16 << 20;

/// Refuses a filter allocation of `bytes` that does not fit in the memory available now, with
/// [`crate::Error::OutOfMemory`] naming both sizes (the library's constructors call it before
/// allocating, so a huge request is an error, never an abort or a swap storm).
pub(crate) fn ensure_fits(bytes: u64) -> crate::Result<()> {
    if bytes < CHECK_FROM_BYTES {
        return Ok(());
    }
    check(bytes).map_err(|e| crate::Error::OutOfMemory(format!("a filter of this size {e}")))
}

/// How long a cached reading is trusted.
const REFRESH: Duration = Duration::from_millis(100);

/// (when read, usable bytes then); bytes charged since live in [`CHARGED`].
static CACHE: Mutex<Option<(Instant, u64)>> = Mutex::new(None);
static CHARGED: AtomicU64 = AtomicU64::new(0);

/// What one allocation may take now ([`Headroom::usable`]), from a reading at most 100 ms old
/// less everything [`charge`]d since. `fresh` forces a new reading (callers about to allocate a
/// large share of the last figure use it).
pub fn allowance(fresh: bool) -> u64 {
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let stale = cache.is_none_or(|(at, _)| fresh || at.elapsed() >= REFRESH);
    if stale {
        *cache = Some((Instant::now(), Headroom::now().usable()));
        CHARGED.store(0, Ordering::Relaxed);
    }
    let (_, usable) = cache.expect("just filled");
    usable.saturating_sub(CHARGED.load(Ordering::Relaxed))
}

/// Records `bytes` just allocated, so [`allowance`] answers less until its next reading.
pub fn charge(bytes: u64) {
    CHARGED.fetch_add(bytes, Ordering::Relaxed);
}

#[cfg(target_os = "linux")]
mod linux {
    use super::Headroom;

    /// `Name:   123 kB` from a `/proc` status-style file, in bytes.
    fn kib_field(text: &str, name: &str) -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let value: u64 = line[name.len()..].split_whitespace().next()?.parse().ok()?;
        value.checked_mul(1024)
    }

    /// The soft `Max address space` limit from `/proc/self/limits`, if not unlimited.
    fn address_space_limit() -> Option<u64> {
        let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
        let line = limits
            .lines()
            .find(|l| l.starts_with("Max address space"))?;
        line["Max address space".len()..]
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }

    /// A cgroup v2 file holding a byte count (`max` means no limit).
    fn cgroup_bytes(name: &str) -> Option<u64> {
        let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let path = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
        std::fs::read_to_string(format!("/sys/fs/cgroup{path}/{name}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    pub(super) fn read() -> Headroom {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mut total = kib_field(&meminfo, "MemTotal:");
        let mut available = kib_field(&meminfo, "MemAvailable:");
        if let Some(limit) = cgroup_bytes("memory.max") {
            let used = cgroup_bytes("memory.current").unwrap_or(0);
            total = Some(total.map_or(limit, |t| t.min(limit)));
            let left = limit.saturating_sub(used);
            available = Some(available.map_or(left, |a| a.min(left)));
        }
        let address_space = address_space_limit().map(|limit| {
            let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            limit.saturating_sub(kib_field(&status, "VmSize:").unwrap_or(0))
        });
        Headroom {
            total,
            available,
            address_space,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_keeps_an_eighth_back_and_takes_the_lower_limit() {
        let h = Headroom {
            total: Some(16 << 30),
            available: Some(8 << 30),
            address_space: Some(4 << 30),
        };
        assert_eq!(h.usable(), (4u64 << 30) / 8 * 7);
        assert_eq!(Headroom::default().usable(), u64::MAX);
        let err = h.check(5 << 30).unwrap_err();
        assert_eq!(err.reason, Limit::AddressSpace);
        let h = Headroom {
            address_space: None,
            ..h
        };
        let err = h.check(100 << 30).unwrap_err();
        assert_eq!(err.reason, Limit::Memory);
        assert_eq!(err.requested, 100 << 30);
        assert!(h.check(1 << 20).is_ok());
        assert_eq!(
            err.to_string(),
            "needs 107.4 GB, more than the 7.5 GB of memory available on this machine"
        );
    }

    #[test]
    fn this_machine_reports_figures() {
        let h = Headroom::now();
        if cfg!(target_os = "linux") {
            assert!(h.total.is_some() && h.available.is_some(), "{h:?}");
        }
        assert!(check(1 << 10).is_ok());
        assert!(check(u64::MAX / 2).is_err() || h.available.is_none());
    }

    #[test]
    fn charges_lower_the_cached_allowance() {
        let before = allowance(true);
        charge(1 << 20);
        let after = allowance(false);
        // Another test may refresh the cache in between; either way the charge never raises it.
        assert!(after <= before.saturating_add(64 << 20));
    }

    /// 700G items at 1% (840 GB, inside the library's 1 TiB limit): refused before allocating
    /// on any machine with less memory available, naming the size.
    #[test]
    fn constructors_refuse_filters_larger_than_memory() {
        if Headroom::now()
            .available
            .is_none_or(|a| a > 840_000_000_000)
        {
            return;
        }
        match crate::BloomFilter::new(700_000_000_000, 0.01) {
            Err(crate::Error::OutOfMemory(msg)) => assert!(msg.contains("needs 8"), "{msg}"),
            other => panic!("{:?}", other.map(|f| f.len())),
        }
        assert!(matches!(
            crate::CountingBloomFilter::new(100_000_000_000, 0.01),
            Err(crate::Error::OutOfMemory(_))
        ));
        assert!(matches!(
            crate::CuckooFilter::new(200_000_000_000, 0.01),
            Err(crate::Error::OutOfMemory(_))
        ));
        assert!(crate::BloomFilter::new(1000, 0.01).is_ok());
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(117_000_000_000), "117.0 GB");
        assert_eq!(human_bytes(1_500_000), "1.5 MB");
    }
}
