//! The operations kit against real output: every metric serve and the gate expose has `# HELP`
//! and `# TYPE` and passes `promtool check metrics` (Prometheus' own linter: units, `_total`,
//! ...); every metric the Grafana dashboard and the alert rules query is one serve or the gate
//! really exposes; the alert rules pass `promtool check rules`.
//!
//! promtool comes from Debian's `prometheus` package (`.ci/setup` installs it); without it the
//! promtool parts go through `bloomgate_testkit::skip_or_fail` (a failure under CI).

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bloomgate_gate::{FilterMode, Gate, GateConfig, LifecycleConfig, Policy, SqliteStore};
use bloomgate_testkit::{free_port, temp_dir, Process};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\n\r\n").ok()?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).ok()?;
    let (head, body) = reply.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

fn resp(port: u16, commands: &[&[&str]]) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut out = Vec::new();
    for args in commands {
        out.extend(bloomgate_testkit::resp_command(args));
    }
    stream.write_all(&out).unwrap();
    // One reply line per command is enough to know they ran (none of these answers an array).
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut seen = 0;
    let mut buf = [0u8; 4096];
    let mut text = String::new();
    while seen < commands.len() {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "server closed the connection");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
        seen = text.matches("\r\n").count();
    }
    assert!(!text.contains("-ERR"), "{text}");
}

/// serve's /metrics after BF, CF and WF writes and a snapshot.
fn serve_metrics() -> String {
    let dir = temp_dir("operations");
    let metrics = free_port();
    let server = Process::start(
        |port| {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_bloomgate"));
            cmd.args(["serve", "--port", &port.to_string()])
                .args(["--metrics-addr", &metrics.to_string()])
                .arg("--dir")
                .arg(&dir);
            cmd
        },
        None,
        Duration::from_secs(30),
        |_| true,
    )
    .expect("start serve");
    resp(
        server.port,
        &[
            &["BF.RESERVE", "bf", "0.01", "1000"],
            &["BF.MADD", "bf", "a", "b", "c"],
            &["CF.ADD", "cf", "x"],
            &["WF.RESERVE", "wf", "0.01", "100", "60000", "3"],
            &["SAVE"],
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(body) = get(metrics, "/metrics") {
            let _ = std::fs::remove_dir_all(&dir);
            return body;
        }
        assert!(Instant::now() < deadline, "no /metrics from serve");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The gate's exposition after a few verify-mode requests on a real SQLite store.
fn gate_metrics() -> String {
    let dir = temp_dir("operations-gate");
    let store = SqliteStore::open(dir.join("seen.db")).expect("open SQLite store");
    let gate = Gate::new(
        Box::new(store),
        GateConfig::new(
            Policy::Verify,
            FilterMode::Local,
            LifecycleConfig {
                min_items_per_generation: 8,
                memory_budget_bytes: 1 << 20,
                ..LifecycleConfig::new(1_000, 3)
            },
        ),
    )
    .expect("gate");
    gate.record(1, &[1, 2], 10).unwrap();
    gate.unseen(1, &[1, 2, 3], 20).unwrap();
    gate.flush().unwrap();
    gate.unseen(1, &[1, 2, 3], 20).unwrap();
    let text = gate.render_metrics();
    drop(gate);
    let _ = std::fs::remove_dir_all(&dir);
    text
}

/// Families (from `# TYPE` lines) and sample names of an exposition; every family has HELP.
fn families(text: &str) -> BTreeSet<String> {
    let typed: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    let helped: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# HELP "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    assert_eq!(typed, helped, "every family needs # HELP and # TYPE");
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name = line.split(['{', ' ']).next().unwrap();
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| typed.contains(*f)))
            .unwrap_or(name);
        assert!(typed.contains(family), "sample {name} has no # TYPE");
    }
    typed
}

/// Runs promtool with `args`, feeding `input`; None when promtool is not installed.
fn promtool(args: &[&str], input: &str) -> Option<(bool, String)> {
    let mut child = match Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            bloomgate_testkit::skip_or_fail(
                &format!("promtool {args:?}"),
                &format!("promtool is not runnable ({e}; bash .ci/setup installs prometheus)"),
            );
            return None;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Some((out.status.success(), text))
}

/// Metric names an expression or query mentions: `bloomgate_` identifiers, with histogram
/// suffixes folded into their family.
fn queried_names(text: &str, exposed: &BTreeSet<String>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("bloomgate_") {
        let start = i + at;
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        let preceded =
            start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        if !preceded {
            let name = &text[start..end];
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|f| exposed.contains(*f)))
                .unwrap_or(name);
            names.insert(family.to_string());
        }
        i = end;
    }
    names
}

#[test]
fn metrics_dashboard_and_alerts_agree_with_real_output() {
    let serve = serve_metrics();
    let gate = gate_metrics();
    let mut exposed = families(&serve);
    let gate_families = families(&gate);
    assert!(exposed.len() > 15, "{serve}");
    assert!(
        exposed.is_disjoint(&gate_families),
        "serve and the gate must not share metric names"
    );
    exposed.extend(gate_families);
    for (what, text) in [("serve", &serve), ("gate", &gate)] {
        if let Some((ok, out)) = promtool(&["check", "metrics"], text) {
            assert!(
                ok,
                "promtool check metrics on {what}'s output:\n{out}\n{text}"
            );
        }
    }

    let dashboard = std::fs::read_to_string(repo().join("docs/operations/grafana-dashboard.json"))
        .expect("dashboard");
    let json: serde_json::Value = serde_json::from_str(&dashboard).expect("dashboard is JSON");
    let mut exprs = Vec::new();
    fn collect(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    match (k.as_str(), v) {
                        ("expr" | "definition", serde_json::Value::String(s)) => {
                            out.push(s.clone())
                        }
                        _ => collect(v, out),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
            _ => {}
        }
    }
    collect(&json, &mut exprs);
    assert!(exprs.len() > 20, "dashboard queries: {exprs:?}");
    let dashboard_names = queried_names(&exprs.join("\n"), &exposed);
    let missing: Vec<_> = dashboard_names.difference(&exposed).collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries metrics nobody exposes: {missing:?}"
    );
    // Each area the issue lists has a panel.
    for needed in [
        "bloomgate_commands_total",
        "bloomgate_command_duration_seconds",
        "bloomgate_used_memory_bytes",
        "bloomgate_keys",
        "bloomgate_bloom_fill_ratio_mean",
        "bloomgate_bloom_estimated_fpr_max",
        "bloomgate_snapshot_ok",
        "bloomgate_gate_exact_lookups_total",
        "bloomgate_gate_exact_misses_after_maybe_total",
        "bloomgate_gate_store_reads_total",
        "bloomgate_gate_history_loads_total",
    ] {
        assert!(
            dashboard_names.contains(needed),
            "no panel queries {needed}"
        );
    }

    let alerts_path = repo().join("docs/operations/alerts.yml");
    let alerts = std::fs::read_to_string(&alerts_path).expect("alert rules");
    let alert_names = queried_names(&alerts, &exposed);
    let missing: Vec<_> = alert_names.difference(&exposed).collect();
    assert!(
        missing.is_empty(),
        "the alert rules query metrics nobody exposes: {missing:?}"
    );
    let path = alerts_path.to_str().unwrap();
    if let Some((ok, out)) = promtool(&["check", "rules", path], "") {
        assert!(ok, "promtool check rules:\n{out}");
    }
}
