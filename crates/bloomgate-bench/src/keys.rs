//! Deterministic benchmark keys: 16 random bytes per key, computed from (stream, index) so that any
//! slice of a key set can be regenerated on the fly in fixed-size chunks (a 1B-key set never has
//! to sit in memory) and every contender sees exactly the same keys. Also username-like keys of
//! varied length for the "100M usernames" headline.

/// One benchmark key: 16 bytes, like a UUID or a hashed username.
pub type Key = [u8; 16];

/// Keys generated per chunk when a key set is streamed (16 MiB of keys).
pub const CHUNK: usize = 1 << 20;

/// Which key population: keys that are inserted, or keys that never are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Keys that are inserted.
    Present = 0,
    /// Keys that never are (the FPR and miss-query keys).
    Absent = 1,
}

/// SplitMix64 finaliser: a bijection on u64 with full avalanche.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Key number `index` of `stream`. The low bit of byte 0 is the stream tag, so present and absent
/// keys are disjoint by construction (not just with high probability).
pub fn key(stream: Stream, index: u64) -> Key {
    let a = mix(index.wrapping_mul(2) | stream as u64);
    let b = mix(a ^ 0xD1B5_4A32_D192_ED03);
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&a.to_le_bytes());
    out[8..].copy_from_slice(&b.to_le_bytes());
    out[0] = (out[0] & !1) | stream as u8;
    out
}

/// Keys `start..start + len` of `stream`, materialised.
pub fn keys(stream: Stream, start: u64, len: usize) -> Vec<Key> {
    (start..start + len as u64)
        .map(|i| key(stream, i))
        .collect()
}

/// Calls `f` on consecutive chunks of at most [`CHUNK`] keys covering `range` of `stream`, reusing
/// one buffer: the caller times only its own work inside `f`.
pub fn for_each_chunk(stream: Stream, range: std::ops::Range<u64>, mut f: impl FnMut(&[Key])) {
    let mut buf = Vec::with_capacity(CHUNK);
    let mut next = range.start;
    while next < range.end {
        let len = (range.end - next).min(CHUNK as u64);
        buf.clear();
        buf.extend((next..next + len).map(|i| key(stream, i)));
        f(&buf);
        next += len;
    }
}

/// A sample of `len` present keys drawn at random indices below `items` (for hit queries on a
/// filter too large to keep its whole key set in memory).
pub fn present_sample(items: u64, len: usize) -> Vec<Key> {
    if items as usize <= len {
        return keys(Stream::Present, 0, items as usize);
    }
    (0..len as u64)
        .map(|j| key(Stream::Present, sample_index(j, items)))
        .collect()
}

/// Index `j` of a random sample of indices below `items`.
fn sample_index(j: u64, items: u64) -> u64 {
    ((mix(j ^ 0x5EED) as u128 * items as u128) >> 64) as u64
}

/// Name parts of [`Username`]: none ends in a digit, `_` or `.`.
const NAME_WORDS: [&str; 16] = [
    "user",
    "anna",
    "dev",
    "mike_t",
    "sarah",
    "the_real_bob",
    "kim",
    "alexander",
    "jo",
    "zed",
    "maria.l",
    "pixel_cat",
    "tom",
    "night_owl",
    "li",
    "gamer",
];
/// Separators between the name part and the number.
const NAME_SEPS: [&str; 3] = ["_", ".", ""];

/// A username-like key, e.g. `user_1234`, `anna.86`, `night_owl2468` (3–33 bytes; up to 22 below index 10^8), stored inline
/// so that chunks of them cost no allocation. Unique per (stream, index): the number at the end is
/// `2 × index + stream`, and no name part or separator ends in a digit, so the number (hence the
/// stream and index) can be read back from the string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Username {
    len: u8,
    bytes: [u8; 39],
}

impl Username {
    /// The username of key `index` of `stream`.
    pub fn new(stream: Stream, index: u64) -> Username {
        let pick = mix(index ^ 0x05E5_A11E);
        let word = NAME_WORDS[(pick % 16) as usize];
        let sep = NAME_SEPS[((pick >> 8) % 3) as usize];
        let mut name = Username {
            len: 0,
            bytes: [0; 39],
        };
        let mut push = |part: &[u8]| {
            let at = name.len as usize;
            name.bytes[at..at + part.len()].copy_from_slice(part);
            name.len += part.len() as u8;
        };
        push(word.as_bytes());
        push(sep.as_bytes());
        let number = index * 2 + stream as u64;
        push(itoa::Buffer::new().format(number).as_bytes());
        name
    }
}

impl AsRef<[u8]> for Username {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// Usernames at `len` random indices below `items` (as [`present_sample`]) for `Present`, or
/// usernames `0..len` for `Absent`.
pub fn usernames(stream: Stream, items: u64, len: usize) -> Vec<Username> {
    match stream {
        Stream::Present if items as usize > len => (0..len as u64)
            .map(|j| Username::new(stream, sample_index(j, items)))
            .collect(),
        Stream::Present => (0..items).map(|i| Username::new(stream, i)).collect(),
        Stream::Absent => (0..len as u64).map(|i| Username::new(stream, i)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_disjoint_and_deterministic() {
        let present = keys(Stream::Present, 0, 10_000);
        let absent = keys(Stream::Absent, 0, 10_000);
        assert!(present.iter().all(|k| k[0] & 1 == 0));
        assert!(absent.iter().all(|k| k[0] & 1 == 1));
        assert_eq!(present, keys(Stream::Present, 0, 10_000));
        let mut seen = std::collections::HashSet::new();
        assert!(present.iter().all(|k| seen.insert(*k)));
    }

    #[test]
    fn chunks_cover_the_range_in_order() {
        let mut all = Vec::new();
        for_each_chunk(Stream::Absent, 5..CHUNK as u64 + 10, |c| {
            all.extend_from_slice(c)
        });
        assert_eq!(all.len(), CHUNK + 5);
        assert_eq!(all[0], key(Stream::Absent, 5));
        assert_eq!(*all.last().unwrap(), key(Stream::Absent, CHUNK as u64 + 9));
    }

    #[test]
    fn sample_stays_in_range() {
        let sample = present_sample(1_000_000, 1000);
        let set: std::collections::HashSet<Key> =
            keys(Stream::Present, 0, 1_000_000).into_iter().collect();
        assert!(sample.iter().all(|k| set.contains(k)));
    }

    #[test]
    fn usernames_are_unique_varied_and_disjoint() {
        let present: Vec<Username> = (0..50_000)
            .map(|i| Username::new(Stream::Present, i))
            .collect();
        let absent = usernames(Stream::Absent, 0, 50_000);
        let mut seen = std::collections::HashSet::new();
        assert!(present
            .iter()
            .chain(&absent)
            .all(|u| seen.insert(u.as_ref().to_vec())));
        let lengths: std::collections::HashSet<usize> =
            present.iter().map(|u| u.as_ref().len()).collect();
        assert!(lengths.len() >= 8, "{lengths:?}");
        let big = Username::new(Stream::Absent, 999_999_999_999);
        assert!(big.as_ref().ends_with(b"1999999999999"));
        assert!(std::str::from_utf8(big.as_ref()).is_ok());
    }
}
