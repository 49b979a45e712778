//! Runs Debian's `redis-server` with the module built by this workspace, on a free loopback
//! port, for the module's integration tests.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A scratch directory unique to this test process.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bloomgate-module-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The module shared object: `BLOOMGATE_MODULE` if set, else `libbloomgate_module.so` of the
/// profile directory this test binary was built into (cargo builds the cdylib with the tests).
pub fn module_path() -> PathBuf {
    if let Ok(path) = std::env::var("BLOOMGATE_MODULE") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let so = profile_dir.join("libbloomgate_module.so");
    assert!(
        so.exists(),
        "{} is missing: run `cargo build -p bloomgate-module` first",
        so.display()
    );
    so
}

/// Whether `redis-server` can be run; if not, says loudly that the test is skipped.
pub fn have_redis(test: &str) -> bool {
    let ok = Command::new("redis-server")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED {test}: redis-server is not installed (bash .ci/setup installs it)");
    }
    ok
}

/// A redis-server with the module loaded.
pub struct Redis {
    child: Child,
    pub port: u16,
}

impl Redis {
    /// Starts redis-server on `dir` with the module (and `module_args` after it) plus `extra`
    /// server options, and waits until it answers PING (RDB loaded).
    pub fn start(dir: &Path, module_args: &[&str], extra: &[&str]) -> Redis {
        Self::try_start(dir, module_args, extra)
            .expect("redis-server with the module did not start")
    }

    /// Like [`Redis::start`], but returns the server's log if it exits instead.
    pub fn try_start(dir: &Path, module_args: &[&str], extra: &[&str]) -> Result<Redis, String> {
        let module = module_path();
        let mut last_log = String::new();
        for _ in 0..5 {
            let port = free_port();
            let log = dir.join(format!("redis-{port}.log"));
            let mut child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                ])
                .args(["--appendonly", "no", "--enable-debug-command", "yes"])
                .arg("--dir")
                .arg(dir)
                .arg("--logfile")
                .arg(&log)
                .arg("--loadmodule")
                .arg(&module)
                .args(module_args)
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server runs");
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                if ping(port) {
                    return Ok(Redis { child, port });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            last_log = std::fs::read_to_string(&log).unwrap_or_default();
            if !last_log.contains("Address already in use") {
                break;
            }
        }
        Err(last_log)
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// SHUTDOWN (with the server's own save policy) and wait for the process to exit.
    pub fn shutdown(mut self, save: bool) {
        let _ = redis::cmd("SHUTDOWN")
            .arg(if save { "SAVE" } else { "NOSAVE" })
            .exec(&mut self.conn());
        let _ = self.child.wait();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the server on `port` answers PONG (not -LOADING).
fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.write_all(b"PING\r\n");
    let _ = s.shutdown(std::net::Shutdown::Write);
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    reply.ends_with(b"+PONG\r\n")
}
