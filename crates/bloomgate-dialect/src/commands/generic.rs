//! Handler pieces generic over the value type, shared by the filter families: EXISTS and
//! MEXISTS, typed probes of a key, the add-each-item loop of the ADD/INSERT commands, and
//! LOADCHUNK.

use super::host::{Args, Ctx, Host};
use crate::budget::Allowance;
use crate::num::parse_i64;
use crate::reply::Reply;
use crate::value::DialectType;
use crate::{ERR_NOT_FOUND, ERR_OOM};

/// EXISTS `key item` over filters of type `T` (0 for a missing key or another type, as
/// [`probe`] answers), without the array MEXISTS builds.
pub(super) fn exists<T: DialectType, H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    args: &Args,
    contains: impl Fn(&T, &[u8]) -> bool,
) -> Reply {
    let filter = ctx.typed::<T>(args[1]).ok().flatten();
    Reply::Bool(filter.is_some_and(|f| contains(f, args[2])))
}

/// MEXISTS `key item...` over filters of type `T`, as [`probe`] answers.
pub(super) fn mexists<T: DialectType, H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    args: &Args,
    contains_many: impl Fn(&T, &Args) -> Vec<bool>,
) -> Reply {
    Reply::Array(probe(ctx, args[1], &args[2..], contains_many))
}

/// Whether the filter of type `T` at `key` contains each of `items`, `contains_many`
/// answering them all at once (so a type can probe them batched): 0 for every item when the
/// key is missing or holds another type (EXISTS never answers WRONGTYPE, as in RedisBloom).
pub(crate) fn probe<T: DialectType, H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    key: &[u8],
    items: &Args,
    contains_many: impl Fn(&T, &Args) -> Vec<bool>,
) -> Vec<Reply> {
    match ctx.typed::<T>(key).ok().flatten() {
        Some(filter) => contains_many(filter, items)
            .into_iter()
            .map(Reply::Bool)
            .collect(),
        None => vec![Reply::Bool(false); items.len()],
    }
}

/// Adds `items` in order to the filter of type `T` at `key` (which must exist), one Bool reply
/// per item, stopping at the first error (its message is the last reply), as MADD and INSERT
/// reply. The items newly added count as changes; the write propagates the items before the
/// error only. `add` adds a batch as [`update_batch`] runs it.
pub(crate) fn add_batch<T: DialectType, H: Host + ?Sized, E: Copy>(
    ctx: &mut Ctx<H>,
    key: &[u8],
    items: &Args,
    add: impl Fn(&mut T, &Args, &mut Allowance, &mut dyn FnMut(bool)) -> Result<(), E>,
    message: impl Fn(E) -> &'static str,
) -> Vec<Reply> {
    let mut replies = Vec::with_capacity(items.len());
    let mut added = 0;
    let result = update_batch(
        ctx,
        key,
        items,
        add,
        |e| message(*e) == ERR_OOM,
        |new| {
            added += u64::from(new);
            replies.push(Reply::Bool(new));
            true
        },
    );
    if let Err(e) = result {
        replies.push(Reply::error(message(e)));
    }
    ctx.changed(added);
    replies
}

/// Runs the batch write `run` over `items` — the command's last arguments — on the filter of
/// type `T` at `key` (which the command has just found with that type). `run` takes the items
/// in order (so a type can prefetch ahead), reports each item it has done through its callback
/// (handed on to `each`, which says whether the item went in or was already there, false if it
/// was refused) and stops at the first error, which it returns. The write propagates the items
/// that went in, and only those ([`Ctx::items_applied`]): not the refused ones, nor the error's
/// and those after it.
///
/// The memory budget is asked only if an item needs memory: the batch first runs with an
/// allowance of nothing, and if an item fails for want of memory (`out_of_memory`; the item
/// then changed nothing, as every growth admits before it allocates) the rest of the batch
/// runs again from that item with the command's real allowance, capped for this value by
/// `bloom-memory-usage-limit`, as [`Ctx::update_lazily`] does for one item.
pub(crate) fn update_batch<T: DialectType, H: Host + ?Sized, R, E>(
    ctx: &mut Ctx<H>,
    key: &[u8],
    items: &Args,
    run: impl Fn(&mut T, &Args, &mut Allowance, &mut dyn FnMut(R)) -> Result<(), E>,
    out_of_memory: impl Fn(&E) -> bool,
    mut each: impl FnMut(R) -> bool,
) -> Result<(), E> {
    let mut done = 0;
    // Which items went in, made at the first refusal (most writes refuse none).
    let mut kept: Option<Vec<bool>> = None;
    let mut allowance: Option<Allowance> = None;
    let result = loop {
        let rest = &items[done..];
        let mut nothing = Allowance::new(0);
        let real = allowance.is_some();
        let charged = allowance.as_mut().unwrap_or(&mut nothing);
        let mut answer = |r: R| {
            if !each(r) {
                kept.get_or_insert_with(|| vec![true; items.len()])[done] = false;
            }
            done += 1;
        };
        let result = ctx.update(key, |filter: &mut T| {
            run(filter, rest, charged, &mut answer)
        });
        match result {
            Err(e) if !real && out_of_memory(&e) => {
                let used = ctx.update(key, |filter: &mut T| filter.memory());
                allowance = Some(ctx.allowance_for(used));
            }
            result => break result,
        }
    };
    if let Some(allowance) = allowance {
        ctx.set_allowance(allowance);
    }
    if done < items.len() {
        kept.get_or_insert_with(|| vec![true; items.len()])[done..].fill(false);
    }
    ctx.items_applied(items.len(), kept);
    result
}

/// BF.LOADCHUNK / CF.LOADCHUNK `key iter data`: iterator 1 on a missing key creates the filter
/// from a dump header — validated into a shape, admitted against the memory budget, then
/// allocated; later iterators write chunks into an existing filter. `bad_iter` is the family's
/// wording for a non-numeric iterator.
pub(crate) fn load_chunk<T: DialectType, H: Host + ?Sized>(
    ctx: &mut Ctx<H>,
    args: &Args,
    bad_iter: &'static str,
) -> Reply {
    let Some(iter) = parse_i64(args[2]) else {
        return Reply::error(bad_iter);
    };
    let (key, data) = (args[1], args[3]);
    let result = match ctx.typed::<T>(key) {
        Err(reply) => return reply,
        Ok(None) if iter == 1 => match T::shape(data) {
            Err(msg) => Err(msg),
            Ok(shape) => match ctx.admit(shape) {
                Err(reply) => return reply,
                Ok(admitted) => T::from_shape(admitted).map(|filter| {
                    ctx.create(key, filter.into_value());
                }),
            },
        },
        Ok(None) => Err(ERR_NOT_FOUND),
        Ok(Some(_)) => ctx
            .update(key, |f: &mut T| f.load_chunk(iter, data))
            .map(|()| ctx.changed(1)),
    };
    match result {
        Ok(()) => Reply::ok(),
        Err(msg) => Reply::error(msg),
    }
}
