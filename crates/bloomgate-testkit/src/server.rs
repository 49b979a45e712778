//! `bloomgate serve` for tests, started the way a test needs it:
//!
//! - [`Server::start`]: in this process, on a thread of its own (`bloomgate_server::run` on a
//!   listener bound to 127.0.0.1 port 0) — fast, no binary needed, stopped on drop;
//! - [`Server::process`]: as a child process, for what only a process can show (kill -9, SIGTERM,
//!   an open-file limit): the test binary runs itself again with [`CHILD_ENV`] set, and its
//!   [`CHILD_TEST`] test (which calls [`serve_child`]) runs the server instead of testing.
//!   `BLOOMGATE_TEST_BIN=path` runs `path serve …` instead (another build, e.g. an older
//!   release, to see what a suite catches).
//!
//! Both take `bloomgate serve`'s flags (`--appendfsync always`, `--requirepass pw`, …), wait
//! until the server answers PING (its data is loaded) and hand out `redis` connections.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bloomgate_server::{FsyncPolicy, Options};

use crate::{ping, Process};

/// Set in a server child: its `bloomgate serve` flags, separated by the unit separator (U+001F).
pub const CHILD_ENV: &str = "BLOOMGATE_TEST_SERVE_CHILD";
/// The test a test binary runs a server child through: every test file that starts servers
/// with [`Server::process`] has `#[test] fn serve_child() { bloomgate_testkit::server::serve_child() }`.
pub const CHILD_TEST: &str = "serve_child";
/// Separates the flags in [`CHILD_ENV`].
const SEPARATOR: char = '\u{1f}';

/// How long a server may take to load before a test gives up.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// `bloomgate serve` flags (the long forms, as the CLI takes them) as server options.
pub fn options(flags: &[&str]) -> Options {
    let mut o = Options::default();
    let mut i = 0;
    while i < flags.len() {
        let flag = flags[i];
        let value = || {
            flags
                .get(i + 1)
                .map(|v| v.to_string())
                .unwrap_or_else(|| panic!("{flag} needs a value"))
        };
        let mut took_value = true;
        match flag {
            "--bind" => o.bind = Some(value()),
            "--port" => o.port = Some(value().parse().expect("a port")),
            "--dir" => o.dir = Some(PathBuf::from(value())),
            "--appendfsync" => {
                o.appendfsync = Some(FsyncPolicy::parse(&value()).expect("always|everysec|no"))
            }
            "--requirepass" => o.requirepass = Some(value()),
            "--requirepass-file" => o.requirepass_file = Some(PathBuf::from(value())),
            "--maxclients" => o.maxclients = Some(value().parse().expect("a number")),
            "--enable-debug-command" => o.enable_debug_command = Some(value()),
            "--maxmemory" => o.maxmemory = Some(value()),
            "--bloom-memory-usage-limit" => o.bloom_memory_usage_limit = Some(value()),
            "--metrics-addr" => o.metrics_addr = Some(value()),
            "--config" => o.config = Some(PathBuf::from(value())),
            "--gate-store" => o.gate_store = Some(value()),
            "--gate-policy" => o.gate_policy = Some(value()),
            "--gate-window" => o.gate_window = Some(value()),
            "--gate-memory" => o.gate_memory = Some(value()),
            "--repair-log" => {
                o.repair_log = true;
                took_value = false;
            }
            "--unprotected" => {
                o.unprotected = true;
                took_value = false;
            }
            other => panic!("unknown serve flag {other}"),
        }
        i += 1 + usize::from(took_value);
    }
    o
}

/// The password a client needs: `--requirepass`, or the first line of `--requirepass-file`.
fn password_of(flags: &[&str]) -> Option<String> {
    let value_of = |flag: &str| flags.iter().position(|a| *a == flag).map(|i| flags[i + 1]);
    value_of("--requirepass").map(str::to_string).or_else(|| {
        let file = std::fs::read_to_string(value_of("--requirepass-file")?).ok()?;
        Some(file.lines().next()?.to_string())
    })
}

/// `--dir DIR` followed by `extra`.
fn with_dir<'a>(dir: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut flags = vec!["--dir", dir.to_str().expect("a UTF-8 path")];
    flags.extend_from_slice(extra);
    flags
}

/// A server in this process: its thread, and the sender whose drop stops it.
struct Thread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Thread {
    /// Starts `bloomgate_server::run` on a loopback listener with `flags` (whatever `--bind`
    /// says, the socket is 127.0.0.1's). The error is the settings', if refused at once.
    fn spawn(flags: &[&str]) -> anyhow::Result<(Thread, u16)> {
        let mut settings = options(flags).resolve()?;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        settings.config.port = port;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let handle = std::thread::Builder::new()
            .name(format!("bloomgate-serve-{port}"))
            .spawn(move || {
                bloomgate_server::run(listener, settings, async move {
                    // A send or the sender's drop: either way, stop.
                    let _ = stopped.await;
                })
            })?;
        Ok((
            Thread {
                stop: Some(stop),
                handle: Some(handle),
            },
            port,
        ))
    }

    fn finished(&self) -> bool {
        self.handle.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Waits for the server's thread; its result.
    fn join(&mut self) -> anyhow::Result<()> {
        match self.handle.take() {
            Some(handle) => handle
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the server thread panicked"))),
            None => Ok(()),
        }
    }

    /// Asks the server to stop (a clean shutdown, with its final snapshot) and waits for it.
    fn stop(&mut self) -> anyhow::Result<()> {
        drop(self.stop.take());
        self.join()
    }
}

impl Drop for Thread {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

enum Kind {
    Thread(Thread),
    Process(Process),
}

/// A running `bloomgate serve` on 127.0.0.1, stopped on drop (a process is killed, a thread
/// shut down).
pub struct Server {
    kind: Kind,
    /// Its port.
    pub port: u16,
    password: Option<String>,
}

impl Server {
    /// Starts a server in this process on `dir` with `extra` flags and waits until it answers
    /// PING (loaded).
    pub fn start(dir: &Path, extra: &[&str]) -> Server {
        let flags = with_dir(dir, extra);
        let password = password_of(&flags);
        let (mut thread, port) = Thread::spawn(&flags).expect("server settings");
        let deadline = Instant::now() + START_TIMEOUT;
        while !ping(port, password.as_deref()) {
            if thread.finished() {
                panic!("the server stopped: {:#}", thread.join().err().unwrap());
            }
            assert!(Instant::now() < deadline, "the server did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        Server {
            kind: Kind::Thread(thread),
            port,
            password,
        }
    }

    /// Starts a server as a child process (see the module documentation).
    pub fn process(dir: &Path, extra: &[&str]) -> Server {
        Self::process_under(&[], dir, extra)
    }

    /// [`Server::process`] through `launcher` (e.g. `prlimit --nofile=64:64`, which execs it).
    pub fn process_under(launcher: &[&str], dir: &Path, extra: &[&str]) -> Server {
        Self::spawn(
            launcher,
            std::env::var("BLOOMGATE_TEST_BIN").ok(),
            dir,
            extra,
        )
    }

    /// `bin serve` (the `bloomgate` binary, for the CLI's own tests) as a child process.
    pub fn binary(bin: &str, dir: &Path, extra: &[&str]) -> Server {
        let bin = std::env::var("BLOOMGATE_TEST_BIN").unwrap_or_else(|_| bin.to_string());
        Self::spawn(&[], Some(bin), dir, extra)
    }

    fn spawn(launcher: &[&str], bin: Option<String>, dir: &Path, extra: &[&str]) -> Server {
        let flags = with_dir(dir, extra);
        let password = password_of(&flags);
        let command = |port: u16| {
            let port = port.to_string();
            let mut serve: Vec<&str> = vec!["--port", &port];
            serve.extend_from_slice(&flags);
            let (program, mut args) = match &bin {
                Some(bin) => (bin.clone(), vec!["serve".to_string()]),
                None => (
                    std::env::current_exe()
                        .expect("the test binary")
                        .to_string_lossy()
                        .into_owned(),
                    vec![CHILD_TEST.into(), "--exact".into(), "--nocapture".into()],
                ),
            };
            let mut c = match launcher.split_first() {
                Some((first, rest)) => {
                    let mut c = Command::new(first);
                    c.args(rest).arg(&program);
                    c
                }
                None => Command::new(&program),
            };
            if args[0] == "serve" {
                args.extend(serve.iter().map(|s| s.to_string()));
            } else {
                c.env(CHILD_ENV, serve.join(&SEPARATOR.to_string()));
            }
            c.args(args);
            c
        };
        let process = Process::start(command, password.as_deref(), START_TIMEOUT, |_| true)
            .expect("server did not start");
        Server {
            port: process.port,
            kind: Kind::Process(process),
            password,
        }
    }

    /// The process id of a server started as a process (e.g. for a thread dump); `None` for
    /// one in this process.
    pub fn pid(&self) -> Option<u32> {
        match &self.kind {
            Kind::Process(p) => Some(p.id()),
            Kind::Thread(_) => None,
        }
    }

    /// `redis://` URL, with the password if any.
    pub fn url(&self) -> String {
        match &self.password {
            Some(p) => format!("redis://:{p}@127.0.0.1:{}/", self.port),
            None => format!("redis://127.0.0.1:{}/", self.port),
        }
    }

    /// A connection, if one can be made.
    pub fn try_conn(&self) -> Option<redis::Connection> {
        redis::Client::open(self.url()).ok()?.get_connection().ok()
    }

    /// A connection.
    pub fn conn(&self) -> redis::Connection {
        self.try_conn().expect("connect")
    }

    fn process_mut(&mut self) -> &mut Process {
        match &mut self.kind {
            Kind::Process(p) => p,
            Kind::Thread(_) => panic!("start the server with Server::process to signal it"),
        }
    }

    /// SIGKILL (a process server only), and wait for the exit.
    pub fn kill9(mut self) {
        self.process_mut().kill9();
    }

    /// SIGTERM (a process server only); waits for the exit.
    pub fn sigterm(mut self) -> ExitStatus {
        let pid = self.process_mut().id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        self.process_mut().wait()
    }

    /// SHUTDOWN (final snapshot) and wait for a clean exit.
    pub fn shutdown(mut self) {
        let _ = redis::cmd("SHUTDOWN").exec(&mut self.conn());
        match &mut self.kind {
            Kind::Thread(thread) => thread.join().expect("a clean exit"),
            Kind::Process(process) => {
                let status = process.wait();
                assert!(status.success(), "{status:?}");
            }
        }
    }
}

/// Runs a server on `dir` with `extra` flags in this process; it must refuse to start (within
/// 30 s). Returns why, as `bloomgate serve` prints it.
pub fn refused(dir: &Path, extra: &[&str]) -> String {
    let flags = with_dir(dir, extra);
    let mut thread = match Thread::spawn(&flags) {
        Ok((thread, _)) => thread,
        Err(e) => return format!("{e:#}"),
    };
    let deadline = Instant::now() + START_TIMEOUT;
    while !thread.finished() {
        if Instant::now() > deadline {
            let _ = thread.stop();
            panic!("started but should have refused");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    match thread.join() {
        Ok(()) => panic!("exited cleanly but should have refused"),
        Err(e) => format!("{e:#}"),
    }
}

/// In a server child ([`CHILD_ENV`] set): runs `bloomgate serve` with the flags given there
/// until SIGTERM/SIGINT or SHUTDOWN, then exits the process as `bloomgate serve` would (0, or 1
/// with the error on stderr). Elsewhere: returns at once.
pub fn serve_child() {
    let Ok(flags) = std::env::var(CHILD_ENV) else {
        return;
    };
    let flags: Vec<&str> = flags.split(SEPARATOR).collect();
    let result = options(&flags).resolve().and_then(|settings| {
        let listener = bloomgate_server::bind(&settings)?;
        bloomgate_server::run(listener, settings, bloomgate_server::shutdown_signal())
    });
    match result {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("bloomgate: {e:#}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_become_options() {
        let o = options(&[
            "--dir",
            "d",
            "--appendfsync",
            "always",
            "--repair-log",
            "--port",
            "7",
        ]);
        assert_eq!(o.dir, Some(PathBuf::from("d")));
        assert_eq!(o.appendfsync, Some(FsyncPolicy::Always));
        assert!(o.repair_log && !o.unprotected);
        assert_eq!(o.port, Some(7));
    }
}
