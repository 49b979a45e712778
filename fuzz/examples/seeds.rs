//! Writes seed inputs for every fuzz target into `fuzz/corpus/<target>/` (or the directory given
//! as the first argument): real file images of every filter kind, real BF/CF SCANDUMPs encoded
//! as LOADCHUNK scripts, and RESP requests. The corpus itself is not committed; `scripts/fuzz/fuzz.sh`
//! runs this first. CF seeds are skipped while the server has no CF.* commands.
//!
//! `cargo run --manifest-path fuzz/Cargo.toml --example seeds [DIR]`

use std::path::{Path, PathBuf};

use bloomgate::any::AnyFilter;
use bloomgate::filters::WindowConfig;
use bloomgate::{
    BlockedBloomFilter, BloomFilter, CountingBloomFilter, CuckooFilter, ScalableBloomFilter,
    WindowedBloomFilter,
};
use bloomgate_fuzz::command_script::{seed_from, Client, Family};
use bloomgate_server::resp::Reply;

fn write(dir: &Path, target: &str, name: &str, bytes: &[u8]) {
    let dir = dir.join(target);
    std::fs::create_dir_all(&dir).expect("create corpus dir");
    std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("write seed");
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("key-{i}")).collect()
}

fn core_images() -> Vec<(&'static str, AnyFilter)> {
    let mut classic = BloomFilter::new(100, 0.01).expect("classic");
    let mut blocked = BlockedBloomFilter::new(200, 0.01).expect("blocked");
    let mut counting = CountingBloomFilter::new(50, 0.01).expect("counting");
    let mut cuckoo = CuckooFilter::new(60, 0.01).expect("cuckoo");
    let mut scalable = ScalableBloomFilter::new(8, 0.01).expect("scalable");
    let config = WindowConfig::new(3, 16, 0.01, Some(1000));
    let mut windowed = WindowedBloomFilter::new(config, 0).expect("windowed");
    let untimed = WindowConfig {
        generation_window_ms: None,
        ..config
    };
    let mut windowed_untimed = WindowedBloomFilter::new(untimed, 5).expect("windowed");
    for (i, key) in keys(40).iter().enumerate() {
        classic.insert(key);
        blocked.insert(key);
        counting.insert(key);
        cuckoo.insert(key).expect("room");
        scalable.insert(key).expect("grows");
        windowed.insert(key, i as u64 * 100).expect("grows");
        windowed_untimed.insert(key, 5).expect("grows");
    }
    counting.insert("key-1");
    counting.remove("key-2").expect("present");
    cuckoo.remove("key-3").expect("present");
    vec![
        ("classic", classic.into()),
        (
            "classic-empty",
            BloomFilter::new(1, 0.5).expect("tiny").into(),
        ),
        ("blocked", blocked.into()),
        ("counting", counting.into()),
        ("cuckoo", cuckoo.into()),
        (
            "cuckoo-empty",
            CuckooFilter::new(1, 0.1).expect("tiny").into(),
        ),
        ("scalable", scalable.into()),
        ("windowed", windowed.into()),
        ("windowed-untimed", windowed_untimed.into()),
    ]
}

fn resp_requests() -> Vec<(&'static str, Vec<u8>)> {
    let plain: Vec<(&str, &[u8])> = vec![
        (
            "multibulk",
            b"*3\r\n$6\r\nBF.ADD\r\n$1\r\nk\r\n$5\r\nhello\r\n*1\r\n$4\r\nPING\r\n",
        ),
        (
            "inline",
            b"PING\r\n\r\nset \"a b\\x41\\n\" 'c\\'d'\nBF.EXISTS k x\n",
        ),
        ("unbalanced", b"ECHO \"abc\r\n"),
        ("empty-multibulk", b"*0\r\n*-1\r\n*1\r\n$0\r\n\r\n"),
        ("bad-bulk", b"*2\r\n$4\r\nECHO\r\n$-5\r\n"),
        ("expected-dollar", b"*1\r\n:5\r\n"),
        ("big-declared", b"*2\r\n$4\r\nECHO\r\n$536870912\r\nabc"),
        ("bare-lf", b"*1\n$4\nPING\n"),
    ];
    let mut out: Vec<(&str, Vec<u8>)> = plain
        .into_iter()
        .map(|(name, bytes)| {
            let mut input = vec![0u8];
            input.extend_from_slice(bytes);
            (name, input)
        })
        .collect();
    // Lines around the 64 KiB inline/header limit, whole and cut.
    let mut long_inline = vec![0u8];
    long_inline.extend(std::iter::repeat_n(b'a', 64 * 1024 + 8));
    long_inline.extend_from_slice(b"\r\nPING\r\n");
    out.push(("long-inline", long_inline));
    let mut long_count = vec![1u8, 0, 0x80, 0, 0];
    long_count.extend_from_slice(b"*1\r\n$");
    long_count.extend(std::iter::repeat_n(b'0', 64 * 1024 + 8));
    long_count.extend_from_slice(b"\r\n");
    out.push(("long-count", long_count));
    // Two cuts inside the first command.
    let mut cut = vec![2u8, 3, 0, 0, 0, 9, 0, 0, 0];
    cut.extend_from_slice(b"*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\n");
    out.push(("cut", cut));
    out
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus"));
    for (name, filter) in core_images() {
        write(&dir, "core_reader", name, &filter.to_bytes());
    }
    for (name, bytes) in resp_requests() {
        write(&dir, "resp_parser", name, &bytes);
    }
    let many: Vec<String> = (0..120).map(|i| format!("item{i}")).collect();
    let madd_many = format!("BF.MADD k {}", many.join(" "));
    let bloom: Vec<(&str, Vec<&str>, bool)> = vec![
        ("default", vec!["BF.ADD k a"], false),
        (
            "reserved",
            vec!["BF.RESERVE k 0.01 100", "BF.MADD k a b c"],
            false,
        ),
        (
            "scaled",
            vec!["BF.RESERVE k 0.01 10 EXPANSION 2", &madd_many],
            false,
        ),
        (
            "nonscaling",
            vec!["BF.RESERVE k 0.001 50 NONSCALING", "BF.ADD k x"],
            true,
        ),
    ];
    for (name, setup, resp3) in bloom {
        let seed = seed_from(Family::Bloom, &setup, resp3).expect("BF.* commands exist");
        write(&dir, "bf_loadchunk", name, &seed);
    }
    let cf_many = format!("CF.INSERT k ITEMS {}", many.join(" "));
    let cuckoo: Vec<(&str, Vec<&str>)> = vec![
        ("default", vec!["CF.ADD k a"]),
        (
            "reserved",
            vec!["CF.RESERVE k 100", "CF.ADD k a", "CF.ADD k b", "CF.DEL k a"],
        ),
        (
            "expanded",
            vec!["CF.RESERVE k 8 BUCKETSIZE 2 EXPANSION 2", &cf_many],
        ),
        (
            "bucket4",
            vec!["CF.RESERVE k 64 BUCKETSIZE 4 MAXITERATIONS 5", "CF.ADD k x"],
        ),
    ];
    let mut cf_written = 0;
    for (name, setup) in cuckoo {
        if let Some(seed) = seed_from(Family::Cuckoo, &setup, false) {
            write(&dir, "cf_loadchunk", name, &seed);
            cf_written += 1;
        }
    }
    if cf_written == 0 {
        // Still give the fuzzer the script shape.
        let header = seed_from(Family::Bloom, &["BF.ADD k a"], false).expect("BF");
        write(&dir, "cf_loadchunk", "shape", &header);
        eprintln!("CF.* not available: wrote only a shape seed for cf_loadchunk");
    }
    // rdb_payload: real DUMP payloads and SCANDUMP headers of every type.
    let values: [(&str, &[&str]); 5] = [
        ("bf", &["BF.RESERVE k 0.01 10 EXPANSION 2", &madd_many]),
        ("bf-nonscaling", &["BF.RESERVE k 0.001 50 NONSCALING", "BF.ADD k a"]),
        ("cf", &["CF.RESERVE k 8 BUCKETSIZE 2 EXPANSION 2", &cf_many]),
        (
            "wf",
            &[
                "WF.RESERVE k 0.01 10 1000 3",
                "WF.INSERT k AT 1000 ITEMS a b c",
                "WF.INSERT k AT 2000 ITEMS d e f",
            ],
        ),
        ("cbf", &["CBF.RESERVE k 0.01 100 BITS 8", "CBF.MADD k a b c a"]),
    ];
    for (name, setup) in values {
        let mut client = Client::new(false);
        for line in setup {
            client.line(line);
        }
        if let Reply::Bulk(payload) = client.line("DUMP k") {
            write(&dir, "rdb_payload", &format!("dump-{name}"), &payload);
        }
        let family = name.split('-').next().expect("a name").to_uppercase();
        let scandump = format!("{family}.SCANDUMP k 0");
        if let Reply::Array(items) = client.line(&scandump) {
            if let Some(Reply::Bulk(header)) = items.get(1) {
                write(&dir, "rdb_payload", &format!("header-{name}"), header);
            }
        }
    }
    eprintln!("seeds written to {}", dir.display());
}
