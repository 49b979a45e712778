//! RedisBloom's t-digest (`TDIS-TYPE`): a merging digest whose every answer is bit-for-bit the
//! one RedisBloom 8 gives for the same commands.
//!
//! RedisBloom keeps a digest as t-digest-c's merging histogram (the version its 8.x and 2.4
//! releases pin): two parallel arrays of `6 · compression + 10` centroid slots (means as
//! doubles, weights as 64-bit integers), the first `merged` slots sorted centroids, the next
//! `unmerged` slots a buffer of raw additions. Bit-exact answers follow from doing what it does,
//! in its order, with the same IEEE operations:
//!
//! - **add**: when the slots in use reach `cap - 1`, compress first; then the value goes into
//!   the next buffer slot (min/max updated). Weights are checked for 64-bit overflow.
//! - **compress** (before every read, and before saving): sort all used slots by mean with a
//!   quicksort that pivots on the middle slot and partitions Lomuto-style (its order among equal
//!   means decides which weights merge, so it is reproduced exactly); then one left-to-right
//!   pass merges slot `i` into the current centroid when the merged weight `w` keeps
//!   `w · compression / (2π · N · ln N)` at most `q(1-q)` at both ends of the centroid
//!   (`q` = weight before / after it over the total `N`), moving the mean by
//!   `(mean_i - mean) · w_i / w_new`. A digest with total weight ≤ 1 is left unmerged (a
//!   single observation stays in the buffer, and reads of it answer `nan`, as RedisBloom's do).
//! - **quantile / cdf / trimmed mean**: interpolation between centroid midpoints, with the
//!   special cases for singleton centroids and the tails toward min and max.
//!
//! The digest is written from these facts; arrays are allocated only after their size has been
//! checked against the memory budget (see [`TDigest::with_compression`]). Its saved form — the
//! RDB field order and `bloomgate serve`'s dump stream — is in `saved.rs`.

use crate::budget::{Admitted, Allowance, Shape};
use crate::types::cow::allocation_size;

mod saved;
pub use saved::{load, save, ENCODING_VERSION, HEADER_LEN};

/// RedisBloom's default compression.
pub const DEFAULT_COMPRESSION: i64 = 100;

/// `sizeof(td_histogram_t)` in RedisBloom 8: the struct MEMORY USAGE and INFO count beside the
/// two arrays.
pub const STRUCT_BYTES: u64 = 80;

/// 2^63: the first double beyond `i64` (`i64::MAX` rounds up to it).
pub const I64_LIMIT: f64 = i64::MAX as f64;

/// A weight addition would overflow, or a double the scale needs is infinite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow;

/// A merging t-digest, laid out as RedisBloom keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct TDigest {
    compression: f64,
    min: f64,
    max: f64,
    merged: usize,
    unmerged: usize,
    compressions: i64,
    merged_weight: i64,
    unmerged_weight: i64,
    /// `cap` slots each.
    means: Vec<f64>,
    weights: Vec<i64>,
}

/// `len` zeros in a vector the allocator may refuse (`None`, never an abort).
fn zeroed<T: Copy + Default>(len: usize) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).ok()?;
    v.resize(len, T::default());
    Some(v)
}

/// Centroid slots for a compression: `6 · trunc(compression) + 10`, or `None` when the arrays
/// could not be addressed (RedisBloom's own limit, far above any budget).
pub fn capacity(compression: f64) -> Option<u64> {
    let whole = compression as u64; // C's (size_t) conversion: truncates, saturates here
    if whole > (usize::MAX as u64 / 8 / 6) - 10 {
        return None;
    }
    Some(6 * whole + 10)
}

/// Bytes a digest of `cap` slots takes (RedisBloom's MEMORY USAGE and INFO `Memory usage`).
pub fn memory_for(cap: u64) -> u64 {
    STRUCT_BYTES.saturating_add(cap.saturating_mul(16))
}

/// What a new digest allocates: its compression's centroid slots.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TDigestShape {
    compression: f64,
    cap: u64,
}

impl Shape for TDigestShape {
    fn bytes(&self) -> u64 {
        memory_for(self.cap)
    }
}

impl TDigest {
    /// The shape of a digest of `compression` (≥ 1), or `None` when its capacity cannot exist
    /// (RedisBloom keeps it in a C int).
    pub fn shape(compression: i64) -> Option<TDigestShape> {
        let compression = compression as f64;
        let cap = capacity(compression)?;
        (cap <= i32::MAX as u64).then_some(TDigestShape { compression, cap })
    }

    /// An empty digest of an admitted shape; `None` if the allocator refuses its arrays.
    pub fn new(shape: Admitted<TDigestShape>) -> Option<Self> {
        let shape = shape.into_shape();
        Self::empty(shape.compression, shape.cap as usize)
    }

    /// An empty digest of `compression` (≥ 1), if its arrays fit in `budget` bytes; `None`
    /// otherwise (RedisBloom's allocation failure).
    pub fn with_compression(compression: i64, budget: u64) -> Option<Self> {
        let admitted = Allowance::new(budget)
            .admit(Self::shape(compression)?)
            .ok()?;
        Self::new(admitted)
    }

    /// An empty digest of `cap` slots; `None` if the allocator refuses them (never aborts).
    fn empty(compression: f64, cap: usize) -> Option<Self> {
        Some(Self {
            compression,
            min: f64::MAX,
            max: -f64::MAX,
            merged: 0,
            unmerged: 0,
            compressions: 0,
            merged_weight: 0,
            unmerged_weight: 0,
            means: zeroed(cap)?,
            weights: zeroed(cap)?,
        })
    }

    /// Empties the digest, keeping its compression and arrays (TDIGEST.RESET). Slots keep
    /// their old contents, as RedisBloom's do; only the counts say what is in use.
    pub fn reset(&mut self) {
        self.min = f64::MAX;
        self.max = -f64::MAX;
        self.merged = 0;
        self.unmerged = 0;
        self.merged_weight = 0;
        self.unmerged_weight = 0;
        self.compressions = 0;
    }

    /// The compression as RedisBloom reports it (a C `long long` conversion).
    pub fn compression(&self) -> i64 {
        self.compression as i64
    }

    /// Centroid slots.
    pub fn cap(&self) -> usize {
        self.means.len()
    }

    /// Sorted centroids at the front of the arrays.
    pub fn merged_nodes(&self) -> usize {
        self.merged
    }

    /// Buffered, not yet merged additions.
    pub fn unmerged_nodes(&self) -> usize {
        self.unmerged
    }

    /// Weight of the merged centroids.
    pub fn merged_weight(&self) -> i64 {
        self.merged_weight
    }

    /// Weight of the buffered additions.
    pub fn unmerged_weight(&self) -> i64 {
        self.unmerged_weight
    }

    /// Compressions since creation or the last reset.
    pub fn total_compressions(&self) -> i64 {
        self.compressions
    }

    /// All observations (merged and buffered weight).
    pub fn size(&self) -> i64 {
        self.merged_weight.wrapping_add(self.unmerged_weight)
    }

    /// Smallest value seen (`f64::MAX` when empty).
    pub fn min(&self) -> f64 {
        self.min
    }

    /// Largest value seen (`-f64::MAX` when empty).
    pub fn max(&self) -> f64 {
        self.max
    }

    /// Bytes the digest takes: RedisBloom 8's count (struct and both arrays).
    pub fn memory(&self) -> u64 {
        memory_for(self.cap() as u64)
    }

    /// Offers the centroid arrays (means, weights) to a host that moves allocations (see
    /// [`bloomgate::relocate`]).
    pub fn relocate(&mut self, walk: &mut bloomgate::relocate::Walk<'_>) {
        walk.vec(&mut self.means);
        walk.vec(&mut self.weights);
    }

    /// Heap bytes held, in allocator size classes.
    pub fn heap_bytes(&self) -> u64 {
        allocation_size(STRUCT_BYTES) + 2 * allocation_size(self.cap() as u64 * 8)
    }

    /// The merged centroids `(mean, weight)`.
    pub fn centroids(&self) -> impl Iterator<Item = (f64, i64)> + '_ {
        self.means[..self.merged]
            .iter()
            .copied()
            .zip(self.weights[..self.merged].iter().copied())
    }

    /// Adds `value` with `weight`; refuses (leaving the digest as it is, unless the compression
    /// it needed first ran) when a weight sum would overflow or the arrays are full.
    pub fn add(&mut self, value: f64, weight: i64) -> Result<(), Overflow> {
        if self.merged + self.unmerged + 1 >= self.cap() {
            self.compress()?;
        }
        let pos = self.merged + self.unmerged;
        if pos >= self.cap() {
            return Err(Overflow);
        }
        let unmerged = add_checked(self.unmerged_weight, weight)?;
        let total = add_checked(unmerged, self.merged_weight)?;
        scale_overflows(unmerged as f64, total as f64)?;
        if value < self.min {
            self.min = value;
        }
        if value > self.max {
            self.max = value;
        }
        self.means[pos] = value;
        self.weights[pos] = weight;
        self.unmerged += 1;
        self.unmerged_weight = unmerged;
        Ok(())
    }

    /// Adds every merged centroid of `from` (compressed first) to this digest, in order.
    pub fn merge_from(&mut self, from: &mut TDigest) -> Result<(), Overflow> {
        self.compress()?;
        from.compress()?;
        for i in 0..from.merged + from.unmerged {
            self.add(from.means[i], from.weights[i])?;
        }
        Ok(())
    }

    /// Merges the buffer into the centroids (see the module documentation).
    pub fn compress(&mut self) -> Result<(), Overflow> {
        if self.unmerged == 0 {
            return Ok(());
        }
        let n = self.merged + self.unmerged;
        sort_slots(&mut self.means[..n], &mut self.weights[..n]);
        let total = self.merged_weight as f64 + self.unmerged_weight as f64;
        scale_overflows(self.unmerged_weight as f64, total)?;
        if total <= 1.0 {
            return Ok(());
        }
        let denominator = 2.0 * std::f64::consts::PI * total * total.ln();
        if denominator == f64::INFINITY {
            return Err(Overflow);
        }
        let normalizer = self.compression / denominator;
        if normalizer == f64::INFINITY {
            return Err(Overflow);
        }
        let (means, weights) = (&mut self.means, &mut self.weights);
        let mut cur = 0;
        let mut before = 0.0f64;
        for i in 1..n {
            let proposed = weights[cur] as f64 + weights[i] as f64;
            let z = proposed * normalizer;
            let q0 = before / total;
            let q2 = (before + proposed) / total;
            if z <= q0 * (1.0 - q0) && z <= q2 * (1.0 - q2) {
                weights[cur] += weights[i];
                let delta = means[i] - means[cur];
                means[cur] += (delta * weights[i] as f64) / weights[cur] as f64;
            } else {
                before += weights[cur] as f64;
                cur += 1;
                weights[cur] = weights[i];
                means[cur] = means[i];
            }
            if cur != i {
                weights[i] = 0;
                means[i] = 0.0;
            }
        }
        self.merged = cur + 1;
        self.merged_weight = total as i64;
        self.unmerged = 0;
        self.unmerged_weight = 0;
        self.compressions += 1;
        Ok(())
    }

    /// The fraction of observations ≤ `x` (half of those equal), after compressing; `nan` when
    /// nothing is merged.
    pub fn cdf(&mut self, x: f64) -> f64 {
        let _ = self.compress();
        let n = self.merged;
        if n == 0 {
            return f64::NAN;
        }
        if x < self.min {
            return 0.0;
        }
        if x > self.max {
            return 1.0;
        }
        if n == 1 {
            let width = self.max - self.min;
            return if x - self.min <= width {
                0.5
            } else {
                (x - self.min) / width
            };
        }
        let total = self.merged_weight as f64;
        let (means, weights) = (&self.means[..n], &self.weights[..n]);
        let (first_mean, first_weight) = (means[0], weights[0] as f64);
        if x < first_mean {
            let width = first_mean - self.min;
            if width <= 0.0 {
                return 0.0;
            }
            if x == self.min {
                return 0.5 / total;
            }
            return (1.0 + (x - self.min) / width * (first_weight / 2.0 - 1.0)) / total;
        }
        let (last_mean, last_weight) = (means[n - 1], weights[n - 1] as f64);
        if x > last_mean {
            let width = self.max - last_mean;
            if width <= 0.0 {
                return 1.0;
            }
            if x == self.max {
                return 1.0 - 0.5 / total;
            }
            let tail = (1.0 + (self.max - x) / width * (last_weight / 2.0 - 1.0)) / total;
            return 1.0 - tail;
        }
        let mut before = 0.0f64;
        let mut i = 0;
        while i < n - 1 {
            if means[i] == x {
                let mut equal = 0.0f64;
                while i < n && means[i] == x {
                    equal += weights[i] as f64;
                    i += 1;
                }
                return (before + equal / 2.0) / total;
            }
            if means[i] <= x && x < means[i + 1] {
                let (w, w_next) = (weights[i] as f64, weights[i + 1] as f64);
                let (m, m_next) = (means[i], means[i + 1]);
                let half_span = (w + w_next) / 2.0;
                if m_next - m <= 0.0 {
                    return (before + half_span) / total;
                }
                // Singleton centroids hold all their weight at their mean.
                let (mut left_out, mut right_out) = (0.0, 0.0);
                if w == 1.0 {
                    if w_next == 1.0 {
                        return (before + 1.0) / total;
                    }
                    left_out = 0.5;
                } else if w_next == 1.0 {
                    right_out = 0.5;
                }
                let inner = half_span - left_out - right_out;
                let base = before + w / 2.0 + left_out;
                return (base + inner * (x - m) / (m_next - m)) / total;
            }
            before += weights[i] as f64;
            i += 1;
        }
        1.0 - 0.5 / total
    }

    /// The value at each fraction of `qs` (each in [0, 1]), after compressing: one walk over
    /// the centroids for each ascending run, as RedisBloom answers TDIGEST.QUANTILE.
    pub fn quantiles(&mut self, qs: &[f64]) -> Vec<f64> {
        let _ = self.compress();
        let mut out = Vec::with_capacity(qs.len());
        let mut start = 0;
        while start < qs.len() {
            let mut end = start;
            while end + 1 < qs.len() && qs[end] <= qs[end + 1] {
                end += 1;
            }
            self.quantile_run(&qs[start..=end], &mut out);
            start = end + 1;
        }
        out
    }

    /// The value at fraction `q` (`nan` outside [0, 1] or when nothing is merged).
    pub fn quantile(&mut self, q: f64) -> f64 {
        let _ = self.compress();
        if !(0.0..=1.0).contains(&q) || self.merged == 0 {
            return f64::NAN;
        }
        if self.merged == 1 {
            return self.means[0];
        }
        let index = q * self.merged_weight as f64;
        if index < 1.0 {
            return self.min;
        }
        let mut walk = Walk::new(self);
        walk.value_at(self, index)
    }

    /// One ascending run of quantiles, the walk resuming where the previous one stopped.
    fn quantile_run(&self, qs: &[f64], out: &mut Vec<f64>) {
        match self.merged {
            0 => out.extend(qs.iter().map(|_| f64::NAN)),
            1 => out.extend(qs.iter().map(|q| {
                if (0.0..=1.0).contains(q) {
                    self.means[0]
                } else {
                    f64::NAN
                }
            })),
            _ => {
                let mut walk = Walk::new(self);
                for &q in qs {
                    let index = q * self.merged_weight as f64;
                    out.push(walk.value_at(self, index));
                }
            }
        }
    }

    /// The mean of the observations between fractions `low` and `high` (in [0, 1]), after
    /// compressing; `nan` when nothing is merged.
    pub fn trimmed_mean(&mut self, low: f64, high: f64) -> f64 {
        let _ = self.compress();
        if self.merged == 0 || !(0.0..=1.0).contains(&low) || !(0.0..=1.0).contains(&high) {
            return f64::NAN;
        }
        if self.merged == 1 {
            return self.means[0];
        }
        let total = self.merged_weight as f64;
        let (from, to) = ((total * low).floor(), (total * high).ceil());
        let (mut done, mut sum, mut count) = (0.0f64, 0.0f64, 0.0f64);
        for (mean, weight) in self.centroids() {
            let weight = weight as f64;
            let mut take = weight;
            take -= (from - done).max(0.0).min(take);
            take = (to - done).max(0.0).min(take);
            done += weight;
            sum += mean * take;
            count += take;
            if done >= to {
                break;
            }
        }
        sum / count
    }

    /// The fields RedisBloom saves, for the RDB writer.
    pub(crate) fn saved_fields(&self) -> SavedFields {
        SavedFields {
            compression: self.compression,
            min: self.min,
            max: self.max,
            cap: self.cap() as u64,
            merged: self.merged as u64,
            unmerged: self.unmerged as u64,
            compressions: self.compressions,
            merged_weight: self.merged_weight as f64,
            unmerged_weight: self.unmerged_weight as f64,
        }
    }

    /// A digest from saved fields and its merged centroids (validated by the caller:
    /// `fields.cap` is the compression's capacity, `merged` ≤ cap, one mean and weight per
    /// merged centroid); other slots are zero, as a freshly loaded RedisBloom digest's are.
    pub(crate) fn from_saved(fields: &SavedFields, means: &[f64], weights: &[i64]) -> Option<Self> {
        let mut digest = Self::empty(fields.compression, fields.cap as usize)?;
        digest.min = fields.min;
        digest.max = fields.max;
        digest.merged = fields.merged as usize;
        digest.unmerged = fields.unmerged as usize;
        digest.compressions = fields.compressions;
        digest.merged_weight = fields.merged_weight as i64;
        digest.unmerged_weight = fields.unmerged_weight as i64;
        digest.means[..means.len()].copy_from_slice(means);
        digest.weights[..weights.len()].copy_from_slice(weights);
        Some(digest)
    }

    /// Every slot, for the snapshot stream (which keeps the buffer and stale slots, so a
    /// restart continues exactly where it stopped).
    pub(crate) fn slots(&self) -> (&[f64], &[i64]) {
        (&self.means, &self.weights)
    }

    /// Mutable [`TDigest::slots`], for the snapshot reader.
    pub(crate) fn slots_mut(&mut self) -> (&mut [f64], &mut [i64]) {
        (&mut self.means, &mut self.weights)
    }

    /// A digest with these counts and empty slots, for the snapshot reader; `None` if the
    /// allocator refuses its arrays.
    pub(crate) fn from_counts(fields: &SavedFields) -> Option<Self> {
        Self::from_saved(fields, &[], &[])
    }
}

/// The scalar fields of a digest, in RedisBloom's RDB order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SavedFields {
    pub compression: f64,
    pub min: f64,
    pub max: f64,
    pub cap: u64,
    pub merged: u64,
    pub unmerged: u64,
    pub compressions: i64,
    pub merged_weight: f64,
    pub unmerged_weight: f64,
}

/// `a + b` unless it overflows `i64` (t-digest-c's test, including its behaviour for a
/// negative `b`, which only a forged value could hold).
fn add_checked(a: i64, b: i64) -> Result<i64, Overflow> {
    let safe = if b < 0 {
        a >= i64::MAX.wrapping_sub(b)
    } else {
        a <= i64::MAX - b
    };
    if safe {
        Ok(a.wrapping_add(b))
    } else {
        Err(Overflow)
    }
}

/// Whether the scale function would meet an infinity for these weights.
fn scale_overflows(unmerged: f64, total: f64) -> Result<(), Overflow> {
    if unmerged == f64::INFINITY || total == f64::INFINITY {
        return Err(Overflow);
    }
    if 2.0 * std::f64::consts::PI * total * total.ln() == f64::INFINITY {
        return Err(Overflow);
    }
    Ok(())
}

/// Sorts the used slots by mean, weights alongside, in exactly the order t-digest-c's quicksort
/// leaves them: a range of two is swapped if out of order; a longer one is partitioned around
/// its middle slot (moved to the end; slots strictly below it swapped forward in scan order;
/// the pivot swapped into place), then each side is sorted. Ranges are kept on an explicit
/// stack, so no input can exhaust the call stack.
fn sort_slots(means: &mut [f64], weights: &mut [i64]) {
    if means.len() < 2 {
        return;
    }
    let mut ranges = vec![(0usize, means.len() - 1)];
    while let Some((start, end)) = ranges.pop() {
        if start >= end {
            continue;
        }
        if end - start == 1 {
            if means[start] > means[end] {
                means.swap(start, end);
                weights.swap(start, end);
            }
            continue;
        }
        let pivot_at = (start + end) / 2;
        let pivot = means[pivot_at];
        means.swap(pivot_at, end);
        weights.swap(pivot_at, end);
        let mut next = start;
        for j in start..end {
            if means[j] < pivot {
                means.swap(next, j);
                weights.swap(next, j);
                next += 1;
            }
        }
        means.swap(next, end);
        weights.swap(next, end);
        if next > start {
            ranges.push((start, next - 1));
        }
        ranges.push((next + 1, end));
    }
}

/// A walk over the centroids toward increasing ranks, shared by the quantiles of one run.
struct Walk {
    before: f64,
    at: usize,
}

impl Walk {
    fn new(d: &TDigest) -> Self {
        Self {
            before: d.weights[0] as f64 / 2.0,
            at: 0,
        }
    }

    /// The value at rank `index` (0..total), with at least two merged centroids.
    fn value_at(&mut self, d: &TDigest, index: f64) -> f64 {
        let n = d.merged;
        let total = d.merged_weight as f64;
        let first_weight = d.weights[0] as f64;
        if first_weight > 1.0 && index < first_weight / 2.0 {
            // One observation sits at min: interpolate toward the first mean with the rest.
            return d.min + (index - 1.0) / (first_weight / 2.0 - 1.0) * (d.means[0] - d.min);
        }
        if index > (d.merged_weight - 1) as f64 {
            return d.max;
        }
        let (last_mean, last_weight) = (d.means[n - 1], d.weights[n - 1] as f64);
        if last_weight > 1.0 && total - index <= last_weight / 2.0 {
            return d.max - (total - index - 1.0) / (last_weight / 2.0 - 1.0) * (d.max - last_mean);
        }
        while self.at < n - 1 {
            let i = self.at;
            let (w, w_next) = (d.weights[i] as f64, d.weights[i + 1] as f64);
            let (m, m_next) = (d.means[i], d.means[i + 1]);
            let half_span = (w + w_next) / 2.0;
            if self.before + half_span > index {
                let mut left_unit = 0.0;
                if w == 1.0 {
                    if index - self.before < 0.5 {
                        return m;
                    }
                    left_unit = 0.5;
                }
                let mut right_unit = 0.0;
                if w_next == 1.0 {
                    if self.before + half_span - index <= 0.5 {
                        return m_next;
                    }
                    right_unit = 0.5;
                }
                let z1 = index - self.before - left_unit;
                let z2 = self.before + half_span - index - right_unit;
                return weighted_average(m, z2, m_next, z1);
            }
            self.before += half_span;
            self.at += 1;
        }
        let z1 = index - total - last_weight / 2.0;
        let z2 = last_weight / 2.0 - z1;
        weighted_average(last_mean, z1, d.max, z2)
    }
}

/// `(x1·w1 + x2·w2) / (w1 + w2)` clamped between the two values, with the smaller value first.
fn weighted_average(x1: f64, w1: f64, x2: f64, w2: f64) -> f64 {
    let (x1, w1, x2, w2) = if x1 <= x2 {
        (x1, w1, x2, w2)
    } else {
        (x2, w2, x1, w1)
    };
    let x = (x1 * w1 + x2 * w2) / (w1 + w2);
    // C's max(x1, min(x, x2)) with `>` / `<` comparisons (NaN falls through to the second).
    let low = if x < x2 { x } else { x2 };
    if x1 > low {
        x1
    } else {
        low
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::DialectType;

    fn digest(values: &[f64]) -> TDigest {
        let mut d = TDigest::with_compression(DEFAULT_COMPRESSION, u64::MAX).unwrap();
        for &v in values {
            d.add(v, 1).unwrap();
        }
        d
    }

    #[test]
    fn sizes_follow_the_compression() {
        let d = digest(&[]);
        assert_eq!(d.cap(), 610);
        assert_eq!(d.memory(), 9840);
        assert!(TDigest::with_compression(100, 9839).is_none());
        assert!(TDigest::with_compression(i64::MAX, u64::MAX).is_none());
    }

    #[test]
    fn one_observation_stays_buffered_as_in_redisbloom() {
        let mut d = digest(&[5.0]);
        assert!(d.quantile(0.5).is_nan());
        assert!(d.cdf(5.0).is_nan());
        assert_eq!((d.merged_nodes(), d.unmerged_nodes()), (0, 1));
        d.add(6.0, 1).unwrap();
        assert_eq!(d.quantiles(&[0.0, 0.5, 1.0]), vec![5.0, 6.0, 6.0]);
        assert_eq!(d.total_compressions(), 1);
    }

    #[test]
    fn sort_matches_a_stable_reference_on_distinct_keys() {
        let mut means: Vec<f64> = (0..500).map(|i| ((i * 7919) % 503) as f64).collect();
        let mut weights: Vec<i64> = means.iter().map(|&m| m as i64).collect();
        sort_slots(&mut means, &mut weights);
        assert!(means.windows(2).all(|w| w[0] <= w[1]));
        assert!(means.iter().zip(&weights).all(|(&m, &w)| m as i64 == w));
    }

    /// A digest with merged centroids and a buffer.
    fn busy() -> TDigest {
        let mut d = TDigest::with_compression(5, u64::MAX).unwrap();
        for i in 0..157 {
            d.add(f64::from((i * 37) % 101), 1).unwrap();
        }
        assert!(d.unmerged_nodes() > 0 && d.merged_nodes() > 0);
        d
    }

    #[test]
    fn snapshot_stream_reloads_the_saved_form() {
        let d = busy();
        let header = d.dump_header();
        assert_eq!(TDigest::header_bytes(&header), Ok(d.memory()));
        let mut back = TDigest::from_header(&header).unwrap();
        for (iter, len) in d.chunk_plan() {
            let chunk = d.chunk_bytes();
            assert_eq!(chunk.len() as u64, len);
            back.load_chunk(iter, &chunk).unwrap();
        }
        assert_eq!(&back, d.as_saved().as_ref());
        let mut forged = header.clone();
        forged[24..32].copy_from_slice(&41u64.to_le_bytes()); // capacity
        assert!(TDigest::header_bytes(&forged).is_err());
        let mut forged = header;
        forged[32..40].copy_from_slice(&41u64.to_le_bytes()); // merged > capacity
        assert!(TDigest::from_header(&forged).is_err());
    }

    #[test]
    fn rdb_fields_round_trip_and_forgeries_are_refused() {
        use crate::encoding::rdb_format::{dump_payload, restore_payload, PayloadError};
        let d = busy();
        let value = d.clone().into_value();
        let payload = dump_payload(&value);
        let crate::value::Value::TDigest(back) = restore_payload(&payload, 1 << 20).unwrap() else {
            panic!("not a t-digest")
        };
        assert_eq!(*back, d.as_saved().into_owned());
        // Over the budget: refused before the arrays are allocated.
        assert_eq!(
            restore_payload(&payload, 100).unwrap_err(),
            PayloadError::OverBudget
        );
    }

    /// Commands make non-finite means from finite values (as RedisBloom's do); a digest holding
    /// one saves and loads back byte for byte, and answers after the reload as before.
    #[test]
    fn non_finite_means_made_by_commands_save_and_load() {
        use crate::encoding::rdb_format::{dump_payload, restore_payload};
        let mut d = TDigest::with_compression(1, u64::MAX).unwrap();
        let (hi, lo) = (1.7e308, -1.7e308);
        for v in [
            lo, hi, hi, lo, hi, hi, hi, hi, hi, hi, hi, lo, lo, lo, lo, hi, hi, lo,
        ] {
            d.add(v, 1).unwrap();
        }
        d.compress().unwrap();
        assert!(d.centroids().any(|(mean, _)| !mean.is_finite()));
        let median = d.quantile(0.5);
        let payload = dump_payload(&d.clone().into_value());
        let back = restore_payload(&payload, 1 << 20).unwrap();
        assert_eq!(dump_payload(&back), payload);
        let crate::value::Value::TDigest(mut back) = back else {
            panic!("not a t-digest")
        };
        assert_eq!(back.quantile(0.5).to_bits(), median.to_bits());
        let _ = (
            back.cdf(0.0),
            back.trimmed_mean(0.1, 0.9),
            back.quantile(1.0),
        );
        // MERGE carries a non-finite mean into the destination's bounds: that saves and loads too.
        let mut dest = TDigest::with_compression(1, u64::MAX).unwrap();
        dest.add(1.0, 1).unwrap();
        dest.merge_from(&mut back).unwrap();
        let payload = dump_payload(&dest.into_value());
        assert_eq!(
            dump_payload(&restore_payload(&payload, 1 << 20).unwrap()),
            payload
        );
    }

    #[test]
    fn overflowing_weights_are_refused() {
        let mut d = digest(&[1.0, 2.0]);
        assert_eq!(d.add(3.0, i64::MAX), Err(Overflow));
        assert_eq!(add_checked(i64::MAX - 1, 1), Ok(i64::MAX));
    }
}
