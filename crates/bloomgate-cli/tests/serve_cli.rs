//! What only the `bloomgate serve` binary shows: the options from flags, the environment and a
//! config file (and `--bloom-memory-usage-limit`); the jemalloc-backed `used_memory` under `--maxmemory`; metrics; protected mode
//! refusing at start; and the gate's remote mode (`demo feed --filters resp://`) against it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bloomgate_testkit::replies::{cmd, error_of, int};
use bloomgate_testkit::server::Server;
use bloomgate_testkit::Succeed;
use bloomgate_testkit::{free_port, temp_dir};
use redis::Value;

fn serve(dir: &std::path::Path, extra: &[&str]) -> Server {
    Server::binary(env!("CARGO_BIN_EXE_bloomgate"), dir, extra)
}

#[test]
fn auth_maxmemory_metrics_env_and_config_file() {
    let dir = temp_dir("auth");
    let conf = dir.join("bloomgate.conf");
    std::fs::write(
        &conf,
        "# test config\nbf-error-rate 0.05\nrequirepass fromfile\n",
    )
    .unwrap();
    let metrics = format!("127.0.0.1:{}", free_port());
    let server = serve(
        &dir,
        &[
            "--config",
            conf.to_str().unwrap(),
            "--requirepass",
            "s3cret",
            "--maxmemory",
            // used_memory is the allocator's count: about 1 MB before any key, as in Redis.
            "8mb",
            "--metrics-addr",
            &metrics,
            "--bloom-memory-usage-limit",
            "1mb",
        ],
    );
    // Not `server.conn()`, which would authenticate.
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port))
        .unwrap()
        .get_connection()
        .unwrap();
    assert_eq!(
        error_of(&mut c, "BF.ADD k x"),
        "NOAUTH Authentication required."
    );
    assert_eq!(
        error_of(&mut c, "AUTH fromfile"),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
    assert_eq!(cmd(&mut c, "AUTH s3cret"), Value::Okay);
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("bf-error-rate")
        .query(&mut c)
        .unwrap();
    assert_eq!(got[1], "0.05");
    // A reservation past maxmemory is refused before allocating.
    assert_eq!(
        error_of(&mut c, "BF.RESERVE huge 0.001 10000000"),
        "OOM command not allowed when used memory > 'maxmemory'."
    );
    // Under maxmemory but over the per-key cap.
    let cap: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("bloom-memory-usage-limit")
        .query(&mut c)
        .unwrap();
    assert_eq!(cap[1], "1048576");
    assert_eq!(
        error_of(&mut c, "BF.RESERVE mid 0.001 1000000"),
        "ERR operation exceeds bloom object memory limit"
    );
    assert_eq!(cmd(&mut c, "BF.ADD k x"), int(1));
    let mut http = TcpStream::connect(&metrics).unwrap();
    http.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    http.read_to_string(&mut body).unwrap();
    assert!(
        body.contains("bloomgate_commands_total{cmd=\"bf.add\"}"),
        "{body}"
    );
    assert!(body.contains("bloomgate_bloom_estimated_fpr_max"));
    drop(server);

    // Environment variables configure the server too.
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_bloomgate"))
        .arg("serve")
        .env("BLOOMGATE_PORT", port.to_string())
        .env("BLOOMGATE_DIR", dir.join("env"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut ok = false;
    while Instant::now() < deadline && !ok {
        ok = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|c| c.get_connection())
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
            .is_ok_and(|p| p == "PONG");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(ok, "server configured by environment did not answer");

    // Non-loopback bind without a password is refused (protected mode).
    let out = Command::new(env!("CARGO_BIN_EXE_bloomgate"))
        .args([
            "serve",
            "--bind",
            "0.0.0.0",
            "--port",
            &free_port().to_string(),
            "--dir",
        ])
        .arg(dir.join("open"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("protected mode"));
}

/// The gate's remote-filter mode end to end: `bloomgate demo feed --filters resp://` keeps its
/// per-user filters in a real `bloomgate serve` and never shows a seen item.
#[test]
fn demo_feed_with_remote_filters_on_the_server_shows_no_duplicates() {
    let dir = temp_dir("demo-remote");
    let server = serve(&dir, &[]);
    let out = Command::new(env!("CARGO_BIN_EXE_bloomgate"))
        .args([
            "demo",
            "feed",
            "--users",
            "40",
            "--history",
            "60",
            "--requests",
            "400",
        ])
        .args(["--concurrency", "2", "--json", "--filters"])
        .arg(format!("resp://127.0.0.1:{}?pending=local", server.port))
        .arg("--store")
        .arg(format!("sqlite:{}", dir.join("history.db").display()))
        .succeed();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    for mode in ["exact", "verify", "trust"] {
        let m = &report["modes"][mode];
        assert_eq!(m["duplicates_shown"], 0, "{mode}: {m}");
        assert_eq!(m["requests"], 400, "{mode}: {m}");
    }
    let verify = report["modes"]["verify"]["exact_lookups_per_request"]
        .as_f64()
        .unwrap();
    assert!(
        verify < 24.0,
        "verify sent {verify} of 120 candidates to the exact path"
    );
    let mut c = server.conn();
    assert!(matches!(cmd(&mut c, "DBSIZE"), Value::Int(n) if n > 0));
    server.shutdown();
}
