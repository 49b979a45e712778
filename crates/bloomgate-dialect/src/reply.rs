//! The reply values commands produce, independent of how a host sends them: the server encodes
//! them as RESP2/RESP3 bytes, the module through Redis' reply API. Shapes that differ between
//! protocol versions (booleans, maps, nulls) are kept distinct so each host can render them.

/// One reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// A status line such as `OK`.
    Simple(String),
    /// Full error line without the leading `-` (e.g. `ERR not found`).
    Error(String),
    /// An integer.
    Int(i64),
    /// A bulk string.
    Bulk(Vec<u8>),
    /// Null bulk (`$-1` in RESP2, `_` in RESP3).
    Nil,
    /// Null array (`*-1` in RESP2, `_` in RESP3): an aborted EXEC.
    NilArray,
    /// An array of replies.
    Array(Vec<Reply>),
    /// Key/value pairs: a map in RESP3, a flat array in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// A boolean in RESP3, integer 0/1 in RESP2.
    Bool(bool),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Self {
        Reply::Simple("OK".into())
    }

    /// An error reply with the full text (prefix included).
    pub fn error(msg: impl Into<String>) -> Self {
        Reply::Error(msg.into())
    }

    /// A bulk string.
    pub fn bulk(data: impl Into<Vec<u8>>) -> Self {
        Reply::Bulk(data.into())
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }
}
