//! End-to-end tests of the offline commands (`calc`, `build`, `query`, `info`) through the real
//! binary, as a user runs them: files on disk, stdin, exit codes and one-line errors.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bloomgate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bloomgate"))
}

fn run(args: &[&str]) -> Output {
    bloomgate().args(args).output().expect("run bloomgate")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A failed command: non-zero exit, exactly one line on stderr, no panic message.
fn assert_clean_failure(output: &Output) {
    assert!(!output.status.success(), "expected failure");
    let err = stderr(output);
    assert!(!err.contains("panicked"), "panic: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "stderr: {err}");
}

fn json(output: &Output) -> serde_json::Value {
    assert!(output.status.success(), "stderr: {}", stderr(output));
    serde_json::from_str(stdout(output).trim()).expect("one JSON object")
}

/// `bloomgate build --input KEYS --output FILTER OPTIONS...`.
fn build(keys: &Path, filter: &Path, options: &[&str]) -> Output {
    let mut args = vec![
        "build",
        "--input",
        keys.to_str().unwrap(),
        "--output",
        filter.to_str().unwrap(),
    ];
    args.extend_from_slice(options);
    run(&args)
}

/// `bloomgate info FILTER --json`, which must succeed.
fn info(filter: &Path) -> serde_json::Value {
    json(&run(&["info", filter.to_str().unwrap(), "--json"]))
}

/// `bloomgate query FILTER --input KEYS --count`, which must succeed.
fn count(filter: &Path, keys: &Path) -> serde_json::Value {
    json(&run(&[
        "query",
        filter.to_str().unwrap(),
        "--input",
        keys.to_str().unwrap(),
        "--count",
    ]))
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("bloomgate-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write_keys(path: &Path, prefix: &str, count: usize) {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..count {
        writeln!(file, "{prefix}{i}").unwrap();
    }
}

#[test]
fn calc_solves_any_sufficient_subset() {
    let value = json(&run(&[
        "calc", "--items", "100M", "--fpr", "0.01", "--json",
    ]));
    assert_eq!(value["bits"], 958_505_856u64);
    assert_eq!(value["hashes"], 7);
    // The primer's headline: 100M usernames at 1% in about 120 MB.
    assert!(value["bytes"].as_u64().unwrap() <= 120_000_000);
    let fpr = value["fpr"].as_f64().unwrap();
    assert!((fpr - 0.01).abs() < 0.0002, "{fpr}");

    let value = json(&run(&[
        "calc", "--bits", "64MiB", "--fpr", "1/1000", "--json",
    ]));
    assert_eq!(value["bits"], 64u64 * 1024 * 1024 * 8);
    assert!(value["fpr"].as_f64().unwrap() <= 0.001);
    assert!(value["items"].as_u64().unwrap() > 30_000_000);

    let value = json(&run(&[
        "calc", "--items", "1e6", "--bits", "10000000", "--hashes", "3", "--json",
    ]));
    assert_eq!(value["hashes"], 3);

    let value = json(&run(&[
        "calc", "--items", "1000000", "--fpr", "0.01", "--layout", "blocked", "--json",
    ]));
    assert_eq!(value["bits"].as_u64().unwrap() % 512, 0);
    assert!(value["fpr"].as_f64().unwrap() <= 0.01);

    let text = stdout(&run(&["calc", "--items", "1000", "--fpr", "0.01"]));
    assert!(text.contains("1 in 100"), "{text}");
}

#[test]
fn calc_rejects_absurd_parameters_cleanly() {
    for args in [
        &["calc", "--items", "0", "--fpr", "0.01"][..],
        &["calc", "--items", "10", "--fpr", "1"],
        &["calc", "--items", "10", "--fpr", "0"],
        &["calc", "--items", "10", "--fpr", "NaN"],
        &["calc", "--items", "10"],
        &["calc", "--bits", "1TiB", "--items", "10", "--hashes", "0"],
        &["calc", "--items", "1e30", "--fpr", "0.01"],
        &["calc", "--items", "1000000000000000", "--fpr", "1e-300"],
    ] {
        let output = run(args);
        assert!(!output.status.success(), "{args:?} succeeded");
        assert!(!stderr(&output).contains("panicked"), "{args:?}");
    }
}

/// `build --items 100G` (117 GB at 1%) used to reserve it all and stall or abort the machine:
/// now it fails in one line (exit 1) naming the size and what to lower, before allocating.
/// `calc` prints the numbers, then fails the same way for a size this machine cannot hold.
#[test]
fn sizes_beyond_this_machine_fail_in_one_line() {
    let dir = TempDir::new("too-big");
    let keys = dir.path("keys.txt");
    write_keys(&keys, "k", 10);
    for kind in ["classic", "blocked", "counting", "cuckoo"] {
        let output = build(
            &keys,
            &dir.path("f.bloom"),
            &["--items", "100G", "--fpr", "0.01", "--kind", kind],
        );
        assert_clean_failure(&output);
        assert_eq!(output.status.code(), Some(1));
        let err = stderr(&output);
        assert!(
            err.contains("needs ") && err.contains(" GB, more than the "),
            "{err}"
        );
        assert!(err.contains("lower --items or raise --fpr"), "{err}");
        assert!(!dir.path("f.bloom").exists());
    }
    let output = run(&["calc", "--items", "100G", "--fpr", "0.01"]);
    assert_clean_failure(&output);
    assert!(
        stdout(&output).contains("memory"),
        "the numbers are still printed"
    );
    assert!(
        stderr(&output).contains("lower --items"),
        "{}",
        stderr(&output)
    );
}

/// The README's walk-through: build from a file, query present and absent keys, inspect.
#[test]
fn build_query_info_round_trip_for_every_kind() {
    let dir = TempDir::new("kinds");
    let keys = dir.path("keys.txt");
    let absent = dir.path("absent.txt");
    write_keys(&keys, "user-", 100_000);
    write_keys(&absent, "stranger-", 100_000);
    for kind in [
        "classic",
        "blocked",
        "fastlocal",
        "counting",
        "scalable",
        "cuckoo",
    ] {
        let filter = dir.path(&format!("{kind}.bgf"));
        let output = build(&keys, &filter, &["--fpr", "0.01", "--kind", kind]);
        assert!(output.status.success(), "{kind}: {}", stderr(&output));

        let hits = count(&filter, &keys);
        assert_eq!(hits["queried"], 100_000, "{kind}");
        assert_eq!(hits["present"], 100_000, "{kind}: false negatives");

        let misses = count(&filter, &absent);
        // 1% of 100k = 1000 expected; 4σ ≈ 126. Scalable and cuckoo stay at or below target.
        let fp = misses["present"].as_u64().unwrap();
        assert!(fp <= 1130, "{kind}: {fp} false positives out of 100000");

        let info = info(&filter);
        assert_eq!(info["kind"], kind);
        assert!(info["bytes"].as_u64().unwrap() > 0);
        assert!(
            info["estimated_fpr"].as_f64().unwrap() < 0.02,
            "{kind}: {info}"
        );
    }
    let info = info(&dir.path("classic.bgf"));
    for key in [
        "kind",
        "bits",
        "hashes",
        "items",
        "bytes",
        "fill_ratio",
        "estimated_items",
        "estimated_fpr",
    ] {
        assert!(info.get(key).is_some(), "info lacks {key}: {info}");
    }
    let estimated = info["estimated_items"].as_f64().unwrap();
    assert!((estimated - 100_000.0).abs() < 2_000.0, "{estimated}");
}

#[test]
fn query_prints_one_line_per_key_and_reads_stdin() {
    let dir = TempDir::new("stdin");
    let filter = dir.path("f.bgf");
    let mut child = bloomgate()
        .args([
            "build",
            "--input",
            "-",
            "--output",
            filter.to_str().unwrap(),
            "--fpr",
            "1e-6",
        ])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"alpha\nbeta\ngamma")
        .unwrap();
    assert!(child.wait_with_output().unwrap().status.success());

    let output = run(&["query", filter.to_str().unwrap(), "alpha", "gamma", "delta"]);
    assert_eq!(
        stdout(&output),
        "alpha\tpresent\ngamma\tpresent\ndelta\tabsent\n"
    );

    assert_eq!(info(&filter)["items"], 3);
}

#[test]
fn explicit_bits_and_hashes_are_honoured() {
    let dir = TempDir::new("explicit");
    let keys = dir.path("keys.txt");
    write_keys(&keys, "k", 1000);
    let filter = dir.path("f.bgf");
    let output = build(
        &keys,
        &filter,
        &["--bits", "1KiB", "--hashes", "3", "--seed", "7"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let info = info(&filter);
    assert_eq!(info["bits"], 8192);
    assert_eq!(info["hashes"], 3);
    assert_eq!(info["seed"], 7);
}

#[test]
fn corrupt_truncated_and_missing_files_fail_cleanly() {
    let dir = TempDir::new("corrupt");
    let keys = dir.path("keys.txt");
    write_keys(&keys, "k", 500);
    let good = dir.path("good.bgf");
    assert!(build(&keys, &good, &["--fpr", "0.01"]).status.success());
    let bytes = std::fs::read(&good).unwrap();
    let bad = dir.path("bad.bgf");
    // A sample of offsets keeps the test fast; the library tests cover every offset.
    for cut in (0..bytes.len()).step_by(97) {
        std::fs::write(&bad, &bytes[..cut]).unwrap();
        assert_clean_failure(&run(&["info", bad.to_str().unwrap()]));
    }
    for at in (0..bytes.len()).step_by(61) {
        let mut flipped = bytes.clone();
        flipped[at] ^= 0x10;
        std::fs::write(&bad, &flipped).unwrap();
        assert_clean_failure(&run(&["query", bad.to_str().unwrap(), "k1"]));
    }
    assert_clean_failure(&run(&["info", dir.path("missing.bgf").to_str().unwrap()]));
    assert_clean_failure(&run(&["query", good.to_str().unwrap()]));
    assert_clean_failure(&build(&dir.path("nope.txt"), &bad, &["--fpr", "0.01"]));
}
