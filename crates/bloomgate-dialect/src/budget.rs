//! The one rule for every path that creates or grows a value — `RESERVE`, auto-creation, a
//! `LOADCHUNK` header, `RESTORE`, an RDB file, a snapshot, replication and log replay, a Bloom
//! chain's new link, a cuckoo filter's new sub-filter, a windowed filter's new generation:
//!
//! 1. the claimed sizes are parsed into a **shape** ([`Shape`]): every field validated against
//!    the others and against what the commands themselves can create (a header forged past
//!    them is refused), and, where a payload carries the bytes, against the payload's length;
//! 2. the shape's byte size is **admitted** against an [`Allowance`] — what the host's memory
//!    budget allows now (`maxmemory` less used memory, else what the machine can hold);
//! 3. only an [`Admitted`] shape can be **allocated**: the constructors that allocate a value's
//!    arrays take one, so no path can allocate first and check afterwards.
//!
//! A refusal is an error (`OOM command not allowed…` for a command, a failed load for an RDB
//! value), never an abort. A new value type implements [`Shape`] for what it allocates and takes
//! [`Admitted`] in its constructors; [`crate::value::DialectType`] asks for exactly that.

/// A validated description of what a value (or a part it grows by) will allocate.
pub trait Shape {
    /// Bytes its arrays will take (for the dump-backed types, also the length of the dump body
    /// that fills them).
    fn bytes(&self) -> u64;
}

/// A plain buffer of this many bytes (a string read from a payload on its way into a value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buffer(pub u64);

impl Shape for Buffer {
    fn bytes(&self) -> u64 {
        self.0
    }
}

/// Bytes that values may still allocate: a host's memory budget, charged as shapes are
/// admitted, so several allocations in one command or one load cannot each use the whole of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allowance {
    left: u64,
    spent: u64,
}

/// A shape that did not fit: what it needed and what was left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverBudget {
    /// Bytes the shape needs.
    pub needed: u64,
    /// Bytes the allowance had left.
    pub allowed: u64,
}

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "value needs {} bytes, more than the {} bytes the memory budget allows",
            self.needed, self.allowed
        )
    }
}

impl std::error::Error for OverBudget {}

/// A shape that fitted its [`Allowance`]: the only way to ask a constructor for memory.
#[derive(Debug)]
pub struct Admitted<S>(S);

impl<S> Admitted<S> {
    /// The admitted shape.
    pub fn shape(&self) -> &S {
        &self.0
    }

    /// The shape, consumed by the constructor that allocates it.
    pub fn into_shape(self) -> S {
        self.0
    }
}

impl Allowance {
    /// `bytes` may be allocated in all.
    pub fn new(bytes: u64) -> Self {
        Self {
            left: bytes,
            spent: 0,
        }
    }

    /// No limit: values built by tests and by code that sized them itself.
    pub fn unlimited() -> Self {
        Self::new(u64::MAX)
    }

    /// Bytes still allowed.
    pub fn left(&self) -> u64 {
        self.left
    }

    /// Bytes admitted so far.
    pub fn spent(&self) -> u64 {
        self.spent
    }

    /// Gives back `bytes` admitted earlier and since freed (a buffer decoded and dropped).
    pub fn release(&mut self, bytes: u64) {
        let bytes = bytes.min(self.spent);
        self.spent -= bytes;
        self.left = self.left.saturating_add(bytes);
    }

    /// Admits `shape` if its bytes fit what is left, and charges them.
    pub fn admit<S: Shape>(&mut self, shape: S) -> Result<Admitted<S>, OverBudget> {
        let needed = shape.bytes();
        match self.left.checked_sub(needed) {
            Some(left) => {
                self.left = left;
                self.spent = self.spent.saturating_add(needed);
                Ok(Admitted(shape))
            }
            None => Err(OverBudget {
                needed,
                allowed: self.left,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Bytes(u64);
    impl Shape for Bytes {
        fn bytes(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn admissions_are_charged_until_the_allowance_runs_out() {
        let mut a = Allowance::new(100);
        assert_eq!(a.admit(Bytes(60)).unwrap().shape().bytes(), 60);
        assert_eq!(
            a.admit(Bytes(60)).unwrap_err(),
            OverBudget {
                needed: 60,
                allowed: 40
            }
        );
        assert!(a.admit(Bytes(40)).is_ok());
        assert_eq!((a.left(), a.spent()), (0, 100));
        assert!(Allowance::unlimited().admit(Bytes(u64::MAX)).is_ok());
    }
}
