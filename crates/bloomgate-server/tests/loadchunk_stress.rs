//! The LOADCHUNK stress test: several connections send BF.LOADCHUNKs of up to 36 MiB (as
//! RedisBloom's `test_scandump_load_big` does: most at the start of a link of about 37 MB, so
//! they are applied and logged, the others at random iterators, mostly refused), read 16 MiB
//! SCANDUMP chunks back now and then, while one more connection runs BGSAVE, SAVE, DEBUG RELOAD,
//! `CONFIG SET appendfsync always|everysec` and FLUSHALL, each followed by RLTest's wait for
//! `rdb_bgsave_in_progress:0`, and another sends BGSAVE every 150 ms on average. The log grows past 64 MiB within seconds, so serve's own
//! compaction snapshots switch log files as well (serve has no BGREWRITEAOF: a snapshot is its
//! log rewrite).
//!
//! A watchdog fails the test when a connection's reply is overdue by [`stall`], after taking a
//! diagnosis, printed and saved under the target's `tmp/`: whether the server answers a new
//! connection, its `INFO persistence`, a thread dump of the server process (`gdb -batch -p PID
//! -ex 'thread apply all bt'`; `.ci/setup` installs gdb), what each connection was doing (sending
//! which command, how many of its bytes out, or awaiting its reply), the data directory and the
//! server's stderr. At the end every key must SCANDUMP the same across a last DEBUG RELOAD.
//!
//! Bounded: `BLOOMGATE_STRESS_SECONDS` of load (default 120), then the commands in flight
//! finish; `BLOOMGATE_STRESS_STALL_SECONDS` (default 120) is the stall threshold. `BLOOMGATE_TEST_BIN=target/debug/bloomgate` runs it against an unoptimised build.

use std::collections::hash_map::DefaultHasher;
use std::fmt::Write as _;
use std::hash::Hasher;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{Shutdown, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bloomgate_testkit::server::Server;
use bloomgate_testkit::{resp_command, skip_or_fail, temp_dir};

#[test]
fn serve_child() {
    bloomgate_testkit::server::serve_child()
}

/// Connections sending LOADCHUNKs.
const WORKERS: usize = 3;
/// The largest chunk, as RedisBloom's test sends.
const MAX_CHUNK: usize = 36 << 20;
/// A reply overdue by this many seconds (`BLOOMGATE_STRESS_STALL_SECONDS`, default 120) is a
/// stall: the slowest legitimate wait, a DEBUG RELOAD of about 150 MB in an unoptimised build on
/// a busy machine, takes seconds.
fn stall() -> Duration {
    Duration::from_secs(
        std::env::var("BLOOMGATE_STRESS_STALL_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(120),
    )
}
/// No socket read or write waits longer than this (a backstop: the watchdog acts first).
const IO_TIMEOUT: Duration = Duration::from_secs(300);

fn load_seconds() -> u64 {
    std::env::var("BLOOMGATE_STRESS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120)
}

/// A reply, as far as this test reads them.
#[derive(Debug)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

fn read_reply(r: &mut impl BufRead) -> io::Result<Reply> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if !line.ends_with(b"\r\n") {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the server closed the connection",
        ));
    }
    line.truncate(line.len() - 2);
    let text = String::from_utf8_lossy(&line[1..]).into_owned();
    let number = || {
        text.parse::<i64>()
            .map_err(|_| io::Error::other(format!("bad number in reply: {text:?}")))
    };
    Ok(match line[0] {
        b'+' => Reply::Simple(text),
        b'-' => Reply::Error(text),
        b':' => Reply::Int(number()?),
        b'$' => match usize::try_from(number()?) {
            Err(_) => Reply::Bulk(None),
            Ok(len) => {
                let mut data = vec![0; len + 2];
                r.read_exact(&mut data)?;
                data.truncate(len);
                Reply::Bulk(Some(data))
            }
        },
        b'*' => Reply::Array(
            (0..number()?.max(0))
                .map(|_| read_reply(r))
                .collect::<io::Result<_>>()?,
        ),
        other => {
            return Err(io::Error::other(format!(
                "unexpected reply type {:?}",
                char::from(other)
            )))
        }
    })
}

/// What one connection is doing, for the watchdog and the diagnosis.
struct Progress {
    name: String,
    /// When its last reply arrived (or it started).
    last: Mutex<Instant>,
    doing: Mutex<String>,
    /// Bytes of the current command written so far.
    sent: AtomicU64,
    replies: AtomicU64,
    /// A handle on its socket, shut down to unblock it when the test gives up.
    socket: Mutex<Option<TcpStream>>,
}

impl Progress {
    fn new(name: &str) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            last: Mutex::new(Instant::now()),
            doing: Mutex::new("connecting".into()),
            sent: AtomicU64::new(0),
            replies: AtomicU64::new(0),
            socket: Mutex::new(None),
        })
    }

    fn set(&self, doing: String) {
        *self.doing.lock().unwrap() = doing;
    }

    fn overdue(&self) -> Duration {
        self.last.lock().unwrap().elapsed()
    }

    fn describe(&self) -> String {
        format!(
            "{}: {} replies; {} ({} bytes of it sent), {:.1} s since its last reply",
            self.name,
            self.replies.load(Ordering::Relaxed),
            self.doing.lock().unwrap(),
            self.sent.load(Ordering::Relaxed),
            self.overdue().as_secs_f64()
        )
    }

    fn cut(&self) {
        if let Some(s) = self.socket.lock().unwrap().as_ref() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// One connection speaking RESP, reporting into its [`Progress`].
struct Client {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
    progress: Arc<Progress>,
}

impl Client {
    fn connect(port: u16, progress: Arc<Progress>) -> io::Result<Client> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        *progress.socket.lock().unwrap() = Some(stream.try_clone()?);
        *progress.last.lock().unwrap() = Instant::now();
        progress.set("idle".into());
        Ok(Client {
            reader: BufReader::with_capacity(1 << 20, stream.try_clone()?),
            stream,
            progress,
        })
    }

    /// Sends `args` (described as `what`) in 1 MiB writes and reads the reply.
    fn call(&mut self, what: &str, args: &[&[u8]]) -> io::Result<Reply> {
        let p = &self.progress;
        p.sent.store(0, Ordering::Relaxed);
        p.set(format!("sending {what}"));
        let command = resp_command(args);
        for piece in command.chunks(1 << 20) {
            self.stream.write_all(piece)?;
            p.sent.fetch_add(piece.len() as u64, Ordering::Relaxed);
        }
        p.set(format!("awaiting the reply to {what}"));
        let reply = read_reply(&mut self.reader)?;
        p.replies.fetch_add(1, Ordering::Relaxed);
        *p.last.lock().unwrap() = Instant::now();
        p.set(format!("idle after {what}"));
        Ok(reply)
    }

    fn simple(&mut self, line: &str) -> io::Result<Reply> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        self.call(line, &args)
    }
}

/// splitmix64: deterministic inputs without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `BF.RESERVE key 0.01 1024 EXPANSION 30000` and 1,200 items: two links, the second of about
/// 37 MB (RedisBloom's test builds the same filter).
fn create(c: &mut Client, key: &str) -> io::Result<()> {
    c.simple(&format!("DEL {key}"))?;
    let reply = c.simple(&format!("BF.RESERVE {key} 0.01 1024 EXPANSION 30000"))?;
    if !matches!(reply, Reply::Simple(_)) {
        return Err(io::Error::other(format!("BF.RESERVE answered {reply:?}")));
    }
    let items: Vec<String> = (0..1200).map(|i| format!("x{i}")).collect();
    let mut args: Vec<&[u8]> = vec![b"BF.INSERT", key.as_bytes(), b"ITEMS"];
    args.extend(items.iter().map(String::as_bytes));
    c.call(&format!("BF.INSERT {key} ITEMS <1200 items>"), &args)?;
    Ok(())
}

/// The byte sizes of the two links of a filter [`create`] makes, from its SCANDUMP header.
fn link_sizes(c: &mut Client) -> io::Result<(u64, u64)> {
    create(c, "probe")?;
    let header = match c.simple("BF.SCANDUMP probe 0")? {
        Reply::Array(mut parts) if parts.len() == 2 => match parts.pop() {
            Some(Reply::Bulk(Some(header))) => header,
            other => return Err(io::Error::other(format!("SCANDUMP header {other:?}"))),
        },
        other => return Err(io::Error::other(format!("SCANDUMP answered {other:?}"))),
    };
    c.simple("DEL probe")?;
    let u64_at = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().unwrap());
    assert_eq!(&header[8..12], &2u32.to_le_bytes(), "two links");
    // A 20-byte chain part, then 53 bytes per link starting with its byte size.
    Ok((u64_at(20), u64_at(20 + 53)))
}

/// A LOADCHUNK connection: returns (applied, refused).
fn worker(
    port: u16,
    id: usize,
    links: (u64, u64),
    progress: Arc<Progress>,
    stop: Arc<AtomicBool>,
) -> io::Result<(u64, u64)> {
    let mut c = Client::connect(port, progress)?;
    let mut rng = Rng(0x5eed + id as u64);
    let data: Vec<u8> = (0..(MAX_CHUNK + 4096) / 8)
        .flat_map(|_| rng.next().to_le_bytes())
        .collect();
    let key = format!("big{id}");
    let (link1, link2) = links;
    let (mut applied, mut refused) = (0u64, 0u64);
    let mut ready = false;
    while !stop.load(Ordering::Relaxed) {
        if !ready {
            create(&mut c, &key)?;
            ready = true;
        }
        let len = 1024 + rng.below(MAX_CHUNK as u64 - 1023);
        // Three in four at the start of the second link (applied and logged); the rest at a
        // random iterator, as RedisBloom's test sends them (mostly refused).
        let valid = rng.below(4) > 0 && len <= link2;
        let iter = if valid {
            1 + link1 + len
        } else {
            rng.below(link1 + link2 + 1)
        };
        let start = rng.below(4096) as usize;
        let chunk = &data[start..start + len as usize];
        let what = format!("BF.LOADCHUNK {key} {iter} <{len} bytes>");
        let iter = iter.to_string();
        match c.call(
            &what,
            &[b"BF.LOADCHUNK", key.as_bytes(), iter.as_bytes(), chunk],
        )? {
            Reply::Simple(ok) if ok == "OK" => applied += 1,
            Reply::Error(_) => {
                refused += 1;
                // A FLUSHALL took the key, or left one made with other parameters.
                ready &= !valid;
            }
            other => return Err(io::Error::other(format!("{what} answered {other:?}"))),
        }
        if rng.below(8) == 0 {
            let line = format!("BF.SCANDUMP {key} {}", 1 + link1);
            match c.simple(&line)? {
                Reply::Array(parts) if parts.len() == 2 => {}
                Reply::Error(_) => ready = false,
                other => return Err(io::Error::other(format!("{line} answered {other:?}"))),
            }
        }
    }
    Ok((applied, refused))
}

/// The persistence connection: returns how many actions it ran.
fn controller(port: u16, progress: Arc<Progress>, stop: Arc<AtomicBool>) -> io::Result<u64> {
    let mut c = Client::connect(port, progress)?;
    let mut rng = Rng(0xc0de);
    let mut actions = 0;
    while !stop.load(Ordering::Relaxed) {
        let action = match rng.below(20) {
            0..=6 => "BGSAVE",
            7..=9 => "SAVE",
            10..=13 => "DEBUG RELOAD",
            14 => "CONFIG SET appendfsync always",
            15..=17 => "CONFIG SET appendfsync everysec",
            18 => "FLUSHALL",
            _ => "INFO persistence",
        };
        match c.simple(action)? {
            // One started by serve's own log compaction, as Redis answers.
            Reply::Error(e) if action == "BGSAVE" && e.contains("already in progress") => {}
            Reply::Error(e) => return Err(io::Error::other(format!("{action} answered -{e}"))),
            _ => {}
        }
        actions += 1;
        // What RLTest does after every test: wait for the background snapshot to end.
        loop {
            match c.simple("INFO persistence")? {
                Reply::Bulk(Some(info))
                    if String::from_utf8_lossy(&info).contains("rdb_bgsave_in_progress:0") =>
                {
                    break
                }
                Reply::Bulk(Some(_)) => std::thread::sleep(Duration::from_millis(20)),
                other => return Err(io::Error::other(format!("INFO answered {other:?}"))),
            }
        }
        std::thread::sleep(Duration::from_millis(rng.below(400)));
    }
    c.simple("CONFIG SET appendfsync everysec")?;
    Ok(actions)
}

/// A second persistence connection sending BGSAVE now and then, so snapshots also start while
/// the first one's SAVE or DEBUG RELOAD runs: returns how many it sent.
fn bgsaver(port: u16, progress: Arc<Progress>, stop: Arc<AtomicBool>) -> io::Result<u64> {
    let mut c = Client::connect(port, progress)?;
    let mut rng = Rng(0xb65a);
    let mut sent = 0;
    while !stop.load(Ordering::Relaxed) {
        match c.simple("BGSAVE")? {
            Reply::Error(e) if e.contains("already in progress") => {}
            Reply::Error(e) => return Err(io::Error::other(format!("BGSAVE answered -{e}"))),
            _ => sent += 1,
        }
        std::thread::sleep(Duration::from_millis(rng.below(300)));
    }
    Ok(sent)
}

/// `gdb -batch -p PID -ex 'thread apply all bt 40'` (40 frames a thread), bounded by `timeout`.
fn thread_dump(pid: u32) -> String {
    let out = Command::new("timeout")
        .args(["120", "gdb", "-batch", "-p", &pid.to_string()])
        .args(["-ex", "info threads", "-ex", "thread apply all bt 40"])
        .output();
    match out {
        Ok(out) => {
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr)
        }
        Err(e) => format!("(gdb did not run: {e})"),
    }
}

fn gdb_runs() -> bool {
    Command::new("gdb")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Everything that can tell why `stalled` stopped: printed and saved.
fn diagnose(
    server: &Server,
    data: &Path,
    stderr: &Path,
    all: &[Arc<Progress>],
    stalled: &Progress,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "STALL: {}\n\nconnections:", stalled.describe());
    for p in all {
        let _ = writeln!(out, "  {}", p.describe());
    }
    let probe = Progress::new("probe");
    let answer = Client::connect(server.port, probe).and_then(|mut c| {
        c.stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let ping = c.simple("PING")?;
        let info = match c.simple("INFO persistence")? {
            Reply::Bulk(Some(text)) => String::from_utf8_lossy(&text).into_owned(),
            other => format!("{other:?}"),
        };
        Ok(format!("PING: {ping:?}\n{info}"))
    });
    match answer {
        Ok(text) => {
            let _ = writeln!(out, "\na new connection is answered: {text}");
        }
        Err(e) => {
            let _ = writeln!(out, "\na new connection is not answered: {e}");
        }
    }
    if let Some(pid) = server.pid() {
        let _ = writeln!(
            out,
            "\nthread dump of serve (pid {pid}):\n{}",
            thread_dump(pid)
        );
    }
    let _ = writeln!(out, "data directory:");
    for entry in std::fs::read_dir(data).into_iter().flatten().flatten() {
        let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = writeln!(out, "  {:?} {len}", entry.file_name());
    }
    let log = std::fs::read_to_string(stderr).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(100).collect();
    let _ = writeln!(out, "\nserve's stderr (last lines):");
    for line in tail.into_iter().rev() {
        let _ = writeln!(out, "  {line}");
    }
    let saved = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("loadchunk-stall-{}.txt", std::process::id()));
    let _ = std::fs::write(&saved, &out);
    format!("{out}\n(saved in {})", saved.display())
}

/// A hash of `key`'s whole SCANDUMP stream; None when the key is missing.
fn dump_hash(c: &mut Client, key: &str) -> io::Result<Option<u64>> {
    let mut hasher = DefaultHasher::new();
    let mut iter = 0i64;
    loop {
        match c.simple(&format!("BF.SCANDUMP {key} {iter}"))? {
            Reply::Array(parts) => match parts.as_slice() {
                [Reply::Int(0), _] => return Ok(Some(hasher.finish())),
                [Reply::Int(next), Reply::Bulk(Some(data))] => {
                    hasher.write(data);
                    iter = *next;
                }
                other => return Err(io::Error::other(format!("SCANDUMP part {other:?}"))),
            },
            Reply::Error(_) => return Ok(None),
            other => return Err(io::Error::other(format!("SCANDUMP answered {other:?}"))),
        }
    }
}

/// Many LOADCHUNKs of up to 36 MiB on several connections while snapshots, DEBUG RELOADs,
/// fsync policy changes and FLUSHALLs run from another: no connection goes unanswered (a stall
/// fails the test with a thread dump), no connection errors, and the keys survive a last DEBUG
/// RELOAD unchanged.
#[test]
fn loadchunks_are_answered_while_snapshots_switch_log_files() {
    if !gdb_runs() {
        // The load still runs; only a stall's thread dump would be missing.
        skip_or_fail(
            "the LOADCHUNK stress test's thread dump",
            "gdb is not installed (bash .ci/setup installs it)",
        );
    }
    let dir = temp_dir("loadchunk-stress");
    let data = dir.join("data");
    let stderr = dir.join("serve.stderr");
    let redirect = format!("exec \"$0\" \"$@\" 2>>'{}'", stderr.display());
    let server = Server::process_under(
        &["sh", "-c", &redirect],
        &data,
        &["--enable-debug-command", "yes", "--appendfsync", "everysec"],
    );
    let port = server.port;
    let links = link_sizes(&mut Client::connect(port, Progress::new("setup")).unwrap()).unwrap();
    assert!(
        links.1 >= MAX_CHUNK as u64,
        "the second link ({} bytes) takes a whole chunk",
        links.1
    );

    let stop = Arc::new(AtomicBool::new(false));
    let mut all = Vec::new();
    let mut workers: Vec<JoinHandle<io::Result<(u64, u64)>>> = Vec::new();
    for id in 0..WORKERS {
        let progress = Progress::new(&format!("loadchunk connection {id}"));
        all.push(progress.clone());
        let stop = stop.clone();
        workers.push(std::thread::spawn(move || {
            worker(port, id, links, progress, stop)
        }));
    }
    let progress = Progress::new("persistence connection");
    all.push(progress.clone());
    let control = {
        let stop = stop.clone();
        std::thread::spawn(move || controller(port, progress, stop))
    };
    let progress = Progress::new("BGSAVE connection");
    all.push(progress.clone());
    let bgsaves = {
        let stop = stop.clone();
        std::thread::spawn(move || bgsaver(port, progress, stop))
    };

    let deadline = Instant::now() + Duration::from_secs(load_seconds());
    loop {
        std::thread::sleep(Duration::from_millis(500));
        if let Some(stalled) = all.iter().find(|p| p.overdue() > stall()) {
            let report = diagnose(&server, &data, &stderr, &all, stalled);
            stop.store(true, Ordering::Relaxed);
            all.iter().for_each(|p| p.cut());
            panic!("{report}");
        }
        if Instant::now() >= deadline {
            stop.store(true, Ordering::Relaxed);
        }
        let others = [&control, &bgsaves];
        if workers.iter().all(JoinHandle::is_finished) && others.iter().all(|t| t.is_finished()) {
            break;
        }
        if workers.iter().any(JoinHandle::is_finished) || others.iter().any(|t| t.is_finished()) {
            // One ended early (an error): stop the others and report it below.
            stop.store(true, Ordering::Relaxed);
        }
    }
    let (mut applied, mut refused) = (0, 0);
    for (id, w) in workers.into_iter().enumerate() {
        let (a, r) = w
            .join()
            .unwrap()
            .unwrap_or_else(|e| panic!("loadchunk connection {id}: {e}"));
        applied += a;
        refused += r;
    }
    let actions = control
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("persistence connection: {e}"));
    let bgsaves = bgsaves
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("BGSAVE connection: {e}"));
    // Every snapshot (BGSAVE, SAVE, DEBUG RELOAD, compaction) starts the next log generation.
    let generation = std::fs::read_dir(&data)
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_prefix("appendonly.")?
                .strip_suffix(".aof")?
                .parse::<u64>()
                .ok()
        })
        .max()
        .unwrap_or(0);
    eprintln!(
        "loadchunk stress: {applied} LOADCHUNKs applied, {refused} refused, {actions} \
         persistence actions, {bgsaves} more BGSAVEs, log generation {generation}, in {} s",
        load_seconds()
    );
    assert!(applied > 0 && actions > 0, "nothing was exercised");

    let mut c = Client::connect(port, Progress::new("check")).unwrap();
    let keys: Vec<String> = (0..WORKERS).map(|id| format!("big{id}")).collect();
    let before: Vec<Option<u64>> = keys.iter().map(|k| dump_hash(&mut c, k).unwrap()).collect();
    assert!(matches!(
        c.simple("DEBUG RELOAD").unwrap(),
        Reply::Simple(_)
    ));
    let after: Vec<Option<u64>> = keys.iter().map(|k| dump_hash(&mut c, k).unwrap()).collect();
    assert_eq!(before, after, "a key changed across DEBUG RELOAD");
    drop(server);
    // Hundreds of megabytes of snapshot and log: not left behind by a passing run.
    let _ = std::fs::remove_dir_all(&dir);
}
