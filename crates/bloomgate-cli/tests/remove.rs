//! `bloomgate remove` end to end: all-or-nothing batches, kinds that cannot remove, stdin input.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use bloomgate::codec::FilterCodec;
use bloomgate::{BloomFilter, CountingBloomFilter, CuckooFilter};

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bloomgate-remove-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn bloomgate(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bloomgate"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn counting_file(dir: &Path, keys: &[&str]) -> PathBuf {
    let mut filter = CountingBloomFilter::new(1000, 0.001).unwrap();
    for key in keys {
        filter.insert(key);
    }
    let path = dir.join("counting.bgf");
    std::fs::write(&path, filter.to_bytes()).unwrap();
    path
}

#[test]
fn removes_a_batch_and_rewrites_the_file() {
    let dir = scratch("batch");
    let path = counting_file(&dir, &["apple", "banana", "cherry", "banana"]);
    let out = bloomgate(
        &["remove", path_str(&path), "banana", "cherry", "banana"],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"{"items":1,"removed":3}"#
    );
    let filter = CountingBloomFilter::from_bytes(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(filter.len(), 1);
    assert!(filter.contains("apple"));
    assert!(!filter.contains("banana") && !filter.contains("cherry"));
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "temp file left behind"
    );
}

#[test]
fn a_batch_with_an_absent_key_changes_nothing_and_names_the_key() {
    let dir = scratch("absent");
    let path = counting_file(&dir, &["apple", "banana"]);
    let before = std::fs::read(&path).unwrap();
    for batch in [&["apple", "durian", "banana"][..], &["apple", "apple"][..]] {
        let mut args = vec!["remove", path_str(&path)];
        args.extend_from_slice(batch);
        let out = bloomgate(&args, b"");
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        let culprit = if batch.contains(&"durian") {
            "durian"
        } else {
            "apple"
        };
        assert!(stderr.contains(&format!("\"{culprit}\"")), "{stderr}");
        assert!(stderr.contains("nothing was removed"), "{stderr}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "file changed by a failed batch"
        );
    }
}

#[test]
fn cuckoo_keys_come_from_stdin() {
    let dir = scratch("cuckoo");
    let mut filter = CuckooFilter::new(1000, 0.001).unwrap();
    for key in ["a", "b", "c"] {
        filter.insert(key).unwrap();
    }
    let path = dir.join("cuckoo.bgf");
    std::fs::write(&path, filter.to_bytes()).unwrap();
    let out = bloomgate(&["remove", path_str(&path), "--input", "-"], b"a\nc\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let filter = CuckooFilter::from_bytes(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(filter.len(), 1);
    assert!(filter.contains("b") && !filter.contains("a") && !filter.contains("c"));
}

#[test]
fn kinds_that_cannot_remove_are_refused_clearly() {
    let dir = scratch("classic");
    let mut filter = BloomFilter::new(100, 0.01).unwrap();
    filter.insert("a");
    let path = dir.join("classic.bgf");
    let bytes = filter.to_bytes();
    std::fs::write(&path, &bytes).unwrap();
    let out = bloomgate(&["remove", path_str(&path), "a"], b"");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("classic filter, which cannot remove keys"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), bytes);

    let out = bloomgate(&["remove", path_str(&path)], b"");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no keys"));
}
