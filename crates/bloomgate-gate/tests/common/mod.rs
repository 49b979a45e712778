//! Shared test helpers: a throwaway SQLite store and a redis-server on a free local port.
#![allow(dead_code)] // each test binary uses a subset of the helpers

use bloomgate_gate::SqliteStore;

pub fn sqlite_store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path().join("seen.db")).expect("open sqlite");
    (dir, store)
}

/// A redis-server child bound to 127.0.0.1 on a free port, killed on drop (then its
/// directory removed).
pub struct RedisServer {
    _process: bloomgate_testkit::Process,
    _dir: tempfile::TempDir,
    pub url: String,
}

/// Starts Debian's redis-server, or returns None (with a message) if it is not installed.
pub fn start_redis(test: &str) -> Option<RedisServer> {
    if !bloomgate_testkit::have_redis_server(test) {
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let process = bloomgate_testkit::redis_server(dir.path(), |_| {})
        .unwrap_or_else(|log| panic!("redis-server did not start: {log}"));
    Some(RedisServer {
        url: format!("redis://127.0.0.1:{}", process.port),
        _process: process,
        _dir: dir,
    })
}
