//! Stores and filters named by URL: the one place a store's scheme is recognised and the store
//! it names is opened, and where the filters' URLs are told apart from `local`.
//!
//! Stores: `sqlite:PATH` (a SQLite file) or `redis://HOST:PORT[/DB]` (a Redis server, every key
//! under a prefix). Filters: `local` (in this process), `resp://HOST:PORT` (a bloomgate server,
//! or Redis with the bloomgate module), or `redis+cluster://HOST:PORT[,HOST:PORT...]` (also
//! spelled `resp+cluster://`: a Redis Cluster running the module).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::{Error, ExactStore, FilterMode, RedisStore, Result, SqliteStore};

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
        } else {
            Err(UrlError(format!(
                "store must be sqlite:PATH or redis://HOST:PORT, got {spec:?}"
            )))
        }
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            StoreUrl::Redis(url) => f.write_str(url),
        }
    }
}

impl StoreUrl {
    /// A store beside this one for a separate data set called `name`: the SQLite file
    /// `feed.db` becomes `feed-{name}.db` in the same directory; a Redis URL stays as it is
    /// (data sets on one server are kept apart by the key prefix given to [`StoreUrl::open`]).
    pub fn dataset(&self, name: &str) -> StoreUrl {
        match self {
            StoreUrl::Sqlite(path) => StoreUrl::Sqlite(dataset_path(path, name)),
            StoreUrl::Redis(url) => StoreUrl::Redis(url.clone()),
        }
    }

    /// Opens the store. Every key of a Redis store starts with `key_prefix` (a SQLite file is a
    /// namespace of its own). `fresh` empties the store first — the SQLite file is removed with
    /// its `-wal` and `-shm` files, the Redis prefix's keys are deleted — so it is a new store,
    /// with a new identity.
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
                    .map_err(|e| failed(format!("connecting to {url}"))(e.into()))?;
                if fresh {
                    store.clear()?;
                }
                Box::new(store)
            }
        })
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
        } else if ["resp://", "resp+cluster://", "redis+cluster://"]
            .iter()
            .any(|scheme| spec.starts_with(scheme))
        {
            Ok(FilterUrl::Remote(spec.to_owned()))
        } else {
            Err(UrlError(format!(
                "filters must be local, resp://HOST:PORT or redis+cluster://HOST:PORT[,HOST:PORT...], got {spec:?}"
            )))
        }
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
    /// The gate's [`FilterMode`]; remote filters keep one key per scope, `{key_prefix}{scope}`.
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
        for bad in ["", "/tmp/feed.db", "postgres://h/db", "redis:/h", "local"] {
            assert_eq!(
                bad.parse::<StoreUrl>().unwrap_err().to_string(),
                format!("store must be sqlite:PATH or redis://HOST:PORT, got {bad:?}")
            );
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
