//! The valkey-bloom dialect (`DIALECT valkey-bloom-0.1` / `valkey-bloom`): valkey-bloom's names,
//! arities, option parsing, replies and errors for its eight BF.* commands, its defaults, its
//! wrong-type reply, its events and its memory rule — and everything else still there.

use crate::support::{have_redis, temp_dir, Redis};
use crate::{digest, info_field, rewrite_aof};
use bloomgate_testkit::replies::{cmd, error_of, events_of, int, keyspace_subscriber, wire_error};
use redis::Value;

fn ok() -> Value {
    Value::Okay
}

fn ints(v: &[i64]) -> Value {
    Value::Array(v.iter().map(|&n| int(n)).collect())
}

/// valkey-bloom 0.1.0's replies and refusals, command by command.
#[test]
fn valkey_bloom_0_1_answers_as_valkey_bloom() {
    if !have_redis("valkey_bloom_0_1_answers_as_valkey_bloom") {
        return;
    }
    let server = Redis::start(&temp_dir("vkb01"), &["DIALECT", "valkey-bloom-0.1"], &[]);
    let mut c = server.conn();
    // Registered without command info: arity -1, the handler checks the count.
    let info = cmd(&mut c, "COMMAND INFO BF.ADD");
    let Value::Array(entries) = info else {
        panic!("{info:?}")
    };
    let Value::Array(entry) = &entries[0] else {
        panic!("{entries:?}")
    };
    assert_eq!(entry[1], int(-1));
    for (line, want) in [
        (
            "BF.ADD k",
            "ERR wrong number of arguments for 'BF.ADD' command",
        ),
        (
            "bf.add k a b",
            "ERR wrong number of arguments for 'BF.ADD' command",
        ),
        (
            "BF.INSERT k HELLO",
            "ERR wrong number of arguments for 'BF.INSERT' command",
        ),
        (
            "BF.INSERT k EXPANSION 2",
            "ERR wrong number of arguments for 'BF.INSERT' command",
        ),
        (
            "BF.RESERVE k 0.01 1 NONSCALING EXPANSION 1",
            "ERR wrong number of arguments for 'BF.RESERVE' command",
        ),
        (
            "BF.INFO k a b",
            "ERR wrong number of arguments for 'BF.INFO' command",
        ),
        (
            "BF.RESERVE k 0.999999999 3000",
            "ERR (0 < error rate range < 1)",
        ),
        ("BF.RESERVE k 0.01 4394967295", "ERR bad capacity"),
        (
            "BF.RESERVE k 0.01 0",
            "ERR (capacity should be larger than 0)",
        ),
        ("BF.RESERVE k 0.01 10 FOO", "ERROR"),
        ("BF.INSERT k EXPANSION 11 ITEMS a", "ERR bad expansion"),
        ("BF.INSERT k HELLO WORLD", "ERR unknown argument received"),
        ("BF.INSERT k NOCREATE ITEMS a", "ERR not found"),
        ("BF.INFO k", "ERR not found"),
    ] {
        assert_eq!(error_of(&mut c, line), want, "{line}");
    }
    // Defaults: capacity 100000, expansion 2; one field is the bare value.
    assert_eq!(cmd(&mut c, "BF.ADD d a"), int(1));
    assert_eq!(cmd(&mut c, "BF.INFO d Capacity"), int(100000));
    assert_eq!(cmd(&mut c, "BF.INFO d expansion"), int(2));
    assert_eq!(
        error_of(&mut c, "BF.INFO d foo"),
        "ERR invalid information value"
    );
    // Options read left to right, the last winning; error rates above RedisBloom's 0.25 kept.
    assert_eq!(
        cmd(
            &mut c,
            "BF.INSERT s NONSCALING EXPANSION 3 ERROR 0.5 ITEMS a b EXPANSION"
        ),
        ints(&[1, 1, 1])
    );
    assert_eq!(cmd(&mut c, "BF.INFO s EXPANSION"), int(3));
    assert_eq!(cmd(&mut c, "BF.RESERVE n 0.01 2 NONSCALING"), ok());
    assert_eq!(cmd(&mut c, "BF.INFO n EXPANSION"), Value::Nil);
    let whole = cmd(&mut c, "BF.INFO n");
    let Value::Array(fields) = whole else {
        panic!("{whole:?}")
    };
    assert_eq!(fields.len(), 10);
    // Another type: valkey-bloom 0.1.0's ERROR, reads included.
    let _: () = redis::cmd("SET").arg(&["str", "v"]).query(&mut c).unwrap();
    for line in [
        "BF.EXISTS str a",
        "BF.ADD str a",
        "BF.CARD str",
        "BF.INFO str",
    ] {
        assert_eq!(error_of(&mut c, line), "ERROR", "{line}");
    }
    // The other families are still there.
    assert_eq!(cmd(&mut c, "CF.ADD cf a"), int(1));
    // BF.MERGE over classic filters (our LAYOUT extension, in this dialect too).
    assert_eq!(cmd(&mut c, "BF.RESERVE cl 0.01 100 LAYOUT classic"), ok());
    assert_eq!(cmd(&mut c, "BF.ADD cl a"), int(1));
    assert_eq!(cmd(&mut c, "BF.MERGE m 1 cl"), ok());
    assert_eq!(cmd(&mut c, "BF.EXISTS m a"), int(1));
}

/// valkey-bloom 1.0's differences from 0.1.0: f64/i64 values, WRONGTYPE, BF.INSERT without
/// items, the 128 MB object limit.
#[test]
fn valkey_bloom_1_0_answers_as_valkey_bloom_1_0() {
    if !have_redis("valkey_bloom_1_0_answers_as_valkey_bloom_1_0") {
        return;
    }
    let server = Redis::start(&temp_dir("vkb10"), &["DIALECT", "valkey-bloom"], &[]);
    let mut c = server.conn();
    assert_eq!(cmd(&mut c, "BF.INSERT k EXPANSION 5"), Value::Array(vec![]));
    assert_eq!(cmd(&mut c, "BF.INFO k CAPACITY"), int(100));
    assert_eq!(cmd(&mut c, "BF.INFO k EXPANSION"), int(5));
    assert_eq!(
        cmd(&mut c, "BF.RESERVE r 0.999999999 100 EXPANSION 11"),
        ok()
    );
    // 1.0's per-object limit, 128 MB by default.
    assert_eq!(
        error_of(&mut c, "BF.RESERVE big 0.0000000001 100000000"),
        "ERR operation exceeds bloom object memory limit"
    );
    let _: () = redis::cmd("SET").arg(&["str", "v"]).query(&mut c).unwrap();
    assert_eq!(
        error_of(&mut c, "BF.EXISTS str a"),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

/// Filters are sized against the machine, not maxmemory (Valkey's own deny-oom check and its
/// eviction are the gate), and `bloom.*` events are generic ones (class `g`).
#[test]
fn valkey_bloom_memory_and_events() {
    if !have_redis("valkey_bloom_memory_and_events") {
        return;
    }
    let server = Redis::start(
        &temp_dir("vkb-mem"),
        &["DIALECT", "valkey-bloom-0.1"],
        &["--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru"],
    );
    let mut c = server.conn();
    let mut s = server.conn();
    let mut sub = keyspace_subscriber(&mut s);
    let mut n = 0;
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "notify-keyspace-events", "Eg"])
        .query(&mut c)
        .unwrap();
    let ev = |event: &str| (format!("__keyevent@0__:{event}"), "r".to_string());
    assert_eq!(
        events_of(&mut c, &mut sub, &mut n, "BF.RESERVE r 0.01 100"),
        vec![ev("bloom.reserve")]
    );
    assert_eq!(
        events_of(&mut c, &mut sub, &mut n, "BF.ADD r a"),
        vec![ev("bloom.add")]
    );
    // An add that creates: both, `bloom.add` first (as valkey-bloom).
    let on_r2 = |event: &str| (format!("__keyevent@0__:{event}"), "r2".to_string());
    assert_eq!(
        events_of(&mut c, &mut sub, &mut n, "BF.ADD r2 a"),
        vec![on_r2("bloom.add"), on_r2("bloom.reserve")]
    );
    // 12 MB under maxmemory 4mb: allocated (and then evicted by Valkey's policy).
    assert_eq!(cmd(&mut c, "BF.RESERVE big 0.001 10000000"), ok());
}

/// `DIALECT` takes only the three names.
#[test]
fn an_unknown_dialect_is_refused() {
    if !have_redis("an_unknown_dialect_is_refused") {
        return;
    }
    let log = match Redis::try_start(&temp_dir("vkb-bad"), &["DIALECT", "valkey"], &[]) {
        Ok(_) => panic!("DIALECT valkey accepted"),
        Err(log) => log,
    };
    assert!(
        log.contains("not redisbloom, valkey-bloom or valkey-bloom-0.1"),
        "{log}"
    );
}

/// valkey-bloom's names for the default settings, as load arguments and module configs
/// (`bf.bloom-capacity` where configs are prefixed, `bloom-capacity` on Redis 8).
#[test]
fn valkey_bloom_setting_names() {
    if !have_redis("valkey_bloom_setting_names") {
        return;
    }
    let args = ["DIALECT", "valkey-bloom-0.1", "bloom-max-item-size", "1000"];
    let server = Redis::start(&temp_dir("vkb-conf01"), &args, &[]);
    let mut c = server.conn();
    assert_eq!(cmd(&mut c, "BF.ADD a x"), int(1));
    assert_eq!(cmd(&mut c, "BF.INFO a CAPACITY"), int(1000));
    drop(server);

    let server = Redis::start(&temp_dir("vkb-conf10"), &["DIALECT", "valkey-bloom"], &[]);
    let mut c = server.conn();
    let set = |c: &mut redis::Connection, name: &str, value: &str| {
        let prefixed = format!("bf.{name}");
        let set = [prefixed.as_str(), name].iter().any(|n| {
            redis::cmd("CONFIG")
                .arg(&["SET", n, value])
                .query::<()>(c)
                .is_ok()
        });
        set
    };
    assert!(set(&mut c, "bloom-capacity", "500"));
    assert!(set(&mut c, "bloom-expansion", "4"));
    assert_eq!(cmd(&mut c, "BF.ADD b x"), int(1));
    assert_eq!(cmd(&mut c, "BF.INFO b CAPACITY"), int(500));
    assert_eq!(cmd(&mut c, "BF.INFO b EXPANSION"), int(4));
}

/// 1.0's `BF.LOAD key data`: a payload in valkey-bloom 1.0's encoding makes the same filter; an
/// existing filter is `BUSYKEY`, another type `WRONGTYPE`, bad data valkey-bloom's error; the
/// AOF rewrite writes each `bloomfltr` filter as one `BF.LOAD`, which replays to the same digest.
#[test]
fn valkey_bloom_1_0_bf_load_and_its_aof_rewrite() {
    use bloomgate_dialect::budget::Allowance;
    use bloomgate_dialect::types::sbchain::valkey::encode_load_payload;
    use bloomgate_dialect::types::sbchain::ValkeyChain;
    if !have_redis("valkey_bloom_1_0_bf_load_and_its_aof_rewrite") {
        return;
    }
    let dir = temp_dir("vkb-load");
    let aof = ["--appendonly", "yes", "--aof-use-rdb-preamble", "no"];
    let server = Redis::start(&dir, &["DIALECT", "valkey-bloom"], &aof);
    let c = &mut server.conn();
    let mut chain = ValkeyChain::new(10, 0.01, 2, false).unwrap();
    for i in 0..50 {
        let item = format!("i{i}");
        chain
            .add(item.as_bytes(), &mut Allowance::unlimited())
            .unwrap();
    }
    let payload = encode_load_payload(&chain);
    let load = |c: &mut redis::Connection, key: &str, data: &[u8]| {
        redis::cmd("BF.LOAD")
            .arg(key)
            .arg(data)
            .query::<Value>(c)
            .map_err(|e| wire_error(&e))
    };
    assert_eq!(load(c, "l", &payload), Ok(ok()));
    for i in 0..50 {
        assert_eq!(cmd(c, &format!("BF.EXISTS l i{i}")), int(1), "i{i}");
    }
    // A false positive at add time is not counted (the seed is random).
    assert_eq!(cmd(c, "BF.CARD l"), int(chain.items() as i64));
    assert_eq!(cmd(c, "BF.INFO l FILTERS"), int(chain.links().len() as i64));
    assert_eq!(
        load(c, "l", &payload),
        Err("BUSYKEY Target key name already exists.".into())
    );
    let _: () = redis::cmd("SET").arg(&["str", "v"]).query(c).unwrap();
    assert_eq!(
        load(c, "str", &payload),
        Err("WRONGTYPE Operation against a key holding the wrong kind of value".into())
    );
    assert_eq!(
        load(c, "bad", b"\x01garbage"),
        Err("ERR bloom object decoding failed".into())
    );
    assert_eq!(
        load(c, "bad", b"\x02"),
        Err("ERR bloom object decoding failed. Unsupported version".into())
    );
    assert_eq!(
        error_of(c, "BF.LOAD l"),
        "ERR wrong number of arguments for 'BF.LOAD' command"
    );
    // The AOF rewrite: one BF.LOAD per filter, replayed to the same bits.
    cmd(c, "BF.INSERT s CAPACITY 20 ITEMS a b c");
    let before = [digest(c, "l"), digest(c, "s")];
    let base = rewrite_aof(c, &dir);
    let loads = base.windows(7).filter(|w| w == b"BF.LOAD").count();
    assert_eq!(loads, 2, "one BF.LOAD per filter");
    assert!(!base.windows(12).any(|w| w == b"BF.LOADCHUNK"));
    server.shutdown(false);
    let server = Redis::start(&dir, &["DIALECT", "valkey-bloom"], &aof);
    let c = &mut server.conn();
    assert_eq!([digest(c, "l"), digest(c, "s")], before);
    assert_eq!(cmd(c, "BF.EXISTS s b"), int(1));
}

/// 1.0's BF.INFO fields (`Error rate`, `Tightening ratio`, `Max scaled capacity`, each alone
/// too) and its settings `bloom-tightening-ratio` and `bloom-use-random-seed`, as load
/// arguments and configs.
#[test]
fn valkey_bloom_1_0_info_fields_and_settings() {
    if !have_redis("valkey_bloom_1_0_info_fields_and_settings") {
        return;
    }
    let args = [
        "DIALECT",
        "valkey-bloom",
        "bloom-tightening-ratio",
        "0.25",
        "bloom-use-random-seed",
        "no",
    ];
    let server = Redis::start(&temp_dir("vkb-info10"), &args, &[]);
    let mut c = server.conn();
    let double = |v: Value| -> f64 {
        match v {
            Value::BulkString(b) => String::from_utf8(b).unwrap().parse().unwrap(),
            Value::Double(d) => d,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(cmd(&mut c, "BF.ADD a x"), int(1));
    assert_eq!(cmd(&mut c, "BF.ADD b x"), int(1));
    assert_eq!(double(cmd(&mut c, "BF.INFO a ERROR")), 0.01);
    assert_eq!(double(cmd(&mut c, "BF.INFO a TIGHTENING")), 0.25);
    let Value::Int(most) = cmd(&mut c, "BF.INFO a MAXSCALEDCAPACITY") else {
        panic!("not an integer")
    };
    assert!(most > 100, "{most}");
    let whole = cmd(&mut c, "BF.INFO a");
    let Value::Array(fields) = whole else {
        panic!("{whole:?}")
    };
    assert_eq!(fields.len(), 16);
    assert_eq!(fields[8], Value::SimpleString("Error rate".into()));
    // The fixed seed: two filters of the same items hold the same bits.
    assert_eq!(digest(&mut c, "a"), digest(&mut c, "b"));
    assert_eq!(cmd(&mut c, "BF.RESERVE n 0.01 10 NONSCALING"), ok());
    assert_eq!(
        error_of(&mut c, "BF.INFO n TIGHTENING"),
        "ERR invalid information value"
    );
    assert_eq!(
        error_of(&mut c, "BF.INSERT v NONSCALING VALIDATESCALETO 10"),
        "ERR cannot use NONSCALING and VALIDATESCALETO options together"
    );
    assert_eq!(
        error_of(&mut c, "BF.INSERT v VALIDATESCALETO 100000000000"),
        "ERR provided VALIDATESCALETO causes bloom object to exceed memory limit"
    );
    // The configs, prefixed (Redis 7, Valkey) or not (Redis 8).
    let get = |c: &mut redis::Connection, name: &str| -> Option<String> {
        [format!("bf.{name}"), name.to_string()]
            .iter()
            .find_map(|n| {
                let v: Vec<String> = redis::cmd("CONFIG").arg(&["GET", n]).query(c).ok()?;
                v.get(1).cloned()
            })
    };
    assert_eq!(get(&mut c, "bloom-use-random-seed").as_deref(), Some("no"));
    assert_eq!(
        get(&mut c, "bloom-tightening-ratio").as_deref(),
        Some("0.25")
    );
}

/// valkey-bloom 1.0's `INFO bf` sections: the five core metrics are the sums of `BF.INFO` over
/// the live `bloomfltr` keys after every create, growth, COPY, RESTORE, DEL and FLUSHALL.
#[test]
fn valkey_bloom_1_0_info_metrics_sum_the_live_objects() {
    if !have_redis("valkey_bloom_1_0_info_metrics_sum_the_live_objects") {
        return;
    }
    let server = Redis::start(&temp_dir("vkb-metrics"), &["DIALECT", "valkey-bloom"], &[]);
    let mut c = server.conn();
    let fields = [
        ("bf_bloom_total_memory_bytes", "SIZE"),
        ("bf_bloom_num_objects", ""),
        ("bf_bloom_num_filters_across_objects", "FILTERS"),
        ("bf_bloom_num_items_across_objects", "ITEMS"),
        ("bf_bloom_capacity_across_objects", "CAPACITY"),
    ];
    let expected = |c: &mut redis::Connection| -> Vec<i64> {
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
        let sum = |c: &mut redis::Connection, field: &str| -> i64 {
            keys.iter()
                .map(|k| match field {
                    "" => 1,
                    f => match cmd(c, &format!("BF.INFO {k} {f}")) {
                        Value::Int(n) => n,
                        other => panic!("{other:?}"),
                    },
                })
                .sum()
        };
        fields.iter().map(|&(_, f)| sum(c, f)).collect()
    };
    let reported = |c: &mut redis::Connection| -> Vec<i64> {
        fields
            .iter()
            .map(|&(name, _)| info_field(c, "bf", name).parse().unwrap())
            .collect()
    };
    let check = |c: &mut redis::Connection, step: &str| {
        let want = expected(c);
        // A lazy free (FLUSHALL in Valkey 8) may finish just after the command answers.
        for _ in 0..100 {
            if reported(c) == want {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(reported(c), want, "after {step}");
    };
    check(&mut c, "start");
    assert_eq!(info_field(&mut c, "bf", "bf_bloom_num_objects"), "0");
    assert_eq!(info_field(&mut c, "bf", "bf_bloom_defrag_hits"), "0");
    assert_eq!(info_field(&mut c, "bf", "bf_bloom_defrag_misses"), "0");
    assert_eq!(cmd(&mut c, "BF.RESERVE a 0.01 10"), ok());
    assert_eq!(cmd(&mut c, "BF.ADD b x"), int(1));
    check(&mut c, "two creates");
    for i in 0..40 {
        cmd(&mut c, &format!("BF.ADD a item{i}"));
    }
    assert!(matches!(cmd(&mut c, "BF.INFO a FILTERS"), Value::Int(n) if n > 1));
    check(&mut c, "scaling");
    assert_eq!(cmd(&mut c, "COPY a c"), int(1));
    check(&mut c, "COPY");
    let dump: Vec<u8> = redis::cmd("DUMP").arg("b").query(&mut c).unwrap();
    let restored: String = redis::cmd("RESTORE")
        .arg("c")
        .arg(0)
        .arg(dump)
        .arg("REPLACE")
        .query(&mut c)
        .unwrap();
    assert_eq!(restored, "OK");
    check(&mut c, "RESTORE over a key");
    assert_eq!(cmd(&mut c, "DEL b"), int(1));
    check(&mut c, "DEL");
    assert_eq!(info_field(&mut c, "bf", "bf_bloom_num_objects"), "2");
    assert_eq!(cmd(&mut c, "FLUSHALL"), ok());
    check(&mut c, "FLUSHALL");
    assert_eq!(info_field(&mut c, "bf", "bf_bloom_total_memory_bytes"), "0");
}
