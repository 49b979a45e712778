//! The dialect's command table (every family's entries), lookups by name, its own ACL
//! categories, and the dispatch of each [`Command`] to its family's handler.

use super::execute::Handler;
use super::flags::ACL_CATEGORIES;
use super::generic::{exists, mexists};
use super::host::{Args, Ctx, Host};
use super::info::{Command, CommandInfo};
use super::{bloom, bloom_merge, counting, countmin, cuckoo, tdigest, topk, windowed};
use crate::reply::Reply;
use crate::types::cuckoo::CuckooChain;
use crate::types::windowed::WindowedFilter;

/// Every dialect command.
pub fn table() -> &'static [CommandInfo] {
    static TABLE: std::sync::OnceLock<Vec<CommandInfo>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut all = bloom::commands();
        all.extend(bloom_merge::commands());
        all.extend(cuckoo::commands());
        all.extend(windowed::commands());
        all.extend(tdigest::commands());
        all.extend(countmin::commands());
        all.extend(topk::commands());
        all.extend(counting::commands());
        all
    })
}

/// The dialect's own ACL categories (those not Redis' own), in the order the table first
/// names them: what a module registers with `RedisModule_AddACLCategory`.
pub fn categories() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for c in table()
        .iter()
        .flat_map(|info| info.category.split_ascii_whitespace())
    {
        if !ACL_CATEGORIES.contains(&c) && !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// The dialect command called `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static CommandInfo> {
    table()
        .iter()
        .find(|c| c.name.as_bytes().eq_ignore_ascii_case(name))
}

impl<H: Host + ?Sized> Handler<H> for Command {
    fn call(&self, ctx: &mut Ctx<H>, args: &Args) -> Reply {
        match self {
            Command::BfReserve => bloom::reserve(ctx, args),
            Command::BfAdd => bloom::add(ctx, args),
            Command::BfMadd => bloom::madd(ctx, args),
            Command::BfInsert => bloom::insert(ctx, args),
            Command::BfExists => bloom::exists(ctx, args),
            Command::BfMexists => bloom::mexists(ctx, args),
            Command::BfCard => bloom::card(ctx, args),
            Command::BfInfo => bloom::info(ctx, args),
            Command::BfScandump => bloom::scandump(ctx, args),
            Command::BfLoadchunk => bloom::loadchunk(ctx, args),
            Command::BfDebug => bloom::debug(ctx, args),
            Command::BfMerge => bloom_merge::merge(ctx, args),
            Command::CfReserve => cuckoo::reserve(ctx, args),
            Command::CfAdd => cuckoo::add(ctx, args),
            Command::CfAddnx => cuckoo::addnx(ctx, args),
            Command::CfInsert => cuckoo::insert(ctx, args),
            Command::CfInsertnx => cuckoo::insertnx(ctx, args),
            Command::CfExists => exists(ctx, args, CuckooChain::contains),
            Command::CfMexists => {
                mexists(ctx, args, |f: &CuckooChain, items| f.contains_many(items))
            }
            Command::CfCount => cuckoo::count(ctx, args),
            Command::CfDel => cuckoo::del(ctx, args),
            Command::CfCompact => cuckoo::compact(ctx, args),
            Command::CfInfo => cuckoo::info(ctx, args),
            Command::CfDebug => cuckoo::debug(ctx, args),
            Command::CfScandump => cuckoo::scandump(ctx, args),
            Command::CfLoadchunk => cuckoo::loadchunk(ctx, args),
            Command::WfReserve => windowed::reserve(ctx, args),
            Command::WfAdd => windowed::add(ctx, args),
            Command::WfMadd => windowed::madd(ctx, args),
            Command::WfInsert => windowed::insert(ctx, args),
            Command::WfExists => {
                let at = ctx.now_ms();
                exists(ctx, args, |f: &WindowedFilter, item| f.contains(item, at))
            }
            Command::WfMexists => {
                let at = ctx.now_ms();
                mexists(ctx, args, |f: &WindowedFilter, items| {
                    f.contains_many(items, at)
                })
            }
            Command::WfMexistsat => windowed::mexistsat(ctx, args),
            Command::WfCard => windowed::card(ctx, args),
            Command::WfInfo => windowed::info(ctx, args),
            Command::WfScandump => windowed::scandump(ctx, args),
            Command::WfLoadchunk => windowed::loadchunk(ctx, args),
            Command::TdCreate => tdigest::create(ctx, args),
            Command::TdReset => tdigest::reset(ctx, args),
            Command::TdAdd => tdigest::add(ctx, args),
            Command::TdMerge => tdigest::merge(ctx, args),
            Command::TdMin => tdigest::min_max(ctx, args, false),
            Command::TdMax => tdigest::min_max(ctx, args, true),
            Command::TdQuantile => tdigest::quantile(ctx, args),
            Command::TdCdf => tdigest::cdf(ctx, args),
            Command::TdRank => tdigest::rank(ctx, args, false),
            Command::TdRevrank => tdigest::rank(ctx, args, true),
            Command::TdByrank => tdigest::by_rank(ctx, args, false),
            Command::TdByrevrank => tdigest::by_rank(ctx, args, true),
            Command::TdTrimmedMean => tdigest::trimmed_mean(ctx, args),
            Command::TdInfo => tdigest::info(ctx, args),
            Command::CmsInitbydim => countmin::init_by_dim(ctx, args),
            Command::CmsInitbyprob => countmin::init_by_prob(ctx, args),
            Command::CmsIncrby => countmin::incrby(ctx, args),
            Command::CmsQuery => countmin::query(ctx, args),
            Command::CmsMerge => countmin::merge(ctx, args),
            Command::CmsInfo => countmin::info(ctx, args),
            Command::TopkReserve => topk::reserve(ctx, args),
            Command::TopkAdd => topk::add(ctx, args),
            Command::TopkIncrby => topk::incrby(ctx, args),
            Command::TopkQuery => topk::query(ctx, args),
            Command::TopkCount => topk::count(ctx, args),
            Command::TopkList => topk::list(ctx, args),
            Command::TopkInfo => topk::info(ctx, args),
            Command::CbfReserve => counting::reserve(ctx, args),
            Command::CbfAdd => counting::add(ctx, args),
            Command::CbfMadd => counting::madd(ctx, args),
            Command::CbfDel => counting::del(ctx, args),
            Command::CbfExists => counting::exists(ctx, args),
            Command::CbfMexists => counting::mexists(ctx, args),
            Command::CbfCount => counting::count(ctx, args),
            Command::CbfCard => counting::card(ctx, args),
            Command::CbfInfo => counting::info(ctx, args),
            Command::CbfScandump => counting::scandump(ctx, args),
            Command::CbfLoadchunk => counting::loadchunk(ctx, args),
        }
    }

    fn event(&self) -> Option<&'static str> {
        Command::event(*self)
    }
}
