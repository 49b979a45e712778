//! The reliability suite of the server: what only server processes (the test binary runs itself
//! as one, see `bloomgate_testkit::server`), real signals and a real full disk can show. kill -9
//! and SIGTERM loops under pipelined load (`always` and `everysec`: no acknowledged write lost,
//! no false negative), a full disk (MISCONF, reads keep working, no temp file left, recovery by
//! itself), the log corruption matrix against the binary (cuts at and inside records load the
//! whole records; damage refuses naming file and offset; `--repair-log`), a missing snapshot or
//! log part refused, client limits (maxclients, the open-file reserve, pre-AUTH limits) and the
//! protected-mode rules.
//!
//! Bounded short form by default; `BLOOMGATE_RELIABILITY_LONG=1` runs more rounds.
//! `BLOOMGATE_TEST_BIN=path` runs the suite against another build (e.g. an older release, to
//! see what it catches).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bloomgate_testkit::server::{refused, Server};
use bloomgate_testkit::{free_port, temp_dir};

/// The server child of these tests (see `bloomgate_testkit::server`).
#[test]
fn serve_child() {
    bloomgate_testkit::server::serve_child();
}

fn long() -> bool {
    std::env::var_os("BLOOMGATE_RELIABILITY_LONG").is_some_and(|v| v != "0")
}

/// Rounds of a loop: `short` normally, `long` with BLOOMGATE_RELIABILITY_LONG=1.
fn rounds(short: usize, long_rounds: usize) -> usize {
    if long() {
        long_rounds
    } else {
        short
    }
}

/// What load workers had acknowledged: items per key.
#[derive(Default)]
struct Acked {
    bloom: Vec<String>,
    cuckoo: Vec<String>,
}

/// Pipelined writers: each worker sends batches of BF.ADD and CF.ADD with unique items and
/// records a batch as acknowledged once every reply arrived. Runs until `stop` or an error.
fn load(
    server: &Server,
    workers: usize,
    tag: &str,
    acked: &Arc<Mutex<Acked>>,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..workers)
        .map(|w| {
            let (url, acked, stop) = (server.url(), acked.clone(), stop.clone());
            let tag = format!("{tag}-w{w}");
            std::thread::spawn(move || {
                let Ok(mut c) = redis::Client::open(url).unwrap().get_connection() else {
                    return;
                };
                for batch in 0..1_000_000 {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let items: Vec<String> =
                        (0..16).map(|i| format!("{tag}-{batch}-{i}")).collect();
                    let mut pipe = redis::pipe();
                    for item in &items {
                        pipe.cmd("BF.ADD").arg("bloom").arg(item);
                        pipe.cmd("CF.ADD").arg("cuckoo").arg(item);
                    }
                    if pipe.query::<Vec<i64>>(&mut c).is_err() {
                        return;
                    }
                    let mut a = acked.lock().unwrap();
                    a.bloom.extend(items.iter().cloned());
                    a.cuckoo.extend(items);
                }
            })
        })
        .collect()
}

/// How many of `items` are missing at `key` (BF.MEXISTS / CF.MEXISTS).
fn missing(c: &mut redis::Connection, command: &str, key: &str, items: &[String]) -> usize {
    items
        .chunks(5_000)
        .map(|chunk| {
            let found: Vec<i64> = redis::cmd(command).arg(key).arg(chunk).query(c).unwrap();
            found.iter().filter(|&&f| f == 0).count()
        })
        .sum()
}

fn assert_nothing_lost(server: &Server, acked: &Acked, what: &str) {
    let mut c = server.conn();
    let lost_b = missing(&mut c, "BF.MEXISTS", "bloom", &acked.bloom);
    let lost_c = missing(&mut c, "CF.MEXISTS", "cuckoo", &acked.cuckoo);
    assert_eq!(
        (lost_b, lost_c),
        (0, 0),
        "{what}: acknowledged writes lost (bloom {lost_b} of {}, cuckoo {lost_c} of {})",
        acked.bloom.len(),
        acked.cuckoo.len()
    );
}

/// Runs load, then ends the server with `end` after a varying delay, restarts, and checks every
/// acknowledged item of every round so far.
fn crash_loop(name: &str, policy: &str, rounds: usize, end: fn(Server)) {
    let dir = temp_dir(name);
    let acked = Arc::new(Mutex::new(Acked::default()));
    for round in 0..rounds {
        let server = Server::process(&dir, &["--appendfsync", policy]);
        let stop = Arc::new(AtomicBool::new(false));
        let workers = load(&server, 3, &format!("r{round}"), &acked, &stop);
        std::thread::sleep(Duration::from_millis(150 + 97 * (round as u64 % 5)));
        end(server);
        stop.store(true, Ordering::Relaxed);
        for w in workers {
            w.join().unwrap();
        }
        let server = Server::process(&dir, &["--appendfsync", policy]);
        assert_nothing_lost(
            &server,
            &acked.lock().unwrap(),
            &format!("{name} round {round}"),
        );
        server.kill9();
    }
    let total = acked.lock().unwrap().bloom.len();
    assert!(
        total > 1_000,
        "only {total} writes acknowledged in {rounds} rounds"
    );
    eprintln!("{name}: {rounds} rounds, {total} acknowledged items per filter, 0 lost");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kill9_under_load_loses_nothing_acknowledged_always() {
    crash_loop("kill9-always", "always", rounds(3, 20), Server::kill9);
}

/// Under `everysec` the log is written to the OS before the reply, so a process crash loses
/// nothing acknowledged (only an OS crash could lose up to a second).
#[test]
fn kill9_under_load_loses_nothing_acknowledged_everysec() {
    crash_loop("kill9-everysec", "everysec", rounds(8, 30), Server::kill9);
}

/// SIGTERM under load: the server stops accepting, refuses commands not yet started, fsyncs the
/// log, snapshots and exits 0; every acknowledged write is there after the restart.
#[test]
fn sigterm_under_load_loses_nothing_and_exits_cleanly() {
    crash_loop("sigterm", "everysec", rounds(3, 12), |server| {
        let status = server.sigterm();
        assert!(status.success(), "exit after SIGTERM: {status:?}");
    });
}

/// Mounts a tmpfs of `size` at `dir`; false (after `skip_or_fail`: a failure under CI) where
/// that is impossible.
fn mount_tmpfs(dir: &Path, size: &str) -> bool {
    let ok = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size},mode=0700"),
            "tmpfs",
        ])
        .arg(dir)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        bloomgate_testkit::skip_or_fail(
            "the full-disk test",
            "it needs `mount -t tmpfs` (root); the disk-full behaviour was NOT tested",
        );
    }
    ok
}

/// Fills the file system holding `path` (a ballast file) until it refuses more.
fn fill_disk(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0x55u8; 16 * 1024];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
}

fn info_field(c: &mut redis::Connection, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Polls `f` every 50 ms for up to `secs` seconds.
fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn full_disk(policy: &str) {
    let dir = temp_dir(&format!("full-{policy}"));
    if !mount_tmpfs(&dir, "2m") {
        return;
    }
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let result = std::panic::catch_unwind(|| {
        let server = Server::process(&data, &["--appendfsync", policy]);
        let mut c = server.conn();
        let mut acked: Vec<String> = Vec::new();
        let big = "x".repeat(2_000);
        for i in 0..20 {
            let item = format!("before-{i}-{big}");
            let _: i64 = redis::cmd("BF.ADD")
                .arg("f")
                .arg(&item)
                .query(&mut c)
                .unwrap();
            acked.push(item);
        }
        fill_disk(&dir.join("ballast"));
        // Writes go on until the log's last page is full too: then a write that cannot be
        // logged is held (never acknowledged while unlogged), and later ones get MISCONF.
        let mut held: Vec<(TcpStream, String)> = Vec::new();
        let mut misconf = false;
        let deadline = Instant::now() + Duration::from_secs(20);
        for i in 0.. {
            if misconf || Instant::now() > deadline {
                break;
            }
            let item = format!("fill-{i}-{big}");
            let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            s.write_all(&resp(&["BF.ADD", "f", &item])).unwrap();
            let mut reply = [0u8; 256];
            match s.read(&mut reply) {
                Ok(n) if reply[..n].starts_with(b":1") => acked.push(item),
                Ok(n) => {
                    misconf = reply[..n].starts_with(b"-MISCONF");
                    assert!(misconf, "{}", String::from_utf8_lossy(&reply[..n]));
                }
                Err(_) => held.push((s, item)),
            }
        }
        assert!(misconf, "writes were not refused on a full disk");
        assert!(!held.is_empty(), "no write was waiting for the log");
        let exists: i64 = redis::cmd("BF.EXISTS")
            .arg("f")
            .arg(&acked[0])
            .query(&mut c)
            .unwrap();
        assert_eq!(exists, 1);
        for (s, _) in &mut held {
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            assert!(
                s.read(&mut [0u8; 16]).is_err(),
                "a write was acknowledged without being logged"
            );
        }
        // A snapshot fails cleanly and leaves no temp file behind.
        let _: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
        assert!(eventually(10, || info_field(
            &mut c,
            "rdb_last_bgsave_status"
        ) == "err"));
        assert!(
            !data.join("dump.bgs.tmp").exists(),
            "temp snapshot left behind"
        );
        // Space returns: the held writes are logged and acknowledged, writes are accepted again.
        std::fs::remove_file(dir.join("ballast")).unwrap();
        for (mut s, item) in held {
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut reply = [0u8; 16];
            let n = s.read(&mut reply).unwrap();
            assert_eq!(&reply[..n], b":1\r\n");
            acked.push(item);
        }
        assert!(
            eventually(15, || redis::cmd("BF.ADD")
                .arg("f")
                .arg("after")
                .query::<i64>(&mut c)
                .is_ok()),
            "writes were not accepted again after space returned"
        );
        acked.push("after".into());
        let status = server.sigterm();
        assert!(status.success(), "{status:?}");
        let server = Server::process(&data, &[]);
        let mut c = server.conn();
        assert_eq!(missing(&mut c, "BF.MEXISTS", "f", &acked), 0);
        server.kill9();
    });
    let _ = Command::new("umount").arg(&dir).status();
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn full_disk_misconf_and_recovery_everysec() {
    full_disk("everysec");
}

#[test]
fn full_disk_misconf_and_recovery_always() {
    full_disk("always");
}

/// Record start offsets of a log file (12-byte headers, little-endian length first).
fn record_starts(log: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut at = 16;
    while at + 12 <= log.len() {
        starts.push(at);
        let len = u32::from_le_bytes(log[at..at + 4].try_into().unwrap()) as usize;
        at += 12 + len;
    }
    assert_eq!(at, log.len());
    starts
}

fn bf_items(server: &Server) -> i64 {
    let mut c = server.conn();
    match redis::cmd("BF.CARD").arg("k").query::<i64>(&mut c) {
        Ok(n) => n,
        Err(e) => panic!("{e}"),
    }
}

/// The corruption matrix against the binary: a cut at every record boundary and inside every
/// record starts with exactly the whole records before it; a flipped bit in a record's header,
/// length or body refuses to start naming the file and the record's offset; `--repair-log`
/// keeps a copy and starts with the records before the damage.
#[test]
fn log_corruption_matrix() {
    let dir = temp_dir("matrix");
    let records = rounds(6, 25);
    let server = Server::process(&dir, &["--appendfsync", "always"]);
    let mut c = server.conn();
    for i in 0..records {
        let _: i64 = redis::cmd("BF.ADD").arg("k").arg(i).query(&mut c).unwrap();
    }
    server.kill9();
    let log_path = dir.join("appendonly.1.aof");
    let log = std::fs::read(&log_path).unwrap();
    let starts = record_starts(&log);
    assert_eq!(starts.len(), records);
    let mut ends = starts[1..].to_vec();
    ends.push(log.len());
    // Cuts at every boundary and in the middle of every record.
    for (i, (&start, &end)) in starts.iter().zip(&ends).enumerate() {
        for cut in [start, start + 5, (start + end) / 2, end - 1] {
            std::fs::write(&log_path, &log[..cut]).unwrap();
            let server = Server::process(&dir, &[]);
            assert_eq!(bf_items(&server), i as i64, "cut at {cut}");
            server.kill9();
            assert_eq!(std::fs::metadata(&log_path).unwrap().len(), start as u64);
        }
    }
    // Flips in the header checksum, the length, and the body of each record.
    for (&start, &end) in starts.iter().zip(&ends) {
        for at in [start + 1, start + 5, start + 9, end - 3] {
            let mut bad = log.clone();
            bad[at] ^= 0x10;
            std::fs::write(&log_path, &bad).unwrap();
            let stderr = refused(&dir, &[]);
            assert!(
                stderr.contains("appendonly.1.aof") && stderr.contains(&format!("offset {start}")),
                "flip at {at}: {stderr}"
            );
            assert_eq!(
                std::fs::read(&log_path).unwrap(),
                bad,
                "refused log was changed"
            );
        }
    }
    // --repair-log: keeps a copy, truncates at the damaged record.
    let damaged = starts[records / 2];
    let mut bad = log.clone();
    bad[damaged + 1] ^= 0x01;
    std::fs::write(&log_path, &bad).unwrap();
    let server = Server::process(&dir, &["--repair-log"]);
    assert_eq!(bf_items(&server), (records / 2) as i64);
    server.kill9();
    let copies = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".corrupt-")
        })
        .count();
    assert_eq!(copies, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A deleted snapshot or newest log is refused (the manifest lists them), not loaded as less.
#[test]
fn missing_snapshot_or_log_refused() {
    let dir = temp_dir("manifest");
    let server = Server::process(&dir, &["--appendfsync", "always"]);
    let mut c = server.conn();
    for i in 0..50 {
        let _: i64 = redis::cmd("BF.ADD").arg("k").arg(i).query(&mut c).unwrap();
    }
    let _: String = redis::cmd("SAVE").query(&mut c).unwrap();
    for i in 50..80 {
        let _: i64 = redis::cmd("BF.ADD").arg("k").arg(i).query(&mut c).unwrap();
    }
    server.kill9();
    let snapshot = dir.join("dump.bgs");
    std::fs::rename(&snapshot, dir.join("moved")).unwrap();
    let stderr = refused(&dir, &[]);
    assert!(stderr.contains("dump.bgs is missing"), "{stderr}");
    std::fs::rename(dir.join("moved"), &snapshot).unwrap();
    let newest = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "aof"))
        .max()
        .unwrap();
    std::fs::rename(&newest, dir.join("moved")).unwrap();
    let stderr = refused(&dir, &[]);
    assert!(stderr.contains("is missing"), "{stderr}");
    std::fs::rename(dir.join("moved"), &newest).unwrap();
    let server = Server::process(&dir, &[]);
    assert_eq!(bf_items(&server), 80);
    // Data files are private to the server's user.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{:?}", entry.file_name());
    }
    server.kill9();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A command in RESP.
fn resp(args: &[&str]) -> Vec<u8> {
    bloomgate_testkit::resp_command(args)
}

fn raw(port: u16, request: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// Before AUTH: at most 10 arguments and 16 KiB per bulk; maxclients; the open-file reserve
/// keeps snapshots working with every client slot taken.
#[test]
fn client_limits_and_pre_auth_limits() {
    let dir = temp_dir("limits");
    let server = Server::process(&dir, &["--requirepass", "pw", "--maxclients", "4"]);
    let big = format!("*2\r\n$4\r\nAUTH\r\n${}\r\n", 1 << 20);
    assert_eq!(
        raw(server.port, big.as_bytes()),
        b"-ERR Protocol error: unauthenticated bulk length\r\n"
    );
    assert_eq!(
        raw(server.port, b"*11\r\n"),
        b"-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
    assert_eq!(
        raw(server.port, b"*1\r\n$4\r\nPINGxx"),
        b"-ERR Protocol error: expected CRLF after bulk string\r\n"
    );
    std::thread::sleep(Duration::from_millis(300));
    let mut clients: Vec<_> = (0..4).map(|_| server.conn()).collect();
    for c in &mut clients {
        let _: String = redis::cmd("PING").query(c).unwrap();
    }
    assert_eq!(
        raw(server.port, b"PING\r\n"),
        b"-ERR max number of clients reached\r\n"
    );
    drop(clients);
    assert!(eventually(5, || server.try_conn().is_some_and(|mut c| {
        redis::cmd("PING").query::<String>(&mut c).is_ok()
    })));
    server.kill9();

    // With 64 file descriptors, 32 are kept for persistence: clients beyond the rest are
    // refused (not left to exhaust the descriptors) and a snapshot still opens its files.
    let server = Server::process_under(&["prlimit", "--nofile=64:64"], &dir, &[]);
    let mut c = server.conn();
    let mut held = Vec::new();
    let mut refused_at = None;
    for i in 0..60 {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        s.write_all(b"PING\r\n").unwrap();
        let mut reply = [0u8; 64];
        let n = s.read(&mut reply).unwrap_or(0);
        if reply[..n].starts_with(b"-ERR max number of clients reached") {
            refused_at = Some(i);
            break;
        }
        assert_eq!(&reply[..n], b"+PONG\r\n");
        held.push(s);
    }
    assert!(
        refused_at.is_some(),
        "no client refused under a 64-descriptor limit"
    );
    let _: i64 = redis::cmd("BF.ADD")
        .arg("k")
        .arg("x")
        .query(&mut c)
        .unwrap();
    let _: String = redis::cmd("SAVE").query(&mut c).unwrap();
    drop(held);
    server.kill9();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Protected mode: on a non-loopback bind the password cannot be removed at runtime; the
/// metrics endpoint stays on loopback unless opted out; the password can come from a file.
#[test]
fn protected_mode_rules() {
    let dir = temp_dir("protected");
    let pass_file = dir.join("pass");
    std::fs::write(&pass_file, "from-file\n").unwrap();
    let server = Server::start(
        &dir.join("data"),
        &[
            "--bind",
            "0.0.0.0",
            "--requirepass-file",
            pass_file.to_str().unwrap(),
        ],
    );
    let url = format!("redis://:from-file@127.0.0.1:{}/", server.port);
    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("")
        .query::<String>(&mut c)
        .unwrap_err();
    assert!(format!("{err}").contains("protected mode"), "{err}");
    drop(server);
    let stderr = refused(
        &dir.join("data2"),
        &["--metrics-addr", &format!("0.0.0.0:{}", free_port())],
    );
    assert!(stderr.contains("metrics"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
