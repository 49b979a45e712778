//! The local filters' snapshot file: what lets a restarted gate serve from filters at once.
//!
//! One file, `filters.snapshot` in the persistence directory, written whole and atomically (to
//! `filters.snapshot.tmp`, fsync, rename, fsync of the directory): a crash leaves the previous
//! snapshot or the new one, never half of one. Layout, little-endian:
//!
//! ```text
//! magic "BGGSNAP1" | flags u32 (bit 0: written at a clean shutdown)
//! retention_ms u64 | generations u64 | generation_window_ms u64 | fpr f64   (the lifecycle)
//! identity_len u32 | identity bytes                                      (the store's identity)
//! count u64
//! count × { scope u64 | high_water_ms u64 | uses u64 | image_len u64 | image }
//! checksum u64 = XXH3-64 of every byte before it
//! ```
//!
//! Each image is one `WindowedBloomFilter` in the core's file format (its own header, version
//! and checksum). The high-water mark is the latest request time the filter is complete up to:
//! every row the store had when the filter was built, and every item recorded through the gate
//! since, with times up to it. `uses` orders the catch-ups at the next start (busiest first).
//!
//! Trust is earned, never assumed: a file whose checksum, magic, lifecycle or store identity
//! does not match is refused whole (every scope is rebuilt from the store on first use), an
//! image that does not decode or whose shape differs from the lifecycle's is refused alone, and
//! a restored filter answers nothing until it has caught up with the store rows seen at or after
//! its high-water mark (minus the configured clock slack).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use bloomgate::{FilterCodec, WindowedBloomFilter};
use xxhash_rust::xxh3::Xxh3;

use crate::{Error, LifecycleConfig, Result};

const MAGIC: &[u8; 8] = b"BGGSNAP1";
const FLAG_CLEAN: u32 = 1;
/// The snapshot's file name inside the persistence directory.
pub(crate) const FILE_NAME: &str = "filters.snapshot";

/// The lifecycle parameters a filter's shape depends on, and the store it mirrors.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Fingerprint {
    pub retention_ms: u64,
    pub generations: u64,
    pub window_ms: u64,
    pub fpr: f64,
    pub identity: Vec<u8>,
}

impl Fingerprint {
    pub fn new(lifecycle: &LifecycleConfig, identity: Option<String>) -> Self {
        Fingerprint {
            retention_ms: lifecycle.retention_ms,
            generations: lifecycle.generations as u64,
            window_ms: lifecycle.generation_window_ms(),
            fpr: lifecycle.fpr,
            identity: identity.map(String::into_bytes).unwrap_or_default(),
        }
    }
}

/// One scope's filter as saved.
pub(crate) struct SavedFilter {
    pub scope: u64,
    pub high_water_ms: u64,
    pub uses: u64,
    pub filter: WindowedBloomFilter,
}

/// What a read found.
pub(crate) struct Restored {
    pub filters: Vec<SavedFilter>,
    /// Images refused alone (damaged, or of another shape).
    pub refused: u64,
}

fn path_in(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

/// Writes `entries` (scope, high-water mark, uses, core file image) as the directory's
/// snapshot, atomically.
pub(crate) fn write(
    dir: &Path,
    fingerprint: &Fingerprint,
    clean: bool,
    entries: &[(u64, u64, u64, Vec<u8>)],
) -> Result<()> {
    let io = |what: &str, e: std::io::Error| Error::Snapshot(format!("{what}: {e}"));
    std::fs::create_dir_all(dir).map_err(|e| io(&format!("creating {}", dir.display()), e))?;
    let target = path_in(dir);
    let temp = dir.join(format!("{FILE_NAME}.tmp"));
    let file = File::create(&temp).map_err(|e| io(&format!("creating {}", temp.display()), e))?;
    let mut out = HashingWriter {
        inner: BufWriter::with_capacity(1 << 20, file),
        hash: Xxh3::new(),
    };
    let written = (|| -> std::io::Result<()> {
        out.write_all(MAGIC)?;
        out.write_all(&u32::from(clean).to_le_bytes())?;
        out.write_all(&fingerprint.retention_ms.to_le_bytes())?;
        out.write_all(&fingerprint.generations.to_le_bytes())?;
        out.write_all(&fingerprint.window_ms.to_le_bytes())?;
        out.write_all(&fingerprint.fpr.to_le_bytes())?;
        out.write_all(&(fingerprint.identity.len() as u32).to_le_bytes())?;
        out.write_all(&fingerprint.identity)?;
        out.write_all(&(entries.len() as u64).to_le_bytes())?;
        for (scope, high_water_ms, uses, image) in entries {
            out.write_all(&scope.to_le_bytes())?;
            out.write_all(&high_water_ms.to_le_bytes())?;
            out.write_all(&uses.to_le_bytes())?;
            out.write_all(&(image.len() as u64).to_le_bytes())?;
            out.write_all(image)?;
        }
        let checksum = out.hash.digest();
        out.inner.write_all(&checksum.to_le_bytes())?;
        let HashingWriter { inner, .. } = out;
        let file = inner.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()
    })();
    written.map_err(|e| io(&format!("writing {}", temp.display()), e))?;
    std::fs::rename(&temp, &target)
        .map_err(|e| io(&format!("renaming to {}", target.display()), e))?;
    // The rename is durable once the directory is.
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io(&format!("syncing {}", dir.display()), e))
}

struct HashingWriter<W: Write> {
    inner: W,
    hash: Xxh3,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Why a whole snapshot file was refused.
pub(crate) type Refusal = String;

/// Reads the directory's snapshot. `Ok(None)`: there is none. `Err(reason)`: the file exists but
/// is refused whole (damaged, truncated, another lifecycle or another store); `max_bytes` bounds
/// what is read (a file larger than the filters could ever be is not trusted to size memory).
pub(crate) fn read(
    dir: &Path,
    expected: &Fingerprint,
    max_bytes: u64,
) -> std::result::Result<Option<(Restored, bool)>, Refusal> {
    let path = path_in(dir);
    let len = match std::fs::metadata(&path) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    if len > max_bytes {
        return Err(format!(
            "{} is {len} bytes, more than the filters' memory budget allows",
            path.display()
        ));
    }
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&bytes, expected).map(Some)
}

fn parse(bytes: &[u8], expected: &Fingerprint) -> std::result::Result<(Restored, bool), Refusal> {
    let Some(body_len) = bytes.len().checked_sub(8) else {
        return Err("truncated (no checksum)".into());
    };
    let (body, checksum) = bytes.split_at(body_len);
    let checksum = u64::from_le_bytes(checksum.try_into().expect("8 bytes"));
    if xxhash_rust::xxh3::xxh3_64(body) != checksum {
        return Err("checksum mismatch (damaged or truncated)".into());
    }
    let mut r = Reader { bytes: body };
    if r.take(8)? != MAGIC {
        return Err("not a gate snapshot (bad magic or version)".into());
    }
    let clean = r.u32()? & FLAG_CLEAN != 0;
    let found = Fingerprint {
        retention_ms: r.u64()?,
        generations: r.u64()?,
        window_ms: r.u64()?,
        fpr: f64::from_bits(r.u64()?),
        identity: {
            let len = r.u32()? as usize;
            r.take(len)?.to_vec()
        },
    };
    if expected.identity.is_empty() {
        return Err("the store cannot identify itself: its filters cannot be trusted".into());
    }
    if found.identity != expected.identity {
        return Err("written for another store (identity differs)".into());
    }
    if found != *expected {
        return Err(format!(
            "written for another lifecycle (retention {} ms, G {}, W {} ms, fpr {})",
            found.retention_ms, found.generations, found.window_ms, found.fpr
        ));
    }
    let count = r.u64()?;
    let mut restored = Restored {
        filters: Vec::new(),
        refused: 0,
    };
    for _ in 0..count {
        let scope = r.u64()?;
        let high_water_ms = r.u64()?;
        let uses = r.u64()?;
        let len = usize::try_from(r.u64()?).map_err(|_| "image length overflows".to_owned())?;
        let image = r.take(len)?;
        match WindowedBloomFilter::from_bytes(image) {
            Ok(filter) if shape_matches(&filter, expected) => restored.filters.push(SavedFilter {
                scope,
                high_water_ms,
                uses,
                filter,
            }),
            _ => restored.refused += 1,
        }
    }
    if !r.bytes.is_empty() {
        return Err("trailing bytes after the last filter".into());
    }
    Ok((restored, clean))
}

fn shape_matches(filter: &WindowedBloomFilter, expected: &Fingerprint) -> bool {
    let config = filter.config();
    config.generations as u64 == expected.generations
        && config.generation_window_ms == Some(expected.window_ms)
        && config.fpr == expected.fpr
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], Refusal> {
        if n > self.bytes.len() {
            return Err("truncated".into());
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }
    fn u32(&mut self) -> std::result::Result<u32, Refusal> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> std::result::Result<u64, Refusal> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloomgate::WindowConfig;

    fn lifecycle() -> LifecycleConfig {
        LifecycleConfig {
            min_items_per_generation: 16,
            memory_budget_bytes: 1 << 20,
            ..LifecycleConfig::new(1_000, 3)
        }
    }

    fn filter(items: &[u64]) -> WindowedBloomFilter {
        let l = lifecycle();
        let mut f = WindowedBloomFilter::new(
            WindowConfig::new(l.generations, 64, l.fpr, Some(l.generation_window_ms())),
            100,
        )
        .unwrap();
        for item in items {
            f.insert(item.to_le_bytes(), 100).unwrap();
        }
        f
    }

    #[test]
    fn round_trip_and_every_refusal() {
        let dir = tempfile::tempdir().unwrap();
        let fp = Fingerprint::new(&lifecycle(), Some("store-a".into()));
        let entries = vec![
            (7, 150, 3, filter(&[1, 2, 3]).to_bytes()),
            (9, 160, 1, filter(&[4]).to_bytes()),
        ];
        write(dir.path(), &fp, true, &entries).unwrap();
        let (restored, clean) = read(dir.path(), &fp, 1 << 30).unwrap().unwrap();
        assert!(clean);
        assert_eq!(restored.filters.len(), 2);
        assert_eq!(restored.refused, 0);
        let seven = &restored.filters[0];
        assert_eq!((seven.scope, seven.high_water_ms, seven.uses), (7, 150, 3));
        assert!([1u64, 2, 3]
            .iter()
            .all(|i| seven.filter.contains(i.to_le_bytes())));

        // Another store, another lifecycle, a store without identity: refused whole.
        let other = Fingerprint::new(&lifecycle(), Some("store-b".into()));
        assert!(read(dir.path(), &other, 1 << 30).is_err());
        let mut shorter = lifecycle();
        shorter.retention_ms = 500;
        let shorter = Fingerprint::new(&shorter, Some("store-a".into()));
        assert!(read(dir.path(), &shorter, 1 << 30).is_err());
        let anonymous = Fingerprint::new(&lifecycle(), None);
        assert!(read(dir.path(), &anonymous, 1 << 30).is_err());
        // Larger than allowed: refused before it is read.
        assert!(read(dir.path(), &fp, 64).is_err());

        // Every single flipped byte and every truncation is refused.
        let path = dir.path().join(FILE_NAME);
        let good = std::fs::read(&path).unwrap();
        for at in (0..good.len()).step_by(7) {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            assert!(parse(&bad, &fp).is_err(), "flip at {at}");
        }
        for len in (0..good.len()).step_by(13) {
            assert!(parse(&good[..len], &fp).is_err(), "truncated to {len}");
        }
        // No file: nothing restored, nothing refused.
        let empty = tempfile::tempdir().unwrap();
        assert!(read(empty.path(), &fp, 1 << 30).unwrap().is_none());
    }
}
