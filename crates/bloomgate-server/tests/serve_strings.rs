//! Redis strings in `bloomgate serve`: the commands' replies and errors word for word as Redis
//! 7.0 gives them (the table below was taken from Debian's redis-server, and is checked against
//! it again when it is installed), WRONGTYPE both ways between strings and the dialect's types,
//! DUMP/RESTORE in Redis' string encoding (both directions with a live Redis), snapshot,
//! DEBUG RELOAD and log replay after kill -9, WATCH/MULTI/EXEC with SET, ACL categories, and the
//! maxmemory refusal of string writes.

use bloomgate_testkit::replies::{cmd, error_of, int, wire_error};
use bloomgate_testkit::server::Server;
use bloomgate_testkit::{have_redis_server, redis_server, temp_dir};
use redis::Value;

/// The server child of the test that kills it (see `bloomgate_testkit::server`).
#[test]
fn serve_child() {
    bloomgate_testkit::server::serve_child();
}

/// Commands (space-separated arguments) and Redis 7.0's reply to each, in order, from an
/// empty keyspace.
const CASES: &[(&str, &str)] = &[
    ("SET k v", "OK"),
    ("SET k v NX", "(nil)"),
    ("SET k v2 XX GET", "\"v\""),
    ("GET k", "\"v2\""),
    ("SET k v NX XX", "(error) ERR syntax error"),
    ("SET k v XX NX", "(error) ERR syntax error"),
    (
        "SET k v EX 0",
        "(error) ERR invalid expire time in 'set' command",
    ),
    (
        "SET k v EX abc",
        "(error) ERR value is not an integer or out of range",
    ),
    (
        "SET k v PX -1",
        "(error) ERR invalid expire time in 'set' command",
    ),
    ("SET k v EX 10 PX 10", "(error) ERR syntax error"),
    ("SET k v KEEPTTL EX 10", "(error) ERR syntax error"),
    ("SET k v EX 10 KEEPTTL", "(error) ERR syntax error"),
    ("SET k v EX", "(error) ERR syntax error"),
    ("SET k v FOO", "(error) ERR syntax error"),
    (
        "SET k v EX 9999999999999999",
        "(error) ERR invalid expire time in 'set' command",
    ),
    (
        "SET k v PX 9223372036854775807",
        "(error) ERR invalid expire time in 'set' command",
    ),
    ("SET k v EX 5 EX 6", "OK"),
    ("SET k v NX NX", "(nil)"),
    ("SET k v GET GET", "\"v\""),
    ("SET k v3 GET", "\"v\""),
    ("SET k v4 GET NX", "\"v3\""),
    ("SET k v KEEPTTL KEEPTTL", "OK"),
    ("SET k v EXAT 1", "OK"),
    ("EXISTS k", "(integer) 0"),
    ("SET x 1 PXAT 1", "OK"),
    ("GET x", "(nil)"),
    (
        "SET",
        "(error) ERR wrong number of arguments for 'set' command",
    ),
    (
        "GET",
        "(error) ERR wrong number of arguments for 'get' command",
    ),
    (
        "GET a b",
        "(error) ERR wrong number of arguments for 'get' command",
    ),
    (
        "MSET a",
        "(error) ERR wrong number of arguments for 'mset' command",
    ),
    (
        "MSET a 1 b",
        "(error) ERR wrong number of arguments for 'mset' command",
    ),
    ("MSET a 1 b 2", "OK"),
    ("MGET a b zz", "[\"1\", \"2\", (nil)]"),
    (
        "MGET",
        "(error) ERR wrong number of arguments for 'mget' command",
    ),
    ("SETNX a 5", "(integer) 0"),
    ("SETNX n 5", "(integer) 1"),
    (
        "SETNX n",
        "(error) ERR wrong number of arguments for 'setnx' command",
    ),
    ("STRLEN a", "(integer) 1"),
    ("STRLEN zz", "(integer) 0"),
    ("APPEND a xyz", "(integer) 4"),
    ("APPEND ap hi", "(integer) 2"),
    ("GETDEL ap", "\"hi\""),
    ("GETDEL ap", "(nil)"),
    (
        "INCR a",
        "(error) ERR value is not an integer or out of range",
    ),
    ("SET i 9223372036854775807", "OK"),
    (
        "INCR i",
        "(error) ERR increment or decrement would overflow",
    ),
    (
        "DECRBY i -1",
        "(error) ERR increment or decrement would overflow",
    ),
    ("SET j -9223372036854775808", "OK"),
    (
        "DECR j",
        "(error) ERR increment or decrement would overflow",
    ),
    (
        "INCRBY j abc",
        "(error) ERR value is not an integer or out of range",
    ),
    ("INCRBY x 5", "(integer) 5"),
    (
        "DECRBY x 9223372036854775808",
        "(error) ERR value is not an integer or out of range",
    ),
    (
        "DECRBY x -9223372036854775808",
        "(error) ERR decrement would overflow",
    ),
    (
        "INCRBY x -9223372036854775808",
        "(integer) -9223372036854775803",
    ),
    ("SET s 01", "OK"),
    (
        "INCR s",
        "(error) ERR value is not an integer or out of range",
    ),
    ("SET s +1", "OK"),
    (
        "INCR s",
        "(error) ERR value is not an integer or out of range",
    ),
    ("SET s -0", "OK"),
    (
        "INCR s",
        "(error) ERR value is not an integer or out of range",
    ),
    (
        "INCRBY z +5",
        "(error) ERR value is not an integer or out of range",
    ),
    (
        "INCRBY z -0",
        "(error) ERR value is not an integer or out of range",
    ),
    (
        "INCRBY",
        "(error) ERR wrong number of arguments for 'incrby' command",
    ),
    (
        "DECR k k",
        "(error) ERR wrong number of arguments for 'decr' command",
    ),
    ("SET e 10", "OK"),
    ("EXPIRE e 100", "(integer) 1"),
    ("INCR e", "(integer) 11"),
    ("DECRBY e 5", "(integer) 6"),
    ("GET e", "\"6\""),
    ("APPEND e 1", "(integer) 2"),
    ("GET e", "\"61\""),
    ("SETNX e 1", "(integer) 0"),
    ("TYPE e", "string"),
    ("RENAME e e2", "OK"),
    ("GET e2", "\"61\""),
    ("DEL e2", "(integer) 1"),
    ("EXISTS e2", "(integer) 0"),
    ("MSET a 1 a 2", "OK"),
    ("GET a", "\"2\""),
    ("TYPE a", "string"),
    ("TYPE zz", "none"),
    ("set lower case", "OK"),
    ("get lower", "\"case\""),
];

/// A reply as `CASES` writes it.
fn render(reply: redis::RedisResult<Value>) -> String {
    fn value(v: &Value) -> String {
        match v {
            Value::Nil => "(nil)".into(),
            Value::Okay => "OK".into(),
            Value::SimpleString(s) => s.clone(),
            Value::Int(n) => format!("(integer) {n}"),
            Value::BulkString(b) => format!("\"{}\"", String::from_utf8_lossy(b)),
            Value::Array(items) => {
                let parts: Vec<String> = items.iter().map(value).collect();
                format!("[{}]", parts.join(", "))
            }
            other => format!("{other:?}"),
        }
    }
    match reply {
        Ok(v) => value(&v),
        Err(e) => format!("(error) {}", wire_error(&e)),
    }
}

fn run(con: &mut redis::Connection, line: &str) -> String {
    render(bloomgate_testkit::replies::build(line).query::<Value>(con))
}

fn check_cases(con: &mut redis::Connection, host: &str) {
    let _ = run(con, "FLUSHALL");
    for (line, want) in CASES {
        assert_eq!(run(con, line), *want, "{host}: {line}");
    }
}

#[test]
fn string_replies_and_errors_are_redis_own() {
    let server = Server::start(&temp_dir("strings-replies"), &[]);
    check_cases(&mut server.conn(), "bloomgate serve");
    if !have_redis_server("string_replies_and_errors_are_redis_own (against redis-server)") {
        return;
    }
    let dir = temp_dir("strings-redis");
    let redis = redis_server(&dir, |_| {}).unwrap_or_else(|log| panic!("redis-server: {log}"));
    let mut r = bloomgate_testkit::replies::connect(redis.port);
    check_cases(&mut r, "redis-server");
    // COMMAND INFO: name, arity, flags, key positions and ACL categories as Redis declares them.
    let mut c = server.conn();
    for name in [
        "set", "get", "mget", "mset", "setnx", "strlen", "append", "getdel", "incr", "decr",
        "incrby", "decrby",
    ] {
        let info = |con: &mut redis::Connection| match cmd(con, &format!("COMMAND INFO {name}")) {
            Value::Array(mut v) => match v.remove(0) {
                Value::Array(fields) => fields[..7].to_vec(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
        assert_eq!(info(&mut c), info(&mut r), "COMMAND INFO {name}");
    }
}

#[test]
fn wrongtype_both_ways_and_keyspace_commands() {
    let server = Server::start(&temp_dir("strings-wrongtype"), &[]);
    let mut c = server.conn();
    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    cmd(&mut c, "SET s v");
    for line in [
        "BF.ADD s a",
        "BF.RESERVE s 0.01 100",
        "BF.INFO s",
        "CF.ADD s a",
        "CF.INFO s",
        "WF.ADD s a",
        "CMS.INCRBY s a 1",
        "CMS.QUERY s a",
        "TOPK.ADD s a",
        "TOPK.LIST s",
        "TDIGEST.ADD s 1",
        "TDIGEST.MIN s",
    ] {
        assert_eq!(error_of(&mut c, line), WRONGTYPE, "{line}");
    }
    assert_eq!(cmd(&mut c, "GET s"), Value::BulkString(b"v".to_vec()));
    cmd(&mut c, "BF.ADD b a");
    for line in [
        "GET b",
        "STRLEN b",
        "APPEND b x",
        "INCR b",
        "DECRBY b 2",
        "GETDEL b",
        "SET b x GET",
    ] {
        assert_eq!(error_of(&mut c, line), WRONGTYPE, "{line}");
    }
    assert_eq!(
        cmd(&mut c, "MGET b s"),
        Value::Array(vec![Value::Nil, Value::BulkString(b"v".to_vec())])
    );
    assert_eq!(cmd(&mut c, "SETNX b x"), int(0));
    assert_eq!(
        cmd(&mut c, "TYPE b"),
        Value::SimpleString("MBbloom--".into())
    );
    assert_eq!(cmd(&mut c, "TYPE s"), Value::SimpleString("string".into()));
    // SET replaces a value of any type.
    assert_eq!(cmd(&mut c, "SET b x"), Value::Okay);
    assert_eq!(cmd(&mut c, "TYPE b"), Value::SimpleString("string".into()));
    assert_eq!(cmd(&mut c, "EXISTS s b nope"), int(2));
    assert_eq!(cmd(&mut c, "EXPIRE s 100"), int(1));
    assert!(matches!(cmd(&mut c, "TTL s"), Value::Int(t) if (99..=100).contains(&t)));
    assert_eq!(cmd(&mut c, "RENAME s s2"), Value::Okay);
    assert!(matches!(cmd(&mut c, "TTL s2"), Value::Int(t) if t > 90));
    assert_eq!(cmd(&mut c, "GET s2"), Value::BulkString(b"v".to_vec()));
    cmd(&mut c, "CF.ADD cf a");
    let scan = cmd(&mut c, "SCAN 0 TYPE string COUNT 100");
    let Value::Array(parts) = scan else { panic!() };
    let Value::Array(mut keys) = parts[1].clone() else {
        panic!()
    };
    keys.sort_by_key(|k| format!("{k:?}"));
    assert_eq!(
        keys,
        vec![
            Value::BulkString(b"b".to_vec()),
            Value::BulkString(b"s2".to_vec())
        ]
    );
    let Value::Array(all) = cmd(&mut c, "KEYS *") else {
        panic!()
    };
    assert_eq!(all.len(), 3);
    assert!(matches!(cmd(&mut c, "MEMORY USAGE s2"), Value::Int(n) if (16..200).contains(&n)));
    let big = "x".repeat(10_000);
    cmd(&mut c, &format!("SET big {big}"));
    assert!(matches!(cmd(&mut c, "MEMORY USAGE big"), Value::Int(n) if n > 10_000 && n < 11_000));
    assert_eq!(cmd(&mut c, "DEL s2 b"), int(2));
    assert_eq!(cmd(&mut c, "DBSIZE"), int(2));
    // ACL: the string commands are in @string; a user without it is refused.
    let Value::Array(cat) = cmd(&mut c, "ACL CAT string") else {
        panic!()
    };
    assert_eq!(cat.len(), 12);
    cmd(&mut c, "ACL SETUSER u on >pw ~* +@all -@string");
    cmd(&mut c, "AUTH u pw");
    assert_eq!(
        error_of(&mut c, "GET big"),
        "NOPERM User u has no permissions to run the 'get' command"
    );
    assert_eq!(cmd(&mut c, "BF.EXISTS nope a"), int(0));
}

#[test]
fn watch_multi_exec_with_set() {
    let server = Server::start(&temp_dir("strings-watch"), &[]);
    let (mut a, mut b) = (server.conn(), server.conn());
    cmd(&mut a, "WATCH k");
    cmd(&mut b, "SET k other");
    cmd(&mut a, "MULTI");
    assert_eq!(
        cmd(&mut a, "SET k mine"),
        Value::SimpleString("QUEUED".into())
    );
    assert_eq!(cmd(&mut a, "EXEC"), Value::Nil);
    assert_eq!(cmd(&mut a, "GET k"), Value::BulkString(b"other".to_vec()));
    // A SET inside the transaction of the client that watches does not abort it.
    cmd(&mut a, "WATCH k");
    cmd(&mut a, "MULTI");
    cmd(&mut a, "SET k 1");
    cmd(&mut a, "INCRBY k 4");
    cmd(&mut a, "GET k");
    assert_eq!(
        render(redis::cmd("EXEC").query::<Value>(&mut a)),
        "[OK, (integer) 5, \"5\"]"
    );
    // A write to a watched filter by a string command aborts too.
    cmd(&mut a, "BF.ADD f x");
    cmd(&mut a, "WATCH f");
    cmd(&mut b, "SET f now-a-string");
    cmd(&mut a, "MULTI");
    cmd(&mut a, "GET f");
    assert_eq!(cmd(&mut a, "EXEC"), Value::Nil);
}

fn bulk(v: Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b,
        other => panic!("not a bulk string: {other:?}"),
    }
}

fn restore(con: &mut redis::Connection, key: &str, payload: &[u8]) -> redis::RedisResult<Value> {
    redis::cmd("RESTORE")
        .arg(key)
        .arg(0)
        .arg(payload)
        .query::<Value>(con)
}

#[test]
fn dump_and_restore_use_redis_string_encoding() {
    let server = Server::start(&temp_dir("strings-dump"), &[]);
    let mut c = server.conn();
    let long = "a".repeat(62);
    // DUMP payloads of Redis 7.0 (raw, integer and LZF encodings).
    let redis_dumps: [(&str, &[u8]); 3] = [
        ("hello", b"\x00\x05hello\n\x00cr\xdfve4 \n"),
        ("100000", b"\x00\xc2\xa0\x86\x01\x00\n\x00\xf1$\x03Po/\xa6t"),
        (
            &long,
            b"\x00\xc3\t>\x01aa\xe01\x00\x01aa\n\x00\xecIB\xd6\xb3'_|",
        ),
    ];
    for (i, (value, payload)) in redis_dumps.iter().enumerate() {
        cmd(&mut c, &format!("SET s{i} {value}"));
        assert_eq!(bulk(cmd(&mut c, &format!("DUMP s{i}"))), *payload);
        assert_eq!(
            restore(&mut c, &format!("r{i}"), payload).unwrap(),
            Value::Okay
        );
        assert_eq!(bulk(cmd(&mut c, &format!("GET r{i}"))), value.as_bytes());
    }
    assert_eq!(
        render(restore(&mut c, "r0", redis_dumps[0].1)),
        "(error) BUSYKEY Target key name already exists."
    );
    let mut damaged = redis_dumps[0].1.to_vec();
    damaged[3] ^= 1;
    assert_eq!(
        render(restore(&mut c, "x", &damaged)),
        "(error) ERR DUMP payload version or checksum are wrong"
    );
    // A filter's DUMP still restores as a filter next to strings.
    cmd(&mut c, "BF.ADD bf a");
    let filter = bulk(cmd(&mut c, "DUMP bf"));
    assert_eq!(restore(&mut c, "bf2", &filter).unwrap(), Value::Okay);
    assert_eq!(cmd(&mut c, "BF.EXISTS bf2 a"), int(1));

    if !have_redis_server("dump_and_restore_use_redis_string_encoding (against redis-server)") {
        return;
    }
    let dir = temp_dir("strings-dump-redis");
    let redis = redis_server(&dir, |_| {}).unwrap_or_else(|log| panic!("redis-server: {log}"));
    let mut r = bloomgate_testkit::replies::connect(redis.port);
    for value in [
        "x",
        "-12",
        "4294967296",
        &"b".repeat(1000),
        "hello world of strings",
    ] {
        redis::cmd("SET").arg("k").arg(value).exec(&mut r).unwrap();
        redis::cmd("SET").arg("k").arg(value).exec(&mut c).unwrap();
        let theirs = bulk(cmd(&mut r, "DUMP k"));
        let ours = bulk(cmd(&mut c, "DUMP k"));
        assert_eq!(ours, theirs, "DUMP of {value:?}");
        cmd(&mut c, "DEL from-redis");
        assert_eq!(restore(&mut c, "from-redis", &theirs).unwrap(), Value::Okay);
        assert_eq!(bulk(cmd(&mut c, "GET from-redis")), value.as_bytes());
        cmd(&mut r, "DEL from-serve");
        assert_eq!(restore(&mut r, "from-serve", &ours).unwrap(), Value::Okay);
        assert_eq!(bulk(cmd(&mut r, "GET from-serve")), value.as_bytes());
    }
}

/// Checks the strings `fill` wrote.
fn check_filled(c: &mut redis::Connection) {
    assert_eq!(bulk(cmd(c, "GET plain")), b"value".to_vec());
    assert_eq!(bulk(cmd(c, "GET appended")), b"abcdef".to_vec());
    assert_eq!(bulk(cmd(c, "GET counter")), b"40".to_vec());
    assert_eq!(bulk(cmd(c, "GET m2")), b"two".to_vec());
    assert_eq!(cmd(c, "GET gone"), Value::Nil);
    assert_eq!(cmd(c, "GET expired"), Value::Nil);
    assert!(matches!(cmd(c, "TTL timed"), Value::Int(t) if t > 900));
    assert_eq!(bulk(cmd(c, "GET timed")), b"t".to_vec());
    assert_eq!(cmd(c, "BF.EXISTS bf a"), int(1));
    assert_eq!(cmd(c, "TYPE plain"), Value::SimpleString("string".into()));
    let Value::Array(keys) = cmd(c, "KEYS *") else {
        panic!()
    };
    assert_eq!(keys.len(), 7);
}

fn fill(c: &mut redis::Connection) {
    cmd(c, "SET plain value");
    cmd(c, "SET appended abc");
    cmd(c, "APPEND appended def");
    cmd(c, "INCRBY counter 42");
    cmd(c, "DECR counter");
    cmd(c, "DECRBY counter 1");
    cmd(c, "MSET m1 one m2 two");
    cmd(c, "SET gone x");
    cmd(c, "GETDEL gone");
    cmd(c, "SET expired x PX 1");
    cmd(c, "SET timed t EX 1000");
    cmd(c, "BF.ADD bf a");
}

#[test]
fn strings_survive_reload_snapshot_and_log_replay() {
    let dir = temp_dir("strings-durable");
    let server = Server::start(&dir, &["--enable-debug-command", "yes"]);
    let mut c = server.conn();
    fill(&mut c);
    std::thread::sleep(std::time::Duration::from_millis(5));
    check_filled(&mut c);
    assert_eq!(cmd(&mut c, "DEBUG RELOAD"), Value::Okay);
    check_filled(&mut c);
    assert_eq!(cmd(&mut c, "SAVE"), Value::Okay);
    server.shutdown();
    let server = Server::start(&dir, &[]);
    check_filled(&mut server.conn());
    server.shutdown();

    // The log alone: written with every write fsynced, then kill -9, so the restart replays it.
    let dir = temp_dir("strings-replay");
    let server = Server::process(&dir, &["--appendfsync", "always"]);
    fill(&mut server.conn());
    server.kill9();
    let server = Server::start(&dir, &[]);
    check_filled(&mut server.conn());
}

#[test]
fn string_writes_over_maxmemory_are_refused() {
    let server = Server::start(&temp_dir("strings-oom"), &["--maxmemory", "4mb"]);
    let mut c = server.conn();
    const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
    let big = vec![b'x'; 6 << 20];
    let half = vec![b'y'; 3 << 20];
    let err = |r: redis::RedisResult<Value>| wire_error(&r.unwrap_err());
    assert_eq!(err(redis::cmd("SET").arg("k").arg(&big).query(&mut c)), OOM);
    assert_eq!(
        err(redis::cmd("SETNX").arg("k").arg(&big).query(&mut c)),
        OOM
    );
    assert_eq!(
        err(redis::cmd("APPEND").arg("k").arg(&big).query(&mut c)),
        OOM
    );
    assert_eq!(
        err(redis::cmd("MSET")
            .arg("a")
            .arg(&half)
            .arg("b")
            .arg(&half)
            .query(&mut c)),
        OOM
    );
    assert_eq!(cmd(&mut c, "DBSIZE"), int(0));
    // What fits is stored; growing it past the limit is refused and leaves it whole.
    redis::cmd("SET").arg("k").arg(&half).exec(&mut c).unwrap();
    assert_eq!(
        err(redis::cmd("APPEND").arg("k").arg(&half).query(&mut c)),
        OOM
    );
    assert_eq!(cmd(&mut c, "STRLEN k"), int(3 << 20));
    // RESTORE of a string payload larger than what is left.
    let payload = bulk(cmd(&mut c, "DUMP k"));
    assert_eq!(err(restore(&mut c, "k2", &payload)), OOM);
    assert_eq!(cmd(&mut c, "SET small v"), Value::Okay);
}
