//! The gate's error type: a store or filter failure is always an error, never an "unseen" answer.

/// Everything that can go wrong in the gate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("sqlite store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("filter: {0}")]
    Filter(#[from] bloomgate::Error),
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// The background recorder could not write served items; they stay visible to the gate
    /// (never shown again by this process) but are not durable, so every later record fails.
    #[error("recording served items failed: {0}")]
    Recording(String),
}

pub type Result<T> = std::result::Result<T, Error>;
