//! The module's own allocations: hot commands allocate nothing, and large reservations stay
//! unresident until written.

use super::*;

/// The module's allocation count (`INFO bf`, from its counting global allocator).
fn module_allocations(c: &mut redis::Connection) -> u64 {
    info_field(c, "bf", "bf_allocations").parse().unwrap()
}

/// The hot commands on an existing filter allocate nothing in the module: arguments on the
/// stack, one key open, no settings copied, the budget not asked, the reply sent directly.
#[test]
fn hot_commands_allocate_nothing() {
    if !have_redis("hot_commands_allocate_nothing") {
        return;
    }
    let server = Redis::start(&temp_dir("noalloc"), &[], &[]);
    let c = &mut server.conn();
    cmd(c, "BF.RESERVE bf 0.01 10000");
    cmd(c, "CF.RESERVE cf 10000");
    for command in ["BF.ADD bf", "BF.EXISTS bf", "CF.ADD cf", "CF.EXISTS cf"] {
        // Warm up (first-use initialisation), then count.
        cmd(c, &format!("{command} warm"));
        let before = module_allocations(c);
        let mut pipe = redis::pipe();
        for i in 0..500 {
            let mut words = command.split(' ');
            pipe.cmd(words.next().unwrap())
                .arg(words.next().unwrap())
                .arg(format!("item{i}"));
        }
        let replies: Vec<i64> = pipe.query(c).unwrap();
        assert_eq!(replies.len(), 500);
        let after = module_allocations(c);
        // Reading the counter allocates nothing itself.
        assert_eq!(module_allocations(c), after);
        assert_eq!(
            after,
            before,
            "{command}: {} allocations in 500 calls",
            after - before
        );
    }
    // A command that creates a filter does allocate (the counter counts).
    let before = module_allocations(c);
    cmd(c, "BF.ADD fresh x");
    assert!(module_allocations(c) > before);
}

/// Resident memory of the server process, from /proc.
fn resident(c: &mut redis::Connection) -> u64 {
    let pid = info_field(c, "server", "process_id");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    kib * 1024
}

/// Filter arrays come zeroed from Redis' calloc, so a large reservation maps pages only as
/// they are written (as RedisBloom's do), while MEMORY USAGE and used_memory report the full
/// logical size.
#[test]
fn large_reservations_stay_unresident_until_written() {
    if !have_redis("large_reservations_stay_unresident_until_written") {
        return;
    }
    let server = Redis::start(&temp_dir("lazy"), &[], &[]);
    let c = &mut server.conn();
    for (reserve, key) in [
        ("BF.RESERVE b 0.01 100000000", "b"),
        ("CF.RESERVE c 100000000", "c"),
    ] {
        let used_before: u64 = info_field(c, "memory", "used_memory").parse().unwrap();
        let before = resident(c);
        assert_eq!(cmd(c, reserve), Value::Okay);
        let grown = resident(c).saturating_sub(before);
        assert!(
            grown <= 8 << 20,
            "{reserve}: resident memory grew by {grown} bytes"
        );
        let used: u64 = info_field(c, "memory", "used_memory").parse().unwrap();
        assert!(
            used - used_before > 100_000_000,
            "used_memory counts the whole array"
        );
        let Value::Int(usage) = cmd(c, &format!("MEMORY USAGE {key}")) else {
            panic!("MEMORY USAGE {key}")
        };
        assert!(usage > 100_000_000, "MEMORY USAGE {key} = {usage}");
    }
    // Writes make pages resident, and the filter answers as ever.
    for i in 0..1000 {
        cmd(c, &format!("BF.ADD b item{i}"));
        cmd(c, &format!("CF.ADD c item{i}"));
    }
    assert_eq!(cmd(c, "BF.EXISTS b item999"), int(1));
    assert_eq!(cmd(c, "CF.EXISTS c item999"), int(1));
    assert_eq!(cmd(c, "BF.EXISTS b absent"), int(0));
}
