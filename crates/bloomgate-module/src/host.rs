//! The dialect's `Host` over Redis' keyspace, and the command entry point.
//!
//! Every command of `bloomgate_dialect::commands::table()` is registered with its flags, key
//! positions, arity, key spec and documentation (so `COMMAND INFO` and `COMMAND DOCS` show what
//! `bloomgate serve` shows, and ACL and Cluster routing see them) and handled by [`dispatch`]:
//! the dialect runs the command against [`ModuleHost`], its reply is sent through
//! `RedisModule_ReplyWith*` (Redis renders booleans, maps and nulls for the client's RESP
//! version), and what it says to propagate is replicated: verbatim, or the rewrite (an
//! auto-created filter goes to replicas and the AOF with its explicit parameters).

use std::cell::{Cell, OnceCell};
use std::ffi::{c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::RwLockReadGuard;

use bloomgate_dialect::commands::{self, Propagate, WrongType};
use bloomgate_dialect::{Config, Host, Reply, Value};
use redis_module::{raw, Context};

use crate::{budget, settings, types};

/// Registers every dialect command, and its ACL categories where the server supports them.
pub fn register_commands(ctx: &Context) -> Result<(), String> {
    // SAFETY: OnLoad context; the callback matches RedisModuleCmdFunc; names and flags are
    // NUL-terminated strings that live across each call.
    unsafe {
        let custom_categories = raw::RedisModule_AddACLCategory.is_some_and(|add| {
            commands::categories().iter().all(|c| {
                let c = CString::new(*c).expect("no NUL");
                add(ctx.ctx, c.as_ptr()) == raw::REDISMODULE_OK as c_int
            })
        });
        let create = raw::RedisModule_CreateCommand.expect("core API");
        let dialect = crate::settings::read().dialect;
        for (i, info) in commands::table_for(dialect).iter().enumerate() {
            let Some(&entry) = ENTRY_POINTS.get(i) else {
                return Err(format!("more commands than entry points at {}", info.name));
            };
            let name = CString::new(commands::registered_name(dialect, info.name)).expect("no NUL");
            // The module API spells COMMAND INFO's `denyoom` as `deny-oom`; `module` is what
            // Redis itself adds to every module command, and `movablekeys` to one whose key
            // spec counts its keys.
            let mut flags: Vec<&str> = info
                .flag_names()
                .into_iter()
                .filter(|&f| f != "module" && f != "movablekeys")
                .map(|f| if f == "denyoom" { "deny-oom" } else { f })
                .collect();
            if counts_keys(info) {
                // Redis 7.0's cluster routing reads a module command's keys from its legacy
                // range (the destination alone) unless the module answers for them: it asks
                // the command itself (see `dispatch`), so sources in another slot get CROSSSLOT.
                flags.push("getkeys-api");
            }
            let flags = CString::new(flags.join(" ")).expect("no NUL");
            let status = create(
                ctx.ctx,
                name.as_ptr(),
                Some(entry),
                flags.as_ptr(),
                info.first_key,
                info.last_key,
                info.step,
            );
            if status != raw::REDISMODULE_OK as c_int {
                return Err(format!("could not register {}", info.name));
            }
            // Before Redis 7.0 there is nothing more to say about a command.
            let Some(get) = raw::RedisModule_GetCommand else {
                continue;
            };
            let command = get(ctx.ctx, name.as_ptr());
            if command.is_null() {
                return Err(format!("could not find {} after registering it", info.name));
            }
            if let Some(set) = raw::RedisModule_SetCommandACLCategories {
                let category = acl_categories(info, custom_categories);
                let category = CString::new(category).expect("no NUL");
                if set(command, category.as_ptr()) != raw::REDISMODULE_OK as c_int {
                    return Err(format!("could not set the ACL categories of {}", info.name));
                }
            }
            if !set_command_info(command, info) {
                return Err(format!("could not set the command info of {}", info.name));
            }
        }
    }
    Ok(())
}

/// What `RedisModule_SetCommandInfo` reads; Redis copies every string and array it is given.
static COMMAND_INFO_VERSION: raw::RedisModuleCommandInfoVersion =
    raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };

/// Gives `command` what `bloomgate serve` shows of `info` in `COMMAND INFO` and `COMMAND DOCS`:
/// the table's arity, its key spec (notes; RO or RW; the key at `first_key`) and a merge's
/// second (read-only sources counted by `numkeys_at`), summary,
/// complexity, since and arguments (no tips, as there). The commands RedisBloom registers
/// without any of it (`docs` is `None`: BF.DEBUG, CF.DEBUG, CF.COMPACT) keep Redis' defaults,
/// arity -1 included, as `serve` shows them. Redis 7.0 has `RedisModule_SetCommandInfo`.
///
/// # Safety
/// `command` is a command this module registered, in the OnLoad context.
unsafe fn set_command_info(
    command: *mut raw::RedisModuleCommand,
    info: &commands::CommandInfo,
) -> bool {
    let Some(docs) = &info.docs else {
        return true;
    };
    let Some(set) = raw::RedisModule_SetCommandInfo else {
        return true;
    };
    // Every string lives in `strings` until `set` returns (Redis copies them).
    let mut strings = Strings::default();
    // SAFETY: a zeroed key spec is the array terminator Redis looks for, and a valid start.
    let mut key_specs: [raw::RedisModuleCommandKeySpec; 3] = unsafe { std::mem::zeroed() };
    let spec = &mut key_specs[0];
    if !docs.key_notes.is_empty() {
        spec.notes = strings.c(docs.key_notes);
    }
    spec.flags = u64::from(if docs.key_rw {
        raw::REDISMODULE_CMD_KEY_RW
    } else {
        raw::REDISMODULE_CMD_KEY_RO
    });
    spec.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    spec.bs.index.pos = info.first_key;
    spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
    spec.fk.range = raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 {
        lastkey: 0,
        keystep: 1,
        limit: 0,
    };
    if let Some(at) = docs.numkeys_at {
        // A merge's sources: read-only, counted by the integer at `at`, right after it.
        let sources = &mut key_specs[1];
        sources.flags = u64::from(raw::REDISMODULE_CMD_KEY_RO);
        sources.begin_search_type =
            raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
        sources.bs.index.pos = at;
        sources.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM;
        sources.fk.keynum = raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_2 {
            keynumidx: 0,
            firstkey: 1,
            keystep: 1,
        };
    }
    let mut arg_arrays = Vec::new();
    let args = command_args(docs.args, &mut strings, &mut arg_arrays);
    let mut history: Vec<raw::RedisModuleCommandHistoryEntry> = docs
        .history
        .iter()
        .map(|(since, changes)| raw::RedisModuleCommandHistoryEntry {
            since: strings.c(since),
            changes: strings.c(changes),
        })
        .collect();
    // SAFETY: an all-zero entry (null `since`) is the terminator Redis looks for.
    history.push(unsafe { std::mem::zeroed() });
    let command_info = raw::RedisModuleCommandInfo {
        version: &COMMAND_INFO_VERSION,
        summary: strings.c(docs.summary),
        complexity: strings.c(docs.complexity),
        since: strings.c(docs.since),
        history: if docs.history.is_empty() {
            std::ptr::null_mut()
        } else {
            history.as_mut_ptr()
        },
        tips: std::ptr::null(),
        arity: info.arity,
        key_specs: key_specs.as_mut_ptr(),
        args,
    };
    // SAFETY: every pointer in `command_info` points into `strings`, `key_specs`, `history` or
    // `arg_arrays` (each array ends with a zeroed terminator), all alive across the call.
    unsafe { set(command, &command_info) == raw::REDISMODULE_OK as c_int }
}

/// NUL-terminated copies of the strings handed to Redis, kept until the call returns.
#[derive(Default)]
struct Strings(Vec<CString>);

impl Strings {
    fn c(&mut self, s: &str) -> *const std::ffi::c_char {
        self.0.push(CString::new(s).expect("no NUL"));
        self.0.last().expect("just pushed").as_ptr()
    }
}

/// `args` as Redis' zero-terminated argument array (nested for blocks and one-ofs); `arrays`
/// owns every array built.
fn command_args(
    args: &[commands::Arg],
    strings: &mut Strings,
    arrays: &mut Vec<Vec<raw::RedisModuleCommandArg>>,
) -> *mut raw::RedisModuleCommandArg {
    use commands::ArgKind;
    // The n-th key argument is the n-th key spec's (a merge's destination, then its sources).
    let mut key_spec = 0;
    let mut out: Vec<raw::RedisModuleCommandArg> = args
        .iter()
        .map(|a| {
            let type_ = match a.kind {
                ArgKind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
                ArgKind::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
                ArgKind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                ArgKind::Double => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE,
                ArgKind::PureToken => {
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN
                }
                ArgKind::Block => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
                ArgKind::OneOf => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
            };
            let mut flags = 0;
            if a.optional {
                flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
            }
            if a.multiple {
                flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
            }
            raw::RedisModuleCommandArg {
                name: strings.c(a.name),
                type_,
                // -1 ("none") for every argument but a key.
                key_spec_index: if a.kind == ArgKind::Key {
                    key_spec += 1;
                    key_spec - 1
                } else {
                    -1
                },
                token: a.token.map_or(std::ptr::null(), |t| strings.c(t)),
                summary: std::ptr::null(),
                since: std::ptr::null(),
                flags: flags as c_int,
                deprecated_since: std::ptr::null(),
                subargs: if a.sub.is_empty() {
                    std::ptr::null_mut()
                } else {
                    command_args(a.sub, strings, arrays)
                },
                display_text: std::ptr::null(),
            }
        })
        .collect();
    // SAFETY: an all-zero argument (null name) is the terminator Redis looks for.
    out.push(unsafe { std::mem::zeroed() });
    let ptr = out.as_mut_ptr();
    // Moving the Vec into `arrays` moves its header, not its heap buffer: `ptr` stays valid.
    arrays.push(out);
    ptr
}

/// A command's ACL categories (Redis ≥ 7.2 lets modules set them; 7.0 gives module commands
/// none): `read`/`write`/`fast` as the table says (Redis adds no `slow` to module commands),
/// and the family's own (`bloom`, `cuckoo`, `cms`, `topk`, `tdigest`, `windowed`) where the server let the
/// module add them (Redis ≥ 7.4).
fn acl_categories(info: &commands::CommandInfo, custom: bool) -> String {
    let categories: Vec<&str> = info
        .acl_categories()
        .into_iter()
        .filter(|&c| c != "slow" && (custom || commands::ACL_CATEGORIES.contains(&c)))
        .collect();
    categories.join(" ")
}

/// The bytes of a Redis string.
fn bytes_of<'a>(s: *const raw::RedisModuleString) -> &'a [u8] {
    let mut len = 0;
    let ptr = raw::string_ptr_len(s, &mut len);
    // SAFETY: Redis strings passed to a command stay alive (and unchanged) until it returns.
    unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
}

/// Whether `info` has a key spec that counts its keys (a merge's sources): registered with
/// `getkeys-api`, answering Redis' key-position requests.
fn counts_keys(info: &commands::CommandInfo) -> bool {
    info.docs.as_ref().is_some_and(|d| d.numkeys_at.is_some())
}

/// Whether Redis called the command only to learn its keys (`getkeys-api`).
fn key_positions_asked(ctx: *mut raw::RedisModuleCtx) -> bool {
    // SAFETY: the API table is filled once at load, before any command runs; `ctx` is the
    // live context Redis passed to the command.
    unsafe { raw::RedisModule_IsKeysPositionRequest.is_some_and(|asked| asked(ctx) != 0) }
}

/// Tells Redis where `args`' keys are (the table's key specs) and how each is used.
fn report_keys(ctx: *mut raw::RedisModuleCtx, info: &commands::CommandInfo, args: &[&[u8]]) {
    for (at, rw) in info.key_positions(args).unwrap_or_default() {
        let flags = if rw {
            raw::REDISMODULE_CMD_KEY_RW
        } else {
            raw::REDISMODULE_CMD_KEY_RO
        };
        // SAFETY: a key-position request's context; `at` indexes one of its arguments.
        unsafe {
            if let Some(with_flags) = raw::RedisModule_KeyAtPosWithFlags {
                with_flags(ctx, at as c_int, flags as c_int);
            } else if let Some(at_pos) = raw::RedisModule_KeyAtPos {
                at_pos(ctx, at as c_int);
            }
        }
    }
}

/// A command callback as Redis calls it.
type CommandFn = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *mut *mut raw::RedisModuleString,
    c_int,
) -> c_int;

/// The entry point of the `I`th command of the dialect's table: Redis calls each command's own
/// function, so no command name is looked up per call.
unsafe extern "C" fn dispatch_at<const I: usize>(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let table = commands::table_for(crate::settings::read().dialect);
    dispatch(ctx, argv, argc, &table[I])
}

macro_rules! entry_points {
    ($($i:literal)*) => { [$(dispatch_at::<$i> as CommandFn),*] };
}

/// One entry point per table index (the table must not outgrow it: registration checks).
const ENTRY_POINTS: [CommandFn; 128] = entry_points!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61
    62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91
    92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115
    116 117 118 119 120 121 122 123 124 125 126 127
);

/// Commands of at most this many arguments (every hot one) collect them on the stack.
const STACK_ARGS: usize = 8;

/// Runs `info`'s command: arguments borrowed from Redis' strings (on the stack up to
/// [`STACK_ARGS`]), one key open per key in the mode the command needs, the memory budget
/// read only by a change that allocates, the reply sent through `RedisModule_ReplyWith*`.
/// Nothing is allocated on the way for a command of a few arguments on an existing key.
fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    info: &'static commands::CommandInfo,
) -> c_int {
    // SAFETY: Redis passes `argc` (≥ 1) live strings.
    let strings = unsafe { std::slice::from_raw_parts(argv.cast_const(), argc as usize) };
    if counts_keys(info) && key_positions_asked(ctx) {
        let args: Vec<&[u8]> = strings.iter().map(|&s| bytes_of(s)).collect();
        report_keys(ctx, info, &args);
        return raw::REDISMODULE_OK as c_int;
    }
    let mut stack: [&[u8]; STACK_ARGS] = [&[]; STACK_ARGS];
    let heap: Vec<&[u8]>;
    let args: &[&[u8]] = if strings.len() <= STACK_ARGS {
        // The name as registered (handlers never read it; Redis matched it already).
        stack[0] = info.name.as_bytes();
        for (slot, &s) in stack[1..strings.len()].iter_mut().zip(&strings[1..]) {
            *slot = bytes_of(s);
        }
        &stack[..strings.len()]
    } else {
        heap = strings.iter().map(|&s| bytes_of(s)).collect();
        &heap
    };
    let mut replied = false;
    let run = catch_unwind(AssertUnwindSafe(|| {
        let outcome = {
            let writes = info.flags.contains(commands::flags::WRITE);
            let mut host = ModuleHost::new(ctx, strings, args, writes);
            commands::execute(&mut host, info, args)
        };
        replied = true;
        reply(ctx, &outcome.reply);
        propagate(ctx, &outcome.propagate);
    }));
    if run.is_err() && !replied {
        // One failing command must not take the server down: report it and carry on.
        reply(
            ctx,
            &Reply::error(format!("ERR bloomgate: internal error in {}", info.name)),
        );
    }
    raw::REDISMODULE_OK as c_int
}

/// Sends a dialect reply; Redis renders it for the client's protocol (RESP2 flattens maps and
/// sends booleans as 0/1, RESP3 keeps them).
fn reply(ctx: *mut raw::RedisModuleCtx, reply: &Reply) {
    match reply {
        Reply::Simple(s) => {
            let s = CString::new(s.as_str()).unwrap_or_default();
            raw::reply_with_simple_string(ctx, s.as_ptr());
        }
        Reply::Error(e) => {
            let e = CString::new(e.as_str()).unwrap_or_default();
            raw::reply_with_error(ctx, e.as_ptr());
        }
        Reply::Int(n) => {
            raw::reply_with_long_long(ctx, *n);
        }
        Reply::Bulk(b) => {
            raw::reply_with_string_buffer(ctx, b.as_ptr().cast(), b.len());
        }
        Reply::Nil => {
            raw::reply_with_null(ctx);
        }
        Reply::NilArray => {
            // SAFETY: a live command context; the function exists since Redis 6.0.
            unsafe { raw::RedisModule_ReplyWithNullArray.expect("Redis 6+")(ctx) };
        }
        Reply::Array(items) => {
            raw::reply_with_array(ctx, items.len() as _);
            items.iter().for_each(|item| self::reply(ctx, item));
        }
        Reply::Map(pairs) => {
            raw::reply_with_map(ctx, pairs.len() as _);
            for (k, v) in pairs {
                self::reply(ctx, k);
                self::reply(ctx, v);
            }
        }
        Reply::Bool(b) => {
            raw::reply_with_bool(ctx, c_int::from(*b));
        }
        Reply::Double(d) => {
            raw::reply_with_double(ctx, *d);
        }
    }
}

/// Replicates (and feeds the AOF) what the dialect says the command changed.
fn propagate(ctx: *mut raw::RedisModuleCtx, what: &Propagate) {
    match what {
        Propagate::Nothing => {}
        Propagate::Verbatim => {
            raw::replicate_verbatim(ctx);
        }
        Propagate::Commands(commands) => {
            for command in commands {
                let Some((name, args)) = command.split_first() else {
                    continue;
                };
                let name = CString::new(name.as_slice()).unwrap_or_default();
                // SAFETY: strings created on a live context and freed after Replicate, which
                // takes its own references; "v" consumes an array pointer and its length.
                unsafe {
                    let create = raw::RedisModule_CreateString.expect("core API");
                    let strings: Vec<*mut raw::RedisModuleString> = args
                        .iter()
                        .map(|a| create(ctx, a.as_ptr().cast(), a.len()))
                        .collect();
                    raw::RedisModule_Replicate.expect("core API")(
                        ctx,
                        name.as_ptr(),
                        c"v".as_ptr(),
                        strings.as_ptr(),
                        strings.len(),
                    );
                    let free = raw::RedisModule_FreeString.expect("core API");
                    strings.into_iter().for_each(|s| free(ctx, s));
                }
            }
        }
    }
}

/// What an open key holds, looked up once per command.
#[derive(Clone, Copy)]
enum Stored {
    /// Not looked up yet.
    Unknown,
    /// Nothing.
    Empty,
    /// A value of another type (or another module's).
    Foreign,
    /// One of the dialect's values.
    Ours(*mut Value),
}

/// A key the command has opened (`handle` null: none yet).
struct OpenKey {
    /// The name's bytes (a command argument's, alive for the command).
    name: *const u8,
    len: usize,
    writable: bool,
    handle: *mut raw::RedisModuleKey,
    stored: Stored,
}

impl OpenKey {
    const NONE: OpenKey = OpenKey {
        name: std::ptr::null(),
        len: 0,
        writable: false,
        handle: std::ptr::null_mut(),
        stored: Stored::Unknown,
    };

    /// Whether this is the open key `key` (the very argument slice, or the same bytes).
    #[inline]
    fn is(&self, key: &[u8]) -> bool {
        !self.handle.is_null()
            && self.len == key.len()
            && (self.name == key.as_ptr()
                // SAFETY: `name` points at `len` bytes of a command argument, alive for the
                // command.
                || unsafe { std::slice::from_raw_parts(self.name, self.len) } == key)
    }

    /// What the key holds, looked up on first use.
    #[inline]
    fn stored(&mut self) -> Result<Option<*mut Value>, WrongType> {
        if let Stored::Unknown = self.stored {
            self.stored = lookup(self.handle);
        }
        match self.stored {
            Stored::Ours(value) => Ok(Some(value)),
            Stored::Empty | Stored::Unknown => Ok(None),
            Stored::Foreign => Err(WrongType),
        }
    }
}

/// Redis' keyspace as the dialect sees it during one command.
struct ModuleHost<'a> {
    ctx: *mut raw::RedisModuleCtx,
    /// The command's arguments: keys are opened through these strings when they match.
    argv: &'a [*mut raw::RedisModuleString],
    /// Their bytes, in the same order.
    args: &'a [&'a [u8]],
    /// The command writes: its keys are opened writable at once, so no key is opened twice.
    writes: bool,
    /// The context flags, read once if asked (-1: not yet).
    flags: Cell<c_int>,
    /// The settings, read once if asked.
    config: OnceCell<RwLockReadGuard<'static, Config>>,
    /// The first key opened (the only one every dialect command has), then any others.
    key: OpenKey,
    more: Vec<OpenKey>,
}

impl<'a> ModuleHost<'a> {
    #[inline(always)]
    fn new(
        ctx: *mut raw::RedisModuleCtx,
        argv: &'a [*mut raw::RedisModuleString],
        args: &'a [&'a [u8]],
        writes: bool,
    ) -> Self {
        Self {
            ctx,
            argv,
            args,
            writes,
            flags: Cell::new(-1),
            config: OnceCell::new(),
            key: OpenKey::NONE,
            more: Vec::new(),
        }
    }

    fn context_flags(&self) -> c_int {
        if self.flags.get() == -1 {
            // SAFETY: a live command context.
            self.flags
                .set(unsafe { raw::RedisModule_GetContextFlags.expect("core API")(self.ctx) });
        }
        self.flags.get()
    }

    /// The open key `key`, readable, and writable if asked or if the command writes (a
    /// writable handle makes Redis signal the key as modified when it is closed, as RedisBloom's
    /// writes do; reads never get one, which would abort clients' WATCH). A key opened
    /// read-only is reopened writable if a read-only command ever asks to change it.
    #[inline]
    fn open(&mut self, key: &[u8], writable: bool) -> &mut OpenKey {
        if self.key.is(key) && (self.key.writable || !writable) {
            return &mut self.key;
        }
        self.open_slow(key, writable)
    }

    fn open_slow(&mut self, key: &[u8], writable: bool) -> &mut OpenKey {
        let writable = writable || self.writes;
        let mode = raw::REDISMODULE_READ | if writable { raw::REDISMODULE_WRITE } else { 0 };
        // The key is one of the arguments: the very slice of argument 1, for every dialect
        // command.
        let arg = match self.args.get(1) {
            Some(a) if a.as_ptr() == key.as_ptr() && a.len() == key.len() => Some(1),
            _ => self.args.iter().position(|&a| a == key),
        };
        let (ctx, argv) = (self.ctx, self.argv);
        let slot = if self.key.handle.is_null() || self.key.is(key) {
            &mut self.key
        } else if let Some(i) = self.more.iter().position(|k| k.is(key)) {
            &mut self.more[i]
        } else {
            self.more.push(OpenKey::NONE);
            self.more.last_mut().expect("just pushed")
        };
        if !slot.handle.is_null() {
            if slot.writable || !writable {
                return slot;
            }
            // Opened read-only, now written: reopen writable.
            raw::close_key(slot.handle);
        }
        // SAFETY: a live context; the key name string is either one of the command's
        // arguments or created here and freed after OpenKey (which keeps its own reference).
        let handle = unsafe {
            let open = raw::RedisModule_OpenKey.expect("core API");
            match arg {
                Some(at) => open(ctx, argv[at], mode as c_int).cast(),
                None => {
                    let s = raw::RedisModule_CreateString.expect("core API")(
                        ctx,
                        key.as_ptr().cast(),
                        key.len(),
                    );
                    let handle = open(ctx, s, mode as c_int);
                    raw::RedisModule_FreeString.expect("core API")(ctx, s);
                    handle.cast()
                }
            }
        };
        *slot = OpenKey {
            name: key.as_ptr(),
            len: key.len(),
            writable,
            handle,
            stored: Stored::Unknown,
        };
        slot
    }

    /// The dialect value at `key`, the key opened (writable if asked) and its contents looked
    /// up once per command.
    #[inline]
    fn stored(&mut self, key: &[u8], writable: bool) -> Result<Option<*mut Value>, WrongType> {
        self.open(key, writable).stored()
    }
}

/// What an open key holds: its module type first (null for an empty key and for a value that
/// is not a module's), so a key of ours costs two calls.
fn lookup(handle: *mut raw::RedisModuleKey) -> Stored {
    // SAFETY: `handle` is an open key of this command.
    unsafe {
        let module_type = raw::RedisModule_ModuleTypeGetType.expect("core API")(handle);
        if types::is_ours(module_type) {
            return Stored::Ours(
                raw::RedisModule_ModuleTypeGetValue.expect("core API")(handle).cast(),
            );
        }
        match raw::RedisModule_KeyType.expect("core API")(handle) as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => Stored::Empty,
            _ => Stored::Foreign,
        }
    }
}

impl Drop for ModuleHost<'_> {
    fn drop(&mut self) {
        if !self.key.handle.is_null() {
            raw::close_key(self.key.handle);
        }
        self.more.drain(..).for_each(|k| raw::close_key(k.handle));
    }
}

impl Host for ModuleHost<'_> {
    fn proto(&self) -> u8 {
        if self.context_flags() & raw::REDISMODULE_CTX_FLAGS_RESP3 as c_int != 0 {
            3
        } else {
            2
        }
    }

    fn config(&self) -> &Config {
        self.config.get_or_init(settings::read)
    }

    fn memory_budget(&self) -> u64 {
        // The master (or the AOF) already accepted a replicated or loading write: it is
        // applied whatever maxmemory says, bounded only by what the machine can hold.
        let from_master =
            raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING;
        // So in valkey-bloom's dialect, which sizes nothing against maxmemory.
        let replayed = self.context_flags() & from_master as c_int != 0;
        budget::budget(
            self.ctx,
            replayed || self.config().dialect.valkey().is_some(),
        )
    }

    fn charge(&mut self, bytes: u64) {
        budget::charge(bytes);
    }

    fn replaying(&self) -> bool {
        budget::replaying(self.context_flags())
    }

    fn warn(&mut self, message: &str) {
        let msg = CString::new(format!("bloomgate: {message}")).unwrap_or_default();
        // SAFETY: a live command context; "%s" consumes one C string.
        unsafe {
            if let Some(log) = raw::RedisModule_Log {
                log(self.ctx, c"warning".as_ptr(), c"%s".as_ptr(), msg.as_ptr());
            }
        }
    }

    fn value(&mut self, key: &[u8]) -> Result<Option<&Value>, WrongType> {
        // SAFETY: a value stored by this module's types, alive while the key is open and
        // unchanged for the borrow (every change goes through `&mut self`).
        Ok(self.stored(key, false)?.map(|v| unsafe { &*v }))
    }

    fn value_mut(&mut self, key: &[u8]) -> Result<Option<&mut Value>, WrongType> {
        // SAFETY: as in `value`, through a writable handle.
        Ok(self.stored(key, true)?.map(|v| unsafe { &mut *v }))
    }

    fn value_quiet(&mut self, key: &[u8]) -> Result<Option<&mut Value>, WrongType> {
        // Opened for reading (no keyspace signal), changed in place as RedisBloom's reads do.
        // SAFETY: as in `value`; the change (a t-digest merging its buffer) neither resizes
        // nor replaces the value Redis holds.
        Ok(self.stored(key, false)?.map(|v| unsafe { &mut *v }))
    }

    fn notify(&mut self, event: &str, key: &[u8]) {
        // Module events (class `d`, in `A`), valkey-bloom's `bloom.*` generic ones (class `g`):
        // skipped at once unless enabled.
        let generic = self.config().dialect.valkey().is_some() && event.starts_with("bloom.");
        let module = [raw::NotifyEvent::MODULE, raw::NotifyEvent::GENERIC][usize::from(generic)];
        let module = module.bits();
        // SAFETY: a plain read of the server's setting, callable from a command.
        if unsafe { raw::RedisModule_GetNotifyKeyspaceEvents.expect("Redis 6+")() } & module == 0 {
            return;
        }
        let Ok(event) = CString::new(event) else {
            return;
        };
        let arg = self
            .args
            .iter()
            .position(|&a| std::ptr::eq(a, key) || a == key);
        // SAFETY: a live command context; the key is one of the command's arguments or a string
        // created here and freed after the call (Redis copies what it publishes).
        unsafe {
            let notify = raw::RedisModule_NotifyKeyspaceEvent.expect("core API");
            match arg {
                Some(at) if at > 0 => {
                    notify(self.ctx, module, event.as_ptr(), self.argv[at]);
                }
                _ => {
                    let s = raw::RedisModule_CreateString.expect("core API")(
                        self.ctx,
                        key.as_ptr().cast(),
                        key.len(),
                    );
                    notify(self.ctx, module, event.as_ptr(), s);
                    raw::RedisModule_FreeString.expect("core API")(self.ctx, s);
                }
            }
        }
    }

    fn create(&mut self, key: &[u8], value: Value) {
        let kind = value.kind();
        let value = types::into_raw(value);
        let k = self.open(key, true);
        // SAFETY: a writable handle on an empty key; Redis owns the boxed value from here and
        // hands it back to `types::free`.
        unsafe {
            raw::RedisModule_ModuleTypeSetValue.expect("core API")(
                k.handle,
                types::redis_type(kind),
                value,
            );
        }
        k.stored = Stored::Ours(value.cast());
    }
}
