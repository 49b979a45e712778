//! The command model and the BF, CF, CMS, TOPK, TDIGEST, WF and CBF command semantics over any
//! host.
//!
//! The front door of the family files (`bloom.rs`, `cuckoo.rs`, `countmin.rs`, `topk.rs`,
//! `tdigest.rs`, `windowed.rs`, `counting.rs`: each a family's commands — one `spec` each:
//! name, access and keyspace event, handler, flags, arity, docs — and their handlers): what a
//! host runs against (`host.rs`: [`Host`], [`Ctx`], [`Outcome`]), the flags and ACL categories
//! (`flags.rs`), the table's entry type and `spec` (`info.rs`), the table of every family's
//! specs (`table.rs`), [`execute`] (`execute.rs`), and the handler pieces the families share
//! (`generic.rs`).
//!
//! A host (the server's keyspace, or Redis' through the module API) implements [`Host`]: the
//! calling client's protocol version, the settings, a memory budget and typed access to keys.
//! [`execute`] runs one command and returns an [`Outcome`]: the reply, how many changes it made
//! (Redis' `dirty`), and what to replicate or log. Propagation is derived here from the
//! command's write flag and the changes it reported, never left to each host: a write that
//! changed nothing propagates nothing; one that must be replayed differently from how it was
//! sent (an auto-created filter, whose shape must not depend on the replica's settings) carries
//! its rewrite; a write over items that refused some of them (the per-key cap, the memory
//! budget, a full filter) propagates only the items it applied.

pub mod bloom;
mod bloom_info;
mod bloom_layout;
pub mod bloom_merge;
mod bloom_valkey;
pub mod counting;
pub mod countmin;
pub mod cuckoo;
mod execute;
pub mod flags;
mod generic;
mod host;
mod info;
mod table;
pub mod tdigest;
#[doc(hidden)]
pub mod testing;
pub mod topk;
pub mod windowed;

pub use execute::{execute, Handler};
pub use flags::{Flags, ACL_CATEGORIES};
pub use host::{
    registered_name, speaks_valkey_bloom, wrong_arity, wrong_arity_in, Args, Ctx, Host, Outcome,
    Propagate, WrongType, VALKEY_BLOOM_COMMANDS,
};
pub use info::{Access, Arg, ArgKind, Command, CommandInfo, Docs, Run, MODULE_NAME};
pub use table::{categories, lookup, table, table_for};

use generic::{add_batch, load_chunk, probe, update_batch};
use info::{
    family, our_family, sketch_table, spec, write, CAPACITY_OPTION, ERROR_OPTION, EXPANSION_OPTION,
    KEY_ITEM, KEY_ITEMS, KEY_ITER, KEY_ITER_DATA, KEY_ONLY, NOCREATE, N_ITEMS, READ,
};

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    /// The table's arity answers every command's too-short (and, for a fixed arity, too-long)
    /// argument list before its handler runs, with RedisBloom's error text.
    #[test]
    fn table_arity_is_checked_before_every_handler() {
        let mut h = Harness::new();
        for info in table() {
            let need = info.arity.unsigned_abs() as usize;
            let mut counts = vec![need - 1];
            if info.arity > 0 {
                counts.push(need + 1);
            }
            for argc in counts.into_iter().filter(|&n| n > 0) {
                let mut args = vec![info.name.as_bytes().to_vec(); 1];
                args.resize(argc, b"1".to_vec());
                assert_eq!(
                    h.run_args(&args),
                    wrong_arity(info.name),
                    "{} with {argc} arguments",
                    info.name
                );
                assert_eq!(h.last.as_ref().unwrap().propagate, Propagate::Nothing);
            }
        }
    }
}
