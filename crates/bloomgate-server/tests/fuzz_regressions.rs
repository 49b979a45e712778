//! Replays what the `resp_parser`, `bf_loadchunk` and `cf_loadchunk` fuzz targets in `fuzz/`
//! found, through the very checks those targets run (`bloomgate_testkit::fuzz`), so a
//! fixed crash stays fixed on stable Rust without cargo-fuzz. Inputs are the minimised crashers
//! in `tests/fuzz_regressions/<target>-<name>.bin`; one too big to keep is built here.

use bloomgate_testkit::fuzz::{command_script, resp_check};

use bloomgate_server::resp::{ProtocolError, Reply, MAX_INLINE_LEN};
use command_script::{check, Family};

fn input(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fuzz_regressions/{name}.bin",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Replies to the script's LOADCHUNK commands on key `k`, in order.
fn loadchunk_replies(client: &command_script::Client, command: &str) -> Vec<Reply> {
    client
        .transcript
        .iter()
        .filter(|(args, _)| args[0] == command.as_bytes() && args[1] == b"k")
        .map(|(_, reply)| reply.clone())
        .collect()
}

fn bad_data() -> Reply {
    Reply::error("ERR received bad data")
}

/// Four links whose capacities sum past u64::MAX: BF.INFO panicked adding them up. The header
/// is now refused (Σ capacity must fit the i64 BF.INFO replies with).
#[test]
fn bf_capacity_sum_overflow() {
    let client = check(Family::Bloom, &input("bf_loadchunk-capacity-overflow"));
    assert_eq!(loadchunk_replies(&client, "BF.LOADCHUNK")[0], bad_data());
}

/// Nine links of 2^61 − 8 bytes each: the memory check's Σ bytes overflowed before comparing
/// with maxmemory. Refused as bad data, nothing allocated.
#[test]
fn bf_link_bytes_sum_overflow() {
    let client = check(Family::Bloom, &input("bf_loadchunk-bytes-overflow"));
    assert_eq!(loadchunk_replies(&client, "BF.LOADCHUNK"), vec![bad_data()]);
}

/// bpe 1e300 with hashes = ceil(ln2·bpe) = u32::MAX passed validation, so one BF.ADD set four
/// billion bits (the fuzzer's 10 s timeout). bpe must now match the link's error rate.
#[test]
fn bf_bpe_must_match_error_rate() {
    let client = check(Family::Bloom, &input("bf_loadchunk-huge-hashes"));
    assert_eq!(loadchunk_replies(&client, "BF.LOADCHUNK"), vec![bad_data()]);
}

/// BF.SCANDUMP with iterator i64::MIN overflowed computing the offset; it now answers "done".
#[test]
fn bf_scandump_min_iterator() {
    let client = check(Family::Bloom, &input("bf_loadchunk-scandump-min-iter"));
    assert_eq!(
        loadchunk_replies(&client, "BF.LOADCHUNK"),
        vec![Reply::ok(), bad_data()]
    );
    let min = i64::MIN.to_string();
    let reply = client
        .transcript
        .iter()
        .find(|(args, _)| args[0] == b"BF.SCANDUMP" && args[2] == min.as_bytes())
        .map(|(_, reply)| reply.clone());
    assert_eq!(
        reply,
        Some(Reply::Array(vec![Reply::Int(0), Reply::bulk(Vec::new())]))
    );
}

/// A line longer than the inline limit was accepted when it arrived in one read but refused
/// when a read ended inside it, past the limit: the result depended on how TCP split the
/// bytes. 64 KiB is too big to keep as a file, so the input is built here: one cut just past
/// the limit, then the long line.
#[test]
fn resp_long_line_is_refused_however_split() {
    for (line, error) in [
        (vec![b'a'; MAX_INLINE_LEN + 8], "too big inline request"),
        (
            [b"*1\r\n$".as_slice(), &[b'1'; MAX_INLINE_LEN + 8]].concat(),
            "too big bulk count string",
        ),
    ] {
        let mut data = vec![1u8];
        data.extend_from_slice(&((MAX_INLINE_LEN + 4) as u32).to_le_bytes());
        data.extend_from_slice(&line);
        data.extend_from_slice(b"\r\nPING\r\n");
        let parsed = resp_check::check(&data);
        assert_eq!(parsed.error, Some(ProtocolError(error.into())));
    }
    // Exactly at the limit is still a line.
    let mut data = vec![0u8];
    data.extend_from_slice(&[b'a'; MAX_INLINE_LEN - 1]);
    data.extend_from_slice(b"\r\n");
    let parsed = resp_check::check(&data);
    assert_eq!(parsed.error, None);
    assert_eq!(parsed.commands.len(), 1);
}

/// A CF header is accepted or refused as `Invalid header`; either way the script must finish.
fn cf_replays_without_panic(name: &str) {
    let client = check(Family::Cuckoo, &input(name));
    let header = &loadchunk_replies(&client, "CF.LOADCHUNK")[0];
    assert!(
        *header == Reply::ok() || *header == Reply::error("Invalid header"),
        "{header:?}"
    );
}

/// A CF header with deletes = 2^64 − 6: the sixth CF.DEL overflowed the delete counter (now
/// saturating).
#[test]
fn cf_deletes_counter_overflow() {
    cf_replays_without_panic("cf_loadchunk-deletes-overflow");
}

/// A CF header with items = 0, then a chunk whose one bucket holds every fingerprint: CF.DEL
/// finds the item and underflowed the item counter (now saturating).
#[test]
fn cf_items_counter_underflow() {
    cf_replays_without_panic("cf_loadchunk-items-underflow");
}
