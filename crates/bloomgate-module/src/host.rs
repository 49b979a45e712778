//! The dialect's `Host` over Redis' keyspace, and the command entry point.
//!
//! Every command of `bloomgate_dialect::commands::table()` is registered with its flags, key
//! positions, arity, key spec and documentation (so `COMMAND INFO` and `COMMAND DOCS` show what
//! `bloomgate serve` shows, and ACL and Cluster routing see them) and handled by [`dispatch`]:
//! the dialect runs the command against [`ModuleHost`], its reply is sent through
//! `RedisModule_ReplyWith*` (Redis renders booleans, maps and nulls for the client's RESP
//! version), and what it says to propagate is replicated: verbatim, or the rewrite (an
//! auto-created filter goes to replicas and the AOF with its explicit parameters).

use std::ffi::{c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

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
        for info in commands::table() {
            let name = CString::new(info.name.to_lowercase()).expect("no NUL");
            // The module API spells COMMAND INFO's `denyoom` as `deny-oom`; `module` is what
            // Redis itself adds to every module command.
            let flags: Vec<&str> = info
                .flag_names()
                .into_iter()
                .filter(|&f| f != "module")
                .map(|f| if f == "denyoom" { "deny-oom" } else { f })
                .collect();
            let flags = CString::new(flags.join(" ")).expect("no NUL");
            let status = create(
                ctx.ctx,
                name.as_ptr(),
                Some(dispatch),
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
/// the table's arity, its one key spec (notes; RO or RW; the key at `first_key`), summary,
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
    let mut key_specs: [raw::RedisModuleCommandKeySpec; 2] = unsafe { std::mem::zeroed() };
    let spec = &mut key_specs[0];
    spec.notes = strings.c(docs.key_notes);
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
                // The one key spec for the key; -1 ("none") for every other argument.
                key_spec_index: if a.kind == ArgKind::Key { 0 } else { -1 },
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
/// and the family's own (`bloom`, `cuckoo`, `cms`, `topk`, `windowed`) where the server let the
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

/// Entry point of every BF.* / CF.* command.
extern "C" fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    // SAFETY: Redis passes `argc` (≥ 1) live strings.
    let strings = unsafe { std::slice::from_raw_parts(argv.cast_const(), argc as usize) };
    let args: Vec<&[u8]> = strings.iter().map(|&s| bytes_of(s)).collect();
    let info = commands::lookup(args[0]).expect("only dialect commands are registered");
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let mut host = ModuleHost::new(ctx, strings);
        commands::execute(&mut host, info, &args)
    }));
    match outcome {
        Ok(outcome) => {
            reply(ctx, &outcome.reply);
            propagate(ctx, &outcome.propagate);
        }
        Err(_) => {
            // One failing command must not take the server down: report it and carry on.
            reply(
                ctx,
                &Reply::error(format!("ERR bloomgate: internal error in {}", info.name)),
            );
        }
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

/// A key the command has opened.
struct OpenKey {
    name: Vec<u8>,
    writable: bool,
    handle: *mut raw::RedisModuleKey,
}

/// Redis' keyspace as the dialect sees it during one command.
struct ModuleHost<'a> {
    ctx: *mut raw::RedisModuleCtx,
    /// The command's arguments: keys are opened through these strings when they match.
    argv: &'a [*mut raw::RedisModuleString],
    config: Config,
    flags: c_int,
    keys: Vec<OpenKey>,
}

impl<'a> ModuleHost<'a> {
    fn new(ctx: *mut raw::RedisModuleCtx, argv: &'a [*mut raw::RedisModuleString]) -> Self {
        // SAFETY: a live command context.
        let flags = unsafe { raw::RedisModule_GetContextFlags.expect("core API")(ctx) };
        Self {
            ctx,
            argv,
            config: settings::current(),
            flags,
            keys: Vec::new(),
        }
    }

    /// A handle on `key`, readable, and writable if asked: a read-only handle is reopened
    /// writable when a write needs it (a writable handle makes Redis signal the key as
    /// modified, which must not happen on reads: it would abort clients' WATCH).
    fn open(&mut self, key: &[u8], writable: bool) -> *mut raw::RedisModuleKey {
        if let Some(i) = self.keys.iter().position(|k| k.name == key) {
            if self.keys[i].writable || !writable {
                return self.keys[i].handle;
            }
            let stale = self.keys.swap_remove(i);
            raw::close_key(stale.handle);
        }
        let mode = raw::REDISMODULE_READ | if writable { raw::REDISMODULE_WRITE } else { 0 };
        // SAFETY: a live context; the key name string is either one of the command's
        // arguments or created here and freed after OpenKey (which keeps its own reference).
        let handle = unsafe {
            let open = raw::RedisModule_OpenKey.expect("core API");
            match self.argv.iter().find(|&&s| bytes_of(s) == key) {
                Some(&s) => open(self.ctx, s, mode as c_int).cast(),
                None => {
                    let s = raw::RedisModule_CreateString.expect("core API")(
                        self.ctx,
                        key.as_ptr().cast(),
                        key.len(),
                    );
                    let handle = open(self.ctx, s, mode as c_int);
                    raw::RedisModule_FreeString.expect("core API")(self.ctx, s);
                    handle.cast()
                }
            }
        };
        self.keys.push(OpenKey {
            name: key.to_vec(),
            writable,
            handle,
        });
        handle
    }

    /// The dialect value behind an open key.
    fn stored(&self, handle: *mut raw::RedisModuleKey) -> Result<Option<*mut Value>, WrongType> {
        // SAFETY: `handle` is an open key of this command.
        unsafe {
            match raw::RedisModule_KeyType.expect("core API")(handle) as isize {
                raw::REDISMODULE_KEYTYPE_EMPTY => Ok(None),
                raw::REDISMODULE_KEYTYPE_MODULE
                    if types::is_ours(raw::RedisModule_ModuleTypeGetType.expect("core API")(
                        handle,
                    )) =>
                {
                    Ok(Some(
                        raw::RedisModule_ModuleTypeGetValue.expect("core API")(handle).cast(),
                    ))
                }
                _ => Err(WrongType),
            }
        }
    }
}

impl Drop for ModuleHost<'_> {
    fn drop(&mut self) {
        self.keys.drain(..).for_each(|k| raw::close_key(k.handle));
    }
}

impl Host for ModuleHost<'_> {
    fn proto(&self) -> u8 {
        if self.flags & raw::REDISMODULE_CTX_FLAGS_RESP3 as c_int != 0 {
            3
        } else {
            2
        }
    }

    fn config(&self) -> &Config {
        &self.config
    }

    fn memory_budget(&self) -> u64 {
        // The master (or the AOF) already accepted a replicated or loading write: it is
        // applied whatever maxmemory says, bounded only by what the machine can hold.
        let from_master =
            raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING;
        budget::budget(self.ctx, self.flags & from_master as c_int != 0)
    }

    fn charge(&mut self, bytes: u64) {
        budget::charge(bytes);
    }

    fn value(&mut self, key: &[u8]) -> Result<Option<&Value>, WrongType> {
        let handle = self.open(key, false);
        // SAFETY: a value stored by this module's types, alive while the key is open and
        // unchanged for the borrow (every change goes through `&mut self`).
        Ok(self.stored(handle)?.map(|v| unsafe { &*v }))
    }

    fn value_mut(&mut self, key: &[u8]) -> Result<Option<&mut Value>, WrongType> {
        let handle = self.open(key, true);
        // SAFETY: as in `value`, through a writable handle.
        Ok(self.stored(handle)?.map(|v| unsafe { &mut *v }))
    }

    fn create(&mut self, key: &[u8], value: Value) {
        let handle = self.open(key, true);
        let kind = value.kind();
        // SAFETY: a writable handle on an empty key; Redis owns the boxed value from here and
        // hands it back to `types::free`.
        unsafe {
            raw::RedisModule_ModuleTypeSetValue.expect("core API")(
                handle,
                types::redis_type(kind),
                types::into_raw(value),
            );
        }
    }
}
