//! A filter's bits are lazily zeroed — a 100M-item blocked filter (120 MB) takes almost no
//! resident memory until written, as a classic one — and an allocation the allocator refuses is
//! an `OutOfMemory` error, never an abort. One test in its own process: it lowers the process'
//! data limit to make the allocator refuse.

use bloomgate::{BlockedBloomFilter, BloomFilter, CountingBloomFilter, Error};

/// VmRSS of this process, in bytes.
#[cfg(target_os = "linux")]
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

#[cfg(target_os = "linux")]
#[test]
fn large_filters_stay_unresident_and_refused_allocations_are_errors() {
    const MB: u64 = 1 << 20;
    let before = resident();
    let mut blocked = BlockedBloomFilter::new(100_000_000, 0.01).unwrap();
    let classic = BloomFilter::new(100_000_000, 0.01).unwrap();
    let grown = resident().saturating_sub(before);
    assert!(blocked.params().bytes() > 100 * MB);
    assert!(
        grown < 8 * MB,
        "two 100M-item filters made {grown} bytes resident"
    );
    // Written pages become resident, and read back as written.
    for i in 0..1000 {
        blocked.insert(format!("k{i}"));
    }
    assert!((0..1000).all(|i| blocked.contains(format!("k{i}"))));
    drop((blocked, classic));

    // The allocator refuses past the data limit (the memory checks before it read RLIMIT_AS and
    // the machine's memory, which both still allow): an error, and the process goes on.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid resource and a pointer to a live rlimit.
    unsafe { assert_eq!(libc::getrlimit(libc::RLIMIT_DATA, &mut limit), 0) };
    let saved = limit;
    limit.rlim_cur = resident() + 64 * MB;
    // SAFETY: as above; only the soft limit is lowered, and restored below.
    unsafe { assert_eq!(libc::setrlimit(libc::RLIMIT_DATA, &limit), 0) };
    let refused = [
        BlockedBloomFilter::new(100_000_000, 0.01).err(),
        BloomFilter::new(100_000_000, 0.01).err(),
        CountingBloomFilter::new(100_000_000, 0.01).err(),
    ];
    // SAFETY: as above.
    unsafe { assert_eq!(libc::setrlimit(libc::RLIMIT_DATA, &saved), 0) };
    for error in refused {
        assert!(
            matches!(&error, Some(Error::OutOfMemory(m)) if m.contains("allocator refused")),
            "{error:?}"
        );
    }
    assert!(BlockedBloomFilter::new(1000, 0.01).is_ok());
}
