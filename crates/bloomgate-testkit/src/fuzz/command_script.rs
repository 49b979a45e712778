//! The `bf_loadchunk` and `cf_loadchunk` fuzz checks, shared with the regression tests in
//! `crates/bloomgate-server/tests/fuzz_regressions.rs`.
//!
//! A fuzz input is decoded into a short script of `BF.LOADCHUNK` / `CF.LOADCHUNK` commands on one
//! key, run through the synchronous command layer (`commands::execute`, as a client connection
//! would), followed by every command that reads or changes the loaded filter, then a full
//! SCANDUMP whose chunks are loaded into a second key and dumped again: the two dumps must be
//! identical. Errors are fine; panics, runaway allocation (maxmemory is 64 MiB) and a
//! SCANDUMP iterator that does not advance are not. Only command names are used, so this file
//! compiles whether or not the CF.* family exists yet.

use bloomgate_server::commands::{execute, Session, Store};
use bloomgate_server::config::Config;
use bloomgate_server::resp::Reply;

/// maxmemory for the fuzzed store: a forged header must not allocate beyond it.
pub const MAXMEMORY: u64 = 64 * 1024 * 1024;
/// At most this many LOADCHUNK commands per input.
pub const MAX_LOADS: usize = 16;
/// A SCANDUMP of a filter within `MAXMEMORY` needs far fewer steps than this.
const MAX_SCANDUMP_STEPS: usize = 1 << 20;

/// Which command family a script drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// BF.* (a scalable Bloom filter).
    Bloom,
    /// CF.* (a cuckoo filter).
    Cuckoo,
}

impl Family {
    fn prefix(self) -> &'static str {
        match self {
            Family::Bloom => "BF",
            Family::Cuckoo => "CF",
        }
    }
}

/// How a LOADCHUNK's iterator argument is chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Iter {
    /// `1`: the header of a new filter.
    Header,
    /// A number taken from the input.
    Value(i64),
    /// What SCANDUMP would return after this chunk if the chunks so far were contiguous:
    /// `1 + bytes loaded since the header + this chunk's length`.
    Next,
    /// Raw argument bytes (not necessarily a number).
    Raw(Vec<u8>),
}

/// One decoded LOADCHUNK.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Load {
    /// Its iterator argument.
    pub iter: Iter,
    /// Its data argument.
    pub data: Vec<u8>,
}

/// A decoded fuzz input.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Script {
    /// RESP3 session (changes INFO reply shapes).
    pub resp3: bool,
    /// The LOADCHUNKs, in order.
    pub loads: Vec<Load>,
}

/// Input layout: byte 0 = flags (bit 0: RESP3); then records of `tag u8`, for tag % 4 == 1 an
/// `i64` LE iterator, for tag % 4 == 3 a length byte and that many iterator bytes, then a `u32`
/// LE data length (cut to what is left) and the data. Tag % 4: 0 header, 1 value, 2 next, 3 raw.
pub fn decode(data: &[u8]) -> Script {
    let mut input = Input { data };
    let mut script = Script {
        resp3: input.u8().unwrap_or(0) & 1 == 1,
        loads: Vec::new(),
    };
    while script.loads.len() < MAX_LOADS {
        let Some(tag) = input.u8() else { break };
        let iter = match tag % 4 {
            0 => Iter::Header,
            1 => match input.take(8) {
                Some(b) => Iter::Value(i64::from_le_bytes(b.try_into().expect("8 bytes"))),
                None => break,
            },
            2 => Iter::Next,
            _ => {
                let len = input.u8().unwrap_or(0);
                Iter::Raw(input.take_up_to(usize::from(len)).to_vec())
            }
        };
        let len = match input.take(4) {
            Some(b) => u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize,
            None => 0,
        };
        let data = input.take_up_to(len).to_vec();
        script.loads.push(Load { iter, data });
    }
    script
}

/// Inverse of [`decode`] (for building seed inputs).
pub fn encode(script: &Script) -> Vec<u8> {
    let mut out = vec![u8::from(script.resp3)];
    for load in &script.loads {
        match &load.iter {
            Iter::Header => out.push(0),
            Iter::Value(v) => {
                out.push(1);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Iter::Next => out.push(2),
            Iter::Raw(bytes) => {
                out.push(3);
                out.push(bytes.len() as u8);
                out.extend_from_slice(bytes);
            }
        }
        out.extend_from_slice(&(load.data.len() as u32).to_le_bytes());
        out.extend_from_slice(&load.data);
    }
    out
}

struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.data.split_first()?;
        self.data = rest;
        Some(b)
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.data.len() < n {
            return None;
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Some(head)
    }
    fn take_up_to(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        self.take(n).expect("length checked")
    }
}

/// A store with maxmemory set and an authenticated session, as a connection would have.
pub struct Client {
    /// The keyspace and settings.
    pub store: Store,
    /// The one connection's state.
    pub session: Session,
    /// Every command run and its reply, in order.
    pub transcript: Vec<(Vec<Vec<u8>>, Reply)>,
}

impl Client {
    /// An empty store under [`MAXMEMORY`], its session speaking RESP3 when `resp3`.
    pub fn new(resp3: bool) -> Self {
        let config = Config {
            maxmemory: MAXMEMORY,
            ..Config::default()
        };
        let mut session = Session::new(1, false);
        session.proto = if resp3 { 3 } else { 2 };
        Self {
            store: Store::new(config),
            session,
            transcript: Vec::new(),
        }
    }

    /// Runs one command through the server's dispatch and records it in the transcript.
    pub fn run(&mut self, args: &[&[u8]]) -> Reply {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        let reply = execute(&mut self.store, &mut self.session, &args, false).reply;
        self.transcript.push((args, reply.clone()));
        reply
    }

    /// Runs a command given as space-separated words.
    pub fn line(&mut self, line: &str) -> Reply {
        let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        self.run(&words)
    }

    /// A full SCANDUMP of `key`: the (iterator, chunk) pairs LOADCHUNK takes, header first.
    /// `None` if SCANDUMP answered with an error.
    pub fn scandump(&mut self, family: Family, key: &str) -> Option<Vec<(i64, Vec<u8>)>> {
        let command = format!("{}.SCANDUMP", family.prefix());
        let mut chunks = Vec::new();
        let mut iter = 0i64;
        for _ in 0..MAX_SCANDUMP_STEPS {
            let reply = self.run(&[
                command.as_bytes(),
                key.as_bytes(),
                iter.to_string().as_bytes(),
            ]);
            let Reply::Array(items) = reply else {
                assert!(reply.is_error(), "{command}: unexpected reply {reply:?}");
                return None;
            };
            let (next, data) = match items.as_slice() {
                [Reply::Int(next), Reply::Bulk(data)] => (*next, data.clone()),
                [Reply::Int(next), Reply::Nil] => (*next, Vec::new()),
                other => panic!("{command}: unexpected reply {other:?}"),
            };
            if next == 0 {
                return Some(chunks);
            }
            assert!(next > iter, "{command} did not advance: {iter} -> {next}");
            chunks.push((next, data));
            iter = next;
        }
        panic!("{command} did not finish in {MAX_SCANDUMP_STEPS} steps");
    }

    /// Loads a dump into `key`; true if every chunk was accepted.
    pub fn load(&mut self, family: Family, key: &str, dump: &[(i64, Vec<u8>)]) -> bool {
        let command = format!("{}.LOADCHUNK", family.prefix());
        dump.iter().all(|(iter, data)| {
            self.run(&[
                command.as_bytes(),
                key.as_bytes(),
                iter.to_string().as_bytes(),
                data,
            ]) == Reply::ok()
        })
    }
}

/// Items the probe phase adds, tests and deletes.
const ITEMS: [&str; 6] = ["a", "b", "item0", "item1", "", "\u{fffd}\u{0}x"];

/// Runs the whole check for `family`; returns the client (its transcript) for tests.
pub fn check(family: Family, data: &[u8]) -> Client {
    let script = decode(data);
    let mut client = Client::new(script.resp3);
    let p = family.prefix();
    let loadchunk = format!("{p}.LOADCHUNK");
    let mut loaded = 0i64;
    for load in &script.loads {
        let iter = match &load.iter {
            Iter::Header => {
                loaded = 0;
                b"1".to_vec()
            }
            Iter::Value(v) => v.to_string().into_bytes(),
            Iter::Next => {
                loaded = loaded.saturating_add(load.data.len() as i64);
                loaded.saturating_add(1).to_string().into_bytes()
            }
            Iter::Raw(bytes) => bytes.clone(),
        };
        client.run(&[loadchunk.as_bytes(), b"k", &iter, &load.data]);
    }
    // SCANDUMP must take any iterator the input names, not only the ones it handed out.
    let scandump = format!("{p}.SCANDUMP");
    for load in &script.loads {
        if let Iter::Value(v) = load.iter {
            client.run(&[scandump.as_bytes(), b"k", v.to_string().as_bytes()]);
        }
    }
    probe(&mut client, family);
    client
}

/// Every command that reads or changes the filter at `k`, then the dump/reload comparison.
fn probe(client: &mut Client, family: Family) {
    let p = family.prefix();
    for item in ITEMS {
        client.run(&[format!("{p}.EXISTS").as_bytes(), b"k", item.as_bytes()]);
    }
    client.line(&format!("{p}.MEXISTS k a b item0"));
    client.line(&format!("{p}.CARD k"));
    client.line(&format!("{p}.INFO k"));
    client.line(&format!("{p}.DEBUG k"));
    if family == Family::Bloom {
        for field in [
            "CAPACITY",
            "SIZE",
            "FILTERS",
            "ITEMS",
            "EXPANSION",
            "LAYOUT",
        ] {
            client.line(&format!("BF.INFO k {field}"));
        }
    }
    for item in ITEMS {
        client.run(&[format!("{p}.ADD").as_bytes(), b"k", item.as_bytes()]);
    }
    match family {
        Family::Bloom => {
            client.line("BF.MADD k c d e f g h i j");
            client.line("BF.INSERT k NOCREATE ITEMS x y z");
        }
        Family::Cuckoo => {
            client.line("CF.ADDNX k a");
            client.line("CF.INSERT k NOCREATE ITEMS x y z");
            client.line("CF.INSERTNX k NOCREATE ITEMS x w");
            for item in ITEMS {
                client.run(&[b"CF.COUNT", b"k", item.as_bytes()]);
                client.run(&[b"CF.DEL", b"k", item.as_bytes()]);
            }
            client.line("CF.COMPACT k");
            client.line("CF.INFO k");
        }
    }
    client.line("TYPE k");
    client.line("MEMORY USAGE k");
    // What the filter holds now must survive SCANDUMP → LOADCHUNK unchanged.
    let Some(dump) = client.scandump(family, "k").filter(|d| !d.is_empty()) else {
        return;
    };
    if client.load(family, "copy", &dump) {
        let again = client
            .scandump(family, "copy")
            .expect("a loaded dump can be dumped");
        assert_eq!(dump, again, "{p}.SCANDUMP of a reloaded dump differs");
        for item in ITEMS {
            let exists = format!("{p}.EXISTS");
            let original = client.run(&[exists.as_bytes(), b"k", item.as_bytes()]);
            let copy = client.run(&[exists.as_bytes(), b"copy", item.as_bytes()]);
            assert_eq!(original, copy, "{p}.EXISTS {item:?} differs after reload");
        }
    }
}

/// A seed input: the SCANDUMP of a real filter made with `setup` (command lines), encoded as a
/// LOADCHUNK script with explicit iterators. `None` if the family is not available.
pub fn seed_from(family: Family, setup: &[&str], resp3: bool) -> Option<Vec<u8>> {
    let mut client = Client::new(resp3);
    for line in setup {
        if client.line(line).is_error() {
            return None;
        }
    }
    let dump = client.scandump(family, "k")?;
    let loads = dump
        .into_iter()
        .map(|(iter, data)| Load {
            iter: if iter == 1 {
                Iter::Header
            } else {
                Iter::Value(iter)
            },
            data,
        })
        .collect();
    Some(encode(&Script { resp3, loads }))
}
