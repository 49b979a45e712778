//! Reading keys (one per line: the line's bytes without the trailing `\n`) from a file or `-`
//! (stdin), and writing filter files atomically (temp file, fsync, rename) so an interrupted
//! build never leaves a half-written filter under the final name.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use bloomgate::any::AnyFilter;

/// Opens `path` for reading; `-` is stdin.
pub fn open_input(path: &Path) -> Result<Box<dyn BufRead>> {
    if path == Path::new("-") {
        Ok(Box::new(BufReader::with_capacity(1 << 20, io::stdin())))
    } else {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        Ok(Box::new(BufReader::with_capacity(1 << 20, file)))
    }
}

/// Calls `each` with every line of `reader`, without its `\n`. A final line without a newline
/// counts; nothing after the last newline does.
pub fn for_each_line(
    mut reader: impl BufRead,
    mut each: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader
            .read_until(b'\n', &mut line)
            .context("cannot read input")?
            == 0
        {
            return Ok(());
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        each(&line)?;
    }
}

/// All of an input's bytes plus the ranges of its lines, so keys can be borrowed as slices
/// without one allocation per key.
pub struct Lines {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl Lines {
    pub fn read(mut reader: impl Read) -> Result<Self> {
        let mut data = Vec::new();
        reader.read_to_end(&mut data).context("cannot read input")?;
        let mut ends: Vec<usize> = memchr_newlines(&data);
        if data.last().is_some_and(|&b| b != b'\n') {
            ends.push(data.len());
        }
        Ok(Self { data, ends })
    }

    /// The keys as slices into the buffer.
    pub fn keys(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let key = &self.data[start..end];
                start = end + 1;
                key
            })
            .collect()
    }
}

fn memchr_newlines(data: &[u8]) -> Vec<usize> {
    data.iter()
        .enumerate()
        .filter_map(|(i, &b)| (b == b'\n').then_some(i))
        .collect()
}

/// A filter file and the keys to ask it about: arguments, then one per line of `--input`
/// (`query`, `remove`; each words the help of `filter` and `keys` its own way).
#[derive(clap::Args)]
pub struct FilterKeys {
    /// Filter file.
    pub filter: PathBuf,
    /// Keys.
    pub keys: Vec<String>,
    /// More keys, one per line (`-` for stdin).
    #[arg(long, short = 'i')]
    pub input: Option<PathBuf>,
}

impl FilterKeys {
    /// The filter, once there is a key to ask it about.
    pub fn load(&self) -> Result<AnyFilter> {
        if self.keys.is_empty() && self.input.is_none() {
            bail!("no keys: give keys as arguments or --input PATH|-");
        }
        load_filter(&self.filter)
    }
}

/// Loads a filter file of any kind.
pub fn load_filter(path: &Path) -> Result<AnyFilter> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    AnyFilter::read_from(BufReader::with_capacity(1 << 20, file))
        .with_context(|| format!("cannot load {}", path.display()))
}

/// Writes `bytes` to `path` atomically: a sibling temp file, fsync, then rename over `path`.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp: PathBuf = {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".tmp-{}", std::process::id()));
        path.with_file_name(name)
    };
    let result = (|| -> io::Result<()> {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(err) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(err).with_context(|| format!("cannot write {}", path.display()));
    }
    Ok(())
}

/// Runs `write` against a buffered stdout; a closed pipe (`bloomgate query ... | head`) ends the
/// output quietly instead of failing.
pub fn with_stdout(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    match write(&mut out).and_then(|()| out.flush()) {
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write output"),
    }
}
