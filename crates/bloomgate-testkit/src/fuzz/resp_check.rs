//! The `resp_parser` fuzz check, shared with the regression tests in
//! `crates/bloomgate-server/tests/fuzz_regressions.rs`, so a kept crasher replays through
//! exactly the code the fuzzer ran.
//!
//! The request parser is incremental: bytes arrive in arbitrary pieces. The check parses the
//! same bytes whole, at fuzzer-chosen cut points and (for small inputs) one byte at a time, and
//! insists all three give the same commands and the same protocol error.

use bloomgate_server::resp::{ProtocolError, RequestParser};

/// At most this many cut points are taken from the input's prefix.
pub const MAX_CUTS: usize = 16;
/// Inputs up to this size are also fed one byte at a time (quadratic in the line length).
pub const BYTEWISE_MAX: usize = 4096;

/// What one parse produced: the commands in order, then the error that stopped it, if any.
#[derive(Debug, Default, PartialEq)]
pub struct Parsed {
    /// Each command's arguments.
    pub commands: Vec<Vec<Vec<u8>>>,
    /// The protocol error that stopped the parse, if one did.
    pub error: Option<ProtocolError>,
}

/// Splits a fuzz input into cut points and the wire bytes: byte 0 gives the number of cuts
/// (mod `MAX_CUTS + 1`), then a little-endian `u32` per cut (an offset, taken modulo the payload
/// length + 1); everything after is the payload.
pub fn decode(data: &[u8]) -> (Vec<usize>, &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return (Vec::new(), data);
    };
    let cuts = usize::from(first) % (MAX_CUTS + 1);
    let header = (cuts * 4).min(rest.len());
    let (raw, payload) = rest.split_at(header);
    let mut offsets: Vec<usize> = raw
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize % (payload.len() + 1))
        .collect();
    offsets.sort_unstable();
    offsets.dedup();
    (offsets, payload)
}

/// Feeds `payload` to a fresh parser in pieces ending at each of the sorted `cuts` (and at the
/// end), draining complete commands after every piece; stops at the first protocol error.
pub fn parse_in_pieces(payload: &[u8], cuts: &[usize]) -> Parsed {
    let mut parser = RequestParser::default();
    let mut out = Parsed::default();
    let mut start = 0;
    for &end in cuts.iter().chain(std::iter::once(&payload.len())) {
        parser.extend(&payload[start..end]);
        start = end;
        loop {
            match parser.next_command() {
                Ok(Some(command)) => out.commands.push(command),
                Ok(None) => break,
                Err(e) => {
                    out.error = Some(e);
                    return out;
                }
            }
        }
        assert!(
            parser.buffered() <= payload.len(),
            "parser holds more bytes than it was given"
        );
    }
    out
}

/// The whole check; returns the parse of the payload in one piece.
pub fn check(data: &[u8]) -> Parsed {
    let (cuts, payload) = decode(data);
    let whole = parse_in_pieces(payload, &[]);
    // Arguments are copies of payload bytes (inline escapes only shrink them): a parse can
    // never hold more than it was given.
    let held: usize = whole.commands.iter().flatten().map(Vec::len).sum();
    assert!(
        held <= payload.len(),
        "{held} argument bytes from {}",
        payload.len()
    );
    assert!(
        whole.commands.iter().all(|c| !c.is_empty()),
        "an empty command was returned"
    );
    let pieces = parse_in_pieces(payload, &cuts);
    assert_eq!(whole, pieces, "cut at {cuts:?}: different parse");
    if payload.len() <= BYTEWISE_MAX {
        let every: Vec<usize> = (1..payload.len()).collect();
        let bytewise = parse_in_pieces(payload, &every);
        assert_eq!(whole, bytewise, "byte-at-a-time: different parse");
    }
    whole
}
