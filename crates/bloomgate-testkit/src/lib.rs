//! Test-only helpers shared by the integration tests of several crates (a dev-dependency, never
//! published): start a server process on a free 127.0.0.1 port, wait until it answers PING
//! (i.e. it finished loading), kill it on drop; start Debian's `redis-server` that way; a proxy
//! that can freeze to look like a hung server; scratch directories. The core speaks raw RESP for
//! the PING so that it needs no `redis` crate (the crates using it are on different major
//! versions of it); features add what needs more: `replies` (the BF/CF reply conformance suite,
//! `replies`, and the RedisBloom RDB fixture's checks, `rdb_fixture`), `server` (`bloomgate
//! serve` in-process or as a process, `server`), `postgres` (a throwaway PostgreSQL server,
//! `postgres`), `gate` (a hooked exact store and the never-shown-again check's request, `gate`),
//! `fuzz-core` / `fuzz-dialect` / `fuzz-server` (the fuzz targets' checks, `fuzz`),
//! `valkey-fixture` (valkey-bloom's RDB fixture and each key's answers, `valkey_fixture`).

#![deny(missing_docs)]

#[cfg(feature = "replies")]
pub mod cap_replies;
#[cfg(any(
    feature = "fuzz-core",
    feature = "fuzz-dialect",
    feature = "fuzz-server"
))]
pub mod fuzz;
#[cfg(feature = "gate")]
pub mod gate;
#[cfg(feature = "replies")]
pub mod merge_replies;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "replies")]
pub mod rdb_fixture;
#[cfg(feature = "replies")]
pub mod replies;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "valkey-fixture")]
pub mod valkey_fixture;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// One command as a RESP array of bulk strings (what a client sends).
pub fn resp_command<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A fresh, empty scratch directory unique to this test process.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bloomgate-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A loopback port that was free a moment ago (another process may take it before the server
/// binds it: [`Process::start`] retries).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether the server on `port` answers `+PONG` to PING (not `-LOADING`, not an error), after
/// `AUTH password` when one is given.
pub fn ping(port: u16, password: Option<&str>) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let auth = password.map_or(String::new(), |p| format!("AUTH {p}\r\n"));
    let _ = s.write_all(format!("{auth}PING\r\n").as_bytes());
    let _ = s.shutdown(Shutdown::Write);
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    reply.ends_with(b"+PONG\r\n")
}

/// A server child process listening on `port` of 127.0.0.1, killed (SIGKILL) on drop.
pub struct Process {
    child: Child,
    /// The port it listens on.
    pub port: u16,
}

impl Process {
    /// Spawns `command(port)` (stdout and stderr discarded) on a free port and waits up to
    /// `timeout` until it answers PING (with `password`). A child that exits or never answers
    /// is killed, and `retry(port)` says whether to try again on another port (at most five
    /// tries: the port can be taken between [`free_port`] and the server's bind).
    pub fn start(
        mut command: impl FnMut(u16) -> Command,
        password: Option<&str>,
        timeout: Duration,
        mut retry: impl FnMut(u16) -> bool,
    ) -> Option<Process> {
        for _ in 0..5 {
            let port = free_port();
            let mut child = command(port)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("spawning the server: {e}"));
            let deadline = Instant::now() + timeout;
            while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
                if ping(port, password) {
                    return Some(Process { child, port });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            if !retry(port) {
                break;
            }
        }
        None
    }

    /// The process id (e.g. for `kill -TERM`).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and wait for the exit.
    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Waits for the process to exit by itself.
    pub fn wait(&mut self) -> ExitStatus {
        self.child.wait().unwrap()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server binary tests run: `$BLOOMGATE_REDIS_SERVER` (e.g. `valkey-server`, which takes
/// the same options), else Debian's `redis-server`.
pub fn redis_server_binary() -> String {
    std::env::var("BLOOMGATE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned())
}

/// The environment variable `.ci/run` sets to `1`: a test that cannot run here (a program it
/// needs is missing, it needs root) fails instead of skipping ([`skip_or_fail`]).
pub const NO_SKIP: &str = "BLOOMGATE_NO_SKIP";

/// The environment variable naming a file every skip is recorded in, one line each (`.ci/run`
/// counts them, with libtest's ignored tests, and fails on any).
pub const SKIP_LOG: &str = "BLOOMGATE_SKIP_LOG";

/// The one way a test gives up because something it needs is not here (`why`: what is missing
/// and what installs it). Under `BLOOMGATE_NO_SKIP=1` (CI) it panics, failing `test`; elsewhere
/// it prints a `SKIPPED` note (which libtest shows only for failing tests) and records the skip
/// in `$BLOOMGATE_SKIP_LOG` when that is set; the caller then returns without testing anything.
/// `scripts/lib/bgtest.py`'s `skip_or_fail` is its twin for the scripts.
pub fn skip_or_fail(test: &str, why: &str) {
    let note = format!("SKIPPED {test}: {why}");
    if std::env::var(NO_SKIP).is_ok_and(|v| v == "1") {
        panic!("{note}; {NO_SKIP}=1 (CI) requires this test to run");
    }
    eprintln!("{note}");
    if let Some(path) = std::env::var_os(SKIP_LOG) {
        let recorded = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut log| log.write_all(format!("{note}\n").as_bytes()));
        if let Err(e) = recorded {
            panic!("{note}; recording it in {SKIP_LOG} failed: {e}");
        }
    }
}

/// Whether the server binary can be run; if not, [`skip_or_fail`] for `test`.
pub fn have_redis_server(test: &str) -> bool {
    let binary = redis_server_binary();
    let ok = Command::new(&binary)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip_or_fail(
            test,
            &format!("{binary} is not installed (bash .ci/setup installs it)"),
        );
    }
    ok
}

/// Starts Debian's `redis-server` (or [`redis_server_binary`]) on a free port bound to 127.0.0.1 with `dir` as its working
/// directory (log in `redis-PORT.log` there), no snapshots and no AOF, then the options that
/// `configure` adds (later options win), and waits up to 60 s until it answers PING (its data is
/// loaded). A server that exits is retried on another port only when its log says the port was
/// taken; otherwise the error is its log.
pub fn redis_server(dir: &Path, configure: impl Fn(&mut Command)) -> Result<Process, String> {
    redis_server_at(&redis_server_binary(), dir, configure)
}

/// [`redis_server`] with another server binary (e.g. [`redis8_server_binary`]'s).
pub fn redis_server_at(
    binary: &str,
    dir: &Path,
    configure: impl Fn(&mut Command),
) -> Result<Process, String> {
    let log_of = |port: u16| dir.join(format!("redis-{port}.log"));
    let mut last_log = String::new();
    let command = |port: u16| {
        let mut c = Command::new(binary);
        c.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(dir)
            .arg("--logfile")
            .arg(log_of(port));
        configure(&mut c);
        c
    };
    let retry = |port: u16| {
        last_log = std::fs::read_to_string(log_of(port)).unwrap_or_default();
        last_log.contains("Address already in use")
    };
    Process::start(command, None, Duration::from_secs(60), retry).ok_or(last_log)
}

/// A Redis 8 `redis-server` for tests that compare with Redis 8 itself (Debian's is 7.0):
/// `$BLOOMGATE_REDIS8_SERVER`, else `redis8/redis-server` in the target directory or the
/// workspace's `target/` (where `scripts/ci/get_redis8.sh` puts it), else
/// `$BLOOMGATE_REDIS_SERVER` when that is Redis 8.
/// When there is none it calls [`skip_or_fail`] for `test` and returns `None`.
pub fn redis8_server_binary(test: &str) -> Option<String> {
    let in_target = |dir: PathBuf| Some(dir.join("redis8/redis-server").display().to_string());
    let candidates = [
        std::env::var("BLOOMGATE_REDIS8_SERVER").ok(),
        std::env::var_os("CARGO_TARGET_DIR").and_then(|t| in_target(t.into())),
        // target/debug/deps/<test binary>
        std::env::current_exe()
            .ok()
            .and_then(|exe| in_target(exe.parent()?.parent()?.parent()?.to_path_buf())),
        // The workspace's own target/, where get_redis8.sh puts it by default.
        std::env::var_os("CARGO_MANIFEST_DIR")
            .and_then(|m| in_target(PathBuf::from(m).join("../../target"))),
        std::env::var("BLOOMGATE_REDIS_SERVER").ok(),
    ];
    let is_redis8 = |binary: &String| {
        Command::new(binary)
            .arg("--version")
            .output()
            .is_ok_and(|o| {
                o.status.success() && String::from_utf8_lossy(&o.stdout).contains("v=8.")
            })
    };
    let found = candidates.into_iter().flatten().find(is_redis8);
    if found.is_none() {
        skip_or_fail(
            test,
            "no Redis 8 redis-server (bash scripts/ci/get_redis8.sh fetches it, or set \
             BLOOMGATE_REDIS8_SERVER)",
        );
    }
    found
}

/// A TCP proxy on a free 127.0.0.1 port in front of `target` that can be frozen: while frozen
/// it accepts connections and reads nothing, forwards nothing, so the client sees a server that
/// hangs (open connections, no replies) — a stopped Redis without stopping one. Its threads stop
/// when the proxy is dropped (an accept in progress is woken by a last connection).
pub struct FreezableProxy {
    /// The port clients connect to.
    pub port: u16,
    frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl FreezableProxy {
    /// Starts forwarding to `target` (`127.0.0.1:PORT`).
    pub fn start(target: std::net::SocketAddr) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let frozen = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (frozen_in, stop_in) = (frozen.clone(), stop.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop_in.load(Ordering::Acquire) {
                    return;
                }
                let (Ok(client), Ok(server)) = (client, TcpStream::connect(target)) else {
                    continue;
                };
                for (from, to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let (frozen, stop) = (frozen_in.clone(), stop_in.clone());
                    std::thread::spawn(move || pump(from, to, &frozen, &stop));
                }
            }
        });
        FreezableProxy { port, frozen, stop }
    }

    /// Stops (`true`) or resumes (`false`) all traffic, on open and new connections alike.
    pub fn freeze(&self, frozen: bool) {
        self.frozen
            .store(frozen, std::sync::atomic::Ordering::Release);
    }
}

fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    frozen: &std::sync::atomic::AtomicBool,
    stop: &std::sync::atomic::AtomicBool,
) {
    use std::sync::atomic::Ordering;
    let _ = from.set_read_timeout(Some(Duration::from_millis(20)));
    let mut buf = [0u8; 16 << 10];
    while !stop.load(Ordering::Acquire) {
        if frozen.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                // Read just as the proxy froze: hold the bytes until it thaws.
                while frozen.load(Ordering::Acquire) && !stop.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(Shutdown::Both);
}

impl Drop for FreezableProxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Runs a command to completion and insists that it succeeded, showing its standard error if it
/// did not: the one way the binaries' tests run a command they expect to work.
pub trait Succeed {
    /// The command's output, after asserting that it exited with success.
    fn succeed(&mut self) -> std::process::Output;
}

impl Succeed for Command {
    fn succeed(&mut self) -> std::process::Output {
        let out = self.output().expect("the command starts");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}
