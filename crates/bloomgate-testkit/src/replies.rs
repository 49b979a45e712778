//! The BF.* / CF.* reply conformance suite shared by every host of the dialect: `bloomgate
//! serve` (`crates/bloomgate-server/tests/serve_redis.rs`) and redis-server with
//! bloomgate-module (`crates/bloomgate-module/tests/module_redis.rs`), so both hosts are held to
//! the same replies, word for word. A new dialect command's replies go here.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use redis::Value;

/// A RESP2 connection to 127.0.0.1:`port`.
pub fn connect(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap()
}

/// A command given as space-separated words.
pub fn build(line: &str) -> redis::Cmd {
    let mut words = line.split(' ');
    let mut c = redis::cmd(words.next().unwrap());
    for arg in words {
        c.arg(arg);
    }
    c
}

/// Runs a command given as space-separated words; panics on an error reply.
pub fn cmd(con: &mut redis::Connection, line: &str) -> Value {
    build(line)
        .query::<Value>(con)
        .unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// `conn` as a subscriber to every keyspace and keyevent channel (`__key*__:*`), waiting at
/// most 10 s for a message: the `sub` [`events_of`] reads.
pub fn keyspace_subscriber(conn: &mut redis::Connection) -> redis::PubSub<'_> {
    let mut sub = conn.as_pubsub();
    sub.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    sub.psubscribe("__key*__:*").unwrap();
    sub
}

/// The keyspace events `command` (space-separated words, run with [`cmd`]) published, as
/// `(channel, payload)` pairs read from `sub` (a subscriber to `__key*__:*` on the same
/// server): everything `sub` receives before the marker `marker{n}` published after the
/// command on `__keyevent@0__:marker` (`n` counts the calls). Bounded: at most 16 messages.
pub fn events_of(
    c: &mut redis::Connection,
    sub: &mut redis::PubSub,
    n: &mut u32,
    command: &str,
) -> Vec<(String, String)> {
    cmd(c, command);
    *n += 1;
    let marker = format!("marker{n}");
    cmd(c, &format!("PUBLISH __keyevent@0__:marker {marker}"));
    let mut out = Vec::new();
    for _ in 0..16 {
        let msg = sub
            .get_message()
            .expect("a message before the read timeout");
        let payload: String = msg.get_payload().unwrap();
        if payload == marker {
            return out;
        }
        out.push((msg.get_channel_name().to_string(), payload));
    }
    panic!("no marker after {command}: {out:?}");
}

/// The error line (without `-`) of a command that must fail.
pub fn error_of(con: &mut redis::Connection, line: &str) -> String {
    match build(line).query::<Value>(con) {
        Ok(v) => panic!("{line}: expected an error, got {v:?}"),
        Err(e) => wire_error(&e),
    }
}

/// Rebuilds the wire text of an error reply from the crate's (code, detail) split.
pub fn wire_error(e: &redis::RedisError) -> String {
    match (e.code().unwrap_or(""), e.detail().unwrap_or("")) {
        ("", detail) => detail.to_string(),
        (code, "") => code.to_string(),
        (code, detail) => format!("{code} {detail}"),
    }
}

/// An integer reply.
pub fn int(v: i64) -> Value {
    Value::Int(v)
}

/// Sends `request` as raw bytes to 127.0.0.1:`port` and returns every byte the server sends
/// back until it closes the connection (or 10 s pass without a byte).
pub fn raw_exchange(port: u16, request: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// BF.* replies and errors, as RedisBloom gives them, from the server on 127.0.0.1:`port`.
pub fn bf_replies(port: u16) {
    let mut con = connect(port);
    let c = &mut con;

    // BF.RESERVE argument errors, in RedisBloom's words (some without ERR).
    assert_eq!(error_of(c, "BF.RESERVE k x 100"), "ERR bad error rate");
    assert_eq!(
        error_of(c, "BF.RESERVE k 1 100"),
        "ERR error rate must be in the range (0.000000, 1.000000)"
    );
    assert_eq!(error_of(c, "BF.RESERVE k 0.01 x"), "ERR bad capacity");
    assert_eq!(
        error_of(c, "BF.RESERVE k 0.01 0"),
        "ERR capacity must be in the range [1, 1073741824]"
    );
    assert_eq!(
        error_of(c, "BF.RESERVE k 0.01 100 EXPANSION"),
        "ERR no expansion"
    );
    assert_eq!(
        error_of(c, "BF.RESERVE k 0.01 100 expansion x"),
        "ERR bad expansion"
    );
    assert_eq!(
        error_of(c, "BF.RESERVE k 0.01 100 EXPANSION 40000"),
        "ERR expansion must be in the range [0, 32768]"
    );
    assert_eq!(
        error_of(c, "BF.RESERVE k 0.01 100 NONSCALING EXPANSION 2"),
        "Nonscaling filters cannot expand"
    );
    assert_eq!(
        error_of(c, "BF.RESERVE k 0.01"),
        "ERR wrong number of arguments for 'bf.reserve' command"
    );
    assert_eq!(cmd(c, "BF.RESERVE k 0.01 100 whatever"), Value::Okay);
    assert_eq!(error_of(c, "BF.RESERVE k 0.01 100"), "ERR item exists");
    assert_eq!(cmd(c, "TYPE k"), Value::SimpleString("MBbloom--".into()));

    // BF.INFO: simple-string field names, exact sizes.
    assert_eq!(
        cmd(c, "BF.INFO k"),
        Value::Array(vec![
            Value::SimpleString("Capacity".into()),
            int(100),
            Value::SimpleString("Size".into()),
            int(240),
            Value::SimpleString("Number of filters".into()),
            int(1),
            Value::SimpleString("Number of items inserted".into()),
            int(0),
            Value::SimpleString("Expansion rate".into()),
            int(2),
        ])
    );
    assert_eq!(cmd(c, "BF.INFO k size"), Value::Array(vec![int(240)]));
    assert_eq!(error_of(c, "BF.INFO k bogus"), "Invalid information value");
    assert_eq!(error_of(c, "BF.INFO missing"), "ERR not found");
    cmd(c, "BF.RESERVE k3 0.001 100");
    assert_eq!(cmd(c, "BF.INFO k3 SIZE"), Value::Array(vec![int(296)]));
    cmd(c, "BF.RESERVE ns 0.01 2 NONSCALING");
    assert_eq!(
        cmd(c, "BF.INFO ns EXPANSION"),
        Value::Array(vec![Value::Nil])
    );

    // ADD / MADD / EXISTS / MEXISTS / CARD.
    assert_eq!(cmd(c, "BF.ADD k a"), int(1));
    assert_eq!(cmd(c, "BF.ADD k a"), int(0));
    assert_eq!(
        cmd(c, "BF.MADD k a b c"),
        Value::Array(vec![int(0), int(1), int(1)])
    );
    assert_eq!(cmd(c, "BF.EXISTS k b"), int(1));
    assert_eq!(cmd(c, "BF.EXISTS k zz"), int(0));
    assert_eq!(cmd(c, "BF.EXISTS nokey a"), int(0));
    assert_eq!(
        cmd(c, "BF.MEXISTS k a zz"),
        Value::Array(vec![int(1), int(0)])
    );
    assert_eq!(cmd(c, "BF.CARD k"), int(3));
    assert_eq!(cmd(c, "BF.CARD nokey"), int(0));
    assert_eq!(cmd(c, "BF.ADD auto x"), int(1));
    assert_eq!(
        cmd(c, "BF.INFO auto CAPACITY"),
        Value::Array(vec![int(100)])
    );

    // A full non-scaling filter: the error is the last element of the MADD array, which stops
    // there. Raw bytes, so the exact shape is checked (and INFO's simple-string labels).
    let out = raw_exchange(
        port,
        b"BF.MADD ns n1 n2 n3 n4\r\nBF.INFO ns ITEMS\r\nQUIT\r\n",
    );
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.starts_with("*3\r\n:1\r\n:1\r\n-ERR non scaling filter is full\r\n*1\r\n:2\r\n"),
        "{text}"
    );
    let out = raw_exchange(port, b"BF.INFO k3\r\nQUIT\r\n");
    assert!(out.starts_with(b"*10\r\n+Capacity\r\n:100\r\n+Size\r\n:296\r\n+Number of filters\r\n"));
    assert_eq!(
        error_of(c, "BF.ADD ns n9"),
        "ERR non scaling filter is full"
    );

    // BF.INSERT option quirks (options recognised by their first letters).
    assert_eq!(
        error_of(c, "BF.INSERT i1 CAPACITY x ITEMS a"),
        "Bad capacity"
    );
    assert_eq!(
        error_of(c, "BF.INSERT i1 ERROR 2 ITEMS a"),
        "Bad error rate"
    );
    assert_eq!(
        error_of(c, "BF.INSERT i1 EXPANSION x ITEMS a"),
        "Bad expansion"
    );
    assert_eq!(
        error_of(c, "BF.INSERT i1 FOO ITEMS a"),
        "Unknown argument received"
    );
    assert_eq!(
        error_of(c, "BF.INSERT i1 NOCREATE ITEMS a"),
        "ERR not found"
    );
    assert_eq!(
        error_of(c, "BF.INSERT i1 ITEMS"),
        "ERR wrong number of arguments for 'bf.insert' command"
    );
    assert_eq!(
        cmd(c, "BF.INSERT i1 cap 50 err 0.001 exp 4 ITEMS a b"),
        Value::Array(vec![int(1), int(1)])
    );
    assert_eq!(cmd(c, "BF.INFO i1 CAPACITY"), Value::Array(vec![int(50)]));
    assert_eq!(cmd(c, "BF.INFO i1 EXPANSION"), Value::Array(vec![int(4)]));
    assert_eq!(
        cmd(c, "BF.INSERT i2 NONSCALING ITEMS a"),
        Value::Array(vec![int(1)])
    );
    assert_eq!(
        cmd(c, "BF.INFO i2 EXPANSION"),
        Value::Array(vec![Value::Nil])
    );

    // Scaling chain and BF.DEBUG lines (the reference's example).
    cmd(c, "BF.RESERVE chain 0.01 10");
    for i in 0..100 {
        cmd(c, &format!("BF.ADD chain item{i}"));
    }
    let lines: Vec<String> = redis::cmd("BF.DEBUG").arg("chain").query(c).unwrap();
    assert!(
        lines[1].starts_with("bytes:16 bits:128 hashes:8 hashwidth:64 capacity:10 "),
        "{lines:?}"
    );
    assert!(lines[2].starts_with("bytes:32 bits:256 hashes:9 hashwidth:64 capacity:20 "));
    assert!(lines[3].starts_with("bytes:72 bits:576 hashes:10 hashwidth:64 capacity:40 "));
    assert!(lines[4].starts_with("bytes:160 bits:1280 hashes:11 hashwidth:64 capacity:80 "));
    assert!(lines[4].ends_with("ratio:0.000625"));
    assert_eq!(error_of(c, "BF.DEBUG missing"), "ERR not found");

    // SCANDUMP → LOADCHUNK into a new key reproduces the same filter.
    assert_eq!(
        error_of(c, "BF.SCANDUMP chain x"),
        "Second argument must be numeric"
    );
    let mut chunks = Vec::new();
    let mut iter = 0i64;
    loop {
        let (next, data): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP")
            .arg("chain")
            .arg(iter)
            .query(c)
            .unwrap();
        if next == 0 {
            assert!(data.is_empty());
            break;
        }
        chunks.push((next, data));
        iter = next;
    }
    assert_eq!(chunks.len(), 5, "header + 4 links");
    for (it, data) in &chunks {
        let reply: Value = redis::cmd("BF.LOADCHUNK")
            .arg("copy")
            .arg(*it)
            .arg(data.as_slice())
            .query(c)
            .unwrap();
        assert_eq!(reply, Value::Okay);
    }
    for i in 0..100 {
        assert_eq!(cmd(c, &format!("BF.EXISTS copy item{i}")), int(1));
    }
    assert_eq!(cmd(c, "BF.DEBUG copy"), cmd(c, "BF.DEBUG chain"));
    assert_eq!(
        error_of(c, "BF.LOADCHUNK copy2 x y"),
        "ERR Second argument must be numeric"
    );
    assert_eq!(
        error_of(c, "BF.LOADCHUNK copy2 1 garbage"),
        "ERR received bad data"
    );
    assert_eq!(error_of(c, "BF.LOADCHUNK copy2 5 abc"), "ERR not found");
    assert_eq!(
        error_of(c, "BF.LOADCHUNK copy 99999 abc"),
        "ERR invalid offset - no link found"
    );
    let e = redis::cmd("BF.LOADCHUNK")
        .arg("copy")
        .arg(57)
        .arg(vec![0u8; 40])
        .query::<Value>(c)
        .unwrap_err();
    assert_eq!(
        wire_error(&e),
        "ERR invalid chunk - Too big for current filter"
    );

    // Arity errors use the lower-case name; unknown commands use Redis' wording.
    assert_eq!(
        error_of(c, "BF.ADD k"),
        "ERR wrong number of arguments for 'bf.add' command"
    );
    assert_eq!(
        error_of(c, "BF.EXISTS k"),
        "ERR wrong number of arguments for 'bf.exists' command"
    );
    assert_eq!(
        error_of(c, "BF.NOPE a b"),
        "ERR unknown command 'BF.NOPE', with args beginning with: 'a' 'b' "
    );
}

/// BF.* over the blocked layout (`LAYOUT blocked`, our extension: type `BGbloomBK`), from the
/// server on 127.0.0.1:`port`: its own type, every BF.* command, BF.INFO's `Layout` appended
/// last, SCANDUMP/LOADCHUNK and DUMP/RESTORE round trips, and the classic type unchanged.
pub fn bf_layout_replies(port: u16) {
    let c = &mut connect(port);
    assert_eq!(cmd(c, "BF.RESERVE b 0.01 100 LAYOUT blocked"), Value::Okay);
    assert_eq!(cmd(c, "BF.RESERVE k 0.01 100 LAYOUT classic"), Value::Okay);
    assert_eq!(cmd(c, "TYPE b"), Value::SimpleString("BGbloomBK".into()));
    assert_eq!(cmd(c, "TYPE k"), Value::SimpleString("MBbloom--".into()));
    assert_eq!(
        error_of(c, "BF.RESERVE x 0.01 100 LAYOUT square"),
        "ERR bad layout"
    );
    assert_eq!(
        error_of(c, "BF.INSERT x LAYOUT square ITEMS a"),
        "Bad layout"
    );
    assert_eq!(
        cmd(c, "BF.MADD b a b a"),
        Value::Array(vec![int(1), int(1), int(0)])
    );
    assert_eq!(cmd(c, "BF.ADD b c"), int(1));
    assert_eq!(
        cmd(c, "BF.MEXISTS b a b c d"),
        Value::Array(vec![int(1), int(1), int(1), int(0)])
    );
    assert_eq!(cmd(c, "BF.EXISTS b d"), int(0));
    assert_eq!(cmd(c, "BF.CARD b"), int(3));
    let Value::Array(info) = cmd(c, "BF.INFO b") else {
        panic!()
    };
    assert_eq!(
        info.len(),
        12,
        "RedisBloom's five pairs, then Layout: {info:?}"
    );
    assert_eq!(info[10], Value::SimpleString("Layout".into()));
    assert_eq!(info[11], Value::BulkString(b"blocked".to_vec()));
    assert_eq!(
        info[6],
        Value::SimpleString("Number of items inserted".into())
    );
    assert_eq!(info[7], int(3));
    let Value::Array(classic) = cmd(c, "BF.INFO k") else {
        panic!()
    };
    assert_eq!(classic.len(), 10);
    // Grows like a classic chain: a second link of 200 items.
    for i in 0..150 {
        cmd(c, &format!("BF.ADD b i{i}"));
    }
    assert_eq!(cmd(c, "BF.INFO b FILTERS"), Value::Array(vec![int(2)]));
    assert_eq!(cmd(c, "BF.INFO b CAPACITY"), Value::Array(vec![int(300)]));
    // Auto-created by INSERT with its options, non-scaling: full is refused.
    assert_eq!(
        cmd(
            c,
            "BF.INSERT n CAPACITY 2 NONSCALING LAYOUT blocked ITEMS a b"
        ),
        Value::Array(vec![int(1), int(1)])
    );
    assert_eq!(error_of(c, "BF.ADD n c"), "ERR non scaling filter is full");
    // SCANDUMP → LOADCHUNK into a new key, and DUMP → RESTORE: the same filter.
    let mut iter = 0i64;
    loop {
        let (next, data): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP")
            .arg("b")
            .arg(iter)
            .query(c)
            .unwrap();
        if next == 0 {
            break;
        }
        let reply: Value = redis::cmd("BF.LOADCHUNK")
            .arg("copy")
            .arg(next)
            .arg(data.as_slice())
            .query(c)
            .unwrap();
        assert_eq!(reply, Value::Okay);
        iter = next;
    }
    let payload: Vec<u8> = redis::cmd("DUMP").arg("b").query(c).unwrap();
    let restored: Value = redis::cmd("RESTORE")
        .arg("restored")
        .arg(0)
        .arg(payload.as_slice())
        .query(c)
        .unwrap();
    assert_eq!(restored, Value::Okay);
    for key in ["copy", "restored"] {
        assert_eq!(cmd(c, &format!("TYPE {key}")), cmd(c, "TYPE b"));
        assert_eq!(cmd(c, &format!("BF.INFO {key}")), cmd(c, "BF.INFO b"));
        assert_eq!(cmd(c, &format!("BF.DEBUG {key}")), cmd(c, "BF.DEBUG b"));
        assert_eq!(
            cmd(c, &format!("BF.MEXISTS {key} a i149 d")),
            cmd(c, "BF.MEXISTS b a i149 d")
        );
    }
}

/// CF.* replies and errors (RESP2 and RESP3), as RedisBloom gives them, from the server on
/// 127.0.0.1:`port`.
pub fn cf_replies(port: u16) {
    let mut con = connect(port);
    let c = &mut con;

    assert_eq!(cmd(c, "CF.RESERVE cf 1000"), Value::Okay);
    assert_eq!(error_of(c, "CF.RESERVE cf 1000"), "ERR item exists");
    assert_eq!(
        error_of(c, "CF.RESERVE x 1"),
        "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]"
    );
    assert_eq!(
        error_of(c, "CF.RESERVE x 100 BUCKETSIZE 300"),
        "BUCKETSIZE: value must be in the range [1, 255]"
    );
    assert_eq!(cmd(c, "TYPE cf"), Value::SimpleString("MBbloomCF".into()));
    assert_eq!(cmd(c, "CF.ADD cf a"), int(1));
    assert_eq!(cmd(c, "CF.ADDNX cf a"), int(0));
    assert_eq!(
        cmd(c, "CF.INSERT cf ITEMS a b"),
        Value::Array(vec![int(1), int(1)])
    );
    assert_eq!(
        cmd(c, "CF.INSERTNX cf ITEMS b c"),
        Value::Array(vec![int(0), int(1)])
    );
    assert_eq!(cmd(c, "CF.COUNT cf a"), int(2));
    assert_eq!(
        cmd(c, "CF.MEXISTS cf a c nope"),
        Value::Array(vec![int(1), int(1), int(0)])
    );
    assert_eq!(cmd(c, "CF.DEL cf a"), int(1));
    assert_eq!(cmd(c, "CF.EXISTS missing a"), int(0));
    assert_eq!(error_of(c, "CF.DEL missing a"), "Not found");
    assert_eq!(
        error_of(c, "CF.COMPACT missing"),
        "Cuckoo filter was not found"
    );
    assert_eq!(cmd(c, "CF.COMPACT cf"), Value::Okay);
    assert_eq!(
        error_of(c, "CF.INSERT cf NOCREATE ITEMS"),
        "ERR wrong number of arguments for 'cf.insert' command"
    );
    assert_eq!(
        error_of(c, "CF.INSERT cf BOGUS 1 ITEMS a"),
        "Unknown argument received"
    );
    let info = |pairs: &[(&str, i64)]| {
        Value::Array(
            pairs
                .iter()
                .flat_map(|&(k, v)| [Value::SimpleString(k.into()), int(v)])
                .collect(),
        )
    };
    assert_eq!(
        cmd(c, "CF.INFO cf"),
        info(&[
            ("Size", 1080),
            ("Number of buckets", 512),
            ("Number of filters", 1),
            ("Number of items inserted", 3),
            ("Number of items deleted", 0),
            ("Bucket size", 2),
            ("Expansion rate", 1),
            ("Max iterations", 20),
        ])
    );
    assert_eq!(
        cmd(c, "CF.DEBUG cf"),
        Value::BulkString(
            b"bktsize:2 buckets:512 items:3 deletes:0 filters:1 max_iterations:20 expansion:1"
                .to_vec()
        )
    );

    // A growing filter dumped and loaded into a new key over the wire.
    cmd(c, "CF.RESERVE grow 64 EXPANSION 2");
    let mut add = redis::pipe();
    for i in 0..2_000 {
        add.cmd("CF.ADD").arg("grow").arg(format!("g{i}"));
    }
    let _: Vec<i64> = add.query(c).unwrap();
    let mut iter = 0i64;
    let mut chunks = 0;
    loop {
        let (next, data): (i64, Option<Vec<u8>>) = redis::cmd("CF.SCANDUMP")
            .arg("grow")
            .arg(iter)
            .query(c)
            .unwrap();
        let Some(data) = data else {
            assert_eq!(next, 0);
            break;
        };
        let reply: Value = redis::cmd("CF.LOADCHUNK")
            .arg("copy")
            .arg(next)
            .arg(data)
            .query(c)
            .unwrap();
        assert_eq!(reply, Value::Okay);
        iter = next;
        chunks += 1;
    }
    assert!(chunks > 3, "header + one chunk per sub-filter");
    assert_eq!(cmd(c, "CF.DEBUG copy"), cmd(c, "CF.DEBUG grow"));
    let mut check = redis::cmd("CF.MEXISTS");
    check.arg("copy");
    for i in 0..2_000 {
        check.arg(format!("g{i}"));
    }
    let found: Vec<i64> = check.query(c).unwrap();
    assert!(found.iter().all(|&f| f == 1));
    assert_eq!(error_of(c, "CF.LOADCHUNK other 1 short"), "Invalid header");
    assert_eq!(
        error_of(c, "CF.LOADCHUNK other 0 short"),
        "Invalid position"
    );
    assert_eq!(error_of(c, "CF.SCANDUMP grow -5"), "Invalid position");

    // RESP3: booleans except COUNT and INSERTNX; INFO is a map.
    let mut con3 = redis::Client::open(format!("redis://127.0.0.1:{port}/?protocol=resp3"))
        .unwrap()
        .get_connection()
        .unwrap();
    assert_eq!(cmd(&mut con3, "CF.EXISTS cf b"), Value::Boolean(true));
    assert_eq!(cmd(&mut con3, "CF.ADD cf z"), Value::Boolean(true));
    assert_eq!(cmd(&mut con3, "CF.COUNT cf z"), int(1));
    assert_eq!(
        cmd(&mut con3, "CF.INSERTNX cf ITEMS z"),
        Value::Array(vec![int(0)])
    );
    assert!(matches!(cmd(&mut con3, "CF.INFO cf"), Value::Map(m) if m.len() == 8));
}

fn ints(values: &[i64]) -> Value {
    Value::Array(values.iter().map(|&v| Value::Int(v)).collect())
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn status(s: &str) -> Value {
    Value::SimpleString(s.into())
}

/// The raw RESP2 reply of one command `line` (its words split at spaces).
fn resp2(port: u16, line: &str) -> Vec<u8> {
    let words: Vec<&str> = line.split(' ').collect();
    let mut request = format!("*{}\r\n", words.len()).into_bytes();
    for w in words {
        request.extend_from_slice(format!("${}\r\n{w}\r\n", w.len()).as_bytes());
    }
    request.extend_from_slice(b"*1\r\n$4\r\nQUIT\r\n");
    let mut out = raw_exchange(port, &request);
    assert!(
        out.ends_with(b"+OK\r\n"),
        "{}",
        String::from_utf8_lossy(&out)
    );
    out.truncate(out.len() - 5);
    out
}

/// The RESP3 replies of `lines` (HELLO 3 first, QUIT last), as raw bytes after HELLO's.
fn resp3(port: u16, lines: &[&str]) -> Vec<u8> {
    let mut request = Vec::new();
    for line in std::iter::once("HELLO 3")
        .chain(lines.iter().copied())
        .chain(["QUIT"])
    {
        let words: Vec<&str> = line.split(' ').collect();
        request.extend_from_slice(format!("*{}\r\n", words.len()).as_bytes());
        for w in words {
            request.extend_from_slice(format!("${}\r\n{w}\r\n", w.len()).as_bytes());
        }
    }
    let out = raw_exchange(port, &request);
    // Skip HELLO's map: everything up to the first reply that follows it is server-specific.
    let text = String::from_utf8_lossy(&out).into_owned();
    let marker = "\r\n+OK\r\n";
    let end = text.rfind(marker).map_or(text.len(), |at| at + 2);
    let start = text
        .find("\r\n%3\r\n+width")
        .or_else(|| text.find("\r\n%4\r\n+k"))
        .map_or(0, |at| at + 2);
    text.as_bytes()[start..end].to_vec()
}

/// CMS.* replies and errors, as RedisBloom 8 gives them (checked against a live one), from the
/// server on 127.0.0.1:`port`: creation checks and their order, INCRBY's validation and
/// saturation, QUERY, MERGE's checks and weighted sums, INFO, TYPE and the RESP3 map.
pub fn cms_replies(port: u16) {
    let mut con = connect(port);
    let c = &mut con;
    let _: () = redis::cmd("FLUSHALL").query(c).unwrap();

    assert_eq!(cmd(c, "CMS.INITBYDIM c 10 2"), Value::Okay);
    assert_eq!(
        error_of(c, "CMS.INITBYDIM c 10 2"),
        "CMS: key already exists"
    );
    assert_eq!(error_of(c, "CMS.INITBYDIM x 0 2"), "CMS: invalid width");
    assert_eq!(error_of(c, "CMS.INITBYDIM x 1 y"), "CMS: invalid depth");
    assert_eq!(
        error_of(c, "CMS.INITBYDIM x 9223372036854775807 2"),
        "CMS: invalid init arguments"
    );
    assert_eq!(
        error_of(c, "CMS.INITBYDIM x 2294967296 2294967296"),
        "CMS: Insufficient memory to create the key"
    );
    assert_eq!(
        error_of(c, "CMS.INITBYPROB x 1 0.5"),
        "CMS: invalid overestimation value"
    );
    assert_eq!(
        error_of(c, "CMS.INITBYPROB x 0.5 1"),
        "CMS: invalid prob value"
    );
    assert_eq!(
        error_of(c, "CMS.INITBYPROB x 1e-300 0.5"),
        "CMS: invalid init arguments"
    );
    assert_eq!(
        error_of(c, "CMS.INITBYDIM x"),
        "ERR wrong number of arguments for 'cms.initbydim' command"
    );
    assert_eq!(cmd(c, "CMS.INITBYPROB p 0.001 0.01"), Value::Okay);
    assert_eq!(
        cmd(c, "CMS.INFO p"),
        Value::Array(vec![
            status("width"),
            Value::Int(2000),
            status("depth"),
            Value::Int(7),
            status("count"),
            Value::Int(0),
        ])
    );
    assert_eq!(cmd(c, "TYPE p"), status("CMSk-TYPE"));

    assert_eq!(
        error_of(c, "CMS.INCRBY nosuch a 1"),
        "CMS: key does not exist"
    );
    assert_eq!(
        error_of(c, "CMS.INCRBY c a 1 b"),
        "ERR wrong number of arguments for 'cms.incrby' command"
    );
    assert_eq!(
        error_of(c, "CMS.INCRBY c a 1 b x"),
        "CMS: Cannot parse number"
    );
    assert_eq!(
        error_of(c, "CMS.INCRBY c a 1 b -2"),
        "CMS: Number cannot be negative"
    );
    assert_eq!(cmd(c, "CMS.INCRBY c a 1 b 2"), ints(&[1, 2]));
    // A saturated counter answers an overflow error in its place; the total keeps counting.
    assert_eq!(
        resp2(port, "CMS.INCRBY c a 4294967295 b 3"),
        b"*2\r\n-CMS: INCRBY overflow\r\n:5\r\n"
    );
    assert_eq!(cmd(c, "CMS.QUERY c a b foo"), ints(&[4294967295, 5, 0]));
    assert_eq!(error_of(c, "CMS.QUERY nosuch a"), "CMS: key does not exist");
    assert_eq!(
        cmd(c, "CMS.INFO c"),
        Value::Array(vec![
            status("width"),
            Value::Int(10),
            status("depth"),
            Value::Int(2),
            status("count"),
            Value::Int(4294967301),
        ])
    );

    for line in [
        "CMS.INITBYDIM m1 10 2",
        "CMS.INITBYDIM m2 10 2",
        "CMS.INITBYDIM m3 11 2",
    ] {
        assert_eq!(cmd(c, line), Value::Okay);
    }
    assert_eq!(cmd(c, "CMS.INCRBY m1 x 5 y 7 z 9"), ints(&[5, 7, 9]));
    assert_eq!(cmd(c, "CMS.INCRBY m2 x 1 q 4"), ints(&[1, 4]));
    assert_eq!(
        error_of(c, "CMS.MERGE nosuch 1 m1"),
        "CMS: key does not exist"
    );
    assert_eq!(error_of(c, "CMS.MERGE m1 x m2"), "CMS: invalid numkeys");
    assert_eq!(
        error_of(c, "CMS.MERGE m1 0 m2"),
        "CMS: Number of keys must be positive"
    );
    assert_eq!(
        error_of(c, "CMS.MERGE m1 2 m2"),
        "CMS: wrong number of keys"
    );
    assert_eq!(
        error_of(c, "CMS.MERGE m1 2 m2 c WEIGHTS 1"),
        "CMS: wrong number of keys/weights"
    );
    assert_eq!(
        error_of(c, "CMS.MERGE m1 2 m2 m1 WEIGHTS 1 x"),
        "CMS: invalid weight value"
    );
    assert_eq!(
        error_of(c, "CMS.MERGE m1 2 m2 nosuch"),
        "CMS: key does not exist"
    );
    assert_eq!(
        error_of(c, "CMS.MERGE m1 1 m3"),
        "CMS: width/depth is not equal"
    );
    assert_eq!(
        error_of(c, "CMS.MERGE c 2 m1 m2 WEIGHTS 1 -100"),
        "CMS: MERGE overflow"
    );
    assert_eq!(cmd(c, "CMS.MERGE c 2 m1 m2 WEIGHTS 3 2"), Value::Okay);
    assert_eq!(cmd(c, "CMS.QUERY c x y z q a"), ints(&[17, 21, 35, 35, 0]));
    // The destination among the sources.
    assert_eq!(cmd(c, "CMS.MERGE c 2 c m2 weights 2 1"), Value::Okay);
    assert_eq!(cmd(c, "CMS.QUERY c x y z q"), ints(&[35, 42, 74, 74]));
    assert_eq!(
        resp3(port, &["CMS.INFO m2"]),
        b"%3\r\n+width\r\n:10\r\n+depth\r\n:2\r\n+count\r\n:5\r\n"
    );
}

/// TOPK.* replies and errors, as RedisBloom 8 gives them (checked against a live one), from
/// the server on 127.0.0.1:`port`: RESERVE's checks, ADD/INCRBY evictions and INCRBY's range
/// error, LIST (with the WITHCOUNT prefix quirk and RedisBloom's order among equal counts),
/// QUERY, COUNT, INFO with its double, and RESP3.
pub fn topk_replies(port: u16) {
    let mut con = connect(port);
    let c = &mut con;
    let _: () = redis::cmd("FLUSHALL").query(c).unwrap();

    // Wide enough that these items never share a bucket in every row: no decay draw decides
    // an answer below.
    assert_eq!(cmd(c, "TOPK.RESERVE t 3 1000 5 0.9"), Value::Okay);
    assert_eq!(cmd(c, "TOPK.RESERVE d 3"), Value::Okay);
    assert_eq!(error_of(c, "TOPK.RESERVE t 3"), "TopK: key already exists");
    assert_eq!(
        error_of(c, "TOPK.RESERVE x 1 2"),
        "ERR wrong number of arguments for 'topk.reserve' command"
    );
    assert_eq!(error_of(c, "TOPK.RESERVE x 0"), "TopK: invalid k");
    assert_eq!(error_of(c, "TOPK.RESERVE x 4294967296"), "TopK: invalid k");
    assert_eq!(error_of(c, "TOPK.RESERVE x 1 0 1 1"), "TopK: invalid width");
    assert_eq!(error_of(c, "TOPK.RESERVE x 1 1 0 1"), "TopK: invalid depth");
    assert_eq!(
        error_of(c, "TOPK.RESERVE x 1 1 1 1.0000001"),
        "TopK: invalid decay value. must be '<= 1' & '> 0'"
    );
    assert_eq!(cmd(c, "TYPE t"), status("TopK-TYPE"));
    assert_eq!(
        cmd(c, "TOPK.INFO d"),
        Value::Array(vec![
            status("k"),
            Value::Int(3),
            status("width"),
            Value::Int(8),
            status("depth"),
            Value::Int(7),
            status("decay"),
            // Redis 7.0 writes "0.90000000000000002", later ones "0.9".
            match cmd(c, "TOPK.INFO d") {
                Value::Array(v) if matches!(&v[7], Value::BulkString(b) if b.starts_with(b"0.9")) =>
                {
                    v[7].clone()
                }
                other => panic!("{other:?}"),
            },
        ])
    );

    let nil = Value::Nil;
    assert_eq!(
        cmd(c, "TOPK.ADD t a b c d e a a b"),
        Value::Array(vec![
            nil.clone(),
            nil.clone(),
            nil.clone(),
            bulk("a"),
            bulk("c"),
            bulk("d"),
            nil.clone(),
            nil.clone(),
        ])
    );
    assert_eq!(
        cmd(c, "TOPK.LIST t WITHCOUNT"),
        Value::Array(vec![
            bulk("a"),
            Value::Int(3),
            bulk("b"),
            Value::Int(2),
            bulk("e"),
            Value::Int(1)
        ])
    );
    assert_eq!(
        cmd(c, "TOPK.LIST t"),
        Value::Array(vec![bulk("a"), bulk("b"), bulk("e")])
    );
    // Any case-insensitive prefix of WITHCOUNT is WITHCOUNT; the option is checked first.
    assert_eq!(cmd(c, "TOPK.LIST t with"), cmd(c, "TOPK.LIST t WITHCOUNT"));
    assert_eq!(
        error_of(c, "TOPK.LIST t WITHCOUNTS"),
        "WITHCOUNT keyword expected"
    );
    assert_eq!(
        error_of(c, "TOPK.LIST nosuch foo"),
        "WITHCOUNT keyword expected"
    );
    assert_eq!(error_of(c, "TOPK.LIST nosuch"), "TopK: key does not exist");
    assert_eq!(
        cmd(c, "TOPK.QUERY t a b c d e f"),
        ints(&[1, 1, 0, 0, 1, 0])
    );
    assert_eq!(
        cmd(c, "TOPK.COUNT t a b c d e f"),
        ints(&[3, 2, 1, 1, 1, 0])
    );
    assert_eq!(
        cmd(c, "TOPK.INCRBY t f 10 g 0 a 2"),
        Value::Array(vec![bulk("e"), nil.clone(), nil.clone()])
    );
    assert_eq!(
        resp2(port, "TOPK.INCRBY t f -1"),
        b"*1\r\n-TopK: increment must be an integer greater or equal to 0                            and smaller or equal to 100,000\r\n"
    );
    assert_eq!(error_of(c, "TOPK.ADD nosuch a"), "TopK: key does not exist");

    // Equal counts list in RedisBloom's order.
    assert_eq!(cmd(c, "TOPK.RESERVE ties 5 1000 5 0.5"), Value::Okay);
    assert_eq!(
        cmd(c, "TOPK.ADD ties z y x w v u t s r q p o"),
        Value::Array(
            ["", "", "", "", "", "x", "v", "u", "t", "s", "r", "q"]
                .iter()
                .map(|s| if s.is_empty() { Value::Nil } else { bulk(s) })
                .collect()
        )
    );
    let _ = cmd(c, "TOPK.ADD ties p p o o z");
    assert_eq!(
        cmd(c, "TOPK.INCRBY ties aa 3 bb 3 cc 3 dd 3"),
        Value::Array(vec![bulk("y"), bulk("w"), bulk("z"), bulk("bb")])
    );
    assert_eq!(
        cmd(c, "TOPK.LIST ties WITHCOUNT"),
        Value::Array(vec![
            bulk("cc"),
            Value::Int(3),
            bulk("dd"),
            Value::Int(3),
            bulk("aa"),
            Value::Int(3),
            bulk("p"),
            Value::Int(3),
            bulk("o"),
            Value::Int(3),
        ])
    );
    assert_eq!(
        resp3(port, &["TOPK.INFO ties", "TOPK.QUERY ties p zz"]),
        b"%4\r\n+k\r\n:5\r\n+width\r\n:1000\r\n+depth\r\n:5\r\n+decay\r\n,0.5\r\n*2\r\n#t\r\n#f\r\n"
    );
}

/// A reply's doubles as text: RESP2 sends each as a bulk string.
fn texts(v: Value) -> Vec<String> {
    let one = |v: Value| match v {
        Value::BulkString(b) => String::from_utf8(b).unwrap(),
        other => panic!("expected a double, got {other:?}"),
    };
    match v {
        Value::Array(items) => items.into_iter().map(one).collect(),
        other => vec![one(other)],
    }
}

/// TDIGEST.INFO as (field, value) pairs.
fn tdigest_info(c: &mut redis::Connection, key: &str) -> Vec<(String, i64)> {
    let Value::Array(items) = cmd(c, &format!("TDIGEST.INFO {key}")) else {
        panic!("TDIGEST.INFO {key} is not an array");
    };
    items
        .chunks(2)
        .map(|kv| match (&kv[0], &kv[1]) {
            (Value::SimpleString(k), Value::Int(v)) => (k.clone(), *v),
            other => panic!("INFO field {other:?}"),
        })
        .collect()
}

/// TDIGEST.* replies and errors (RESP2 and RESP3), as RedisBloom 8 gives them, from the server
/// on 127.0.0.1:`port`. The values are chosen so every double is written the same by Redis 7's
/// `%.17g` and Redis 8's Grisu2 form.
pub fn tdigest_replies(port: u16) {
    let mut con = connect(port);
    let c = &mut con;
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();

    assert_eq!(cmd(c, "TDIGEST.CREATE t"), Value::Okay);
    assert_eq!(cmd(c, "TYPE t"), Value::SimpleString("TDIS-TYPE".into()));
    assert_eq!(
        error_of(c, "TDIGEST.CREATE t"),
        "ERR T-Digest: key already exists"
    );
    assert_eq!(cmd(c, "TDIGEST.ADD t 1 2 3 4 5 6 7 8"), Value::Okay);
    assert_eq!(texts(cmd(c, "TDIGEST.MIN t")), s(&["1"]));
    assert_eq!(texts(cmd(c, "TDIGEST.MAX t")), s(&["8"]));
    assert_eq!(
        texts(cmd(c, "TDIGEST.QUANTILE t 0 0.25 0.5 0.75 1")),
        s(&["1", "3", "5", "7", "8"])
    );
    assert_eq!(texts(cmd(c, "TDIGEST.QUANTILE t 0.5 0.25")), s(&["5", "3"]));
    assert_eq!(
        texts(cmd(c, "TDIGEST.CDF t 0 1 4.5 8 9")),
        s(&["0", "0.0625", "0.5", "0.9375", "1"])
    );
    let ints = |v: &[i64]| Value::Array(v.iter().map(|&n| int(n)).collect());
    assert_eq!(
        cmd(c, "TDIGEST.RANK t 0 1 4.5 8 9"),
        ints(&[-1, 0, 4, 7, 8])
    );
    assert_eq!(
        cmd(c, "TDIGEST.REVRANK t 0 1 4.5 8 9"),
        ints(&[8, 7, 4, 0, -1])
    );
    assert_eq!(
        texts(cmd(c, "TDIGEST.BYRANK t 0 1 4 7 8 100")),
        s(&["1", "2", "5", "8", "inf", "inf"])
    );
    assert_eq!(
        texts(cmd(c, "TDIGEST.BYREVRANK t 0 1 4 7 8 100")),
        s(&["8", "7", "4", "1", "-inf", "-inf"])
    );
    assert_eq!(
        texts(cmd(c, "TDIGEST.TRIMMED_MEAN t 0.25 0.75")),
        s(&["4.5"])
    );
    assert_eq!(texts(cmd(c, "TDIGEST.TRIMMED_MEAN t 0 1")), s(&["4.5"]));
    let info = |pairs: &[(&str, i64)]| -> Vec<(String, i64)> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    };
    let full = |compression, cap, merged, unmerged, mw, uw, compressions, memory| {
        info(&[
            ("Compression", compression),
            ("Capacity", cap),
            ("Merged nodes", merged),
            ("Unmerged nodes", unmerged),
            ("Merged weight", mw),
            ("Unmerged weight", uw),
            ("Observations", mw + uw),
            ("Total compressions", compressions),
            ("Memory usage", memory),
        ])
    };
    assert_eq!(tdigest_info(c, "t"), full(100, 610, 8, 0, 8, 0, 1, 9840));

    // MERGE: into a new key (the largest compression), then OVERRIDE with a compression, then
    // into an existing key (its own compression); sources are compressed in place first.
    assert_eq!(cmd(c, "TDIGEST.CREATE u COMPRESSION 50"), Value::Okay);
    assert_eq!(cmd(c, "TDIGEST.ADD u 10 20"), Value::Okay);
    assert_eq!(cmd(c, "TDIGEST.MERGE m 2 t u"), Value::Okay);
    assert_eq!(tdigest_info(c, "m"), full(100, 610, 8, 2, 8, 2, 1, 9840));
    assert_eq!(texts(cmd(c, "TDIGEST.QUANTILE m 0.5")), s(&["6"]));
    assert_eq!(
        cmd(c, "TDIGEST.MERGE m 1 u COMPRESSION 200 OVERRIDE"),
        Value::Okay
    );
    assert_eq!(tdigest_info(c, "m"), full(200, 1210, 0, 2, 0, 2, 0, 19440));
    assert_eq!(cmd(c, "TDIGEST.MERGE m 1 t"), Value::Okay);
    assert_eq!(tdigest_info(c, "m"), full(200, 1210, 2, 8, 2, 8, 1, 19440));
    assert_eq!(cmd(c, "TDIGEST.RESET m"), Value::Okay);
    assert_eq!(tdigest_info(c, "m"), full(200, 1210, 0, 0, 0, 0, 0, 19440));
    assert_eq!(texts(cmd(c, "TDIGEST.MIN m")), s(&["nan"]));
    assert_eq!(texts(cmd(c, "TDIGEST.BYRANK m 0")), s(&["nan"]));
    assert_eq!(cmd(c, "TDIGEST.RANK m 1"), ints(&[-2]));

    // One observation stays in the buffer: RedisBloom answers nan (and C's (long long)nan).
    assert_eq!(cmd(c, "TDIGEST.CREATE one"), Value::Okay);
    assert_eq!(cmd(c, "TDIGEST.ADD one 5"), Value::Okay);
    assert_eq!(texts(cmd(c, "TDIGEST.QUANTILE one 0.5")), s(&["nan"]));
    assert_eq!(cmd(c, "TDIGEST.RANK one 5"), ints(&[i64::MIN]));
    assert_eq!(texts(cmd(c, "TDIGEST.MIN one")), s(&["5"]));

    // Errors, word for word, in RedisBloom's order.
    for (line, want) in [
        ("TDIGEST.MIN nokey", "ERR T-Digest: key does not exist"),
        ("TDIGEST.ADD nokey 1", "ERR T-Digest: key does not exist"),
        (
            "TDIGEST.CREATE x COMPRESSION 0",
            "ERR T-Digest: compression parameter needs to be a positive integer",
        ),
        (
            "TDIGEST.CREATE x COMPRESSION abc",
            "ERR T-Digest: error parsing compression parameter",
        ),
        (
            "TDIGEST.CREATE x 100 COMPRESSION",
            "ERR T-Digest: error parsing compression parameter",
        ),
        ("TDIGEST.CREATE x FOO 100", "ERR T-Digest: wrong keyword"),
        (
            "TDIGEST.CREATE x COMPRESSION 10 1",
            "ERR wrong number of arguments for 'tdigest.create' command",
        ),
        (
            "TDIGEST.CREATE x COMPRESSION 100000000000000000",
            "ERR T-Digest: allocation failed",
        ),
        (
            "TDIGEST.ADD t 1 nan",
            "ERR T-Digest: error parsing val parameter",
        ),
        (
            "TDIGEST.ADD t 1 -inf",
            "ERR T-Digest: val parameter needs to be a finite number",
        ),
        (
            "TDIGEST.QUANTILE t 2 abc",
            "ERR T-Digest: quantile should be in [0,1]",
        ),
        (
            "TDIGEST.QUANTILE t abc 2",
            "ERR T-Digest: error parsing quantile",
        ),
        ("TDIGEST.CDF t abc", "ERR T-Digest: error parsing cdf"),
        ("TDIGEST.RANK t abc", "ERR T-Digest: error parsing value"),
        (
            "TDIGEST.BYRANK t -1 abc",
            "ERR T-Digest: rank needs to be non negative",
        ),
        (
            "TDIGEST.BYREVRANK t 1.5",
            "ERR T-Digest: error parsing rank",
        ),
        (
            "TDIGEST.TRIMMED_MEAN t abc 1",
            "ERR T-Digest: error parsing low_cut_percentile",
        ),
        (
            "TDIGEST.TRIMMED_MEAN t 0 abc",
            "ERR T-Digest: error parsing high_cut_percentile",
        ),
        (
            "TDIGEST.TRIMMED_MEAN t 0 2",
            "ERR T-Digest: low_cut_percentile and high_cut_percentile should be in [0,1]",
        ),
        (
            "TDIGEST.TRIMMED_MEAN t 0.5 0.5",
            "ERR T-Digest: low_cut_percentile should be lower than high_cut_percentile",
        ),
        (
            "TDIGEST.TRIMMED_MEAN t 0.5",
            "ERR wrong number of arguments for 'tdigest.trimmed_mean' command",
        ),
        (
            "TDIGEST.MERGE z abc t",
            "ERR T-Digest: error parsing numkeys",
        ),
        (
            "TDIGEST.MERGE z 0 t",
            "ERR T-Digest: numkeys needs to be a positive integer",
        ),
        (
            "TDIGEST.MERGE z 3 t",
            "ERR wrong number of arguments for 'tdigest.merge' command",
        ),
        ("TDIGEST.MERGE z 1 t FOO", "ERR T-Digest: wrong keyword"),
        (
            "TDIGEST.MERGE z 1 t COMPRESSION",
            "ERR wrong number of arguments for 'tdigest.merge' command",
        ),
        ("TDIGEST.MERGE z 1 z", "ERR T-Digest: key does not exist"),
        (
            "TDIGEST.MERGE z 2 t nokey",
            "ERR T-Digest: key does not exist",
        ),
        (
            "TDIGEST.INFO t x",
            "ERR wrong number of arguments for 'tdigest.info' command",
        ),
    ] {
        assert_eq!(error_of(c, line), want, "{line}");
    }
    assert_eq!(cmd(c, "BF.ADD bf a"), int(1));
    for line in [
        "TDIGEST.ADD bf 1",
        "TDIGEST.CREATE bf",
        "TDIGEST.MERGE bf 1 t",
        "TDIGEST.MERGE z 1 bf",
    ] {
        assert_eq!(
            error_of(c, line),
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            "{line}"
        );
    }

    // RESP3: doubles as `,`, INFO as a map.
    let out = raw_exchange(
        port,
        b"HELLO 3\r\nTDIGEST.QUANTILE t 0.5 1\r\nTDIGEST.MIN m\r\nTDIGEST.BYREVRANK t 100\r\nTDIGEST.INFO u\r\nQUIT\r\n",
    );
    let text = String::from_utf8_lossy(&out);
    let after_hello = &text[text.find("*2\r\n,5").expect("RESP3 doubles")..];
    assert!(
        after_hello.starts_with("*2\r\n,5\r\n,8\r\n,nan\r\n*1\r\n,-inf\r\n%9\r\n+Compression\r\n:50\r\n+Capacity\r\n:310\r\n"),
        "{after_hello}"
    );
    // RESP2: doubles as bulk strings.
    let out = raw_exchange(port, b"TDIGEST.QUANTILE t 0.5\r\nTDIGEST.MAX m\r\nQUIT\r\n");
    assert!(
        out.starts_with(b"*1\r\n$1\r\n5\r\n$3\r\nnan\r\n"),
        "{}",
        String::from_utf8_lossy(&out)
    );
}

/// A whole `{family}.SCANDUMP` of `key`: `(iterator, data)` pairs, the header first.
pub fn scandump_stream(c: &mut redis::Connection, family: &str, key: &str) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut iter = 0i64;
    for _ in 0..100_000 {
        let (next, data): (i64, Vec<u8>) = redis::cmd(&format!("{family}.SCANDUMP"))
            .arg(key)
            .arg(iter)
            .query(c)
            .unwrap();
        if next == 0 {
            return out;
        }
        out.push((next, data));
        iter = next;
    }
    panic!("{family}.SCANDUMP {key} did not end");
}

/// How many of `items` CBF.MEXISTS reports present in `key`.
fn cbf_present(c: &mut redis::Connection, key: &str, items: std::ops::Range<u32>) -> usize {
    let all: Vec<u32> = items.collect();
    let mut present = 0;
    for batch in all.chunks(1000) {
        let mut command = redis::cmd("CBF.MEXISTS");
        command.arg(key);
        for i in batch {
            command.arg(format!("i{i}"));
        }
        let replies: Vec<i64> = command.query(c).unwrap();
        present += replies.iter().filter(|&&r| r == 1).count();
    }
    present
}

/// CBF.* (counting Bloom filters, our extension) from the server on 127.0.0.1:`port`, the same
/// on both hosts: RESERVE's checks, TYPE, INFO, the full filter's error, and the acceptance of
/// deletes — 10,000 items added and 5,000 deleted at error 1%: every kept item present, at most
/// 1.5% of the deleted items and of 10,000 never added reported present — then the value kept
/// through DUMP/RESTORE, COPY (where the host has it), SCANDUMP/LOADCHUNK and DEBUG RELOAD.
pub fn cbf_replies(port: u16) {
    let mut con = connect(port);
    let c = &mut con;
    let _: () = redis::cmd("FLUSHALL").query(c).unwrap();

    assert_eq!(cmd(c, "CBF.RESERVE c 0.01 10000"), Value::Okay);
    assert_eq!(error_of(c, "CBF.RESERVE c 0.01 10"), "ERR item exists");
    assert_eq!(
        error_of(c, "CBF.RESERVE x 0 10"),
        "ERR error rate must be in the range (0.000000, 1.000000)"
    );
    assert_eq!(
        error_of(c, "CBF.RESERVE x 0.01 0"),
        "ERR capacity must be in the range [1, 1073741824]"
    );
    assert_eq!(
        error_of(c, "CBF.RESERVE x 0.01 10 BITS 16"),
        "ERR BITS must be 4 or 8"
    );
    assert_eq!(
        error_of(c, "CBF.RESERVE x 0.01"),
        "ERR wrong number of arguments for 'cbf.reserve' command"
    );
    assert_eq!(cmd(c, "TYPE c"), status("BGcntBloo"));
    assert_eq!(error_of(c, "CBF.DEL nokey a"), "ERR not found");
    assert_eq!(cmd(c, "CBF.CARD nokey"), int(0));
    assert_eq!(cmd(c, "CBF.EXISTS nokey a"), int(0));

    for batch in 0..10u32 {
        let mut command = redis::cmd("CBF.MADD");
        command.arg("c");
        for i in batch * 1000..(batch + 1) * 1000 {
            command.arg(format!("i{i}"));
        }
        let replies: Vec<i64> = command.query(c).unwrap();
        assert_eq!(replies.len(), 1000);
    }
    assert_eq!(cmd(c, "CBF.CARD c"), int(10_000));
    assert_eq!(
        error_of(c, "CBF.ADD c one-more"),
        "ERR counting filter is full"
    );
    let mut pipe = redis::pipe();
    for i in 0..5_000u32 {
        pipe.cmd("CBF.DEL").arg("c").arg(format!("i{i}"));
    }
    let deleted: Vec<i64> = pipe.query(c).unwrap();
    assert!(
        deleted.iter().all(|&d| d == 1),
        "every delete of an added item happens"
    );
    assert_eq!(cmd(c, "CBF.CARD c"), int(5_000));
    assert_eq!(
        cbf_present(c, "c", 5_000..10_000),
        5_000,
        "a kept item went missing"
    );
    let deleted_present = cbf_present(c, "c", 0..5_000);
    assert!(
        deleted_present <= 75,
        "{deleted_present} of 5000 deleted items present"
    );
    let absent_present = cbf_present(c, "c", 100_000..110_000);
    assert!(
        absent_present <= 150,
        "{absent_present} of 10000 absent items present"
    );
    assert_eq!(cmd(c, "CBF.ADD c i7000"), int(0));
    assert_eq!(cmd(c, "CBF.COUNT c i7000"), int(2));
    assert_eq!(cmd(c, "CBF.DEL c i7000"), int(1));
    let Value::Array(info) = cmd(c, "CBF.INFO c") else {
        panic!("CBF.INFO is a map")
    };
    assert_eq!(info[0], status("Capacity"));
    assert_eq!(info[1], int(10_000));
    assert_eq!(info[4], status("Number of items inserted"));
    assert_eq!(info[5], int(5_000));
    assert_eq!(info[8], status("Counter bits"));
    assert_eq!(info[9], int(4));

    let stream = scandump_stream(c, "CBF", "c");
    let payload: Vec<u8> = redis::cmd("DUMP").arg("c").query(c).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("restored")
        .arg(0)
        .arg(&payload)
        .query(c)
        .unwrap();
    assert_eq!(scandump_stream(c, "CBF", "restored"), stream);
    // COPY where the host has it (Redis; `bloomgate serve` has no COPY).
    if let Ok(copied) = build("COPY c copied").query::<Value>(c) {
        assert_eq!(copied, int(1));
        assert_eq!(scandump_stream(c, "CBF", "copied"), stream);
    }
    for (iter, data) in &stream {
        let _: () = redis::cmd("CBF.LOADCHUNK")
            .arg("loaded")
            .arg(iter)
            .arg(data)
            .query(c)
            .unwrap();
    }
    assert_eq!(scandump_stream(c, "CBF", "loaded"), stream);
    assert_eq!(cmd(c, "DEBUG RELOAD"), Value::Okay);
    assert_eq!(scandump_stream(c, "CBF", "c"), stream);
    assert_eq!(cbf_present(c, "c", 5_000..10_000), 5_000);
    let Value::Int(usage) = cmd(c, "MEMORY USAGE c") else {
        panic!("MEMORY USAGE is an integer")
    };
    assert!(usage as usize > stream[1..].iter().map(|(_, d)| d.len()).sum::<usize>());

    // Auto-creation with the bf-* settings, 8-bit counters, and a wrong type.
    assert_eq!(cmd(c, "CBF.MADD auto a b a"), ints(&[1, 1, 0]));
    assert_eq!(cmd(c, "CBF.COUNT auto a"), int(2));
    assert_eq!(cmd(c, "CBF.RESERVE wide 0.01 100 BITS 8"), Value::Okay);
    for _ in 0..20 {
        cmd(c, "CBF.ADD wide hot");
    }
    assert_eq!(cmd(c, "CBF.COUNT wide hot"), int(20));
    assert_eq!(cmd(c, "BF.ADD bloom a"), int(1));
    assert_eq!(
        error_of(c, "CBF.ADD bloom a"),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(cmd(c, "CBF.EXISTS bloom a"), int(0));
}
