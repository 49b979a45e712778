//! Divergences from RedisBloom found by comparing replies, each pinned to the reply a live
//! RedisBloom 8.2 gives for the same command sequence (numbered in the order they were found).

use bloomgate_dialect::commands::testing::*;
use bloomgate_dialect::reply::Reply;
use bloomgate_dialect::value::Value;

const WRONG_ARITY_BF_RESERVE: &str = "ERR wrong number of arguments for 'bf.reserve' command";
const CF_RANGE: &str = "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]";
const CF_INSERT_RANGE: &str = "Capacity must be in the range [cf-bucket-size * 2, 1073741824]";

fn arity(name: &str) -> Reply {
    err(&format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

fn bulk(s: &str) -> Reply {
    Reply::bulk(s.to_string())
}

fn array(items: Vec<Reply>) -> Reply {
    Reply::Array(items)
}

fn load(h: &mut Harness, command: &str, key: &str, iter: &str, data: Vec<u8>) -> Reply {
    h.run_args(&[
        command.as_bytes().to_vec(),
        key.as_bytes().to_vec(),
        iter.as_bytes().to_vec(),
        data,
    ])
}

fn cf_header(items: u64, buckets: u64, filters: u64, bucket_size: u16, expansion: u16) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend(items.to_le_bytes());
    h.extend(buckets.to_le_bytes());
    h.extend(0u64.to_le_bytes()); // deletes
    h.extend(filters.to_le_bytes());
    h.extend(bucket_size.to_le_bytes());
    h.extend(20u16.to_le_bytes()); // max iterations
    h.extend(expansion.to_le_bytes());
    h
}

/// 1. Error rates above 0.25 are capped by BF.RESERVE and BF.INSERT.
#[test]
fn item_01_error_rate_is_capped() {
    let mut h = Harness::new();
    assert_eq!(h.run("BF.RESERVE k 0.5 100"), Reply::ok());
    assert_eq!(
        h.run("BF.DEBUG k"),
        array(vec![
            bulk("size:0"),
            bulk("bytes:56 bits:448 hashes:4 hashwidth:64 capacity:100 size:0 ratio:0.125"),
        ])
    );
    assert_eq!(h.run("BF.RESERVE n 0.999 10 NONSCALING"), Reply::ok());
    let Reply::Array(lines) = h.run("BF.DEBUG n") else {
        panic!()
    };
    assert_eq!(
        lines[1],
        bulk("bytes:8 bits:64 hashes:3 hashwidth:64 capacity:10 size:0 ratio:0.25")
    );
    assert_eq!(
        h.run("BF.INSERT i ERROR 0.9 CAPACITY 100 ITEMS a"),
        array(vec![Reply::Bool(true)])
    );
    assert_eq!(h.run("BF.DEBUG i"), {
        let mut both = Harness::new();
        both.run("BF.RESERVE i 0.25 100");
        both.run("BF.ADD i a");
        both.run("BF.DEBUG i")
    });
}

/// 2. The registered arity is checked before anything else, then each command's own limits.
#[test]
fn item_02_arity_first() {
    let mut h = Harness::new();
    assert_eq!(
        h.run("BF.RESERVE k 0.01 100 EXPANSION 2 EXPANSION 3"),
        err(WRONG_ARITY_BF_RESERVE)
    );
    assert_eq!(h.run("CF.RESERVE k 64 CAPACITY"), arity("cf.reserve"));
    assert_eq!(h.run("CF.RESERVE k 1024 EXPANSION"), arity("cf.reserve"));
    assert_eq!(h.run("BF.INSERT k BUCKETSIZE"), arity("bf.insert"));
    assert_eq!(h.run("BF.ADD k"), arity("bf.add"));
    assert_eq!(h.run("BF.ADD k a b"), arity("bf.add"));
    assert_eq!(h.run("CF.INSERTNX k ITEMS"), arity("cf.insertnx"));
    assert_eq!(h.run("BF.INFO"), arity("bf.info"));
    assert_eq!(h.run("CF.LOADCHUNK k 1"), arity("cf.loadchunk"));
    assert!(h.keys.is_empty());
}

/// 3. CF.RESERVE: a non-integer capacity is `Bad capacity`; options are parsed before the
///    capacity's range is judged.
#[test]
fn item_03_cf_reserve_capacity() {
    let mut h = Harness::new();
    assert_eq!(h.run("CF.RESERVE k 0"), err(CF_RANGE));
    assert_eq!(h.run("CF.RESERVE k -5"), err(CF_RANGE));
    assert_eq!(
        h.run("CF.RESERVE k 0 BUCKETSIZE x"),
        err("Couldn't parse BUCKETSIZE")
    );
    assert_eq!(h.run("CF.RESERVE k x BUCKETSIZE x"), err("Bad capacity"));
    assert_eq!(h.run("CF.RESERVE k 4 BUCKETSIZE 3"), err(CF_RANGE));
    assert_eq!(h.run("CF.RESERVE k 6 BUCKETSIZE 3"), Reply::ok());
}

/// 4. CF.INSERT / CF.INSERTNX range-check CAPACITY while parsing, whatever follows.
#[test]
fn item_04_cf_insert_capacity_range() {
    let mut h = Harness::new();
    h.run("CF.RESERVE k 1000");
    assert_eq!(
        h.run("CF.INSERT k CAPACITY 3 ITEMS a"),
        err(CF_INSERT_RANGE)
    );
    assert_eq!(
        h.run("CF.INSERT k CAPACITY -1 ITEMS a"),
        err(CF_INSERT_RANGE)
    );
    assert_eq!(
        h.run("CF.INSERTNX k CAPACITY 1073741825 ITEMS a"),
        err(CF_INSERT_RANGE)
    );
    assert_eq!(
        h.run("CF.INSERT m CAPACITY 3 NOCREATE ITEMS a"),
        err(CF_INSERT_RANGE)
    );
    assert_eq!(h.run("CF.INSERT k CAPACITY x ITEMS a"), err("Bad capacity"));
    h.config.cf_bucket_size = 4;
    assert_eq!(
        h.run("CF.INSERT k CAPACITY 7 ITEMS a"),
        err(CF_INSERT_RANGE)
    );
    assert_eq!(
        h.run("CF.INSERT k CAPACITY 8 ITEMS a"),
        array(vec![Reply::Bool(true)])
    );
}

/// 5. CF.DEL / CF.COMPACT answer as for a missing key when the key holds another type.
#[test]
fn item_05_cf_del_compact_on_other_types() {
    let mut h = Harness::new();
    h.run("BF.ADD b a");
    h.foreign.push(b"s".to_vec());
    for key in ["b", "s"] {
        assert_eq!(h.run(&format!("CF.DEL {key} a")), err("Not found"));
        assert_eq!(
            h.run(&format!("CF.COMPACT {key}")),
            err("Cuckoo filter was not found")
        );
    }
}

/// 6. `cf-max-expansions` is judged once, when the command starts.
#[test]
fn item_06_max_expansions_once_per_command() {
    let mut h = Harness::new();
    h.run("CF.RESERVE k 4");
    for i in 0..124 {
        assert_eq!(h.run(&format!("CF.ADD k {i}")), Reply::Bool(true));
    }
    let Reply::Map(info) = h.run("CF.INFO k") else {
        panic!()
    };
    assert_eq!(info[2].1, Reply::Int(32));
    assert_eq!(h.run("CF.ADD k x"), err("Maximum expansions reached"));
    assert_eq!(h.run("CF.ADDNX k x"), err("Maximum expansions reached"));
    assert_eq!(
        h.run("CF.INSERT k ITEMS x"),
        err("Maximum expansions reached")
    );

    let mut h = Harness::new();
    h.run("CF.RESERVE k 4");
    let items: Vec<String> = (0..200).map(|i| i.to_string()).collect();
    let reply = h.run(&format!("CF.INSERT k ITEMS {}", items.join(" ")));
    assert_eq!(reply, array(vec![Reply::Bool(true); 200]));
    let Reply::Map(info) = h.run("CF.INFO k") else {
        panic!()
    };
    assert_eq!(info[2].1, Reply::Int(50));
}

/// 7. The compaction a CF.DEL triggers stops at the first sub-filter it cannot empty.
#[test]
fn item_07_delete_compaction_stops_early() {
    let mut h = Harness::new();
    h.run("CF.RESERVE m 4 BUCKETSIZE 1 EXPANSION 1");
    for i in 0..=8 {
        h.run(&format!("CF.ADD m {i}"));
    }
    assert_eq!(h.run("CF.DEL m 1"), Reply::Bool(true));
    let Reply::Array(chunk) = h.run("CF.SCANDUMP m 1") else {
        panic!()
    };
    let Reply::Bulk(bytes) = &chunk[1] else {
        panic!("{chunk:?}")
    };
    assert_eq!(bytes[..4], [0x00, 0x65, 0xe4, 0x13]);
}

/// 8. A SCANDUMP iterator inside a chunk returns that whole chunk, advancing from where it was.
#[test]
fn item_08_non_canonical_scandump_iterator() {
    let mut h = Harness::new();
    h.run("CF.RESERVE k 64 BUCKETSIZE 1");
    h.run("CF.ADD k a");
    let Reply::Array(canonical) = h.run("CF.SCANDUMP k 1") else {
        panic!()
    };
    assert_eq!(canonical[0], Reply::Int(65));
    let Reply::Array(odd) = h.run("CF.SCANDUMP k 2") else {
        panic!()
    };
    assert_eq!(odd[0], Reply::Int(66));
    assert_eq!(odd[1], canonical[1]);
}

/// 9. CF.LOADCHUNK's errors.
#[test]
fn item_09_cf_loadchunk_errors() {
    let mut h = Harness::new();
    let cmd = "CF.LOADCHUNK";
    assert_eq!(
        load(&mut h, cmd, "k", "0", vec![0; 38]),
        err("Invalid position")
    );
    assert_eq!(
        load(&mut h, cmd, "k", "-3", vec![0; 38]),
        err("Invalid position")
    );
    h.run("CF.RESERVE e 64");
    let good = cf_header(0, 32, 1, 2, 1);
    assert_eq!(
        load(&mut h, cmd, "e", "1", good.clone()),
        err("ERR item exists")
    );
    h.run("BF.ADD b a");
    assert_eq!(
        load(&mut h, cmd, "b", "1", good.clone()),
        err(bloomgate_dialect::ERR_WRONGTYPE)
    );
    for bad in [
        cf_header(0, 32, 1, 0, 1),      // bucket size 0
        cf_header(0, 3, 1, 2, 1),       // 3 buckets
        cf_header(0, 32, 1, 2, 40000),  // expansion 40000
        cf_header(0, 32, 0, 2, 1),      // no sub-filter
        cf_header(0, 1 << 32, 1, 1, 1), // RedisBloom's own forged header: 2^32 one-slot buckets
        // 2^40 buckets: a forged header like this once crashed the host.
        cf_header(0, 1 << 40, 1, 4, 1),
    ] {
        assert_eq!(
            load(&mut h, cmd, "x", "1", bad),
            err("Couldn't create filter!")
        );
    }
    assert_eq!(
        load(&mut h, cmd, "x", "1", vec![0; 37]),
        err("Invalid header")
    );
    assert_eq!(load(&mut h, cmd, "x", "1", good), Reply::ok());
    // After the refusal the key did not exist: inserts make an ordinary filter.
    let forged = cf_header(0, 1 << 32, 1, 1, 1);
    assert_eq!(
        load(&mut h, cmd, "y", "1", forged),
        err("Couldn't create filter!")
    );
    assert_eq!(
        h.run("CF.INSERT y ITEMS 1 1 1 1"),
        h.run("CF.INSERT fresh ITEMS 1 1 1 1")
    );
    assert_eq!(h.run("CF.INFO y"), h.run("CF.INFO fresh"));
}

/// 10. Dump headers RedisBloom accepts: counters beyond the slots or the capacity, a BF
///     growth factor up to its EXPANSION cap. Nothing crashes afterwards and growth that cannot
///     be done fails cleanly.
#[test]
fn item_10_headers_redisbloom_accepts() {
    let mut h = Harness::new();
    h.memory_limit = 64 << 20;
    let cmd = "CF.LOADCHUNK";
    assert_eq!(
        load(&mut h, cmd, "c", "1", cf_header(5, 2, 1, 2, 1)),
        Reply::ok()
    );
    assert_eq!(h.run("CF.ADD c a"), Reply::Bool(true));
    assert_eq!(h.run("CF.DEL c a"), Reply::Bool(true));

    h.run("BF.RESERVE src 0.01 100");
    let Reply::Array(dump) = h.run("BF.SCANDUMP src 0") else {
        panic!()
    };
    let Reply::Bulk(header) = dump[1].clone() else {
        panic!()
    };
    let mut over = header.clone();
    over[36..44].copy_from_slice(&5000u64.to_le_bytes()); // link size over capacity 100
    over[0..8].copy_from_slice(&5000u64.to_le_bytes());
    assert_eq!(load(&mut h, "BF.LOADCHUNK", "over", "1", over), Reply::ok());
    assert_eq!(h.run("BF.CARD over"), Reply::Int(5000));
    assert_eq!(h.run("BF.ADD over a"), Reply::Bool(true));
    let mut growth = header;
    growth[36..44].copy_from_slice(&100u64.to_le_bytes()); // full: the next add grows
    growth[0..8].copy_from_slice(&100u64.to_le_bytes());
    // A growth factor past BF.RESERVE's EXPANSION cap (32768) is refused (RedisBloom takes it;
    // a forged 2^31 made the next write allocate gigabytes).
    growth[16..20].copy_from_slice(&0x0800_0002u32.to_le_bytes());
    assert_eq!(
        load(&mut h, "BF.LOADCHUNK", "g", "1", growth.clone()),
        err("ERR received bad data")
    );
    growth[16..20].copy_from_slice(&32768u32.to_le_bytes());
    assert_eq!(load(&mut h, "BF.LOADCHUNK", "g", "1", growth), Reply::ok());
    h.memory_limit = 2 << 20;
    assert_eq!(h.run("BF.ADD g a"), err(bloomgate_dialect::ERR_OOM));
    assert!(matches!(h.keys.get(&b"g"[..]), Some(Value::Bloom(c)) if c.links().len() == 1));
}

/// 11. BF.SCANDUMP looks the key up before parsing the iterator.
#[test]
fn item_11_bf_scandump_key_first() {
    let mut h = Harness::new();
    h.run("CF.ADD c a");
    assert_eq!(h.run("BF.SCANDUMP missing abc"), err("ERR not found"));
    assert_eq!(
        h.run("BF.SCANDUMP c abc"),
        err(bloomgate_dialect::ERR_WRONGTYPE)
    );
    h.run("BF.ADD b a");
    assert_eq!(
        h.run("BF.SCANDUMP b abc"),
        err("Second argument must be numeric")
    );
}

/// 12. BF.INSERT's capacity must stay below 2^32 - 1.
#[test]
fn item_12_bf_insert_capacity_limit() {
    let mut h = Harness::new();
    assert_eq!(
        h.run("BF.INSERT n CAPACITY 4294967296 ERROR 0.1 ITEMS a"),
        err("Bad capacity")
    );
    assert_eq!(
        h.run("BF.INSERT n CAPACITY 4294967295 ERROR 0.1 ITEMS a"),
        err("Bad capacity")
    );
    assert!(h.keys.is_empty());
}

/// 13. Doubles are read as C's strtod reads them.
#[test]
fn item_13_number_parsing() {
    let mut h = Harness::new();
    assert_eq!(h.run("BF.RESERVE k 1e400 100"), err("ERR bad error rate"));
    assert_eq!(h.run("BF.RESERVE k 1e-400 100"), err("ERR bad error rate"));
    assert_eq!(
        h.run("BF.RESERVE k 0x1 100"),
        err("ERR error rate must be in the range (0.000000, 1.000000)")
    );
    assert_eq!(h.run("BF.RESERVE k 0x0.04p0 100"), Reply::ok());
    assert_eq!(
        h.run("BF.INSERT i ERROR 1e-400 ITEMS a"),
        err("Bad error rate")
    );
    assert_eq!(
        h.run("BF.INSERT i ERROR 0x0.04p0 ITEMS a"),
        array(vec![Reply::Bool(true)])
    );
}

/// 14. NONSCALING with any non-zero expansion is refused before the expansion's range.
#[test]
fn item_14_nonscaling_cannot_expand() {
    let mut h = Harness::new();
    assert_eq!(
        h.run("BF.RESERVE k 0.01 100 NONSCALING EXPANSION -1"),
        err("Nonscaling filters cannot expand")
    );
    assert_eq!(
        h.run("BF.RESERVE k 0.01 100 EXPANSION 4 NONSCALING"),
        err("Nonscaling filters cannot expand")
    );
    assert_eq!(
        h.run("BF.RESERVE k 0.01 100 EXPANSION 40000"),
        err("ERR expansion must be in the range [0, 32768]")
    );
    assert_eq!(
        h.run("BF.RESERVE k 0.01 100 NONSCALING EXPANSION 0"),
        Reply::ok()
    );
}

/// 18. RedisBloom reads past its arguments here (and crashes); we refuse cleanly.
#[test]
fn item_18_missing_maxiterations_value() {
    let mut h = Harness::new();
    assert_eq!(
        h.run("CF.RESERVE k 100 FOO MAXITERATIONS"),
        err("Couldn't parse MAXITERATIONS")
    );
    assert!(h.keys.is_empty());
}

/// 16. The metadata COMMAND INFO / DOCS report.
#[test]
fn item_16_command_metadata() {
    use bloomgate_dialect::commands::lookup;
    let add = lookup(b"bf.add").unwrap();
    assert_eq!(add.arity, 3);
    assert_eq!(add.flag_names(), ["write", "denyoom", "module"]);
    assert_eq!(add.acl_categories(), ["write", "slow", "bloom"]);
    let exists = lookup(b"CF.EXISTS").unwrap();
    assert_eq!(exists.flag_names(), ["readonly", "module", "fast"]);
    assert_eq!(exists.acl_categories(), ["read", "fast", "cuckoo"]);
    let card = lookup(b"bf.card").unwrap();
    assert_eq!(card.docs.as_ref().unwrap().since, "2.4.4");
    let arities: Vec<(&str, i32)> = bloomgate_dialect::commands::table()
        .iter()
        .filter(|c| {
            ["BF.", "CF.", "TDIGEST."]
                .iter()
                .any(|p| c.name.starts_with(p))
        })
        .map(|c| (c.name, c.arity))
        .collect();
    assert_eq!(
        arities,
        [
            ("BF.RESERVE", -4),
            ("BF.ADD", 3),
            ("BF.MADD", -3),
            ("BF.INSERT", -4),
            ("BF.EXISTS", 3),
            ("BF.MEXISTS", -3),
            ("BF.CARD", 2),
            ("BF.INFO", -2),
            ("BF.SCANDUMP", 3),
            ("BF.LOADCHUNK", 4),
            ("BF.DEBUG", -1),
            ("BF.MERGE", -4),
            ("CF.RESERVE", -3),
            ("CF.ADD", 3),
            ("CF.ADDNX", 3),
            ("CF.INSERT", -4),
            ("CF.INSERTNX", -4),
            ("CF.EXISTS", 3),
            ("CF.MEXISTS", -3),
            ("CF.COUNT", 3),
            ("CF.DEL", 3),
            ("CF.COMPACT", -1),
            ("CF.INFO", 2),
            ("CF.DEBUG", -1),
            ("CF.SCANDUMP", 3),
            ("CF.LOADCHUNK", 4),
            ("TDIGEST.CREATE", -2),
            ("TDIGEST.RESET", 2),
            ("TDIGEST.ADD", -3),
            ("TDIGEST.MERGE", -4),
            ("TDIGEST.MIN", 2),
            ("TDIGEST.MAX", 2),
            ("TDIGEST.QUANTILE", -3),
            ("TDIGEST.CDF", -3),
            ("TDIGEST.RANK", -3),
            ("TDIGEST.REVRANK", -3),
            ("TDIGEST.BYRANK", -3),
            ("TDIGEST.BYREVRANK", -3),
            ("TDIGEST.TRIMMED_MEAN", 4),
            ("TDIGEST.INFO", 2),
        ]
    );
    // RedisBloom registers TDIGEST commands without the `fast` flag but most in `@fast`.
    let create = lookup(b"tdigest.create").unwrap();
    assert_eq!(create.flag_names(), ["write", "denyoom", "module"]);
    assert_eq!(create.acl_categories(), ["write", "fast", "tdigest"]);
    let add = lookup(b"TDIGEST.ADD").unwrap();
    assert_eq!(add.acl_categories(), ["write", "slow", "tdigest"]);
    let quantile = lookup(b"TDIGEST.QUANTILE").unwrap();
    assert_eq!(quantile.flag_names(), ["readonly", "module"]);
    assert_eq!(quantile.acl_categories(), ["read", "fast", "tdigest"]);
    let trimmed = lookup(b"TDIGEST.TRIMMED_MEAN").unwrap();
    assert_eq!(trimmed.acl_categories(), ["read", "slow", "tdigest"]);
}

/// RedisBloom's `test_bucket_size` / `test_expansion` / `test_expansion_0`: growth under the
/// once-per-command expansion limit gives its sub-filter counts.
#[test]
fn redisbloom_cuckoo_growth_flow_tests() {
    let mut h = Harness::new();
    for line in [
        "CF.RESERVE a 64 BUCKETSIZE 1",
        "CF.RESERVE b 64 BUCKETSIZE 2",
        "CF.RESERVE c 256 BUCKETSIZE 4 MAXITERATIONS 500",
        "CF.RESERVE d 64 EXPANSION 2",
        "CF.RESERVE e 64 EXPANSION 4 MAXITERATIONS 500",
    ] {
        assert_eq!(h.run(line), Reply::ok());
    }
    for i in 0..1000 {
        for key in ["a", "b", "c", "d", "e"] {
            assert_eq!(h.run(&format!("CF.ADD {key} {i}")), Reply::Bool(true));
        }
    }
    let want = [
        (
            "a",
            "bktsize:1 buckets:64 items:1000 deletes:0 filters:18 max_iterations:20 expansion:1",
        ),
        (
            "b",
            "bktsize:2 buckets:32 items:1000 deletes:0 filters:17 max_iterations:20 expansion:1",
        ),
        (
            "c",
            "bktsize:4 buckets:64 items:1000 deletes:0 filters:4 max_iterations:500 expansion:1",
        ),
        (
            "d",
            "bktsize:2 buckets:32 items:1000 deletes:0 filters:5 max_iterations:20 expansion:2",
        ),
        (
            "e",
            "bktsize:2 buckets:32 items:1000 deletes:0 filters:3 max_iterations:500 expansion:4",
        ),
    ];
    for (key, line) in want {
        assert_eq!(h.run(&format!("CF.DEBUG {key}")), bulk(line), "{key}");
    }
    h.run("CF.RESERVE z 4 EXPANSION 0");
    for i in 1..=4 {
        assert_eq!(h.run(&format!("CF.ADD z {i}")), Reply::Bool(true));
    }
    assert_eq!(
        h.run("CF.INSERT z ITEMS 5 6"),
        array(vec![Reply::Int(-1), Reply::Int(-1)])
    );
}
