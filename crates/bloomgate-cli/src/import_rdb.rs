//! `bloomgate import-rdb`: moves the RedisBloom keys of a Redis RDB file (a `SAVE` of Redis +
//! RedisBloom, RDB versions 9–12) — Bloom, cuckoo, Count-Min, Top-K, t-digest, and our windowed
//! filters, and valkey-bloom's `bloomfltr` filters — into bloomgate, either into a running server (`--to`, with pipelined `RESTORE`s,
//! which a Redis + RedisBloom accepts too) or into a data directory that `bloomgate serve --dir`
//! starts from (`--dir`, through the server's snapshot writer).
//!
//! The file is streamed through the dialect's walker
//! ([`bloomgate_dialect::encoding::rdb_file`]), which skips every other value and checks the
//! CRC64, so memory stays at the largest value of ours (plus, with `--dir`, the imported
//! values, which the server will hold anyway). This module parses the arguments, opens the
//! file, shows progress and sends or writes what the walk finds.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;

use anyhow::{bail, Context as _};
use bloomgate_dialect::encoding::rdb_file::{walk, Found};
use bloomgate_dialect::encoding::rdb_format::dump_payload;
use bloomgate_server::keyspace::Entry;
use bloomgate_server::resp::Encode;
use indicatif::{ProgressBar, ProgressStyle};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["to", "dir"])))]
pub struct Args {
    /// The RDB file (`dump.rdb` of Redis + RedisBloom, RDB versions 9 to 12).
    file: PathBuf,
    /// Send the keys to a running server: `redis://[[user]:password@]HOST:PORT[/db]`
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
