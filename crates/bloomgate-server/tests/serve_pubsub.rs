//! Pub/sub in `bloomgate serve`: SUBSCRIBE / PSUBSCRIBE / PUBLISH / PUBSUB through the `redis`
//! crate's pub/sub API, Redis' frames on the wire in RESP2 (and its subscribed-mode refusals)
//! and RESP3 (push frames), keyspace notifications for the dialect's writes and serve's
//! generic commands, ACL channel permissions, and the disconnection of a subscriber that stops
//! reading (`client-output-buffer-limit pubsub`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bloomgate_testkit::replies::{cmd, error_of, events_of, keyspace_subscriber};
use bloomgate_testkit::server::Server;
use bloomgate_testkit::temp_dir;
use redis::Value;

/// Sends `request` on a new connection and returns what arrives within a short quiet period
/// (bounded: at most 10 s in all).
fn exchange(port: u16, request: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(request).unwrap();
    read_quiet(&mut s)
}

/// Bytes until 300 ms pass without any (or 10 s in all, or the peer closes).
fn read_quiet(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    out
}

/// `CONFIG GET name`'s value.
fn config_get(c: &mut redis::Connection, name: &str) -> String {
    let pair: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(c).unwrap();
    pair[1].clone()
}

/// `PUBSUB NUMSUB channel`'s count.
fn numsub(c: &mut redis::Connection, channel: &str) -> i64 {
    let (_, n): (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(c)
        .unwrap();
    n
}

/// An integer reply.
fn num(c: &mut redis::Connection, line: &str) -> i64 {
    match cmd(c, line) {
        Value::Int(n) => n,
        other => panic!("{line}: {other:?}"),
    }
}

#[test]
fn subscribe_publish_and_pubsub_introspection() {
    let server = Server::start(&temp_dir("pubsub"), &[]);
    let mut c = server.conn();
    let mut s = server.conn();
    let mut sub = s.as_pubsub();
    sub.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    sub.subscribe("news").unwrap();
    sub.psubscribe("n*").unwrap();
    assert_eq!(num(&mut c, "PUBLISH news hello"), 2);
    assert_eq!(num(&mut c, "PUBLISH nothing-here x"), 1);
    assert_eq!(num(&mut c, "PUBLISH other x"), 0);
    let mut got = Vec::new();
    for _ in 0..3 {
        let m = sub.get_message().unwrap();
        let pattern: Option<String> = m.get_pattern().ok();
        let payload: String = m.get_payload().unwrap();
        got.push((pattern, m.get_channel_name().to_string(), payload));
    }
    got.sort();
    assert_eq!(
        got,
        vec![
            (None, "news".into(), "hello".into()),
            (Some("n*".into()), "news".into(), "hello".into()),
            (Some("n*".into()), "nothing-here".into(), "x".into()),
        ]
    );
    assert_eq!(
        cmd(&mut c, "PUBSUB CHANNELS"),
        Value::Array(vec![Value::BulkString(b"news".to_vec())])
    );
    assert_eq!(cmd(&mut c, "PUBSUB CHANNELS x*"), Value::Array(vec![]));
    assert_eq!(
        cmd(&mut c, "PUBSUB NUMSUB news none"),
        Value::Array(vec![
            Value::BulkString(b"news".to_vec()),
            Value::Int(1),
            Value::BulkString(b"none".to_vec()),
            Value::Int(0),
        ])
    );
    assert_eq!(num(&mut c, "PUBSUB NUMPAT"), 1);
    sub.unsubscribe("news").unwrap();
    sub.punsubscribe("n*").unwrap();
    drop(sub);
    assert_eq!(num(&mut c, "PUBLISH news again"), 0);
    assert_eq!(num(&mut c, "PUBSUB NUMPAT"), 0);
    // A subscriber that disconnects leaves nothing behind.
    {
        let mut gone = server.conn();
        let mut gone = gone.as_pubsub();
        gone.subscribe("left").unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while numsub(&mut c, "left") != 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(cmd(&mut c, "PUBSUB CHANNELS"), Value::Array(vec![]));
}

/// Redis 7's bytes: subscribed RESP2 clients may only run the pub/sub commands, PING (answered
/// as an array), QUIT and RESET; RESP3 clients get push frames and may run anything.
#[test]
fn wire_frames_in_resp2_and_resp3() {
    let server = Server::start(&temp_dir("pubsub-wire"), &[]);
    let resp2 = exchange(
        server.port,
        b"SUBSCRIBE ch\r\nGET k\r\nPING\r\nPING x\r\nUNSUBSCRIBE\r\nUNSUBSCRIBE\r\nPUNSUBSCRIBE\r\n",
    );
    assert_eq!(
        String::from_utf8_lossy(&resp2),
        "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n-ERR Can't execute 'get': only \
         (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n\
         *2\r\n$4\r\npong\r\n$0\r\n\r\n*2\r\n$4\r\npong\r\n$1\r\nx\r\n\
         *3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n\
         *3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n"
    );
    let resp3 = exchange(
        server.port,
        b"HELLO 3\r\nSUBSCRIBE ch\r\nPUBLISH ch m\r\nGET k\r\nPING\r\n",
    );
    let text = String::from_utf8_lossy(&resp3);
    let after_hello = &text[text.find(">3").expect("a push frame")..];
    assert_eq!(
        after_hello,
        ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n>3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n\
         :1\r\n_\r\n+PONG\r\n"
    );
    let reset = exchange(server.port, b"SUBSCRIBE a b\r\nRESET\r\nGET k\r\n");
    assert_eq!(
        String::from_utf8_lossy(&reset),
        "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n\
         +RESET\r\n$-1\r\n"
    );
    let multi = exchange(server.port, b"MULTI\r\nSUBSCRIBE x\r\nEXEC\r\n");
    assert_eq!(
        String::from_utf8_lossy(&multi),
        "+OK\r\n-ERR Command not allowed inside a transaction\r\n-EXECABORT Transaction \
         discarded because of previous errors.\r\n"
    );
}

#[test]
fn keyspace_notifications() {
    let server = Server::start(&temp_dir("pubsub-events"), &[]);
    let mut c = server.conn();
    let mut s = server.conn();
    let mut sub = keyspace_subscriber(&mut s);
    let mut n = 0;
    // Off by default.
    assert_eq!(config_get(&mut c, "notify-keyspace-events"), "");
    assert!(events_of(&mut c, &mut sub, &mut n, "BF.ADD b x").is_empty());
    assert_eq!(
        error_of(&mut c, "CONFIG SET notify-keyspace-events Q"),
        "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - \
         Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
    );
    cmd(&mut c, "CONFIG SET notify-keyspace-events Ed");
    let ev = |e: &str, k: &str| vec![(format!("__keyevent@0__:{e}"), k.to_string())];
    for (line, want) in [
        ("BF.ADD b y", ev("bloom.add", "b")),
        ("BF.ADD b y", vec![]),
        ("BF.EXISTS b y", vec![]),
        ("BF.RESERVE r 0.01 100", ev("bloom.reserve", "r")),
        ("CF.ADD c x", ev("cf.add", "c")),
        ("CF.DEL c x", ev("cf.del", "c")),
        ("CMS.INITBYDIM m 10 5", ev("cms.initbydim", "m")),
        ("CMS.INCRBY m a 1", ev("cms.incrby", "m")),
        ("TOPK.RESERVE t 3", ev("topk.reserve", "t")),
        ("TOPK.ADD t a", ev("topk.add", "t")),
        ("TDIGEST.CREATE d", ev("tdigest.create", "d")),
        ("TDIGEST.ADD d 1", ev("tdigest.add", "d")),
        ("WF.RESERVE w 0.01 100 1000 3", ev("wf.reserve", "w")),
        ("WF.ADD w a", ev("wf.add", "w")),
        // Generic commands are class `g`, not `d`.
        ("DEL b", vec![]),
    ] {
        assert_eq!(events_of(&mut c, &mut sub, &mut n, line), want, "{line}");
    }
    cmd(&mut c, "CONFIG SET notify-keyspace-events KEA");
    assert_eq!(config_get(&mut c, "notify-keyspace-events"), "AKE");
    let both = |e: &str, k: &str| {
        vec![
            (format!("__keyspace@0__:{k}"), e.to_string()),
            (format!("__keyevent@0__:{e}"), k.to_string()),
        ]
    };
    for (line, want) in [
        ("BF.ADD r z", both("bloom.add", "r")),
        ("EXPIRE r 100", both("expire", "r")),
        ("PERSIST r", both("persist", "r")),
        (
            "RENAME r r2",
            [both("rename_from", "r"), both("rename_to", "r2")].concat(),
        ),
        ("DEL r2 missing", both("del", "r2")),
        ("SET s v", both("set", "s")),
        ("GET s", vec![]),
    ] {
        assert_eq!(events_of(&mut c, &mut sub, &mut n, line), want, "{line}");
    }
    // `n`: new keys (not part of `A`).
    cmd(&mut c, "CONFIG SET notify-keyspace-events En");
    assert_eq!(
        events_of(&mut c, &mut sub, &mut n, "BF.ADD fresh a"),
        ev("new", "fresh")
    );
    // `x`: keys removed by expiry.
    cmd(&mut c, "CONFIG SET notify-keyspace-events Ex");
    cmd(&mut c, "PEXPIRE fresh 1");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    while seen.is_empty() && Instant::now() < deadline {
        seen = events_of(&mut c, &mut sub, &mut n, "PING");
    }
    assert_eq!(seen, ev("expired", "fresh"));
}

#[test]
fn acl_channel_permissions() {
    let server = Server::start(&temp_dir("pubsub-acl"), &[]);
    let mut admin = server.conn();
    cmd(
        &mut admin,
        "ACL SETUSER u on nopass +@all ~* resetchannels &allowed*",
    );
    let mut c = server.conn();
    cmd(&mut c, "AUTH u x");
    let denied = "NOPERM No permissions to access a channel";
    assert_eq!(error_of(&mut c, "PUBLISH other x"), denied);
    assert_eq!(num(&mut c, "PUBLISH allowed1 x"), 0);
    assert_eq!(error_of(&mut c, "SUBSCRIBE allowed1 other"), denied);
    // A pattern must equal an allowed pattern, not merely match it.
    assert_eq!(error_of(&mut c, "PSUBSCRIBE allowed1*"), denied);
    assert_eq!(
        cmd(&mut admin, "ACL DRYRUN u PUBLISH other x"),
        Value::BulkString(b"This user has no permissions to access the 'other' channel".to_vec())
    );
    assert_eq!(
        cmd(&mut admin, "ACL DRYRUN u PUBLISH allowed x"),
        Value::Okay
    );
    let raw = exchange(
        server.port,
        b"AUTH u x\r\nPSUBSCRIBE allowed*\r\nSUBSCRIBE allowedX\r\n",
    );
    assert_eq!(
        String::from_utf8_lossy(&raw),
        "+OK\r\n*3\r\n$10\r\npsubscribe\r\n$8\r\nallowed*\r\n:1\r\n\
         *3\r\n$9\r\nsubscribe\r\n$8\r\nallowedX\r\n:2\r\n"
    );
}

/// A subscriber that stops reading is disconnected once its pending output passes the hard
/// limit; the server's memory for it is dropped, and publishing carries on.
#[test]
fn a_slow_subscriber_is_disconnected() {
    let server = Server::start(&temp_dir("pubsub-slow"), &[]);
    let mut c = server.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("pubsub 1mb 256kb 60")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        config_get(&mut c, "client-output-buffer-limit"),
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 262144 60"
    );
    let mut slow = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    slow.write_all(b"SUBSCRIBE firehose\r\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while numsub(&mut c, "firehose") == 0 {
        assert!(Instant::now() < deadline, "never subscribed");
        std::thread::sleep(Duration::from_millis(10));
    }
    // 64 KiB messages, never read: the socket buffers fill, then the outbox passes 1 MB.
    let message = "x".repeat(64 << 10);
    let mut published = 0;
    let mut gone = false;
    for _ in 0..4000 {
        let mut publish = redis::cmd("PUBLISH");
        publish.arg("firehose").arg(&message);
        published += 1;
        if publish.query::<i64>(&mut c).unwrap() == 0 {
            gone = true;
            break;
        }
    }
    assert!(gone, "still subscribed after {published} messages");
    assert_eq!(numsub(&mut c, "firehose"), 0);
    // The connection was closed: reading drains what the kernel held, then ends.
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0usize;
    let closed = loop {
        match slow.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => total += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(_) => break false,
        }
        if total > published * message.len() + (1 << 20) {
            break false;
        }
    };
    assert!(closed, "the slow subscriber's connection stayed open");
    assert_eq!(cmd(&mut c, "PING"), Value::SimpleString("PONG".into()));
}
