//! The module's own allocations: hot commands allocate nothing, large reservations stay
//! unresident until written, and active defragmentation moves values without changing them.

use super::*;
use bloomgate_testkit::replies::build;

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

/// Active defragmentation moves our values: after churn (many keys of every type created, most
/// deleted) and `activedefrag yes` with thresholds that make every cycle run, `INFO bf` counts
/// moved allocations, and every remaining key dumps to the same bytes and answers as before.
/// Needs a Redis with active defrag (Redis 8.2 from `scripts/ci/get_redis8.sh`, through
/// `BLOOMGATE_REDIS_SERVER`); Debian's 7.0 refuses `activedefrag yes` and the test says SKIPPED.
#[test]
fn active_defrag_moves_values_and_keeps_answers() {
    if !have_redis("active_defrag_moves_values_and_keeps_answers") {
        return;
    }
    let server = Redis::start(&temp_dir("defrag"), &[], &[]);
    let c = &mut server.conn();
    if build("CONFIG SET activedefrag yes")
        .query::<Value>(c)
        .is_err()
    {
        eprintln!("SKIPPED active_defrag_moves_values_and_keeps_answers: no active defrag here");
        return;
    }
    cmd(c, "CONFIG SET activedefrag no");
    const KEYS: usize = 3000;
    let create = [
        "BF.ADD bf:{i} a",
        "CF.ADD cf:{i} a",
        "CMS.INITBYDIM cms:{i} 4 2",
        "TOPK.RESERVE topk:{i} 2 8 2 0.9",
        "TDIGEST.CREATE td:{i} COMPRESSION 10",
        "WF.RESERVE wf:{i} 0.1 10 60000 2",
        "CBF.RESERVE cbf:{i} 0.1 10",
    ];
    let mut pipe = redis::pipe();
    for i in 0..KEYS {
        for line in create {
            pipe.add_command(build(&line.replace("{i}", &i.to_string())))
                .ignore();
        }
    }
    let _: () = pipe.query(c).unwrap();
    // Keep every eighth key of each type: the rest leaves holes in the slabs.
    let kept: Vec<String> = create
        .iter()
        .flat_map(|line| {
            let prefix = line.split(' ').nth(1).unwrap().replace("{i}", "");
            (0..KEYS).map(move |i| format!("{prefix}{i}"))
        })
        .collect();
    let mut pipe = redis::pipe();
    for (n, key) in kept.iter().enumerate() {
        if n % 8 != 0 {
            pipe.cmd("DEL").arg(key).ignore();
        }
    }
    let _: () = pipe.query(c).unwrap();
    let kept: Vec<&String> = kept.iter().step_by(8).collect();
    let dumps = |c: &mut redis::Connection| -> Vec<Vec<u8>> {
        let mut pipe = redis::pipe();
        for key in &kept {
            pipe.cmd("DUMP").arg(key.as_str());
        }
        pipe.query(c).unwrap()
    };
    let before = dumps(c);
    for line in [
        "CONFIG SET active-defrag-ignore-bytes 1",
        "CONFIG SET active-defrag-threshold-lower 0",
        "CONFIG SET active-defrag-cycle-min 50",
        "CONFIG SET active-defrag-cycle-max 75",
        "CONFIG SET activedefrag yes",
    ] {
        assert_eq!(cmd(c, line), Value::Okay, "{line}");
    }
    let hits = |c: &mut redis::Connection| -> u64 {
        info_field(c, "bf", "bf_defrag_hits").parse().unwrap()
    };
    // Bounded wait: up to 600 polls, 100 ms apart.
    for _ in 0..600 {
        if hits(c) > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let moved = hits(c);
    let misses: u64 = info_field(c, "bf", "bf_defrag_misses").parse().unwrap();
    eprintln!("active defrag: {moved} allocations moved, {misses} left in place");
    assert!(moved > 0, "no value was moved ({misses} left in place)");
    cmd(c, "CONFIG SET activedefrag no");
    assert_eq!(dumps(c), before, "a moved value changed");
    for key in &kept {
        let reply = match key.split(':').next().unwrap() {
            "bf" => cmd(c, &format!("BF.EXISTS {key} a")),
            "cf" => cmd(c, &format!("CF.EXISTS {key} a")),
            "cbf" => cmd(c, &format!("CBF.ADD {key} b")),
            _ => cmd(c, &format!("TYPE {key}")),
        };
        assert_ne!(reply, Value::Nil, "{key}");
    }
    assert_eq!(cmd(c, "BF.EXISTS bf:0 a"), int(1));
    assert_eq!(cmd(c, "CBF.COUNT cbf:0 b"), int(1));
}
