//! `bloomgate import-rdb`: moves the BF and CF keys of a Redis RDB file (a `SAVE` of Redis +
//! RedisBloom, RDB versions 9–12) into bloomgate, either into a running server (`--to`, with
//! pipelined `RESTORE`s, which a Redis + RedisBloom accepts too) or into a data directory that
//! `bloomgate serve --dir` starts from (`--dir`, through the server's snapshot writer).
//!
//! The file is streamed: every other value is skipped by walking its encoding (strings, lists,
//! sets, sorted sets, hashes in all their encodings, streams, other modules' values) without
//! keeping it, so memory stays at the largest BF/CF value (plus, with `--dir`, the imported
//! filters, which the server will hold anyway). The RDB's trailing CRC64 is checked.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;

use anyhow::{bail, Context as _};
use bloomgate_dialect::rdb::RdbError;
use bloomgate_dialect::rdb_format::{
    dump_payload, ModuleValue, RdbReader, MAX_RDB_VERSION, RDB_TYPE_MODULE_2,
};
use bloomgate_dialect::Value;
use bloomgate_server::keyspace::Entry;
use bloomgate_server::resp::Encode;
use indicatif::{ProgressBar, ProgressStyle};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["to", "dir"])))]
pub struct Args {
    /// The RDB file (`dump.rdb` of Redis + RedisBloom, RDB versions 9 to 12).
    file: PathBuf,
    /// Send the keys to a running server: redis://[[user]:password@]HOST:PORT[/db]
    /// (bloomgate serve, or a Redis with RedisBloom loaded).
    #[arg(long)]
    to: Option<String>,
    /// Write a new bloomgate data directory (must not hold data yet).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Import the keys of this Redis database (the others are counted as skipped).
    #[arg(long, default_value_t = 0)]
    db: u64,
    /// With --to: replace keys that already exist (otherwise they are reported and kept).
    #[arg(long)]
    replace: bool,
    /// Largest single value to load, in bytes; a larger (or forged) one stops the import.
    #[arg(long, default_value_t = 16 << 30)]
    max_value_bytes: u64,
}

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

/// A BF or CF key found in the file.
pub struct Found {
    pub db: u64,
    pub key: Vec<u8>,
    /// Absolute expiry, Unix milliseconds.
    pub expires_at: Option<i64>,
    pub value: Value,
}

/// What a walk through the file saw.
#[derive(Default, Debug)]
pub struct Summary {
    pub version: u16,
    /// Skipped keys per type name (`string`, `set`, `module:NAME`, ...).
    pub skipped: BTreeMap<String, u64>,
}

fn rdb_err(r: &RdbReader<impl Read>, e: RdbError) -> anyhow::Error {
    anyhow::anyhow!("RDB file is damaged at offset {}: {e}", r.offset())
}

/// Walks an RDB stream of `len` bytes, calling `found` for each BF/CF key and skipping every
/// other value by its encoding.
pub fn walk(
    input: impl Read,
    len: u64,
    max_value_bytes: u64,
    mut found: impl FnMut(Found) -> anyhow::Result<()>,
) -> anyhow::Result<Summary> {
    let mut r = RdbReader::new(input, len, max_value_bytes);
    let magic: [u8; 9] = r.array().map_err(|e| rdb_err(&r, e))?;
    let version = std::str::from_utf8(&magic[5..])
        .ok()
        .filter(|_| &magic[..5] == b"REDIS")
        .and_then(|v| v.parse::<u16>().ok())
        .context("not an RDB file (no REDIS magic)")?;
    if !(9..=MAX_RDB_VERSION).contains(&version) {
        bail!("RDB version {version} is not supported (9 to {MAX_RDB_VERSION} are)");
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
                    if r.length()? != bloomgate_dialect::rdb_format::opcode::UINT {
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
        .map_err(|e| rdb_err(&r, e))?;
        let Some((key, value_type)) = step else {
            continue;
        };
        if value_type == op::EOF {
            let computed = r.crc();
            let stored = u64::from_le_bytes(r.array().map_err(|e| rdb_err(&r, e))?);
            if stored != 0 && stored != computed {
                bail!(
                    "RDB file checksum mismatch (stored {stored:#018x}, computed {computed:#018x})"
                );
            }
            if r.remaining() != 0 {
                bail!("{} bytes after the RDB file's end", r.remaining());
            }
            return Ok(summary);
        }
        let value = if value_type == RDB_TYPE_MODULE_2 {
            r.module_value().map_err(|e| rdb_err(&r, e))?
        } else {
            let name = skip_value(&mut r, value_type).map_err(|e| rdb_err(&r, e))?;
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

/// Where imported keys go.
trait Target {
    fn put(&mut self, found: Found) -> anyhow::Result<()>;
    fn finish(&mut self) -> anyhow::Result<()>;
}

/// `--dir`: collects the filters, then writes one snapshot.
struct DirTarget {
    dir: PathBuf,
    entries: Vec<(Vec<u8>, Entry)>,
}

impl Target for DirTarget {
    fn put(&mut self, found: Found) -> anyhow::Result<()> {
        self.entries
            .push((found.key, Entry::new(found.value, found.expires_at)));
        Ok(())
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        bloomgate_server::persistence::write_snapshot(&self.dir, &self.entries, 1)
            .with_context(|| format!("writing a snapshot in {}", self.dir.display()))?;
        Ok(())
    }
}

/// Bytes of RESTORE commands sent before their replies are read.
const PIPELINE_BYTES: usize = 8 << 20;

/// `--to`: pipelined RESTOREs over one connection.
struct ServerTarget {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    replace: bool,
    pending: Vec<u8>,
    keys: Vec<Vec<u8>>,
    refused: Vec<String>,
}

fn encode(args: &[&[u8]], out: &mut Vec<u8>) {
    bloomgate_dialect::Reply::Array(
        args.iter()
            .map(|a| bloomgate_dialect::Reply::Bulk(a.to_vec()))
            .collect(),
    )
    .encode(2, out);
}

impl ServerTarget {
    fn connect(url: &str, replace: bool) -> anyhow::Result<Self> {
        let rest = url.strip_prefix("redis://").unwrap_or(url);
        let (userinfo, rest) = match rest.rsplit_once('@') {
            Some((user, rest)) => (Some(user), rest),
            None => (None, rest),
        };
        let (addr, db) = match rest.split_once('/') {
            Some((addr, db)) if !db.is_empty() => (addr, Some(db)),
            Some((addr, _)) => (addr, None),
            None => (rest, None),
        };
        let writer = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        let reader = BufReader::new(writer.try_clone()?);
        let mut target = Self {
            writer,
            reader,
            replace,
            pending: Vec::new(),
            keys: Vec::new(),
            refused: Vec::new(),
        };
        let mut setup: Vec<Vec<&[u8]>> = Vec::new();
        match userinfo.map(|u| u.split_once(':').unwrap_or(("", u))) {
            Some(("", pass)) => setup.push(vec![b"AUTH", pass.as_bytes()]),
            Some((user, pass)) => setup.push(vec![b"AUTH", user.as_bytes(), pass.as_bytes()]),
            None => {}
        }
        if let Some(db) = db {
            setup.push(vec![b"SELECT", db.as_bytes()]);
        }
        for args in setup {
            let mut out = Vec::new();
            encode(&args, &mut out);
            target.writer.write_all(&out)?;
            if let Err(e) = target.reply()? {
                bail!("{} refused: {e}", String::from_utf8_lossy(args[0]));
            }
        }
        Ok(target)
    }

    /// One status or error reply line.
    fn reply(&mut self) -> anyhow::Result<Result<(), String>> {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line)?;
        let text = String::from_utf8_lossy(&line).trim_end().to_string();
        match text.as_bytes().first() {
            Some(b'+') => Ok(Ok(())),
            Some(b'-') => Ok(Err(text[1..].to_string())),
            _ => bail!("unexpected reply from the server: {text:?}"),
        }
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        self.writer.write_all(&self.pending)?;
        self.pending.clear();
        for key in std::mem::take(&mut self.keys) {
            if let Err(e) = self.reply()? {
                self.refused
                    .push(format!("{}: {e}", String::from_utf8_lossy(&key)));
            }
        }
        Ok(())
    }
}

impl Target for ServerTarget {
    fn put(&mut self, found: Found) -> anyhow::Result<()> {
        let payload = dump_payload(&found.value);
        if payload.len() > bloomgate_server::resp::MAX_BULK_LEN {
            bail!(
                "{}: a {}-byte value is over the protocol's 512 MiB argument limit for RESTORE; \
                 import it with --dir",
                String::from_utf8_lossy(&found.key),
                payload.len()
            );
        }
        let ttl = found.expires_at.unwrap_or(0).to_string();
        let mut args: Vec<&[u8]> = vec![b"RESTORE", &found.key, ttl.as_bytes(), &payload];
        if found.expires_at.is_some() {
            args.push(b"ABSTTL");
        }
        if self.replace {
            args.push(b"REPLACE");
        }
        encode(&args, &mut self.pending);
        self.keys.push(found.key.clone());
        if self.pending.len() >= PIPELINE_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        self.flush()?;
        if !self.refused.is_empty() {
            for line in self.refused.iter().take(20) {
                eprintln!("bloomgate: refused: {line}");
            }
            bail!("{} keys were refused by the server", self.refused.len());
        }
        Ok(())
    }
}

fn progress_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} {eta}")
            .expect("valid template"),
    );
    bar
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let file =
        File::open(&args.file).with_context(|| format!("opening {}", args.file.display()))?;
    let len = file.metadata()?.len();
    let mut target: Box<dyn Target> = match (&args.to, &args.dir) {
        (Some(url), _) => Box::new(ServerTarget::connect(url, args.replace)?),
        (None, Some(dir)) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            if std::fs::read_dir(dir)?.next().is_some() {
                bail!(
                    "{} is not empty: import into a new data directory",
                    dir.display()
                );
            }
            Box::new(DirTarget {
                dir: dir.clone(),
                entries: Vec::new(),
            })
        }
        (None, None) => unreachable!("clap requires --to or --dir"),
    };
    let bar = progress_bar(len);
    let now = bloomgate_server::keyspace::now_ms();
    let (mut imported, mut expired, mut other_db) = (BTreeMap::<&str, u64>::new(), 0u64, 0u64);
    let summary = walk(
        bar.wrap_read(BufReader::with_capacity(1 << 20, file)),
        len,
        args.max_value_bytes,
        |found| {
            if found.db != args.db {
                other_db += 1;
                return Ok(());
            }
            if found.expires_at.is_some_and(|at| at <= now) {
                expired += 1;
                return Ok(());
            }
            *imported.entry(found.value.type_name()).or_default() += 1;
            target.put(found)
        },
    );
    bar.finish_and_clear();
    let summary = summary?;
    target.finish()?;
    let total: u64 = imported.values().sum();
    let list = |m: &mut dyn Iterator<Item = (String, u64)>| {
        m.map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let kinds = list(&mut imported.iter().map(|(k, v)| (k.to_string(), *v)));
    print!("imported {total} keys from RDB version {}", summary.version);
    println!(
        "{}",
        if total > 0 {
            format!(" ({kinds})")
        } else {
            String::new()
        }
    );
    let mut skipped = summary.skipped;
    if expired > 0 {
        skipped.insert("already expired".into(), expired);
    }
    if other_db > 0 {
        skipped.insert(
            format!("RedisBloom keys in databases other than {}", args.db),
            other_db,
        );
    }
    if !skipped.is_empty() {
        println!("skipped: {}", list(&mut skipped.into_iter()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloomgate_dialect::rdb::RdbSink;
    use bloomgate_dialect::rdb_format::{
        crc64, module_type_id, write_len, write_string, ModuleWriter,
    };
    use bloomgate_dialect::sbchain::BloomChain;

    fn bloom() -> Value {
        let mut chain = BloomChain::new(100, 0.01, 2, false).unwrap();
        chain
            .add(b"x", &mut bloomgate_dialect::budget::Allowance::unlimited())
            .unwrap();
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

    /// Database, key and expiry of each BF/CF key found.
    type Seen = Vec<(u64, String, Option<i64>)>;

    fn walk_all(data: &[u8]) -> anyhow::Result<(Seen, Summary)> {
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
