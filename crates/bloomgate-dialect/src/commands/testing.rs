//! Test support, not part of the dialect's API: a minimal host over a map ([`Harness`]), so
//! command semantics are tested without a server (the dialect's unit and integration tests),
//! and what every host's test harness shares ([`words`], [`err`]).

use super::*;
use crate::config::Config;
use crate::reply::Reply;
use crate::value::Value;
use std::collections::HashMap;

/// Keys, settings and a budget; `memory_limit` 0 means unlimited.
pub struct Harness {
    /// The `bf-*`/`cf-*` settings.
    pub config: Config,
    /// The client's protocol version (2 or 3).
    pub proto: u8,
    /// Bytes the values may take in all (0: unlimited).
    pub memory_limit: u64,
    /// The keyspace.
    pub keys: HashMap<Vec<u8>, Value>,
    /// Keys holding a non-dialect value (a string, say).
    pub foreign: Vec<Vec<u8>>,
    /// The last command's outcome.
    pub last: Option<Outcome>,
    /// The simulated clock.
    pub now_ms: u64,
    /// The keyspace events signalled, in order: `(event, key)`.
    pub events: Vec<(String, Vec<u8>)>,
    /// Commands run as replayed data (replication, a log or snapshot load).
    pub replaying: bool,
    /// The warnings the commands logged, in order.
    pub warnings: Vec<String>,
}

impl Host for Harness {
    fn proto(&self) -> u8 {
        self.proto
    }
    fn config(&self) -> &Config {
        &self.config
    }
    fn memory_budget(&self) -> u64 {
        let used: u64 = self.keys.values().map(Value::memory).sum();
        match self.memory_limit {
            0 => u64::MAX,
            limit => limit.saturating_sub(used),
        }
    }
    fn value(&mut self, key: &[u8]) -> Result<Option<&Value>, WrongType> {
        if self.foreign.iter().any(|k| k == key) {
            return Err(WrongType);
        }
        Ok(self.keys.get(key))
    }
    fn value_mut(&mut self, key: &[u8]) -> Result<Option<&mut Value>, WrongType> {
        if self.foreign.iter().any(|k| k == key) {
            return Err(WrongType);
        }
        Ok(self.keys.get_mut(key))
    }
    fn create(&mut self, key: &[u8], value: Value) {
        self.keys.insert(key.to_vec(), value);
    }
    fn now_ms(&self) -> u64 {
        self.now_ms
    }
    fn notify(&mut self, event: &str, key: &[u8]) {
        self.events.push((event.to_string(), key.to_vec()));
    }
    fn replaying(&self) -> bool {
        self.replaying
    }
    fn warn(&mut self, message: &str) {
        self.warnings.push(message.to_string());
    }
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    /// An empty keyspace with default settings, RESP2, no memory limit, the clock at 0.
    pub fn new() -> Self {
        Self {
            config: Config::default(),
            proto: 2,
            memory_limit: 0,
            keys: HashMap::new(),
            foreign: Vec::new(),
            last: None,
            now_ms: 0,
            events: Vec::new(),
            replaying: false,
            warnings: Vec::new(),
        }
    }

    /// Runs a command given as space-separated words.
    pub fn run(&mut self, line: &str) -> Reply {
        self.run_args(&words(line))
    }

    /// Runs a command given as its arguments, the name first (a dialect command's).
    pub fn run_args(&mut self, args: &[Vec<u8>]) -> Reply {
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let info = table_for(self.config.dialect)
            .iter()
            .find(|c| c.name.as_bytes().eq_ignore_ascii_case(args[0]))
            .expect("a dialect command");
        let outcome = execute(self, info, &args);
        let reply = outcome.reply.clone();
        self.last = Some(outcome);
        reply
    }

    /// `{family}.SCANDUMP key` walked from iterator 0 to its end: the `(iterator, chunk)` pairs
    /// `{family}.LOADCHUNK` takes, the header first. Panics on a reply that is neither a chunk
    /// nor the family's end: `0, nil` for CF, `0` and a bulk string for the others.
    pub fn scandump(&mut self, family: &str, key: &str) -> Vec<(i64, Vec<u8>)> {
        let mut chunks = Vec::new();
        let mut iter = 0;
        loop {
            let reply = self.run(&format!("{family}.SCANDUMP {key} {iter}"));
            let Reply::Array(pair) = &reply else {
                panic!("{family}.SCANDUMP: {reply:?}")
            };
            match (&pair[0], &pair[1]) {
                (Reply::Int(0), end) => {
                    let ended = if family == "CF" {
                        *end == Reply::Nil
                    } else {
                        matches!(end, Reply::Bulk(_))
                    };
                    assert!(ended, "{family}.SCANDUMP's end: {reply:?}");
                    return chunks;
                }
                (Reply::Int(next), Reply::Bulk(data)) => {
                    chunks.push((*next, data.clone()));
                    iter = *next;
                }
                _ => panic!("{family}.SCANDUMP: {reply:?}"),
            }
        }
    }

    /// `{family}.LOADCHUNK key` of every pair [`Self::scandump`] gave; each must answer OK.
    pub fn loadchunks(&mut self, family: &str, key: &str, chunks: &[(i64, Vec<u8>)]) {
        for (iter, data) in chunks {
            let args = [
                format!("{family}.LOADCHUNK").into_bytes(),
                key.as_bytes().to_vec(),
                iter.to_string().into_bytes(),
                data.clone(),
            ];
            assert_eq!(
                self.run_args(&args),
                Reply::ok(),
                "{family}.LOADCHUNK {iter}"
            );
        }
    }
}

/// A command line's space-separated words, as a command's arguments.
pub fn words(line: &str) -> Vec<Vec<u8>> {
    line.split_whitespace()
        .map(|w| w.as_bytes().to_vec())
        .collect()
}

/// The error reply `msg`.
pub fn err(msg: &str) -> Reply {
    Reply::error(msg)
}
