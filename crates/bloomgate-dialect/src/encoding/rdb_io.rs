//! The field I/O of RDB module values: what a host supplies so the dialect can save and load
//! values field by field ([`RdbSink`], [`RdbSource`]), and why a load failed ([`RdbError`]).
//! The module implements them over Redis' `RedisModule_Save*` / `RedisModule_Load*`, the server
//! and the RDB-file reader over Redis' module-value byte format
//! ([`rdb_format`](super::rdb_format)); each type's field order is in [`rdb`](super::rdb).

use crate::budget::{Allowance, OverBudget};

/// Receives a value's fields in order.
pub trait RdbSink {
    /// An unsigned integer field.
    fn save_unsigned(&mut self, value: u64);
    /// A double field.
    fn save_double(&mut self, value: f64);
    /// A string buffer field.
    fn save_string(&mut self, value: &[u8]);
}

/// Supplies a value's fields in order.
pub trait RdbSource {
    /// The next unsigned integer field.
    fn load_unsigned(&mut self) -> Result<u64, RdbError>;
    /// The next double field.
    fn load_double(&mut self) -> Result<f64, RdbError>;
    /// The next string buffer; a source that can check a length before allocating refuses one
    /// longer than `max_len`.
    fn load_string(&mut self, max_len: u64) -> Result<Vec<u8>, RdbError>;
    /// What values read from this source may allocate: every shape is admitted against it
    /// before allocation. No default: each source states its budget (a host's memory budget,
    /// or [`Allowance::unlimited`] where a caller has sized the input itself).
    fn allowance(&mut self) -> &mut Allowance;
}

/// Why a value could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RdbError {
    /// The field stream ended early or a field had the wrong type.
    Truncated,
    /// The fields describe an invalid filter (the reason, in LOADCHUNK's words or ours).
    Invalid(String),
    /// This encoding version is newer than the reader knows.
    UnknownEncoding(i32),
    /// A valid value larger than the memory budget allows.
    OverBudget(OverBudget),
}

impl std::fmt::Display for RdbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RdbError::Truncated => f.write_str("truncated or mistyped module value"),
            RdbError::Invalid(why) => write!(f, "invalid module value: {why}"),
            RdbError::UnknownEncoding(v) => write!(f, "unknown encoding version {v}"),
            RdbError::OverBudget(o) => write!(f, "refused: {o}"),
        }
    }
}

impl std::error::Error for RdbError {}
