//! Redis itself as the oracle for the server's Redis-exact edges: glob patterns (KEYS, and
//! COMMAND LIST FILTERBY PATTERN for the case-insensitive matching CONFIG GET uses), inline
//! command splitting, and the ACL subcommands' answers (`tests/data/acl_cases.txt`, which the
//! unit tests replay against our command layer). Each test starts Debian's `redis-server` on a
//! free loopback port and is skipped, saying so, when it is not installed.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bloomgate_server::glob::{glob_match, matches_all};
use bloomgate_server::inline::split_args;
use bloomgate_testkit::{have_redis_server, redis_server, temp_dir, Process};

/// A RESP2 reply as Redis sent it.
#[derive(Debug, Clone, PartialEq)]
enum R {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<R>>),
}

impl R {
    /// The rendering `tests/data/acl_cases.txt` uses.
    fn render(&self) -> String {
        match self {
            R::Simple(s) => s.clone(),
            R::Error(e) => format!("(error) {e}"),
            R::Int(n) => format!("(integer) {n}"),
            R::Bulk(None) | R::Array(None) => "(nil)".into(),
            R::Bulk(Some(b)) => format!("\"{}\"", String::from_utf8_lossy(b)),
            R::Array(Some(items)) => {
                let parts: Vec<String> = items.iter().map(R::render).collect();
                format!("[{}]", parts.join(", "))
            }
        }
    }

    fn strings(&self) -> BTreeSet<Vec<u8>> {
        let R::Array(Some(items)) = self else {
            panic!("not an array: {self:?}")
        };
        items
            .iter()
            .map(|i| match i {
                R::Bulk(Some(b)) => b.clone(),
                other => panic!("not a bulk string: {other:?}"),
            })
            .collect()
    }
}

struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    fn open(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Conn {
            reader: BufReader::new(stream),
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        self.reader.get_mut().write_all(bytes).unwrap();
    }

    fn send(&mut self, args: &[&[u8]]) {
        self.send_raw(&bloomgate_testkit::resp_command(args));
    }

    fn call(&mut self, args: &[&[u8]]) -> R {
        self.send(args);
        self.read().expect("a reply")
    }

    /// The next reply, `None` when the server closed the connection.
    fn read(&mut self) -> Option<R> {
        let mut line = Vec::new();
        if self.reader.read_until(b'\n', &mut line).ok()? == 0 {
            return None;
        }
        line.truncate(line.len() - 2);
        let rest = String::from_utf8_lossy(&line[1..]).into_owned();
        let n = || rest.parse::<i64>().unwrap();
        Some(match line[0] {
            b'+' => R::Simple(rest),
            b'-' => R::Error(rest),
            b':' => R::Int(n()),
            b'$' if n() < 0 => R::Bulk(None),
            b'$' => {
                let mut data = vec![0; n() as usize + 2];
                self.reader.read_exact(&mut data).unwrap();
                data.truncate(n() as usize);
                R::Bulk(Some(data))
            }
            b'*' if n() < 0 => R::Array(None),
            b'*' => R::Array(Some((0..n()).map(|_| self.read().unwrap()).collect())),
            other => panic!("unexpected reply type {other}"),
        })
    }
}

fn start(test: &str) -> Option<Process> {
    if !have_redis_server(test) {
        return None;
    }
    let dir = temp_dir(test);
    Some(redis_server(&dir, |_| {}).unwrap_or_else(|log| panic!("redis-server: {log}")))
}

/// A small deterministic generator (no dependency needed for test inputs).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }

    fn word(&mut self, alphabet: &[u8], max_len: usize) -> Vec<u8> {
        let len = self.next(max_len + 1);
        (0..len)
            .map(|_| alphabet[self.next(alphabet.len())])
            .collect()
    }
}

/// The bytes random glob subjects and patterns are drawn from: every metacharacter, letters of
/// both cases, and bytes above ASCII.
const GLOB_BYTES: &[u8] = b"ab]-^\\[*?Az\x80\xff";

/// Fixed test inputs as owned byte strings (random ones are added to them).
fn owned(cases: &[&[u8]]) -> Vec<Vec<u8>> {
    cases.iter().map(|c| c.to_vec()).collect()
}

#[test]
fn glob_matches_as_redis_keys_does() {
    let Some(redis) = start("oracle-glob") else {
        return;
    };
    let mut c = Conn::open(redis.port);
    let mut rng = Lcg(7);
    let mut subjects: BTreeSet<Vec<u8>> = owned(&[
        &b""[..],
        b"hello",
        b"hallo",
        b"hxllo",
        b"hllo",
        b"heeeello",
        b"h*llo",
        b"h^",
        b"h]",
        b"hl",
        b"-",
        b"_",
        b"]",
        b"\\",
        b"a",
        b"A",
        b"\x80",
        b"\xff",
        b"bf-error-rate",
    ])
    .into_iter()
    .collect();
    while subjects.len() < 120 {
        subjects.insert(rng.word(GLOB_BYTES, 5));
    }
    for s in &subjects {
        assert_eq!(c.call(&[b"SET", s, b"1"]), R::Simple("OK".into()));
    }
    let mut patterns: Vec<Vec<u8>> = owned(&[
        &b"*"[..],
        b"**",
        b"h?llo",
        b"h*llo",
        b"h[ae]llo",
        b"h[^e]llo",
        b"h[a-b]llo",
        b"h\\*llo",
        b"[a-]",
        b"h[a-]llo",
        b"h[a-]",
        b"[]]",
        b"[]-a]",
        b"[^]",
        b"[",
        b"[^",
        b"[\\]]",
        b"[\\",
        b"\\",
        b"a\\",
        b"[z-a]",
        b"[\x00-\xff]",
        b"[\x80-\xff]",
        b"[a-\xff]",
        b"*a*",
        b"?*",
        b"*?",
    ]);
    while patterns.len() < 1500 {
        let p = rng.word(GLOB_BYTES, 6);
        if !p.is_empty() {
            patterns.push(p);
        }
    }
    for chunk in patterns.chunks(100) {
        for p in chunk {
            c.send(&[b"KEYS", p]);
        }
        for p in chunk {
            let redis = c.read().unwrap().strings();
            let ours: BTreeSet<Vec<u8>> = subjects
                .iter()
                .filter(|s| matches_all(p) || glob_match(p, s, false))
                .cloned()
                .collect();
            assert_eq!(ours, redis, "KEYS {:?}", String::from_utf8_lossy(p));
        }
    }
}

/// Redis matches command names (as CONFIG GET matches config names) with `nocase`.
#[test]
fn nocase_glob_matches_as_redis_command_list_does() {
    let Some(redis) = start("oracle-nocase") else {
        return;
    };
    let mut c = Conn::open(redis.port);
    let names = c.call(&[b"COMMAND", b"LIST"]).strings();
    let mut rng = Lcg(11);
    let mut patterns: Vec<Vec<u8>> = owned(&[
        &b"CONFIG*"[..],
        b"Config|G*",
        b"*[A-C]*",
        b"*[a-c]*",
        b"[^A-Z]*",
        b"?[E-F]*",
        b"x*",
        b"*|*",
        b"[C-c]*",
        b"[a-Z]*",
        b"[\\C]*",
    ]);
    while patterns.len() < 400 {
        let mut p = rng.word(b"aBcEsgT*?[]-^|", 5);
        p.push(b'*');
        patterns.push(p);
    }
    for p in &patterns {
        let redis = c
            .call(&[b"COMMAND", b"LIST", b"FILTERBY", b"PATTERN", p])
            .strings();
        let ours: BTreeSet<Vec<u8>> = names
            .iter()
            .filter(|n| glob_match(p, n, true))
            .cloned()
            .collect();
        assert_eq!(ours, redis, "pattern {:?}", String::from_utf8_lossy(p));
    }
    // CONFIG GET too: every name Redis answers for an upper-case pattern is one our matcher
    // accepts case-insensitively.
    for p in [&b"MAXMEM*"[..], b"*-[A-M]*", b"SAVE"] {
        let R::Array(Some(items)) = c.call(&[b"CONFIG", b"GET", p]) else {
            panic!()
        };
        assert!(!items.is_empty());
        for name in items.iter().step_by(2) {
            let R::Bulk(Some(name)) = name else { panic!() };
            assert!(glob_match(p, name, true), "{name:?}");
        }
    }
}

#[test]
fn inline_splits_as_redis_does() {
    let Some(redis) = start("oracle-inline") else {
        return;
    };
    let mut lines: Vec<Vec<u8>> = owned(&[
        &b"a\x0cb"[..],
        b"\"a\"\x0bb",
        b"a\"b c\"",
        b"\"a\"b",
        b"'a'b",
        b"a'b c'",
        b"\"abc",
        b"'abc",
        b"\"\\x41\\x4g\\n\\q\\\"\"",
        b"'it\\'s' \"\"",
        b"\x0b a \x0c b\x0b c",
        b"a\rb",
        b"\"a\"\x0c",
        b"''",
        b"\"\\\"",
        b"\"\\x\"",
        b"\"\\xZZ\"",
        b"x\"y\"z",
        b"\t\t",
    ]);
    let mut rng = Lcg(3);
    while lines.len() < 400 {
        lines.push(rng.word(b"ab \t\x0b\x0c\r\"'\\x4fnq\xff", 9));
    }
    let mut check = Conn::open(redis.port);
    for line in &lines {
        let mut full = b"RPUSH l ".to_vec();
        full.extend_from_slice(line);
        let mut c = Conn::open(redis.port);
        c.send_raw(&[&full[..], b"\r\n"].concat());
        let reply = c.read();
        // What Redis' processInlineBuffer hands to sdssplitargs: the line without \r\n.
        let ours = split_args(&full);
        let what = format!("inline {:?}", String::from_utf8_lossy(line));
        match ours {
            None => assert_eq!(
                reply,
                Some(R::Error(
                    "ERR Protocol error: unbalanced quotes in request".into()
                )),
                "{what}"
            ),
            Some(words) if words.len() == 2 => assert!(
                matches!(&reply, Some(R::Error(e)) if e.contains("wrong number of arguments")),
                "{what}: {reply:?}"
            ),
            Some(words) => {
                assert_eq!(reply, Some(R::Int(words.len() as i64 - 2)), "{what}");
                let stored = check.call(&[b"LRANGE", b"l", b"0", b"-1"]);
                let want = R::Array(Some(
                    words[2..]
                        .iter()
                        .map(|w| R::Bulk(Some(w.clone())))
                        .collect(),
                ));
                assert_eq!(stored, want, "{what}");
                check.call(&[b"DEL", b"l"]);
            }
        }
    }
}

#[test]
fn acl_answers_as_redis_does() {
    let Some(redis) = start("oracle-acl") else {
        return;
    };
    let mut c = Conn::open(redis.port);
    for line in include_str!("data/acl_cases.txt").lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (command, want) = line.split_once(" => ").expect("command => reply");
        let args = split_args(command.as_bytes()).unwrap();
        let args: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
        assert_eq!(c.call(&args).render(), want, "{command}");
    }
}
