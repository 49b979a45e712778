//! A streaming walk over a whole Redis RDB file (a `SAVE` of Redis + RedisBloom, RDB versions
//! 9–12) that yields our module values — every type of the dialect ([`Value`]: Bloom, cuckoo,
//! Count-Min, Top-K, t-digest, windowed) — with their database, key and expiry.
//!
//! Every other value is skipped by walking its encoding (strings, lists, sets, sorted sets,
//! hashes in all their encodings, streams, other modules' values) without keeping it, so memory
//! stays at the largest value of ours. The file's trailing CRC64 is checked. Pure data, like
//! the rest of the dialect: the caller opens the file and hands over a `std::io::Read` and its
//! length (the CLI's `import-rdb`).

use std::collections::BTreeMap;
use std::io::Read;

use crate::codec::rdb_io::RdbError;
use crate::encoding::rdb_format::{
    opcode, ModuleValue, RdbReader, MAX_RDB_VERSION, RDB_TYPE_MODULE_2,
};
use crate::value::Value;

/// RDB opcodes (`RDB_OPCODE_*`) that may come where a value type would.
mod op {
    pub const SLOT_INFO: u8 = 244;
    pub const FUNCTION2: u8 = 245;
    pub const FUNCTION_PRE_GA: u8 = 246;
    pub const MODULE_AUX: u8 = 247;
    pub const IDLE: u8 = 248;
    pub const FREQ: u8 = 249;
    pub const AUX: u8 = 250;
    pub const RESIZEDB: u8 = 251;
    pub const EXPIRETIME_MS: u8 = 252;
    pub const EXPIRETIME: u8 = 253;
    pub const SELECTDB: u8 = 254;
    pub const EOF: u8 = 255;
}

/// One of our module values found in the file.
#[derive(Debug)]
pub struct Found {
    /// The Redis database it is in.
    pub db: u64,
    /// Its key.
    pub key: Vec<u8>,
    /// Absolute expiry, Unix milliseconds.
    pub expires_at: Option<i64>,
    /// The value.
    pub value: Value,
}

/// What a walk through the file saw.
#[derive(Default, Debug)]
pub struct Summary {
    /// The file's RDB version.
    pub version: u16,
    /// Skipped keys per type name (`string`, `set`, `module:NAME`, ...).
    pub skipped: BTreeMap<String, u64>,
}

/// Why the file was refused.
#[derive(Debug)]
pub enum WalkError {
    /// No `REDIS` magic.
    NotRdb,
    /// An RDB version outside 9 to [`MAX_RDB_VERSION`].
    Version(u16),
    /// The encoding is broken (or forged, or over the value limit) at this byte offset.
    Damaged {
        /// Bytes of the file read before the error.
        offset: u64,
        /// What was wrong there.
        error: RdbError,
    },
    /// The trailing CRC64 is not the file's.
    Checksum {
        /// The trailer's.
        stored: u64,
        /// The file's.
        computed: u64,
    },
    /// Bytes after the end of the file's data.
    Trailing(u64),
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::NotRdb => f.write_str("not an RDB file (no REDIS magic)"),
            WalkError::Version(version) => write!(
                f,
                "RDB version {version} is not supported (9 to {MAX_RDB_VERSION} are)"
            ),
            WalkError::Damaged { offset, error } => {
                write!(f, "RDB file is damaged at offset {offset}: {error}")
            }
            WalkError::Checksum { stored, computed } => write!(
                f,
                "RDB file checksum mismatch (stored {stored:#018x}, computed {computed:#018x})"
            ),
            WalkError::Trailing(n) => write!(f, "{n} bytes after the RDB file's end"),
        }
    }
}

impl std::error::Error for WalkError {}

fn damaged(r: &RdbReader<impl Read>, error: RdbError) -> WalkError {
    WalkError::Damaged {
        offset: r.offset(),
        error,
    }
}

/// Walks an RDB stream of `len` bytes (at most `max_value_bytes` for any one key or value),
/// calling `found` for each of our module values and skipping every other value by its
/// encoding. A refusal of the file is a [`WalkError`]; `found`'s own errors stop the walk as
/// they are.
pub fn walk<E: From<WalkError>>(
    input: impl Read,
    len: u64,
    max_value_bytes: u64,
    mut found: impl FnMut(Found) -> Result<(), E>,
) -> Result<Summary, E> {
    let mut r = RdbReader::new(input, len, max_value_bytes);
    let magic: [u8; 9] = r.array().map_err(|e| damaged(&r, e))?;
    let version = std::str::from_utf8(&magic[5..])
        .ok()
        .filter(|_| &magic[..5] == b"REDIS")
        .and_then(|v| v.parse::<u16>().ok())
        .ok_or(WalkError::NotRdb)?;
    if !(9..=MAX_RDB_VERSION).contains(&version) {
        return Err(WalkError::Version(version).into());
    }
    let mut summary = Summary {
        version,
        ..Summary::default()
    };
    let (mut db, mut expires_at) = (0u64, None);
    loop {
        let step = (|| -> Result<Option<(Vec<u8>, u8)>, RdbError> {
            let t = r.u8()?;
            match t {
                op::EOF => return Ok(Some((Vec::new(), op::EOF))),
                op::SELECTDB => db = r.length()?,
                op::EXPIRETIME => {
                    expires_at = Some(i64::from(u32::from_le_bytes(r.array()?)) * 1000)
                }
                op::EXPIRETIME_MS => expires_at = Some(i64::from_le_bytes(r.array()?)),
                op::RESIZEDB => {
                    r.length()?;
                    r.length()?;
                }
                op::AUX => {
                    r.skip_string()?;
                    r.skip_string()?;
                }
                op::FREQ => {
                    r.u8()?;
                }
                op::IDLE => {
                    r.length()?;
                }
                op::MODULE_AUX => {
                    r.length()?;
                    if r.length()? != opcode::UINT {
                        return Err(RdbError::Invalid(
                            "module aux data without its 'when'".into(),
                        ));
                    }
                    r.length()?;
                    r.skip_module_fields()?;
                }
                op::FUNCTION2 => r.skip_string()?,
                op::FUNCTION_PRE_GA => {
                    return Err(RdbError::Invalid(
                        "pre-release (7.0 RC) function data is not supported".into(),
                    ))
                }
                op::SLOT_INFO => {
                    for _ in 0..3 {
                        r.length()?;
                    }
                }
                value_type => {
                    r.set_budget(max_value_bytes);
                    let key = r.string(max_value_bytes)?;
                    return Ok(Some((key, value_type)));
                }
            }
            Ok(None)
        })()
        .map_err(|e| damaged(&r, e))?;
        let Some((key, value_type)) = step else {
            continue;
        };
        if value_type == op::EOF {
            let computed = r.crc();
            let stored = u64::from_le_bytes(r.array().map_err(|e| damaged(&r, e))?);
            if stored != 0 && stored != computed {
                return Err(WalkError::Checksum { stored, computed }.into());
            }
            if r.remaining() != 0 {
                return Err(WalkError::Trailing(r.remaining()).into());
            }
            return Ok(summary);
        }
        let value = if value_type == RDB_TYPE_MODULE_2 {
            r.module_value().map_err(|e| damaged(&r, e))?
        } else {
            let name = skip_value(&mut r, value_type).map_err(|e| damaged(&r, e))?;
            ModuleValue::Foreign(name.to_string())
        };
        match value {
            ModuleValue::Dialect(value) => found(Found {
                db,
                key,
                expires_at: expires_at.take(),
                value,
            })?,
            ModuleValue::Foreign(name) => {
                let name = if value_type == RDB_TYPE_MODULE_2 {
                    format!("module:{name}")
                } else {
                    name
                };
                *summary.skipped.entry(name).or_default() += 1;
            }
        }
        expires_at = None;
    }
}

/// Skips a value of a non-module type by walking its encoding; returns the type's name.
fn skip_value(r: &mut RdbReader<impl Read>, value_type: u8) -> Result<&'static str, RdbError> {
    let strings = |r: &mut RdbReader<_>, per_item: u64| -> Result<(), RdbError> {
        let n = r.length()?;
        for _ in 0..n.saturating_mul(per_item) {
            r.skip_string()?;
        }
        Ok(())
    };
    Ok(match value_type {
        0 => {
            r.skip_string()?;
            "string"
        }
        1 => {
            strings(r, 1)?;
            "list"
        }
        2 => {
            strings(r, 1)?;
            "set"
        }
        3 => {
            // Members with scores as length-prefixed text (253/254/255 = NaN/+inf/-inf).
            for _ in 0..r.length()? {
                r.skip_string()?;
                let len = r.u8()?;
                if len < 253 {
                    r.skip(u64::from(len))?;
                }
            }
            "zset"
        }
        4 => {
            strings(r, 2)?;
            "hash"
        }
        5 => {
            for _ in 0..r.length()? {
                r.skip_string()?;
                r.skip(8)?;
            }
            "zset"
        }
        6 => {
            return Err(RdbError::Invalid(
                "pre-GA module values (type 6) are not supported".into(),
            ))
        }
        // One blob: zipmap, ziplist, intset, listpack encodings.
        9 | 13 | 16 => {
            r.skip_string()?;
            "hash"
        }
        10 => {
            r.skip_string()?;
            "list"
        }
        11 | 20 => {
            r.skip_string()?;
            "set"
        }
        12 | 17 => {
            r.skip_string()?;
            "zset"
        }
        14 => {
            strings(r, 1)?;
            "list"
        }
        18 => {
            // Quicklist nodes: container kind, then the node blob.
            for _ in 0..r.length()? {
                r.length()?;
                r.skip_string()?;
            }
            "list"
        }
        15 | 19 | 21 => {
            skip_stream(r, value_type)?;
            "stream"
        }
        22 | 24 => {
            // Hash with field expiries: (24: minimum expiry), then (ttl, field, value) each.
            if value_type == 24 {
                r.skip(8)?;
            }
            for _ in 0..r.length()? {
                r.length()?;
                r.skip_string()?;
                r.skip_string()?;
            }
            "hash"
        }
        23 | 25 => {
            if value_type == 25 {
                r.skip(8)?;
            }
            r.skip_string()?;
            "hash"
        }
        other => {
            return Err(RdbError::Invalid(format!(
                "value type {other} is unknown (written by a newer Redis?)"
            )))
        }
    })
}

/// Streams (`RDB_TYPE_STREAM_LISTPACKS`, `_2`, `_3`): listpack nodes, metadata, consumer
/// groups with their pending entries and consumers.
fn skip_stream(r: &mut RdbReader<impl Read>, value_type: u8) -> Result<(), RdbError> {
    let v2 = value_type >= 19;
    let v3 = value_type >= 21;
    for _ in 0..r.length()? {
        r.skip_string()?;
        r.skip_string()?;
    }
    // Length, last id; (v2) first id, max deleted id, entries added.
    let ids = if v2 { 1 + 2 + 2 + 2 + 1 } else { 1 + 2 };
    for _ in 0..ids {
        r.length()?;
    }
    for _ in 0..r.length()? {
        r.skip_string()?;
        r.length()?;
        r.length()?;
        if v2 {
            r.length()?;
        }
        // Group PEL: 16-byte id, 8-byte delivery time, delivery count.
        for _ in 0..r.length()? {
            r.skip(16 + 8)?;
            r.length()?;
        }
        for _ in 0..r.length()? {
            r.skip_string()?;
            r.skip(if v3 { 16 } else { 8 })?;
            for _ in 0..r.length()? {
                r.skip(16)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Allowance;
    use crate::codec::rdb_io::RdbSink;
    use crate::encoding::rdb_format::{
        crc64, dump_payload, module_type_id, write_len, write_string, ModuleWriter,
    };
    use crate::types::sbchain::BloomChain;

    fn bloom() -> Value {
        let mut chain = BloomChain::new(100, 0.01, 2, false).unwrap();
        chain.add(b"x", &mut Allowance::unlimited()).unwrap();
        Value::Bloom(chain)
    }

    /// `REDIS<version>`, the body, EOF and the CRC64 trailer.
    fn file(version: &str, body: &[u8]) -> Vec<u8> {
        let mut out = format!("REDIS{version}").into_bytes();
        out.extend_from_slice(body);
        out.push(op::EOF);
        let crc = crc64(0, &out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    fn entry(out: &mut Vec<u8>, value_type: u8, key: &str, value: &[u8]) {
        out.push(value_type);
        write_string(out, key.as_bytes());
        out.extend_from_slice(value);
    }

    fn dialect_value(value: &Value) -> Vec<u8> {
        let payload = dump_payload(value);
        payload[1..payload.len() - 10].to_vec()
    }

    /// Database, key and expiry of each value of ours found.
    type Seen = Vec<(u64, String, Option<i64>)>;

    fn walk_all(data: &[u8]) -> Result<(Seen, Summary), WalkError> {
        let mut found = Vec::new();
        let summary = walk(data, data.len() as u64, 1 << 30, |f| {
            found.push((
                f.db,
                String::from_utf8_lossy(&f.key).into_owned(),
                f.expires_at,
            ));
            Ok(())
        })?;
        Ok((found, summary))
    }

    /// Opcodes and encodings a Redis 7.0 `SAVE` does not produce (module aux data, slot info,
    /// second-precision expiry, legacy zsets, streams v3, hashes with field expiries, another
    /// module's values) are walked too.
    #[test]
    fn every_opcode_and_newer_type_is_walked() {
        let mut b = Vec::new();
        b.push(op::AUX);
        write_string(&mut b, b"redis-ver");
        write_string(&mut b, b"8.2.0");
        b.push(op::MODULE_AUX);
        write_len(&mut b, module_type_id("ReJSON-RL", 3).unwrap());
        write_len(&mut b, 2);
        write_len(&mut b, 2);
        let mut w = ModuleWriter::default();
        w.save_unsigned(7);
        w.save_string(b"aux");
        b.extend_from_slice(&w.out);
        write_len(&mut b, 0);
        b.push(op::FUNCTION2);
        write_string(&mut b, b"#!lua name=lib\n...");
        b.extend_from_slice(&[op::SELECTDB, 0, op::RESIZEDB, 9, 1, op::SLOT_INFO, 1, 2, 3]);
        b.push(op::EXPIRETIME_MS);
        b.extend_from_slice(&4_000_000_000_000i64.to_le_bytes());
        b.extend_from_slice(&[op::FREQ, 5]);
        entry(&mut b, 7, "bf", &dialect_value(&bloom()));
        b.push(op::EXPIRETIME);
        b.extend_from_slice(&1000u32.to_le_bytes());
        b.extend_from_slice(&[op::IDLE, 10]);
        entry(&mut b, 7, "bf-old", &dialect_value(&bloom()));
        // Legacy zset: scores as text, 255 = -inf.
        entry(
            &mut b,
            3,
            "z",
            &[2, 1, b'a', 3, b'1', b'.', b'5', 1, b'b', 255],
        );
        // Stream v3: no nodes, ids, one group with one pending entry and one consumer.
        let mut s = vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, b'g', 0, 0, 0, 1];
        s.extend_from_slice(&[0; 24]);
        s.extend_from_slice(&[1, 1, 1, b'c']);
        s.extend_from_slice(&[0; 16]);
        s.push(1);
        s.extend_from_slice(&[0; 16]);
        entry(&mut b, 21, "st", &s);
        let mut h = vec![0; 8];
        h.extend_from_slice(&[1, 5, 1, b'f', 1, b'v']);
        entry(&mut b, 24, "h24", &h);
        entry(&mut b, 22, "h22", &h[8..]);
        entry(&mut b, 25, "h25", &[0, 0, 0, 0, 0, 0, 0, 0, 2, b'l', b'p']);
        entry(&mut b, 23, "h23", &[2, b'l', b'p']);
        // Another module's value, every opcode.
        let mut m = Vec::new();
        write_len(&mut m, module_type_id("ReJSON-RL", 3).unwrap());
        m.extend_from_slice(&[
            1, 3, 2, 4, 3, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 5, 1, b'x', 0,
        ]);
        entry(&mut b, 7, "json", &m);
        b.extend_from_slice(&[op::SELECTDB, 1]);
        entry(&mut b, 7, "bf", &dialect_value(&bloom()));
        let (found, summary) = walk_all(&file("0012", &b)).unwrap();
        assert_eq!(
            found,
            vec![
                (0, "bf".into(), Some(4_000_000_000_000)),
                (0, "bf-old".into(), Some(1_000_000)),
                (1, "bf".into(), None),
            ]
        );
        assert_eq!(summary.version, 12);
        let skipped: Vec<(&str, u64)> = summary
            .skipped
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(
            skipped,
            [
                ("hash", 4),
                ("module:ReJSON-RL", 1),
                ("stream", 1),
                ("zset", 1)
            ]
        );
    }

    #[test]
    fn damaged_or_unsupported_files_are_refused() {
        let mut b = Vec::new();
        entry(&mut b, 0, "s", &[1, b'v']);
        let good = file("0011", &b);
        assert!(walk_all(&good).is_ok());
        let mut bad_crc = good.clone();
        *bad_crc.last_mut().unwrap() ^= 1;
        assert!(walk_all(&bad_crc)
            .unwrap_err()
            .to_string()
            .contains("checksum"));
        // A zero trailer means "no checksum" (rdbchecksum no).
        let mut unchecked = good.clone();
        let n = unchecked.len();
        unchecked[n - 8..].fill(0);
        assert!(walk_all(&unchecked).is_ok());
        assert!(walk_all(&good[..good.len() - 3]).is_err());
        assert!(walk_all(&file("0008", &b)).is_err());
        assert!(walk_all(&file("0013", &b)).is_err());
        assert!(walk_all(b"RDB").is_err());
        let mut unknown = Vec::new();
        entry(&mut unknown, 40, "k", &[]);
        assert!(walk_all(&file("0012", &unknown))
            .unwrap_err()
            .to_string()
            .contains("unknown"));
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(walk_all(&trailing).is_err());
    }
}
