//! Untrusted input never kills Redis: the forged values that once crashed it as regression tests, then
//! a mutation fuzzer over every type the module registers — mutated `DUMP` payloads (CRC64
//! trailer re-sealed so they reach the module's loader), mutated `LOADCHUNK` streams and corrupt
//! RDB files loaded at startup — against Debian's redis-server (or `$BLOOMGATE_REDIS_SERVER`)
//! with the module, under an address-space limit so that an allocation the budget should have
//! refused kills the server instead of swapping the machine.
//!
//! The fuzzer is deterministic (seed `BLOOMGATE_FUZZ_SEED`, default fixed) and bounded: 1,500
//! payloads, 600 chunk streams per LOADCHUNK family and 120 RDB files by default, ten times more
//! with `BLOOMGATE_FUZZ_LONG=1` (`scripts/fuzz/fuzz_redis.sh --long`). Types are discovered, not
//! listed: keys are created by recipes, and the test fails if a type the dialect defines
//! (`Kind::ALL`) has no recipe — a new type is fuzzed as soon as it lands. A crash leaves the
//! input under `target/fuzz-redis/` and fails with the server's log.

#[allow(dead_code)]
#[path = "../support/mod.rs"]
mod support;

mod mutate;
mod payload;
mod recipes;
mod server;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use bloomgate_dialect::codec::rdb_io::RdbSink;
use bloomgate_dialect::encoding::rdb_format::{
    crc64, opcode, write_len, write_string, Length, ModuleWriter, RdbReader,
};
use bloomgate_dialect::value::Kind;
use mutate::*;
use payload::*;
use recipes::*;
use redis::Value;
use server::*;
use support::{have_redis, module_path, temp_dir};

/// Address space a fuzzed server may use: far above what the fuzzed values need, far below
/// what a runaway allocation reaches.
const ADDRESS_SPACE_KIB: u64 = 3 << 20;

// ---------------------------------------------------------------------------------------------
// Regression tests: forged values that once crashed Redis through the module.

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../../tests/fixtures/forged/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The recorded forged CF value (2^40 one-slot buckets): RESTORE is refused and Redis stays up;
/// an RDB file holding it makes Redis refuse to start (exit 1, its log naming our refusal)
/// instead of allocating until it dies.
#[test]
fn forged_cuckoo_size_is_refused_on_restore_and_at_startup() {
    if !have_redis("forged_cuckoo_size_is_refused_on_restore_and_at_startup") {
        return;
    }
    let payload = fixture("cf-2pow40-buckets.dump");
    let dir = temp_dir("forged-cf");
    let mut server = Server::up(&dir, &[]);
    let c = &mut server.conn();
    let e = restore(c, "cf", &payload).unwrap_err();
    assert!(e.to_string().contains("Bad data format"), "{e}");
    server.check_alive().unwrap();
    // The same value in an RDB file, beside a good key.
    redis::cmd("BF.ADD").arg("good").arg("x").exec(c).unwrap();
    let good = dump(c, "good");
    drop(server);
    std::fs::write(
        dir.join("dump.rdb"),
        rdb_file(&[(b"good".to_vec(), good), (b"cf".to_vec(), payload)]),
    )
    .unwrap();
    match Server::start(&dir, &[]) {
        Start::Up(_) => panic!("Redis loaded a 1 TiB cuckoo filter"),
        Start::Hung(log) => panic!("redis-server never answered:\n{log}"),
        Start::Exited(status, log) => {
            assert!(clean_exit(status, &log), "{status}:\n{log}");
            assert!(log.contains("MBbloomCF: invalid module value"), "{log}");
        }
    }
}

/// A Bloom growth factor past BF.RESERVE's EXPANSION cap (2^31) is refused on LOADCHUNK and
/// RESTORE; the largest allowed one (32768) loads, and the next write that must grow is refused
/// with OOM under maxmemory instead of allocating gigabytes past it.
#[test]
fn forged_bloom_growth_is_refused_and_growth_stays_under_maxmemory() {
    if !have_redis("forged_bloom_growth_is_refused_and_growth_stays_under_maxmemory") {
        return;
    }
    let server = Server::up(&temp_dir("forged-bf"), &[]);
    let c = &mut server.conn();
    redis::cmd("BF.RESERVE")
        .arg("src")
        .arg(0.01)
        .arg(100_000)
        .exec(c)
        .unwrap();
    let (_, header): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP")
        .arg("src")
        .arg(0)
        .query(c)
        .unwrap();
    let payload = dump(c, "src");
    let mut full = header.clone();
    full[36..44].copy_from_slice(&100_000u64.to_le_bytes()); // link 0 full: next add grows
    full[0..8].copy_from_slice(&100_000u64.to_le_bytes());
    let load = |c: &mut redis::Connection, key: &str, header: &[u8]| {
        redis::cmd("BF.LOADCHUNK")
            .arg(key)
            .arg(1)
            .arg(header)
            .query::<Value>(c)
    };
    let mut forged = full.clone();
    forged[16..20].copy_from_slice(&(1u32 << 31).to_le_bytes());
    let e = load(c, "g", &forged).unwrap_err();
    assert!(e.to_string().contains("received bad data"), "{e}");
    // The same growth factor in a DUMP payload (field 4: growth).
    let (id, mut fields) = split_payload(&payload);
    fields[3] = Field::U(1 << 31);
    let e = restore(c, "g", &seal(&module_body(id, &fields))).unwrap_err();
    assert!(e.to_string().contains("Bad data format"), "{e}");
    // 32768 is what BF.RESERVE allows: loaded; growing by it (~4 GB) is refused under
    // maxmemory, and memory stays where it was.
    let mut allowed = full;
    allowed[16..20].copy_from_slice(&32768u32.to_le_bytes());
    assert_eq!(load(c, "g", &allowed).unwrap(), Value::Okay);
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("256mb")
        .exec(c)
        .unwrap();
    let e = redis::cmd("BF.ADD")
        .arg("g")
        .arg("grows")
        .query::<Value>(c)
        .unwrap_err();
    assert!(e.to_string().contains("OOM"), "{e}");
    let info: String = redis::cmd("INFO").arg("memory").query(c).unwrap();
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(used < 256 << 20, "used_memory {used}");
}

/// Mutated RESTORE payloads (1,500 × scale), each accepted value exercised, `DEBUG RELOAD`
/// (an RDB save and load of everything accepted) every 100 payloads; then mutated LOADCHUNK
/// streams (600 × scale per family with LOADCHUNK); then corrupt RDB files loaded at startup
/// (120 × scale). The server must answer PING after every step; an RDB it refuses must end in a
/// clean exit.
#[test]
fn mutated_values_never_kill_redis() {
    if !have_redis("mutated_values_never_kill_redis") {
        return;
    }
    let scale = scale();
    let mut rng = Rng(seed());
    let dir = temp_dir("fuzz");
    let mut server = Server::up(&dir, &[]);
    let c = &mut server.conn();
    let seeds = seeds(c);
    let started = Instant::now();

    // 1. RESTORE.
    let (mut accepted, payloads) = (0usize, 1500 * scale);
    for round in 0..payloads {
        let (r, _, payload) = &seeds[rng.below(seeds.len())];
        let mutated = mutate_payload(&mut rng, payload);
        let ok = restore(c, "fz", &mutated).is_ok();
        if ok {
            accepted += 1;
            exercise(c, &RECIPES[*r], "fz", round);
        }
        if let Err(why) = server.check_alive() {
            crashed("restore", &mutated, &why);
        }
        if round % 100 == 99 {
            // A refused reload empties the dataset (and Redis could not restart on its own RDB):
            // whatever was accepted and then changed by commands must save and load.
            let reload = redis::cmd("DEBUG").arg("RELOAD").query::<Value>(c);
            if let Err(why) = server.check_alive() {
                crashed("reload-after-restore", &mutated, &why);
            }
            if let Err(e) = reload {
                crashed("reload-refused-own-rdb", &mutated, &e.to_string());
            }
        }
    }
    eprintln!(
        "RESTORE: {payloads} mutated payloads, {accepted} accepted, 0 crashes ({:.1}s)",
        started.elapsed().as_secs_f64()
    );

    // 2. LOADCHUNK streams, per family that has one.
    let families: Vec<&str> = bloomgate_dialect::commands::table()
        .iter()
        .filter_map(|info| info.name.strip_suffix(".LOADCHUNK"))
        .collect();
    for family in families {
        let recipe = RECIPES
            .iter()
            .position(|r| r.prefix == family)
            .unwrap_or_else(|| panic!("{family}.LOADCHUNK has no fuzz recipe"));
        let streams: Vec<Vec<(i64, Vec<u8>)>> = seeds
            .iter()
            .filter(|(r, _, _)| *r == recipe)
            .map(|(_, key, _)| scandump(c, family, key))
            .filter(|s| !s.is_empty())
            .collect();
        assert!(!streams.is_empty(), "{family}: no SCANDUMP to mutate");
        let started = Instant::now();
        let (mut loaded, count) = (0usize, 600 * scale);
        for round in 0..count {
            let mut stream = streams[rng.below(streams.len())].clone();
            for _ in 0..1 + rng.below(3) {
                let i = if rng.chance(2) {
                    0
                } else {
                    rng.below(stream.len())
                };
                match rng.below(8) {
                    0..=4 => mutate_bytes(&mut rng, &mut stream[i].1),
                    5 => stream[i].0 = interesting_u64(&mut rng, stream[i].0 as u64) as i64,
                    6 => {
                        stream.remove(i);
                    }
                    _ => {
                        let j = rng.below(stream.len());
                        stream.swap(i, j);
                    }
                }
                if stream.is_empty() {
                    break;
                }
            }
            let _ = redis::cmd("DEL").arg("lc").query::<Value>(c);
            let mut record = Vec::new();
            for (n, (iter, data)) in stream.iter().enumerate() {
                let iter = if n == 0 && !rng.chance(8) { 1 } else { *iter };
                record.extend_from_slice(&iter.to_le_bytes());
                record.extend_from_slice(&(data.len() as u64).to_le_bytes());
                record.extend_from_slice(data);
                let _ = redis::cmd(&format!("{family}.LOADCHUNK"))
                    .arg("lc")
                    .arg(iter)
                    .arg(data.as_slice())
                    .query::<Value>(c);
            }
            let exists: bool = redis::cmd("EXISTS").arg("lc").query(c).unwrap_or(false);
            if exists {
                loaded += 1;
                exercise(c, &RECIPES[recipe], "lc", round);
            }
            if let Err(why) = server.check_alive() {
                crashed(&format!("loadchunk-{family}"), &record, &why);
            }
            if round % 100 == 99 {
                let _ = redis::cmd("DEBUG").arg("RELOAD").query::<Value>(c);
                if let Err(why) = server.check_alive() {
                    crashed(&format!("reload-after-{family}"), &record, &why);
                }
            }
        }
        eprintln!(
            "{family}.LOADCHUNK: {count} mutated streams, {loaded} left a key, 0 crashes ({:.1}s)",
            started.elapsed().as_secs_f64()
        );
    }
    let caught = server.caught_panics();
    if caught > 0 {
        let stderr = std::fs::read_to_string(server.log.with_extension("stderr")).unwrap();
        let mut sites: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("panicked at"))
            .collect();
        sites.sort();
        sites.dedup();
        eprintln!("WARNING: the module caught {caught} dialect panics (no crash): {sites:#?}");
    }
    drop(server);

    // 3. Corrupt RDB files at startup.
    let started = Instant::now();
    let (mut refused, mut loaded, files) = (0usize, 0usize, 120 * scale);
    let rdb_dir = temp_dir("fuzz-rdb");
    for _ in 0..files {
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = seeds
            .iter()
            .map(|(_, key, payload)| (key.as_bytes().to_vec(), payload.clone()))
            .collect();
        let victim = rng.below(entries.len());
        entries[victim].1 = mutate_payload(&mut rng, &entries[victim].1);
        let mut file = rdb_file(&entries);
        if rng.chance(4) {
            // Raw damage anywhere before the trailer, trailer re-sealed.
            let body = file.len() - 8;
            for _ in 0..1 + rng.below(4) {
                let at = 9 + rng.below(body - 9);
                file[at] ^= 1 << rng.below(8);
            }
            let crc = crc64(0, &file[..body]);
            file[body..].copy_from_slice(&crc.to_le_bytes());
        }
        std::fs::write(rdb_dir.join("dump.rdb"), &file).unwrap();
        match Server::start(&rdb_dir, &[]) {
            Start::Up(mut s) => {
                loaded += 1;
                let c = &mut s.conn();
                let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap_or_default();
                for (n, key) in keys.iter().enumerate() {
                    let t: String = redis::cmd("TYPE").arg(key).query(c).unwrap_or_default();
                    if let Some(r) = RECIPES.iter().find(|r| {
                        Kind::ALL.iter().any(|k| {
                            k.type_name() == t && key.starts_with(&format!("seed-{}", r.prefix))
                        })
                    }) {
                        exercise(c, r, key, n);
                    }
                }
                if let Err(why) = s.check_alive() {
                    crashed("rdb", &file, &why);
                }
            }
            Start::Exited(status, log) => {
                if !clean_exit(status, &log) {
                    crashed("rdb", &file, &format!("{status}:\n{log}"));
                }
                refused += 1;
            }
            Start::Hung(log) => crashed("rdb-hang", &file, &format!("no answer in 60 s:\n{log}")),
        }
    }
    eprintln!(
        "RDB: {files} corrupt files, {loaded} loaded, {refused} refused cleanly, 0 crashes ({:.1}s)",
        started.elapsed().as_secs_f64()
    );
}

/// The fuzzer's own plumbing: a payload splits into fields and joins back byte for byte, and
/// an RDB file's trailer is its CRC64.
#[test]
fn payload_fields_round_trip() {
    let mut w = ModuleWriter::default();
    w.save_unsigned(5);
    w.save_double(0.25);
    w.save_string(b"hello");
    let id = bloomgate_dialect::encoding::rdb_format::module_type_id("MBbloom--", 4).unwrap();
    let fields = vec![Field::U(5), Field::D(0.25), Field::S(b"hello".to_vec())];
    let payload = seal(&module_body(id, &fields));
    assert_eq!(split_payload(&payload), (id, fields));
    let file = rdb_file(&[(b"k".to_vec(), payload)]);
    let body = file.len() - 8;
    assert_eq!(
        crc64(0, &file[..body]).to_le_bytes(),
        file[body..],
        "sealed"
    );
    let mut r = RdbReader::new(&file[11..], (body - 11) as u64, 0);
    assert_eq!(r.u8().unwrap(), 7);
    assert!(matches!(r.length_or_encoding().unwrap(), Length::Len(1)));
}
