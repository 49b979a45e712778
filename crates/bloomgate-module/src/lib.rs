//! bloomgate as a Redis / Valkey module: RedisBloom's BF.*, CF.*, CMS.*, TOPK.* and TDIGEST.*
//! (and bloomgate's WF.* and CBF.*) inside the server people already run, so they get its replicas,
//! failover, persistence and Cluster sharding.
//!
//! Everything RedisBloom-compatible comes from `bloomgate-dialect`; this crate only hosts it:
//! `host` implements the dialect's `Host` over Redis' keyspace and maps its replies and
//! propagation onto the module API, registering every command of the dialect's table; `types`
//! registers the data types (`MBbloom--`, `MBbloomCF`, `CMSk-TYPE`, `TopK-TYPE`, `TDIS-TYPE`
//! and our `BGwindowF`, `BGbloomBK` and `BGcntBloo`: RDB, AOF rewrite, memory, digest, copy)
//! over the dialect's RDB field order; `settings` exposes the `bf-*` / `cf-*` settings as module
//! configs and load arguments;
//! `budget` admits what a value may allocate against Redis' memory; `alloc` is the module's
//! allocator (Redis' own); `defrag` moves values for Redis' active defragmentation. Its only public items are the entry points Redis looks up by symbol
//! name (`RedisModule_OnLoad`, `RedisModule_OnUnload`).
//!
//! The module calls itself `bf`, as RedisBloom does, so `MODULE LIST` looks the same to tools
//! that detect RedisBloom, with RedisBloom's version ([`bloomgate_dialect::REDISBLOOM_VERSION`]).
//! Its configs are RedisBloom 8's `bf-error-rate` etc. on Redis 8, and `bf.bf-error-rate` etc.
//! on Redis 7 (which prefixes module configs with the module name).

#![deny(missing_docs)]

mod alloc;
mod budget;
mod defrag;
mod host;
mod settings;
mod types;

use redis_module::{Context, RedisString, Status};

/// Registers settings, commands and module options once the types exist (the macro creates
/// them first).
fn init(ctx: &Context, args: &[RedisString]) -> Status {
    let setup = || -> Result<(), String> {
        settings::register(ctx, args)?;
        types::register_valkey_type(ctx)?;
        host::register_commands(ctx)?;
        types::handle_io_errors(ctx);
        alloc::register_info(ctx);
        Ok(())
    };
    match setup() {
        Ok(()) => {
            ctx.log_notice(&format!(
                "bloomgate module {} loaded: RedisBloom-compatible BF.*/CF.* and WF.*/CBF.*",
                env!("CARGO_PKG_VERSION")
            ));
            Status::Ok
        }
        Err(why) => {
            ctx.log_warning(&format!("bloomgate: {why}"));
            Status::Err
        }
    }
}

/// The entry points, as the SDK's macro writes them: the allocator, `RedisModule_OnLoad` (creates
/// the data types, then runs `init`) and `RedisModule_OnUnload`. Redis finds them by symbol name
/// (`#[no_mangle]` exports them from a private module all the same), so the macro's undocumented
/// public functions stay out of the crate's documented surface.
mod entry {
    use redis_module::redis_module;

    use crate::types::{
        BLOOM_BLOCKED_TYPE, BLOOM_TYPE, COUNTING_TYPE, COUNTMIN_TYPE, CUCKOO_TYPE, TDIGEST_TYPE,
        TOPK_TYPE, WINDOWED_TYPE,
    };
    use crate::{alloc, init};

    redis_module! {
        name: "bf",
        version: bloomgate_dialect::REDISBLOOM_VERSION,
        allocator: (alloc::ModuleAlloc, alloc::ModuleAlloc),
        data_types: [
            BLOOM_TYPE,
            CUCKOO_TYPE,
            WINDOWED_TYPE,
            COUNTMIN_TYPE,
            TOPK_TYPE,
            TDIGEST_TYPE,
            COUNTING_TYPE,
            BLOOM_BLOCKED_TYPE
        ],
        init: init,
    }
}
