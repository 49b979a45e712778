//! Durable storage: checksummed snapshots plus an append-only log (AOF) of every write, tied
//! together by a manifest.
//!
//! Files in the data directory (all created mode 0600):
//! - `dump.bgs` — the snapshot ([`snapshot`]), covering every log generation below its own;
//! - `appendonly.<gen>.aof` — log generations ([`log`]), written by the [`writer`] thread;
//! - `manifest` — which snapshot and log generations make up the dataset ([`manifest`]).
//!
//! On start: remove stale temp files, check the files against the manifest (a missing part
//! refuses to start), load the snapshot (any damage refuses, naming file and offset), replay the
//! logs from its generation on (a torn final record is truncated with a warning; other damage
//! refuses unless `--repair-log`).

pub mod log;
pub mod manifest;
pub mod snapshot;
pub mod writer;

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use crate::keyspace::Db;

pub use log::{aof_path, remove_logs_before};
pub use manifest::Manifest;
pub use snapshot::{read_snapshot, write_snapshot, write_snapshot_owned};
pub use writer::AofWriter;

/// How the append-only log is flushed to disk (`appendfsync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// fsync before acknowledging each write (group commit).
    Always,
    /// fsync once a second.
    Everysec,
    /// leave flushing to the OS.
    No,
}

impl FsyncPolicy {
    /// The name `CONFIG GET appendfsync` and INFO show.
    pub fn name(self) -> &'static str {
        match self {
            FsyncPolicy::Always => "always",
            FsyncPolicy::Everysec => "everysec",
            FsyncPolicy::No => "no",
        }
    }

    /// The policy called `s` (any case).
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Some(FsyncPolicy::Always),
            "everysec" => Some(FsyncPolicy::Everysec),
            "no" => Some(FsyncPolicy::No),
            _ => None,
        }
    }
}

/// The snapshot's file name in the data directory.
pub const SNAPSHOT_FILE: &str = "dump.bgs";
const SNAPSHOT_TMP: &str = "dump.bgs.tmp";
/// Temp files a crash (or a failed write) can leave behind.
const TEMP_FILES: [&str; 2] = [SNAPSHOT_TMP, "manifest.tmp"];

/// Open options for data files: readable and writable by the server's user only.
pub fn private_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.mode(0o600);
    options
}

/// Creates (truncating) a data file with mode 0600.
pub fn create_private(path: &Path) -> io::Result<File> {
    private_options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
}

/// fsyncs the directory itself (a created, renamed or removed file is durable after it).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// What loading found.
pub struct Loaded {
    /// The keyspace.
    pub db: Db,
    /// The log generation to keep appending to.
    pub generation: u64,
    /// Bytes in the log generation appended to next.
    pub aof_size: u64,
    /// The dataset's files as loaded (the writer records its generation in it).
    pub manifest: Manifest,
    /// What loading repaired or removed, for the log.
    pub warnings: Vec<String>,
}

/// Removes temp files an interrupted write left (at startup, before anything writes); returns
/// what it removed.
pub fn remove_stale_temp_files(dir: &Path) -> io::Result<Vec<String>> {
    let mut removed = Vec::new();
    for name in TEMP_FILES {
        let path = dir.join(name);
        if path.exists() {
            fs::remove_file(&path)?;
            removed.push(format!(
                "removed {} left by an interrupted write",
                path.display()
            ));
        }
    }
    Ok(removed)
}

/// What loading builds the dataset in: persistence knows files and records, not commands, so
/// the command layer replays the logged commands (`commands::Replayer`).
pub trait Replay {
    /// The keyspace being built (the snapshot's entries go straight into it).
    fn db(&mut self) -> &mut Db;
    /// Runs one logged command against [`Replay::db`].
    fn apply(&mut self, args: &[Vec<u8>]);
}

/// Loads the snapshot and replays the logs after it into `target`'s keyspace (taken out of it
/// into [`Loaded::db`] at the end). `repair` truncates a corrupt log at the damage (keeping a
/// copy) instead of refusing.
pub fn load(dir: &Path, repair: bool, target: &mut dyn Replay) -> anyhow::Result<Loaded> {
    let mut warnings = Vec::new();
    let listed = Manifest::read(dir)?;
    let snapshot_path = dir.join(SNAPSHOT_FILE);
    let snapshot = if snapshot_path.exists() {
        Some(read_snapshot(&snapshot_path)?)
    } else {
        None
    };
    let snapshot_gen = snapshot.as_ref().map(|(gen, _)| *gen);
    let present = log::log_generations(dir)?;
    let replay = Manifest::check(listed.as_ref(), dir, snapshot_gen, &present)?;
    if let Some((_, entries)) = snapshot {
        for (key, entry) in entries {
            let expires_at = entry.expires_at();
            target.db().insert(key, entry.data, expires_at);
        }
    }
    let first = snapshot_gen.unwrap_or(1);
    // Logs the snapshot covers (left over from a crash after its rename).
    remove_logs_before(dir, first)?;
    let mut generation = first;
    let mut aof_size = 0;
    for gen in replay {
        aof_size = log::replay_log(&aof_path(dir, gen), target, repair, &mut warnings)?;
        generation = gen;
    }
    Ok(Loaded {
        db: std::mem::take(target.db()),
        generation,
        aof_size,
        manifest: Manifest {
            snapshot: snapshot_gen,
            first,
            last: generation,
        },
        warnings,
    })
}

#[cfg(test)]
pub(crate) mod testing {
    //! A keyspace that runs the dialect's commands directly (no command layer), for the
    //! persistence tests: what they write and replay is BF.*/CF.* only.
    use bloomgate_dialect::commands::{self as dialect, Outcome, WrongType};
    use bloomgate_dialect::Config;

    use super::Replay;
    use crate::keyspace::{Db, Value};
    use crate::resp::Reply;

    /// Keys and the dialect's settings.
    #[derive(Default)]
    pub struct Keys {
        pub db: Db,
        pub config: Config,
    }

    impl dialect::Host for Keys {
        fn proto(&self) -> u8 {
            2
        }
        fn config(&self) -> &Config {
            &self.config
        }
        fn memory_budget(&self) -> u64 {
            u64::MAX
        }
        fn value(&mut self, key: &[u8]) -> Result<Option<&Value>, WrongType> {
            Ok(self.db.value(key, 0))
        }
        fn value_mut(&mut self, key: &[u8]) -> Result<Option<&mut Value>, WrongType> {
            Ok(self.db.value_mut(key, 0))
        }
        fn create(&mut self, key: &[u8], value: Value) {
            self.db.insert(key.to_vec(), value, None);
        }
    }

    impl Keys {
        /// Runs a dialect command.
        pub fn execute<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Outcome {
            let args: Vec<&[u8]> = args.iter().map(AsRef::as_ref).collect();
            let info = dialect::lookup(args[0]).expect("a dialect command");
            let outcome = dialect::execute(self, info, &args);
            self.db.settle();
            outcome
        }

        /// Runs a dialect command given as space-separated words.
        pub fn run(&mut self, line: &str) -> Reply {
            let args: Vec<&str> = line.split(' ').collect();
            self.execute(&args).reply
        }
    }

    impl Replay for Keys {
        fn db(&mut self) -> &mut Db {
            &mut self.db
        }
        fn apply(&mut self, args: &[Vec<u8>]) {
            self.execute(args);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::testing::Keys;
    use super::*;
    use crate::keyspace::Value;

    /// Loads `dir` with the default settings.
    pub fn load_default(dir: &Path, repair: bool) -> anyhow::Result<Loaded> {
        load(dir, repair, &mut Keys::default())
    }

    pub fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("bloomgate-persist-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn add(i: usize) -> Vec<u8> {
        log::encode_record(&[vec![
            b"BF.ADD".to_vec(),
            b"k".to_vec(),
            format!("i{i}").into_bytes(),
        ]])
    }

    fn items(loaded: &Loaded) -> u64 {
        let Some(Value::Bloom(chain)) = loaded.db.value(b"k", 0) else {
            panic!()
        };
        chain.items()
    }

    #[test]
    fn torn_tail_truncated_corruption_refused_or_repaired() {
        let dir = temp_dir("aof");
        let path = aof_path(&dir, 1);
        let mut data = log::AOF_MAGIC.to_vec();
        for i in 0..10 {
            data.extend(add(i));
        }
        let full = data.len();
        data.extend(&add(10)[..9]);
        fs::write(&path, &data).unwrap();
        let loaded = load_default(&dir, false).unwrap();
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        assert_eq!(fs::metadata(&path).unwrap().len(), full as u64);
        assert_eq!(items(&loaded), 10);

        // Damage inside a record that is followed by others: refuse, naming file and offset.
        let mut bad = fs::read(&path).unwrap();
        bad[log::AOF_MAGIC.len() + 20] ^= 1;
        fs::write(&path, &bad).unwrap();
        let err = load_default(&dir, false).err().unwrap().to_string();
        assert!(
            err.contains("appendonly.1.aof") && err.contains("offset 16"),
            "{err}"
        );
        assert_eq!(
            fs::read(&path).unwrap(),
            bad,
            "a refused log is left as it is"
        );
        // --repair-log: a copy is kept, the log is cut at the damage.
        let loaded = load_default(&dir, true).unwrap();
        assert!(loaded.db.value(b"k", 0).is_none());
        assert_eq!(fs::metadata(&path).unwrap().len(), 16);
        let copies: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                name.contains(".corrupt-").then_some(name)
            })
            .collect();
        assert_eq!(copies.len(), 1);
        assert_eq!(fs::read(dir.join(&copies[0])).unwrap(), bad);
        let _ = fs::remove_dir_all(&dir);
    }

    /// Replaying the log under a different cf-* configuration rebuilds the same cuckoo filter:
    /// an auto-created filter is logged as the header of its empty shape.
    #[test]
    fn cuckoo_log_replay_is_exact_under_another_config() {
        let mut store = Keys::default();
        store.config.cf_bucket_size = 4;
        store.config.cf_initial_size = 64;
        let mut log = Vec::new();
        for i in 0..300 {
            let args = vec![
                b"CF.ADD".to_vec(),
                b"c".to_vec(),
                format!("i{i}").into_bytes(),
            ];
            log.extend(store.execute(&args).propagate.into_commands(&args));
        }
        let args = vec![b"CF.DEL".to_vec(), b"c".to_vec(), b"i7".to_vec()];
        log.extend(store.execute(&args).propagate.into_commands(&args));
        let mut replayed = Keys::default();
        for args in &log {
            replayed.execute(args);
        }
        let (Some(Value::Cuckoo(a)), Some(Value::Cuckoo(b))) =
            (store.db.value(b"c", 0), replayed.db.value(b"c", 0))
        else {
            panic!()
        };
        assert_eq!(a.bucket_size(), 4);
        assert_eq!(a, b);
    }

    #[test]
    fn stale_temp_files_are_removed() {
        let dir = temp_dir("tmpfiles");
        fs::write(dir.join(SNAPSHOT_TMP), b"partial").unwrap();
        assert_eq!(remove_stale_temp_files(&dir).unwrap().len(), 1);
        assert!(!dir.join(SNAPSHOT_TMP).exists());
        let _ = fs::remove_dir_all(&dir);
    }
}
