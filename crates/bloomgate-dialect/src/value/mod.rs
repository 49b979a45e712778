//! The dialect's stored values and the one trait both hosts use to handle them: type name and
//! encoding version, memory, the SCANDUMP stream (header + chunks) that snapshots, AOF rewrites
//! and LOADCHUNK share, and the RDB field sequence. A host keeps [`Value`]s and never matches on
//! the filter kinds itself; a new value type is one more variant here and one more impl in
//! `impls.rs` (each type's [`DialectType`] impl).

use crate::budget::{Admitted, Allowance, OverBudget, Shape};
use crate::codec::rdb_io::{RdbError, RdbSink, RdbSource};
use crate::types::counting::CountingFilter;
use crate::types::countmin::CountMin;
use crate::types::cuckoo::CuckooChain;
use crate::types::sbchain::{
    BlockedChain, BlockedLink, BloomChain, Chain, ChainLink, Link, ValkeyChain, ValkeyLink,
};
use crate::types::tdigest::TDigest;
use crate::types::topk::TopK;
use crate::types::windowed::WindowedFilter;

mod impls;

/// A value of the dialect: one of RedisBloom's module types. The rarer, larger kinds are boxed
/// so a value is as small as a Bloom chain (32 bytes): hosts keep one per key.
#[derive(Clone, Debug)]
pub enum Value {
    /// `MBbloom--`: a scalable Bloom chain.
    Bloom(BloomChain),
    /// `BGbloomBK`: a scalable Bloom chain of cache-line blocked links (`LAYOUT blocked`, our
    /// extension).
    BloomBlocked(Box<BlockedChain>),
    /// `bloomfltr`: valkey-bloom's scalable Bloom filter (its data, loaded and written back).
    BloomValkey(Box<ValkeyChain>),
    /// `MBbloomCF`: a cuckoo filter.
    Cuckoo(Box<CuckooChain>),
    /// `BGwindowF`: a time-windowed filter (our extension).
    Windowed(Box<WindowedFilter>),
    /// `TDIS-TYPE`: a t-digest.
    TDigest(Box<TDigest>),
    /// `CMSk-TYPE`: a Count-Min Sketch.
    CountMin(Box<CountMin>),
    /// `TopK-TYPE`: a Top-K sketch.
    TopK(Box<TopK>),
    /// `BGcntBloo`: a counting Bloom filter (our extension).
    Counting(Box<CountingFilter>),
}

/// Runs `$body` with `$t` naming the concrete type of a [`Kind`].
macro_rules! each_kind {
    ($kind:expr, $t:ident => $body:expr) => {
        each_kind!(@match $kind, $t => $body; Bloom BloomChain, BloomBlocked BlockedChain,
            BloomValkey ValkeyChain,
            Cuckoo CuckooChain, Windowed WindowedFilter, TDigest TDigest, CountMin CountMin,
            TopK TopK, Counting CountingFilter)
    };
    (@match $kind:expr, $t:ident => $body:expr; $($variant:ident $ty:ty),*) => {
        match $kind {
            $(Kind::$variant => {
                type $t = $ty;
                $body
            })*
        }
    };
}

/// Which dialect type a value is (for hosts that register types separately, such as a module).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// [`Value::Bloom`].
    Bloom,
    /// [`Value::BloomBlocked`].
    BloomBlocked,
    /// [`Value::BloomValkey`].
    BloomValkey,
    /// [`Value::Cuckoo`].
    Cuckoo,
    /// [`Value::Windowed`].
    Windowed,
    /// [`Value::TDigest`].
    TDigest,
    /// [`Value::CountMin`].
    CountMin,
    /// [`Value::TopK`].
    TopK,
    /// [`Value::Counting`].
    Counting,
}

impl Kind {
    /// Every kind, in registration order.
    pub const ALL: [Kind; 9] = [
        Kind::Bloom,
        Kind::BloomBlocked,
        Kind::BloomValkey,
        Kind::Cuckoo,
        Kind::Windowed,
        Kind::TDigest,
        Kind::CountMin,
        Kind::TopK,
        Kind::Counting,
    ];

    /// The command family the kind belongs to, as its commands' prefix in lower case (`bf`,
    /// `cf`, `cms`, `topk`, `tdigest`, `wf`, `cbf`): every Bloom chain is `bf`. Hosts name
    /// per-family counters with it.
    pub fn family(self) -> &'static str {
        match self {
            Kind::Bloom | Kind::BloomBlocked | Kind::BloomValkey => "bf",
            Kind::Cuckoo => "cf",
            Kind::Windowed => "wf",
            Kind::TDigest => "tdigest",
            Kind::CountMin => "cms",
            Kind::TopK => "topk",
            Kind::Counting => "cbf",
        }
    }

    /// The module type name (`TYPE` reply, RDB module id).
    pub fn type_name(self) -> &'static str {
        each_kind!(self, T => T::TYPE_NAME)
    }

    /// The RDB encoding version written for this kind: a valkey chain's is the server's
    /// [`ValkeyFlavour`](crate::types::sbchain::ValkeyFlavour)'s.
    pub fn encoding_version(self) -> i32 {
        match self {
            Kind::BloomValkey => crate::types::sbchain::valkey::valkey_flavour().encoding_version(),
            _ => each_kind!(self, T => T::ENCODING_VERSION),
        }
    }

    /// Length of the dump header that starts with `prefix` (at least [`Kind::header_prefix`]
    /// bytes), or `None` if the prefix is malformed.
    pub fn header_len(self, prefix: &[u8]) -> Option<usize> {
        each_kind!(self, T => <T as DialectType>::header_len(prefix))
    }

    /// Bytes needed to learn the header's full length.
    pub fn header_prefix(self) -> usize {
        each_kind!(self, T => T::HEADER_PREFIX)
    }

    /// Bytes a valid header's value will take (its shape's size, what the budget admits),
    /// without allocating anything. For Bloom, cuckoo and windowed filters this is also the
    /// length of the dump body that follows the header; a sketch's also counts its heap or
    /// buffers, so use [`Value::dump_layout`] of the loaded value for the body's length.
    pub fn header_bytes(self, header: &[u8]) -> Result<u64, &'static str> {
        each_kind!(self, T => <T as DialectType>::shape(header).map(|s| s.bytes()))
    }

    /// An empty value shaped as the header says: every field validated, the size admitted
    /// against `allowance`, then allocated (see [`crate::budget`]).
    pub fn from_header(
        self,
        header: &[u8],
        allowance: &mut Allowance,
    ) -> Result<Value, HeaderRefusal> {
        each_kind!(self, T => {
            let shape = <T as DialectType>::shape(header).map_err(HeaderRefusal::Invalid)?;
            let admitted = allowance.admit(shape).map_err(HeaderRefusal::OverBudget)?;
            <T as DialectType>::from_shape(admitted)
                .map(T::into_value)
                .map_err(HeaderRefusal::Invalid)
        })
    }

    /// Reads a value of this kind saved with encoding version `encver`.
    pub fn rdb_load(self, input: &mut impl RdbSource, encver: i32) -> Result<Value, RdbError> {
        each_kind!(self, T => T::rdb_load(input, encver).map(T::into_value))
    }

    /// Runs `f` over the link type of this kind's Bloom chain; `None` if the kind is not a
    /// Bloom chain. The one place a link type is tied to its kind: `BF.*` reaches every chain
    /// through it.
    pub fn on_chain<F: OnChain>(self, f: F) -> Option<F::Out> {
        match self {
            Kind::Bloom => Some(f.on::<Link>()),
            Kind::BloomBlocked => Some(f.on::<BlockedLink>()),
            Kind::BloomValkey => Some(f.on::<ValkeyLink>()),
            _ => None,
        }
    }
}

/// Work over a Bloom chain whose link type is picked at run time ([`Kind::on_chain`]).
pub trait OnChain {
    /// What the work gives.
    type Out;
    /// Does the work for chains of `L` links.
    fn on<L: ChainValue>(self) -> Self::Out;
}

/// A link type whose chains are values: where a [`Chain`] of them sits in a [`Value`].
pub trait ChainValue: ChainLink {
    /// The kind of its chains.
    const KIND: Kind;
    /// The chain inside a [`Value`], if it is one of these.
    fn of(value: &Value) -> Option<&Chain<Self>>;
    /// Mutable [`ChainValue::of`].
    fn of_mut(value: &mut Value) -> Option<&mut Chain<Self>>;
    /// Wraps a chain into a [`Value`].
    fn into_value(chain: Chain<Self>) -> Value;
}

/// Why a dump header was not turned into a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderRefusal {
    /// Malformed or forged: the family's own error text.
    Invalid(&'static str),
    /// Valid, but larger than the memory budget allows.
    OverBudget(OverBudget),
}

/// What every dialect value type provides to hosts. Creating one from untrusted bytes follows
/// [`crate::budget`]'s rule: [`DialectType::shape`] validates and sizes, the host admits the
/// shape, and only [`DialectType::from_shape`] allocates.
pub trait DialectType: Sized + Clone {
    /// What a dump header describes, validated, before allocation.
    type Shape: Shape;

    /// RedisBloom's module type name (9 characters).
    const TYPE_NAME: &'static str;
    /// The RDB encoding version written (readers accept this and older ones).
    const ENCODING_VERSION: i32;
    /// Bytes of a dump that [`DialectType::header_len`] needs.
    const HEADER_PREFIX: usize;
    /// The kind of value.
    const KIND: Kind;

    /// This type inside a [`Value`], if it is one.
    fn of(value: &Value) -> Option<&Self>;
    /// Mutable [`DialectType::of`].
    fn of_mut(value: &mut Value) -> Option<&mut Self>;
    /// Wraps into a [`Value`].
    fn into_value(self) -> Value;

    /// Bytes reported as the filter's size (INFO `Size`), also its memory accounting.
    fn memory(&self) -> u64;

    /// Length of a dump header from its first [`DialectType::HEADER_PREFIX`] bytes.
    fn header_len(prefix: &[u8]) -> Option<usize>;
    /// A dump header's shape: every field validated (against each other and against what the
    /// commands can create), nothing allocated.
    fn shape(header: &[u8]) -> Result<Self::Shape, &'static str>;
    /// An empty filter of an admitted shape (allocates its arrays).
    fn from_shape(shape: Admitted<Self::Shape>) -> Result<Self, &'static str>;
    /// Writes one SCANDUMP chunk back; `iter` is what SCANDUMP returned with it.
    fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str>;
    /// The SCANDUMP header (iterator 0).
    fn dump_header(&self) -> Vec<u8>;
    /// Where each SCANDUMP chunk after the header ends: `(iterator returned with it, length)`.
    fn chunk_plan(&self) -> Vec<(i64, u64)>;
    /// The bytes of the chunk that [`DialectType::chunk_plan`] lists as ending at `iter`.
    fn chunk_bytes(&self, iter: i64, len: u64) -> Vec<u8>;

    /// Writes the value in RedisBloom's RDB field order.
    fn rdb_save(&self, out: &mut impl RdbSink);
    /// Reads a value saved with encoding version `encver` (this one or older): every field
    /// validated and the shape admitted against the source's allowance
    /// ([`RdbSource::allowance`]) before anything is allocated.
    fn rdb_load(input: &mut impl RdbSource, encver: i32) -> Result<Self, RdbError>;

    /// The dump as LOADCHUNK commands would carry it: `(1, header)`, then `(iter, chunk)`.
    fn dump_stream(&self) -> impl Iterator<Item = (i64, Vec<u8>)> + '_ {
        std::iter::once((1, self.dump_header())).chain(
            self.chunk_plan()
                .into_iter()
                .map(|(iter, len)| (iter, self.chunk_bytes(iter, len))),
        )
    }

    /// The bytes of [`DialectType::dump_stream`], concatenated, handed to `f` in pieces without
    /// building whole chunks (a snapshot of a large filter then needs no chunk-sized buffer).
    fn visit_dump(&self, f: &mut dyn FnMut(&[u8])) {
        for (_, chunk) in self.dump_stream() {
            f(&chunk);
        }
    }
}

/// Runs `$body` with `$v` bound to the concrete filter inside a [`Value`].
macro_rules! each {
    ($value:expr, $v:ident => $body:expr) => {
        match $value {
            Value::Bloom($v) => $body,
            Value::BloomBlocked($v) => $body,
            Value::BloomValkey($v) => $body,
            Value::Cuckoo($v) => $body,
            Value::Windowed($v) => $body,
            Value::TDigest($v) => $body,
            Value::CountMin($v) => $body,
            Value::TopK($v) => $body,
            Value::Counting($v) => $body,
        }
    };
}

impl Value {
    /// Which kind of value this is.
    pub fn kind(&self) -> Kind {
        match self {
            Value::Bloom(_) => Kind::Bloom,
            Value::BloomBlocked(_) => Kind::BloomBlocked,
            Value::BloomValkey(_) => Kind::BloomValkey,
            Value::Cuckoo(_) => Kind::Cuckoo,
            Value::Windowed(_) => Kind::Windowed,
            Value::TDigest(_) => Kind::TDigest,
            Value::CountMin(_) => Kind::CountMin,
            Value::TopK(_) => Kind::TopK,
            Value::Counting(_) => Kind::Counting,
        }
    }

    /// TYPE reply: RedisBloom's module type names.
    pub fn type_name(&self) -> &'static str {
        self.kind().type_name()
    }

    /// Bytes the value accounts for (the filter's reported size).
    pub fn memory(&self) -> u64 {
        each!(self, v => v.memory())
    }

    /// Heap bytes the value holds beyond its own (inline) size, in allocator size classes: what
    /// it costs in resident memory, for hosts that account memory (`MEMORY USAGE`). Windowed
    /// filters count their reported size.
    pub fn heap_bytes(&self) -> u64 {
        use crate::types::cow::allocation_size;
        match self {
            Value::Bloom(chain) => chain.heap_bytes(),
            Value::BloomBlocked(chain) => {
                allocation_size(size_of::<BlockedChain>() as u64) + chain.heap_bytes()
            }
            Value::BloomValkey(chain) => {
                allocation_size(size_of::<ValkeyChain>() as u64) + chain.heap_bytes()
            }
            Value::Cuckoo(filter) => {
                allocation_size(size_of::<CuckooChain>() as u64) + filter.heap_bytes()
            }
            Value::Windowed(filter) => {
                allocation_size(size_of::<WindowedFilter>() as u64) + filter.memory()
            }
            Value::CountMin(cms) => cms.heap_bytes(),
            Value::TopK(topk) => topk.heap_bytes(),
            Value::TDigest(digest) => digest.heap_bytes(),
            Value::Counting(filter) => filter.heap_bytes(),
        }
    }

    /// What RedisBloom does to a value when it is saved (`DUMP`, `SAVE`, a full sync from the
    /// main thread): a t-digest merges its buffer in place. Hosts call it before
    /// [`Value::rdb_save`] where RedisBloom's save would run on the live value (not in a
    /// forked child, whose change the live value never sees).
    pub fn prepare_save(&mut self) {
        if let Value::TDigest(digest) = self {
            let _ = digest.compress();
        }
    }

    /// The dump as LOADCHUNK commands would carry it: `(1, header)`, then `(iter, chunk)`.
    pub fn dump_stream(&self) -> Box<dyn Iterator<Item = (i64, Vec<u8>)> + '_> {
        each!(self, v => Box::new(v.dump_stream()))
    }

    /// The dump stream's bytes in pieces (see [`DialectType::visit_dump`]).
    pub fn visit_dump(&self, f: &mut dyn FnMut(&[u8])) {
        each!(self, v => v.visit_dump(f))
    }

    /// The header, then the chunk lengths and iterators (no bytes copied).
    pub fn dump_layout(&self) -> (Vec<u8>, Vec<(i64, u64)>) {
        each!(self, v => (v.dump_header(), v.chunk_plan()))
    }

    /// Writes one chunk back (see [`DialectType::load_chunk`]).
    pub fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
        each!(self, v => v.load_chunk(iter, data))
    }

    /// Writes the value in RedisBloom's RDB field order.
    pub fn rdb_save(&self, out: &mut impl RdbSink) {
        each!(self, v => v.rdb_save(out))
    }

    /// The RDB encoding version this value is written with.
    pub fn encoding_version(&self) -> i32 {
        self.kind().encoding_version()
    }

    /// Offers the value's heap allocations to a host that moves allocations (Redis' active
    /// defragmentation), in a fixed order of slots, from `walk`'s start on: a boxed kind's box,
    /// then its arrays (a chain's link array and each link's bits, a cuckoo filter's sub-filter
    /// array and slots, a Top-K's buckets, heap and heap items, a t-digest's centroids, a
    /// sketch's counters, a windowed filter's generations). See [`bloomgate::relocate`] for
    /// what is offered and how a walk resumes.
    pub fn relocate(&mut self, walk: &mut bloomgate::relocate::Walk<'_>) {
        match self {
            Value::Bloom(v) => v.relocate(walk),
            Value::BloomBlocked(v) => {
                walk.boxed(v);
                v.relocate(walk);
            }
            Value::BloomValkey(v) => {
                walk.boxed(v);
                v.relocate(walk);
            }
            Value::Cuckoo(v) => {
                walk.boxed(v);
                v.relocate(walk);
            }
            Value::Windowed(v) => {
                walk.boxed(v);
                v.relocate(walk);
            }
            Value::TDigest(v) => {
                walk.boxed(v);
                v.relocate(walk);
            }
            Value::CountMin(v) => {
                walk.boxed(v);
                v.relocate(walk);
            }
            Value::TopK(v) => {
                walk.boxed(v);
                v.relocate(walk);
            }
            Value::Counting(v) => {
                walk.boxed(v);
                v.relocate(walk);
            }
        }
    }

    /// A Bloom chain's items, fill ratio and false-positive rate (see
    /// [`Chain::health`](crate::types::sbchain::Chain::health)); `None` for other kinds.
    pub fn chain_health(&self) -> Option<(u64, f64, f64)> {
        struct Health<'v>(&'v Value);
        impl OnChain for Health<'_> {
            type Out = Option<(u64, f64, f64)>;
            fn on<L: ChainValue>(self) -> Self::Out {
                let chain = L::of(self.0)?;
                let (fill, fpr) = chain.health();
                Some((chain.items(), fill, fpr))
            }
        }
        self.kind().on_chain(Health(self)).flatten()
    }

    /// Allocations [`Value::relocate`] walks over (its slots), counted by walking them with
    /// nothing moved: what defragmenting or freeing the value costs, for hosts that schedule
    /// that work.
    pub fn allocation_count(&mut self) -> u64 {
        let mut still = bloomgate::relocate::Still;
        let mut walk = bloomgate::relocate::Walk::new(&mut still, 0);
        self.relocate(&mut walk);
        walk.position()
    }
}

#[cfg(test)]
mod tests {
    /// Every key holds a value inline, so its size is memory per key: a Bloom chain keeps the
    /// enum's tag in its option byte, and a link stays one 64-byte allocation.
    #[test]
    fn values_stay_small() {
        assert_eq!(size_of::<super::Value>(), 32);
        assert_eq!(size_of::<crate::types::sbchain::Link>(), 64);
    }
}
