//! The digest as RedisBloom saves it: its RDB field order ([`save`], [`load`]: every field
//! checked and the size admitted before anything is allocated) and the dump stream of
//! `bloomgate serve`'s snapshots (a header of the scalar fields, then one chunk of slots).

use super::{capacity, memory_for, SavedFields, TDigest, I64_LIMIT};
use crate::budget::Buffer;
use crate::codec::rdb_io::{RdbError, RdbSink, RdbSource};

/// The RDB encoding version RedisBloom writes `TDIS-TYPE` with (2.4 and 8 alike).
pub const ENCODING_VERSION: i32 = 0;

/// Writes `digest` in RedisBloom's field order: compression, min, max (doubles); capacity,
/// merged and unmerged node counts, compressions (signed, which Redis stores as unsigned);
/// merged and unmerged weight (doubles); the merged means, then their weights (doubles).
///
/// RedisBloom compresses the digest in place before saving; a host that can (DUMP, SAVE) calls
/// [`TDigest::compress`] first so the live digest changes as it does there. Otherwise a
/// compressed copy is written, so buffered observations are never lost.
pub fn save(digest: &TDigest, out: &mut impl RdbSink) {
    let digest = digest.as_saved();
    let f = digest.saved_fields();
    out.save_double(f.compression);
    out.save_double(f.min);
    out.save_double(f.max);
    out.save_unsigned(f.cap);
    out.save_unsigned(f.merged);
    out.save_unsigned(f.unmerged);
    out.save_unsigned(f.compressions as u64);
    out.save_double(f.merged_weight);
    out.save_double(f.unmerged_weight);
    for (mean, _) in digest.centroids() {
        out.save_double(mean);
    }
    for (_, weight) in digest.centroids() {
        out.save_double(weight as f64);
    }
}

/// A weight field: a whole, non-negative double within `i64`.
fn weight_field(v: f64) -> Result<i64, RdbError> {
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < I64_LIMIT {
        Ok(v as i64)
    } else {
        Err(invalid("weight is not a whole non-negative number"))
    }
}

fn invalid(why: &str) -> RdbError {
    RdbError::Invalid(why.into())
}

/// Checks the scalar fields of a saved digest against each other: a whole compression ≥ 1
/// whose capacity is the one saved (and fits RedisBloom's `int`), node counts within it, whole
/// non-negative weights. Returns the bytes the digest will take.
fn check_fields(f: &SavedFields) -> Result<u64, &'static str> {
    if !f.compression.is_finite() || f.compression < 1.0 || f.compression.fract() != 0.0 {
        return Err("compression is not a positive whole number");
    }
    let cap = capacity(f.compression).ok_or("compression out of range")?;
    if cap != f.cap || cap > i32::MAX as u64 {
        return Err("capacity does not match the compression");
    }
    if f.merged > cap || f.unmerged > cap - f.merged {
        return Err("node counts exceed the capacity");
    }
    // Bounds, like means, may be infinite or NaN: a MERGE of a digest whose arithmetic made an
    // infinite mean carries it into the destination's bounds (RedisBloom's too).
    if f.compressions < 0 {
        return Err("negative compression count");
    }
    for w in [f.merged_weight, f.unmerged_weight] {
        if !(w.is_finite() && w >= 0.0 && w.fract() == 0.0 && w < I64_LIMIT) {
            return Err("weight is not a whole non-negative number");
        }
    }
    Ok(memory_for(cap))
}

/// Reads a `TDIS-TYPE` value: the scalar fields are checked against each other and the
/// digest's size against the source's budget before anything is allocated; centroids are read
/// one by one (a short payload fails before its claimed count is reached), with whole
/// non-negative weights.
pub fn load(input: &mut impl RdbSource, encver: i32) -> Result<TDigest, RdbError> {
    if encver != ENCODING_VERSION {
        return Err(RdbError::UnknownEncoding(encver));
    }
    let compression = input.load_double()?;
    let min = input.load_double()?;
    let max = input.load_double()?;
    let cap = input.load_unsigned()?;
    let merged = input.load_unsigned()?;
    let unmerged = input.load_unsigned()?;
    let compressions = input.load_unsigned()? as i64;
    let merged_weight = input.load_double()?;
    let unmerged_weight = input.load_double()?;
    let fields = SavedFields {
        compression,
        min,
        max,
        cap,
        merged,
        unmerged,
        compressions,
        merged_weight,
        unmerged_weight,
    };
    let bytes = check_fields(&fields).map_err(invalid)?;
    // Grows with what the payload really holds, never with the claimed count. A mean may be
    // infinite or NaN: RedisBloom's arithmetic (and ours) makes such centroids from finite
    // values (merging ±1.7e308 at compression 1), so refusing them would refuse our own saves;
    // every operation on them is defined (comparisons are false, no panics).
    let mut means = Vec::new();
    for _ in 0..merged {
        means.push(input.load_double()?);
    }
    let mut weights = Vec::new();
    for _ in 0..merged {
        weights.push(weight_field(input.load_double()?)?);
    }
    // The arrays are allocated only once their size is admitted against the budget.
    input
        .allowance()
        .admit(Buffer(bytes))
        .map_err(RdbError::OverBudget)?;
    TDigest::from_saved(&fields, &means, &weights)
        .ok_or_else(|| RdbError::Invalid("cannot allocate".into()))
}

/// Bytes of the snapshot header: the nine scalar fields, little-endian.
pub const HEADER_LEN: usize = 9 * 8;

impl TDigest {
    /// The digest as RedisBloom saves it: with its buffer merged (a copy, when there is a
    /// buffer to merge), so whatever is saved from it — an RDB value, a `DUMP`, a snapshot of
    /// `bloomgate serve` — reloads into the state RedisBloom reloads.
    pub fn as_saved(&self) -> std::borrow::Cow<'_, TDigest> {
        if self.unmerged > 0 && self.size() > 1 {
            let mut copy = self.clone();
            if copy.compress().is_ok() {
                return std::borrow::Cow::Owned(copy);
            }
        }
        std::borrow::Cow::Borrowed(self)
    }

    /// The snapshot header: the scalar fields in RDB order (8 bytes each, little-endian; the
    /// weights as integers), of [`TDigest::as_saved`]. The one chunk after it holds every slot
    /// in use (means, then weights): the saved form can still hold a one-observation buffer,
    /// which, unlike in an RDB value, is kept.
    pub fn dump_header(&self) -> Vec<u8> {
        let saved = self.as_saved();
        let f = saved.saved_fields();
        let mut out = Vec::with_capacity(HEADER_LEN);
        out.extend_from_slice(&f.compression.to_le_bytes());
        out.extend_from_slice(&f.min.to_le_bytes());
        out.extend_from_slice(&f.max.to_le_bytes());
        out.extend_from_slice(&f.cap.to_le_bytes());
        out.extend_from_slice(&f.merged.to_le_bytes());
        out.extend_from_slice(&f.unmerged.to_le_bytes());
        out.extend_from_slice(&f.compressions.to_le_bytes());
        out.extend_from_slice(&saved.merged_weight.to_le_bytes());
        out.extend_from_slice(&saved.unmerged_weight.to_le_bytes());
        out
    }

    fn header_fields(header: &[u8]) -> Result<SavedFields, &'static str> {
        if header.len() != HEADER_LEN {
            return Err("bad t-digest header length");
        }
        let word = |i: usize| -> [u8; 8] { header[i * 8..i * 8 + 8].try_into().expect("8 bytes") };
        let fields = SavedFields {
            compression: f64::from_le_bytes(word(0)),
            min: f64::from_le_bytes(word(1)),
            max: f64::from_le_bytes(word(2)),
            cap: u64::from_le_bytes(word(3)),
            merged: u64::from_le_bytes(word(4)),
            unmerged: u64::from_le_bytes(word(5)),
            compressions: i64::from_le_bytes(word(6)),
            merged_weight: i64::from_le_bytes(word(7)) as f64,
            unmerged_weight: i64::from_le_bytes(word(8)) as f64,
        };
        for i in [7, 8] {
            if i64::from_le_bytes(word(i)) < 0 {
                return Err("negative weight");
            }
        }
        Ok(fields)
    }

    /// Bytes the digest a snapshot header describes will take, every field checked.
    pub fn header_bytes(header: &[u8]) -> Result<u64, &'static str> {
        check_fields(&Self::header_fields(header)?)
    }

    /// An empty digest shaped as the header says (its slots come in the chunk).
    pub fn from_header(header: &[u8]) -> Result<Self, &'static str> {
        let fields = Self::header_fields(header)?;
        check_fields(&fields)?;
        let mut digest = Self::from_counts(&fields).ok_or("cannot allocate")?;
        // Exact integers (the header keeps them as such, not as doubles).
        digest.merged_weight = i64::from_le_bytes(header[56..64].try_into().expect("8"));
        digest.unmerged_weight = i64::from_le_bytes(header[64..72].try_into().expect("8"));
        Ok(digest)
    }

    /// The one chunk: `(1, bytes of the slots in use)`, or none for an empty digest.
    pub fn chunk_plan(&self) -> Vec<(i64, u64)> {
        let saved = self.as_saved();
        let used = (saved.merged + saved.unmerged) as u64;
        if used == 0 {
            Vec::new()
        } else {
            vec![(1, used * 16)]
        }
    }

    /// The slots in use: their means, then their weights.
    pub fn chunk_bytes(&self) -> Vec<u8> {
        let saved = self.as_saved();
        let used = saved.merged + saved.unmerged;
        let (means, weights) = saved.slots();
        let mut out = Vec::with_capacity(used * 16);
        means[..used]
            .iter()
            .for_each(|m| out.extend_from_slice(&m.to_le_bytes()));
        weights[..used]
            .iter()
            .for_each(|w| out.extend_from_slice(&w.to_le_bytes()));
        out
    }

    /// Writes the slots chunk back.
    pub fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
        let used = self.merged + self.unmerged;
        if iter != 1 || data.len() != used * 16 {
            return Err("invalid t-digest chunk");
        }
        let (means, weights) = self.slots_mut();
        for (i, bytes) in data.chunks_exact(8).enumerate() {
            let word: [u8; 8] = bytes.try_into().expect("8 bytes");
            if i < used {
                means[i] = f64::from_le_bytes(word);
            } else {
                weights[i - used] = i64::from_le_bytes(word);
            }
        }
        Ok(())
    }
}
