//! (in progress)
/// XXH3-128 of the key bytes with a 64-bit seed, split into two 64-bit words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyHash {
    pub lo: u64,
    pub hi: u64,
}
