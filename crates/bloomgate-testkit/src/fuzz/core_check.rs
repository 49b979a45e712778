//! The `core_reader` fuzz check, shared with the regression tests in
//! `crates/bloomgate/tests/fuzz_regressions.rs`.
//!
//! Files are user-supplied: `AnyFilter::from_bytes` and `AnyFilter::read_from` must agree on
//! accepting an image, an accepted image must re-encode to the same bytes, and a decoded filter
//! must answer queries (and, for fixed-size kinds, take inserts and removes) without panicking.
//! Random bytes rarely pass the header and file checksums, so every input is also tried with its
//! envelope repaired (body length and both checksums recomputed), which lets the fuzzer reach
//! each kind's body decoder.

use bloomgate::any::AnyFilter;
use bloomgate::codec::{CHECKSUM_LEN, HEADER_LEN};
use xxhash_rust::xxh3::xxh3_64;

/// Keys queried, inserted and removed on every decoded filter.
const KEYS: [&[u8]; 5] = [
    b"",
    b"a",
    b"user:42",
    b"\xff\x00\xfe",
    b"0123456789abcdef0123",
];

/// What the two readers made of an image.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Rejected by both, with `from_bytes`' error message.
    Rejected(String),
    /// Accepted by both (the filter kind's name).
    Accepted(&'static str),
}

/// `data` with the body length, the header checksum and the file checksum recomputed (the magic,
/// version, kind, hash id, seed and body are the fuzzer's); `None` if too short for an envelope.
pub fn repair_envelope(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < HEADER_LEN + CHECKSUM_LEN {
        return None;
    }
    let mut image = data.to_vec();
    let body_len = (data.len() - HEADER_LEN - CHECKSUM_LEN) as u64;
    image[20..28].copy_from_slice(&body_len.to_le_bytes());
    let header_check = xxh3_64(&image[..28]) as u32;
    image[28..32].copy_from_slice(&header_check.to_le_bytes());
    let split = image.len() - CHECKSUM_LEN;
    let checksum = xxh3_64(&image[..split]);
    image[split..].copy_from_slice(&checksum.to_le_bytes());
    Some(image)
}

/// Runs both readers on one image and exercises what they accept.
pub fn check_image(image: &[u8]) -> Verdict {
    let parsed = AnyFilter::from_bytes(image);
    let streamed = AnyFilter::read_from(image);
    match (parsed, streamed) {
        (Err(e), Err(_)) => Verdict::Rejected(e.to_string()),
        (Ok(filter), Ok(other)) => {
            assert_eq!(filter.kind(), other.kind());
            assert!(
                filter.to_bytes() == image,
                "accepted image does not re-encode"
            );
            assert!(
                other.to_bytes() == image,
                "streamed image does not re-encode"
            );
            exercise(filter)
        }
        (Ok(f), Err(e)) => panic!("from_bytes accepted a {:?}, read_from said {e}", f.kind()),
        (Err(e), Ok(f)) => panic!("read_from accepted a {:?}, from_bytes said {e}", f.kind()),
    }
}

/// Queries, info, and for fixed-size kinds inserts and removes; none may panic.
fn exercise(mut filter: AnyFilter) -> Verdict {
    let name = filter.kind().name();
    for key in KEYS {
        filter.contains(key);
    }
    let _ = (filter.len(), filter.memory_bytes(), filter.estimated_fpr());
    let _ = filter.info();
    // Every accepted insert must be visible at once (no false negatives on a loaded filter).
    for key in KEYS {
        let inserted = match &mut filter {
            AnyFilter::Classic(f) => {
                f.insert(key);
                true
            }
            AnyFilter::Blocked(f) => {
                f.insert(key);
                true
            }
            AnyFilter::FastLocal(f) => {
                f.insert(key);
                true
            }
            AnyFilter::Counting(f) => {
                f.insert(key);
                true
            }
            AnyFilter::Cuckoo(f) => {
                let _ = f.count(key);
                f.insert(key).is_ok()
            }
            AnyFilter::Windowed(f) => {
                let now = f.newest_started_ms();
                f.insert(key, now);
                true
            }
            // Growth allocates the next link of the stored schedule, which the file does not
            // hold: a small file may legitimately describe a huge next link.
            AnyFilter::Scalable(_) => false,
        };
        assert!(
            !inserted || filter.contains(key),
            "{name}: inserted key not found"
        );
    }
    for key in KEYS {
        let _ = filter.remove(key);
    }
    let _ = filter.info();
    Verdict::Accepted(name)
}

/// The whole check: the input as given, then with its envelope repaired. Returns both verdicts.
pub fn check(data: &[u8]) -> (Verdict, Option<Verdict>) {
    let raw = check_image(data);
    let repaired = repair_envelope(data).map(|image| check_image(&image));
    (raw, repaired)
}
