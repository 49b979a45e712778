//! The module's own allocations: hot commands allocate nothing, large reservations stay
//! unresident until written, and active defragmentation moves values without changing them.

use super::*;
use bloomgate_dialect::ERR_OOM;
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

/// Filter arrays come zeroed from Redis' calloc (`RedisModule_TryCalloc`; on Redis 7.0 pages
/// given back with `MADV_DONTNEED`), so a large reservation maps pages only as they are written
/// (as RedisBloom's do) — a classic, a blocked and a cuckoo filter for 100M items each grow the
/// server by at most 8 MB — while MEMORY USAGE and used_memory report the full logical size.
#[test]
fn large_reservations_stay_unresident_until_written() {
    if !have_redis("large_reservations_stay_unresident_until_written") {
        return;
    }
    let server = Redis::start(&temp_dir("lazy"), &[], &[]);
    let c = &mut server.conn();
    for (reserve, key) in [
        ("BF.RESERVE b 0.01 100000000", "b"),
        ("BF.RESERVE k 0.01 100000000 LAYOUT blocked", "k"),
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
    // Writes make pages resident, and the filters answer as ever: the pages read as zeros.
    for i in 0..1000 {
        cmd(c, &format!("BF.ADD b item{i}"));
        cmd(c, &format!("BF.ADD k item{i}"));
        cmd(c, &format!("CF.ADD c item{i}"));
    }
    assert_eq!(cmd(c, "BF.EXISTS b item999"), int(1));
    assert_eq!(cmd(c, "BF.EXISTS k item999"), int(1));
    assert_eq!(cmd(c, "CF.EXISTS c item999"), int(1));
    for key in ["b", "k"] {
        let mut probe = redis::cmd("BF.MEXISTS");
        probe.arg(key);
        for i in 0..10_000 {
            probe.arg(format!("absent{i}"));
        }
        let found: Vec<i64> = probe.query(c).unwrap();
        assert_eq!(found.iter().sum::<i64>(), 0, "{key}: absent items found");
    }
}

/// An allocation Redis' allocator refuses — the process' data limit (`RLIMIT_DATA`, lowered
/// under the running server; the module's memory budget reads the machine's memory and
/// `RLIMIT_AS`, which both still allow it) — answers an error, never aborts the server: a
/// reserve of every family, and a Bloom chain's growth, classic and blocked; the server keeps
/// answering and the filters keep their items.
#[cfg(target_os = "linux")]
#[test]
fn allocations_the_allocator_refuses_answer_errors() {
    if !have_redis("allocations_the_allocator_refuses_answer_errors") {
        return;
    }
    let server = Redis::start(&temp_dir("refused"), &[], &[]);
    let c = &mut server.conn();
    for key in ["g", "gk"] {
        let layout = if key == "gk" { " LAYOUT blocked" } else { "" };
        // Growth needs a link for 128M items next.
        let reserve = format!("BF.RESERVE {key} 0.01 100000 EXPANSION 1280{layout}");
        assert_eq!(cmd(c, &reserve), Value::Okay);
        // Exactly full: the next new item needs the next link.
        let mut next = 0;
        loop {
            let Value::Int(card) = cmd(c, &format!("BF.CARD {key}")) else {
                panic!("BF.CARD")
            };
            if card == 100_000 {
                break;
            }
            let mut fill = redis::cmd("BF.MADD");
            fill.arg(key);
            for _ in card..100_000 {
                fill.arg(format!("i{next}"));
                next += 1;
            }
            let _: Vec<i64> = fill.query(c).unwrap();
        }
    }
    let pid: i32 = info_field(c, "server", "process_id").parse().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let data_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmData:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    let limit = libc::rlimit {
        rlim_cur: data_kib * 1024 + (64 << 20),
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: prlimit on a live pid with a valid resource and a live rlimit; only the server's
    // soft data limit is lowered.
    let set = unsafe { libc::prlimit(pid, libc::RLIMIT_DATA, &limit, std::ptr::null_mut()) };
    assert_eq!(set, 0, "prlimit: {}", std::io::Error::last_os_error());
    for (command, refusal) in [
        ("BF.RESERVE big 0.01 100000000 LAYOUT blocked", ERR_OOM),
        ("BF.RESERVE big 0.01 100000000", ERR_OOM),
        ("CF.RESERVE big 300000000", ERR_OOM),
        ("CBF.RESERVE big 0.01 100000000", ERR_OOM),
        (
            "CMS.INITBYDIM big 10000000 5",
            "CMS: Insufficient memory to create the key",
        ),
        (
            "TOPK.RESERVE big 10 10000000 5 0.9",
            "ERR Insufficient memory to create topk data structure",
        ),
        (
            "TDIGEST.CREATE big COMPRESSION 3000000",
            "ERR T-Digest: allocation failed",
        ),
        ("BF.MADD g n1 n2 n3 n4 n5", ERR_OOM),
        ("BF.MADD gk n1 n2 n3 n4 n5", ERR_OOM),
    ] {
        assert_eq!(error_of(c, command), refusal, "{command}");
        assert_eq!(cmd(c, "PING"), Value::SimpleString("PONG".into()));
    }
    assert_eq!(cmd(c, "EXISTS big"), int(0));
    for key in ["g", "gk"] {
        assert_eq!(
            cmd(c, &format!("BF.INFO {key} FILTERS")),
            Value::Array(vec![int(1)])
        );
        assert_eq!(cmd(c, &format!("BF.CARD {key}")), int(100_000), "{key}");
    }
    // With the limit back, the same growth goes through.
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: as above.
    let set = unsafe { libc::prlimit(pid, libc::RLIMIT_DATA, &unlimited, std::ptr::null_mut()) };
    assert_eq!(set, 0);
    let Value::Array(added) = cmd(c, "BF.MADD gk n1 n2 n3 n4 n5") else {
        panic!("BF.MADD answers an array")
    };
    assert_eq!(added.len(), 5);
    assert_eq!(cmd(c, "BF.INFO gk FILTERS"), Value::Array(vec![int(2)]));
}

/// Active defragmentation moves our values: after churn (many keys of every type created, most
/// deleted, beside a few values with many allocations: a chain of many links, a Top-K with a
/// large heap, a t-digest with many centroids, a cuckoo filter of many sub-filters) and
/// `activedefrag yes` with thresholds that make every cycle run, `INFO bf` counts moved
/// allocations in several families, the large values were walked across several calls with a
/// cursor (`bf_defrag_resumed`), and every key dumps to the same bytes and answers as before.
/// Always inside Redis 8.2 (`bloomgate_testkit::redis8_server_binary`: `scripts/ci/get_redis8.sh`'s,
/// built with the jemalloc active defrag needs), whichever server the other tests run in:
/// Debian's 7.0 and Valkey link a jemalloc without it and refuse `activedefrag yes`, so there
/// is nothing to test in them. Without Redis 8 the test goes through `skip_or_fail` (a failure
/// under CI); Redis 8 refusing `activedefrag yes` fails it.
#[test]
fn active_defrag_moves_values_and_keeps_answers() {
    let test = "active_defrag_moves_values_and_keeps_answers";
    let Some(redis8) = bloomgate_testkit::redis8_server_binary(test) else {
        return;
    };
    let server = Redis::try_start_at(&redis8, &temp_dir("defrag"), &[], &[])
        .unwrap_or_else(|log| panic!("Redis 8 with the module did not start: {log}"));
    let c = &mut server.conn();
    if let Err(e) = build("CONFIG SET activedefrag yes").query::<Value>(c) {
        panic!("{redis8} refused `activedefrag yes`: {e}");
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
    let large = large_values(c);
    let mut pipe = redis::pipe();
    for i in 0..KEYS {
        for line in create {
            pipe.add_command(build(&line.replace("{i}", &i.to_string())))
                .ignore();
        }
    }
    let _: () = pipe.query(c).unwrap();
    // Keep every eighth key of each type: the rest leaves holes in the slabs.
    let churned: Vec<String> = create
        .iter()
        .flat_map(|line| {
            let prefix = line.split(' ').nth(1).unwrap().replace("{i}", "");
            (0..KEYS).map(move |i| format!("{prefix}{i}"))
        })
        .collect();
    let mut pipe = redis::pipe();
    for (n, key) in churned.iter().enumerate() {
        if n % 8 != 0 {
            pipe.cmd("DEL").arg(key).ignore();
        }
    }
    let _: () = pipe.query(c).unwrap();
    let mut kept: Vec<String> = churned.into_iter().step_by(8).collect();
    kept.extend(LARGE_KEYS.iter().map(|k| k.to_string()));
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
        // Values with more allocations than this go through the resumable (cursor) path.
        "CONFIG SET active-defrag-max-scan-fields 200",
        "CONFIG SET activedefrag yes",
    ] {
        assert_eq!(cmd(c, line), Value::Okay, "{line}");
    }
    let field = |c: &mut redis::Connection, name: &str| -> u64 {
        info_field(c, "bf", &format!("bf_{name}")).parse().unwrap()
    };
    let families = ["bf", "cf", "cms", "topk", "tdigest", "wf", "cbf"];
    let families_hit = |c: &mut redis::Connection| -> Vec<&str> {
        families
            .into_iter()
            .filter(|f| field(c, &format!("{f}_defrag_hits")) > 0)
            .collect()
    };
    // Bounded wait: up to 600 polls, 100 ms apart, for hits in every family and a resumed walk.
    for _ in 0..600 {
        if families_hit(c).len() == families.len() && field(c, "defrag_resumed") > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    cmd(c, "CONFIG SET activedefrag no");
    let text: String = redis::cmd("INFO").arg("bf").query(c).unwrap();
    eprintln!("active defrag:\n{text}");
    let moved = field(c, "defrag_hits");
    let per_family: u64 = families
        .iter()
        .map(|f| field(c, &format!("{f}_defrag_hits")))
        .sum();
    assert_eq!(per_family, moved, "the families' hits add up to the total");
    let hit = families_hit(c);
    assert_eq!(hit, families, "every family has moved allocations");
    assert!(
        field(c, "defrag_resumed") > 0,
        "no walk paused and resumed with a cursor"
    );
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
    assert_eq!(large_values(c), large, "a large value answers differently");
}

/// The values with many allocations [`large_values`] makes.
const LARGE_KEYS: [&str; 4] = ["big:bf", "big:cf", "big:topk", "big:td"];

/// Makes the values with many allocations on the first call (when they do not exist yet), and
/// returns their answers: every item of the chain and the cuckoo filter, the Top-K's list, the
/// t-digest's quantiles.
fn large_values(c: &mut redis::Connection) -> Vec<Value> {
    const ITEMS: usize = 600;
    let fresh = cmd(c, "EXISTS big:bf") == int(0);
    if fresh {
        cmd(c, "BF.RESERVE big:bf 0.01 4 EXPANSION 1");
        cmd(c, "CF.RESERVE big:cf 64 BUCKETSIZE 2 EXPANSION 1");
        cmd(c, "TOPK.RESERVE big:topk 1500 64 4 0.9");
        cmd(c, "TDIGEST.CREATE big:td COMPRESSION 500");
        let mut pipe = redis::pipe();
        for i in 0..ITEMS {
            pipe.cmd("BF.ADD")
                .arg("big:bf")
                .arg(format!("item{i}"))
                .ignore();
            pipe.cmd("CF.ADD")
                .arg("big:cf")
                .arg(format!("item{i}"))
                .ignore();
        }
        for i in 0..3000 {
            pipe.cmd("TOPK.ADD")
                .arg("big:topk")
                .arg(format!("item{}", i % 1700))
                .ignore();
        }
        for i in 0..5000 {
            pipe.cmd("TDIGEST.ADD")
                .arg("big:td")
                .arg((i * 7919 % 10007) as f64 / 3.0)
                .ignore();
        }
        let _: () = pipe.query(c).unwrap();
    }
    let mut pipe = redis::pipe();
    for i in 0..ITEMS {
        pipe.cmd("BF.EXISTS").arg("big:bf").arg(format!("item{i}"));
        pipe.cmd("CF.EXISTS").arg("big:cf").arg(format!("item{i}"));
    }
    pipe.cmd("TOPK.LIST").arg("big:topk").arg("WITHCOUNT");
    pipe.cmd("TDIGEST.QUANTILE")
        .arg("big:td")
        .arg(0.01)
        .arg(0.5)
        .arg(0.99);
    pipe.cmd("BF.INFO").arg("big:bf").arg("FILTERS");
    let answers: Vec<Value> = pipe.query(c).unwrap();
    if fresh {
        assert!(answers[..2 * ITEMS].iter().all(|a| *a == int(1)));
        let links = answers.last().unwrap();
        assert!(
            matches!(links, Value::Array(a) if matches!(a[..], [Value::Int(n)] if n > 50)),
            "a chain of many links: {links:?}"
        );
    }
    answers
}
