//! A fixed-size bit array stored as little-endian `u64` words.
//!
//! Every bit-based filter in the workspace (the native classic and blocked filters, and the
//! RedisBloom-compatible layout in the server) shares this one array. Bit `i` lives in word
//! `i / 64` at bit `i % 64`; serialised as little-endian words, that is byte `i / 8`, mask
//! `1 << (i % 8)` — the LSB-first byte layout RedisBloom dumps use — on every platform.

/// `len` zeroed words from the allocator's zeroed path (`calloc`: pages untouched until
/// written), or `None` if it refuses them. What `vec![0u64; len]` allocates, without the abort.
pub(crate) fn zeroed_words(len: usize) -> Option<Vec<u64>> {
    let layout = std::alloc::Layout::array::<u64>(len).ok()?;
    if layout.size() == 0 {
        return Some(Vec::new());
    }
    // SAFETY: a non-zero size; the result is checked for null below.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<u64>();
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` is a global-allocator allocation of exactly `Layout::array::<u64>(len)`, the
    // layout a Vec of capacity `len` owns; all-zero bytes are `len` initialised u64s.
    Some(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// A heap-allocated array of bits, all zero when created.
#[derive(Clone, PartialEq, Eq)]
pub struct BitArray {
    words: Vec<u64>,
}

impl std::fmt::Debug for BitArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BitArray")
            .field("bits", &self.len_bits())
            .field("ones", &self.count_ones())
            .finish()
    }
}

impl BitArray {
    /// An all-zero array of `words` 64-bit words. Callers validate sizes (see [`crate::params`])
    /// before calling; this allocates exactly what it is asked for.
    pub fn zeroed(words: usize) -> Self {
        Self {
            words: vec![0; words],
        }
    }

    /// [`Self::zeroed`], lazily zeroed by the allocator (`alloc_zeroed`: untouched pages stay
    /// unresident), or `None` if the allocator refuses the words (never aborts).
    pub fn try_zeroed(words: usize) -> Option<Self> {
        zeroed_words(words).map(|words| Self { words })
    }

    /// Wraps existing words (no copy).
    pub fn from_words(words: Vec<u64>) -> Self {
        Self { words }
    }

    /// Unwraps into the words (no copy).
    pub fn into_words(self) -> Vec<u64> {
        self.words
    }

    /// Offers the words' buffer to a host that moves allocations (one slot).
    pub fn relocate(&mut self, walk: &mut crate::relocate::Walk<'_>) {
        walk.vec(&mut self.words);
    }

    /// Builds an array from its little-endian byte image; a trailing partial word is zero-padded.
    pub fn from_le_bytes(bytes: &[u8]) -> Self {
        let mut array = Self::zeroed(bytes.len().div_ceil(8));
        array.write_le_bytes(0, bytes);
        array
    }

    /// Number of bits (always a multiple of 64).
    pub fn len_bits(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    /// Number of bytes of bit storage.
    pub fn len_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// The words (bit i = word i/64, bit i%64).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// The words, mutably.
    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }

    /// Whether bit `i` is set. Panics if `i` is out of range (an internal invariant: positions are
    /// always reduced into range before they get here).
    #[inline]
    pub fn get(&self, i: u64) -> bool {
        self.words[(i >> 6) as usize] & (1u64 << (i & 63)) != 0
    }

    /// Sets bit `i`; returns whether it was already set.
    #[inline]
    pub fn set(&mut self, i: u64) -> bool {
        let word = &mut self.words[(i >> 6) as usize];
        let mask = 1u64 << (i & 63);
        let was_set = *word & mask != 0;
        *word |= mask;
        was_set
    }

    /// Number of set bits.
    pub fn count_ones(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// Clears every bit.
    pub fn clear(&mut self) {
        self.words.fill(0);
    }

    /// `self |= other`; the arrays must have the same length (checked by callers).
    pub fn union_with(&mut self, other: &BitArray) {
        debug_assert_eq!(self.words.len(), other.words.len());
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= *b;
        }
    }

    /// `self &= other`; the arrays must have the same length (checked by callers).
    pub fn intersect_with(&mut self, other: &BitArray) {
        debug_assert_eq!(self.words.len(), other.words.len());
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= *b;
        }
    }

    /// Copies `len` bytes of the little-endian image starting at byte `offset`.
    /// Returns `None` if the range is out of bounds.
    pub fn read_le_bytes(&self, offset: usize, len: usize) -> Option<Vec<u8>> {
        let end = offset.checked_add(len)?;
        if end > self.len_bytes() {
            return None;
        }
        Some((offset..end).map(|b| self.byte(b)).collect())
    }

    /// Overwrites the little-endian image at byte `offset` with `data`.
    /// Returns `false` (and changes nothing) if the range is out of bounds.
    pub fn write_le_bytes(&mut self, offset: usize, data: &[u8]) -> bool {
        match offset.checked_add(data.len()) {
            Some(end) if end <= self.len_bytes() => {}
            _ => return false,
        }
        for (i, &byte) in data.iter().enumerate() {
            let b = offset + i;
            let shift = (b & 7) * 8;
            let word = &mut self.words[b >> 3];
            *word = (*word & !(0xffu64 << shift)) | (u64::from(byte) << shift);
        }
        true
    }

    /// The whole little-endian byte image.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[inline]
    fn byte(&self, b: usize) -> u8 {
        (self.words[b >> 3] >> ((b & 7) * 8)) as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_i_is_byte_i_over_8_lsb_first() {
        let mut bits = BitArray::zeroed(2);
        assert!(!bits.set(0));
        assert!(bits.set(0));
        bits.set(9);
        bits.set(127);
        let bytes = bits.to_le_bytes();
        assert_eq!(bytes[0], 0b0000_0001);
        assert_eq!(bytes[1], 0b0000_0010);
        assert_eq!(bytes[15], 0b1000_0000);
        assert_eq!(BitArray::from_le_bytes(&bytes), bits);
        assert_eq!(bits.count_ones(), 3);
    }

    #[test]
    fn byte_windows_are_bounds_checked() {
        let mut bits = BitArray::zeroed(2);
        assert!(bits.write_le_bytes(3, &[0xAB, 0xCD]));
        assert_eq!(bits.read_le_bytes(3, 2).unwrap(), vec![0xAB, 0xCD]);
        assert!(!bits.write_le_bytes(15, &[1, 2]));
        assert!(!bits.write_le_bytes(usize::MAX, &[1]));
        assert!(bits.read_le_bytes(10, 7).is_none());
        assert!(bits.read_le_bytes(usize::MAX, 2).is_none());
        assert!(bits.get(3 * 8) && bits.get(3 * 8 + 1) && !bits.get(3 * 8 + 2));
    }
}
