//! The versioned, checksummed binary file format shared by every filter kind.
//!
//! Filters are long-lived data (a URL blocklist built offline, a server snapshot), so the format
//! is explicit and stable: little-endian, a fixed 32-byte header that names the format version,
//! the filter kind, the hash algorithm and its seed, then a kind-specific body, then an XXH3-64
//! checksum over everything before it. The full layout is documented in `docs/format.md`.
//!
//! Readers never trust a length before checking it: the header carries its own checksum, the
//! body length is bounded by [`MAX_BODY_BYTES`], and [`FilterCodec::read_from`] grows its buffer
//! only as bytes actually arrive, so a forged header claiming a terabyte fails cleanly with
//! [`Error::Corrupt`] after reading what is really there.

use std::io::{self, Read, Write};

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use crate::error::{Error, Result};

/// First eight bytes of every bloomgate filter file.
pub const MAGIC: [u8; 8] = *b"BLMGATE\0";
/// Current format version. Readers reject versions they do not know.
pub const FORMAT_VERSION: u16 = 1;
/// Size of the fixed header in bytes.
pub const HEADER_LEN: usize = 32;
/// Size of the trailing checksum in bytes.
pub const CHECKSUM_LEN: usize = 8;
/// Largest body a reader accepts (1 TiB): anything larger is refused before reading it.
pub const MAX_BODY_BYTES: u64 = 1 << 40;

/// Hash algorithm id stored in the header. Only one exists; the id makes a future one possible
/// without guessing (pitfall: persisting an unnamed, unstable hash).
pub const HASH_XXH3_128: u8 = 1;

/// Which filter type a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FilterKind {
    /// [`crate::BloomFilter`].
    Classic = 1,
    /// [`crate::BlockedBloomFilter`].
    Blocked = 2,
    /// [`crate::CountingBloomFilter`].
    Counting = 3,
    /// [`crate::ScalableBloomFilter`].
    Scalable = 4,
    /// [`crate::CuckooFilter`].
    Cuckoo = 5,
    /// [`crate::WindowedBloomFilter`].
    Windowed = 6,
    /// [`crate::FastLocalBloomFilter`].
    FastLocal = 7,
}

impl FilterKind {
    /// The kind for a stored id, if it is one we know.
    pub fn from_id(id: u8) -> Option<Self> {
        Some(match id {
            1 => Self::Classic,
            2 => Self::Blocked,
            3 => Self::Counting,
            4 => Self::Scalable,
            5 => Self::Cuckoo,
            6 => Self::Windowed,
            7 => Self::FastLocal,
            _ => return None,
        })
    }

    /// Lower-case name used by the CLI (`--kind`) and `info`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Classic => "classic",
            Self::Blocked => "blocked",
            Self::Counting => "counting",
            Self::Scalable => "scalable",
            Self::Cuckoo => "cuckoo",
            Self::Windowed => "windowed",
            Self::FastLocal => "fastlocal",
        }
    }
}

/// The validated fixed header of a filter file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Format version ([`FORMAT_VERSION`]).
    pub version: u16,
    /// The filter kind of the body.
    pub kind: FilterKind,
    /// Hash algorithm id ([`HASH_XXH3_128`]).
    pub hash_algorithm: u8,
    /// Seed the filter hashes keys with.
    pub seed: u64,
    /// Length of the body in bytes (checksum excluded), at most [`MAX_BODY_BYTES`].
    pub body_len: u64,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..8].copy_from_slice(&MAGIC);
        out[8..10].copy_from_slice(&self.version.to_le_bytes());
        out[10] = self.kind as u8;
        out[11] = self.hash_algorithm;
        out[12..20].copy_from_slice(&self.seed.to_le_bytes());
        out[20..28].copy_from_slice(&self.body_len.to_le_bytes());
        let check = xxh3_64(&out[..28]) as u32;
        out[28..32].copy_from_slice(&check.to_le_bytes());
        out
    }

    /// Parses and validates a header; checks everything it can before any body is read.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        if bytes.len() < HEADER_LEN {
            return Err(corrupt("truncated header"));
        }
        if bytes[0..8] != MAGIC {
            return Err(corrupt("not a bloomgate filter (bad magic)"));
        }
        let stored_check = u32::from_le_bytes(bytes[28..32].try_into().expect("4 bytes"));
        if xxh3_64(&bytes[..28]) as u32 != stored_check {
            return Err(corrupt("header checksum mismatch"));
        }
        let version = u16::from_le_bytes([bytes[8], bytes[9]]);
        if version != FORMAT_VERSION {
            return Err(corrupt(format!(
                "unsupported format version {version} (this build reads {FORMAT_VERSION})"
            )));
        }
        let kind = FilterKind::from_id(bytes[10])
            .ok_or_else(|| corrupt(format!("unknown filter kind {}", bytes[10])))?;
        let hash_algorithm = bytes[11];
        if hash_algorithm != HASH_XXH3_128 {
            return Err(corrupt(format!("unknown hash algorithm {hash_algorithm}")));
        }
        let seed = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
        let body_len = u64::from_le_bytes(bytes[20..28].try_into().expect("8 bytes"));
        if body_len > MAX_BODY_BYTES {
            return Err(corrupt(format!(
                "body length {body_len} exceeds the 1 TiB limit"
            )));
        }
        Ok(Self {
            version,
            kind,
            hash_algorithm,
            seed,
            body_len,
        })
    }
}

/// Implemented by every filter type that can be saved. The provided methods add the header and
/// checksum; implementors only write and read their own parameters and payload.
pub trait FilterCodec: Sized {
    /// The kind id written to the header.
    const KIND: FilterKind;

    /// The XXH3-128 seed the filter hashes keys with.
    fn hash_seed(&self) -> u64;

    /// Appends the kind-specific parameters, counters and payload, little-endian.
    fn encode_body(&self, out: &mut Vec<u8>);

    /// Inverse of [`encode_body`](Self::encode_body). Must validate every field, and never
    /// allocate more than the remaining input justifies (use [`BodyReader::words`]).
    fn decode_body(body: &mut BodyReader<'_>, seed: u64) -> Result<Self>;

    /// Bytes the body will take, about (a little under is fine: 4 KiB of slack are added):
    /// [`Self::to_bytes`] reserves it up front, so encoding a large filter allocates its image once instead of growing a
    /// buffer by doubling (which needs up to twice the image at once — enough to abort a Redis
    /// that serves a large value's SCANDUMP near its memory limit). Default: no hint.
    fn body_len_hint(&self) -> usize {
        0
    }

    /// The complete file image: header, body, checksum.
    fn to_bytes(&self) -> Vec<u8> {
        // The hint plus slack for per-part parameters, so the last bytes never double it.
        let hint = match self.body_len_hint() {
            0 => 0,
            n => n.saturating_add(4096),
        };
        let mut out = Vec::with_capacity(HEADER_LEN.saturating_add(hint).saturating_add(8));
        out.resize(HEADER_LEN, 0);
        self.encode_body(&mut out);
        let header = Header {
            version: FORMAT_VERSION,
            kind: Self::KIND,
            hash_algorithm: HASH_XXH3_128,
            seed: self.hash_seed(),
            body_len: (out.len() - HEADER_LEN) as u64,
        };
        out[..HEADER_LEN].copy_from_slice(&header.encode());
        let checksum = xxh3_64(&out);
        out.extend_from_slice(&checksum.to_le_bytes());
        out
    }

    /// Parses a complete file image, verifying header, kind, checksum and length.
    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (header, body) = split_verified(bytes)?;
        expect_kind(header.kind, Self::KIND)?;
        decode_whole::<Self>(body, header.seed)
    }

    /// Writes the file image to `writer`.
    fn write_to<W: Write>(&self, mut writer: W) -> io::Result<()> {
        writer.write_all(&self.to_bytes())?;
        writer.flush()
    }

    /// Reads a file image from `reader`; the buffer grows only as bytes arrive.
    fn read_from<R: Read>(reader: R) -> Result<Self> {
        let bytes = read_image(reader)?;
        Self::from_bytes(&bytes)
    }
}

/// Reads a complete file image (header, body, checksum, then end of input) from `reader`
/// without trusting the header's length for allocation. The result still has to be verified by
/// `from_bytes`.
pub fn read_image<R: Read>(mut reader: R) -> Result<Vec<u8>> {
    let mut header_bytes = [0u8; HEADER_LEN];
    reader
        .read_exact(&mut header_bytes)
        .map_err(|e| io_corrupt(e, "header"))?;
    let header = Header::decode(&header_bytes)?;
    let total = header.body_len + CHECKSUM_LEN as u64;
    let mut image = header_bytes.to_vec();
    // `take` + `read_to_end` grows the buffer with the data actually present, so a forged length
    // cannot make us allocate it up front.
    let read = (&mut reader)
        .take(total)
        .read_to_end(&mut image)
        .map_err(|e| io_corrupt(e, "body"))?;
    if (read as u64) < total {
        return Err(corrupt(format!(
            "truncated: header promises {total} more bytes, found {read}"
        )));
    }
    // The image must end right after the checksum, as `split_verified` insists for a byte
    // slice: both readers accept the same files (a `core_reader` fuzz regression).
    let mut extra = [0u8; 1];
    loop {
        match reader.read(&mut extra) {
            Ok(0) => return Ok(image),
            Ok(_) => return Err(corrupt("trailing bytes after the checksum")),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_corrupt(e, "end of file")),
        }
    }
}

/// Splits a file image into its validated header and body, verifying the checksum and that the
/// image has exactly the promised length.
pub fn split_verified(bytes: &[u8]) -> Result<(Header, &[u8])> {
    let header = Header::decode(bytes)?;
    let expected = (HEADER_LEN as u64)
        .checked_add(header.body_len)
        .and_then(|n| n.checked_add(CHECKSUM_LEN as u64))
        .ok_or_else(|| corrupt("length overflow"))?;
    if (bytes.len() as u64) < expected {
        return Err(corrupt(format!(
            "truncated: expected {expected} bytes, found {}",
            bytes.len()
        )));
    }
    if (bytes.len() as u64) > expected {
        return Err(corrupt(format!(
            "{} trailing bytes after the checksum",
            bytes.len() as u64 - expected
        )));
    }
    let split = bytes.len() - CHECKSUM_LEN;
    let stored = u64::from_le_bytes(bytes[split..].try_into().expect("8 bytes"));
    let mut hasher = Xxh3::new();
    hasher.update(&bytes[..split]);
    if hasher.digest() != stored {
        return Err(corrupt("checksum mismatch"));
    }
    Ok((header, &bytes[HEADER_LEN..split]))
}

/// Decodes a body with `T::decode_body` and insists every byte was consumed.
pub fn decode_whole<T: FilterCodec>(body: &[u8], seed: u64) -> Result<T> {
    let mut reader = BodyReader::new(body);
    let filter = T::decode_body(&mut reader, seed)?;
    if reader.remaining() != 0 {
        return Err(corrupt(format!(
            "{} unexpected bytes at the end of the body",
            reader.remaining()
        )));
    }
    Ok(filter)
}

fn expect_kind(found: FilterKind, wanted: FilterKind) -> Result<()> {
    if found == wanted {
        Ok(())
    } else {
        Err(Error::Incompatible(format!(
            "file holds a {} filter, expected {}",
            found.name(),
            wanted.name()
        )))
    }
}

/// Appends `words` little-endian.
pub fn put_words(out: &mut Vec<u8>, words: &[u64]) {
    out.reserve(words.len() * 8);
    for word in words {
        out.extend_from_slice(&word.to_le_bytes());
    }
}

/// Bounds-checked little-endian reader over a body. Every read fails with [`Error::Corrupt`]
/// when the body is too short; nothing is allocated beyond what the body holds.
pub struct BodyReader<'a> {
    bytes: &'a [u8],
}

impl<'a> BodyReader<'a> {
    /// A reader over a body's bytes.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }

    /// The next `count` bytes.
    pub fn bytes(&mut self, count: u64) -> Result<&'a [u8]> {
        let count = usize::try_from(count).map_err(|_| corrupt("length overflow"))?;
        if count > self.bytes.len() {
            return Err(corrupt(format!(
                "body truncated: wanted {count} bytes, {} left",
                self.bytes.len()
            )));
        }
        let (head, tail) = self.bytes.split_at(count);
        self.bytes = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.bytes(N as u64)?.try_into().expect("exact length"))
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    /// Reads a little-endian u16.
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// Reads a little-endian u32.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// Reads a little-endian u64.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Reads a little-endian IEEE-754 f64.
    pub fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    /// Reads `count` little-endian u64 words. Checks the length before allocating.
    pub fn words(&mut self, count: u64) -> Result<Vec<u64>> {
        let len = count
            .checked_mul(8)
            .ok_or_else(|| corrupt("word count overflow"))?;
        let bytes = self.bytes(len)?;
        Ok(bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect())
    }
}

/// Serde for every filter type: the value is the filter's file image (bytes), so deserialising
/// runs the codec's full validation (a derived impl would accept counters that do not match the
/// params and panic later) and needs no serde support from embedded filter types.
#[cfg(feature = "serde")]
macro_rules! serde_as_file_image {
    ($filter:ty) => {
        impl serde::Serialize for $filter {
            fn serialize<S: serde::Serializer>(
                &self,
                serializer: S,
            ) -> std::result::Result<S::Ok, S::Error> {
                serializer.serialize_bytes(&crate::codec::FilterCodec::to_bytes(self))
            }
        }

        impl<'de> serde::Deserialize<'de> for $filter {
            fn deserialize<D: serde::Deserializer<'de>>(
                deserializer: D,
            ) -> std::result::Result<Self, D::Error> {
                let bytes = <Vec<u8> as serde::Deserialize>::deserialize(deserializer)?;
                crate::codec::FilterCodec::from_bytes(&bytes).map_err(serde::de::Error::custom)
            }
        }
    };
}
#[cfg(feature = "serde")]
pub(crate) use serde_as_file_image;

/// Appends a filter's body prefixed with its length (u64), so it can be embedded in another
/// filter's body (scalable links, windowed generations).
pub(crate) fn encode_nested<T: FilterCodec>(filter: &T, out: &mut Vec<u8>) {
    let at = out.len();
    out.extend_from_slice(&[0; 8]);
    filter.encode_body(out);
    let len = (out.len() - at - 8) as u64;
    out[at..at + 8].copy_from_slice(&len.to_le_bytes());
}

/// Inverse of [`encode_nested`]: the embedded body must be consumed exactly.
pub(crate) fn decode_nested<T: FilterCodec>(body: &mut BodyReader<'_>, seed: u64) -> Result<T> {
    let len = body.u64()?;
    decode_whole(body.bytes(len)?, seed)
}

/// Shorthand for an [`Error::Corrupt`].
pub fn corrupt(msg: impl Into<String>) -> Error {
    Error::Corrupt(msg.into())
}

fn io_corrupt(err: io::Error, what: &str) -> Error {
    if err.kind() == io::ErrorKind::UnexpectedEof {
        corrupt(format!("truncated {what}"))
    } else {
        corrupt(format!("cannot read {what}: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal codec user, so the envelope is tested independently of any filter.
    #[derive(Debug, PartialEq)]
    struct Words {
        seed: u64,
        words: Vec<u64>,
    }

    impl FilterCodec for Words {
        const KIND: FilterKind = FilterKind::Classic;
        fn hash_seed(&self) -> u64 {
            self.seed
        }
        fn encode_body(&self, out: &mut Vec<u8>) {
            out.extend_from_slice(&(self.words.len() as u64).to_le_bytes());
            put_words(out, &self.words);
        }
        fn decode_body(body: &mut BodyReader<'_>, seed: u64) -> Result<Self> {
            let count = body.u64()?;
            let words = body.words(count)?;
            Ok(Self { seed, words })
        }
    }

    fn sample() -> Words {
        Words {
            seed: 42,
            words: vec![1, u64::MAX, 0x0123_4567_89ab_cdef],
        }
    }

    #[test]
    fn round_trips_through_bytes_and_io() {
        let filter = sample();
        let bytes = filter.to_bytes();
        assert_eq!(bytes.len(), HEADER_LEN + 8 + 24 + CHECKSUM_LEN);
        assert_eq!(Words::from_bytes(&bytes).unwrap(), filter);
        let mut buf = Vec::new();
        filter.write_to(&mut buf).unwrap();
        assert_eq!(Words::read_from(&buf[..]).unwrap(), filter);
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_rejected() {
        let bytes = sample().to_bytes();
        for len in 0..bytes.len() {
            assert!(matches!(
                Words::from_bytes(&bytes[..len]),
                Err(Error::Corrupt(_))
            ));
            assert!(matches!(
                Words::read_from(&bytes[..len]),
                Err(Error::Corrupt(_))
            ));
        }
        for i in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[i] ^= flip;
                assert!(Words::from_bytes(&bad).is_err(), "flip at {i} accepted");
            }
        }
    }

    #[test]
    fn forged_huge_length_fails_without_allocating_it() {
        let mut bytes = sample().to_bytes();
        // Rewrite the body length to 1 TiB (at the limit) with a valid header checksum.
        let header = Header {
            body_len: MAX_BODY_BYTES,
            ..Header::decode(&bytes).unwrap()
        };
        bytes[..HEADER_LEN].copy_from_slice(&header.encode());
        let err = Words::read_from(&bytes[..]).unwrap_err();
        assert!(
            matches!(err, Error::Corrupt(ref m) if m.contains("truncated")),
            "{err}"
        );
        let over = Header {
            body_len: MAX_BODY_BYTES + 1,
            ..header
        };
        bytes[..HEADER_LEN].copy_from_slice(&over.encode());
        assert!(Words::read_from(&bytes[..]).is_err());
    }

    #[test]
    fn body_reader_checks_before_allocating() {
        let mut reader = BodyReader::new(&[1, 2, 3]);
        assert!(reader.words(u64::MAX).is_err());
        assert!(reader.words(1).is_err());
        assert_eq!(reader.u16().unwrap(), 0x0201);
        assert!(reader.u32().is_err());
    }

    #[test]
    fn wrong_kind_is_incompatible_not_corrupt() {
        let mut bytes = sample().to_bytes();
        let header = Header {
            kind: FilterKind::Cuckoo,
            ..Header::decode(&bytes).unwrap()
        };
        bytes[..HEADER_LEN].copy_from_slice(&header.encode());
        let split = bytes.len() - CHECKSUM_LEN;
        let sum = xxh3_64(&bytes[..split]);
        bytes[split..].copy_from_slice(&sum.to_le_bytes());
        assert!(matches!(
            Words::from_bytes(&bytes),
            Err(Error::Incompatible(_))
        ));
    }
}
