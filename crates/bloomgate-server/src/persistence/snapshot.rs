//! The snapshot format (`dump.bgs`): magic, the log generation it covers up to, then each key
//! with its expiry, a type byte (0 = Redis string, its bytes as the payload; 1 = Bloom chain, 2 = cuckoo filter, 3 = windowed filter,
//! 4 = Count-Min Sketch, 5 = Top-K, 6 = t-digest, 7 = blocked Bloom chain), the payload length and the value's dump stream (for
//! filters RedisBloom's SCANDUMP stream, header then link or sub-filter bytes; for sketches
//! the dialect's: header, then counter or bucket bytes), then a CRC32 of
//! everything before. Written to a temp file (mode 0600), fsynced, renamed, directory fsynced;
//! a failed write removes its temp file. Any damage on reading is an error naming file and offset.

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use bloomgate_dialect::budget::{Allowance, Buffer};
use bloomgate_dialect::value::{HeaderRefusal, Kind};

use super::{create_private, sync_dir, SNAPSHOT_FILE, SNAPSHOT_TMP};
use crate::keyspace::{Data, Entry, Snapshot, Value};

const SNAPSHOT_MAGIC: &[u8; 16] = b"BLOOMGATE-SNAP01";

/// The snapshot's type byte of a string (snapshots written before strings existed have none).
const STRING_TYPE: u8 = 0;

/// The snapshot's type byte of each dialect value kind.
fn type_byte(kind: Kind) -> u8 {
    match kind {
        Kind::Bloom => 1,
        Kind::Cuckoo => 2,
        Kind::Windowed => 3,
        Kind::CountMin => 4,
        Kind::TopK => 5,
        Kind::TDigest => 6,
        Kind::Counting => 7,
        Kind::BloomBlocked => 8,
        Kind::BloomValkey => 9,
    }
}
/// Keys longer than Redis' bulk limit cannot exist; a larger length is corruption.
const MAX_KEY_LEN: u32 = 512 * 1024 * 1024;

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
    write_snapshot_from(dir, entries.len(), entries.iter(), generation)
}

/// [`write_snapshot`] of a point-in-time copy it owns: each value is dropped as soon as its
/// bytes are written, before the rest of the file and its fsync, so the live values stop
/// sharing its pages (and copying them on write) as early as they can.
pub fn write_snapshot_owned(
    dir: &Path,
    entries: Vec<(Vec<u8>, Entry)>,
    generation: u64,
) -> io::Result<u64> {
    write_snapshot_from(dir, entries.len(), entries.into_iter(), generation)
}

fn write_snapshot_from<E: std::borrow::Borrow<(Vec<u8>, Entry)>>(
    dir: &Path,
    count: usize,
    entries: impl Iterator<Item = E>,
    generation: u64,
) -> io::Result<u64> {
    let tmp = dir.join(SNAPSHOT_TMP);
    let result = write_snapshot_to(dir, &tmp, count, entries, generation);
    if result.is_err() {
        // A full disk must not keep the partial file around (it would hold the space).
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn write_snapshot_to<E: std::borrow::Borrow<(Vec<u8>, Entry)>>(
    dir: &Path,
    tmp: &Path,
    count: usize,
    entries: impl Iterator<Item = E>,
    generation: u64,
) -> io::Result<u64> {
    let file = create_private(tmp)?;
    let mut w = CrcWriter {
        inner: BufWriter::with_capacity(1 << 20, file),
        hasher: crc32fast::Hasher::new(),
    };
    w.write_all(SNAPSHOT_MAGIC)?;
    w.write_all(&generation.to_le_bytes())?;
    w.write_all(&(count as u64).to_le_bytes())?;
    for item in entries {
        let (key, entry) = item.borrow();
        w.write_all(&(key.len() as u32).to_le_bytes())?;
        w.write_all(key)?;
        w.write_all(&entry.expires_at().unwrap_or(-1).to_le_bytes())?;
        let value: &Value = match &entry.data {
            Data::Dialect(value) => value,
            Data::String(s) => {
                w.write_all(&[STRING_TYPE])?;
                w.write_all(&(s.len() as u64).to_le_bytes())?;
                w.write_all(s)?;
                continue;
            }
        };
        w.write_all(&[type_byte(value.kind())])?;
        let (header, chunks) = value.dump_layout();
        let body: u64 = chunks.iter().map(|&(_, len)| len).sum();
        w.write_all(&(header.len() as u64 + body).to_le_bytes())?;
        // Straight from the value's segments: no chunk-sized buffer per value.
        let mut result = Ok(());
        value.visit_dump(&mut |piece| {
            if result.is_ok() {
                result = w.write_all(piece);
            }
        });
        result?;
    }
    let crc = w.hasher.finalize();
    let mut inner = w.inner;
    inner.write_all(&crc.to_le_bytes())?;
    let file = inner.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    let size = file.metadata()?.len();
    drop(file);
    fs::rename(tmp, dir.join(SNAPSHOT_FILE))?;
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
    // The whole snapshot must fit what the machine can hold now: each value is admitted against
    // this before it is allocated (a forged size is refused, not allocated until killed).
    let mut allowance = Allowance::new(bloomgate::memory::allowance(true));
    for _ in 0..count {
        let key_len = u32::from_le_bytes(r.array()?);
        if key_len > MAX_KEY_LEN {
            return Err(r.fail("key length out of range"));
        }
        let key = r.bytes(u64::from(key_len))?;
        let expires = i64::from_le_bytes(r.array()?);
        let kind = r.array::<1>()?[0];
        let payload_len = r.u64()?;
        if kind == STRING_TYPE {
            // Admitted before its buffer is allocated, as every value is.
            if allowance.admit(Buffer(payload_len)).is_err() {
                return Err(r.fail("string larger than the memory this machine has left"));
            }
            let value = Data::String(r.bytes(payload_len)?);
            entries.push((key, Entry::new(value, (expires >= 0).then_some(expires))));
            continue;
        }
        let Some(kind) = Kind::ALL.into_iter().find(|&k| type_byte(k) == kind) else {
            return Err(r.fail(&format!("unknown value type {kind}")));
        };
        let value = read_value(&mut r, kind, &key, payload_len, &mut allowance)?;
        let entry = Entry::new(value, (expires >= 0).then_some(expires));
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
/// the pieces SCANDUMP would produce (each inside one link or sub-filter). The header's shape
/// must account for exactly the value's bytes and fit `allowance` before anything is allocated.
fn read_value(
    r: &mut SnapshotReader,
    kind: Kind,
    key: &[u8],
    payload_len: u64,
    allowance: &mut Allowance,
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
    let key = String::from_utf8_lossy(key);
    // The header is validated and its size admitted against the budget before anything is
    // allocated; the dump body's length then comes from the value's own chunk plan (a sketch's
    // budgeted size counts its heap and buffers too, so it is not the body's length).
    let mut value = kind.from_header(&header, allowance).map_err(|e| match e {
        HeaderRefusal::Invalid(e) => r.fail(&format!("invalid filter header for key {key:?}: {e}")),
        HeaderRefusal::OverBudget(o) => r.fail(&format!(
            "key {key:?} does not fit in the memory this machine has left: {o}"
        )),
    })?;
    let (_, chunks) = value.dump_layout();
    let body = chunks
        .iter()
        .try_fold(0u64, |sum, &(_, len)| sum.checked_add(len));
    if body.and_then(|b| b.checked_add(header_len as u64)) != Some(payload_len) {
        return Err(r.fail("filter size does not match its header"));
    }
    for (iter, len) in chunks {
        let data = r.bytes(len)?;
        value.load_chunk(iter, &data).map_err(|e| r.fail(e))?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persistence::testing::Keys;
    use crate::resp::Reply;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("bloomgate-persist-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn run(store: &mut Keys, line: &str) -> Reply {
        store.run(line)
    }

    /// The dialect value under `key` in a snapshot's entries.
    pub(super) fn value_in<'a>(entries: &'a Snapshot, key: &[u8]) -> &'a Value {
        let (_, entry) = entries.iter().find(|(k, _)| k == key).unwrap();
        entry.data.dialect().unwrap()
    }

    /// A Bloom chain at `k` and a grown, partly deleted cuckoo filter at `c`.
    fn store_with(items: usize) -> Keys {
        let mut store = Keys::default();
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
        let (Value::Bloom(chain), Some(Value::Bloom(original))) =
            (value_in(&entries, b"k"), store.db.value(b"k", 0))
        else {
            panic!()
        };
        let (Value::Cuckoo(cuckoo), Some(Value::Cuckoo(original_cuckoo))) =
            (value_in(&entries, b"c"), store.db.value(b"c", 0))
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

    /// Every value type comes back from a snapshot with the same dump bytes and answers
    /// (a Top-K or t-digest snapshot was refused as "filter size does not match its header").
    #[test]
    fn every_value_type_round_trips() {
        let dir = temp_dir("types");
        let mut store = Keys::default();
        for line in [
            "BF.ADD bf a",
            "CF.ADD cf a",
            "WF.RESERVE wf 0.01 1000 60000 4",
            "WF.ADD wf a",
            "CMS.INITBYDIM cms 100 4",
            "CMS.INCRBY cms a 5 b 7",
            "TOPK.RESERVE topk 3 50 4 0.9",
            "TOPK.ADD topk a b c a a d",
            "TOPK.RESERVE topk1 1 1 1 0.99999",
            "TDIGEST.CREATE td",
            "TDIGEST.ADD td 1 2 3 4 5.5",
            "TDIGEST.CREATE empty",
            "BF.RESERVE bk 0.01 10 LAYOUT blocked",
            "BF.RESERVE vk 0.05 4 EXPANSION 2 LAYOUT valkey",
            "BF.MADD vk a b c d e f g h i j",
        ] {
            let reply = run(&mut store, line);
            assert!(!matches!(reply, Reply::Error(_)), "{line}: {reply:?}");
        }
        let images = |entries: &[(Vec<u8>, Entry)]| {
            let mut out: Vec<(Vec<u8>, Vec<u8>)> = entries
                .iter()
                .map(|(k, e)| {
                    let bytes = e
                        .data
                        .dialect()
                        .unwrap()
                        .dump_stream()
                        .flat_map(|(_, c)| c)
                        .collect();
                    (k.clone(), bytes)
                })
                .collect();
            out.sort();
            out
        };
        let before = images(&store.db.snapshot());
        assert_eq!(before.len(), 10);
        write_snapshot(&dir, &store.db.snapshot(), 1).unwrap();
        let (_, entries) = read_snapshot(&dir.join(SNAPSHOT_FILE)).unwrap();
        assert_eq!(images(&entries), before);
        let _ = fs::remove_dir_all(&dir);
    }
}

/// A snapshot is the keyspace at the instant it was taken, while writers keep going: values are
/// cloned under the lock (their segments shared), written out after it.
#[cfg(test)]
mod point_in_time {
    use std::sync::{Arc, Mutex};

    use super::tests::value_in;
    use super::*;
    use crate::persistence::testing::Keys;
    use crate::resp::Reply;

    fn run(store: &mut Keys, line: &str) -> Reply {
        store.run(line)
    }

    /// Every byte of a value's dump stream.
    fn image(value: &Value) -> Vec<u8> {
        value.dump_stream().flat_map(|(_, chunk)| chunk).collect()
    }

    #[test]
    fn snapshot_under_concurrent_writes_is_the_point_in_time_state() {
        let dir = crate::persistence::tests::temp_dir("pit");
        let store = Arc::new(Mutex::new(Keys::default()));
        {
            let mut s = store.lock().unwrap();
            // Many copy-on-write segments each: writes land in shared and unshared segments alike.
            run(&mut s, "BF.RESERVE big 0.01 4000000");
            run(&mut s, "CF.RESERVE cf 4000000");
            for i in 0..2000 {
                run(&mut s, &format!("BF.ADD big before{i}"));
                run(&mut s, &format!("CF.ADD cf before{i}"));
            }
        }
        // A writer acknowledges items one by one while the snapshot is taken and written.
        let acked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (store, acked, stop) = (store.clone(), acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && i < 200_000 {
                    let mut s = store.lock().unwrap();
                    // 1, or 0 for a false positive: acknowledged either way.
                    let reply = run(&mut s, &format!("BF.ADD big w{i}"));
                    assert!(matches!(reply, Reply::Bool(_)), "{reply:?}");
                    assert_eq!(run(&mut s, &format!("CF.ADD cf w{i}")), Reply::Bool(true));
                    acked.lock().unwrap().push(i);
                    drop(s);
                    i += 1;
                }
            })
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while acked.lock().unwrap().len() < 500 {
            assert!(!writer.is_finished() && std::time::Instant::now() < deadline);
            std::thread::yield_now();
        }
        let (entries, expected, acked_before) = {
            let s = store.lock().unwrap();
            let entries = s.db.snapshot();
            let expected: Vec<(Vec<u8>, Vec<u8>)> = entries
                .iter()
                .map(|(k, e)| (k.clone(), image(e.data.dialect().unwrap())))
                .collect();
            (entries, expected, acked.lock().unwrap().len())
        };
        // Writes after the copy (some before the file is written, more while it is).
        while acked.lock().unwrap().len() < acked_before + 300 {
            assert!(!writer.is_finished() && std::time::Instant::now() < deadline);
            std::thread::yield_now();
        }
        // The owned form, as BGSAVE writes: each value is released once written.
        write_snapshot_owned(&dir, entries, 3).unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
        let (_, loaded) = read_snapshot(&dir.join(SNAPSHOT_FILE)).unwrap();
        let live_image = image(store.lock().unwrap().db.value(b"cf", 0).unwrap());
        let copied_image = &expected.iter().find(|(k, _)| k == b"cf").unwrap().1;
        assert!(live_image != *copied_image, "writes changed the live value");
        // Byte for byte the state at the instant of the copy, though writes went on.
        assert_eq!(loaded.len(), expected.len());
        for (key, entry) in &loaded {
            let want = &expected.iter().find(|(k, _)| k == key).unwrap().1;
            assert!(
                image(entry.data.dialect().unwrap()) == *want,
                "{key:?} differs from the copy"
            );
        }
        // Nothing acknowledged before the copy is missing from it; nothing acknowledged at all
        // is missing from the live keyspace.
        let (Value::Bloom(saved), Value::Cuckoo(saved_cf)) =
            (value_in(&loaded, b"big"), value_in(&loaded, b"cf"))
        else {
            panic!()
        };
        for i in 0..acked_before {
            assert!(saved.contains(format!("w{i}").as_bytes()), "w{i} lost");
            assert!(
                saved_cf.contains(format!("w{i}").as_bytes()),
                "cf w{i} lost"
            );
        }
        let s = store.lock().unwrap();
        let Some(Value::Bloom(live)) = s.db.value(b"big", 0) else {
            panic!()
        };
        let total = acked.lock().unwrap().len();
        assert!((0..total).all(|i| live.contains(format!("w{i}").as_bytes())));
        assert!((0..2000).all(|i| saved.contains(format!("before{i}").as_bytes())));
        let _ = fs::remove_dir_all(&dir);
    }

    /// A WF value is snapshotted without a whole copy: the snapshot shares its generations,
    /// and a write during the save copies only the generation it writes to.
    #[test]
    fn windowed_values_snapshot_without_a_whole_copy() {
        let mut store = Keys::default();
        let now = crate::keyspace::now_ms() as u64;
        let hour = 3_600_000u64;
        for (age, n) in [(2 * hour, 0), (hour, 1), (0, 2)] {
            let items: Vec<String> = (0..2000).map(|i| format!("g{n}-{i}")).collect();
            let line = format!(
                "WF.INSERT wf WINDOW {hour} GENERATIONS 3 CAPACITY 1000 AT {} ITEMS {}",
                now - age,
                items.join(" ")
            );
            assert!(matches!(run(&mut store, &line), Reply::Array(_)));
        }
        let entries = store.db.snapshot();
        let saved = image(entries[0].1.data.dialect().unwrap());
        let generations = |value: &Value| {
            let Value::Windowed(wf) = value else { panic!() };
            wf.filter()
                .retained()
                .map(|g| g.is_shared())
                .collect::<Vec<bool>>()
        };
        assert_eq!(
            generations(entries[0].1.data.dialect().unwrap()),
            [true, true, true]
        );
        assert!(matches!(
            run(&mut store, "WF.ADD wf during"),
            Reply::Bool(true)
        ));
        let shared = generations(store.db.value(b"wf", 0).unwrap());
        assert!(shared.iter().filter(|&&s| s).count() >= 2, "{shared:?}");
        assert!(shared.iter().filter(|&&s| !s).count() <= 1, "{shared:?}");
        assert_eq!(
            image(entries[0].1.data.dialect().unwrap()),
            saved,
            "the snapshot is unchanged"
        );
    }
}
