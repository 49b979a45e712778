//! Untrusted input never kills Redis (issue #23): the recorded crashes as regression tests, then
//! a mutation fuzzer over every type the module registers — mutated `DUMP` payloads (CRC64
//! trailer re-sealed so they reach the module's loader), mutated `LOADCHUNK` streams and corrupt
//! RDB files loaded at startup — against Debian's redis-server (or `$BLOOMGATE_REDIS_SERVER`)
//! with the module, under an address-space limit so that an allocation the budget should have
//! refused kills the server instead of swapping the machine.
//!
//! The fuzzer is deterministic (seed `BLOOMGATE_FUZZ_SEED`, default fixed) and bounded: 1,500
//! payloads, 600 chunk streams per LOADCHUNK family and 120 RDB files by default, ten times more
//! with `BLOOMGATE_FUZZ_LONG=1` (`scripts/fuzz_redis.sh --long`). Types are discovered, not
//! listed: keys are created by recipes, and the test fails if a type the dialect defines
//! (`Kind::ALL`) has no recipe — a new type is fuzzed as soon as it lands. A crash leaves the
//! input under `target/fuzz-redis/` and fails with the server's log.

#[allow(dead_code)]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use bloomgate_dialect::encoding::rdb_format::{
    crc64, opcode, write_len, write_string, Length, ModuleWriter, RdbReader,
};
use bloomgate_dialect::encoding::rdb_io::RdbSink;
use bloomgate_dialect::value::Kind;
use redis::Value;
use support::{have_redis, module_path, temp_dir};

/// Address space a fuzzed server may use: far above what the fuzzed values need, far below
/// what a runaway allocation reaches.
const ADDRESS_SPACE_KIB: u64 = 3 << 20;

// ---------------------------------------------------------------------------------------------
// A redis-server under `ulimit -v`, whose death is observed rather than hidden.

struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
}

/// How a server that was asked to load something ended up.
enum Start {
    Up(Server),
    /// Exited by itself: status and log.
    Exited(ExitStatus, String),
    /// Neither answered nor exited within a minute (killed): its log.
    Hung(String),
}

impl Server {
    /// Starts the server with the module in `dir` (loading `dir/dump.rdb` if present) and
    /// waits until it answers PING or exits.
    fn start(dir: &Path, extra: &[&str]) -> Start {
        for _ in 0..5 {
            let port = bloomgate_testkit::free_port();
            let log = dir.join(format!("redis-{port}.log"));
            let _ = std::fs::remove_file(&log);
            let child = Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "ulimit -v {ADDRESS_SPACE_KIB} && exec \"$0\" \"$@\""
                ))
                .arg(bloomgate_testkit::redis_server_binary())
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--dir"])
                .arg(dir)
                .arg("--logfile")
                .arg(&log)
                .args(["--enable-debug-command", "yes", "--loadmodule"])
                .arg(module_path())
                .args(extra)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(log.with_extension("stderr")).unwrap())
                .spawn()
                .expect("spawning redis-server");
            let mut server = Server { child, port, log };
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if let Some(status) = server.child.try_wait().unwrap() {
                    let text = std::fs::read_to_string(&server.log).unwrap_or_default();
                    if text.contains("Address already in use") {
                        break;
                    }
                    return Start::Exited(status, text);
                }
                if bloomgate_testkit::ping(port, None) {
                    return Start::Up(server);
                }
                if Instant::now() >= deadline {
                    let text = std::fs::read_to_string(&server.log).unwrap_or_default();
                    return Start::Hung(text);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        panic!("no free port for redis-server");
    }

    fn up(dir: &Path, extra: &[&str]) -> Server {
        match Self::start(dir, extra) {
            Start::Up(s) => s,
            Start::Exited(status, log) => panic!("redis-server exited ({status}):\n{log}"),
            Start::Hung(log) => panic!("redis-server never answered:\n{log}"),
        }
    }

    /// Dialect panics the module caught (each answered as an error instead of killing the
    /// server): not a crash, but a bug to report.
    fn caught_panics(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .matches("bloomgate: internal error")
            .count()
    }

    fn conn(&self) -> redis::Connection {
        let c = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        let con = c.get_connection().unwrap();
        con.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        con
    }

    /// Alive and answering, else the reason (exit status and the log's last lines).
    fn check_alive(&mut self) -> Result<(), String> {
        if bloomgate_testkit::ping(self.port, None) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
        let status = self.child.try_wait().unwrap();
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let report = log.find("BUG REPORT START").unwrap_or(0);
        let tail: Vec<&str> = log[report..].lines().take(40).collect();
        let stderr = std::fs::read_to_string(self.log.with_extension("stderr")).unwrap_or_default();
        Err(format!(
            "redis-server died ({status:?}):\n{}\nstderr:\n{stderr}",
            tail.join("\n")
        ))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether an exit is a clean refusal: an exit status (Redis 7.0 exits 0 after its RDB check
/// when a load fails, later versions 1), not a signal, and no crash report in the log (an
/// assertion, `Guru Meditation`, a Rust panic or an out-of-memory abort are crashes).
fn clean_exit(status: ExitStatus, log: &str) -> bool {
    // Damage Redis itself answers with a panic, whatever modules are loaded: a bit flip in the
    // file's own framing that makes two key names equal. Not a module's crash.
    const REDIS_OWN: &[&str] = &["Duplicated key found in RDB file"];
    let reason = log.lines().find(|l| l.contains("Guru Meditation"));
    if reason.is_some_and(|r| REDIS_OWN.iter().any(|c| r.contains(c))) && !log.contains("panicked")
    {
        return true;
    }
    let crashed = [
        "Guru Meditation",
        "BUG REPORT",
        "crashed by signal",
        "panicked",
        "Out Of Memory",
        "ASSERTION FAILED",
    ];
    status.code().is_some() && !crashed.iter().any(|c| log.contains(c))
}

/// Saves a crashing input and fails with `why`.
fn crashed(kind: &str, input: &[u8], why: &str) -> ! {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-redis");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{kind}-{:016x}.bin", crc64(0, input)));
    std::fs::write(&path, input).unwrap();
    panic!("{kind} input {} killed the server: {why}", path.display());
}

// ---------------------------------------------------------------------------------------------
// Payloads, fields and RDB files.

/// One module field of a `DUMP` payload.
#[derive(Clone, Debug, PartialEq)]
enum Field {
    U(u64),
    D(f64),
    S(Vec<u8>),
}

/// The module type id and fields of a `DUMP` payload of a module value.
fn split_payload(payload: &[u8]) -> (u64, Vec<Field>) {
    let body = &payload[1..payload.len() - 10];
    let mut r = RdbReader::new(body, body.len() as u64, u64::MAX);
    let id = r.length().unwrap();
    let mut fields = Vec::new();
    loop {
        match r.length().unwrap() {
            opcode::EOF => break,
            opcode::UINT | opcode::SINT => fields.push(Field::U(r.length().unwrap())),
            opcode::DOUBLE => fields.push(Field::D(f64::from_le_bytes(r.array().unwrap()))),
            opcode::STRING => fields.push(Field::S(r.string(u64::MAX).unwrap())),
            other => panic!("unexpected opcode {other}"),
        }
    }
    (id, fields)
}

/// A module value's body (type id, fields, EOF) and a sealed `DUMP` payload of it.
fn module_body(id: u64, fields: &[Field]) -> Vec<u8> {
    let mut w = ModuleWriter::default();
    write_len(&mut w.out, id);
    for f in fields {
        match f {
            Field::U(v) => w.save_unsigned(*v),
            Field::D(v) => w.save_double(*v),
            Field::S(v) => w.save_string(v),
        }
    }
    write_len(&mut w.out, opcode::EOF);
    w.out
}

/// `type byte + body + RDB version 10 + CRC64`: what RESTORE takes.
fn seal(body: &[u8]) -> Vec<u8> {
    let mut out = vec![7u8];
    out.extend_from_slice(body);
    out.extend_from_slice(&10u16.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// An RDB file (version 10) of `(key, DUMP payload)` entries in db 0, CRC64 trailer sealed.
fn rdb_file(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = b"REDIS0010".to_vec();
    out.extend_from_slice(&[0xfe, 0x00]);
    for (key, payload) in entries {
        out.push(payload[0]);
        write_string(&mut out, key);
        out.extend_from_slice(&payload[1..payload.len() - 10]);
    }
    out.push(0xff);
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn dump(c: &mut redis::Connection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(c).unwrap()
}

fn restore(c: &mut redis::Connection, key: &str, payload: &[u8]) -> redis::RedisResult<Value> {
    redis::cmd("RESTORE")
        .arg(key)
        .arg(0)
        .arg(payload)
        .arg("REPLACE")
        .query(c)
}

/// `(next iterator, chunk)` pairs of a full SCANDUMP (the header first), as LOADCHUNK takes
/// them; `prefix` is the family (`BF`, `CF`, `WF`).
fn scandump(c: &mut redis::Connection, prefix: &str, key: &str) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut iter = 0i64;
    for _ in 0..10_000 {
        let reply: redis::RedisResult<(i64, Vec<u8>)> = redis::cmd(&format!("{prefix}.SCANDUMP"))
            .arg(key)
            .arg(iter)
            .query(c);
        let Ok((next, data)) = reply else { break };
        if next == 0 {
            break;
        }
        out.push((next, data));
        iter = next;
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Regression tests for the crashes of issue #23.

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

// ---------------------------------------------------------------------------------------------
// The mutation fuzzer.

/// SplitMix64: a small, seedable generator (the fuzzer must replay exactly from its seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.next().is_multiple_of(one_in)
    }
}

/// Integers that sit on the edges of what the formats and the commands allow.
fn interesting_u64(rng: &mut Rng, was: u64) -> u64 {
    const EDGES: [u64; 26] = [
        0,
        1,
        2,
        3,
        7,
        8,
        255,
        256,
        1023,
        1024,
        32767,
        32768,
        32769,
        65535,
        65536,
        65537,
        1 << 30,
        (1 << 30) + 1,
        1 << 31,
        u32::MAX as u64,
        1 << 32,
        1 << 40,
        1 << 48,
        1 << 62,
        i64::MAX as u64,
        u64::MAX,
    ];
    match rng.below(6) {
        0 => was.wrapping_add(1),
        1 => was.wrapping_sub(1),
        2 => was.wrapping_mul(2 + rng.below(1000) as u64),
        3 => was ^ (1 << rng.below(64)),
        _ => EDGES[rng.below(EDGES.len())],
    }
}

fn interesting_f64(rng: &mut Rng, was: f64) -> f64 {
    const EDGES: [f64; 12] = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        1e-300,
        1e300,
        f64::MIN_POSITIVE,
        5e-324,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    match rng.below(3) {
        0 => was * 2.0,
        1 => was / 1e6,
        _ => EDGES[rng.below(EDGES.len())],
    }
}

/// Writes an interesting integer of 1, 2, 4 or 8 bytes into `bytes` at a random offset
/// (aligned to its width half the time: header fields usually are), or flips, cuts or extends.
fn mutate_bytes(rng: &mut Rng, bytes: &mut Vec<u8>) {
    match rng.below(6) {
        0..=2 if !bytes.is_empty() => {
            let width = [1usize, 2, 4, 8][rng.below(4)];
            if bytes.len() < width {
                return;
            }
            let mut at = rng.below(bytes.len() - width + 1);
            if rng.chance(2) {
                at -= at % width;
            }
            let mut was = [0u8; 8];
            was[..width].copy_from_slice(&bytes[at..at + width]);
            let v = interesting_u64(rng, u64::from_le_bytes(was)).to_le_bytes();
            bytes[at..at + width].copy_from_slice(&v[..width]);
        }
        3 if !bytes.is_empty() => {
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len());
                bytes[at] ^= 1 << rng.below(8);
            }
        }
        4 => {
            let keep = rng.below(bytes.len() + 1);
            bytes.truncate(keep);
        }
        _ => {
            for _ in 0..1 + rng.below(16) {
                bytes.push(rng.next() as u8);
            }
        }
    }
}

/// One to three mutations of a payload's fields (values, types, order, count), its type id,
/// or its raw bytes; the CRC64 is re-sealed so the payload reaches the module.
fn mutate_payload(rng: &mut Rng, payload: &[u8]) -> Vec<u8> {
    let (mut id, mut fields) = split_payload(payload);
    let mut raw_flips = false;
    for _ in 0..1 + rng.below(3) {
        let i = rng.below(fields.len());
        match rng.below(12) {
            0..=4 => match &mut fields[i] {
                Field::U(v) => *v = interesting_u64(rng, *v),
                Field::D(v) => *v = interesting_f64(rng, *v),
                Field::S(s) => mutate_bytes(rng, s),
            },
            5 => {
                fields.remove(i);
            }
            6 => {
                let f = fields[i].clone();
                fields.insert(i, f);
            }
            7 => {
                let j = rng.below(fields.len());
                fields.swap(i, j);
            }
            8 => {
                fields[i] = match &fields[i] {
                    Field::U(v) => Field::D(*v as f64),
                    Field::D(v) => Field::S(v.to_le_bytes().to_vec()),
                    Field::S(s) => Field::U(s.len() as u64),
                }
            }
            9 => fields.truncate(i),
            10 => id = (id & !1023) | [0, 1, 2, 3, 5, 1023][rng.below(6)],
            _ => raw_flips = true,
        }
        if fields.is_empty() {
            fields.push(Field::U(0));
        }
    }
    let mut body = module_body(id, &fields);
    if raw_flips {
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(body.len());
            body[at] ^= 1 << rng.below(8);
        }
    }
    seal(&body)
}

/// How to make and exercise keys of one registered type.
struct Recipe {
    /// The family's command prefix (`BF`, `CF`, `WF`, `CMS`, `TOPK`, `TDIGEST`).
    prefix: &'static str,
    /// Commands creating example keys (`{k}` is the key), several shapes per type.
    create: &'static [&'static [&'static str]],
    /// Commands run on a key after a mutated value was accepted (`{k}` the key, `{i}` a
    /// counter, `{t}` the time in ms).
    exercise: &'static [&'static str],
}

const RECIPES: &[Recipe] = &[
    Recipe {
        prefix: "BF",
        create: &[
            &["BF.RESERVE {k} 0.01 10 EXPANSION 2", "BF.MADD {k} {items}"],
            &["BF.RESERVE {k} 0.001 50 NONSCALING", "BF.MADD {k} a b c"],
            &["BF.RESERVE {k} 0.1 8 EXPANSION 5", "BF.MADD {k} {items}"],
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

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A recipe line as arguments: `{k}` the key, `{i}` a counter, `{t}`/`{t-N}` times, `{items}`
/// 40 items.
fn words(line: &str, key: &str, i: usize) -> Vec<String> {
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

fn run(c: &mut redis::Connection, args: &[String]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(&args[0]);
    for a in &args[1..] {
        cmd.arg(a);
    }
    cmd.query(c)
}

/// Runs the recipe's exercise on `key` plus what every value goes through (DUMP/RESTORE,
/// DIGEST, MEMORY USAGE, COPY), ignoring errors: only the server's survival is judged.
fn exercise(c: &mut redis::Connection, recipe: &Recipe, key: &str, round: usize) {
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
fn scale() -> usize {
    match std::env::var("BLOOMGATE_FUZZ_LONG").as_deref() {
        Ok("1") | Ok("yes") => 10,
        _ => 1,
    }
}

fn seed() -> u64 {
    std::env::var("BLOOMGATE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x23_2026_1201)
}

/// Creates every recipe's keys; returns `(recipe index, key, DUMP payload)` and checks that
/// every type the dialect defines was made.
fn seeds(c: &mut redis::Connection) -> Vec<(usize, String, Vec<u8>)> {
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
