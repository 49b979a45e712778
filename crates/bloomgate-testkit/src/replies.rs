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

pub fn build(line: &str) -> redis::Cmd {
    let mut words = line.split(' ');
    let mut c = redis::cmd(words.next().unwrap());
    for arg in words {
        c.arg(arg);
    }
    c
}

pub fn cmd(con: &mut redis::Connection, line: &str) -> Value {
    build(line)
        .query::<Value>(con)
        .unwrap_or_else(|e| panic!("{line}: {e}"))
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

pub fn int(v: i64) -> Value {
    Value::Int(v)
}

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
