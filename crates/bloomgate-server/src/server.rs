//! The tokio server, one event-loop thread like Redis' (a current-thread runtime: no task
//! hand-off between threads per request; snapshots, loading and the log's fsync run on other
//! threads): startup (protected mode, the data directory's lock, load the data while answering
//! `-LOADING`, start the log writer), client limits, background expiry and automatic
//! snapshots, and graceful shutdown: stop accepting, refuse commands not yet started, write and
//! fsync the log, snapshot, exit.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::commands::{Replayer, Store};
use crate::config::{is_loopback, Settings};
use crate::gate::GateService;
use crate::keyspace::now_ms;
use crate::lock::relock;
use crate::metrics::Latency;
use crate::persistence::{self, AofWriter};
use crate::pubsub::Events;
use crate::shared::{Shared, SNAPSHOT_RETRY};

/// Most file descriptors this process may open (`Max open files` in /proc/self/limits).
fn open_file_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// File descriptors kept free for persistence (log, snapshot, manifest, directory) and the
/// listeners, as Redis' CONFIG_MIN_RESERVED_FDS.
const RESERVED_FDS: u64 = 32;

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

/// Runs the server on `listener` until a client sends SHUTDOWN or `shutdown` completes (the
/// CLI passes [`shutdown_signal`]; a test its own trigger), on a runtime of its own: one
/// event-loop thread, as Redis. Returns an error when the settings are refused, the data cannot
/// be loaded, or acknowledged writes could not be made durable at shutdown.
pub fn run(
    listener: std::net::TcpListener,
    settings: Settings,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(serve(listener, settings, shutdown))
}

/// Binds the address `settings` name (what the CLI hands to [`run`]), after checking protected
/// mode: a refused setting never opens its port.
pub fn bind(settings: &Settings) -> anyhow::Result<std::net::TcpListener> {
    check_protected_mode(settings)?;
    let addr = settings.address();
    std::net::TcpListener::bind(&addr).with_context(|| format!("binding {addr}"))
}

/// Completes on SIGINT or SIGTERM: how `bloomgate serve` is asked to stop.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut sigterm) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = sigterm.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
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
         appendfsync {}, maxmemory {maxmemory}, metrics {}, gate {}",
        env!("CARGO_PKG_VERSION"),
        settings.config.bind,
        listening.port(),
        settings.dir.display(),
        settings.config.appendfsync.name(),
        settings
            .metrics_addr
            .as_deref()
            .map_or_else(|| "off".to_string(), |a| format!("http://{a}/metrics")),
        settings
            .gate
            .as_ref()
            .map_or_else(|| "off".to_string(), |g| g.store.redacted()),
    )
}

/// [`run`] on the caller's runtime.
pub async fn serve(
    listener: std::net::TcpListener,
    settings: Settings,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    check_protected_mode(&settings)?;
    let dir = settings.dir.clone();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // Two servers appending to one log would interleave records: hold an exclusive lock on the
    // directory for the server's lifetime (released by the OS even after kill -9).
    let _dir_lock = lock_data_dir(&dir)?;
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
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
    store.db.set_heap_probe(settings.heap_probe);
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
        gate_rows_held: Mutex::new(Vec::new()),
        log_baseline: AtomicU64::new(0),
        shutdown: Notify::new(),
        shutdown_save: true.into(),
        latency: Latency::default(),
        heap_probe: settings.heap_probe,
    });
    eprintln!("{}", banner(&settings, listener.local_addr()?));
    let accept = tokio::spawn(accept_loop(shared.clone(), listener));
    if let Some(metrics_addr) = &settings.metrics_addr {
        let listener = std::net::TcpListener::bind(metrics_addr)
            .with_context(|| format!("binding metrics address {metrics_addr}"))?;
        let metrics = shared.clone();
        bloomgate_metrics::spawn(listener, move || {
            Some(crate::metrics::render(
                &metrics.store,
                &metrics.latency,
                metrics.aof.get().map(|aof| &**aof),
            ))
        })
        .context("starting the metrics thread")?;
    }

    // Load before serving commands; clients meanwhile get -LOADING.
    let started = Instant::now();
    let config = settings.config.clone();
    let load_dir = dir.clone();
    let repair = settings.repair_log;
    let gate_settings = settings.gate.clone();
    let (loaded, gate, held) = tokio::task::spawn_blocking(move || {
        let removed = persistence::remove_stale_temp_files(&load_dir)?;
        let cap = config.dialect.memory_usage_limit;
        let mut replayer = Replayer::new(config);
        let mut loaded = persistence::load(&load_dir, repair, &mut replayer)?;
        loaded.warnings.extend(removed);
        loaded.warnings.extend(past_cap(&loaded.db, cap));
        let rows = replayer.take_gate_rows();
        let (gate, held) = match &gate_settings {
            Some(settings) => {
                let starting = || format!("starting the gate over {}", settings.store.redacted());
                let gate =
                    GateService::open(settings, &load_dir.join("gate")).with_context(starting)?;
                let replayed = gate.replay(&rows).with_context(starting)?;
                if replayed > 0 {
                    eprintln!(
                        "bloomgate: {replayed} gate rows from the log put back into the gate (to \
                         be committed to the store again)"
                    );
                }
                (Some(Arc::new(gate)), Vec::new())
            }
            None => {
                let count: usize = rows.iter().map(|r| r.items.len()).sum();
                if count > 0 {
                    loaded.warnings.push(format!(
                        "the log holds {count} rows GATE.RECORD took, but no gate is configured \
                         (--gate-store): they stay in the log until a gate takes them"
                    ));
                }
                (None, rows)
            }
        };
        anyhow::Ok((loaded, gate, held))
    })
    .await
    .context("load task")??;
    *relock(&shared.gate_rows_held) = held;
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
        store.db.set_heap_probe(settings.heap_probe);
        store.loading = false;
        store.persistence.aof_enabled = true;
        store.persistence.last_save_unix = now_ms() / 1000;
        store.gate = gate.clone();
    }
    tokio::spawn(cron(shared.clone()));

    tokio::select! {
        _ = shutdown => shared.request_shutdown(true),
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
        stop_writer(&aof).await;
        bail!(
            "could not write the append-only log before exiting ({}); the writes that were \
             waiting for it were never acknowledged",
            aof.error().unwrap_or_else(|| "timed out".into())
        );
    }
    if let Some(gate) = gate {
        // Commit what was recorded and write the filters' snapshot (the gate's threads stop when
        // its last reference goes).
        let closed = tokio::task::spawn_blocking(move || {
            gate.gate().flush().and_then(|()| gate.gate().persist())
        })
        .await;
        if let Ok(Err(e)) = closed {
            eprintln!("bloomgate: warning: the gate could not commit or persist everything: {e}");
        }
    }
    if save {
        if let Err(e) = shared.snapshot().await {
            // Everything is in the fsynced log: nothing is lost, the next start replays it.
            eprintln!("bloomgate: warning: final snapshot failed ({e:#}); the log has every write");
        }
    }
    let writer = aof.clone();
    let _ = tokio::task::spawn_blocking(move || writer.sync(Duration::from_secs(30))).await;
    stop_writer(&aof).await;
    Ok(())
}

/// The warning for keys loaded past `bloom-memory-usage-limit` (`cap` bytes; 0 = none):
/// persisted data is never refused, but the operator should know.
fn past_cap(db: &crate::keyspace::Db, cap: u64) -> Option<String> {
    if cap == 0 {
        return None;
    }
    let over = db
        .iter_live(now_ms())
        .filter(|(_, e)| e.data.dialect().is_some_and(|v| v.memory() > cap))
        .count();
    (over > 0).then(|| {
        format!(
            "{over} key(s) past bloom-memory-usage-limit ({cap} bytes) loaded: persisted data is \
             never refused; clients may not grow them further"
        )
    })
}

/// Stops the append-only log's thread and waits for it (off the runtime), so that `run` returns
/// with nothing left touching the data directory; a thread stuck in a write for 30 s is left
/// behind with a warning.
async fn stop_writer(aof: &Arc<AofWriter>) {
    let writer = aof.clone();
    let stopped = tokio::task::spawn_blocking(move || writer.shutdown(Duration::from_secs(30)))
        .await
        .unwrap_or(false);
    if !stopped {
        eprintln!("bloomgate: warning: the append-only log's thread did not stop within 30 s");
    }
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
            store.stats.expired_keys += expired.len() as u64;
            for key in &expired {
                store.pubsub.notify(Events::EXPIRED, "expired", key);
            }
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
