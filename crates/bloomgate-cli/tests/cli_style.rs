//! The CLI's surface every user meets first: `--version` everywhere, one error style (one line
//! on stderr starting with `bloomgate: `) with the exit statuses docs/cli.md documents (1: the
//! command failed, 2: the command line is wrong), and serve's start banner.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bloomgate"))
        .args(args)
        .output()
        .expect("run bloomgate")
}

fn one_error_line(output: &Output, code: i32) -> String {
    let err = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(code), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "stderr: {err}");
    assert!(err.starts_with("bloomgate: "), "stderr: {err}");
    assert!(!err.contains("panicked"), "stderr: {err}");
    assert!(output.stdout.is_empty());
    err
}

#[test]
fn version_is_printed_by_the_binary_and_every_subcommand() {
    let want = format!("bloomgate {}", env!("CARGO_PKG_VERSION"));
    for args in [
        &["--version"][..],
        &["-V"],
        &["serve", "--version"],
        &["calc", "--version"],
    ] {
        let out = run(args);
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.trim_end().ends_with(env!("CARGO_PKG_VERSION")),
            "{args:?}: {text}"
        );
        assert!(text.starts_with("bloomgate"), "{args:?}: {text}");
    }
    assert_eq!(
        String::from_utf8_lossy(&run(&["--version"]).stdout).trim(),
        want
    );
}

#[test]
fn usage_errors_are_one_line_with_exit_status_2() {
    let err = one_error_line(&run(&["query", "--colour", "f.bgf", "x"]), 2);
    assert!(err.contains("--colour"), "{err}");
    assert!(err.contains("see bloomgate query --help"), "{err}");
    let err = one_error_line(&run(&["frobnicate"]), 2);
    assert!(err.contains("frobnicate"), "{err}");
    one_error_line(&run(&[]), 2);
    one_error_line(&run(&["calc", "--items", "ten"]), 2);
    one_error_line(&run(&["serve", "--appendfsync", "sometimes"]), 2);
    // --help is not an error.
    assert!(run(&["query", "--help"]).status.success());
}

#[test]
fn failures_are_one_line_with_exit_status_1_naming_the_file() {
    let err = one_error_line(&run(&["info", "/nonexistent/users.bgf"]), 1);
    assert!(err.contains("/nonexistent/users.bgf"), "{err}");
    let err = one_error_line(
        &run(&["serve", "--config", "/nonexistent/bloomgate.conf"]),
        1,
    );
    assert!(err.contains("/nonexistent/bloomgate.conf"), "{err}");
}

#[test]
fn serve_prints_its_banner_at_start() {
    let dir = bloomgate_testkit::temp_dir("banner");
    let port = bloomgate_testkit::free_port();
    let metrics = bloomgate_testkit::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_bloomgate"))
        .args([
            "serve",
            "--port",
            &port.to_string(),
            "--appendfsync",
            "always",
        ])
        .args([
            "--maxmemory",
            "64mb",
            "--metrics-addr",
            &metrics.to_string(),
        ])
        .arg("--dir")
        .arg(&dir)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start serve");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    // Warnings (a lowered maxclients) may come first; the banner precedes loading.
    let banner = lines
        .by_ref()
        .take(10)
        .map(|l| l.expect("utf-8"))
        .find(|l| l.contains("serving on"))
        .expect("a banner line");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    for want in [
        format!("bloomgate {}", env!("CARGO_PKG_VERSION")),
        format!("127.0.0.1:{port}"),
        format!("port {port}"),
        "bind 127.0.0.1".to_string(),
        format!("data dir {}", dir.display()),
        "appendfsync always".to_string(),
        format!("maxmemory {} bytes", 64 * 1024 * 1024),
        format!("metrics http://127.0.0.1:{metrics}/metrics"),
    ] {
        assert!(banner.contains(&want), "{want:?} not in {banner:?}");
    }
}
