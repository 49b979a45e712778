//! The one rule for every path that creates or grows a value — `RESERVE`, auto-creation, a
//! `LOADCHUNK` header, `RESTORE`, an RDB file, a snapshot, replication and log replay, a Bloom
//! chain's new link, a cuckoo filter's new sub-filter, a windowed filter's new generation:
//!
//! 1. the claimed sizes are parsed into a **shape** ([`Shape`]): every field validated against
//!    the others and against what the commands themselves can create (a header forged past
//!    them is refused), and, where a payload carries the bytes, against the payload's length;
//! 2. the shape's byte size is **admitted** against an [`Allowance`] — what the host's memory
//!    budget allows now (`maxmemory` less used memory, else what the machine can hold) and,
//!    for a dialect value, the per-key cap `bloom-memory-usage-limit` ([`KeyCap`]): what one
//!    value may take in all (every link, sub-filter or array), less what it already holds;
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

/// The per-key cap as a host applies it to one value: `bloom-memory-usage-limit` (bytes one
/// value may take in all; 0 = no cap) and whether the value's data is replayed (replicated from
/// a master, loaded from an RDB file or an append-only log), which is never refused: replayed
/// data going past the cap is admitted and reported ([`Allowance::passed_cap`]) so the host
/// can log it, since refusing would leave a replica diverged or drop a key at restart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyCap {
    /// Bytes one value may take in all; 0 = no cap.
    pub limit: u64,
    /// The data is replayed: admit past the cap, and report it.
    pub replaying: bool,
}

impl KeyCap {
    /// No cap.
    pub const NONE: KeyCap = KeyCap {
        limit: 0,
        replaying: false,
    };
}

/// A [`KeyCap`] applied to one value: the bytes it may still grow by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Room {
    left: u64,
    replaying: bool,
    passed: bool,
}

/// Bytes that values may still allocate: a host's memory budget, charged as shapes are
/// admitted, so several allocations in one command or one load cannot each use the whole of it;
/// and, once [`Allowance::capped`] for one value, what the per-key cap leaves that value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allowance {
    left: u64,
    spent: u64,
    room: Option<Room>,
}

/// Which limit refused a shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The host's memory budget (`maxmemory`, or what the machine can hold).
    Memory,
    /// The per-key cap, `bloom-memory-usage-limit`.
    KeyCap,
}

/// A shape that did not fit: what it needed, what was left, and which limit refused it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverBudget {
    /// Bytes the shape needs.
    pub needed: u64,
    /// Bytes the limit had left.
    pub allowed: u64,
    /// The limit that refused.
    pub limit: Limit,
}

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let limit = match self.limit {
            Limit::Memory => "the memory budget",
            Limit::KeyCap => "bloom-memory-usage-limit",
        };
        write!(
            f,
            "value needs {} bytes, more than the {} bytes {limit} allows",
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
            room: None,
        }
    }

    /// This allowance for one value that already holds `used` bytes, under the per-key `cap`:
    /// admissions must also fit what the cap leaves it (a `cap` of 0 lifts any cap).
    pub fn capped(self, cap: KeyCap, used: u64) -> Self {
        let room = (cap.limit > 0).then(|| Room {
            left: cap.limit.saturating_sub(used),
            replaying: cap.replaying,
            passed: false,
        });
        Self { room, ..self }
    }

    /// This allowance without the per-key cap (for the next value of a command or a load).
    pub fn uncapped(self) -> Self {
        Self { room: None, ..self }
    }

    /// Whether replayed data went past the per-key cap (admitted: replay is never refused).
    pub fn passed_cap(&self) -> bool {
        self.room.is_some_and(|r| r.passed)
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

    /// Gives back `bytes` of a transient buffer admitted earlier and since freed (a buffer
    /// decoded and dropped).
    pub fn release(&mut self, bytes: u64) {
        let bytes = bytes.min(self.spent);
        self.spent -= bytes;
        self.left = self.left.saturating_add(bytes);
    }

    /// Admits a transient buffer of `bytes` (read from a payload on its way into a value whose
    /// own shape is admitted when it is built): charged to the memory budget only, since the
    /// per-key cap is on what the value keeps.
    pub fn admit_transient(&mut self, bytes: u64) -> Result<(), OverBudget> {
        let room = self.room.take();
        let admitted = self.admit(Buffer(bytes)).map(drop);
        self.room = room;
        admitted
    }

    /// Admits `shape` if its bytes fit what is left of the memory budget and of the per-key
    /// cap, and charges them.
    pub fn admit<S: Shape>(&mut self, shape: S) -> Result<Admitted<S>, OverBudget> {
        let needed = shape.bytes();
        let Some(left) = self.left.checked_sub(needed) else {
            return Err(OverBudget {
                needed,
                allowed: self.left,
                limit: Limit::Memory,
            });
        };
        if let Some(room) = &mut self.room {
            match room.left.checked_sub(needed) {
                Some(rest) => room.left = rest,
                None if room.replaying => {
                    room.left = 0;
                    room.passed = true;
                }
                None => {
                    return Err(OverBudget {
                        needed,
                        allowed: room.left,
                        limit: Limit::KeyCap,
                    })
                }
            }
        }
        self.left = left;
        self.spent = self.spent.saturating_add(needed);
        Ok(Admitted(shape))
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
                allowed: 40,
                limit: Limit::Memory
            }
        );
        assert!(a.admit(Bytes(40)).is_ok());
        assert_eq!((a.left(), a.spent()), (0, 100));
        assert!(Allowance::unlimited().admit(Bytes(u64::MAX)).is_ok());
    }

    #[test]
    fn the_key_cap_limits_one_value_and_lets_replayed_data_pass() {
        let cap = KeyCap {
            limit: 100,
            replaying: false,
        };
        // A value holding 70 bytes may grow by 30 under a cap of 100.
        let mut a = Allowance::new(1000).capped(cap, 70);
        assert_eq!(
            a.admit(Bytes(31)).unwrap_err(),
            OverBudget {
                needed: 31,
                allowed: 30,
                limit: Limit::KeyCap
            }
        );
        assert!(a.admit(Bytes(30)).is_ok());
        assert_eq!(a.admit(Bytes(1)).unwrap_err().limit, Limit::KeyCap);
        // The memory budget is judged first, and the cap goes with `uncapped`.
        assert_eq!(a.admit(Bytes(2000)).unwrap_err().limit, Limit::Memory);
        let mut free = a.uncapped();
        assert!(free.admit(Bytes(500)).is_ok());
        assert_eq!(free.spent(), 530);
        // Transient buffers are charged to the memory budget only.
        let mut buffers = Allowance::new(1000).capped(cap, 90);
        assert!(buffers.admit_transient(500).is_ok());
        assert!(buffers.admit(Bytes(10)).is_ok());
        assert_eq!(buffers.left(), 490);
        // 0 = no cap.
        let mut none = Allowance::new(1000).capped(KeyCap::NONE, 10_000);
        assert!(none.admit(Bytes(1000)).is_ok());
        // Replayed data passes the cap, and says so.
        let mut replayed = Allowance::new(1000).capped(
            KeyCap {
                limit: 100,
                replaying: true,
            },
            0,
        );
        assert!(replayed.admit(Bytes(60)).is_ok());
        assert!(!replayed.passed_cap());
        assert!(replayed.admit(Bytes(60)).is_ok());
        assert!(replayed.passed_cap());
    }
}
