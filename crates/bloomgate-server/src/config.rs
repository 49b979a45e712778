//! The server's settings: the options `bloomgate serve` takes (flags, environment or a config
//! file, resolved into [`Settings`] here, with no command-line parser in this crate), and the
//! runtime configuration `CONFIG GET`/`CONFIG SET` read and change ([`Config`]).

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::{bail, Context as _};
use bloomgate_gate::{FilterUrl, Policy, StoreUrl};

use crate::persistence::FsyncPolicy;
use crate::pubsub::{Events, Limits};

/// `bloomgate serve` options as given (the CLI fills them from its flags and the environment;
/// `None` = not given). [`Options::resolve`] merges them over the config file over defaults.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Address to listen on (default 127.0.0.1).
    pub bind: Option<String>,
    /// TCP port (default 6379).
    pub port: Option<u16>,
    /// Data directory (default `./bloomgate-data`).
    pub dir: Option<PathBuf>,
    /// When the append-only log is fsynced (default everysec).
    pub appendfsync: Option<FsyncPolicy>,
    /// The default user's password.
    pub requirepass: Option<String>,
    /// A file whose first line is the password.
    pub requirepass_file: Option<PathBuf>,
    /// Most clients connected at once (default 10000, lowered to fit the open-file limit).
    pub maxclients: Option<u64>,
    /// `enable-debug-command`: no, yes or local (default no).
    pub enable_debug_command: Option<String>,
    /// Truncate a corrupt log at the damage (keeping a copy) instead of refusing to start.
    pub repair_log: bool,
    /// Memory limit for the dataset (bytes, or with k/kb/m/mb/g/gb); 0 = unlimited.
    pub maxmemory: Option<String>,
    /// Most bytes one value of the dialect may take (`bloom-memory-usage-limit`: bytes, or with
    /// k/kb/m/mb/g/gb); 0 = no cap.
    pub bloom_memory_usage_limit: Option<String>,
    /// Serve Prometheus metrics on this address (a bare port means loopback).
    pub metrics_addr: Option<String>,
    /// Config file: one `name value` per line (`#` comments).
    pub config: Option<PathBuf>,
    /// Allow a non-loopback bind without a password (protected mode off).
    pub unprotected: bool,
    /// The gate's exact store (`sqlite:PATH`, `redis://…`, `postgres://…`): GATE.* commands
    /// are served only with one.
    pub gate_store: Option<String>,
    /// The gate's policy: `verify` (default), `trust` or `exact`.
    pub gate_policy: Option<String>,
    /// The gate's retention window in days (default 30): an item counts as seen this long.
    pub gate_window: Option<String>,
    /// The gate's filters' memory budget (bytes, or with k/kb/m/mb/g/gb; default 256mb).
    pub gate_memory: Option<String>,
    /// Where the gate's filters live: `local` (default), `resp://HOST:PORT` or
    /// `redis+cluster://HOST:PORT[,...]` (shared by every gate process using them).
    pub gate_filters: Option<String>,
}

/// What the gate behind `GATE.*` runs with (see [`crate::gate`]).
#[derive(Debug, Clone)]
pub struct GateSettings {
    /// The exact store.
    pub store: StoreUrl,
    /// What a filter "maybe" leads to.
    pub policy: Policy,
    /// An item counts as seen for this long after it was last seen (ms).
    pub retention_ms: u64,
    /// All scope filters together stay within this many bytes.
    pub memory_bytes: u64,
    /// Where the scope filters live.
    pub filters: FilterUrl,
}

/// The gate's options, as the config file names them (in `Options::resolve`'s order).
const GATE_OPTIONS: [&str; 5] = [
    "gate-store",
    "gate-policy",
    "gate-window",
    "gate-memory",
    "gate-filters",
];

/// The gate's defaults: a 30-day window, filters within 256 MiB.
const GATE_WINDOW_DAYS: &str = "30";
const GATE_MEMORY: &str = "256mb";

impl GateSettings {
    /// The gate settings from their five options as given (`store` absent: no gate).
    fn resolve(
        store: Option<&str>,
        policy: Option<&str>,
        window_days: Option<&str>,
        memory: Option<&str>,
        filters: Option<&str>,
    ) -> anyhow::Result<Option<GateSettings>> {
        let Some(store) = store else {
            if policy.or(window_days).or(memory).or(filters).is_some() {
                bail!("gate-policy, gate-window, gate-memory and gate-filters need gate-store");
            }
            return Ok(None);
        };
        let filters: FilterUrl = filters.unwrap_or("local").parse().context("gate-filters")?;
        let store: StoreUrl = store.parse().context("gate-store")?;
        let policy = match policy.unwrap_or("verify").to_ascii_lowercase().as_str() {
            "verify" => Policy::Verify,
            "trust" => Policy::Trust,
            "exact" => Policy::Exact,
            other => bail!("gate-policy must be verify, trust or exact, got {other:?}"),
        };
        let days = window_days.unwrap_or(GATE_WINDOW_DAYS);
        let retention_ms = days
            .parse::<f64>()
            .ok()
            .filter(|d| d.is_finite() && *d > 0.0 && *d <= 36_500.0)
            .map(|d| (d * 86_400_000.0).round() as u64)
            .filter(|&ms| ms > 0)
            .with_context(|| {
                format!("gate-window must be a positive number of days, got {days:?}")
            })?;
        let memory = memory.unwrap_or(GATE_MEMORY);
        let memory_bytes =
            parse_memory(memory).with_context(|| format!("bad gate-memory value {memory:?}"))?;
        Ok(Some(GateSettings {
            store,
            policy,
            retention_ms,
            memory_bytes,
            filters,
        }))
    }
}

/// Fully resolved settings: what [`crate::run`] runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The runtime configuration.
    pub config: Config,
    /// The data directory.
    pub dir: PathBuf,
    /// Where to serve `GET /metrics`, if anywhere.
    pub metrics_addr: Option<String>,
    /// `--repair-log`.
    pub repair_log: bool,
    /// The allocator's count of allocated bytes, the source of `used_memory` (the binary that
    /// picks the global allocator provides it; without it, `used_memory` is the accounted
    /// dataset).
    pub heap_probe: Option<fn() -> u64>,
    /// The gate behind `GATE.*`, if `gate-store` is set.
    pub gate: Option<GateSettings>,
}

impl Settings {
    /// `ADDRESS:PORT` of the configured bind address and port.
    pub fn address(&self) -> String {
        format!("{}:{}", self.config.bind, self.config.port)
    }
}

impl Options {
    /// Merges these options over the config file over defaults.
    pub fn resolve(&self) -> anyhow::Result<Settings> {
        let mut config = Config::default();
        let mut dir = PathBuf::from("bloomgate-data");
        let mut metrics_addr = None;
        let mut unprotected = self.unprotected;
        let mut requirepass_file = self.requirepass_file.clone();
        let mut gate = [
            self.gate_store.clone(),
            self.gate_policy.clone(),
            self.gate_window.clone(),
            self.gate_memory.clone(),
            self.gate_filters.clone(),
        ];
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
                    "gate-store" | "gate-policy" | "gate-window" | "gate-memory"
                    | "gate-filters" => {
                        let at = GATE_OPTIONS.iter().position(|&n| n == name).unwrap_or(0);
                        // A flag given on the command line wins over the file.
                        gate[at] = gate[at].take().or_else(|| Some(value.to_string()));
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
        if let Some(cap) = &self.bloom_memory_usage_limit {
            config
                .dialect
                .set("bloom-memory-usage-limit", cap)
                .map_err(|e| {
                    anyhow::anyhow!("bad --bloom-memory-usage-limit value {cap:?}: {e}")
                })?;
        }
        if self.metrics_addr.is_some() {
            metrics_addr = self.metrics_addr.clone();
        }
        config.dir = dir.display().to_string();
        config.memory_ceiling = physical_memory().unwrap_or(u64::MAX);
        let [store, policy, window, memory, filters] = &gate;
        let gate = GateSettings::resolve(
            store.as_deref(),
            policy.as_deref(),
            window.as_deref(),
            memory.as_deref(),
            filters.as_deref(),
        )?;
        Ok(Settings {
            config,
            dir,
            metrics_addr: metrics_addr.map(|a| loopback_by_default(&a)),
            repair_log: self.repair_log,
            heap_probe: None,
            gate,
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

/// `MemTotal` from /proc/meminfo, in bytes (`None` where that file does not exist).
fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Runtime configuration visible through CONFIG GET/SET.
#[derive(Clone, Debug)]
pub struct Config {
    /// The `bf-*` / `cf-*` settings.
    pub dialect: bloomgate_dialect::Config,
    /// Bytes; 0 = no limit.
    pub maxmemory: u64,
    /// What one allocation may take when `maxmemory` is 0: the machine's physical memory (set
    /// by the server at start), so a forged size fails cleanly instead of exhausting the host.
    pub memory_ceiling: u64,
    /// When the log is fsynced.
    pub appendfsync: FsyncPolicy,
    /// The default user's password.
    pub requirepass: Option<String>,
    /// The data directory (`CONFIG GET dir`).
    pub dir: String,
    /// The address listened on.
    pub bind: String,
    /// The port listened on.
    pub port: u16,
    /// Most clients connected at once.
    pub maxclients: u64,
    /// `enable-debug-command`: "no", "yes" or "local" (loopback clients only).
    pub enable_debug_command: String,
    /// Redis' protected mode (off with `--unprotected`): a non-loopback bind needs a password.
    pub protected_mode: bool,
    /// The values of the [`INERT`] settings, in its order.
    pub inert: [u64; INERT.len()],
    /// `notify-keyspace-events`: the keyspace events published (none by default).
    pub notify_events: Events,
    /// `client-output-buffer-limit`'s `pubsub` class: when a subscriber is disconnected.
    pub pubsub_limits: Limits,
}

/// Redis settings serve accepts and shows, with no effect, so tools and test suites written for
/// Redis can set them: `hz` (serve's timers do not follow a cron frequency) and active defrag's
/// tuning (serve never moves its values; `activedefrag yes` itself is refused, as by a Redis
/// built without jemalloc's defrag support). Name, default, least and greatest value; `hz`
/// clamps into its range as Redis does, the others refuse a value outside it.
pub const INERT: [(&str, u64, u64, u64); 7] = [
    ("hz", 10, 1, 500),
    ("active-defrag-ignore-bytes", 100 << 20, 1, i64::MAX as u64),
    ("active-defrag-threshold-lower", 10, 0, 1000),
    ("active-defrag-threshold-upper", 100, 0, 1000),
    ("active-defrag-cycle-min", 1, 1, 99),
    ("active-defrag-cycle-max", 25, 1, 99),
    ("active-defrag-max-scan-fields", 1000, 1, i64::MAX as u64),
];

/// Redis' refusal of `activedefrag yes` by a build that cannot defragment.
const NO_DEFRAG: &str = "Active defragmentation cannot be enabled: it requires a Redis server \
compiled with a modified Jemalloc like the one shipped by default with the Redis source \
distribution";

/// Applies `value` to the [`INERT`] setting `name`; `None` when `name` is not one.
fn apply_inert(c: &mut Config, name: &str, value: &str) -> Option<Result<(), String>> {
    let i = INERT.iter().position(|(n, ..)| *n == name)?;
    let (_, _, least, greatest) = INERT[i];
    let parsed = if name == "active-defrag-ignore-bytes" {
        parse_memory(value)
    } else {
        value.parse::<i64>().ok().map(|v| v.max(0) as u64)
    };
    Some(match parsed {
        None => Err("argument couldn't be parsed into an integer".into()),
        Some(v) if name == "hz" => {
            c.inert[i] = v.clamp(least, greatest);
            Ok(())
        }
        Some(v) if (least..=greatest).contains(&v) => {
            c.inert[i] = v;
            Ok(())
        }
        Some(_) => Err(format!(
            "argument must be between {least} and {greatest} inclusive"
        )),
    })
}

impl Config {
    /// Whether protected mode requires a password: on, and bound to a non-loopback address.
    pub fn needs_password(&self) -> bool {
        self.protected_mode && !is_loopback(&self.bind)
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            dialect: bloomgate_dialect::Config::default(),
            inert: INERT.map(|(_, default, ..)| default),
            maxmemory: 0,
            memory_ceiling: u64::MAX,
            appendfsync: FsyncPolicy::Everysec,
            requirepass: None,
            dir: String::new(),
            bind: "127.0.0.1".into(),
            port: 6379,
            maxclients: 10_000,
            enable_debug_command: "no".into(),
            protected_mode: true,
            notify_events: Events::default(),
            pubsub_limits: Limits::default(),
        }
    }
}

/// `client-output-buffer-limit <class> <hard> <soft> <seconds> ...`: the `pubsub` class is
/// applied to `current` (subscribers are the only clients whose output is queued apart from
/// their replies); `normal` and `replica`/`slave` groups are accepted and ignored.
fn output_limits(value: &str, current: Limits) -> Result<Limits, String> {
    let words: Vec<&str> = value.split_whitespace().collect();
    if words.is_empty() || !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut limits = current;
    for group in words.chunks(4) {
        let size = |w: &str| {
            parse_memory(w)
                .ok_or("Error in hard, soft or soft_seconds setting in buffer limit configuration.")
        };
        let (hard, soft) = (size(group[1])?, size(group[2])?);
        let seconds: u64 = group[3].parse().map_err(|_| {
            "Error in hard, soft or soft_seconds setting in buffer limit configuration."
        })?;
        match group[0].to_ascii_lowercase().as_str() {
            "pubsub" => {
                limits = Limits {
                    hard,
                    soft,
                    soft_seconds: seconds,
                }
            }
            "normal" | "replica" | "slave" => {}
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into())
            }
        }
    }
    Ok(limits)
}

pub use bloomgate_dialect::num::parse_memory;

/// CONFIG parameter names, in CONFIG GET order: the dialect's `bf-*`/`cf-*` settings (its one
/// list, [`bloomgate_dialect::Config::NAMES`]), then the server's own.
pub const CONFIG_NAMES: [&str; 29] = {
    const DIALECT: [&str; 9] = bloomgate_dialect::Config::NAMES;
    const OWN: [&str; 20] = [
        "maxmemory",
        "maxmemory-policy",
        "appendonly",
        "appendfsync",
        "requirepass",
        "dir",
        "bind",
        "port",
        "save",
        "databases",
        "notify-keyspace-events",
        "client-output-buffer-limit",
        "activedefrag",
        INERT[0].0,
        INERT[1].0,
        INERT[2].0,
        INERT[3].0,
        INERT[4].0,
        INERT[5].0,
        INERT[6].0,
    ];
    let mut all = [""; 29];
    let mut i = 0;
    while i < all.len() {
        all[i] = if i < DIALECT.len() {
            DIALECT[i]
        } else {
            OWN[i - DIALECT.len()]
        };
        i += 1;
    }
    all
};

/// The value `CONFIG GET` shows for `name` (one of [`CONFIG_NAMES`]).
pub fn config_value(c: &Config, name: &str) -> String {
    match name {
        _ if c.dialect.get(name).is_some() => c.dialect.get(name).unwrap_or_default(),
        "maxmemory" => c.maxmemory.to_string(),
        "maxmemory-policy" => "noeviction".into(),
        "appendonly" => "yes".into(),
        "appendfsync" => c.appendfsync.name().into(),
        "requirepass" => c.requirepass.clone().unwrap_or_default(),
        "dir" => c.dir.clone(),
        "bind" => c.bind.clone(),
        "port" => c.port.to_string(),
        "save" => "3600 1 300 100 60 10000".into(),
        "notify-keyspace-events" => c.notify_events.to_string(),
        "client-output-buffer-limit" => {
            let l = c.pubsub_limits;
            format!(
                "normal 0 0 0 slave 268435456 67108864 60 pubsub {} {} {}",
                l.hard, l.soft, l.soft_seconds
            )
        }
        "activedefrag" => "no".into(),
        _ => match INERT.iter().position(|(n, ..)| *n == name) {
            Some(i) => c.inert[i].to_string(),
            None => "1".into(),
        },
    }
}

/// Validates and applies one configuration pair (CONFIG SET and the config file); `name` is
/// lower-case. Immutable names are refused here (the server applies them at start).
pub fn apply_config(c: &mut Config, name: &str, value: &str) -> Result<(), String> {
    if c.dialect.set(name, value)? {
        return Ok(());
    }
    if let Some(done) = apply_inert(c, name, value) {
        return done;
    }
    match name {
        "activedefrag" if value.eq_ignore_ascii_case("no") => {}
        "activedefrag" if value.eq_ignore_ascii_case("yes") => return Err(NO_DEFRAG.into()),
        "activedefrag" => return Err("argument must be 'yes' or 'no'".into()),
        "maxmemory" => {
            c.maxmemory = parse_memory(value).ok_or("argument must be a memory value")?
        }
        "maxmemory-policy" if value.eq_ignore_ascii_case("noeviction") => {}
        "appendfsync" => {
            c.appendfsync = FsyncPolicy::parse(value)
                .ok_or("argument(s) must be one of the following: always, everysec, no")?
        }
        "requirepass" if value.is_empty() && c.needs_password() => {
            return Err(format!(
                "refusing to remove the password of a server listening on {} (protected mode)",
                c.bind
            ))
        }
        "requirepass" => c.requirepass = (!value.is_empty()).then(|| value.to_string()),
        "notify-keyspace-events" => {
            c.notify_events = Events::parse(value)
                .ok_or("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")?
        }
        "client-output-buffer-limit" => c.pubsub_limits = output_limits(value, c.pubsub_limits)?,
        "appendonly" | "dir" | "bind" | "port" | "databases" | "maxmemory-policy" | "save" => {
            return Err("can't set immutable config".into())
        }
        _ => return Err(format!("unknown option '{name}'")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_settings_come_from_flags_over_the_config_file() {
        let dir =
            std::env::temp_dir().join(format!("bloomgate-gate-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("serve.conf");
        std::fs::write(
            &file,
            "gate-store sqlite:/tmp/seen.db\ngate-policy trust\ngate-window 7\ngate-memory 1mb\n\
             gate-filters redis+cluster://127.0.0.1:7000,127.0.0.1:7001?wait=1\n",
        )
        .unwrap();
        let options = Options {
            config: Some(file.clone()),
            gate_window: Some("0.5".into()),
            ..Options::default()
        };
        let gate = options.resolve().unwrap().gate.unwrap();
        assert_eq!(gate.store, "sqlite:/tmp/seen.db".parse().unwrap());
        assert_eq!(gate.policy, Policy::Trust);
        assert_eq!(gate.retention_ms, 43_200_000, "the flag wins over the file");
        assert_eq!(gate.memory_bytes, 1 << 20);
        assert_eq!(
            gate.filters.to_string(),
            "redis+cluster://127.0.0.1:7000,127.0.0.1:7001?wait=1"
        );
        assert!(Options::default().resolve().unwrap().gate.is_none());
        let local = Options {
            gate_store: Some("sqlite:/tmp/seen.db".into()),
            ..Options::default()
        };
        assert_eq!(
            local.resolve().unwrap().gate.unwrap().filters,
            FilterUrl::Local
        );
        let bad_filters = Options {
            gate_store: Some("sqlite:/tmp/seen.db".into()),
            gate_filters: Some("resp://h:1?wait=x".into()),
            ..Options::default()
        };
        assert!(format!("{:#}", options_error(bad_filters)).contains("wait=x"));
        let refused = |options: Options| options.resolve().unwrap_err().to_string();
        let bad_policy = Options {
            gate_store: Some("sqlite:/tmp/seen.db".into()),
            gate_policy: Some("maybe".into()),
            ..Options::default()
        };
        assert!(refused(bad_policy).contains("verify, trust or exact"));
        let no_store = Options {
            gate_window: Some("3".into()),
            ..Options::default()
        };
        assert!(refused(no_store).contains("need gate-store"));
        let bad_url = Options {
            gate_store: Some("mysql://x".into()),
            ..Options::default()
        };
        assert!(format!("{:#}", options_error(bad_url)).contains("store must be"));
        let filters_alone = Options {
            gate_filters: Some("resp://h:1".into()),
            ..Options::default()
        };
        assert!(refused(filters_alone).contains("need gate-store"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn options_error(options: Options) -> anyhow::Error {
        options.resolve().unwrap_err()
    }
}
