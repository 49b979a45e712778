//! The manifest (`manifest`): which files make up the dataset, as Redis 7's multi-part AOF keeps
//! one, so a missing snapshot or log part is refused instead of silently starting with less.
//!
//! Text, one fact per line: `bloomgate-manifest 1`, `snapshot <generation>` (or `snapshot
//! none`), `logs <first> <last>`. Updated atomically (temp file, fsync, rename, directory fsync)
//! by the log writer when it creates a generation (after creating the file, before writing to
//! it) and by a snapshot once its file is in place (before the logs it covers are deleted).
//!
//! A crash between a step and its manifest update leaves a state the loader accepts: a snapshot
//! newer than listed (its rename happened, the update did not), or a log one generation past the
//! last listed (created, not yet listed, and so still empty of acknowledged writes).

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use anyhow::bail;

use super::{create_private, log, sync_dir};

/// The manifest's file name in the data directory.
pub const MANIFEST_FILE: &str = "manifest";
const MANIFEST_TMP: &str = "manifest.tmp";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// Which snapshot and log generations make up the dataset.
pub struct Manifest {
    /// Generation of the snapshot (`dump.bgs`), if one belongs to the dataset.
    pub snapshot: Option<u64>,
    /// Log generations `first..=last` hold the writes after it (empty when `last < first`).
    pub first: u64,
    /// The newest log generation.
    pub last: u64,
}

impl Manifest {
    /// The manifest in `dir`, if there is one; a damaged one is an error.
    pub fn read(dir: &Path) -> anyhow::Result<Option<Self>> {
        let path = dir.join(MANIFEST_FILE);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let bad = || anyhow::anyhow!("manifest {} is damaged: {text:?}", path.display());
        let mut lines = text.lines();
        if lines.next() != Some("bloomgate-manifest 1") {
            return Err(bad());
        }
        let snapshot = match lines.next().and_then(|l| l.strip_prefix("snapshot ")) {
            Some("none") => None,
            Some(n) => Some(n.parse().map_err(|_| bad())?),
            None => return Err(bad()),
        };
        let logs: Vec<u64> = lines
            .next()
            .and_then(|l| l.strip_prefix("logs "))
            .ok_or_else(bad)?
            .split(' ')
            .map(|n| n.parse().map_err(|_| bad()))
            .collect::<anyhow::Result<_>>()?;
        let [first, last] = logs[..] else {
            return Err(bad());
        };
        Ok(Some(Self {
            snapshot,
            first,
            last,
        }))
    }

    /// Writes the manifest durably (a temp file, fsync, rename, fsync of the directory).
    pub fn write(&self, dir: &Path) -> io::Result<()> {
        let tmp = dir.join(MANIFEST_TMP);
        let snapshot = self
            .snapshot
            .map_or_else(|| "none".to_string(), |g| g.to_string());
        let text = format!(
            "bloomgate-manifest 1\nsnapshot {snapshot}\nlogs {} {}\n",
            self.first, self.last
        );
        let result = (|| {
            let mut file = create_private(&tmp)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            fs::rename(&tmp, dir.join(MANIFEST_FILE))?;
            sync_dir(dir)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    /// Checks the files in `dir` against the manifest (or, without one, against what a
    /// manifest-less directory can hold: logs from generation 1 without a snapshot, no gaps).
    /// `snapshot` is the generation read from `dump.bgs`, `logs` the generations present.
    /// Returns the log generations to replay.
    pub fn check(
        manifest: Option<&Self>,
        dir: &Path,
        snapshot: Option<u64>,
        logs: &[u64],
    ) -> anyhow::Result<Vec<u64>> {
        let from = snapshot.unwrap_or(1);
        let replay: Vec<u64> = logs.iter().copied().filter(|&g| g >= from).collect();
        let missing = |what: String| -> anyhow::Result<Vec<u64>> {
            bail!(
                "data directory {} is incomplete: {what}; refusing to start with part of the \
                 data (restore the missing file, or move the directory's files away to start \
                 empty)",
                dir.display()
            )
        };
        if let Some(m) = manifest {
            match (m.snapshot, snapshot) {
                (Some(listed), None) => {
                    return missing(format!(
                        "the manifest lists snapshot generation {listed} but dump.bgs is missing"
                    ))
                }
                (Some(listed), Some(found)) if found < listed => {
                    return missing(format!(
                        "dump.bgs is generation {found}, older than the manifest's {listed}"
                    ))
                }
                _ => {}
            }
            for gen in m.first.max(from)..=m.last {
                if !logs.contains(&gen) {
                    return missing(format!(
                        "log {} listed in the manifest is missing",
                        log::aof_path(dir, gen).display()
                    ));
                }
            }
            if let Some(&newest) = replay.last() {
                if newest > m.last.max(from) + 1 {
                    return missing(format!(
                        "log generation {newest} is newer than the manifest allows ({})",
                        m.last
                    ));
                }
            }
        } else if snapshot.is_none() && replay.first().is_some_and(|&g| g > 1) {
            return missing(format!(
                "logs start at generation {} but there is no snapshot (dump.bgs) before them",
                replay[0]
            ));
        }
        if let Some(pair) = replay.windows(2).find(|w| w[1] != w[0] + 1) {
            return missing(format!(
                "log generations jump from {} to {}",
                pair[0], pair[1]
            ));
        }
        Ok(replay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_missing_parts_refused() {
        let dir = super::super::tests::temp_dir("manifest");
        assert_eq!(Manifest::read(&dir).unwrap(), None);
        let m = Manifest {
            snapshot: Some(3),
            first: 3,
            last: 4,
        };
        m.write(&dir).unwrap();
        assert_eq!(Manifest::read(&dir).unwrap(), Some(m));
        let check = |snap, logs: &[u64]| Manifest::check(Some(&m), &dir, snap, logs);
        assert_eq!(check(Some(3), &[3, 4]).unwrap(), vec![3, 4]);
        // A newer snapshot than listed (crash before the manifest update) covers old logs.
        assert_eq!(check(Some(4), &[3, 4]).unwrap(), vec![4]);
        // One log past the manifest (created, not yet listed) is fine.
        assert_eq!(check(Some(3), &[3, 4, 5]).unwrap(), vec![3, 4, 5]);
        let err = |r: anyhow::Result<Vec<u64>>| r.unwrap_err().to_string();
        assert!(err(check(None, &[3, 4])).contains("dump.bgs is missing"));
        assert!(err(check(Some(3), &[3])).contains("appendonly.4.aof"));
        assert!(err(check(Some(3), &[4])).contains("appendonly.3.aof"));
        assert!(err(check(Some(2), &[3, 4])).contains("older"));
        // Without a manifest: logs after a missing snapshot, and gaps, are refused.
        assert!(Manifest::check(None, &dir, None, &[2, 3]).is_err());
        assert!(Manifest::check(None, &dir, Some(2), &[2, 4]).is_err());
        assert_eq!(
            Manifest::check(None, &dir, None, &[1, 2]).unwrap(),
            vec![1, 2]
        );
        let _ = fs::remove_dir_all(&dir);
    }
}
