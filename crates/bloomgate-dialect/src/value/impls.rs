//! Each value type's [`DialectType`] impl: its module type name and encoding version, its dump
//! header's shape, its SCANDUMP/LOADCHUNK stream (delegating to the type's own methods) and
//! its RDB field order (delegating to [`crate::encoding::rdb`], or to the t-digest's own).

use super::{ChainValue, DialectType, Kind, Value};
use crate::budget::Admitted;
use crate::codec::rdb_io::{RdbError, RdbSink, RdbSource};
use crate::types::counting::{self, CountingFilter};
use crate::types::countmin::CountMin;
use crate::types::cuckoo::{self, CuckooChain};
use crate::types::sbchain::{BlockedLink, Chain, ChainShape, Link, ValkeyLink};
use crate::types::tdigest::TDigest;
use crate::types::topk::TopK;
use crate::types::windowed::{WindowedFilter, WindowedShape};
use crate::types::SketchShape;

/// Every Bloom chain, whatever its link type: the link format decides the type name, the
/// header and the RDB layout.
impl<L: ChainValue> DialectType for Chain<L> {
    type Shape = ChainShape<L>;
    const TYPE_NAME: &'static str = L::TYPE_NAME;
    const ENCODING_VERSION: i32 = L::ENCODING_VERSION;
    const HEADER_PREFIX: usize = L::HEADER_PREFIX;
    const KIND: Kind = L::KIND;

    fn of(value: &Value) -> Option<&Self> {
        L::of(value)
    }
    fn of_mut(value: &mut Value) -> Option<&mut Self> {
        L::of_mut(value)
    }
    fn into_value(self) -> Value {
        L::into_value(self)
    }
    fn memory(&self) -> u64 {
        self.size_bytes()
    }
    fn header_len(prefix: &[u8]) -> Option<usize> {
        L::header_len(prefix)
    }
    fn shape(header: &[u8]) -> Result<Self::Shape, &'static str> {
        Chain::shape(header)
    }
    fn from_shape(shape: Admitted<Self::Shape>) -> Result<Self, &'static str> {
        Chain::from_shape(shape)
    }
    fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
        Chain::load_chunk(self, iter, data)
    }
    fn dump_header(&self) -> Vec<u8> {
        Chain::dump_header(self)
    }
    fn chunk_plan(&self) -> Vec<(i64, u64)> {
        Chain::chunk_plan(self)
    }
    fn chunk_bytes(&self, iter: i64, len: u64) -> Vec<u8> {
        Chain::chunk_bytes(self, iter, len)
    }
    fn visit_dump(&self, f: &mut dyn FnMut(&[u8])) {
        f(&self.dump_header());
        self.visit_bits(f);
    }
    fn rdb_save(&self, out: &mut impl RdbSink) {
        L::rdb_save(self, out)
    }
    fn rdb_load(input: &mut impl RdbSource, encver: i32) -> Result<Self, RdbError> {
        L::rdb_load(input, encver)
    }
}

/// RedisBloom's chain, inline in a value (32 bytes, the option enum holding the value's tag).
impl ChainValue for Link {
    const KIND: Kind = Kind::Bloom;
    fn of(value: &Value) -> Option<&Chain<Self>> {
        match value {
            Value::Bloom(chain) => Some(chain),
            _ => None,
        }
    }
    fn of_mut(value: &mut Value) -> Option<&mut Chain<Self>> {
        match value {
            Value::Bloom(chain) => Some(chain),
            _ => None,
        }
    }
    fn into_value(chain: Chain<Self>) -> Value {
        Value::Bloom(chain)
    }
}

/// The blocked chain, boxed.
impl ChainValue for BlockedLink {
    const KIND: Kind = Kind::BloomBlocked;
    fn of(value: &Value) -> Option<&Chain<Self>> {
        match value {
            Value::BloomBlocked(chain) => Some(&**chain),
            _ => None,
        }
    }
    fn of_mut(value: &mut Value) -> Option<&mut Chain<Self>> {
        match value {
            Value::BloomBlocked(chain) => Some(&mut **chain),
            _ => None,
        }
    }
    fn into_value(chain: Chain<Self>) -> Value {
        Value::BloomBlocked(Box::new(chain))
    }
}

/// valkey-bloom's chain, boxed.
impl ChainValue for ValkeyLink {
    const KIND: Kind = Kind::BloomValkey;
    fn of(value: &Value) -> Option<&Chain<Self>> {
        match value {
            Value::BloomValkey(chain) => Some(&**chain),
            _ => None,
        }
    }
    fn of_mut(value: &mut Value) -> Option<&mut Chain<Self>> {
        match value {
            Value::BloomValkey(chain) => Some(&mut **chain),
            _ => None,
        }
    }
    fn into_value(chain: Chain<Self>) -> Value {
        Value::BloomValkey(Box::new(chain))
    }
}

impl DialectType for CuckooChain {
    type Shape = cuckoo::CuckooShape;
    const TYPE_NAME: &'static str = "MBbloomCF";
    const ENCODING_VERSION: i32 = 4;
    const HEADER_PREFIX: usize = cuckoo::HEADER_LEN;
    const KIND: Kind = Kind::Cuckoo;

    fn of(value: &Value) -> Option<&Self> {
        match value {
            Value::Cuckoo(filter) => Some(&**filter),
            _ => None,
        }
    }
    fn of_mut(value: &mut Value) -> Option<&mut Self> {
        match value {
            Value::Cuckoo(filter) => Some(&mut **filter),
            _ => None,
        }
    }
    fn into_value(self) -> Value {
        Value::Cuckoo(Box::new(self))
    }
    fn memory(&self) -> u64 {
        self.size_bytes()
    }
    fn header_len(prefix: &[u8]) -> Option<usize> {
        (prefix.len() >= cuckoo::HEADER_LEN).then_some(cuckoo::HEADER_LEN)
    }
    fn shape(header: &[u8]) -> Result<Self::Shape, &'static str> {
        CuckooChain::shape(header).map_err(|e| e.message())
    }
    fn from_shape(shape: Admitted<Self::Shape>) -> Result<Self, &'static str> {
        CuckooChain::from_shape(shape).map_err(|e| e.message())
    }
    fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
        CuckooChain::load_chunk(self, iter, data)
    }
    fn dump_header(&self) -> Vec<u8> {
        CuckooChain::dump_header(self)
    }
    fn chunk_plan(&self) -> Vec<(i64, u64)> {
        CuckooChain::chunk_plan(self)
    }
    fn chunk_bytes(&self, iter: i64, len: u64) -> Vec<u8> {
        self.dump_chunk(iter - len as i64)
            .map(|(_, chunk)| chunk)
            .unwrap_or_default()
    }
    fn visit_dump(&self, f: &mut dyn FnMut(&[u8])) {
        f(&self.dump_header());
        self.visit_slots(f);
    }
    fn rdb_save(&self, out: &mut impl RdbSink) {
        crate::encoding::rdb::save_cuckoo(self, out)
    }
    fn rdb_load(input: &mut impl RdbSource, encver: i32) -> Result<Self, RdbError> {
        crate::encoding::rdb::load_cuckoo(input, encver)
    }
}

impl DialectType for WindowedFilter {
    type Shape = WindowedShape;
    const TYPE_NAME: &'static str = "BGwindowF";
    const ENCODING_VERSION: i32 = 1;
    const HEADER_PREFIX: usize = crate::types::windowed::HEADER_FIXED;
    const KIND: Kind = Kind::Windowed;

    fn of(value: &Value) -> Option<&Self> {
        match value {
            Value::Windowed(filter) => Some(&**filter),
            _ => None,
        }
    }
    fn of_mut(value: &mut Value) -> Option<&mut Self> {
        match value {
            Value::Windowed(filter) => Some(&mut **filter),
            _ => None,
        }
    }
    fn into_value(self) -> Value {
        Value::Windowed(Box::new(self))
    }
    fn memory(&self) -> u64 {
        WindowedFilter::memory(self)
    }
    fn header_len(prefix: &[u8]) -> Option<usize> {
        WindowedFilter::header_len(prefix)
    }
    fn shape(header: &[u8]) -> Result<Self::Shape, &'static str> {
        let (bytes, plan) = WindowedFilter::header_plan(header)?;
        Ok(WindowedShape {
            header: header.to_vec(),
            bytes,
            plan,
        })
    }
    fn from_shape(shape: Admitted<Self::Shape>) -> Result<Self, &'static str> {
        WindowedFilter::from_header(&shape.into_shape().header)
    }
    fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
        WindowedFilter::load_chunk(self, iter, data)
    }
    fn dump_header(&self) -> Vec<u8> {
        WindowedFilter::dump_header(self)
    }
    fn chunk_plan(&self) -> Vec<(i64, u64)> {
        WindowedFilter::chunk_plan(self)
    }
    fn chunk_bytes(&self, iter: i64, _len: u64) -> Vec<u8> {
        WindowedFilter::chunk_bytes(self, iter)
    }
    fn rdb_save(&self, out: &mut impl RdbSink) {
        crate::encoding::rdb::save_windowed(self, out)
    }
    fn rdb_load(input: &mut impl RdbSource, encver: i32) -> Result<Self, RdbError> {
        crate::encoding::rdb::load_windowed(input, encver)
    }
}
/// Implements the [`DialectType`] plumbing of a boxed variant whose type has inherent
/// `header_bytes`, `from_header`, `load_chunk`, `dump_header` and `chunk_plan`.
macro_rules! boxed_dialect_type {
    ($t:ty, $variant:ident) => {
        fn of(value: &Value) -> Option<&Self> {
            match value {
                Value::$variant(v) => Some(&**v),
                _ => None,
            }
        }
        fn of_mut(value: &mut Value) -> Option<&mut Self> {
            match value {
                Value::$variant(v) => Some(&mut **v),
                _ => None,
            }
        }
        fn into_value(self) -> Value {
            Value::$variant(Box::new(self))
        }
        type Shape = SketchShape<$t>;
        fn shape(header: &[u8]) -> Result<Self::Shape, &'static str> {
            Ok(SketchShape {
                bytes: <$t>::header_bytes(header)?,
                header: header.to_vec(),
                sketch: std::marker::PhantomData,
            })
        }
        fn from_shape(shape: Admitted<Self::Shape>) -> Result<Self, &'static str> {
            <$t>::from_header(&shape.into_shape().header)
        }
        fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
            <$t>::load_chunk(self, iter, data)
        }
        fn dump_header(&self) -> Vec<u8> {
            <$t>::dump_header(self)
        }
        fn chunk_plan(&self) -> Vec<(i64, u64)> {
            <$t>::chunk_plan(self)
        }
    };
}

/// RedisBloom has no SCANDUMP for sketches: their dump stream (snapshots, digests) is ours,
/// a fixed header and the counters in chunks.
impl DialectType for CountMin {
    const TYPE_NAME: &'static str = "CMSk-TYPE";
    const ENCODING_VERSION: i32 = 0;
    const HEADER_PREFIX: usize = crate::types::countmin::HEADER_LEN;
    const KIND: Kind = Kind::CountMin;

    boxed_dialect_type!(CountMin, CountMin);

    fn memory(&self) -> u64 {
        self.size_bytes()
    }
    fn header_len(prefix: &[u8]) -> Option<usize> {
        (prefix.len() >= crate::types::countmin::HEADER_LEN)
            .then_some(crate::types::countmin::HEADER_LEN)
    }
    fn chunk_bytes(&self, iter: i64, len: u64) -> Vec<u8> {
        self.cell_bytes(iter as u64 - 1 - len, len)
    }
    fn rdb_save(&self, out: &mut impl RdbSink) {
        crate::encoding::rdb::save_countmin(self, out)
    }
    fn rdb_load(input: &mut impl RdbSource, encver: i32) -> Result<Self, RdbError> {
        crate::encoding::rdb::load_countmin(input, encver)
    }
}

/// A Top-K's dump stream (ours): a header holding the heap and the decay generator's state,
/// then the buckets in chunks.
impl DialectType for TopK {
    const TYPE_NAME: &'static str = "TopK-TYPE";
    const ENCODING_VERSION: i32 = 0;
    const HEADER_PREFIX: usize = crate::types::topk::HEADER_FIXED;
    const KIND: Kind = Kind::TopK;

    boxed_dialect_type!(TopK, TopK);

    fn memory(&self) -> u64 {
        self.size_bytes()
    }
    fn header_len(prefix: &[u8]) -> Option<usize> {
        TopK::header_len(prefix)
    }
    fn chunk_bytes(&self, iter: i64, len: u64) -> Vec<u8> {
        self.bucket_bytes(iter as u64 - 1 - len, len)
    }
    fn rdb_save(&self, out: &mut impl RdbSink) {
        crate::encoding::rdb::save_topk(self, out)
    }
    fn rdb_load(input: &mut impl RdbSource, encver: i32) -> Result<Self, RdbError> {
        crate::encoding::rdb::load_topk(input, encver)
    }
}

/// A t-digest's dump stream (ours; RedisBloom has no SCANDUMP for it): the scalar fields, then
/// the slots in use, of the form RedisBloom saves ([`TDigest::as_saved`]).
impl DialectType for TDigest {
    const TYPE_NAME: &'static str = "TDIS-TYPE";
    const ENCODING_VERSION: i32 = crate::types::tdigest::ENCODING_VERSION;
    const HEADER_PREFIX: usize = crate::types::tdigest::HEADER_LEN;
    const KIND: Kind = Kind::TDigest;

    boxed_dialect_type!(TDigest, TDigest);

    fn memory(&self) -> u64 {
        TDigest::memory(self)
    }
    fn header_len(prefix: &[u8]) -> Option<usize> {
        (prefix.len() >= crate::types::tdigest::HEADER_LEN)
            .then_some(crate::types::tdigest::HEADER_LEN)
    }
    fn chunk_bytes(&self, _iter: i64, _len: u64) -> Vec<u8> {
        TDigest::chunk_bytes(self)
    }
    fn rdb_save(&self, out: &mut impl RdbSink) {
        crate::types::tdigest::save(self, out)
    }
    fn rdb_load(input: &mut impl RdbSource, encver: i32) -> Result<Self, RdbError> {
        crate::types::tdigest::load(input, encver)
    }
}

/// A counting Bloom filter's dump stream (ours): its header, then the counter words in chunks.
impl DialectType for CountingFilter {
    type Shape = counting::CountingShape;
    const TYPE_NAME: &'static str = "BGcntBloo";
    const ENCODING_VERSION: i32 = 1;
    const HEADER_PREFIX: usize = counting::HEADER_LEN;
    const KIND: Kind = Kind::Counting;

    fn of(value: &Value) -> Option<&Self> {
        match value {
            Value::Counting(filter) => Some(&**filter),
            _ => None,
        }
    }
    fn of_mut(value: &mut Value) -> Option<&mut Self> {
        match value {
            Value::Counting(filter) => Some(&mut **filter),
            _ => None,
        }
    }
    fn into_value(self) -> Value {
        Value::Counting(Box::new(self))
    }
    fn memory(&self) -> u64 {
        CountingFilter::memory(self)
    }
    fn header_len(prefix: &[u8]) -> Option<usize> {
        (prefix.len() >= counting::HEADER_LEN).then_some(counting::HEADER_LEN)
    }
    fn shape(header: &[u8]) -> Result<Self::Shape, &'static str> {
        CountingFilter::header_shape(header)
    }
    fn from_shape(shape: Admitted<Self::Shape>) -> Result<Self, &'static str> {
        CountingFilter::new(shape)
    }
    fn load_chunk(&mut self, iter: i64, data: &[u8]) -> Result<(), &'static str> {
        CountingFilter::load_chunk(self, iter, data)
    }
    fn dump_header(&self) -> Vec<u8> {
        CountingFilter::dump_header(self)
    }
    fn chunk_plan(&self) -> Vec<(i64, u64)> {
        CountingFilter::chunk_plan(self)
    }
    fn chunk_bytes(&self, iter: i64, len: u64) -> Vec<u8> {
        self.counter_bytes(iter as u64 - 1 - len, len)
    }
    fn rdb_save(&self, out: &mut impl RdbSink) {
        crate::encoding::rdb::save_counting(self, out)
    }
    fn rdb_load(input: &mut impl RdbSource, encver: i32) -> Result<Self, RdbError> {
        crate::encoding::rdb::load_counting(input, encver)
    }
}
