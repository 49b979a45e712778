//! RedisBloom's value types, one module each with the type's own logic — sizing, operations,
//! and its SCANDUMP/LOADCHUNK dump stream: the scalable Bloom chain ([`sbchain`], `BF.*`), the
//! cuckoo filter ([`cuckoo`], `CF.*`), the Count-Min sketch ([`countmin`], `CMS.*`), Top-K
//! ([`topk`], `TOPK.*`), the t-digest ([`tdigest`], `TDIGEST.*`), and our time-windowed filter
//! ([`windowed`], `WF.*`) and counting Bloom filters ([`counting`], `CBF.*`). Their large arrays live in copy-on-write storage ([`cow`]).

pub mod counting;
pub mod countmin;
pub mod cow;
pub mod cuckoo;
pub mod sbchain;
pub mod tdigest;
pub mod topk;
pub mod windowed;

/// A sketch's dump header, validated and sized by the sketch's `header_bytes` (its counters,
/// buckets and heap); `from_header` allocates only once the shape is admitted.
#[derive(Debug)]
pub struct SketchShape<T> {
    pub(crate) header: Vec<u8>,
    pub(crate) bytes: u64,
    pub(crate) sketch: std::marker::PhantomData<T>,
}

impl<T> crate::budget::Shape for SketchShape<T> {
    fn bytes(&self) -> u64 {
        self.bytes
    }
}
