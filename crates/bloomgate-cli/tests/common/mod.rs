//! Shared by the test binaries that need a real `bloomgate serve`: start it on a free loopback
//! port and wait until it has loaded, kill it on drop (the process handling is
//! `bloomgate-testkit`'s). `BLOOMGATE_TEST_BIN=path` runs the tests against another build of
//! the binary (e.g. an older release, to see what the reliability suite catches).
#![allow(dead_code)] // each test binary uses a subset of the helpers

use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use bloomgate_testkit::Process;
pub use bloomgate_testkit::{free_port, temp_dir};

/// The binary under test.
pub fn bin() -> String {
    std::env::var("BLOOMGATE_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_bloomgate").into())
}

/// A running `bloomgate serve`, killed on drop.
pub struct Server {
    process: Process,
    pub port: u16,
    password: Option<String>,
}

impl Server {
    /// Starts `bloomgate serve --dir DIR EXTRA...` and waits until it answers PING (loaded),
    /// authenticating with its `--requirepass` or `--requirepass-file` password.
    pub fn start(dir: &Path, extra: &[&str]) -> Server {
        Self::start_under(&[], dir, extra)
    }

    /// Starts the server through `launcher` (e.g. `prlimit --nofile=64:64`, which execs it).
    pub fn start_under(launcher: &[&str], dir: &Path, extra: &[&str]) -> Server {
        let value_of = |flag: &str| extra.iter().position(|a| *a == flag).map(|i| extra[i + 1]);
        let password = value_of("--requirepass").map(str::to_string).or_else(|| {
            let file = std::fs::read_to_string(value_of("--requirepass-file")?).ok()?;
            Some(file.lines().next()?.to_string())
        });
        let command = |port: u16| {
            let bin = bin();
            let mut c = match launcher.split_first() {
                Some((program, args)) => {
                    let mut c = Command::new(program);
                    c.args(args).arg(&bin);
                    c
                }
                None => Command::new(&bin),
            };
            c.args(["serve", "--port", &port.to_string(), "--dir"])
                .arg(dir)
                .args(extra);
            c
        };
        let process = Process::start(
            command,
            password.as_deref(),
            Duration::from_secs(30),
            |_| true,
        )
        .expect("server did not start");
        Server {
            port: process.port,
            process,
            password,
        }
    }

    pub fn url(&self) -> String {
        match &self.password {
            Some(p) => format!("redis://:{p}@127.0.0.1:{}/", self.port),
            None => format!("redis://127.0.0.1:{}/", self.port),
        }
    }

    pub fn try_conn(&self) -> Option<redis::Connection> {
        redis::Client::open(self.url()).ok()?.get_connection().ok()
    }

    pub fn conn(&self) -> redis::Connection {
        self.try_conn().expect("connect")
    }

    pub fn kill9(mut self) {
        self.process.kill9();
    }

    /// SIGTERM; waits for the exit.
    pub fn sigterm(mut self) -> ExitStatus {
        let pid = self.process.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        self.process.wait()
    }

    /// SHUTDOWN (final snapshot) and wait for a clean exit.
    pub fn shutdown(mut self) {
        let _ = redis::cmd("SHUTDOWN").exec(&mut self.conn());
        let status = self.process.wait();
        assert!(status.success(), "{status:?}");
    }
}

/// Runs `serve` on `dir` with `extra`; it must refuse to start (within 30 s). Returns its
/// stderr.
pub fn refused(dir: &Path, extra: &[&str]) -> String {
    let mut child = Command::new(bin())
        .args(["serve", "--port", &free_port().to_string(), "--dir"])
        .arg(dir)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("started but should have refused");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "exited 0 but should have refused");
    String::from_utf8_lossy(&out.stderr).into_owned()
}
