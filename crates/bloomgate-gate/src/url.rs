//! Stores and filters named by URL: the one place a store's scheme is recognised and the store
//! it names is opened, and where the filters' URLs are told apart from `local`.
//!
//! Stores: `sqlite:PATH` (a SQLite file), `redis://HOST:PORT[/DB]` (a Redis server, every key
//! under a prefix) or `postgres://USER@HOST:PORT/DB[?table=NAME&...]` (also spelled
//! `postgresql://`: a PostgreSQL database, the rows in one table). Filters: `local` (in this
//! process), `resp://HOST:PORT` (a bloomgate server, or Redis with the bloomgate module), or
//! `redis+cluster://HOST:PORT[,HOST:PORT...]` (also spelled `resp+cluster://`: a Redis Cluster
//! running the module).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::stores::postgres::parse_url;
use crate::{
    Error, ExactStore, FilterMode, PgOptions, PostgresStore, RedisStore, Result, SqliteStore,
};

/// A store or filter URL that is not one of the accepted forms; the message lists them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UrlError(String);

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UrlError {}

/// Where an exact store lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreUrl {
    /// `sqlite:PATH`: a SQLite database file.
    Sqlite(PathBuf),
    /// `redis://HOST:PORT[/DB]`: a Redis server (the whole URL).
    Redis(String),
    /// `postgres://USER@HOST:PORT/DB[?PARAM=VALUE&...]` or `postgresql://...`: a PostgreSQL
    /// database (the whole URL, parameters included: see [`PostgresStore`]; `table=NAME` picks
    /// the rows table). Parsing checks every parameter as the store will, without connecting.
    Postgres(String),
}

/// The URL schemes of [`StoreUrl::Postgres`].
const POSTGRES_SCHEMES: [&str; 2] = ["postgres://", "postgresql://"];

/// The options a PostgreSQL URL sets (its table, statements, timeouts), checked by the store's
/// own parser without connecting: a URL the store would refuse is refused when it is parsed.
fn pg_options(url: &str) -> std::result::Result<PgOptions, UrlError> {
    match parse_url(url, PgOptions::default()) {
        Ok((_, options)) => Ok(options),
        Err(Error::InvalidConfig(why)) => Err(UrlError(why)),
        Err(other) => Err(UrlError(other.to_string())),
    }
}

impl FromStr for StoreUrl {
    type Err = UrlError;
    fn from_str(spec: &str) -> std::result::Result<Self, UrlError> {
        if let Some(path) = spec.strip_prefix("sqlite:") {
            if path.is_empty() {
                return Err(UrlError(
                    "sqlite: needs a path, e.g. sqlite:/tmp/feed.db".into(),
                ));
            }
            Ok(StoreUrl::Sqlite(PathBuf::from(path)))
        } else if spec.starts_with("redis://") {
            Ok(StoreUrl::Redis(spec.to_owned()))
        } else if POSTGRES_SCHEMES.iter().any(|s| spec.starts_with(s)) {
            pg_options(spec)?;
            Ok(StoreUrl::Postgres(spec.to_owned()))
        } else {
            Err(UrlError(format!(
                "store must be sqlite:PATH, redis://HOST:PORT or postgres://USER@HOST:PORT/DB, got {spec:?}"
            )))
        }
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            StoreUrl::Redis(url) | StoreUrl::Postgres(url) => f.write_str(url),
        }
    }
}

impl StoreUrl {
    /// The URL as [`Display`](fmt::Display) writes it, with a password (`USER:PASSWORD@`)
    /// replaced by `***`: what logs, reports and status replies (`GATE.INFO`) show.
    pub fn redacted(&self) -> String {
        redacted(&self.to_string())
    }

    /// A store beside this one for a separate data set called `name`: the SQLite file
    /// `feed.db` becomes `feed-{name}.db` in the same directory; a Redis URL stays as it is
    /// (data sets on one server are kept apart by the key prefix given to [`StoreUrl::open`]);
    /// a PostgreSQL URL gets `table={table}_{name}` (its table, `seen` by default, and `name`
    /// with every character outside `[a-z0-9_]` lower-cased or made `_`), replacing its
    /// `table=` parameter. A name that makes the table longer than 41 characters is refused
    /// when the store is opened.
    pub fn dataset(&self, name: &str) -> StoreUrl {
        match self {
            StoreUrl::Sqlite(path) => StoreUrl::Sqlite(dataset_path(path, name)),
            StoreUrl::Redis(url) => StoreUrl::Redis(url.clone()),
            StoreUrl::Postgres(url) => StoreUrl::Postgres(dataset_table(url, name)),
        }
    }

    /// Opens the store. Every key of a Redis store starts with `key_prefix` (a SQLite file is a
    /// namespace of its own). `fresh` empties the store first — the SQLite file is removed with
    /// its `-wal` and `-shm` files, the Redis prefix's keys are deleted, the PostgreSQL table is
    /// truncated ([`PostgresStore::clear`]) — so it is a new store, with a new identity. A
    /// PostgreSQL store is connected with [`PgOptions::default`], which its URL's parameters
    /// override.
    pub fn open(&self, key_prefix: &str, fresh: bool) -> Result<Box<dyn ExactStore>> {
        let failed = |action: String| move |cause| Error::Open { action, cause };
        Ok(match self {
            StoreUrl::Sqlite(path) => {
                for suffix in ["", "-wal", "-shm"].into_iter().filter(|_| fresh) {
                    let file = PathBuf::from(format!("{}{suffix}", path.display()));
                    match std::fs::remove_file(&file) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => {
                            return Err(failed(format!("removing {}", file.display()))(e.into()))
                        }
                    }
                }
                let store = SqliteStore::open(path)
                    .map_err(|e| failed(format!("opening {}", path.display()))(e.into()))?;
                Box::new(store)
            }
            StoreUrl::Redis(url) => {
                let store = RedisStore::open(url, key_prefix)
                    .map_err(|e| failed(format!("connecting to {}", redacted(url)))(e.into()))?;
                if fresh {
                    store.clear()?;
                }
                Box::new(store)
            }
            StoreUrl::Postgres(url) => {
                let store = PostgresStore::connect(url, PgOptions::default())
                    .map_err(|e| failed(format!("connecting to {}", redacted(url)))(e.into()))?;
                if fresh {
                    store.clear()?;
                }
                Box::new(store)
            }
        })
    }
}

/// `url` with its `table=` parameter set to `{table}_{name}` (`name` sanitized to
/// `[a-z0-9_]`).
fn dataset_table(url: &str, name: &str) -> String {
    // A URL that did not come through `parse` and does not parse: its table is the default's,
    // and opening it reports what is wrong.
    let table = pg_options(url).unwrap_or_default().table;
    let name: String = name
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '_') => c,
            _ => '_',
        })
        .collect();
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut pairs: Vec<String> = query
        .split('&')
        .filter(|pair| !pair.is_empty() && !pair.starts_with("table="))
        .map(str::to_owned)
        .collect();
    pairs.push(format!("table={table}_{name}"));
    format!("{base}?{}", pairs.join("&"))
}

/// `url` with its password (`USER:PASSWORD@`) replaced by `***`, for error messages.
fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => match rest[..at].split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***{}", &rest[at..]),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// `feed.db` → `feed-{name}.db`.
fn dataset_path(path: &Path, name: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(|| "feed".into(), |s| s.to_string_lossy().into_owned());
    let file = match path.extension() {
        Some(ext) => format!("{stem}-{name}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{name}"),
    };
    path.with_file_name(file)
}

/// Where scope filters live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FilterUrl {
    /// `local`: in this process.
    Local,
    /// `resp://HOST:PORT`, `redis+cluster://HOST:PORT[,HOST:PORT...]` or
    /// `resp+cluster://...`: on a server (the whole URL).
    Remote(String),
}

impl FromStr for FilterUrl {
    type Err = UrlError;
    fn from_str(spec: &str) -> std::result::Result<Self, UrlError> {
        if spec == "local" {
            Ok(FilterUrl::Local)
        } else if REMOTE_SCHEMES.iter().any(|scheme| spec.starts_with(scheme)) {
            RemoteSpec::parse(spec)?;
            Ok(FilterUrl::Remote(spec.to_owned()))
        } else {
            Err(UrlError(format!(
                "filters must be local, resp://HOST:PORT or redis+cluster://HOST:PORT[,HOST:PORT...], got {spec:?}"
            )))
        }
    }
}

/// The schemes of remote filters: one server, or a cluster's seed nodes.
const REMOTE_SCHEMES: [&str; 3] = ["resp://", "resp+cluster://", "redis+cluster://"];

/// Where the rows a gate recorded and has not committed to the store yet are kept, for the
/// other gate processes to see (the `pending=` parameter of a remote filter URL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PendingRows {
    /// `pending=shared` (the default): in a hash per scope on the filter server, beside the
    /// scope's filter, so every gate process sharing the filters sees them. Needs a server that
    /// runs Lua scripts (Redis or Valkey with the module).
    Shared,
    /// `pending=local`: in this process only (one gate process per scope; any RESP server with
    /// the module's commands, `bloomgate serve` included).
    Local,
}

/// A remote filter URL taken apart: `resp://[USER:PASSWORD@]HOST:PORT[/DB][?PARAMS]` or
/// `redis+cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...][?PARAMS]`, PARAMS among
/// `pending=shared|local`, `wait=N` (replicas each pending write waits for) and
/// `wait_timeout=MS` (how long, default 1000).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RemoteSpec {
    /// A Redis Cluster (its seed nodes), or one server.
    pub cluster: bool,
    /// `HOST:PORT` of the server, or of each seed node.
    pub nodes: Vec<String>,
    /// `USER:PASSWORD@` (or `:PASSWORD@`) as given, or empty: put before every node's address.
    pub credentials: String,
    /// `/DB` of one server, or empty.
    pub database: String,
    /// Where uncommitted rows are kept.
    pub pending: PendingRows,
    /// Replicas each pending write waits for (`WAIT`), 0 = none, and for how long.
    pub wait_replicas: u32,
    /// How long a write waits for its replicas.
    pub wait_timeout_ms: u64,
}

impl RemoteSpec {
    /// Parses a remote filter URL; the error says what is wrong.
    pub fn parse(url: &str) -> std::result::Result<Self, UrlError> {
        let bad = |why: String| UrlError(format!("filter URL {}: {why}", redacted(url)));
        let (scheme, rest) = REMOTE_SCHEMES
            .iter()
            .find_map(|scheme| url.strip_prefix(scheme).map(|rest| (*scheme, rest)))
            .ok_or_else(|| bad("expected resp:// or redis+cluster://".into()))?;
        let cluster = scheme != "resp://";
        let (address, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (credentials, address) = match address.rfind('@') {
            Some(at) => (&address[..=at], &address[at + 1..]),
            None => ("", address),
        };
        let (hosts, database) = match address.find('/') {
            Some(slash) => (&address[..slash], &address[slash..]),
            None => (address, ""),
        };
        let nodes: Vec<String> = hosts
            .split(',')
            .filter(|node| !node.is_empty())
            .map(str::to_owned)
            .collect();
        if nodes.is_empty() || nodes.iter().any(|node| !node.contains(':')) {
            return Err(bad("expected HOST:PORT".into()));
        }
        if !cluster && nodes.len() > 1 {
            return Err(bad(
                "one server (several seed nodes are redis+cluster://)".into()
            ));
        }
        if cluster && !database.is_empty() {
            return Err(bad("a cluster has no database number".into()));
        }
        let mut spec = RemoteSpec {
            cluster,
            nodes,
            credentials: credentials.to_owned(),
            database: database.to_owned(),
            pending: PendingRows::Shared,
            wait_replicas: 0,
            wait_timeout_ms: 1000,
        };
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let number = |max: u64| {
                value
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n <= max)
                    .ok_or_else(|| bad(format!("{pair}: expected a number up to {max}")))
            };
            match name {
                "pending" => {
                    spec.pending = match value {
                        "shared" => PendingRows::Shared,
                        "local" => PendingRows::Local,
                        _ => return Err(bad(format!("{pair}: expected shared or local"))),
                    }
                }
                "wait" => spec.wait_replicas = number(64)? as u32,
                "wait_timeout" => spec.wait_timeout_ms = number(3_600_000)?.max(1),
                _ => {
                    return Err(bad(format!(
                        "unknown parameter {name:?} (pending, wait, wait_timeout)"
                    )))
                }
            }
        }
        Ok(spec)
    }

    /// The `redis://` URL of the node at `HOST:PORT`, with this spec's credentials and database.
    pub fn node_url(&self, node: &str) -> String {
        format!("redis://{}{node}{}", self.credentials, self.database)
    }
}

impl fmt::Display for FilterUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FilterUrl::Local => f.write_str("local"),
            FilterUrl::Remote(url) => f.write_str(url),
        }
    }
}

impl FilterUrl {
    /// The URL as [`Display`](fmt::Display) writes it, with a password replaced by `***`.
    pub fn redacted(&self) -> String {
        redacted(&self.to_string())
    }

    /// The gate's [`FilterMode`]; remote filters keep one key per scope,
    /// `{key_prefix}{SCOPE}` (the scope's id in braces: a hash tag).
    pub fn mode(&self, key_prefix: impl Into<String>) -> FilterMode {
        match self {
            FilterUrl::Local => FilterMode::Local,
            FilterUrl::Remote(url) => FilterMode::Remote {
                url: url.clone(),
                key_prefix: key_prefix.into(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_urls_parse_and_print_back() {
        for spec in [
            "sqlite:/tmp/feed.db",
            "sqlite:feed",
            "redis://127.0.0.1:6379/2",
            "postgres://gate@127.0.0.1:5432/feed",
            "postgresql://gate:pw@db/feed?table=seen_a&prepared=false",
        ] {
            let url: StoreUrl = spec.parse().unwrap();
            assert_eq!(url.to_string(), spec);
        }
        assert_eq!(
            "sqlite:/tmp/a.db".parse::<StoreUrl>().unwrap(),
            StoreUrl::Sqlite("/tmp/a.db".into())
        );
        assert_eq!(
            "sqlite:".parse::<StoreUrl>().unwrap_err().to_string(),
            "sqlite: needs a path, e.g. sqlite:/tmp/feed.db"
        );
        assert_eq!(
            "postgres://u@h/db".parse::<StoreUrl>().unwrap(),
            StoreUrl::Postgres("postgres://u@h/db".into())
        );
        for bad in [
            "",
            "/tmp/feed.db",
            "postgres:/h/db",
            "pg://h/db",
            "redis:/h",
            "local",
        ] {
            assert_eq!(
                bad.parse::<StoreUrl>().unwrap_err().to_string(),
                format!(
                    "store must be sqlite:PATH, redis://HOST:PORT or postgres://USER@HOST:PORT/DB, got {bad:?}"
                )
            );
        }
    }

    #[test]
    fn bad_postgres_table_names_are_refused() {
        for bad in ["Seen", "1seen", "seen;drop table meta", "se%22en", ""] {
            let spec = format!("postgres://u@h/db?table={bad}");
            assert_eq!(
                spec.parse::<StoreUrl>().unwrap_err().to_string(),
                format!(
                    "postgres URL: table={bad:?}: expected a plain name, [a-z_][a-z0-9_]{{0,40}}"
                )
            );
        }
        "postgres://u@h/db?table=feed_2"
            .parse::<StoreUrl>()
            .unwrap();
    }

    #[test]
    fn bad_postgres_parameters_are_refused_when_parsed() {
        for (param, says) in [
            (
                "prepared=maybe",
                "postgres URL: prepared=maybe: expected true or false",
            ),
            (
                "statement_timeout=5s",
                "postgres URL: statement_timeout=5s: expected milliseconds",
            ),
            (
                "sslmode=require",
                "postgres URL: sslmode=require: this build has no TLS",
            ),
            ("no_such_option=1", "postgres URL: "),
        ] {
            let spec = format!("postgres://u@h/db?table=t&{param}");
            let err = spec.parse::<StoreUrl>().unwrap_err().to_string();
            assert!(err.starts_with(says), "{spec}: {err}");
        }
        for good in [
            "postgres://u@h/db?prepared=false&statement_timeout=250",
            "postgresql://u@h:6000/db?sslmode=disable&connect_timeout=2&application_name=gate",
        ] {
            good.parse::<StoreUrl>().unwrap();
        }
    }

    #[test]
    fn filter_urls_parse_and_print_back() {
        assert_eq!("local".parse::<FilterUrl>().unwrap(), FilterUrl::Local);
        for spec in [
            "local",
            "resp://127.0.0.1:6384",
            "resp+cluster://h:1,h:2",
            "redis+cluster://h:7000",
        ] {
            assert_eq!(spec.parse::<FilterUrl>().unwrap().to_string(), spec);
        }
        for bad in ["", "Local", "redis://h:1", "sqlite:/tmp/f.db"] {
            assert_eq!(
                bad.parse::<FilterUrl>().unwrap_err().to_string(),
                format!(
                    "filters must be local, resp://HOST:PORT or redis+cluster://HOST:PORT[,HOST:PORT...], got {bad:?}"
                )
            );
        }
        let mode = FilterUrl::Remote("resp://h:1".into()).mode("bf:");
        assert!(matches!(
            mode,
            FilterMode::Remote { url, key_prefix } if url == "resp://h:1" && key_prefix == "bf:"
        ));
        assert!(matches!(FilterUrl::Local.mode("x"), FilterMode::Local));
    }

    #[test]
    fn datasets_sit_beside_the_store() {
        let url = StoreUrl::Sqlite("/tmp/dir/feed.db".into());
        assert_eq!(
            url.dataset("verify"),
            StoreUrl::Sqlite("/tmp/dir/feed-verify.db".into())
        );
        assert_eq!(
            StoreUrl::Sqlite("/tmp/feed".into()).dataset("trust"),
            StoreUrl::Sqlite("/tmp/feed-trust".into())
        );
        let redis = StoreUrl::Redis("redis://h:1".into());
        assert_eq!(redis.dataset("exact"), redis);

        let pg = |url: &str| url.parse::<StoreUrl>().unwrap();
        assert_eq!(
            pg("postgres://u@h/db").dataset("verify"),
            pg("postgres://u@h/db?table=seen_verify")
        );
        assert_eq!(
            pg("postgresql://u@h/db?prepared=false&table=feed&connect_timeout=2").dataset("trust"),
            pg("postgresql://u@h/db?prepared=false&connect_timeout=2&table=feed_trust")
        );
        // The name is sanitized to a plain identifier's characters.
        assert_eq!(
            pg("postgres://u@h/db?").dataset("Run 2-b"),
            pg("postgres://u@h/db?table=seen_run_2_b")
        );
        // A data set's URL parses again (its table is a valid name).
        let verify = pg("postgres://u@h/db").dataset("verify").to_string();
        assert!(verify.parse::<StoreUrl>().is_ok(), "{verify}");
    }

    #[test]
    fn passwords_stay_out_of_messages() {
        assert_eq!(
            redacted("postgres://gate:s3cret@h:5432/db?table=t"),
            "postgres://gate:***@h:5432/db?table=t"
        );
        assert_eq!(redacted("postgres://gate@h/db"), "postgres://gate@h/db");
        assert_eq!(redacted("postgres://h/db?a=b@c"), "postgres://h/db?a=b@c");
        let url: StoreUrl = "redis://:pw@127.0.0.1:6379/2".parse().unwrap();
        assert_eq!(url.redacted(), "redis://:***@127.0.0.1:6379/2");
        assert_eq!(
            StoreUrl::Sqlite("/tmp/a:b@c.db".into()).redacted(),
            "sqlite:/tmp/a:b@c.db"
        );
    }

    #[test]
    fn a_fresh_sqlite_store_starts_empty_with_a_new_identity() {
        let dir = tempfile::tempdir().unwrap();
        let url = StoreUrl::Sqlite(dir.path().join("seen.db"));
        let store = url.open("", true).unwrap();
        let seen = [crate::Seen { item: 7, at_ms: 10 }];
        store.record(1, &seen).unwrap();
        let identity = store.identity().unwrap();
        drop(store);
        let reopened = url.open("", false).unwrap();
        assert_eq!(reopened.identity().unwrap(), identity);
        let mut out = Vec::new();
        reopened.load(1, 0, &mut out).unwrap();
        assert_eq!(out, seen);
        drop(reopened);
        let fresh = url.open("", true).unwrap();
        assert_ne!(fresh.identity().unwrap(), identity);
        out.clear();
        fresh.load(1, 0, &mut out).unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn a_store_that_cannot_open_says_which() {
        let url = StoreUrl::Sqlite("/nonexistent-dir/seen.db".into());
        let Err(err) = url.open("", false) else {
            panic!("opened a file in a missing directory");
        };
        assert_eq!(err.to_string(), "opening /nonexistent-dir/seen.db");
        assert!(std::error::Error::source(&err).is_some());
    }
}
