//! (in progress)
pub trait FilterCodec {}
