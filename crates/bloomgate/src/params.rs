//! Sizing: turns what a user wants (items, false-positive rate, memory) into a validated
//! (bits, hashes) pair per layout, and predicts the false-positive rate of any configuration.
//!
//! Classic layout (k independent probes over m bits, n items):
//!   p = (1 − (1 − 1/m)^(kn))^k ≈ (1 − e^(−kn/m))^k,
//!   optimal m = −n·ln p / (ln 2)^2, optimal k = (m/n)·ln 2.
//!   e.g. 1% → 9.585 bits/key, k = 7 (10M items: measured 1.006% on 5M absent keys,
//!   `tests/classic.rs`).
//!
//! Blocked layout (512-bit blocks, see `hash.rs` for the probe scheme): keys spread unevenly over
//! blocks, so the classic formula is optimistic. A block's load j is Poisson(λ = n·512/m) and
//!   p = Σ_j Pois(j; λ) · Π_w (1 − (1 − 1/64)^(c_w·j))^(c_w),
//! where c_w is the number of probes that land in word w (k/8 or k/8 + 1): probes of one key in
//! different words are independent, each word of 64 bits fills like a small classic filter.
//! The hash-width term (two keys with the same block and the same 64-bit `hi`) is ≤ 2^−48 per
//! query for k ≤ 8 and is ignored. For k ≤ 8 (one probe per word) the per-word term is exact;
//! for k > 8 it treats two probes in one word as independent (measured k = 16 at 24 bits/key:
//! 7.3e-5 vs model 6.5e-5, within the test tolerance).
//! Model numbers: 10 bits/key → k = 8, 1.049% (measured 1.055%; split-block 256-bit: 1.26%);
//! 1% needs 10.10 bits/key (k = 8); 0.1% needs 15.7 (k = 8); 0.01% needs 22.8 (k = 16).
//! k = 9..15 never win: they load some words twice while others keep one probe.
//! The sizer picks the fewest blocks whose best-k model FPR is ≤ p (bisection, ≈40-70 ms).
//!
//! FastLocal layout (512-bit blocks, k probes anywhere in the block from one 32-bit hash, see
//! `hash.rs`): the same Poisson mixture with the block as one 512-bit classic filter,
//!   p = Σ_j Pois(j; λ) · [(1 − (1 − 1/512)^(k·j))^k + (1 − that) · (1 − (1 − 2^−32)^j)],
//! the second term being a query whose 32-bit probe hash equals that of one of the j keys in its
//! block (then all its bits are set whatever the fill; ≈ λ·2^−32, ≤ 1.2e-8 at 10 bits/key,
//! which keeps the sizer honest at very low rates). Model numbers: 10 bits/key → k = 7, 0.955%
//! (measured 0.96%, `tests/fastlocal.rs`); 1% needs 9.9 bits/key.

use crate::codec::BodyReader;
use crate::error::{Error, Result};
use crate::hash::BLOCK_BITS;

/// How bits are laid out: probes over the whole array, or all of a key's probes in one 512-bit
/// block (one cache line).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Layout {
    /// k probes over the whole array.
    Classic,
    /// All k probes in one 512-bit block (one cache line), one bit per 64-bit word per round.
    Blocked,
    /// All k probes anywhere in one 512-bit block, from one 32-bit hash by multiplication
    /// (FastLocalBloom-style): more accurate and faster than `Blocked`.
    FastLocal,
}

/// A validated filter configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Params {
    /// The bit layout the sizing model is for.
    pub layout: Layout,
    /// Size of the bit array: a multiple of 64 (classic) or 512 (blocked).
    pub bits: u64,
    /// Probes per key (k), 1..=[`MAX_HASHES`].
    pub hashes: u32,
    /// Number of items the filter was designed for (including any headroom).
    pub items: u64,
}

/// Largest k accepted. More probes than this never helps: the optimal k for p = 1e-19 is 63.
pub const MAX_HASHES: u32 = 64;

/// Largest filter accepted: 1 TiB of bits. Anything larger is far beyond this machine kind and
/// almost certainly a unit mistake; it is refused with `Error::TooLarge` instead of allocating.
pub const MAX_BYTES: u64 = 1 << 40;

/// [`MAX_BYTES`] in bits.
pub const MAX_BITS: u64 = MAX_BYTES * 8;

impl Layout {
    /// Size granularity in bits: one word (classic) or one block (blocked).
    pub fn granule_bits(self) -> u64 {
        match self {
            Layout::Classic => 64,
            Layout::Blocked | Layout::FastLocal => BLOCK_BITS,
        }
    }

    /// Model FPR of `bits`/`hashes` after `items` insertions in this layout.
    pub fn fpr(self, bits: u64, hashes: u32, items: u64) -> f64 {
        match self {
            Layout::Classic => classic_fpr(bits, hashes, items),
            Layout::Blocked | Layout::FastLocal => {
                if hashes == 0 {
                    return 1.0;
                }
                local_fpr_by_hashes(self, bits, items, hashes)[hashes as usize - 1]
            }
        }
    }

    /// The k in 1..=`max_hashes` with the lowest model FPR for `bits` and `items`.
    fn best_hashes(self, bits: u64, items: u64, max_hashes: u32) -> u32 {
        match self {
            Layout::Classic => {
                let k = (bits as f64 / items as f64 * std::f64::consts::LN_2).round();
                (k.max(1.0) as u32).min(max_hashes)
            }
            Layout::Blocked | Layout::FastLocal => {
                best_local_hashes(self, bits, items, max_hashes).0
            }
        }
    }
}

impl Params {
    /// Size for `items` at target `fpr` with no headroom and k ≤ [`MAX_HASHES`].
    /// Classic: m = ceil(−n ln p / ln²2) rounded up to whole words, k = round(m/n·ln 2).
    /// Blocked: the fewest 512-bit blocks whose model FPR ≤ p with the best k for that size.
    pub fn for_items(layout: Layout, items: u64, fpr: f64) -> Result<Params> {
        ParamsBuilder::new(layout, items, fpr).build()
    }

    /// Builder for sizing with headroom or a cap on k.
    pub fn builder(layout: Layout, items: u64, fpr: f64) -> ParamsBuilder {
        ParamsBuilder::new(layout, items, fpr)
    }

    /// Given a size in bits (rounded up to the layout's granularity) and items, choose the best k.
    pub fn for_bits(layout: Layout, bits: u64, items: u64) -> Result<Params> {
        check_items(items)?;
        let bits = round_bits_up(layout, bits)?;
        let hashes = layout.best_hashes(bits, items, MAX_HASHES);
        Ok(Params {
            layout,
            bits,
            hashes,
            items,
        })
    }

    /// Largest filter that fits in `bytes` (rounded down to the layout's granularity), best k.
    pub fn for_memory(layout: Layout, bytes: u64, items: u64) -> Result<Params> {
        let granule = layout.granule_bits();
        let bits = bytes.checked_mul(8).ok_or_else(|| too_large(u64::MAX))? / granule * granule;
        if bits == 0 {
            return Err(Error::InvalidParameter(format!(
                "a memory budget of {bytes} bytes is smaller than one {granule}-bit unit"
            )));
        }
        Params::for_bits(layout, bits, items)
    }

    /// An explicit configuration; `bits` is rounded up to the layout's granularity.
    pub fn new(layout: Layout, bits: u64, hashes: u32, items: u64) -> Result<Params> {
        let params = Params {
            layout,
            bits: round_bits_up(layout, bits)?,
            hashes,
            items,
        };
        params.validate()?;
        Ok(params)
    }

    /// Checks every field (used by constructors and by decoders of untrusted data).
    /// [`Self::validate`], and that the parameters are of `layout`, as `filter` (a type name for
    /// the error) needs.
    pub fn validate_for(&self, layout: Layout, filter: &str) -> Result<()> {
        if self.layout != layout {
            return Err(Error::InvalidParameter(format!(
                "{filter} needs Layout::{layout:?} parameters"
            )));
        }
        self.validate()
    }

    /// Checks sizes and k against the layout and the limits ([`MAX_HASHES`], [`MAX_BITS`]).
    pub fn validate(&self) -> Result<()> {
        check_items(self.items)?;
        check_hashes(self.hashes)?;
        let granule = self.layout.granule_bits();
        if self.bits == 0 || !self.bits.is_multiple_of(granule) {
            return Err(Error::InvalidParameter(format!(
                "bits must be a positive multiple of {granule} for the {:?} layout, got {}",
                self.layout, self.bits
            )));
        }
        if self.bits > MAX_BITS {
            return Err(too_large(self.bits));
        }
        if usize::try_from(self.bits / 8).is_err() {
            return Err(Error::TooLarge(format!(
                "{} bits exceed this platform's address space",
                self.bits
            )));
        }
        Ok(())
    }

    /// Model FPR after the design number of items.
    pub fn fpr(&self) -> f64 {
        self.fpr_at(self.items)
    }

    /// Model FPR after `items` insertions.
    pub fn fpr_at(&self, items: u64) -> f64 {
        self.layout.fpr(self.bits, self.hashes, items)
    }

    /// Bytes of bit storage.
    pub fn bytes(&self) -> u64 {
        self.bits / 8
    }

    /// Number of u64 words of bit storage.
    pub fn words(&self) -> usize {
        (self.bits / 64) as usize
    }

    /// Bits per design item.
    pub fn bits_per_item(&self) -> f64 {
        self.bits as f64 / self.items as f64
    }
}

/// Sizing from (items, fpr) with optional headroom and a cap on k.
#[derive(Clone, Copy, Debug)]
pub struct ParamsBuilder {
    layout: Layout,
    items: u64,
    fpr: f64,
    headroom: f64,
    max_hashes: u32,
}

impl ParamsBuilder {
    /// A builder for `items` keys at false-positive rate `fpr` (see [`Params::builder`]).
    pub fn new(layout: Layout, items: u64, fpr: f64) -> Self {
        ParamsBuilder {
            layout,
            items,
            fpr,
            headroom: 0.0,
            max_hashes: MAX_HASHES,
        }
    }

    /// Size for `items · (1 + headroom)` (e.g. 0.2 = 20% spare). The result's `items` is that
    /// larger design capacity; `fpr_at(n)` gives the rate at the original n.
    pub fn headroom(mut self, headroom: f64) -> Self {
        self.headroom = headroom;
        self
    }

    /// Cap k (fewer memory touches per query). Classic: k is clamped and the resulting, higher
    /// FPR is reported by `Params::fpr`. Blocked: the sizer searches only k ≤ cap and grows the
    /// array until it still reaches the target.
    pub fn max_hashes(mut self, max_hashes: u32) -> Self {
        self.max_hashes = max_hashes;
        self
    }

    /// The sized parameters.
    pub fn build(self) -> Result<Params> {
        let ParamsBuilder {
            layout,
            items,
            fpr,
            headroom,
            max_hashes,
        } = self;
        check_items(items)?;
        check_hashes(max_hashes)?;
        if !(fpr > 0.0 && fpr < 1.0) {
            return Err(Error::InvalidParameter(format!(
                "false-positive rate must be in (0, 1), got {fpr}"
            )));
        }
        if !(headroom >= 0.0 && headroom.is_finite()) {
            return Err(Error::InvalidParameter(format!(
                "headroom must be a finite number ≥ 0, got {headroom}"
            )));
        }
        let design = (items as f64 * (1.0 + headroom)).ceil();
        if design >= u64::MAX as f64 {
            return Err(Error::TooLarge(format!(
                "{items} items with headroom {headroom}"
            )));
        }
        let items = design as u64;
        let classic_bits = -(items as f64) * fpr.ln() / (std::f64::consts::LN_2.powi(2));
        if classic_bits > MAX_BITS as f64 {
            return Err(too_large_f(classic_bits));
        }
        let classic_bits = round_bits_up(Layout::Classic, (classic_bits.ceil() as u64).max(1))?;
        match layout {
            Layout::Classic => {
                let hashes = layout.best_hashes(classic_bits, items, max_hashes);
                Ok(Params {
                    layout,
                    bits: classic_bits,
                    hashes,
                    items,
                })
            }
            Layout::Blocked | Layout::FastLocal => {
                size_local(layout, items, fpr, max_hashes, classic_bits)
            }
        }
    }
}

/// Fewest blocks whose best-k model FPR ≤ `fpr` (a block layout). Blocks never beat classic at
/// the same size, so the classic size is a lower bound; double until the target is met, then
/// bisect (the best-k FPR falls monotonically with size).
fn size_local(
    layout: Layout,
    items: u64,
    fpr: f64,
    max_hashes: u32,
    classic_bits: u64,
) -> Result<Params> {
    let meets =
        |blocks: u64| best_local_hashes(layout, blocks * BLOCK_BITS, items, max_hashes).1 <= fpr;
    let max_blocks = MAX_BITS / BLOCK_BITS;
    let mut low = classic_bits.div_ceil(BLOCK_BITS).max(1) - 1; // fails (or is 0)
    let mut high = low.max(1);
    while !meets(high) {
        if high == max_blocks {
            return Err(too_large(u64::MAX));
        }
        low = high;
        high = high.saturating_mul(2).min(max_blocks);
    }
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if meets(mid) {
            high = mid;
        } else {
            low = mid;
        }
    }
    let bits = high * BLOCK_BITS;
    let hashes = best_local_hashes(layout, bits, items, max_hashes).0;
    Ok(Params {
        layout,
        bits,
        hashes,
        items,
    })
}

/// (best k, its FPR) for a block layout. Every k is tried: for the blocked layout the FPR is not
/// unimodal in k (k = 9..15 load some words twice and mostly lose to k = 8, but win narrowly
/// near 20 bits/key; k = 16 wins again above ~21 bits/key).
fn best_local_hashes(layout: Layout, bits: u64, items: u64, max_hashes: u32) -> (u32, f64) {
    local_fpr_by_hashes(layout, bits, items, max_hashes)
        .into_iter()
        .zip(1..)
        .fold((1, f64::INFINITY), |best, (fpr, k)| {
            if fpr < best.1 {
                (k, fpr)
            } else {
                best
            }
        })
}

/// Swamidass–Baldi cardinality estimate from the number of set bits X:
/// n̂ = −(m/k)·ln(1 − X/m). A full array (X = m) is treated as X = m − ½ so the result stays finite.
pub fn estimate_items(bits: u64, hashes: u32, ones: u64) -> f64 {
    if bits == 0 || hashes == 0 {
        return 0.0;
    }
    let ones = (ones as f64).min(bits as f64 - 0.5);
    -(bits as f64 / f64::from(hashes)) * (-ones / bits as f64).ln_1p()
}

/// Two filters can be combined bit-for-bit only if layout, size, k and seed all match.
pub(crate) fn check_compatible(a: &Params, a_seed: u64, b: &Params, b_seed: u64) -> Result<()> {
    if a.layout != b.layout || a.bits != b.bits || a.hashes != b.hashes {
        return Err(Error::Incompatible(format!(
            "{:?} {} bits k={} vs {:?} {} bits k={}",
            a.layout, a.bits, a.hashes, b.layout, b.bits, b.hashes
        )));
    }
    if a_seed != b_seed {
        return Err(Error::Incompatible(format!(
            "seed {a_seed} vs seed {b_seed}"
        )));
    }
    Ok(())
}

/// Body prefix shared by the classic and blocked file formats: bits u64, hashes u32,
/// design items u64, len u64 (all little-endian). The words follow.
pub(crate) fn encode_body_params(params: &Params, len: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(&params.bits.to_le_bytes());
    out.extend_from_slice(&params.hashes.to_le_bytes());
    out.extend_from_slice(&params.items.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
}

/// Inverse of [`encode_body_params`]; every field is validated (as `Error::Corrupt`) before the
/// caller allocates the bit array.
pub(crate) fn decode_body_params(
    body: &mut BodyReader<'_>,
    layout: Layout,
) -> Result<(Params, u64)> {
    let params = Params {
        layout,
        bits: body.u64()?,
        hashes: body.u32()?,
        items: body.u64()?,
    };
    let len = body.u64()?;
    params
        .validate()
        .map_err(|e| Error::Corrupt(format!("bad filter parameters: {e}")))?;
    if body.remaining() as u64 != params.bytes() {
        return Err(Error::Corrupt(format!(
            "{} bits need {} bytes of payload, found {}",
            params.bits,
            params.bytes(),
            body.remaining()
        )));
    }
    Ok((params, len))
}

/// Classic model: (1 − (1 − 1/m)^(kn))^k, computed with ln1p/expm1 so it stays accurate for
/// huge m and tiny rates.
pub fn classic_fpr(bits: u64, hashes: u32, items: u64) -> f64 {
    if items == 0 || bits == 0 {
        return if items == 0 { 0.0 } else { 1.0 };
    }
    let fill = -(hashes as f64 * items as f64 * (-1.0 / bits as f64).ln_1p()).exp_m1();
    fill.powi(hashes as i32)
}

/// Blocked model (Poisson mixture over block loads, per-word fill), see the module comment.
pub fn blocked_fpr(bits: u64, hashes: u32, items: u64) -> f64 {
    Layout::Blocked.fpr(bits, hashes, items)
}

/// A block layout's model for every k in 1..=`max_hashes` at once (entry k−1), sharing the
/// Poisson terms so the sizer's search over k costs one pass. The sum runs over
/// λ ± (12√λ + 50), which holds all but < 1e-30 of the mass. For λ ≥ 1e5 keys per block every
/// bit is set and the result is the load-λ term (= 1.0).
fn local_fpr_by_hashes(layout: Layout, bits: u64, items: u64, max_hashes: u32) -> Vec<f64> {
    let ks = max_hashes as usize;
    let blocks = bits / BLOCK_BITS;
    if items == 0 {
        return vec![0.0; ks];
    }
    if blocks == 0 {
        return vec![1.0; ks];
    }
    let lambda = items as f64 / blocks as f64;
    let mut totals = vec![0.0; ks];
    // Adds P(load = j)·P(fp | load j) for every k. A word that receives c probes of each of the
    // j keys in its block has each bit still clear with probability q^c, q = (1 − 1/64)^j; a
    // query's c probes there all hit with probability (1 − q^c)^c. With k = 8c' + h, h words get
    // c' + 1 probes and 8 − h words get c'.
    let mut add = |weight: f64, j: f64| {
        if layout == Layout::FastLocal {
            // The block as one 512-bit classic filter, plus a 32-bit probe-hash collision.
            let collision = -(j * (-(0.5f64.powi(32))).ln_1p()).exp_m1();
            for (k, total) in (1u32..).zip(totals.iter_mut()) {
                let fill = -(f64::from(k) * j * (-1.0 / 512.0f64).ln_1p()).exp_m1();
                let bits = fill.powi(k as i32);
                *total += weight * (bits + (1.0 - bits) * collision);
            }
            return;
        }
        let q = (1.0 - 1.0 / 64.0f64).powf(j);
        let word = |c: u32| (1.0 - q.powi(c as i32)).powi(c as i32);
        let mut word_by_probes = [0.0; (MAX_HASHES / 8 + 2) as usize];
        for (c, slot) in word_by_probes.iter_mut().enumerate() {
            *slot = word(c as u32);
        }
        for (k, total) in (1u32..).zip(totals.iter_mut()) {
            let (per_word, heavy_words) = (k / 8, k % 8);
            *total += weight
                * word_by_probes[per_word as usize].powi((8 - heavy_words) as i32)
                * word_by_probes[per_word as usize + 1].powi(heavy_words as i32);
        }
    };
    if lambda >= 1e5 {
        add(1.0, lambda);
        return totals;
    }
    let spread = 12.0 * lambda.sqrt() + 50.0;
    let lowest = (lambda - spread).max(0.0).floor() as u64;
    let highest = (lambda + spread).ceil() as u64;
    let mode = lambda.floor() as u64;
    let pmf_mode = (mode as f64 * lambda.ln() - lambda - ln_factorial(mode)).exp();
    let mut pmf = pmf_mode;
    for j in mode..=highest {
        add(pmf, j as f64);
        pmf *= lambda / (j + 1) as f64;
    }
    pmf = pmf_mode;
    for j in (lowest..mode).rev() {
        pmf *= (j + 1) as f64 / lambda;
        add(pmf, j as f64);
    }
    totals.iter_mut().for_each(|t| *t = t.min(1.0));
    totals
}

/// ln(n!) — exact sum below 32, Stirling series (error < 1e-15 relative) above.
fn ln_factorial(n: u64) -> f64 {
    if n < 32 {
        return (2..=n).map(|i| (i as f64).ln()).sum();
    }
    let x = n as f64;
    x * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI * x).ln() + 1.0 / (12.0 * x)
        - 1.0 / (360.0 * x.powi(3))
        + 1.0 / (1260.0 * x.powi(5))
}

fn check_items(items: u64) -> Result<()> {
    if items == 0 {
        return Err(Error::InvalidParameter(
            "the number of items must be at least 1".into(),
        ));
    }
    Ok(())
}

fn check_hashes(hashes: u32) -> Result<()> {
    if hashes == 0 || hashes > MAX_HASHES {
        return Err(Error::InvalidParameter(format!(
            "the number of hashes must be in 1..={MAX_HASHES}, got {hashes}"
        )));
    }
    Ok(())
}

fn round_bits_up(layout: Layout, bits: u64) -> Result<u64> {
    if bits == 0 {
        return Err(Error::InvalidParameter(
            "the number of bits must be at least 1".into(),
        ));
    }
    if bits > MAX_BITS {
        return Err(too_large(bits));
    }
    Ok(bits.div_ceil(layout.granule_bits()) * layout.granule_bits())
}

fn too_large(bits: u64) -> Error {
    Error::TooLarge(format!("{bits} bits exceed the limit of {MAX_BYTES} bytes"))
}

fn too_large_f(bits: f64) -> Error {
    Error::TooLarge(format!(
        "{bits:.3e} bits exceed the limit of {MAX_BYTES} bytes"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_factorial_matches_direct_sum_across_the_switch() {
        for n in [31u64, 32, 33, 100, 1000] {
            let direct: f64 = (2..=n).map(|i| (i as f64).ln()).sum();
            assert!((ln_factorial(n) - direct).abs() < 1e-9 * direct, "n={n}");
        }
    }
}
