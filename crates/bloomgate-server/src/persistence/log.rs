//! The append-only log format (`appendonly.<gen>.aof`) and its replay.
//!
//! A log is the magic `BLOOMGATE-AOF-02`, then records: `u32 len, u32 crc32(payload),
//! u32 crc32(the 8 bytes before)`, then the payload: one or more RESP-encoded commands applied
//! atomically (a MULTI/EXEC is one record). The header has its own checksum so a damaged length
//! is recognised as damage, not mistaken for a record cut short by a crash.
//!
//! Replay tells the two apart: a *torn tail* is a final record cut short (fewer bytes left than
//! its header, or than the length its intact header declares) — what a crash in the middle of a
//! write leaves — and is truncated with a warning, as Redis' `aof-load-truncated` does. Anything
//! else (a bad header or payload checksum, an undecodable command, a bad magic) is corruption:
//! the server refuses to start, naming the file and offset, unless started with `--repair-log`,
//! which keeps a copy of the damaged file and truncates it at the first bad record (as
//! `redis-check-aof --fix` does).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

use super::{create_private, sync_dir, Replay};
use crate::keyspace::now_ms;
use crate::resp::{encode_command, RequestParser};

/// The first 16 bytes of every log file.
pub const AOF_MAGIC: &[u8; 16] = b"BLOOMGATE-AOF-02";
/// `len`, payload CRC, header CRC.
pub const HEADER_LEN: usize = 12;
/// A record is at most one command's arguments (bounded by the query buffer limit) plus RESP
/// framing; a larger length is damage.
const MAX_RECORD_LEN: usize = 1 << 31;

/// The file of log generation `generation` in `dir`.
pub fn aof_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("appendonly.{generation}.aof"))
}

/// Encodes commands as one log record.
pub fn encode_record(commands: &[Vec<Vec<u8>>]) -> Vec<u8> {
    // One allocation: the payload is encoded in place after room for the header.
    let guess: usize = commands.iter().flatten().map(|a| a.len() + 16).sum();
    let mut record = Vec::with_capacity(HEADER_LEN + 16 + guess);
    record.resize(HEADER_LEN, 0);
    for args in commands {
        encode_command(args, &mut record);
    }
    let payload_len = (record.len() - HEADER_LEN) as u32;
    let payload_crc = crc32fast::hash(&record[HEADER_LEN..]);
    record[..4].copy_from_slice(&payload_len.to_le_bytes());
    record[4..8].copy_from_slice(&payload_crc.to_le_bytes());
    let header_crc = crc32fast::hash(&record[..8]);
    record[8..HEADER_LEN].copy_from_slice(&header_crc.to_le_bytes());
    record
}

/// The log generations present in `dir`, ascending.
pub fn log_generations(dir: &Path) -> io::Result<Vec<u64>> {
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

/// Where a log stops being a sequence of whole, intact records.
#[derive(Debug, PartialEq)]
pub enum Damage {
    /// A final record cut short at `offset`.
    Torn {
        /// Where the intact records end.
        offset: usize,
    },
    /// Damaged data at `offset`: `what` is wrong there.
    Corrupt {
        /// Where.
        offset: usize,
        /// What is wrong there.
        what: String,
    },
}

/// Walks the records of a log image, handing each intact payload to `apply` (which may refuse
/// it as corrupt); returns where the intact prefix ends, if before the end.
pub fn scan(data: &[u8], mut apply: impl FnMut(&[u8]) -> Result<(), String>) -> Option<Damage> {
    if data.len() < AOF_MAGIC.len() {
        return Some(if AOF_MAGIC.starts_with(data) {
            Damage::Torn { offset: 0 }
        } else {
            Damage::Corrupt {
                offset: 0,
                what: "not a bloomgate log (bad magic)".into(),
            }
        });
    }
    if &data[..AOF_MAGIC.len()] != AOF_MAGIC {
        return Some(Damage::Corrupt {
            offset: 0,
            what: "not a bloomgate log (bad magic)".into(),
        });
    }
    let mut offset = AOF_MAGIC.len();
    while offset < data.len() {
        let corrupt = |what: &str| {
            Some(Damage::Corrupt {
                offset,
                what: what.into(),
            })
        };
        let rest = &data[offset..];
        if rest.len() < HEADER_LEN {
            return Some(Damage::Torn { offset });
        }
        let word = |i: usize| u32::from_le_bytes(rest[i..i + 4].try_into().expect("4 bytes"));
        if crc32fast::hash(&rest[..8]) != word(8) {
            return corrupt("record header checksum mismatch");
        }
        let len = word(0) as usize;
        if len > MAX_RECORD_LEN {
            return corrupt("record length out of range");
        }
        if rest.len() - HEADER_LEN < len {
            return Some(Damage::Torn { offset });
        }
        let payload = &rest[HEADER_LEN..HEADER_LEN + len];
        if crc32fast::hash(payload) != word(4) {
            return corrupt("record checksum mismatch");
        }
        if let Err(what) = apply(payload) {
            return corrupt(&what);
        }
        offset += HEADER_LEN + len;
    }
    None
}

/// The commands of one record payload.
fn commands(payload: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, String> {
    let mut parser = RequestParser::default();
    parser.extend(payload);
    let mut out = Vec::new();
    loop {
        match parser.next_command() {
            Ok(Some(args)) => out.push(args),
            Ok(None) if parser.buffered() == 0 => return Ok(out),
            Ok(None) => return Err("incomplete command in record".into()),
            Err(e) => return Err(format!("bad command encoding: {}", e.0)),
        }
    }
}

/// Replays one log file into `target`. A torn tail is truncated (with a warning); corruption
/// refuses, or with `repair` keeps a copy (`<file>.corrupt-<unix seconds>`) and truncates at the
/// damage. Returns the file's (possibly truncated) size.
pub fn replay_log(
    path: &Path,
    target: &mut dyn Replay,
    repair: bool,
    warnings: &mut Vec<String>,
) -> anyhow::Result<u64> {
    let data = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let damage = scan(&data, |payload| {
        for args in commands(payload)? {
            target.apply(&args);
        }
        Ok(())
    });
    let keep = match damage {
        None => return Ok(data.len() as u64),
        Some(Damage::Torn { offset }) => {
            warnings.push(format!(
                "append-only log {}: truncated a torn final record at offset {offset} ({} bytes \
                 dropped)",
                path.display(),
                data.len() - offset
            ));
            offset
        }
        Some(Damage::Corrupt { offset, what }) if repair => {
            let copy = PathBuf::from(format!("{}.corrupt-{}", path.display(), now_ms() / 1000));
            let mut out = create_private(&copy)?;
            out.write_all(&data)?;
            out.sync_all()?;
            warnings.push(format!(
                "append-only log {} is corrupt at offset {offset}: {what}; --repair-log kept a \
                 copy in {} and truncated the log there ({} bytes dropped)",
                path.display(),
                copy.display(),
                data.len() - offset
            ));
            offset
        }
        Some(Damage::Corrupt { offset, what }) => bail!(
            "append-only log {} is corrupt at offset {offset}: {what}; refusing to start (start \
             with --repair-log to keep a copy and truncate the log at that offset, losing the \
             records from there on)",
            path.display()
        ),
    };
    let file = OpenOptions::new().write(true).open(path)?;
    file.set_len(keep as u64)?;
    file.sync_all()?;
    if keep < AOF_MAGIC.len() {
        // Torn while being created: give it its magic again.
        drop(file);
        return Ok(open_log(path.parent().unwrap_or(Path::new(".")), path)?
            .metadata()?
            .len());
    }
    Ok(keep as u64)
}

/// Opens a log for appending, writing the magic (and fsyncing the directory) when it is new or
/// was cut short while being created.
pub fn open_log(dir: &Path, path: &Path) -> io::Result<File> {
    let mut file = super::private_options()
        .create(true)
        .append(true)
        .read(true)
        .open(path)?;
    let len = file.seek(SeekFrom::End(0))?;
    if len < AOF_MAGIC.len() as u64 {
        file.set_len(0)?;
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

    fn record(i: usize) -> Vec<u8> {
        encode_record(&[vec![
            b"BF.ADD".to_vec(),
            b"k".to_vec(),
            format!("item-{i}").into_bytes(),
        ]])
    }

    /// A log of `n` records and the offset where each record starts (plus the end).
    fn log(n: usize) -> (Vec<u8>, Vec<usize>) {
        let mut data = AOF_MAGIC.to_vec();
        let mut starts = Vec::new();
        for i in 0..n {
            starts.push(data.len());
            data.extend(record(i));
        }
        starts.push(data.len());
        (data, starts)
    }

    fn count(data: &[u8]) -> (usize, Option<Damage>) {
        let mut n = 0;
        let damage = scan(data, |p| commands(p).map(|_| n += 1));
        (n, damage)
    }

    /// The corruption matrix on the format: a cut at every byte is a torn tail keeping every
    /// whole record before it; a flipped bit anywhere in a record that is followed by others —
    /// or in a complete final record — is corruption at that record's offset, never a silent
    /// truncation.
    #[test]
    fn truncation_is_torn_and_every_flip_is_corruption() {
        let (data, starts) = log(5);
        assert_eq!(count(&data), (5, None));
        for cut in AOF_MAGIC.len()..data.len() {
            let whole = starts.iter().filter(|&&s| s <= cut).count() - 1;
            let boundary = starts[whole];
            let expected = (cut != boundary).then_some(Damage::Torn { offset: boundary });
            assert_eq!(count(&data[..cut]), (whole, expected), "cut at {cut}");
        }
        for cut in 0..AOF_MAGIC.len() {
            assert_eq!(count(&data[..cut]).1, Some(Damage::Torn { offset: 0 }));
        }
        for byte in 0..data.len() {
            for bit in 0..8 {
                let mut bad = data.clone();
                bad[byte] ^= 1 << bit;
                let (_, damage) = count(&bad);
                let record = starts.iter().rposition(|&s| s <= byte).unwrap_or(0);
                let offset = if byte < AOF_MAGIC.len() {
                    0
                } else {
                    starts[record]
                };
                match damage {
                    Some(Damage::Corrupt { offset: at, .. }) => {
                        assert_eq!(at, offset, "flip at {byte}.{bit}")
                    }
                    other => panic!("flip at {byte}.{bit}: {other:?}"),
                }
            }
        }
    }
}
