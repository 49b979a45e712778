//! The `bf-*` / `cf-*` settings inside Redis: load arguments (`--loadmodule lib.so
//! bf-error-rate 0.001 ...`, and RedisBloom 2.x's `ERROR_RATE` / `INITIAL_SIZE` /
//! `CF_MAX_EXPANSIONS`; `DIALECT redisbloom|valkey-bloom|valkey-bloom-0.1`, whose defaults
//! the others change) and module configs: on Redis 8 and later under RedisBloom 8's names
//! (`CONFIG GET/SET bf-error-rate`, `--bf-error-rate 0.001` on the command line or
//! `bf-error-rate 0.001` in redis.conf), on Redis 7 with the module's prefix
//! (`bf.bf-error-rate`), which Redis 7 requires. The per-key cap `bloom-memory-usage-limit` is
//! one of them: `bf.bloom-memory-usage-limit` on Redis 7 and Valkey is valkey-bloom's name;
//! in valkey-bloom 1.0's dialect also its `bloom-tightening-ratio` and `bloom-use-random-seed`.
//! Values are checked by the dialect's `Config::set`, so ranges and refusals are the same as
//! `bloomgate serve`'s.

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard};

use bloomgate_dialect::types::sbchain::valkey::set_valkey_flavour;
use bloomgate_dialect::{Config, Dialect, ValkeyFlavour};
use redis_module::{raw, Context, RedisString};

static CONFIG: RwLock<Config> = RwLock::new(Config::DEFAULT);

/// The string each setting's last CONFIG GET returned (a `RedisModuleString` address).
const SLOTS: usize = Config::NAMES.len() + Config::VALKEY_1_0_NAMES.len();
static LAST_GET: Mutex<[usize; SLOTS]> = Mutex::new([0; SLOTS]);

/// The settings in force. A writer cannot panic while holding the lock (`Config::set` does
/// not panic), but a poisoned lock would still hold valid settings, so it is used as is.
pub fn current() -> Config {
    CONFIG
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// The settings in force, read in place (a command holds this while it runs; settings change
/// only between commands, on the same thread).
pub fn read() -> RwLockReadGuard<'static, Config> {
    CONFIG.read().unwrap_or_else(PoisonError::into_inner)
}

fn set(name: &str, value: &str) -> Result<(), String> {
    let mut config = CONFIG.write().unwrap_or_else(PoisonError::into_inner);
    match config.set(name, value) {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!("unknown setting '{name}'")),
        Err(why) => Err(why),
    }
}

/// RedisBloom 2.x's load-argument names for settings that have one.
fn canonical(arg: &str) -> String {
    match arg.to_ascii_uppercase().as_str() {
        "ERROR_RATE" => "bf-error-rate".into(),
        "INITIAL_SIZE" => "bf-initial-size".into(),
        "CF_MAX_EXPANSIONS" => "cf-max-expansions".into(),
        _ => arg.to_ascii_lowercase(),
    }
}

/// Applies load arguments (name/value pairs), then registers each setting as a module config
/// whose default is the value now in force, and loads values from the config file.
pub fn register(ctx: &Context, args: &[RedisString]) -> Result<(), String> {
    let args: Vec<String> = args.iter().map(|a| a.to_string_lossy()).collect();
    if !args.len().is_multiple_of(2) {
        return Err("load arguments must be setting/value pairs".into());
    }
    // The dialect first (its defaults are what the other arguments change): `DIALECT` among
    // the load arguments, else the server's — valkey-bloom's inside Valkey.
    let named = args
        .chunks(2)
        .find(|pair| pair[0].eq_ignore_ascii_case("DIALECT"));
    let dialect = match named {
        Some(pair) => Dialect::named(&pair[1]).ok_or_else(|| {
            format!(
                "DIALECT {}: not redisbloom, valkey-bloom or valkey-bloom-0.1",
                pair[1]
            )
        })?,
        None if is_valkey(ctx) => Dialect::ValkeyBloom(ValkeyFlavour::V1_0),
        None => Dialect::RedisBloom,
    };
    *CONFIG.write().unwrap_or_else(PoisonError::into_inner) = dialect.defaults();
    // Before `bloomfltr` is registered: its encoding version is the flavour's.
    if let Some(flavour) = dialect.valkey() {
        set_valkey_flavour(flavour);
    }
    for pair in args.chunks(2) {
        if pair[0].eq_ignore_ascii_case("DIALECT") {
            continue;
        }
        let name = canonical(&pair[0]);
        let name = dialect.setting_named(&name).unwrap_or(&name).to_string();
        set(&name, &pair[1]).map_err(|why| format!("{} {}: {why}", pair[0], pair[1]))?;
    }
    let config = current();
    // SAFETY: OnLoad context; the callbacks below match the module API's signatures and
    // `privdata` is an index into `Config::NAMES` (never dereferenced).
    unsafe {
        let Some(register) = raw::RedisModule_RegisterStringConfig else {
            ctx.log_warning(
                "bloomgate: this server has no module configs; settings are load arguments only",
            );
            return Ok(());
        };
        let mut unprefixed = unprefixed_configs();
        // Every setting under our name, and in valkey-bloom's dialect also under its name
        // (the same setting: `privdata` is our name's index).
        // valkey-bloom 1.0's own settings (`privdata` past `Config::NAMES`) in its dialect.
        let valkey_1_0: &[&str] = match dialect.valkey() {
            Some(ValkeyFlavour::V1_0) => &Config::VALKEY_1_0_NAMES,
            _ => &[],
        };
        let ours = Config::NAMES.iter().chain(valkey_1_0).copied().enumerate();
        let theirs = dialect.setting_aliases().iter().map(|&(alias, name)| {
            let at = Config::NAMES.iter().position(|&n| n == name);
            (at.expect("an alias of a setting"), alias)
        });
        for (at, (i, name)) in ours.chain(theirs).enumerate() {
            let c_name = CString::new(name).expect("no NUL");
            let value = config.get(name_at(i)).expect("a known name");
            let default = CString::new(value).expect("no NUL");
            let attempt = |flags| {
                register(
                    ctx.ctx,
                    c_name.as_ptr(),
                    default.as_ptr(),
                    flags,
                    Some(get_config),
                    Some(set_config),
                    None,
                    i as *mut c_void,
                )
            };
            let mut status = raw::REDISMODULE_ERR as c_int;
            if unprefixed {
                status = attempt(CONFIG_UNPREFIXED);
                // A server that reports version 8 without unprefixed configs (a fork): fall
                // back to prefixed names for every setting.
                unprefixed = at > 0 || status == raw::REDISMODULE_OK as c_int;
            }
            if !unprefixed {
                status = attempt(raw::REDISMODULE_CONFIG_DEFAULT);
            }
            if status != raw::REDISMODULE_OK as c_int {
                return Err(format!("could not register config {name}"));
            }
        }
        if let Some(load) = raw::RedisModule_LoadConfigs {
            if load(ctx.ctx) != raw::REDISMODULE_OK as c_int {
                return Err("invalid bf.* settings in the configuration".into());
            }
        }
    }
    Ok(())
}

/// The setting a config's `privdata` index names.
fn name_at(index: usize) -> &'static str {
    Config::name_at(index).expect("an index the module registered")
}

/// Whether the server is Valkey (its `INFO server` has `valkey_version`).
fn is_valkey(ctx: &Context) -> bool {
    // SAFETY: OnLoad context; the info data is freed after use.
    unsafe {
        let Some(get) = raw::RedisModule_GetServerInfo else {
            return false;
        };
        let info = get(ctx.ctx, c"server".as_ptr());
        if info.is_null() {
            return false;
        }
        let field = raw::RedisModule_ServerInfoGetFieldC.expect("Redis 6+");
        let found = !field(info, c"valkey_version".as_ptr()).is_null();
        raw::RedisModule_FreeServerInfo.expect("Redis 6+")(ctx.ctx, info);
        found
    }
}

/// `REDISMODULE_CONFIG_UNPREFIXED` (Redis ≥ 8): the config is named without the module's
/// prefix, so `CONFIG SET bf-error-rate 0.02` and `--bf-error-rate 0.02` (command line or
/// redis.conf) reach it, as they reach RedisBloom 8's.
const CONFIG_UNPREFIXED: u32 = 1 << 9;

/// Whether the server names module configs without a prefix: Redis 8 and later, where
/// RedisBloom's own configs are `bf-error-rate` etc. Redis 7 needs the `bf.` prefix.
fn unprefixed_configs() -> bool {
    // SAFETY: GetServerVersion takes no arguments; it exists since Redis 6.0.9.
    let version = unsafe { raw::RedisModule_GetServerVersion.map_or(0, |get| get()) };
    version >= 0x0008_0000
}

extern "C" fn get_config(
    _name: *const c_char,
    privdata: *mut c_void,
) -> *mut raw::RedisModuleString {
    let name = name_at(privdata as usize);
    let value = current().get(name).expect("a known name");
    // Redis copies the returned string and does not free it: the module keeps the last one
    // per setting and frees it on the next GET.
    // SAFETY: a NULL context creates a string the module owns; the previous one of this slot
    // is no longer referenced by Redis (it copied it during the previous GET).
    unsafe {
        let fresh = raw::RedisModule_CreateString.expect("core API")(
            std::ptr::null_mut(),
            value.as_ptr().cast(),
            value.len(),
        );
        let mut last = LAST_GET.lock().unwrap_or_else(PoisonError::into_inner);
        let old = std::mem::replace(&mut last[privdata as usize], fresh as usize);
        if old != 0 {
            raw::RedisModule_FreeString.expect("core API")(std::ptr::null_mut(), old as *mut _);
        }
        fresh
    }
}

extern "C" fn set_config(
    _name: *const c_char,
    value: *mut raw::RedisModuleString,
    privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    let name = name_at(privdata as usize);
    let mut len = 0;
    let ptr = raw::string_ptr_len(value, &mut len);
    // SAFETY: Redis passes a live string; `ptr`/`len` describe its bytes.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    let outcome = std::str::from_utf8(bytes)
        .map_err(|_| "argument must be a number".to_string())
        .and_then(|text| set(name, text));
    match outcome {
        Ok(()) => raw::REDISMODULE_OK as c_int,
        Err(why) => {
            // SAFETY: Redis frees `*err` after reporting it; NULL context = caller-owned.
            unsafe {
                *err = raw::RedisModule_CreateString.expect("core API")(
                    std::ptr::null_mut(),
                    why.as_ptr().cast(),
                    why.len(),
                );
            }
            raw::REDISMODULE_ERR as c_int
        }
    }
}
