//! Runs Debian's `redis-server` with the module built by this workspace, on a free loopback
//! port, for the module's integration tests (the process handling is `bloomgate-testkit`'s).

use std::path::{Path, PathBuf};

pub use bloomgate_testkit::{have_redis_server as have_redis, temp_dir};

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

/// The tests expect RedisBloom's dialect, which is not the default inside Valkey: the load
/// arguments `DIALECT redisbloom`, unless `module_args` name a dialect themselves.
pub fn dialect_args(module_args: &[&str]) -> &'static [&'static str] {
    if module_args
        .iter()
        .any(|a| a.eq_ignore_ascii_case("DIALECT"))
    {
        &[]
    } else {
        &["DIALECT", "redisbloom"]
    }
}

/// A redis-server with the module loaded, killed on drop.
pub struct Redis {
    process: bloomgate_testkit::Process,
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
        Self::try_start_at(
            &bloomgate_testkit::redis_server_binary(),
            dir,
            module_args,
            extra,
        )
    }

    /// Like [`Redis::try_start`], with another server binary (a test that needs Redis 8 itself
    /// passes `bloomgate_testkit::redis8_server_binary`'s).
    #[allow(dead_code)] // not every test binary sharing this file uses it
    pub fn try_start_at(
        binary: &str,
        dir: &Path,
        module_args: &[&str],
        extra: &[&str],
    ) -> Result<Redis, String> {
        let module = module_path();
        let process = bloomgate_testkit::redis_server_at(binary, dir, |c| {
            c.args(["--enable-debug-command", "yes", "--loadmodule"])
                .arg(&module)
                .args(dialect_args(module_args))
                .args(module_args)
                .args(extra);
        })?;
        Ok(Redis {
            port: process.port,
            process,
        })
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
        self.process.wait();
    }
}
