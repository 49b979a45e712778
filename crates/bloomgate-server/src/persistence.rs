//! Durable storage: checksummed snapshots plus an append-only log (AOF) of every write.
//!
//! Files in the data directory:
//! - `dump.bgs` — snapshot: magic, the AOF generation it covers up to, then each key with its
//!   expiry, a type byte (1 = Bloom chain, 2 = cuckoo filter, 3 = windowed filter), the payload length and the filter
//!   as RedisBloom's SCANDUMP stream (header, then link or sub-filter bytes), then a CRC32 of
//!   everything before. Written to a temp file, fsynced, renamed, directory fsynced.
//! - `appendonly.<gen>.aof` — log generations: magic, then records `u32 len, u32 crc32, payload`
//!   where the payload is one or more RESP-encoded commands applied atomically (a MULTI/EXEC
//!   is one record). A snapshot of generation G makes logs below G obsolete.
//!
//! On start: load the snapshot (any damage refuses to start, naming file and offset), replay the
//! logs from its generation on, truncating a torn final record with a warning; a damaged record
//! followed by more data is corruption and refuses to start.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::commands::{execute, Config, FsyncPolicy, Session, Store};
use bloomgate_dialect::value::Kind;

use crate::keyspace::{Db, Entry, Snapshot, Value};
use crate::resp::{Encode, Reply, RequestParser};

pub const SNAPSHOT_FILE: &str = "dump.bgs";
const SNAPSHOT_TMP: &str = "dump.bgs.tmp";
const SNAPSHOT_MAGIC: &[u8; 16] = b"BLOOMGATE-SNAP01";
const AOF_MAGIC: &[u8; 16] = b"BLOOMGATE-AOF-01";
/// The snapshot's type byte of each dialect value kind.
fn type_byte(kind: Kind) -> u8 {
    match kind {
        Kind::Bloom => 1,
        Kind::Cuckoo => 2,
        Kind::Windowed => 3,
    }
}
/// Keys longer than Redis' bulk limit cannot exist; a larger length is corruption.
const MAX_KEY_LEN: u32 = 512 * 1024 * 1024;

pub fn aof_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("appendonly.{generation}.aof"))
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A writer that checksums what passes through it.
struct CrcWriter<W: Write> {
    inner: W,
    hasher: crc32fast::Hasher,
}

impl<W: Write> Write for CrcWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes a snapshot of `entries` covering logs below `generation`; returns its size in bytes.
pub fn write_snapshot(
    dir: &Path,
    entries: &[(Vec<u8>, Entry)],
    generation: u64,
) -> io::Result<u64> {
    let tmp = dir.join(SNAPSHOT_TMP);
    let file = File::create(&tmp)?;
    let mut w = CrcWriter {
        inner: BufWriter::with_capacity(1 << 20, file),
        hasher: crc32fast::Hasher::new(),
    };
    w.write_all(SNAPSHOT_MAGIC)?;
    w.write_all(&generation.to_le_bytes())?;
    w.write_all(&(entries.len() as u64).to_le_bytes())?;
    for (key, entry) in entries {
        w.write_all(&(key.len() as u32).to_le_bytes())?;
        w.write_all(key)?;
        w.write_all(&entry.expires_at.unwrap_or(-1).to_le_bytes())?;
        let value: &Value = &entry.value;
        w.write_all(&[type_byte(value.kind())])?;
        let (header, chunks) = value.dump_layout();
        let body: u64 = chunks.iter().map(|&(_, len)| len).sum();
        w.write_all(&(header.len() as u64 + body).to_le_bytes())?;
        for (_, data) in value.dump_stream() {
            w.write_all(&data)?;
        }
    }
    let crc = w.hasher.finalize();
    let mut inner = w.inner;
    inner.write_all(&crc.to_le_bytes())?;
    let file = inner.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    let size = file.metadata()?.len();
    drop(file);
    fs::rename(&tmp, dir.join(SNAPSHOT_FILE))?;
    sync_dir(dir)?;
    Ok(size)
}

/// A reader that checksums and counts what it reads, for precise corruption reports.
struct SnapshotReader {
    inner: BufReader<File>,
    hasher: crc32fast::Hasher,
    offset: u64,
    len: u64,
    path: PathBuf,
}

impl SnapshotReader {
    fn fail(&self, what: &str) -> anyhow::Error {
        anyhow::anyhow!(
            "snapshot {} is corrupt at offset {}: {what}; refusing to start (move the file away \
             to start without it)",
            self.path.display(),
            self.offset
        )
    }

    fn bytes(&mut self, n: u64) -> anyhow::Result<Vec<u8>> {
        if n > self.len - self.offset {
            return Err(self.fail(&format!("truncated (need {n} more bytes)")));
        }
        let mut buf = vec![0; n as usize];
        self.inner
            .read_exact(&mut buf)
            .with_context(|| format!("reading {}", self.path.display()))?;
        self.hasher.update(&buf);
        self.offset += n;
        Ok(buf)
    }

    fn array<const N: usize>(&mut self) -> anyhow::Result<[u8; N]> {
        Ok(self.bytes(N as u64)?.try_into().expect("exact length"))
    }

    fn u64(&mut self) -> anyhow::Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
}

/// Reads a snapshot: its generation and entries. Every inconsistency is an error naming the file
/// and offset.
pub fn read_snapshot(path: &Path) -> anyhow::Result<(u64, Snapshot)> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let len = file.metadata()?.len();
    let mut r = SnapshotReader {
        inner: BufReader::with_capacity(1 << 20, file),
        hasher: crc32fast::Hasher::new(),
        offset: 0,
        len,
        path: path.to_path_buf(),
    };
    if &r.array::<16>()? != SNAPSHOT_MAGIC {
        return Err(r.fail("not a bloomgate snapshot (bad magic)"));
    }
    let generation = r.u64()?;
    let count = r.u64()?;
    let mut entries = Vec::new();
    for _ in 0..count {
        let key_len = u32::from_le_bytes(r.array()?);
        if key_len > MAX_KEY_LEN {
            return Err(r.fail("key length out of range"));
        }
        let key = r.bytes(u64::from(key_len))?;
        let expires = i64::from_le_bytes(r.array()?);
        let kind = r.array::<1>()?[0];
        let payload_len = r.u64()?;
        let Some(kind) = Kind::ALL.into_iter().find(|&k| type_byte(k) == kind) else {
            return Err(r.fail(&format!("unknown value type {kind}")));
        };
        let value = read_value(&mut r, kind, &key, payload_len)?;
        let entry = Entry {
            value: Arc::new(value),
            expires_at: (expires >= 0).then_some(expires),
        };
        entries.push((key, entry));
    }
    let computed = r.hasher.clone().finalize();
    let stored = u32::from_le_bytes(r.array()?);
    if stored != computed {
        r.offset -= 4;
        return Err(r.fail("checksum mismatch"));
    }
    if r.offset != r.len {
        return Err(r.fail("trailing bytes after checksum"));
    }
    Ok((generation, entries))
}

/// A value stored as its SCANDUMP stream: the header, then the chunks LOADCHUNK takes, read in
/// the pieces SCANDUMP would produce (each inside one link or sub-filter).
fn read_value(
    r: &mut SnapshotReader,
    kind: Kind,
    key: &[u8],
    payload_len: u64,
) -> anyhow::Result<Value> {
    let prefix = r.bytes((kind.header_prefix() as u64).min(payload_len))?;
    let header_len = kind
        .header_len(&prefix)
        .ok_or_else(|| r.fail("bad filter header"))?;
    if header_len as u64 > payload_len {
        return Err(r.fail("filter header longer than its value"));
    }
    let mut header = prefix;
    header.extend(r.bytes(header_len as u64 - header.len() as u64)?);
    let mut value = kind.from_header(&header).map_err(|e| {
        r.fail(&format!(
            "invalid filter header for key {:?}: {e}",
            String::from_utf8_lossy(key)
        ))
    })?;
    let (_, chunks) = value.dump_layout();
    let body: u64 = chunks.iter().map(|&(_, len)| len).sum();
    if header_len as u64 + body != payload_len {
        return Err(r.fail("filter size does not match its header"));
    }
    for (iter, len) in chunks {
        let data = r.bytes(len)?;
        value.load_chunk(iter, &data).map_err(|e| r.fail(e))?;
    }
    Ok(value)
}

/// Encodes commands as one log record: `u32 len, u32 crc32, payload`.
pub fn encode_record(commands: &[Vec<Vec<u8>>]) -> Vec<u8> {
    let mut payload = Vec::new();
    for args in commands {
        Reply::Array(args.iter().map(|a| Reply::Bulk(a.clone())).collect()).encode(2, &mut payload);
    }
    let mut record = Vec::with_capacity(payload.len() + 8);
    record.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    record.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    record.extend_from_slice(&payload);
    record
}

/// What loading found.
pub struct Loaded {
    pub db: Db,
    /// The log generation to keep appending to.
    pub generation: u64,
    pub aof_size: u64,
    pub warnings: Vec<String>,
}

fn log_generations(dir: &Path) -> io::Result<Vec<u64>> {
    let mut gens = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if let Some(gen) = name
            .strip_prefix("appendonly.")
            .and_then(|n| n.strip_suffix(".aof"))
        {
            if let Ok(gen) = gen.parse::<u64>() {
                gens.push(gen);
            }
        }
    }
    gens.sort_unstable();
    Ok(gens)
}

/// Loads the snapshot and replays the logs after it into a fresh keyspace.
pub fn load(dir: &Path, config: &Config) -> anyhow::Result<Loaded> {
    let mut replay_config = config.clone();
    // Replay must rebuild what was acknowledged even if maxmemory has been lowered since.
    replay_config.maxmemory = 0;
    let mut store = Store::new(replay_config);
    let mut warnings = Vec::new();
    let snapshot = dir.join(SNAPSHOT_FILE);
    let mut generation = 1;
    if snapshot.exists() {
        let (gen, entries) = read_snapshot(&snapshot)?;
        generation = gen;
        for (key, entry) in entries {
            let value = Arc::try_unwrap(entry.value).unwrap_or_else(|v| (*v).clone());
            store.db.insert(key, value, entry.expires_at);
        }
    }
    let mut aof_size = 0;
    for gen in log_generations(dir)? {
        let path = aof_path(dir, gen);
        if gen < generation {
            // Covered by the snapshot (left over from a crash after the snapshot's rename).
            fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
            continue;
        }
        aof_size = replay_log(&path, &mut store, &mut warnings)?;
        generation = gen;
    }
    Ok(Loaded {
        db: store.db,
        generation,
        aof_size,
        warnings,
    })
}

/// Replays one log file into `store`; truncates a torn final record. Returns the file's size.
fn replay_log(path: &Path, store: &mut Store, warnings: &mut Vec<String>) -> anyhow::Result<u64> {
    let data = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let corrupt = |offset: usize, what: &str| {
        anyhow::anyhow!(
            "append-only log {} is corrupt at offset {offset}: {what}; refusing to start",
            path.display()
        )
    };
    if data.len() < AOF_MAGIC.len() {
        if !AOF_MAGIC.starts_with(&data) {
            bail!(corrupt(0, "not a bloomgate log (bad magic)"));
        }
        truncate(path, 0, &data, warnings)?;
        let mut f = OpenOptions::new().write(true).open(path)?;
        f.write_all(AOF_MAGIC)?;
        f.sync_all()?;
        return Ok(AOF_MAGIC.len() as u64);
    }
    if &data[..16] != AOF_MAGIC {
        bail!(corrupt(0, "not a bloomgate log (bad magic)"));
    }
    let mut session = Session::new(0, false);
    let mut offset = AOF_MAGIC.len();
    while offset < data.len() {
        let rest = &data[offset..];
        if rest.len() < 8 {
            return truncate(path, offset, &data, warnings);
        }
        let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
        if rest.len() - 8 < len {
            return truncate(path, offset, &data, warnings);
        }
        let payload = &rest[8..8 + len];
        if crc32fast::hash(payload) != crc {
            if offset + 8 + len == data.len() {
                return truncate(path, offset, &data, warnings);
            }
            bail!(corrupt(offset, "record checksum mismatch"));
        }
        let mut parser = RequestParser::default();
        parser.extend(payload);
        loop {
            match parser.next_command() {
                Ok(Some(args)) => {
                    execute(store, &mut session, &args, true);
                }
                Ok(None) if parser.buffered() == 0 => break,
                Ok(None) => bail!(corrupt(offset, "incomplete command in record")),
                Err(e) => bail!(corrupt(offset, &format!("bad command encoding: {}", e.0))),
            }
        }
        offset += 8 + len;
    }
    Ok(data.len() as u64)
}

fn truncate(
    path: &Path,
    offset: usize,
    data: &[u8],
    warnings: &mut Vec<String>,
) -> anyhow::Result<u64> {
    warnings.push(format!(
        "append-only log {}: truncated a torn final record at offset {offset} ({} bytes dropped)",
        path.display(),
        data.len() - offset
    ));
    let file = OpenOptions::new().write(true).open(path)?;
    file.set_len(offset as u64)?;
    file.sync_all()?;
    Ok(offset as u64)
}

/// Segment tag for "whatever generation the writer has open".
const CURRENT_GENERATION: u64 = u64::MAX;

/// Records waiting to be written, tagged with their log generation.
struct Queue {
    segments: VecDeque<(u64, Vec<u8>)>,
    /// Total bytes ever queued (record sequence numbers are offsets in this stream).
    queued: u64,
    shutdown: bool,
}

/// The log writer: connections queue records (under the store lock, so log order is execution
/// order); one thread writes and fsyncs them. With `always`, many clients' records share one
/// fsync (group commit) and each client awaits [`AofWriter::wait_durable`] before replying.
pub struct AofWriter {
    queue: Mutex<Queue>,
    wake: Condvar,
    durable: tokio::sync::watch::Sender<u64>,
    policy: AtomicU8,
    size: AtomicU64,
    fsync_micros_total: AtomicU64,
    fsyncs: AtomicU64,
    dir: PathBuf,
}

fn policy_code(p: FsyncPolicy) -> u8 {
    match p {
        FsyncPolicy::Always => 0,
        FsyncPolicy::Everysec => 1,
        FsyncPolicy::No => 2,
    }
}

impl AofWriter {
    /// Opens (creating if needed) generation `generation` for appending and starts the writer
    /// thread.
    pub fn start(dir: &Path, generation: u64, policy: FsyncPolicy) -> anyhow::Result<Arc<Self>> {
        let file = open_log(dir, generation)?;
        let size = file.metadata()?.len();
        let writer = Arc::new(Self {
            queue: Mutex::new(Queue {
                segments: VecDeque::new(),
                queued: 0,
                shutdown: false,
            }),
            wake: Condvar::new(),
            durable: tokio::sync::watch::channel(0).0,
            policy: AtomicU8::new(policy_code(policy)),
            size: AtomicU64::new(size),
            fsync_micros_total: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
            dir: dir.to_path_buf(),
        });
        let thread_writer = writer.clone();
        std::thread::Builder::new()
            .name("aof-writer".into())
            .spawn(move || thread_writer.run(file, generation))?;
        Ok(writer)
    }

    pub fn set_policy(&self, policy: FsyncPolicy) {
        self.policy.store(policy_code(policy), Ordering::Relaxed);
    }

    pub fn is_always(&self) -> bool {
        self.policy.load(Ordering::Relaxed) == 0
    }

    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Relaxed)
    }

    /// (number of fsyncs, total fsync microseconds).
    pub fn fsync_stats(&self) -> (u64, u64) {
        (
            self.fsyncs.load(Ordering::Relaxed),
            self.fsync_micros_total.load(Ordering::Relaxed),
        )
    }

    /// Queues commands as one record; returns its sequence number for [`Self::wait_durable`].
    pub fn append(&self, commands: &[Vec<Vec<u8>>]) -> u64 {
        let record = encode_record(commands);
        let mut q = self.queue.lock().expect("aof queue");
        q.queued += record.len() as u64;
        // Records join the newest segment (its generation, or the current one if none).
        match q.segments.back_mut() {
            Some((_, bytes)) => bytes.extend_from_slice(&record),
            None => q.segments.push_back((CURRENT_GENERATION, record)),
        }
        let seq = q.queued;
        drop(q);
        self.wake.notify_one();
        seq
    }

    /// Switches later records to log generation `generation` (called under the store lock at the
    /// instant a snapshot copy is taken).
    pub fn rotate(&self, generation: u64) {
        let mut q = self.queue.lock().expect("aof queue");
        q.segments.push_back((generation, Vec::new()));
        drop(q);
        self.wake.notify_one();
    }

    /// Resolves once every record up to `seq` is written (and fsynced under `always`).
    pub async fn wait_durable(&self, seq: u64) {
        let mut rx = self.durable.subscribe();
        let _ = rx.wait_for(|&d| d >= seq).await;
    }

    /// Sequence number of the last queued record.
    pub fn queued(&self) -> u64 {
        self.queue.lock().expect("aof queue").queued
    }

    /// Whether every record up to `seq` has been written to the file (not necessarily fsynced).
    pub fn written_up_to(&self, seq: u64) -> bool {
        *self.durable.borrow() >= seq
    }

    /// Writes everything queued, fsyncs and stops the thread.
    pub fn shutdown(&self) {
        let mut q = self.queue.lock().expect("aof queue");
        q.shutdown = true;
        drop(q);
        self.wake.notify_one();
        let mut rx = self.durable.subscribe();
        let target = self.queue.lock().expect("aof queue").queued;
        let deadline = Instant::now() + Duration::from_secs(30);
        while *rx.borrow_and_update() < target && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn run(&self, mut file: File, mut generation: u64) {
        let mut last_sync = Instant::now();
        let mut unsynced = false;
        loop {
            let (segments, target, shutdown) = {
                let mut q = self.queue.lock().expect("aof queue");
                if q.segments.is_empty() && !q.shutdown {
                    q = self
                        .wake
                        .wait_timeout(q, Duration::from_millis(200))
                        .expect("aof queue")
                        .0;
                }
                (std::mem::take(&mut q.segments), q.queued, q.shutdown)
            };
            let result = (|| -> io::Result<()> {
                for (gen, bytes) in segments {
                    if gen != CURRENT_GENERATION && gen != generation {
                        file.sync_all()?;
                        file = open_log(&self.dir, gen)?;
                        generation = gen;
                        self.size.store(file.metadata()?.len(), Ordering::Relaxed);
                    }
                    if !bytes.is_empty() {
                        file.write_all(&bytes)?;
                        self.size.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                        unsynced = true;
                    }
                }
                let policy = self.policy.load(Ordering::Relaxed);
                let due = policy == 0
                    || (policy == 1 && last_sync.elapsed() >= Duration::from_secs(1))
                    || shutdown;
                if unsynced && due {
                    let started = Instant::now();
                    file.sync_data()?;
                    self.fsyncs.fetch_add(1, Ordering::Relaxed);
                    self.fsync_micros_total
                        .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
                    last_sync = Instant::now();
                    unsynced = false;
                }
                Ok(())
            })();
            if let Err(e) = result {
                // Acknowledging writes that are not durable is never acceptable: stop.
                eprintln!("bloomgate: fatal: writing the append-only log failed: {e}");
                std::process::exit(1);
            }
            self.durable.send_replace(target);
            if shutdown {
                return;
            }
        }
    }
}

/// Opens a log generation for appending, writing the magic (and fsyncing the directory) if new.
fn open_log(dir: &Path, generation: u64) -> io::Result<File> {
    let path = aof_path(dir, generation);
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(&path)?;
    if file.seek(SeekFrom::End(0))? == 0 {
        file.write_all(AOF_MAGIC)?;
        file.sync_all()?;
        sync_dir(dir)?;
    }
    Ok(file)
}

/// Deletes log generations below `generation` (after a snapshot covering them is durable).
pub fn remove_logs_before(dir: &Path, generation: u64) -> io::Result<()> {
    for gen in log_generations(dir)? {
        if gen < generation {
            fs::remove_file(aof_path(dir, gen))?;
        }
    }
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::Config;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("bloomgate-persist-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn run(store: &mut Store, line: &str) -> Reply {
        let args: Vec<Vec<u8>> = line.split(' ').map(|w| w.as_bytes().to_vec()).collect();
        execute(store, &mut Session::new(1, false), &args, false).reply
    }

    /// A Bloom chain at `k` and a grown, partly deleted cuckoo filter at `c`.
    fn store_with(items: usize) -> Store {
        let mut store = Store::new(Config::default());
        run(&mut store, "CF.RESERVE c 8 BUCKETSIZE 2 EXPANSION 2");
        for i in 0..items {
            run(&mut store, &format!("BF.ADD k i{i}"));
            run(&mut store, &format!("CF.ADD c i{i}"));
        }
        run(&mut store, "CF.DEL c i0");
        store
    }

    #[test]
    fn snapshot_round_trip_and_corruption_refused() {
        let dir = temp_dir("snap");
        let store = store_with(500);
        write_snapshot(&dir, &store.db.snapshot(), 7).unwrap();
        let (gen, entries) = read_snapshot(&dir.join(SNAPSHOT_FILE)).unwrap();
        assert_eq!(gen, 7);
        let loaded = |key: &[u8]| &*entries.iter().find(|(k, _)| k == key).unwrap().1.value;
        let (Value::Bloom(chain), Some(Value::Bloom(original))) =
            (loaded(b"k"), store.db.value(b"k", 0))
        else {
            panic!()
        };
        let (Value::Cuckoo(cuckoo), Some(Value::Cuckoo(original_cuckoo))) =
            (loaded(b"c"), store.db.value(b"c", 0))
        else {
            panic!()
        };
        assert!(cuckoo.filters() > 1);
        assert_eq!(cuckoo, original_cuckoo);
        assert_eq!(chain.items(), original.items());
        assert_eq!(chain.dump_header(), original.dump_header());
        for i in 0..500 {
            assert!(chain.contains(format!("i{i}").as_bytes()));
        }
        // Flip one byte in the middle: refused with the file name and an offset.
        let path = dir.join(SNAPSHOT_FILE);
        let mut bytes = fs::read(&path).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x40;
        fs::write(&path, &bytes).unwrap();
        let err = read_snapshot(&path).unwrap_err().to_string();
        assert!(err.contains("dump.bgs") && err.contains("offset"), "{err}");
        // Truncation too.
        bytes[mid] ^= 0x40;
        fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert!(read_snapshot(&path).is_err());
        let _ = fs::remove_dir_all(&dir);
    }

    /// Replaying the log under a different cf-* configuration rebuilds the same cuckoo filter:
    /// an auto-created filter is logged as the header of its empty shape.
    #[test]
    fn cuckoo_log_replay_is_exact_under_another_config() {
        let mut store = Store::new(Config::default());
        store.config.dialect.cf_bucket_size = 4;
        store.config.dialect.cf_initial_size = 64;
        let mut session = Session::new(1, false);
        let mut log = Vec::new();
        for i in 0..300 {
            let args = vec![
                b"CF.ADD".to_vec(),
                b"c".to_vec(),
                format!("i{i}").into_bytes(),
            ];
            log.extend(execute(&mut store, &mut session, &args, false).log);
        }
        let args = vec![b"CF.DEL".to_vec(), b"c".to_vec(), b"i7".to_vec()];
        log.extend(execute(&mut store, &mut session, &args, false).log);
        let mut replayed = Store::new(Config::default());
        for args in &log {
            execute(&mut replayed, &mut session, args, true);
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
    fn log_replay_truncates_torn_tail_and_refuses_corrupt_body() {
        let dir = temp_dir("aof");
        let path = aof_path(&dir, 1);
        let mut data = AOF_MAGIC.to_vec();
        for i in 0..10 {
            data.extend(encode_record(&[vec![
                b"BF.ADD".to_vec(),
                b"k".to_vec(),
                format!("i{i}").into_bytes(),
            ]]));
        }
        let full = data.len();
        data.extend(
            &encode_record(&[vec![b"BF.ADD".to_vec(), b"k".to_vec(), b"torn".to_vec()]])[..9],
        );
        fs::write(&path, &data).unwrap();
        let loaded = load(&dir, &Config::default()).unwrap();
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        assert_eq!(fs::metadata(&path).unwrap().len(), full as u64);
        let Some(Value::Bloom(chain)) = loaded.db.value(b"k", 0) else {
            panic!()
        };
        assert_eq!(chain.items(), 10);

        // Damage inside a record that is followed by others: refuse.
        let mut bad = fs::read(&path).unwrap();
        bad[AOF_MAGIC.len() + 10] ^= 1;
        fs::write(&path, &bad).unwrap();
        let err = load(&dir, &Config::default()).err().unwrap().to_string();
        assert!(
            err.contains("appendonly.1.aof") && err.contains("offset 16"),
            "{err}"
        );
        let _ = fs::remove_dir_all(&dir);
    }
}
