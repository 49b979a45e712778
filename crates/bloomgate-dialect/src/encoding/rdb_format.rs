//! Redis' own serialization of module values — what `DUMP` returns, `RESTORE` and `MIGRATE`
//! carry and RDB files hold — so RedisBloom's data moves into bloomgate (and back) without a
//! Redis in between. [`rdb`](super::rdb) knows RedisBloom's field order; this module knows how
//! Redis frames those fields:
//!
//! - lengths (6/14/32/64-bit) and strings (raw, integer-encoded, LZF-compressed), read with every
//!   length checked against the remaining input and a byte budget before anything is allocated;
//! - the 64-bit module type id (9-character name in Redis' 64-symbol charset, then a 10-bit
//!   encoding version) and the module opcodes that tag each field, as an [`RdbSink`]
//!   ([`ModuleWriter`]) and an [`RdbSource`] ([`RdbReader`]);
//! - the `DUMP` payload: RDB type byte 7 (`RDB_TYPE_MODULE_2`), the value, the 2-byte RDB
//!   version and the CRC64 (Jones, reflected, as Redis computes it) of everything before it.
//!
//! Pure data: the reader works over any `std::io::Read` (a payload in memory, an RDB file being
//! streamed by [`rdb_file`](super::rdb_file)) whose length the caller states.

use std::io::Read;

use crate::budget::{Allowance, KeyCap, Limit};
use crate::codec::rdb_io::{RdbError, RdbSink, RdbSource};
use crate::value::{Kind, Value};

/// RDB object type of a plain string (`RDB_TYPE_STRING`).
pub const RDB_TYPE_STRING: u8 = 0;
/// RDB object type of a module value saved with opcodes (`RDB_TYPE_MODULE_2`).
pub const RDB_TYPE_MODULE_2: u8 = 7;
/// RDB version written in `DUMP` payloads: Redis 7.0's, the version of RedisBloom's own DUMP
/// output in the fixtures (every Redis from 7.0 on accepts it).
pub const DUMP_RDB_VERSION: u16 = 10;
/// Newest RDB version read (Redis 7.4 and 8.x write 12).
pub const MAX_RDB_VERSION: u16 = 12;

/// Module field opcodes (`RDB_MODULE_OPCODE_*`).
pub mod opcode {
    /// End of the module value.
    pub const EOF: u64 = 0;
    /// Signed integer (a length-encoded `u64` cast).
    pub const SINT: u64 = 1;
    /// Unsigned integer (length-encoded).
    pub const UINT: u64 = 2;
    /// Float (4 bytes, little-endian).
    pub const FLOAT: u64 = 3;
    /// Double (8 bytes, little-endian).
    pub const DOUBLE: u64 = 4;
    /// String (Redis' string encoding).
    pub const STRING: u64 = 5;
}

/// Special string encodings (the low 6 bits after a `11` length prefix).
const ENC_INT8: u8 = 0;
const ENC_INT16: u8 = 1;
const ENC_INT32: u8 = 2;
const ENC_LZF: u8 = 3;

/// Redis' module type charset: a name's characters are 6-bit indices into it.
const TYPE_CHARSET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The 64-bit id Redis stores for a module type: 9 characters × 6 bits, then the 10-bit
/// encoding version. `None` if the name is not 9 charset characters or `encver` ≥ 1024.
pub fn module_type_id(name: &str, encver: u32) -> Option<u64> {
    if name.len() != 9 || encver >= 1024 {
        return None;
    }
    let mut id = 0u64;
    for c in name.bytes() {
        let index = TYPE_CHARSET.iter().position(|&x| x == c)?;
        id = (id << 6) | index as u64;
    }
    Some((id << 10) | u64::from(encver))
}

/// The name and encoding version in a module type id.
pub fn module_type_name(id: u64) -> (String, u32) {
    let name = (0..9)
        .map(|i| TYPE_CHARSET[((id >> (10 + 6 * (8 - i))) & 63) as usize] as char)
        .collect();
    (name, (id & 1023) as u32)
}

/// CRC-64/Jones as Redis computes it (`CRC_64_REDIS` in the `crc` crate's catalogue: reflected
/// polynomial 0xad93d23594c935a9, init 0, no final xor), continuing from `crc` (0 to start).
pub fn crc64(crc: u64, data: &[u8]) -> u64 {
    // Slice-by-16 tables: 16 bytes per step instead of one.
    const REDIS: crc::Crc<u64, crc::Table<16>> =
        crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_REDIS);
    // The crate reflects the initial value of a reflected algorithm; a finished CRC is already
    // reflected, so it goes in reversed to continue from it.
    let mut digest = REDIS.digest_with_initial(crc.reverse_bits());
    digest.update(data);
    digest.finalize()
}

/// Appends Redis' length encoding of `len`.
pub fn write_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.extend_from_slice(&[0x40 | (len >> 8) as u8, len as u8]);
    } else if len <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// Appends a string as Redis saves it with `rdbcompression yes`: short canonical integers
/// integer-encoded, strings over 20 bytes LZF-compressed when that saves more than 4 bytes,
/// the rest raw.
pub fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 11 {
        if let Some(v) = crate::num::parse_i64(s).filter(|v| v.to_string().as_bytes() == s) {
            if let Ok(v) = i8::try_from(v) {
                out.extend_from_slice(&[0xc0 | ENC_INT8, v as u8]);
                return;
            }
            if let Ok(v) = i16::try_from(v) {
                out.push(0xc0 | ENC_INT16);
                out.extend_from_slice(&v.to_le_bytes());
                return;
            }
            if let Ok(v) = i32::try_from(v) {
                out.push(0xc0 | ENC_INT32);
                out.extend_from_slice(&v.to_le_bytes());
                return;
            }
        }
    }
    if s.len() > 20 {
        if let Some(compressed) = crate::codec::lzf::compress(s, s.len() - 4) {
            out.push(0xc0 | ENC_LZF);
            write_len(out, compressed.len() as u64);
            write_len(out, s.len() as u64);
            out.extend_from_slice(&compressed);
            return;
        }
    }
    write_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// Writes a module value's fields with their opcodes ([`RdbSink`] over a byte buffer).
#[derive(Default)]
pub struct ModuleWriter {
    /// The encoded bytes so far.
    pub out: Vec<u8>,
}

impl RdbSink for ModuleWriter {
    fn save_unsigned(&mut self, value: u64) {
        write_len(&mut self.out, opcode::UINT);
        write_len(&mut self.out, value);
    }
    fn save_double(&mut self, value: f64) {
        write_len(&mut self.out, opcode::DOUBLE);
        self.out.extend_from_slice(&value.to_le_bytes());
    }
    fn save_float(&mut self, value: f32) {
        write_len(&mut self.out, opcode::FLOAT);
        self.out.extend_from_slice(&value.to_le_bytes());
    }
    fn save_string(&mut self, value: &[u8]) {
        write_len(&mut self.out, opcode::STRING);
        write_string(&mut self.out, value);
    }
}

/// Appends a dialect value as an RDB object body: its module type id, its fields, the EOF
/// opcode (the type byte is the caller's).
pub fn write_module_value(out: &mut Vec<u8>, value: &Value) {
    let id = module_type_id(value.type_name(), value.encoding_version() as u32)
        .expect("dialect type names are valid module type names");
    write_len(out, id);
    let mut writer = ModuleWriter {
        out: std::mem::take(out),
    };
    value.rdb_save(&mut writer);
    *out = writer.out;
    write_len(out, opcode::EOF);
}

/// The `DUMP` payload of a dialect value, byte for byte what Redis + RedisBloom returns.
pub fn dump_payload(value: &Value) -> Vec<u8> {
    let mut out = vec![RDB_TYPE_MODULE_2];
    write_module_value(&mut out, value);
    seal(out)
}

/// The `DUMP` payload of a Redis string (for hosts that have strings: `RDB_TYPE_STRING`, the
/// string in Redis' encoding), byte for byte what Redis returns.
pub fn dump_string_payload(s: &[u8]) -> Vec<u8> {
    let mut out = vec![RDB_TYPE_STRING];
    write_string(&mut out, s);
    seal(out)
}

/// Appends a payload's footer: the RDB version and the CRC64 of everything before it.
fn seal(mut out: Vec<u8>) -> Vec<u8> {
    out.extend_from_slice(&DUMP_RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Why a `RESTORE` payload was refused (each maps to Redis' reply).
#[derive(Debug, PartialEq)]
pub enum PayloadError {
    /// Shorter than its footer, an RDB version newer than [`MAX_RDB_VERSION`], or a CRC
    /// mismatch: `ERR DUMP payload version or checksum are wrong`.
    VersionOrChecksum,
    /// Anything wrong inside (not a module value, a type this crate does not host, a damaged
    /// value): `ERR Bad data format`.
    BadData(RdbError),
    /// A valid-looking value larger than the budget: the host's out-of-memory refusal.
    OverBudget,
    /// A valid-looking value larger than `bloom-memory-usage-limit`:
    /// [`ERR_CAP`](crate::ERR_CAP).
    OverCap,
}

/// Decodes a `DUMP` payload into a dialect value, allocating at most `budget` bytes for it.
pub fn restore_payload(payload: &[u8], budget: u64) -> Result<Value, PayloadError> {
    match restore_any_payload(payload, budget)? {
        Restored::Dialect(value) => Ok(value),
        Restored::String(_) => Err(PayloadError::BadData(RdbError::Invalid(
            "not a module value".into(),
        ))),
    }
}

/// What a `DUMP` payload held, for hosts that also have strings.
#[derive(Debug)]
pub enum Restored {
    /// A dialect value.
    Dialect(Value),
    /// A Redis string (`RDB_TYPE_STRING`, in any of its encodings).
    String(Vec<u8>),
}

/// Decodes a `DUMP` payload of a dialect value or a string, allocating at most `budget` bytes.
pub fn restore_any_payload(payload: &[u8], budget: u64) -> Result<Restored, PayloadError> {
    restore_capped(payload, budget, KeyCap::NONE)
}

/// [`restore_any_payload`] with the per-key `cap` on a dialect value (a string is not capped).
pub fn restore_capped(payload: &[u8], budget: u64, cap: KeyCap) -> Result<Restored, PayloadError> {
    let Some(body_len) = payload.len().checked_sub(10) else {
        return Err(PayloadError::VersionOrChecksum);
    };
    let (body, footer) = payload.split_at(body_len);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..].try_into().expect("8 bytes"));
    if version > MAX_RDB_VERSION || crc64(0, &payload[..body_len + 2]) != crc {
        return Err(PayloadError::VersionOrChecksum);
    }
    let mut reader = RdbReader::new(body, body.len() as u64, budget);
    let value = (|| match reader.u8()? {
        RDB_TYPE_STRING => Ok(Restored::String(reader.string(u64::MAX)?)),
        RDB_TYPE_MODULE_2 => {
            reader.cap_values(cap);
            match reader.module_value()? {
                ModuleValue::Dialect(value) => Ok(Restored::Dialect(value)),
                ModuleValue::Foreign(name) => Err(RdbError::Invalid(format!(
                    "module type {name} is not a RedisBloom type"
                ))),
            }
        }
        _ => Err(RdbError::Invalid("not a module value".into())),
    })()
    .map_err(|e| match e {
        RdbError::OverBudget(o) if o.limit == Limit::KeyCap => PayloadError::OverCap,
        RdbError::OverBudget(_) => PayloadError::OverBudget,
        e => PayloadError::BadData(e),
    })?;
    if reader.remaining() != 0 {
        return Err(PayloadError::BadData(RdbError::Invalid(
            "bytes after the value".into(),
        )));
    }
    Ok(value)
}

/// A module value read from an RDB stream.
#[derive(Debug)]
pub enum ModuleValue {
    /// A RedisBloom type, loaded.
    Dialect(Value),
    /// Another module's type (its name), skipped field by field.
    Foreign(String),
}

/// A length prefix: a length, or one of the special string encodings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Length {
    /// A plain length.
    Len(u64),
    /// `11xxxxxx`: a special encoding (integer or LZF string).
    Encoded(u8),
}

fn invalid(why: impl Into<String>) -> RdbError {
    RdbError::Invalid(why.into())
}

/// Reads Redis' encodings from a stream of known length; every length is checked against the
/// input left and every allocation against a byte budget before it is made. Keeps a running
/// CRC64 of what it read (an RDB file's trailer covers everything before it).
pub struct RdbReader<R> {
    inner: R,
    remaining: u64,
    offset: u64,
    allowance: Allowance,
    crc: u64,
}

impl<R: Read> RdbReader<R> {
    /// A reader of `len` bytes from `inner`, allocating at most `budget` bytes for values.
    pub fn new(inner: R, len: u64, budget: u64) -> Self {
        Self {
            inner,
            remaining: len,
            offset: 0,
            allowance: Allowance::new(budget),
            crc: 0,
        }
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Bytes left in the input.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// CRC64 of everything read so far.
    pub fn crc(&self) -> u64 {
        self.crc
    }

    /// Sets the bytes the next values may allocate.
    pub fn set_budget(&mut self, budget: u64) {
        self.allowance = Allowance::new(budget);
    }

    /// Applies the per-key `cap` to the values read next (until [`RdbReader::set_budget`]).
    pub fn cap_values(&mut self, cap: KeyCap) {
        self.allowance = self.allowance.capped(cap, 0);
    }

    /// Whether a replayed value went past the per-key cap ([`Allowance::passed_cap`]).
    pub fn passed_cap(&self) -> bool {
        self.allowance.passed_cap()
    }

    fn charge(&mut self, bytes: u64) -> Result<(), RdbError> {
        self.allowance
            .admit_transient(bytes)
            .map_err(RdbError::OverBudget)
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<(), RdbError> {
        if buf.len() as u64 > self.remaining {
            return Err(RdbError::Truncated);
        }
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => RdbError::Truncated,
            _ => invalid(format!("read error: {e}")),
        })?;
        self.crc = crc64(self.crc, buf);
        self.remaining -= buf.len() as u64;
        self.offset += buf.len() as u64;
        Ok(())
    }

    /// `N` raw bytes.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], RdbError> {
        let mut buf = [0u8; N];
        self.fill(&mut buf)?;
        Ok(buf)
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, RdbError> {
        Ok(self.array::<1>()?[0])
    }

    /// `n` raw bytes, charged to the budget.
    pub fn bytes(&mut self, n: u64) -> Result<Vec<u8>, RdbError> {
        if n > self.remaining {
            return Err(RdbError::Truncated);
        }
        self.charge(n)?;
        let mut buf = vec![0; n as usize];
        self.fill(&mut buf)?;
        Ok(buf)
    }

    /// Skips `n` bytes without keeping them.
    pub fn skip(&mut self, mut n: u64) -> Result<(), RdbError> {
        if n > self.remaining {
            return Err(RdbError::Truncated);
        }
        let mut buf = [0u8; 8192];
        while n > 0 {
            let step = n.min(buf.len() as u64) as usize;
            self.fill(&mut buf[..step])?;
            n -= step as u64;
        }
        Ok(())
    }

    /// A length prefix (or a special encoding marker).
    pub fn length_or_encoding(&mut self) -> Result<Length, RdbError> {
        let first = self.u8()?;
        Ok(match first >> 6 {
            0 => Length::Len(u64::from(first & 0x3f)),
            1 => Length::Len((u64::from(first & 0x3f) << 8) | u64::from(self.u8()?)),
            2 => match first {
                0x80 => Length::Len(u64::from(u32::from_be_bytes(self.array()?))),
                0x81 => Length::Len(u64::from_be_bytes(self.array()?)),
                _ => return Err(invalid(format!("unknown length prefix {first:#04x}"))),
            },
            _ => Length::Encoded(first & 0x3f),
        })
    }

    /// A plain length.
    pub fn length(&mut self) -> Result<u64, RdbError> {
        match self.length_or_encoding()? {
            Length::Len(n) => Ok(n),
            Length::Encoded(e) => Err(invalid(format!("encoding {e} where a length belongs"))),
        }
    }

    /// A string of at most `max_len` bytes (after decompression), charged to the budget.
    pub fn string(&mut self, max_len: u64) -> Result<Vec<u8>, RdbError> {
        match self.length_or_encoding()? {
            Length::Len(n) if n > max_len => Err(invalid("string longer than expected")),
            Length::Len(n) => self.bytes(n),
            Length::Encoded(ENC_INT8) => Ok(i64::from(self.u8()? as i8).to_string().into_bytes()),
            Length::Encoded(ENC_INT16) => {
                Ok(i16::from_le_bytes(self.array()?).to_string().into_bytes())
            }
            Length::Encoded(ENC_INT32) => {
                Ok(i32::from_le_bytes(self.array()?).to_string().into_bytes())
            }
            Length::Encoded(ENC_LZF) => {
                let compressed_len = self.length()?;
                let len = self.length()?;
                if len > max_len {
                    return Err(invalid("string longer than expected"));
                }
                if compressed_len > self.remaining {
                    return Err(RdbError::Truncated);
                }
                if len > compressed_len.saturating_mul(crate::codec::lzf::MAX_EXPANSION) {
                    return Err(invalid("LZF length beyond what its input can expand to"));
                }
                let compressed = self.bytes(compressed_len)?;
                self.charge(len)?;
                let out = crate::codec::lzf::decompress(&compressed, len as usize)
                    .ok_or_else(|| invalid("invalid LZF compressed string"))?;
                self.allowance.release(compressed_len);
                Ok(out)
            }
            Length::Encoded(e) => Err(invalid(format!("unknown string encoding {e}"))),
        }
    }

    /// Skips a string in any encoding (LZF strings are not decompressed).
    pub fn skip_string(&mut self) -> Result<(), RdbError> {
        match self.length_or_encoding()? {
            Length::Len(n) => self.skip(n),
            Length::Encoded(ENC_INT8) => self.skip(1),
            Length::Encoded(ENC_INT16) => self.skip(2),
            Length::Encoded(ENC_INT32) => self.skip(4),
            Length::Encoded(ENC_LZF) => {
                let compressed_len = self.length()?;
                self.length()?;
                self.skip(compressed_len)
            }
            Length::Encoded(e) => Err(invalid(format!("unknown string encoding {e}"))),
        }
    }

    /// Skips a module value's opcode-tagged fields up to and including its EOF opcode.
    pub fn skip_module_fields(&mut self) -> Result<(), RdbError> {
        loop {
            match self.length()? {
                opcode::EOF => return Ok(()),
                opcode::SINT | opcode::UINT => {
                    self.length()?;
                }
                opcode::FLOAT => self.skip(4)?,
                opcode::DOUBLE => self.skip(8)?,
                opcode::STRING => self.skip_string()?,
                other => return Err(invalid(format!("unknown module opcode {other}"))),
            }
        }
    }

    /// A module value after its type byte: type id, fields, EOF opcode. RedisBloom's types are
    /// loaded (validated as LOADCHUNK validates), other modules' values skipped.
    pub fn module_value(&mut self) -> Result<ModuleValue, RdbError> {
        let (name, encver) = module_type_name(self.length()?);
        let Some(kind) = Kind::ALL.into_iter().find(|k| k.type_name() == name) else {
            self.skip_module_fields()?;
            return Ok(ModuleValue::Foreign(name));
        };
        let value = kind.rdb_load(self, encver as i32)?;
        if self.length()? != opcode::EOF {
            return Err(invalid("module value not followed by its EOF opcode"));
        }
        Ok(ModuleValue::Dialect(value))
    }

    fn expect_opcode(&mut self, want: u64) -> Result<(), RdbError> {
        match self.length() {
            Ok(op) if op == want => Ok(()),
            Ok(_) => Err(RdbError::Truncated),
            Err(e) => Err(e),
        }
    }
}

impl<R: Read> RdbSource for RdbReader<R> {
    fn load_unsigned(&mut self) -> Result<u64, RdbError> {
        self.expect_opcode(opcode::UINT)?;
        self.length()
    }
    fn load_double(&mut self) -> Result<f64, RdbError> {
        self.expect_opcode(opcode::DOUBLE)?;
        Ok(f64::from_le_bytes(self.array()?))
    }
    fn load_float(&mut self) -> Result<f32, RdbError> {
        self.expect_opcode(opcode::FLOAT)?;
        Ok(f32::from_le_bytes(self.array()?))
    }
    fn load_string(&mut self, max_len: u64) -> Result<Vec<u8>, RdbError> {
        self.expect_opcode(opcode::STRING)?;
        self.string(max_len)
    }
    fn allowance(&mut self) -> &mut Allowance {
        &mut self.allowance
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::cuckoo::{CuckooChain, CuckooParams};
    use crate::types::sbchain::BloomChain;

    #[test]
    fn crc64_matches_redis_test_vector() {
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    /// Bit by bit, as Redis' reference does: independent of the `crc` crate.
    fn crc64_bitwise(mut crc: u64, data: &[u8]) -> u64 {
        for &b in data {
            crc ^= u64::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5
                } else {
                    crc >> 1
                };
            }
        }
        crc
    }

    #[test]
    fn crc64_continues_across_any_split_and_matches_the_bitwise_reference() {
        let data: Vec<u8> = (0..1000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let whole = crc64(0, &data);
        assert_eq!(whole, crc64_bitwise(0, &data));
        for split in [0, 1, 7, 15, 16, 17, 333, 999, 1000] {
            let (a, b) = data.split_at(split);
            assert_eq!(crc64(crc64(0, a), b), whole, "split at {split}");
            assert_eq!(crc64_bitwise(crc64(0, a), b), whole, "split at {split}");
        }
    }

    #[test]
    fn module_type_ids_round_trip() {
        let id = module_type_id("MBbloom--", 4).unwrap();
        assert_eq!(id, 0x3016_e5a2_89be_f804);
        assert_eq!(module_type_name(id), ("MBbloom--".to_string(), 4));
        let id = module_type_id("MBbloomCF", 4).unwrap();
        assert_eq!(module_type_name(id), ("MBbloomCF".to_string(), 4));
        assert_eq!(module_type_id("MBbloom", 4), None);
        assert_eq!(module_type_id("MBbloom-!", 4), None);
        assert_eq!(module_type_id("MBbloom--", 1024), None);
    }

    fn read_len(bytes: &[u8]) -> Result<Length, RdbError> {
        RdbReader::new(bytes, bytes.len() as u64, 0).length_or_encoding()
    }

    #[test]
    fn lengths_round_trip_at_every_width() {
        for v in [
            0,
            63,
            64,
            16383,
            16384,
            u64::from(u32::MAX),
            1 << 32,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            write_len(&mut out, v);
            assert_eq!(read_len(&out), Ok(Length::Len(v)), "{v}");
        }
        assert_eq!(
            read_len(&[0x82]),
            Err(invalid("unknown length prefix 0x82"))
        );
        assert_eq!(read_len(&[0x81, 0, 0]), Err(RdbError::Truncated));
        assert_eq!(read_len(&[0xc3]), Ok(Length::Encoded(3)));
    }

    #[test]
    fn strings_round_trip_in_every_encoding() {
        let long: Vec<u8> = (0..1000u32).map(|i| (i % 7) as u8).collect();
        let random: Vec<u8> = (0..1000u64)
            .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
            .collect();
        for s in [
            &b""[..],
            b"0",
            b"-1",
            b"127",
            b"-32768",
            b"2147483647",
            b"2147483648",
            b"007",
            b"abc",
            &long,
            &random,
        ] {
            let mut out = Vec::new();
            write_string(&mut out, s);
            let mut r = RdbReader::new(&out[..], out.len() as u64, 1 << 20);
            assert_eq!(r.string(1 << 20).unwrap(), s);
            assert_eq!(r.remaining(), 0);
            let mut r = RdbReader::new(&out[..], out.len() as u64, 0);
            r.skip_string().unwrap();
            assert_eq!(r.remaining(), 0);
        }
        let mut out = Vec::new();
        write_string(&mut out, &long);
        assert_eq!(out[0], 0xc3, "compressible strings are LZF-compressed");
        assert!(out.len() < 100);
        // Over max_len or the budget: refused before allocating.
        let mut r = RdbReader::new(&out[..], out.len() as u64, 1 << 20);
        assert!(r.string(999).is_err());
        let mut r = RdbReader::new(&out[..], out.len() as u64, 999);
        assert!(r.string(1000).is_err());
    }

    #[test]
    fn forged_lengths_are_refused_before_allocating() {
        // A raw string claiming 2^60 bytes, an LZF string claiming 2^60 output bytes.
        let mut raw = Vec::new();
        write_len(&mut raw, 1 << 60);
        let mut r = RdbReader::new(&raw[..], raw.len() as u64, u64::MAX);
        assert_eq!(r.string(u64::MAX), Err(RdbError::Truncated));
        let mut lzf = vec![0xc3];
        write_len(&mut lzf, 3);
        write_len(&mut lzf, 1 << 60);
        lzf.extend_from_slice(&[0, b'a', 0]);
        let mut r = RdbReader::new(&lzf[..], lzf.len() as u64, u64::MAX);
        assert!(matches!(r.string(u64::MAX), Err(RdbError::Invalid(_))));
    }

    fn bloom() -> Value {
        let mut chain = BloomChain::new(50, 0.01, 2, false).unwrap();
        for i in 0..400 {
            chain
                .add(format!("k{i}").as_bytes(), &mut Allowance::unlimited())
                .unwrap();
        }
        Value::Bloom(chain)
    }

    fn cuckoo() -> Value {
        let p = CuckooParams {
            capacity: 100,
            bucket_size: 2,
            max_iterations: 20,
            expansion: 2,
        };
        let mut filter = CuckooChain::new(p).unwrap();
        for i in 0..150 {
            filter
                .insert(format!("k{i}").as_bytes(), &mut Allowance::unlimited())
                .unwrap();
        }
        Value::Cuckoo(Box::new(filter))
    }

    fn stream(value: &Value) -> Vec<(i64, Vec<u8>)> {
        value.dump_stream().collect()
    }

    #[test]
    fn payloads_round_trip() {
        for value in [bloom(), cuckoo()] {
            let payload = dump_payload(&value);
            let back = restore_payload(&payload, 1 << 30).unwrap();
            assert_eq!(stream(&back), stream(&value));
            assert_eq!(dump_payload(&back), payload);
        }
    }

    /// DUMPs of strings taken from Redis 7.0 (raw, int8, int32, LZF): ours are the same bytes,
    /// and each restores to its string; a module host's restore refuses them.
    #[test]
    fn string_payloads_are_redis_bytes() {
        let long = vec![b'a'; 62];
        let cases: [(&[u8], &[u8]); 4] = [
            (b"hello", b"\x00\x05hello\n\x00cr\xdfve4 \n"),
            (b"123", b"\x00\xc0{\n\x00H\xe2S\xe1\x00zg\xb9"),
            (
                b"100000",
                b"\x00\xc2\xa0\x86\x01\x00\n\x00\xf1$\x03Po/\xa6t",
            ),
            (
                &long,
                b"\x00\xc3\t>\x01aa\xe01\x00\x01aa\n\x00\xecIB\xd6\xb3'_|",
            ),
        ];
        for (s, redis) in cases {
            assert_eq!(dump_string_payload(s), redis);
            match restore_any_payload(redis, 1 << 20).unwrap() {
                Restored::String(back) => assert_eq!(back, s),
                other => panic!("{other:?}"),
            }
            assert!(matches!(
                restore_payload(redis, 1 << 20),
                Err(PayloadError::BadData(_))
            ));
        }
        assert_eq!(
            restore_any_payload(&dump_string_payload(&long), 10).unwrap_err(),
            PayloadError::OverBudget
        );
    }

    #[test]
    fn damaged_payloads_are_refused() {
        let payload = dump_payload(&bloom());
        let with_crc = |mut body: Vec<u8>| {
            let crc = crc64(0, &body);
            body.extend_from_slice(&crc.to_le_bytes());
            body
        };
        let body = payload[..payload.len() - 8].to_vec();
        // Checksum, version, length.
        let mut flipped = payload.clone();
        flipped[20] ^= 1;
        assert_eq!(
            restore_payload(&flipped, 1 << 30).unwrap_err(),
            PayloadError::VersionOrChecksum
        );
        let mut newer = body.clone();
        let at = newer.len() - 2;
        newer[at] = 13;
        assert_eq!(
            restore_payload(&with_crc(newer), 1 << 30).unwrap_err(),
            PayloadError::VersionOrChecksum
        );
        assert_eq!(
            restore_payload(&payload[..9], 1 << 30).unwrap_err(),
            PayloadError::VersionOrChecksum
        );
        // Every truncation of the body, every single-byte change, with a valid checksum: refused
        // or (a change inside a bit array) loaded — never a panic.
        let version = &body[body.len() - 2..];
        for cut in 0..body.len() - 2 {
            let mut b = body[..cut].to_vec();
            b.extend_from_slice(version);
            assert!(matches!(
                restore_payload(&with_crc(b), 1 << 30),
                Err(PayloadError::BadData(_))
            ));
        }
        for at in 0..body.len() - 2 {
            for x in [1u8, 0x80, 0xff] {
                let mut b = body.clone();
                b[at] ^= x;
                let _ = restore_payload(&with_crc(b), 1 << 30);
            }
        }
        // Wrong type byte, foreign module type, bytes after the value, over budget.
        let mut b = body.clone();
        b[0] = 0;
        assert!(restore_payload(&with_crc(b), 1 << 30).is_err());
        let mut b = body.clone();
        let id = module_type_id("MBbloomXX", 4).unwrap().to_be_bytes();
        b[2..10].copy_from_slice(&id);
        assert!(matches!(
            restore_payload(&with_crc(b), 1 << 30),
            Err(PayloadError::BadData(RdbError::Invalid(_)))
        ));
        let mut b = body[..body.len() - 2].to_vec();
        b.push(0);
        b.extend_from_slice(version);
        assert!(restore_payload(&with_crc(b), 1 << 30).is_err());
        assert_eq!(
            restore_payload(&payload, 100).unwrap_err(),
            PayloadError::OverBudget
        );
    }

    proptest::proptest! {
        /// Any handful of byte changes, with the checksum repaired so the decoder sees them:
        /// refused or loaded, never a panic or an allocation past the budget; what loads dumps
        /// again to a payload that loads to the same value.
        #[test]
        fn mutated_payloads_never_panic(
            cuckoo_value in proptest::bool::ANY,
            edits in proptest::collection::vec((0usize..4096, proptest::num::u8::ANY), 1..6),
        ) {
            let value = if cuckoo_value { cuckoo() } else { bloom() };
            let payload = dump_payload(&value);
            let mut body = payload[..payload.len() - 8].to_vec();
            let editable = body.len() - 2;
            for (at, byte) in edits {
                body[at % editable] = byte;
            }
            let crc = crc64(0, &body);
            body.extend_from_slice(&crc.to_le_bytes());
            if let Ok(loaded) = restore_payload(&body, 1 << 26) {
                let again = restore_payload(&dump_payload(&loaded), 1 << 26).unwrap();
                proptest::prop_assert_eq!(stream(&again), stream(&loaded));
            }
        }
    }

    #[test]
    fn forged_cuckoo_sizes_are_refused_before_allocating() {
        let payload = |fields: &[u64], slots: Option<&[u8]>| {
            let mut b = vec![RDB_TYPE_MODULE_2];
            write_len(&mut b, module_type_id("MBbloomCF", 4).unwrap());
            let mut w = ModuleWriter::default();
            for &v in fields {
                w.save_unsigned(v);
            }
            if let Some(slots) = slots {
                w.save_string(slots);
            }
            b.extend_from_slice(&w.out);
            write_len(&mut b, opcode::EOF);
            b.extend_from_slice(&DUMP_RDB_VERSION.to_le_bytes());
            let crc = crc64(0, &b);
            b.extend_from_slice(&crc.to_le_bytes());
            b
        };
        // 2^30 buckets × 255 slots: more than CF.RESERVE can create.
        assert!(matches!(
            restore_payload(&payload(&[1, 1 << 30, 0, 0, 255, 20, 1], None), 1 << 30),
            Err(PayloadError::BadData(_))
        ));
        // A valid 2 GiB header with no slot bytes behind it: refused for the payload.
        let fields = [1, 1 << 23, 0, 0, 255, 20, 1, 1 << 23];
        assert!(matches!(
            restore_payload(&payload(&fields, None), u64::MAX),
            Err(PayloadError::BadData(_))
        ));
        // A real 4 KiB filter: the slot string and the filter both count against the budget.
        let fields = [1, 1 << 10, 0, 0, 4, 20, 1, 1 << 10];
        let p = payload(&fields, Some(&[0; 4096]));
        assert!(restore_payload(&p, 8192).is_ok());
        assert_eq!(
            restore_payload(&p, 6000).unwrap_err(),
            PayloadError::OverBudget
        );
    }
}
