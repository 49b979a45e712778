//! The tokio server: settings (flags, environment, config file), startup (bind, load the data
//! while answering `-LOADING`, start the log writer), snapshots (SAVE/BGSAVE/periodic/log
//! compaction/SHUTDOWN/signals), background expiry, and graceful shutdown.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::commands::server::{apply_config, parse_memory};
use crate::commands::{now_ms, Config, FsyncPolicy, Store};
use crate::metrics::Latency;
use crate::persistence::{self, AofWriter};

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
    /// Require clients to AUTH with this password
    #[arg(long, env = "BLOOMGATE_REQUIREPASS")]
    pub requirepass: Option<String>,
    /// Memory limit for the dataset (bytes, or with k/kb/m/mb/g/gb); 0 = unlimited
    #[arg(long, env = "BLOOMGATE_MAXMEMORY")]
    pub maxmemory: Option<String>,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9121)
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
    pub unprotected: bool,
}

impl ServeArgs {
    /// Merges flags/environment (already in `self`) over the config file over defaults.
    pub fn resolve(&self) -> anyhow::Result<Settings> {
        let mut config = Config::default();
        let mut dir = PathBuf::from("bloomgate-data");
        let mut metrics_addr = None;
        let mut unprotected = self.unprotected;
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
        if let Some(pass) = &self.requirepass {
            config.requirepass = (!pass.is_empty()).then(|| pass.clone());
        }
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
            metrics_addr,
            unprotected,
        })
    }
}

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
    /// Newest log generation (a snapshot starts the next one).
    generation: AtomicU64,
    /// One snapshot at a time.
    snapshot_lock: tokio::sync::Mutex<()>,
    /// Size of the log right after the last snapshot (compaction trigger baseline).
    log_baseline: AtomicU64,
    pub shutdown: Notify,
    /// Whether a requested shutdown should snapshot first.
    shutdown_save: std::sync::atomic::AtomicBool,
    pub latency: Latency,
}

impl Shared {
    /// Takes a point-in-time copy (O(keys), values shared copy-on-write), switches the log to a
    /// new generation at that instant, writes the snapshot off the async threads, then drops
    /// the logs it covers.
    pub async fn snapshot(self: &Arc<Self>) -> anyhow::Result<()> {
        let _one_at_a_time = self.snapshot_lock.lock().await;
        let Some(aof) = self.aof.get() else {
            bail!("the dataset is still loading")
        };
        let (entries, generation, changes) = {
            let mut store = self.store.lock().expect("store lock");
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
        let result = tokio::task::spawn_blocking(move || {
            persistence::write_snapshot(&dir, &entries, generation)?;
            persistence::remove_logs_before(&dir, generation)
        })
        .await
        .context("snapshot task")?;
        let mut store = self.store.lock().expect("store lock");
        let p = &mut store.persistence;
        p.bgsave_in_progress = false;
        p.last_bgsave_ok = result.is_ok();
        if result.is_ok() {
            p.last_save_unix = now_ms() / 1000;
            p.changes_since_save = p.changes_since_save.saturating_sub(changes);
            p.last_snapshot_ms = started.elapsed().as_millis() as u64;
            self.log_baseline.store(aof.size(), Ordering::Relaxed);
        }
        result.with_context(|| format!("writing snapshot in {}", self.dir.display()))
    }

    /// DEBUG RELOAD: snapshot, then rebuild the keyspace from disk, with writes held off.
    pub async fn reload(self: &Arc<Self>) -> anyhow::Result<()> {
        self.snapshot().await?;
        let shared = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut store = shared.store.lock().expect("store lock");
            let aof = shared.aof.get().expect("loaded");
            // Everything queued must be in the files before they are read back.
            let target = aof.queued();
            while !aof.written_up_to(target) {
                std::thread::sleep(Duration::from_millis(1));
            }
            let loaded = persistence::load(&shared.dir, &store.config)?;
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

/// Redis' protected mode: a non-loopback bind needs a password or an explicit opt-out.
fn check_protected_mode(settings: &Settings) -> anyhow::Result<()> {
    let loopback = match settings.config.bind.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => settings.config.bind == "localhost",
    };
    if !loopback && settings.config.requirepass.is_none() && !settings.unprotected {
        bail!(
            "refusing to listen on {} without --requirepass (protected mode); set a password or \
             pass --unprotected",
            settings.config.bind
        );
    }
    Ok(())
}

/// Runs the server until SHUTDOWN or SIGTERM/SIGINT. Returns an error (and exits non-zero)
/// when the data cannot be loaded.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let settings = args.resolve()?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(serve(settings))
}

/// Takes the exclusive lock file `LOCK` in the data directory, or explains who holds it.
fn lock_data_dir(dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
    let path = dir.join("LOCK");
    let file = std::fs::OpenOptions::new()
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
    let mut store = Store::new(settings.config.clone());
    store.loading = true;
    let shared = Arc::new(Shared {
        store: Mutex::new(store),
        aof: OnceLock::new(),
        dir: dir.clone(),
        next_client_id: AtomicU64::new(1),
        generation: AtomicU64::new(0),
        snapshot_lock: tokio::sync::Mutex::new(()),
        log_baseline: AtomicU64::new(0),
        shutdown: Notify::new(),
        shutdown_save: true.into(),
        latency: Latency::default(),
    });
    eprintln!(
        "bloomgate: listening on {}, data in {}",
        listener.local_addr()?,
        dir.display()
    );
    let accept_shared = shared.clone();
    tokio::spawn(async move {
        loop {
            if let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(crate::connection::handle(accept_shared.clone(), stream));
            }
        }
    });
    if let Some(metrics_addr) = &settings.metrics_addr {
        let listener = TcpListener::bind(metrics_addr)
            .await
            .with_context(|| format!("binding metrics address {metrics_addr}"))?;
        tokio::spawn(crate::metrics::serve(listener, shared.clone()));
    }

    // Load before serving commands; clients meanwhile get -LOADING.
    let started = Instant::now();
    let config = settings.config.clone();
    let load_dir = dir.clone();
    let loaded = tokio::task::spawn_blocking(move || persistence::load(&load_dir, &config))
        .await
        .context("load task")??;
    for warning in &loaded.warnings {
        eprintln!("bloomgate: warning: {warning}");
    }
    let aof = AofWriter::start(&dir, loaded.generation, settings.config.appendfsync)?;
    shared.generation.store(loaded.generation, Ordering::SeqCst);
    shared
        .log_baseline
        .store(loaded.aof_size, Ordering::Relaxed);
    let _ = shared.aof.set(aof.clone());
    {
        let mut store = shared.store.lock().expect("store lock");
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
    if save {
        shared.snapshot().await?;
    }
    aof.shutdown();
    Ok(())
}

/// Background work every 100 ms: active expiry, fsync policy changes, and automatic snapshots
/// (Redis' default save points 3600 s/1, 300 s/100, 60 s/10000 changes, plus log compaction
/// once the log exceeds 64 MiB and twice its size after the last snapshot).
async fn cron(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tick.tick().await;
        let aof = shared.aof.get().expect("cron starts after load");
        let due = {
            let mut store = shared.store.lock().expect("store lock");
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
                && ((changes >= 1 && age >= 3600)
                    || (changes >= 100 && age >= 300)
                    || (changes >= 10_000 && age >= 60)
                    || log_grew)
        };
        if due {
            if let Err(e) = shared.snapshot().await {
                eprintln!("bloomgate: background snapshot failed: {e:#}");
            }
        }
    }
}
