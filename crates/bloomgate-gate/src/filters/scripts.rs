//! The Lua scripts behind shared pending rows (`pending=shared`), and the commands that run
//! them.
//!
//! Each scope has three keys in one hash slot (its id is their hash tag): the filter
//! `P{SCOPE}` (a `WF` value), the pending rows `P{SCOPE}:p` (a hash: item id → the time it
//! was recorded at, as the decimal the recorder will clear it with) and a build marker
//! `P{SCOPE}:l` (a counter, with a TTL, of filter builds reading the store right now). Every
//! script touches the keys of one scope, so on a cluster it runs whole on the scope's master,
//! atomically; `WF.*` are the module's commands, called from the script.
//!
//! The invariants, kept by these scripts alone:
//! - **A filter that exists holds every row committed to the store**, except those still in
//!   its pending hash: it is created only by [`LOAD`] (the store's history, then every
//!   pending row), and after a group commit [`COMMIT`] adds the rows to it (`NOCREATE`) before
//!   it takes them out of the hash. A filter deleted (evicted, expired) is built again on use.
//! - **A recorded row stays in the pending hash until it is in the filter, or the filter does
//!   not exist and no build is reading the store** (one that started before the row's commit
//!   could miss it): then [`COMMIT`] leaves it (the recorder tries again with its next
//!   commit). A row never cleared stays pending until the hash expires, G·W ≥ R after the
//!   scope's last record, when the item is past the window anyway.
//! - [`PROBE`] reads the hash, the filter and whether it exists in one step: a candidate is
//!   seen if pending (at or after the window's start), "maybe" if the filter says so.
//!
//! The scripts call `WF.*` and `HMGET`/`HSET` with at most 1,000 items at a time (Lua's
//! `unpack` stops at 8,000).

use redis::Cmd;

use crate::Seen;

/// The Lua function [`COMMIT`] and [`LOAD`] start with: `each_run(i, visit)` walks the runs
/// `at count items...` of `ARGV` from index `i` on and calls `visit(at, first, last)` for
/// each slice `ARGV[first..last]` of at most 1,000 items of a run (a macro, as `concat!`
/// takes literals only).
macro_rules! each_run {
    () => {
        r#"
local function each_run(i, visit)
  while i <= #ARGV do
    local at = ARGV[i]
    local last = i + 1 + tonumber(ARGV[i + 1])
    local first = i + 2
    while first <= last do
      local upto = math.min(first + 999, last)
      visit(at, first, upto)
      first = upto + 1
    end
    i = last + 1
  end
end
"#
    };
}

/// `PROBE f p now since items...` → `[exists, a1, a2, ...]`, per item 2 = pending at or after
/// `since`, 1 = the filter's "maybe", 0 = neither.
pub const PROBE: &str = r#"#!lua flags=no-writes
local out = {redis.call('EXISTS', KEYS[1])}
local bits, times = {}, {}
local i = 3
while i <= #ARGV do
  local last = math.min(i + 999, #ARGV)
  if out[1] == 1 then
    local b = redis.call('WF.MEXISTSAT', KEYS[1], ARGV[1], unpack(ARGV, i, last))
    for j = 1, #b do bits[#bits + 1] = b[j] end
  end
  local t = redis.call('HMGET', KEYS[2], unpack(ARGV, i, last))
  for j = 1, #t do times[#times + 1] = t[j] end
  i = last + 1
end
local since = tonumber(ARGV[2])
for j = 1, #ARGV - 2 do
  local t = times[j]
  if t and tonumber(t) >= since then
    out[j + 1] = 2
  elseif bits[j] == 1 then
    out[j + 1] = 1
  else
    out[j + 1] = 0
  end
end
return out
"#;

/// `RECORD p at ttl items...`: each item pending at `at` (a later time already there is
/// kept); the hash expires `ttl` ms from now.
pub const RECORD: &str = r#"
local at = tonumber(ARGV[1])
local i = 3
while i <= #ARGV do
  local last = math.min(i + 999, #ARGV)
  local old = redis.call('HMGET', KEYS[1], unpack(ARGV, i, last))
  local set = {}
  for j = i, last do
    local o = old[j - i + 1]
    if not o or tonumber(o) < at then
      set[#set + 1] = ARGV[j]
      set[#set + 1] = ARGV[1]
    end
  end
  if #set > 0 then redis.call('HSET', KEYS[1], unpack(set)) end
  i = last + 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"#;

/// `COMMIT f p l ttl [at count items...]...` after the rows reached the store: into the
/// filter if it exists (which then expires `ttl` ms from now), then out of the pending hash
/// (those still at the committed time) unless a build is running. → `[exists, held]`.
pub const COMMIT: &str = concat!(
    each_run!(),
    r#"
local exists = redis.call('EXISTS', KEYS[1]) == 1
local held = redis.call('EXISTS', KEYS[3]) == 1
each_run(2, function(at, first, last)
  if exists then
    redis.call('WF.INSERT', KEYS[1], 'NOCREATE', 'AT', at, 'ITEMS', unpack(ARGV, first, last))
  end
  if not held then
    local old = redis.call('HMGET', KEYS[2], unpack(ARGV, first, last))
    local gone = {}
    for k = first, last do
      if old[k - first + 1] == at then gone[#gone + 1] = ARGV[k] end
    end
    if #gone > 0 then redis.call('HDEL', KEYS[2], unpack(gone)) end
  end
end)
if exists then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {exists and 1 or 0, held and 1 or 0}
"#
);

/// `LOAD f p l mode ttl since error capacity window generations [at count items...]...`
/// after [`mark_build`] and a read of the store: creates the filter if missing (`mode` =
/// `replace`: deletes it first), adds the store's rows and every row pending at or after
/// `since`, sets its TTL and ends the build's mark.
pub const LOAD: &str = concat!(
    each_run!(),
    r#"
if ARGV[1] == 'replace' then redis.call('DEL', KEYS[1]) end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('WF.RESERVE', KEYS[1], ARGV[4], ARGV[5], ARGV[6], ARGV[7])
end
each_run(8, function(at, first, last)
  redis.call('WF.INSERT', KEYS[1], 'NOCREATE', 'AT', at, 'ITEMS', unpack(ARGV, first, last))
end)
local since = tonumber(ARGV[3])
local pending = redis.call('HGETALL', KEYS[2])
for k = 1, #pending, 2 do
  if tonumber(pending[k + 1]) >= since then
    redis.call('WF.INSERT', KEYS[1], 'NOCREATE', 'AT', pending[k + 1], 'ITEMS', pending[k])
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('DECR', KEYS[3]) <= 0 then redis.call('DEL', KEYS[3]) end
return 1
"#
);

/// Every script, for `SCRIPT LOAD` on each new connection.
pub fn all() -> Vec<String> {
    [PROBE, RECORD, COMMIT, LOAD]
        .iter()
        .map(|body| (*body).to_owned())
        .collect()
}

/// `EVALSHA` of `body` over `keys` with no arguments yet.
fn eval(body: &str, keys: &[&str]) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(redis::Script::new(body).get_hash())
        .arg(keys.len())
        .arg(keys);
    cmd
}

/// [`PROBE`] of `items` at `now_ms` (pending rows count from `since_ms`).
pub fn probe(filter: &str, pending: &str, now_ms: u64, since_ms: u64, items: &[u64]) -> Cmd {
    let mut cmd = eval(PROBE, &[filter, pending]);
    cmd.arg(now_ms).arg(since_ms).arg(items);
    cmd
}

/// [`RECORD`] of `items` at `at_ms`.
pub fn record(pending: &str, at_ms: u64, ttl_ms: u64, items: &[u64]) -> Cmd {
    let mut cmd = eval(RECORD, &[pending]);
    cmd.arg(at_ms).arg(ttl_ms).arg(items);
    cmd
}

/// Appends runs of rows with one time each (`rows` sorted by time): `at count items...`.
fn runs(cmd: &mut Cmd, rows: &[Seen]) {
    for run in rows.chunk_by(|a, b| a.at_ms == b.at_ms) {
        cmd.arg(run[0].at_ms).arg(run.len());
        for seen in run {
            cmd.arg(seen.item);
        }
    }
}

/// [`COMMIT`] of `rows` (sorted by time).
pub fn commit(keys: [&str; 3], ttl_ms: u64, rows: &[Seen]) -> Cmd {
    let mut cmd = eval(COMMIT, &keys);
    cmd.arg(ttl_ms);
    runs(&mut cmd, rows);
    cmd
}

/// The marks a build sets before it reads the store (a counter that lives a minute at most,
/// in case the build never ends).
pub fn mark_build(marker: &str) -> [Cmd; 2] {
    let mut incr = redis::cmd("INCR");
    incr.arg(marker);
    let mut expire = redis::cmd("PEXPIRE");
    expire.arg(marker).arg(60_000);
    [incr, expire]
}

/// What a filter is created with.
pub struct Shape {
    pub fpr: f64,
    pub capacity: u64,
    pub window_ms: u64,
    pub generations: usize,
}

/// [`LOAD`] of `history` (sorted by time) into the filter, `replace`-ing it or adding to it.
pub fn load(
    keys: [&str; 3],
    replace: bool,
    ttl_ms: u64,
    since_ms: u64,
    shape: &Shape,
    history: &[Seen],
) -> Cmd {
    let mut cmd = eval(LOAD, &keys);
    cmd.arg(if replace { "replace" } else { "add" })
        .arg(ttl_ms)
        .arg(since_ms)
        .arg(shape.fpr)
        .arg(shape.capacity.min(1 << 30))
        .arg(shape.window_ms)
        .arg(shape.generations);
    runs(&mut cmd, history);
    cmd
}
