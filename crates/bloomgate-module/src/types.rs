//! The `MBbloom--`, `MBbloomCF`, `CMSk-TYPE`, `TopK-TYPE` and `TDIS-TYPE` module data types,
//! registered under RedisBloom's names and encoding versions so Redis loads RedisBloom's RDB
//! files, `DUMP` payloads and full syncs into this module (and back); and our own: `BGwindowF`,
//! time-windowed filters (`WF.*`), `BGcntBloo`, counting Bloom filters (`CBF.*`), and
//! `BGbloomBK`, Bloom filters of the blocked layout (`BF.RESERVE … LAYOUT blocked`), which
//! RedisBloom cannot load; and `bloomfltr`, valkey-bloom's filters, registered from OnLoad in
//! the encoding version of the server's valkey-bloom flavour (0 for 0.1.0, 1 for 1.0) so
//! valkey-bloom's RDB files load into this module and are written back in its encoding.
//!
//! Each key holds a boxed dialect [`Value`]. RDB save/load go through the dialect's field order
//! ([`RdbSink`] / [`RdbSource`] over `RedisModuleIO`); loading follows the dialect's budget rule
//! (every field validated, the string buffers read and matched against the claimed sizes, the
//! value's size admitted against the module's memory budget — `maxmemory` for a `RESTORE`, what
//! the machine can hold for an RDB file or a full sync — before anything is allocated) and, on a
//! corrupt or oversized value, logs through `RedisModule_LogIOError` and returns NULL, which
//! fails the RDB load or the `RESTORE` instead of crashing. AOF rewrite emits the LOADCHUNK
//! sequence of filters (a `bloomfltr` filter in valkey-bloom 1.0's dialect: one `BF.LOAD`, as
//! valkey-bloom 1.0 does), and `RESTORE key 0 <DUMP payload>` for sketches (which have no
//! LOADCHUNK, as RedisBloom does); `DEBUG DIGEST-VALUE` digests the RDB fields, in the RDB's
//! order.

use std::ffi::{c_char, c_int, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use bloomgate_dialect::budget::{Allowance, KeyCap};
use bloomgate_dialect::codec::rdb_io::{RdbError, RdbSink, RdbSource};
use bloomgate_dialect::types::counting::CountingFilter;
use bloomgate_dialect::types::countmin::CountMin;
use bloomgate_dialect::types::cuckoo::CuckooChain;
use bloomgate_dialect::types::sbchain::valkey::{encode_load_payload, valkey_flavour};
use bloomgate_dialect::types::sbchain::{
    BlockedChain, BloomChain, Chain, ValkeyChain, ValkeyFlavour, ValkeyLink,
};
use bloomgate_dialect::types::tdigest::TDigest;
use bloomgate_dialect::types::topk::TopK;
use bloomgate_dialect::types::windowed::WindowedFilter;
use bloomgate_dialect::value::{ChainValue, Kind};
use bloomgate_dialect::{DialectType, Value};
use redis_module::native_types::RedisType;
use redis_module::{raw, Context};

/// The module-side facts of a dialect type: its registration and how an AOF rewrite replays it.
trait ModuleType: DialectType {
    /// The command an AOF rewrite replays this type's dump stream with; `None`: a `RESTORE` of
    /// the key's `DUMP` payload.
    const LOADCHUNK: Option<&'static str>;
}

/// Every Bloom chain, whatever its link type.
impl<L: ChainValue> ModuleType for Chain<L> {
    const LOADCHUNK: Option<&'static str> = Some("BF.LOADCHUNK");
}

impl ModuleType for CuckooChain {
    const LOADCHUNK: Option<&'static str> = Some("CF.LOADCHUNK");
}

impl ModuleType for WindowedFilter {
    const LOADCHUNK: Option<&'static str> = Some("WF.LOADCHUNK");
}

impl ModuleType for CountingFilter {
    const LOADCHUNK: Option<&'static str> = Some("CBF.LOADCHUNK");
}

impl ModuleType for CountMin {
    const LOADCHUNK: Option<&'static str> = None;
}

impl ModuleType for TopK {
    const LOADCHUNK: Option<&'static str> = None;
}

impl ModuleType for TDigest {
    const LOADCHUNK: Option<&'static str> = None;
}

const fn methods<T: ModuleType>() -> raw::RedisModuleTypeMethods {
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load::<T>),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite::<T>),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        copy: Some(copy),
        defrag: Some(crate::defrag::defrag),
        free_effort: Some(crate::defrag::free_effort),
        // SAFETY: every other field is an optional callback (None) or a plain integer, for
        // which all-zero bytes are the valid "absent" value.
        ..unsafe { std::mem::zeroed() }
    }
}

/// `MBbloom--`: scalable Bloom filters.
pub static BLOOM_TYPE: RedisType = RedisType::new(
    BloomChain::TYPE_NAME,
    BloomChain::ENCODING_VERSION,
    methods::<BloomChain>(),
);

/// `BGbloomBK`: scalable Bloom filters of cache-line blocked links (`LAYOUT blocked`).
pub static BLOOM_BLOCKED_TYPE: RedisType = RedisType::new(
    BlockedChain::TYPE_NAME,
    BlockedChain::ENCODING_VERSION,
    methods::<BlockedChain>(),
);

/// `bloomfltr` in encoding 0: valkey-bloom 0.1.0's filters (registered for the
/// `valkey-bloom-0.1` flavour).
static VALKEY_TYPE_V0: RedisType =
    RedisType::new(ValkeyChain::TYPE_NAME, 0, methods::<ValkeyChain>());

/// `bloomfltr` in encoding 1: valkey-bloom 1.0's filters (the default flavour).
static VALKEY_TYPE_V1: RedisType =
    RedisType::new(ValkeyChain::TYPE_NAME, 1, methods::<ValkeyChain>());

/// The `bloomfltr` registration of the server's valkey-bloom flavour (its encoding version is
/// the flavour's; both load either encoding).
fn valkey_type() -> &'static RedisType {
    match valkey_flavour() {
        ValkeyFlavour::V0_1 => &VALKEY_TYPE_V0,
        ValkeyFlavour::V1_0 => &VALKEY_TYPE_V1,
    }
}

/// Registers `bloomfltr`, valkey-bloom's type, in the encoding of the flavour set by then (from
/// OnLoad, after the load arguments are read).
pub fn register_valkey_type(ctx: &Context) -> Result<(), String> {
    valkey_type()
        .create_data_type(ctx.ctx)
        .map_err(|e| format!("cannot register bloomfltr: {e}"))
}

/// `MBbloomCF`: cuckoo filters.
pub static CUCKOO_TYPE: RedisType = RedisType::new(
    CuckooChain::TYPE_NAME,
    CuckooChain::ENCODING_VERSION,
    methods::<CuckooChain>(),
);

/// `BGwindowF`: time-windowed filters.
pub static WINDOWED_TYPE: RedisType = RedisType::new(
    WindowedFilter::TYPE_NAME,
    WindowedFilter::ENCODING_VERSION,
    methods::<WindowedFilter>(),
);

/// `BGcntBloo`: counting Bloom filters.
pub static COUNTING_TYPE: RedisType = RedisType::new(
    CountingFilter::TYPE_NAME,
    CountingFilter::ENCODING_VERSION,
    methods::<CountingFilter>(),
);

/// `TDIS-TYPE`: t-digests.
pub static TDIGEST_TYPE: RedisType = RedisType::new(
    TDigest::TYPE_NAME,
    TDigest::ENCODING_VERSION,
    methods::<TDigest>(),
);

/// `CMSk-TYPE`: Count-Min Sketches.
pub static COUNTMIN_TYPE: RedisType = RedisType::new(
    CountMin::TYPE_NAME,
    CountMin::ENCODING_VERSION,
    methods::<CountMin>(),
);

/// `TopK-TYPE`: Top-K sketches.
pub static TOPK_TYPE: RedisType =
    RedisType::new(TopK::TYPE_NAME, TopK::ENCODING_VERSION, methods::<TopK>());

/// The registered Redis type of a dialect kind.
pub fn redis_type(kind: Kind) -> *mut raw::RedisModuleType {
    match kind {
        Kind::Bloom => *BLOOM_TYPE.raw_type.borrow(),
        Kind::BloomBlocked => *BLOOM_BLOCKED_TYPE.raw_type.borrow(),
        Kind::BloomValkey => *valkey_type().raw_type.borrow(),
        Kind::Cuckoo => *CUCKOO_TYPE.raw_type.borrow(),
        Kind::Windowed => *WINDOWED_TYPE.raw_type.borrow(),
        Kind::TDigest => *TDIGEST_TYPE.raw_type.borrow(),
        Kind::CountMin => *COUNTMIN_TYPE.raw_type.borrow(),
        Kind::TopK => *TOPK_TYPE.raw_type.borrow(),
        Kind::Counting => *COUNTING_TYPE.raw_type.borrow(),
    }
}

/// Whether `t` is one of this module's types (compared with the registered types, read once
/// after registration).
pub fn is_ours(t: *mut raw::RedisModuleType) -> bool {
    static OURS: std::sync::OnceLock<[usize; Kind::ALL.len()]> = std::sync::OnceLock::new();
    if t.is_null() {
        return false;
    }
    if let Some(ours) = OURS.get() {
        return ours.contains(&(t as usize));
    }
    let ours = Kind::ALL.map(|k| redis_type(k) as usize);
    if !ours.contains(&0) {
        // Every type is registered: remember them.
        let _ = OURS.set(ours);
    }
    ours.contains(&(t as usize))
}

/// Asks Redis to report short or malformed reads to `rdb_load` (so it can fail cleanly)
/// instead of aborting the process.
pub fn handle_io_errors(ctx: &Context) {
    // SAFETY: called from OnLoad with the module's context; the function exists since Redis 6.0.
    unsafe {
        if let Some(set) = raw::RedisModule_SetModuleOptions {
            set(ctx.ctx, raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS as c_int);
        }
    }
}

/// Runs a type callback's body; a panic (a dialect bug) is logged and turned into `fallback`
/// instead of unwinding into Redis, which would abort the server: a panicking load is a refused
/// value, a panicking save or digest a damaged record, never a dead server.
fn guard<R>(callback: &str, fallback: R, body: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        let msg = CString::new(format!(
            "bloomgate: internal error in the {callback} callback"
        ))
        .unwrap_or_default();
        // SAFETY: a NULL context logs to the server log; "%s" consumes one C string.
        unsafe {
            if let Some(log) = raw::RedisModule_Log {
                log(
                    ptr::null_mut(),
                    c"warning".as_ptr(),
                    c"%s".as_ptr(),
                    msg.as_ptr(),
                );
            }
        }
        fallback
    })
}

/// Boxes a value as a key's module value pointer.
pub fn into_raw(value: Value) -> *mut c_void {
    Box::into_raw(Box::new(value)).cast()
}

/// Field I/O over a `RedisModuleIO` being saved.
struct Sink(*mut raw::RedisModuleIO);

impl RdbSink for Sink {
    fn save_unsigned(&mut self, value: u64) {
        raw::save_unsigned(self.0, value);
    }
    fn save_double(&mut self, value: f64) {
        raw::save_double(self.0, value);
    }
    fn save_float(&mut self, value: f32) {
        raw::save_float(self.0, value);
    }
    fn save_string(&mut self, value: &[u8]) {
        raw::save_slice(self.0, value);
    }
}

/// Field I/O over a `RedisModuleIO` being loaded (an RDB file, a `RESTORE` payload, a full
/// sync); every read checks Redis' I/O error flag.
struct Source {
    io: *mut raw::RedisModuleIO,
    allowance: Allowance,
}

impl Source {
    /// A source whose values are admitted against the module's budget: `maxmemory` for a
    /// `RESTORE`, what the machine can hold while Redis loads (an RDB file, a full sync); and
    /// against `bloom-memory-usage-limit` unless the value is replayed (loaded, or on a
    /// read-only replica), where going past it is only logged.
    fn new(io: *mut raw::RedisModuleIO) -> Self {
        // SAFETY: `io` is the live handle Redis passed to `rdb_load`; the context it returns
        // belongs to the IO and stays valid during the callback.
        let (ctx, flags) = unsafe {
            let ctx = raw::RedisModule_GetContextFromIO.map_or(ptr::null_mut(), |f| f(io));
            let flags = match (ctx.is_null(), raw::RedisModule_GetContextFlags) {
                (false, Some(f)) => f(ctx),
                _ => raw::REDISMODULE_CTX_FLAGS_LOADING as c_int,
            };
            (ctx, flags)
        };
        let loading = flags & raw::REDISMODULE_CTX_FLAGS_LOADING as c_int != 0;
        let cap = KeyCap {
            limit: crate::settings::read().memory_usage_limit,
            replaying: crate::budget::replaying(flags),
        };
        Self {
            io,
            allowance: Allowance::new(crate::budget::budget(ctx, loading)).capped(cap, 0),
        }
    }
}

impl RdbSource for Source {
    fn load_unsigned(&mut self) -> Result<u64, RdbError> {
        raw::load_unsigned(self.io).map_err(|_| RdbError::Truncated)
    }
    fn load_double(&mut self) -> Result<f64, RdbError> {
        raw::load_double(self.io).map_err(|_| RdbError::Truncated)
    }
    fn load_float(&mut self) -> Result<f32, RdbError> {
        raw::load_float(self.io).map_err(|_| RdbError::Truncated)
    }
    fn load_string(&mut self, max_len: u64) -> Result<Vec<u8>, RdbError> {
        // Redis reads the whole string before handing it over (failing cleanly on a length past
        // the payload); its length is checked here.
        let buffer = raw::load_string_buffer(self.io).map_err(|_| RdbError::Truncated)?;
        let bytes = buffer.as_ref();
        if bytes.len() as u64 > max_len {
            return Err(RdbError::Invalid(
                "string buffer longer than its header says".into(),
            ));
        }
        Ok(bytes.to_vec())
    }
    fn allowance(&mut self) -> &mut Allowance {
        &mut self.allowance
    }
}

extern "C" fn rdb_load<T: ModuleType>(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard("rdb_load", ptr::null_mut(), || load::<T>(rdb, encver))
}

fn load<T: ModuleType>(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    let mut source = Source::new(rdb);
    let loaded = T::rdb_load(&mut source, encver);
    crate::budget::charge(source.allowance.spent());
    if loaded.is_ok() && source.allowance.passed_cap() {
        log_io(
            rdb,
            &format!(
                "{}: a value past bloom-memory-usage-limit was loaded (replayed data is never \
                 refused)",
                T::TYPE_NAME
            ),
        );
    }
    match loaded {
        Ok(filter) => into_raw(filter.into_value()),
        Err(why) => {
            log_io(rdb, &format!("{}: {why}", T::TYPE_NAME));
            ptr::null_mut()
        }
    }
}

/// Logs a warning about the value `rdb` is loading.
fn log_io(rdb: *mut raw::RedisModuleIO, message: &str) {
    let msg = CString::new(message).unwrap_or_default();
    // SAFETY: `rdb` is the live IO handle Redis passed in; "%s" consumes one C string.
    unsafe {
        if let Some(log) = raw::RedisModule_LogIOError {
            log(rdb, c"warning".as_ptr(), c"%s".as_ptr(), msg.as_ptr());
        }
    }
}

/// The value behind a module value pointer Redis hands to a type callback.
///
/// # Safety
/// `value` must be a pointer made by [`into_raw`] and still owned by Redis.
unsafe fn value_ref<'a>(value: *const c_void) -> &'a Value {
    // SAFETY: per the contract, a live `Box<Value>` allocation.
    unsafe { &*value.cast::<Value>() }
}

extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    guard("rdb_save", (), || {
        // SAFETY: Redis passes the value it stores for this type, and saves either on the main
        // thread (DUMP, SAVE) or in a forked child, never while a command runs on it: changing
        // it in place here is what RedisBloom's save does (a t-digest merges its buffer).
        let value = unsafe { &mut *value.cast::<Value>() };
        value.prepare_save();
        value.rdb_save(&mut Sink(rdb));
    });
}

extern "C" fn aof_rewrite<T: ModuleType>(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard("aof_rewrite", (), || emit_aof::<T>(aof, key, value));
}

fn emit_aof<T: ModuleType>(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    let Some(loadchunk) = T::LOADCHUNK else {
        return aof_restore(aof, key);
    };
    // SAFETY: Redis passes the value it stores for this type.
    let value = unsafe { value_ref(value) };
    if let Some(payload) = load_payload(value) {
        // SAFETY: "sb" = a RedisModuleString and a (pointer, length) buffer, matching the two
        // arguments; `payload` outlives the call.
        unsafe {
            raw::RedisModule_EmitAOF.expect("EmitAOF exists since Redis 4")(
                aof,
                c"BF.LOAD".as_ptr(),
                c"sb".as_ptr(),
                key,
                payload.as_ptr().cast::<c_char>(),
                payload.len(),
            );
        }
        return;
    }
    let command = CString::new(loadchunk).expect("no NUL in a command name");
    for (iter, chunk) in value.dump_stream() {
        // SAFETY: "slb" = a RedisModuleString, a long long and a (pointer, length) buffer,
        // matching the three arguments; `chunk` outlives the call.
        unsafe {
            raw::RedisModule_EmitAOF.expect("EmitAOF exists since Redis 4")(
                aof,
                command.as_ptr(),
                c"slb".as_ptr(),
                key,
                iter as std::ffi::c_longlong,
                chunk.as_ptr().cast::<c_char>(),
                chunk.len(),
            );
        }
    }
}

/// The `BF.LOAD` data valkey-bloom 1.0's AOF rewrite writes for a `bloomfltr` filter, in the
/// 1.0 flavour's dialect (the only one with `BF.LOAD`) and when it fits one bulk string of
/// Valkey's default `proto-max-bulk-len` (512 MB); else `None`: the LOADCHUNK sequence.
fn load_payload(value: &Value) -> Option<Vec<u8>> {
    let chain = ValkeyLink::of(value)?;
    let dialect = crate::settings::read().dialect;
    let fits = chain.size_bytes() < 500 << 20;
    (dialect.valkey() == Some(ValkeyFlavour::V1_0) && fits).then(|| encode_load_payload(chain))
}

/// Emits `RESTORE key 0 <payload>` with the key's `DUMP` payload, taken through a thread-safe
/// context (as RedisBloom rewrites its sketches): the payload is in the running server's own
/// RDB version, so the AOF replays into it.
fn aof_restore(aof: *mut raw::RedisModuleIO, key: *mut raw::RedisModuleString) {
    // SAFETY: `aof` and `key` are live for the callback; the thread-safe context and the call
    // reply are freed before returning; "s" consumes one RedisModuleString, "slb" a string, a
    // long long and a (pointer, length) buffer that outlives the EmitAOF call.
    unsafe {
        let ctx = raw::RedisModule_GetThreadSafeContext.expect("Redis 6+")(ptr::null_mut());
        let reply =
            raw::RedisModule_Call.expect("core API")(ctx, c"DUMP".as_ptr(), c"s".as_ptr(), key);
        let is_string = !reply.is_null()
            && raw::RedisModule_CallReplyType.expect("core API")(reply)
                == raw::REDISMODULE_REPLY_STRING as c_int;
        if is_string {
            let mut len = 0usize;
            let payload = raw::RedisModule_CallReplyStringPtr.expect("core API")(reply, &mut len);
            raw::RedisModule_EmitAOF.expect("EmitAOF exists since Redis 4")(
                aof,
                c"RESTORE".as_ptr(),
                c"slb".as_ptr(),
                key,
                0 as std::ffi::c_longlong,
                payload,
                len,
            );
        } else if let Some(log) = raw::RedisModule_LogIOError {
            log(
                aof,
                c"warning".as_ptr(),
                c"%s".as_ptr(),
                c"bloomgate: DUMP failed during the AOF rewrite".as_ptr(),
            );
        }
        if !reply.is_null() {
            raw::RedisModule_FreeCallReply.expect("core API")(reply);
        }
        raw::RedisModule_FreeThreadSafeContext.expect("Redis 6+")(ctx);
    }
}

/// `MEMORY USAGE`: the filter's reported size (struct, link/sub-filter array and bit/bucket
/// bytes, as RedisBloom counts them), so the answer equals RedisBloom's for the same filter.
extern "C" fn mem_usage(value: *const c_void) -> usize {
    guard("mem_usage", 0, || {
        // SAFETY: Redis passes the value it stores for this type.
        let value = unsafe { value_ref(value) };
        value.memory() as usize
    })
}

/// Field I/O into a `DEBUG DIGEST-VALUE` digest: each RDB field mixed in as one buffer, so the
/// digest covers exactly what the RDB holds (a key reloaded from its RDB, a replica after a full
/// sync, digests the same) and nothing it does not save (a Top-K's decay generator state).
struct DigestSink(*mut raw::RedisModuleDigest);

impl DigestSink {
    fn add(&mut self, bytes: &[u8]) {
        // SAFETY: `self.0` is the live digest context Redis passed to the callback; the buffer
        // is only read during the call.
        unsafe {
            raw::RedisModule_DigestAddStringBuffer.expect("digest API exists")(
                self.0,
                bytes.as_ptr().cast_mut().cast(),
                bytes.len(),
            );
        }
    }
}

impl RdbSink for DigestSink {
    fn save_unsigned(&mut self, value: u64) {
        self.add(&value.to_le_bytes());
    }
    fn save_double(&mut self, value: f64) {
        self.add(&value.to_bits().to_le_bytes());
    }
    fn save_float(&mut self, value: f32) {
        self.add(&value.to_bits().to_le_bytes());
    }
    fn save_string(&mut self, value: &[u8]) {
        self.add(value);
    }
}

extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard("digest", (), || {
        // SAFETY: Redis passes the value it stores for this type, on the main thread and never
        // while a command runs on it; it is prepared as `rdb_save` prepares it (a t-digest
        // merges its buffer), so the digest is that of the fields an RDB save writes.
        let value = unsafe { &mut *value.cast::<Value>() };
        value.prepare_save();
        value.rdb_save(&mut DigestSink(md));
        // SAFETY: the same live digest context.
        unsafe { raw::RedisModule_DigestEndSequence.expect("digest API exists")(md) };
    });
}

extern "C" fn free(value: *mut c_void) {
    // SAFETY: Redis gives the value back exactly once, when the key is deleted or overwritten.
    drop(unsafe { Box::from_raw(value.cast::<Value>()) });
}

extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // A copy is a new value: admitted against the budget first. NULL makes COPY fail cleanly
    // ("module key failed to copy").
    guard("copy", ptr::null_mut(), || {
        // SAFETY: Redis passes the value it stores for this type.
        let value = unsafe { value_ref(value) };
        let bytes = value.memory();
        if bytes > crate::budget::budget(ptr::null_mut(), false) {
            return ptr::null_mut();
        }
        crate::budget::charge(bytes);
        into_raw(value.clone())
    })
}
