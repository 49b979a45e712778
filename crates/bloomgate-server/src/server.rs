//! The tokio server, one event-loop thread like Redis' (a current-thread runtime: no task
//! hand-off between threads per request; snapshots, loading and the log's fsync run on other
//! threads): settings (flags, environment, config file), startup (bind, load the data
//! while answering `-LOADING`, start the log writer), snapshots (SAVE/BGSAVE/periodic/log
//! compaction/SHUTDOWN/signals, retried while they fail), client limits, background expiry, and
//! graceful shutdown: stop accepting, refuse commands not yet started, write and fsync the log,
//! snapshot, exit.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::commands::server::{apply_config, parse_memory};
use crate::commands::{now_ms, Config, FsyncPolicy, Store};
use crate::metrics::Latency;
use crate::persistence::{self, AofWriter};
use crate::relock;

/// `bloomgate serve` options. Each can also come from the environment or the config file
/// (precedence: flag, environment, file, default).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1]
    #[arg(long, env = "BLOOMGATE_BIND")]
    pub bind: Option<String>,
    /// TCP port [default: 6379]
    #[arg(long, env = "BLOOMGATE_PORT")]
    pub port: Option<u16>,
    /// Data directory for snapshots and the append-only log [default: ./bloomgate-data]
    #[arg(long, env = "BLOOMGATE_DIR")]
    pub dir: Option<PathBuf>,
    /// When the append-only log is fsynced [default: everysec]
    #[arg(long, env = "BLOOMGATE_APPENDFSYNC", value_enum)]
    pub appendfsync: Option<FsyncPolicy>,
    /// Require clients to AUTH with this password (visible in `ps`: prefer
    /// --requirepass-file or the environment)
    #[arg(long, env = "BLOOMGATE_REQUIREPASS")]
    pub requirepass: Option<String>,
    /// Read the password from this file (its first line)
    #[arg(long, env = "BLOOMGATE_REQUIREPASS_FILE")]
    pub requirepass_file: Option<PathBuf>,
    /// Most clients connected at once [default: 10000, lowered to fit the open-file limit]
    #[arg(long, env = "BLOOMGATE_MAXCLIENTS")]
    pub maxclients: Option<u64>,
    /// Allow the DEBUG command: no, yes, or local (loopback clients only) [default: no]
    #[arg(long, env = "BLOOMGATE_ENABLE_DEBUG_COMMAND")]
    pub enable_debug_command: Option<String>,
    /// On a corrupt append-only log, keep a copy of it and truncate it at the damage instead of
    /// refusing to start (like `redis-check-aof --fix`)
    #[arg(long)]
    pub repair_log: bool,
    /// Memory limit for the dataset (bytes, or with k/kb/m/mb/g/gb); 0 = unlimited
    #[arg(long, env = "BLOOMGATE_MAXMEMORY")]
    pub maxmemory: Option<String>,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9121; a bare port means
    /// loopback; a non-loopback address needs --unprotected, as the endpoint has no password)
    #[arg(long, env = "BLOOMGATE_METRICS_ADDR")]
    pub metrics_addr: Option<String>,
    /// Config file: one `name value` per line (`#` comments): the options above by name
    /// (`metrics-addr`), plus bf-*/cf-* settings
    #[arg(long, env = "BLOOMGATE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Allow a non-loopback --bind without --requirepass (turns off protected mode)
    #[arg(long, env = "BLOOMGATE_UNPROTECTED")]
    pub unprotected: bool,
}

/// Fully resolved settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config: Config,
    pub dir: PathBuf,
    pub metrics_addr: Option<String>,
    pub repair_log: bool,
}

impl ServeArgs {
    /// Merges flags/environment (already in `self`) over the config file over defaults.
    pub fn resolve(&self) -> anyhow::Result<Settings> {
        let mut config = Config::default();
        let mut dir = PathBuf::from("bloomgate-data");
        let mut metrics_addr = None;
        let mut unprotected = self.unprotected;
        let mut requirepass_file = self.requirepass_file.clone();
        if let Some(path) = &self.config {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading config file {}", path.display()))?;
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let (name, value) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
                let (name, value) = (name.to_ascii_lowercase(), value.trim().trim_matches('"'));
                let at = || format!("{}:{}", path.display(), n + 1);
                match name.as_str() {
                    "bind" => config.bind = value.to_string(),
                    "port" => {
                        config.port = value
                            .parse()
                            .with_context(|| format!("{}: bad port", at()))?
                    }
                    "dir" => dir = PathBuf::from(value),
                    "metrics-addr" => metrics_addr = Some(value.to_string()),
                    "unprotected" => unprotected |= value == "yes",
                    "requirepass-file" => {
                        requirepass_file = requirepass_file.or(Some(PathBuf::from(value)))
                    }
                    "maxclients" => {
                        config.maxclients = value
                            .parse()
                            .with_context(|| format!("{}: bad maxclients", at()))?
                    }
                    "enable-debug-command" => {
                        config.enable_debug_command = debug_access(value)
                            .with_context(|| format!("{}: enable-debug-command", at()))?
                    }
                    _ => apply_config(&mut config, &name, value)
                        .map_err(|e| anyhow::anyhow!("{}: {name}: {e}", at()))?,
                }
            }
        }
        if let Some(bind) = &self.bind {
            config.bind = bind.clone();
        }
        if let Some(port) = self.port {
            config.port = port;
        }
        if let Some(d) = &self.dir {
            dir = d.clone();
        }
        if let Some(policy) = self.appendfsync {
            config.appendfsync = policy;
        }
        if let Some(path) = &requirepass_file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading password file {}", path.display()))?;
            let pass = text.lines().next().unwrap_or("").to_string();
            config.requirepass = (!pass.is_empty()).then_some(pass);
        }
        if let Some(pass) = &self.requirepass {
            config.requirepass = (!pass.is_empty()).then(|| pass.clone());
        }
        if let Some(n) = self.maxclients {
            config.maxclients = n;
        }
        if let Some(access) = &self.enable_debug_command {
            config.enable_debug_command = debug_access(access)?;
        }
        config.protected_mode = !unprotected;
        if let Some(max) = &self.maxmemory {
            config.maxmemory =
                parse_memory(max).with_context(|| format!("bad --maxmemory value {max:?}"))?;
        }
        if self.metrics_addr.is_some() {
            metrics_addr = self.metrics_addr.clone();
        }
        config.dir = dir.display().to_string();
        config.memory_ceiling = physical_memory().unwrap_or(u64::MAX);
        Ok(Settings {
            config,
            dir,
            metrics_addr: metrics_addr.map(|a| loopback_by_default(&a)),
            repair_log: self.repair_log,
        })
    }
}

/// `enable-debug-command`: no, yes or local.
fn debug_access(value: &str) -> anyhow::Result<String> {
    let value = value.to_ascii_lowercase();
    match value.as_str() {
        "no" | "yes" | "local" => Ok(value),
        _ => bail!("must be one of no, yes, local (got {value:?})"),
    }
}

/// A metrics address given as a bare port (`9121` or `:9121`) means loopback.
fn loopback_by_default(addr: &str) -> String {
    let port = addr.strip_prefix(':').unwrap_or(addr);
    if port.parse::<u16>().is_ok() {
        format!("127.0.0.1:{port}")
    } else {
        addr.to_string()
    }
}

/// Whether a host (an IP address or `localhost`) is a loopback address.
pub fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host == "localhost",
    }
}

/// Most file descriptors this process may open (`Max open files` in /proc/self/limits).
fn open_file_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// File descriptors kept free for persistence (log, snapshot, manifest, directory) and the
/// listeners, as Redis' CONFIG_MIN_RESERVED_FDS.
const RESERVED_FDS: u64 = 32;

/// `MemTotal` from /proc/meminfo, in bytes (`None` where that file does not exist).
fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// State shared by all connections.
pub struct Shared {
    pub store: Mutex<Store>,
    /// Set once the data is loaded.
    pub aof: OnceLock<Arc<AofWriter>>,
    pub dir: PathBuf,
    pub next_client_id: AtomicU64,
    /// Connected clients (checked against `max_clients` at accept).
    pub clients: AtomicUsize,
    /// `maxclients`, lowered to what the open-file limit allows after the reserve.
    pub max_clients: usize,
    /// Set (under the store lock) when shutdown starts: no command runs after it.
    pub stopping: AtomicBool,
    /// Why the last snapshot failed, while no later one succeeded (writes get MISCONF).
    pub snapshot_error: Mutex<Option<String>>,
    /// When the last snapshot was attempted (failed snapshots are retried).
    last_snapshot_attempt: Mutex<Instant>,
    /// Newest log generation (a snapshot starts the next one).
    generation: AtomicU64,
    /// One snapshot at a time.
    snapshot_lock: tokio::sync::Mutex<()>,
    /// Size of the log right after the last snapshot (compaction trigger baseline).
    log_baseline: AtomicU64,
    pub shutdown: Notify,
    /// Whether a requested shutdown should snapshot first.
    shutdown_save: AtomicBool,
    pub latency: Latency,
}

/// Redis' wording when writes are refused because the data cannot be persisted.
const MISCONF_SNAPSHOT: &str = "MISCONF Redis is configured to save RDB snapshots, but it's \
    currently unable to persist to disk. Commands that may modify the data set are disabled, \
    because this instance is configured to report errors during writes if RDB snapshotting \
    fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about \
    the RDB error.";

/// Pause before a failed snapshot is tried again.
const SNAPSHOT_RETRY: Duration = Duration::from_secs(2);

impl Shared {
    /// The `-MISCONF` error writes get while the log or the snapshot cannot be written.
    pub fn misconf(&self) -> Option<String> {
        if let Some(e) = self.aof.get().and_then(|aof| aof.error()) {
            return Some(format!("MISCONF Errors writing to the AOF file: {e}"));
        }
        relock(&self.snapshot_error)
            .is_some()
            .then(|| MISCONF_SNAPSHOT.to_string())
    }

    /// Takes a point-in-time copy (O(keys), values shared copy-on-write), switches the log to a
    /// new generation at that instant, writes the snapshot off the async threads, records it in
    /// the manifest, then drops the logs it covers. A failure (full disk) leaves the previous
    /// files in place, removes the partial snapshot, and sets [`Self::snapshot_error`].
    pub async fn snapshot(self: &Arc<Self>) -> anyhow::Result<()> {
        let _one_at_a_time = self.snapshot_lock.lock().await;
        let Some(aof) = self.aof.get() else {
            bail!("the dataset is still loading")
        };
        *relock(&self.last_snapshot_attempt) = Instant::now();
        let (entries, generation, changes) = {
            let mut store = relock(&self.store);
            let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
            aof.rotate(generation);
            store.persistence.bgsave_in_progress = true;
            (
                store.db.snapshot(),
                generation,
                store.persistence.changes_since_save,
            )
        };
        let started = Instant::now();
        let dir = self.dir.clone();
        let writer = aof.clone();
        let result = tokio::task::spawn_blocking(move || {
            persistence::write_snapshot(&dir, &entries, generation)?;
            writer.snapshot_done(generation)?;
            persistence::remove_logs_before(&dir, generation)
        })
        .await
        .context("snapshot task")
        .and_then(|r| r.with_context(|| format!("writing snapshot in {}", self.dir.display())));
        let mut store = relock(&self.store);
        let p = &mut store.persistence;
        p.bgsave_in_progress = false;
        p.last_bgsave_ok = result.is_ok();
        let mut error = relock(&self.snapshot_error);
        match &result {
            Ok(()) => {
                p.last_save_unix = now_ms() / 1000;
                p.changes_since_save = p.changes_since_save.saturating_sub(changes);
                p.last_snapshot_ms = started.elapsed().as_millis() as u64;
                self.log_baseline.store(aof.size(), Ordering::Relaxed);
                if error.take().is_some() {
                    eprintln!("bloomgate: snapshot succeeded again: accepting writes");
                }
            }
            Err(e) => *error = Some(format!("{e:#}")),
        }
        result
    }

    /// DEBUG RELOAD: snapshot, then rebuild the keyspace from disk, with writes held off.
    pub async fn reload(self: &Arc<Self>) -> anyhow::Result<()> {
        self.snapshot().await?;
        let shared = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut store = relock(&shared.store);
            let aof = shared.aof.get().expect("loaded");
            // Everything queued must be in the files before they are read back.
            let target = aof.queued();
            while !aof.written_up_to(target) {
                std::thread::sleep(Duration::from_millis(1));
            }
            let loaded = persistence::load(&shared.dir, &store.config, false)?;
            store.db = loaded.db;
            Ok(())
        })
        .await
        .context("reload task")?
    }

    /// Asks the server to stop (SHUTDOWN, signals).
    pub fn request_shutdown(&self, save: bool) {
        self.shutdown_save.store(save, Ordering::SeqCst);
        self.shutdown.notify_one();
    }
}

/// Redis' protected mode: a non-loopback bind needs a password or an explicit opt-out; the
/// metrics endpoint, which has no password, needs a loopback address or the opt-out.
fn check_protected_mode(settings: &Settings) -> anyhow::Result<()> {
    let config = &settings.config;
    if config.needs_password() && config.requirepass.is_none() {
        bail!(
            "refusing to listen on {} without --requirepass (protected mode); set a password or \
             pass --unprotected",
            config.bind
        );
    }
    if let Some(addr) = &settings.metrics_addr {
        let host = addr.rsplit_once(':').map_or(addr.as_str(), |(h, _)| h);
        if config.protected_mode && !is_loopback(host) {
            bail!(
                "refusing to serve metrics on {addr}: the metrics endpoint has no password \
                 (protected mode); bind it to a loopback address or pass --unprotected"
            );
        }
    }
    Ok(())
}

/// Runs the server until SHUTDOWN or SIGTERM/SIGINT. Returns an error (and exits non-zero)
/// when the data cannot be loaded, or when acknowledged writes could not be made durable at
/// shutdown.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let settings = args.resolve()?;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(serve(settings))
}

/// Takes the exclusive lock file `LOCK` in the data directory, or explains who holds it.
fn lock_data_dir(dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
    let path = dir.join("LOCK");
    let file = persistence::private_options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "data directory {} is in use by another bloomgate server",
            dir.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
}

/// Accepts clients until shutdown: over `maxclients` a client gets Redis' error and is closed;
/// an accept error (out of file descriptors) backs off instead of spinning.
async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    let mut backoff = Duration::from_millis(5);
    loop {
        let (mut stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                eprintln!("bloomgate: accept failed: {e}; retrying in {backoff:?}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        backoff = Duration::from_millis(5);
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        if shared.clients.fetch_add(1, Ordering::SeqCst) >= shared.max_clients {
            shared.clients.fetch_sub(1, Ordering::SeqCst);
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                let _ = stream
                    .write_all(b"-ERR max number of clients reached\r\n")
                    .await;
            });
            continue;
        }
        let shared = shared.clone();
        tokio::spawn(async move {
            crate::connection::handle(shared.clone(), stream, peer.ip().is_loopback()).await;
            shared.clients.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// The start banner, one line: the version, where the server listens, and the settings an
/// operator checks first (data directory, fsync policy, memory limit, metrics endpoint).
pub fn banner(settings: &Settings, listening: std::net::SocketAddr) -> String {
    let maxmemory = match settings.config.maxmemory {
        0 => "0 (unlimited)".to_string(),
        bytes => format!("{bytes} bytes"),
    };
    format!(
        "bloomgate: bloomgate {} serving on {listening} (bind {}, port {}), data dir {}, \
         appendfsync {}, maxmemory {maxmemory}, metrics {}",
        env!("CARGO_PKG_VERSION"),
        settings.config.bind,
        listening.port(),
        settings.dir.display(),
        settings.config.appendfsync.name(),
        settings
            .metrics_addr
            .as_deref()
            .map_or_else(|| "off".to_string(), |a| format!("http://{a}/metrics")),
    )
}

pub async fn serve(settings: Settings) -> anyhow::Result<()> {
    check_protected_mode(&settings)?;
    let dir = settings.dir.clone();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // Two servers appending to one log would interleave records: hold an exclusive lock on the
    // directory for the server's lifetime (released by the OS even after kill -9).
    let _dir_lock = lock_data_dir(&dir)?;
    let addr = format!("{}:{}", settings.config.bind, settings.config.port);
    let listener = TcpListener::bind(&addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let fd_room = open_file_limit().map_or(u64::MAX, |l| l.saturating_sub(RESERVED_FDS));
    let max_clients = settings.config.maxclients.min(fd_room);
    if max_clients < settings.config.maxclients {
        eprintln!(
            "bloomgate: warning: maxclients lowered from {} to {max_clients} to fit the open-file \
             limit (raise it with ulimit -n)",
            settings.config.maxclients
        );
    }
    let mut store = Store::new(settings.config.clone());
    store.loading = true;
    store.config.maxclients = max_clients;
    let shared = Arc::new(Shared {
        store: Mutex::new(store),
        aof: OnceLock::new(),
        dir: dir.clone(),
        next_client_id: AtomicU64::new(1),
        clients: AtomicUsize::new(0),
        max_clients: max_clients as usize,
        stopping: AtomicBool::new(false),
        snapshot_error: Mutex::new(None),
        last_snapshot_attempt: Mutex::new(Instant::now()),
        generation: AtomicU64::new(0),
        snapshot_lock: tokio::sync::Mutex::new(()),
        log_baseline: AtomicU64::new(0),
        shutdown: Notify::new(),
        shutdown_save: true.into(),
        latency: Latency::default(),
    });
    eprintln!("{}", banner(&settings, listener.local_addr()?));
    let accept = tokio::spawn(accept_loop(shared.clone(), listener));
    if let Some(metrics_addr) = &settings.metrics_addr {
        let listener = std::net::TcpListener::bind(metrics_addr)
            .with_context(|| format!("binding metrics address {metrics_addr}"))?;
        crate::metrics::serve(listener, shared.clone()).context("starting the metrics thread")?;
    }

    // Load before serving commands; clients meanwhile get -LOADING.
    let started = Instant::now();
    let config = settings.config.clone();
    let load_dir = dir.clone();
    let repair = settings.repair_log;
    let loaded = tokio::task::spawn_blocking(move || {
        let removed = persistence::remove_stale_temp_files(&load_dir)?;
        let mut loaded = persistence::load(&load_dir, &config, repair)?;
        loaded.warnings.extend(removed);
        anyhow::Ok(loaded)
    })
    .await
    .context("load task")??;
    for warning in &loaded.warnings {
        eprintln!("bloomgate: warning: {warning}");
    }
    let aof = AofWriter::start(
        &dir,
        loaded.generation,
        settings.config.appendfsync,
        loaded.manifest,
    )?;
    shared.generation.store(loaded.generation, Ordering::SeqCst);
    shared
        .log_baseline
        .store(loaded.aof_size, Ordering::Relaxed);
    let _ = shared.aof.set(aof.clone());
    {
        let mut store = relock(&shared.store);
        eprintln!(
            "bloomgate: loaded {} keys in {} ms",
            loaded.db.len(),
            started.elapsed().as_millis()
        );
        store.db = loaded.db;
        store.loading = false;
        store.persistence.aof_enabled = true;
        store.persistence.last_save_unix = now_ms() / 1000;
    }
    tokio::spawn(cron(shared.clone()));

    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => shared.request_shutdown(true),
        _ = sigterm.recv() => shared.request_shutdown(true),
        _ = shared.shutdown.notified() => {}
    }
    let save = shared.shutdown_save.load(Ordering::SeqCst);
    eprintln!(
        "bloomgate: shutting down{}",
        if save { " (saving)" } else { "" }
    );
    // Stop accepting, and let no command start from here on: everything executed so far has
    // its record queued (records are queued under the store lock).
    accept.abort();
    {
        let _store = relock(&shared.store);
        shared.stopping.store(true, Ordering::SeqCst);
    }
    let writer = aof.clone();
    let synced = tokio::task::spawn_blocking(move || writer.sync(Duration::from_secs(30)))
        .await
        .unwrap_or(false);
    if !synced {
        aof.shutdown();
        bail!(
            "could not write the append-only log before exiting ({}); the writes that were \
             waiting for it were never acknowledged",
            aof.error().unwrap_or_else(|| "timed out".into())
        );
    }
    if save {
        if let Err(e) = shared.snapshot().await {
            // Everything is in the fsynced log: nothing is lost, the next start replays it.
            eprintln!("bloomgate: warning: final snapshot failed ({e:#}); the log has every write");
        }
    }
    let writer = aof.clone();
    let _ = tokio::task::spawn_blocking(move || writer.sync(Duration::from_secs(30))).await;
    aof.shutdown();
    Ok(())
}

/// Background work every 100 ms: active expiry, fsync policy changes, and automatic snapshots
/// (Redis' default save points 3600 s/1, 300 s/100, 60 s/10000 changes, plus log compaction
/// once the log exceeds 64 MiB and twice its size after the last snapshot); a failed snapshot
/// is retried every 2 s until one succeeds.
async fn cron(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tick.tick().await;
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let aof = shared.aof.get().expect("cron starts after load");
        let retry = relock(&shared.snapshot_error).is_some()
            && relock(&shared.last_snapshot_attempt).elapsed() >= SNAPSHOT_RETRY;
        let due = {
            let mut store = relock(&shared.store);
            let expired = store.db.purge_expired(now_ms(), 200);
            store.stats.expired_keys += expired as u64;
            aof.set_policy(store.config.appendfsync);
            store.persistence.aof_size = aof.size();
            let p = &store.persistence;
            let age = now_ms() / 1000 - p.last_save_unix;
            let changes = p.changes_since_save;
            let log_grew = aof.size() > 64 << 20
                && aof.size() > 2 * shared.log_baseline.load(Ordering::Relaxed);
            !p.bgsave_in_progress
                && (retry
                    || (changes >= 1 && age >= 3600)
                    || (changes >= 100 && age >= 300)
                    || (changes >= 10_000 && age >= 60)
                    || log_grew)
        };
        if due && (retry || relock(&shared.snapshot_error).is_none()) {
            if let Err(e) = shared.snapshot().await {
                eprintln!("bloomgate: background snapshot failed: {e:#}");
            }
        }
    }
}
