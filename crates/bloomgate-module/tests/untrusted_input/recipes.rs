//! How keys of each registered type are made and exercised, and where the fuzzer's seeds
//! (its starting payloads) come from.

use super::*;

/// How to make and exercise keys of one registered type.
pub(crate) struct Recipe {
    /// The family's command prefix (`BF`, `CF`, `WF`, `CBF`, `CMS`, `TOPK`, `TDIGEST`).
    pub(crate) prefix: &'static str,
    /// Commands creating example keys (`{k}` is the key), several shapes per type.
    pub(crate) create: &'static [&'static [&'static str]],
    /// Commands run on a key after a mutated value was accepted (`{k}` the key, `{i}` a
    /// counter, `{t}` the time in ms).
    pub(crate) exercise: &'static [&'static str],
}

pub(crate) const RECIPES: &[Recipe] = &[
    Recipe {
        prefix: "BF",
        create: &[
            &["BF.RESERVE {k} 0.01 10 EXPANSION 2", "BF.MADD {k} {items}"],
            &["BF.RESERVE {k} 0.001 50 NONSCALING", "BF.MADD {k} a b c"],
            &["BF.RESERVE {k} 0.1 8 EXPANSION 5", "BF.MADD {k} {items}"],
            // The blocked layout (its own type, `BGbloomBK`): scaling and non-scaling.
            &[
                "BF.RESERVE {k} 0.01 10 EXPANSION 2 LAYOUT blocked",
                "BF.MADD {k} {items}",
            ],
            &[
                "BF.INSERT {k} CAPACITY 50 ERROR 0.001 NONSCALING LAYOUT blocked ITEMS a b c",
            ],
            // valkey-bloom's type (`bloomfltr`): scaling and non-scaling.
            &[
                "BF.RESERVE {k} 0.05 6 EXPANSION 3 LAYOUT valkey",
                "BF.MADD {k} {items}",
            ],
            &["BF.INSERT {k} CAPACITY 40 ERROR 0.01 NONSCALING LAYOUT valkey ITEMS a b c"],
        ],
        exercise: &[
            "BF.ADD {k} n{i}",
            "BF.MADD {k} a{i} b{i} c{i} d{i} e{i} f{i} g{i} h{i}",
            "BF.INSERT {k} NOCREATE ITEMS x{i} y{i} z{i}",
            "BF.EXISTS {k} a{i}",
            "BF.MEXISTS {k} a b c",
            "BF.CARD {k}",
            "BF.INFO {k}",
            "BF.DEBUG {k}",
            "BF.SCANDUMP {k} 0",
            "BF.SCANDUMP {k} 1",
        ],
    },
    Recipe {
        prefix: "CF",
        create: &[
            &[
                "CF.RESERVE {k} 16 BUCKETSIZE 2 EXPANSION 2",
                "CF.INSERT {k} ITEMS {items}",
            ],
            &[
                "CF.RESERVE {k} 64 BUCKETSIZE 4 MAXITERATIONS 5 EXPANSION 0",
                "CF.INSERT {k} ITEMS a b c",
            ],
            &[
                "CF.RESERVE {k} 8 BUCKETSIZE 1 EXPANSION 1",
                "CF.INSERT {k} ITEMS {items}",
                "CF.DEL {k} i3",
            ],
        ],
        exercise: &[
            "CF.ADD {k} n{i}",
            "CF.INSERT {k} NOCREATE ITEMS a{i} b{i} c{i} d{i} e{i} f{i} g{i} h{i}",
            "CF.ADDNX {k} x{i}",
            "CF.DEL {k} a{i}",
            "CF.COUNT {k} b{i}",
            "CF.EXISTS {k} c{i}",
            "CF.MEXISTS {k} a b c",
            "CF.COMPACT {k}",
            "CF.INFO {k}",
            "CF.DEBUG {k}",
            "CF.SCANDUMP {k} 0",
            "CF.SCANDUMP {k} 1",
        ],
    },
    Recipe {
        prefix: "WF",
        create: &[
            &[
                "WF.RESERVE {k} 0.01 10 1000 3 EXPANSION 2",
                "WF.INSERT {k} AT {t-2000} ITEMS {items}",
                "WF.INSERT {k} AT {t-1000} ITEMS {items}",
                "WF.INSERT {k} AT {t} ITEMS a b c",
            ],
            &["WF.RESERVE {k} 0.1 5 60000 2", "WF.ADD {k} a"],
        ],
        exercise: &[
            "WF.ADD {k} n{i}",
            "WF.MADD {k} a{i} b{i} c{i} d{i} e{i} f{i} g{i} h{i}",
            "WF.INSERT {k} AT {t} ITEMS x{i}",
            "WF.EXISTS {k} a{i}",
            "WF.MEXISTS {k} a b c",
            "WF.CARD {k}",
            "WF.INFO {k}",
            "WF.SCANDUMP {k} 0",
            "WF.SCANDUMP {k} 1",
        ],
    },
    Recipe {
        prefix: "CBF",
        create: &[
            &["CBF.RESERVE {k} 0.01 100", "CBF.MADD {k} {items}", "CBF.DEL {k} i3"],
            &["CBF.RESERVE {k} 0.1 50 BITS 8", "CBF.MADD {k} a a a b"],
            &["CBF.RESERVE {k} 0.001 3", "CBF.ADD {k} a"],
        ],
        exercise: &[
            "CBF.ADD {k} n{i}",
            "CBF.MADD {k} a{i} b{i} c{i} d{i} e{i} f{i} g{i} h{i}",
            "CBF.DEL {k} a{i}",
            "CBF.DEL {k} a",
            "CBF.COUNT {k} a",
            "CBF.EXISTS {k} a{i}",
            "CBF.MEXISTS {k} a b c",
            "CBF.CARD {k}",
            "CBF.INFO {k}",
            "CBF.SCANDUMP {k} 0",
            "CBF.SCANDUMP {k} 1",
        ],
    },
    Recipe {
        prefix: "CMS",
        create: &[
            &["CMS.INITBYDIM {k} 100 5", "CMS.INCRBY {k} a 1 b 2 c 300"],
            &["CMS.INITBYPROB {k} 0.01 0.01", "CMS.INCRBY {k} a 7"],
        ],
        exercise: &[
            "CMS.INCRBY {k} a{i} 1 b{i} 4294967295",
            "CMS.QUERY {k} a b c a{i}",
            "CMS.INFO {k}",
        ],
    },
    Recipe {
        prefix: "TOPK",
        create: &[
            &["TOPK.RESERVE {k} 5 50 4 0.9", "TOPK.ADD {k} {items}"],
            &["TOPK.RESERVE {k} 1 8 1 0.5", "TOPK.INCRBY {k} a 3 b 1"],
        ],
        exercise: &[
            "TOPK.ADD {k} a{i} b{i} c{i}",
            "TOPK.INCRBY {k} a 3 z{i} 100",
            "TOPK.QUERY {k} a b i1",
            "TOPK.COUNT {k} a b",
            "TOPK.LIST {k} WITHCOUNT",
            "TOPK.INFO {k}",
        ],
    },
    Recipe {
        prefix: "TDIGEST",
        create: &[
            &["TDIGEST.CREATE {k} COMPRESSION 5", "TDIGEST.ADD {k} 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40"],
            &["TDIGEST.CREATE {k}", "TDIGEST.ADD {k} 0.5 -3 1e300"],
            &["TDIGEST.CREATE {k}", "TDIGEST.ADD {k} 7"],
        ],
        exercise: &[
            "TDIGEST.ADD {k} {i} 1.5 -2",
            "TDIGEST.QUANTILE {k} 0 0.5 1",
            "TDIGEST.CDF {k} 1 {i}",
            "TDIGEST.RANK {k} 1 {i}",
            "TDIGEST.BYREVRANK {k} 0 1 {i}",
            "TDIGEST.TRIMMED_MEAN {k} 0.1 0.9",
            "TDIGEST.MERGE merged{i} 2 {k} {k} COMPRESSION 7",
            "TDIGEST.INFO {k}",
        ],
    },
];

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A recipe line as arguments: `{k}` the key, `{i}` a counter, `{t}`/`{t-N}` times, `{items}`
/// 40 items.
pub(crate) fn words(line: &str, key: &str, i: usize) -> Vec<String> {
    let now = now_ms();
    let mut out = Vec::new();
    for w in line.split(' ') {
        match w {
            "{items}" => out.extend((0..40).map(|n| format!("i{n}"))),
            "{t}" => out.push(now.to_string()),
            _ if w.starts_with("{t-") => {
                let back: u64 = w[3..w.len() - 1].parse().unwrap();
                out.push((now - back).to_string());
            }
            _ => out.push(w.replace("{k}", key).replace("{i}", &i.to_string())),
        }
    }
    out
}

pub(crate) fn run(c: &mut redis::Connection, args: &[String]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(&args[0]);
    for a in &args[1..] {
        cmd.arg(a);
    }
    cmd.query(c)
}

/// Runs the recipe's exercise on `key` plus what every value goes through (DUMP/RESTORE,
/// DIGEST, MEMORY USAGE, COPY), ignoring errors: only the server's survival is judged.
pub(crate) fn exercise(c: &mut redis::Connection, recipe: &Recipe, key: &str, round: usize) {
    for (n, line) in recipe.exercise.iter().enumerate() {
        let _ = run(c, &words(line, key, round * 100 + n));
    }
    if let Ok(Value::BulkString(payload)) = redis::cmd("DUMP").arg(key).query::<Value>(c) {
        let _ = restore(c, "roundtrip", &payload);
    }
    for line in [
        format!("DEBUG DIGEST-VALUE {key}"),
        format!("MEMORY USAGE {key}"),
        format!("COPY {key} copied REPLACE"),
    ] {
        let args: Vec<String> = line.split(' ').map(str::to_string).collect();
        let _ = run(c, &args);
    }
}

/// Scale of the fuzz run: 1 by default, 10 with `BLOOMGATE_FUZZ_LONG=1`.
pub(crate) fn scale() -> usize {
    match std::env::var("BLOOMGATE_FUZZ_LONG").as_deref() {
        Ok("1") | Ok("yes") => 10,
        _ => 1,
    }
}

pub(crate) fn seed() -> u64 {
    std::env::var("BLOOMGATE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x23_2026_1201)
}

/// Creates every recipe's keys; returns `(recipe index, key, DUMP payload)` and checks that
/// every type the dialect defines was made.
pub(crate) fn seeds(c: &mut redis::Connection) -> Vec<(usize, String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut types = std::collections::BTreeSet::new();
    for (r, recipe) in RECIPES.iter().enumerate() {
        for (s, lines) in recipe.create.iter().enumerate() {
            let key = format!("seed-{}-{s}", recipe.prefix);
            for line in *lines {
                run(c, &words(line, &key, 0)).unwrap_or_else(|e| panic!("{line}: {e}"));
            }
            let t: String = redis::cmd("TYPE").arg(&key).query(c).unwrap();
            types.insert(t);
            out.push((r, key.clone(), dump(c, &key)));
        }
    }
    for kind in Kind::ALL {
        assert!(
            types.contains(kind.type_name()),
            "type {} has no fuzz recipe: add one to RECIPES",
            kind.type_name()
        );
    }
    out
}
