//! Shared test helpers: a throwaway SQLite store and a redis-server on a free local port.
#![allow(dead_code)] // each test binary uses a subset of the helpers

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bloomgate_gate::SqliteStore;

pub fn sqlite_store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path().join("seen.db")).expect("open sqlite");
    (dir, store)
}

/// A redis-server child bound to 127.0.0.1 on a free port, killed on drop.
pub struct RedisServer {
    child: Child,
    pub url: String,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts Debian's redis-server, or returns None (with a message) if it is not installed.
pub fn start_redis() -> Option<RedisServer> {
    let installed = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok();
    if !installed {
        eprintln!("SKIPPED: redis-server is not installed (apt-get install -y redis-server)");
        return None;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("free port")
        .local_addr()
        .expect("addr")
        .port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn redis-server");
    let server = RedisServer {
        child,
        url: format!("redis://127.0.0.1:{port}"),
    };
    let client = redis::Client::open(server.url.as_str()).expect("client");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut conn) = client.get_connection() {
            if redis::cmd("PING").query::<String>(&mut conn).is_ok() {
                return Some(server);
            }
        }
        assert!(
            Instant::now() < deadline,
            "redis-server did not come up on port {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
