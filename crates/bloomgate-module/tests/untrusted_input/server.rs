//! A redis-server under `ulimit -v`, whose death is observed rather than hidden.

use super::*;

pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) port: u16,
    pub(crate) log: PathBuf,
}

/// How a server that was asked to load something ended up.
pub(crate) enum Start {
    Up(Server),
    /// Exited by itself: status and log.
    Exited(ExitStatus, String),
    /// Neither answered nor exited within a minute (killed): its log.
    Hung(String),
}

impl Server {
    /// Starts the server with the module in `dir` (loading `dir/dump.rdb` if present) and
    /// waits until it answers PING or exits.
    pub(crate) fn start(dir: &Path, extra: &[&str]) -> Start {
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
                .args(support::dialect_args(extra))
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

    pub(crate) fn up(dir: &Path, extra: &[&str]) -> Server {
        match Self::start(dir, extra) {
            Start::Up(s) => s,
            Start::Exited(status, log) => panic!("redis-server exited ({status}):\n{log}"),
            Start::Hung(log) => panic!("redis-server never answered:\n{log}"),
        }
    }

    /// Dialect panics the module caught (each answered as an error instead of killing the
    /// server): not a crash, but a bug to report.
    pub(crate) fn caught_panics(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .matches("bloomgate: internal error")
            .count()
    }

    pub(crate) fn conn(&self) -> redis::Connection {
        let c = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        let con = c.get_connection().unwrap();
        con.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        con
    }

    /// Alive and answering, else the reason (exit status and the log's last lines).
    pub(crate) fn check_alive(&mut self) -> Result<(), String> {
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
pub(crate) fn clean_exit(status: ExitStatus, log: &str) -> bool {
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
pub(crate) fn crashed(kind: &str, input: &[u8], why: &str) -> ! {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-redis");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{kind}-{:016x}.bin", crc64(0, input)));
    std::fs::write(&path, input).unwrap();
    panic!("{kind} input {} killed the server: {why}", path.display());
}
