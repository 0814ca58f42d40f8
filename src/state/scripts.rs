//! The store's scripts. Each runs atomically on the store (no other command runs between its
//! steps), reads the store's own clock, and answers one integer, or two per call it judged.

use redis::Script;

/// Many calls against their limits, and slots given back, in one round trip: the calls that
/// arrived at a replica while its previous round trip was out go together.
/// ARGV[1]: a slot's lifetime in ms. Then, one after the other, each with its keys in KEYS in
/// the same order:
/// - `r`, a slot's member (KEYS: its sorted set): give the slot back;
/// - `a`, the concurrency limit, a prefix for the slots' members, how many slots are wanted
///   (0: none), the rate's interval and tolerance in µs, and how many calls' worth of rate
///   is wanted (0: none) (KEYS: the slots' sorted set — member: a slot, score: its expiry in
///   ms — and the rate's arrival time in µs): judged for concurrency and then for its rate
///   (GCRA), so that a call refused for concurrency uses no rate.
///
/// More than one of either is drawn only while the limit is far (the replica keeps them for
/// its next calls): at most a sixteenth of the limit more, and only while half of it stays
/// free after; else one, judged exactly.
/// Answers three integers per `a`, in order: {0, slots, calls of rate} let through with that
/// much drawn, {1, running, 0} busy, {2, wait in µs, 0} over the rate.
/// `%d`: Lua writes a number with 14 significant digits, and µs timestamps have 16.
const ADMIT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now_ms = math.floor(now / 1000)
local lease = tonumber(ARGV[1])
local out = {}
local k, a = 1, 2
while a <= #ARGV do
  if ARGV[a] == 'r' then
    redis.call('ZREM', KEYS[k], ARGV[a + 1])
    k, a = k + 1, a + 2
  else
    local slots, rate = KEYS[k], KEYS[k + 1]
    local max, prefix, want_s = tonumber(ARGV[a + 1]), ARGV[a + 2], tonumber(ARGV[a + 3])
    local interval, tolerance, want_t = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6])
    k, a = k + 2, a + 7
    local verdict, x, gs, gt = 0, 0, 0, 0
    if want_s > 0 then
      local n = redis.call('ZCARD', slots)
      -- Slots whose lease ran out (a replica that stopped) count until they are swept,
      -- which only matters at the limit.
      if n >= max then
        redis.call('ZREMRANGEBYSCORE', slots, '-inf', now_ms)
        n = redis.call('ZCARD', slots)
      end
      if n >= max then
        verdict, x = 1, n
      else
        gs = math.min(want_s, 1 + math.floor(max / 16))
        if n + gs > max / 2 then gs = 1 end
      end
    end
    if verdict == 0 and want_t > 0 then
      local tat = tonumber(redis.call('GET', rate) or now)
      if tat < now then tat = now end
      if tat - now > tolerance then
        verdict, x, gs = 2, tat - now - tolerance, 0
      else
        gt = math.min(want_t, 1 + math.floor(tolerance / interval / 16))
        if tat - now + gt * interval > tolerance / 2 then gt = 1 end
        local new = tat + gt * interval
        redis.call('SET', rate, string.format('%d', new), 'PX', math.ceil((new - now) / 1000))
      end
    end
    if verdict == 0 and gs > 0 then
      local add = {}
      for i = 1, gs do
        add[#add + 1] = now_ms + lease
        add[#add + 1] = prefix .. '.' .. i
      end
      redis.call('ZADD', slots, unpack(add))
      redis.call('PEXPIRE', slots, lease)
    end
    if verdict == 0 then x = gs end
    out[#out + 1] = verdict
    out[#out + 1] = x
    out[#out + 1] = gt
  end
end
return out
";

/// The store's memory's generation in `g`, made if nobody has yet: the store's time in µs
/// when the first script found it missing. KEYS[1] names the memory; KEYS[2] is the key in
/// which a version before generations recorded when the memory began (Unix seconds): a
/// memory that has one takes it over, so that an upgrade is not a reset.
macro_rules! generation {
    () => {
        r"
local g = redis.call('GET', KEYS[1])
if not g then
  local since = tonumber(redis.call('GET', KEYS[2]))
  if since then
    g = string.format('%d', since * 1000000)
  else
    local t = redis.call('TIME')
    g = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))
  end
  redis.call('SET', KEYS[1], g)
end
"
    };
}

/// The first use of an id. KEYS: the memory's two keys (as `generation!`), then the id's
/// mark. ARGV: this attempt's value, how long to keep the mark in ms, when the id was issued
/// (Unix seconds), and the generation the id was issued under ('0': not known to its issuer).
/// An id of another generation was issued before the memory began, or under another one:
/// nobody can say whether it was used. One issued where the generation was not known is
/// judged by its time: issued before the memory began is refused.
/// Answers {1, generation} first use, {0, generation} used before, {-1, generation} issued
/// before the store's memory began.
const ONCE: &str = concat!(
    generation!(),
    r"
if ARGV[4] ~= '0' then
  if ARGV[4] ~= g then return {-1, g} end
elseif tonumber(ARGV[3]) * 1000000 < tonumber(g) then
  return {-1, g}
end
if redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[2]) then return {1, g} end
return {0, g}
"
);

/// The store's memory's generation, made if nobody has yet. KEYS: the memory's two keys (as
/// `generation!`). Run at start, at every renewal tick and before an id is issued without
/// another round trip, so that a store that restarted empty has a new generation at once,
/// and the ids issued after carry it. Answers the generation (text: 16 digits).
const MEMORY: &str = concat!(generation!(), "return g\n");

/// Take back a mark, only if it is still this attempt's. KEYS: the mark. ARGV: the attempt.
const FORGET: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

/// Renew slots still held. KEYS: their sorted sets. ARGV: the lifetime in ms, then one member
/// per key. A slot already gone (expired, or the store restarted) stays gone.
const RENEW: &str = r"
local t = redis.call('TIME')
local lease = tonumber(ARGV[1])
local until_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + lease
for i, k in ipairs(KEYS) do
  if redis.call('ZADD', k, 'XX', 'GT', 'CH', until_ms, ARGV[i + 1]) > 0 then
    redis.call('PEXPIRE', k, lease)
  end
end
return #KEYS
";

/// What an identity read of private repositories over stateless HTTP (the flow guard), noted:
/// KEYS[1] is the identity's sorted set (member: a keyed hash of a repository, or `*` for
/// content of a repository it could not name; score: when it stops counting, in ms on the
/// store's clock). ARGV: the window in ms, the most members kept, then the members read. Past
/// the bound a new member is kept as `*`. Answers how many members the set holds.
const FLOW_NOTE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window, bound = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
for i = 3, #ARGV do
  local m = ARGV[i]
  if not redis.call('ZSCORE', KEYS[1], m) and redis.call('ZCARD', KEYS[1]) >= bound then m = '*' end
  redis.call('ZADD', KEYS[1], now + window, m)
end
redis.call('PEXPIRE', KEYS[1], window)
return redis.call('ZCARD', KEYS[1])
";

/// What an identity read within its window (`FLOW_NOTE`): KEYS[1] its set; ARGV[1] the most
/// members answered. Answers the members.
const FLOW_SOURCES: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]))
";

/// The scripts, each sent by its hash (and loaded again when the store lost it).
#[derive(Debug)]
pub(super) struct Scripts {
    pub(super) admit: Script,
    pub(super) once: Script,
    pub(super) forget: Script,
    pub(super) renew: Script,
    pub(super) memory: Script,
    pub(super) flow_note: Script,
    pub(super) flow_sources: Script,
}

impl Scripts {
    pub(super) fn new() -> Scripts {
        Scripts {
            admit: Script::new(ADMIT),
            once: Script::new(ONCE),
            forget: Script::new(FORGET),
            renew: Script::new(RENEW),
            memory: Script::new(MEMORY),
            flow_note: Script::new(FLOW_NOTE),
            flow_sources: Script::new(FLOW_SOURCES),
        }
    }
}
