//! `bloomgate serve`: the Redis-protocol server (RedisBloom-compatible BF.* commands). This
//! file only parses the options; their meaning and the server live in `bloomgate_server`.

use std::path::PathBuf;

use bloomgate_server::{FsyncPolicy, Options};

/// `bloomgate serve` options. Each can also come from the environment or the config file
/// (precedence: flag, environment, file, default).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
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
    pub appendfsync: Option<Appendfsync>,
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
    /// Most memory one filter or sketch may take (bytes, or with k/kb/m/mb/g/gb); 0 = no cap
    #[arg(long, env = "BLOOMGATE_BLOOM_MEMORY_USAGE_LIMIT")]
    pub bloom_memory_usage_limit: Option<String>,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9121; a bare port means
    /// loopback; a non-loopback address needs --unprotected, as the endpoint has no password)
    #[arg(long, env = "BLOOMGATE_METRICS_ADDR")]
    pub metrics_addr: Option<String>,
    /// Config file: one `name value` per line (`#` comments): the options above by name
    /// (`metrics-addr`), plus bf-*/cf-* settings and bloom-memory-usage-limit
    #[arg(long, env = "BLOOMGATE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Allow a non-loopback --bind without --requirepass (turns off protected mode)
    #[arg(long, env = "BLOOMGATE_UNPROTECTED")]
    pub unprotected: bool,
    /// Serve GATE.* over this exact store: sqlite:PATH, redis://HOST:PORT or
    /// postgres://USER@HOST:PORT/DB (without it, GATE.* answer an error)
    #[arg(long, env = "BLOOMGATE_GATE_STORE")]
    pub gate_store: Option<String>,
    /// The gate's policy: verify (a filter "maybe" is checked against the store), trust, or
    /// exact (no filters) [default: verify]
    #[arg(long, env = "BLOOMGATE_GATE_POLICY")]
    pub gate_policy: Option<String>,
    /// The gate's retention window in days: an item counts as seen this long [default: 30]
    #[arg(long, env = "BLOOMGATE_GATE_WINDOW")]
    pub gate_window: Option<String>,
    /// Memory budget of the gate's filters (bytes, or with k/kb/m/mb/g/gb) [default: 256mb]
    #[arg(long, env = "BLOOMGATE_GATE_MEMORY")]
    pub gate_memory: Option<String>,
    /// The gate's filters: local, or shared by every gate process: resp://HOST:PORT or
    /// redis+cluster://HOST:PORT[,HOST:PORT...] (Redis/Valkey with the module) [default: local]
    #[arg(long, env = "BLOOMGATE_GATE_FILTERS")]
    pub gate_filters: Option<String>,
}

/// `--appendfsync` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Appendfsync {
    /// fsync before acknowledging each write (group commit).
    Always,
    /// fsync once a second.
    Everysec,
    /// leave flushing to the OS.
    No,
}

impl From<Appendfsync> for FsyncPolicy {
    fn from(value: Appendfsync) -> Self {
        match value {
            Appendfsync::Always => FsyncPolicy::Always,
            Appendfsync::Everysec => FsyncPolicy::Everysec,
            Appendfsync::No => FsyncPolicy::No,
        }
    }
}

impl From<Args> for Options {
    fn from(a: Args) -> Self {
        Options {
            bind: a.bind,
            port: a.port,
            dir: a.dir,
            appendfsync: a.appendfsync.map(FsyncPolicy::from),
            requirepass: a.requirepass,
            requirepass_file: a.requirepass_file,
            maxclients: a.maxclients,
            enable_debug_command: a.enable_debug_command,
            repair_log: a.repair_log,
            maxmemory: a.maxmemory,
            bloom_memory_usage_limit: a.bloom_memory_usage_limit,
            metrics_addr: a.metrics_addr,
            config: a.config,
            unprotected: a.unprotected,
            gate_store: a.gate_store,
            gate_policy: a.gate_policy,
            gate_window: a.gate_window,
            gate_memory: a.gate_memory,
            gate_filters: a.gate_filters,
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    use tikv_jemalloc_ctl::{Access as _, AsName as _};
    // Return freed pages to the OS in the background (as Redis runs jemalloc), within a second
    // rather than jemalloc's default ten: pages freed by table growth and request buffers
    // otherwise stay resident as if keys held them.
    let _ = tikv_jemalloc_ctl::background_thread::write(true);
    for name in [&b"arenas.dirty_decay_ms\0"[..], b"arena.0.dirty_decay_ms\0"] {
        let _ = name.name().write(DIRTY_DECAY_MS);
    }
    let mut settings = Options::from(args).resolve()?;
    settings.heap_probe = Some(heap_allocated);
    let listener = bloomgate_server::bind(&settings)?;
    bloomgate_server::run(listener, settings, bloomgate_server::shutdown_signal())
}

/// How long jemalloc keeps freed pages before returning them to the OS.
const DIRTY_DECAY_MS: isize = 1000;

/// Bytes jemalloc has handed out and not had back (`stats.allocated`, after refreshing its
/// statistics epoch): `used_memory`, as Redis reports its allocator's count.
fn heap_allocated() -> u64 {
    use tikv_jemalloc_ctl::{epoch, stats};
    let _ = epoch::advance();
    stats::allocated::read().map_or(0, |n| n as u64)
}
