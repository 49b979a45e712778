//! (in progress)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Classic,
    Blocked,
}
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    pub layout: Layout,
    pub bits: u64,
    pub hashes: u32,
    pub items: u64,
}
