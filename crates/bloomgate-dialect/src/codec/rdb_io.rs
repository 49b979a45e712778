//! The field I/O of RDB module values: what a host supplies so the dialect can save and load
//! values field by field ([`RdbSink`], [`RdbSource`]), and why a load failed ([`RdbError`]).
//! The module implements them over Redis' `RedisModule_Save*` / `RedisModule_Load*`, the server
//! and the RDB-file reader over Redis' module-value byte format
//! ([`rdb_format`](crate::encoding::rdb_format)); each type's field order is in
//! [`rdb`](crate::encoding::rdb).

use crate::budget::{Admitted, Allowance, OverBudget, Shape};

/// Receives a value's fields in order.
pub trait RdbSink {
    /// An unsigned integer field.
    fn save_unsigned(&mut self, value: u64);
    /// A double field.
    fn save_double(&mut self, value: f64);
    /// A float field (4 bytes).
    fn save_float(&mut self, value: f32);
    /// A string buffer field.
    fn save_string(&mut self, value: &[u8]);
}

/// Supplies a value's fields in order.
pub trait RdbSource {
    /// The next unsigned integer field.
    fn load_unsigned(&mut self) -> Result<u64, RdbError>;
    /// The next double field.
    fn load_double(&mut self) -> Result<f64, RdbError>;
    /// The next float field.
    fn load_float(&mut self) -> Result<f32, RdbError>;
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

impl RdbError {
    /// An invalid value, for this reason.
    pub fn invalid(why: impl Into<String>) -> Self {
        RdbError::Invalid(why.into())
    }
}

/// Admits `shape` against `input`'s allowance: what a loader does after validating a value's
/// fields and before allocating it.
pub fn admit<S: Shape>(input: &mut impl RdbSource, shape: S) -> Result<Admitted<S>, RdbError> {
    input.allowance().admit(shape).map_err(RdbError::OverBudget)
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

/// Fields as a list, for round trips without a Redis (the loaders' unit tests).
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// A value's fields, in order, and the allowance loads are admitted against.
    pub(crate) struct Fields {
        pub(crate) items: std::collections::VecDeque<Field>,
        pub(crate) allowance: Allowance,
    }

    impl Default for Fields {
        fn default() -> Self {
            Self {
                items: Default::default(),
                allowance: Allowance::unlimited(),
            }
        }
    }

    /// One field.
    #[derive(Debug, PartialEq)]
    pub(crate) enum Field {
        U(u64),
        D(f64),
        F(f32),
        S(Vec<u8>),
    }

    impl RdbSink for Fields {
        fn save_unsigned(&mut self, value: u64) {
            self.items.push_back(Field::U(value));
        }
        fn save_double(&mut self, value: f64) {
            self.items.push_back(Field::D(value));
        }
        fn save_string(&mut self, value: &[u8]) {
            self.items.push_back(Field::S(value.to_vec()));
        }
        fn save_float(&mut self, value: f32) {
            self.items.push_back(Field::F(value));
        }
    }

    impl RdbSource for Fields {
        fn load_unsigned(&mut self) -> Result<u64, RdbError> {
            match self.items.pop_front() {
                Some(Field::U(v)) => Ok(v),
                _ => Err(RdbError::Truncated),
            }
        }
        fn load_double(&mut self) -> Result<f64, RdbError> {
            match self.items.pop_front() {
                Some(Field::D(v)) => Ok(v),
                _ => Err(RdbError::Truncated),
            }
        }
        fn load_float(&mut self) -> Result<f32, RdbError> {
            match self.items.pop_front() {
                Some(Field::F(v)) => Ok(v),
                _ => Err(RdbError::Truncated),
            }
        }
        fn load_string(&mut self, max_len: u64) -> Result<Vec<u8>, RdbError> {
            match self.items.pop_front() {
                Some(Field::S(v)) if v.len() as u64 <= max_len => Ok(v),
                Some(Field::S(_)) => Err(RdbError::invalid("string longer than expected")),
                _ => Err(RdbError::Truncated),
            }
        }
        fn allowance(&mut self) -> &mut Allowance {
            &mut self.allowance
        }
    }
}
