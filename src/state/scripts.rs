//! The store's scripts. Each runs atomically on the store (no other command runs between its
//! steps), reads the store's own clock, and answers at most two integers.

use redis::Script;

/// One more call against a concurrency limit and a rate (GCRA), in that order, so that a call
/// refused for concurrency uses no rate.
/// KEYS: the slots' sorted set (member: a slot, score: its expiry in ms), the rate's arrival
/// time (µs). ARGV: the concurrency limit (0: none), the slot's member, the slot's lifetime
/// in ms, the rate's interval and tolerance in µs (interval 0: no rate).
/// Answers {0, running} let through, {1, running} busy, {2, wait in µs} over the rate.
/// `%d`: Lua writes a number with 14 significant digits, and µs timestamps have 16.
const ADMIT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now_ms = math.floor(now / 1000)
local max, lease = tonumber(ARGV[1]), tonumber(ARGV[3])
local interval, tolerance = tonumber(ARGV[4]), tonumber(ARGV[5])
local n = 0
if max > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
  n = redis.call('ZCARD', KEYS[1])
  if n >= max then return {1, n} end
end
if interval > 0 then
  local tat = tonumber(redis.call('GET', KEYS[2]) or now)
  if tat < now then tat = now end
  if tat - now > tolerance then return {2, tat - now - tolerance} end
  local new = tat + interval
  redis.call('SET', KEYS[2], string.format('%d', new), 'PX', math.ceil((new - now) / 1000))
end
if max > 0 then
  redis.call('ZADD', KEYS[1], now_ms + lease, ARGV[2])
  redis.call('PEXPIRE', KEYS[1], lease)
end
return {0, n + 1}
";

/// The first use of an id. KEYS: its mark, the key that holds when the store's memory began
/// (Unix seconds, set by the first script to find it missing). ARGV: this attempt's value,
/// how long to keep the mark in ms, when the id was issued (Unix seconds).
/// Answers 1 first use, 0 used before, -1 issued before the store's memory began.
const ONCE: &str = r"
local now = tonumber(redis.call('TIME')[1])
local since = tonumber(redis.call('GET', KEYS[2]))
if not since then
  redis.call('SET', KEYS[2], now)
  since = now
end
if tonumber(ARGV[3]) < since then return -1 end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0
";

/// Record when the store's memory began, if nobody has yet. KEYS: that key. Run at start and
/// at every renewal tick, so that a store that restarted empty has it within seconds, before
/// the ids issued after are presented.
const SINCE: &str = r"
redis.call('SET', KEYS[1], redis.call('TIME')[1], 'NX')
return 1
";

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

/// The scripts, each sent by its hash (and loaded again when the store lost it).
#[derive(Debug)]
pub(super) struct Scripts {
    pub(super) admit: Script,
    pub(super) once: Script,
    pub(super) forget: Script,
    pub(super) renew: Script,
    pub(super) since: Script,
}

impl Scripts {
    pub(super) fn new() -> Scripts {
        Scripts {
            admit: Script::new(ADMIT),
            once: Script::new(ONCE),
            forget: Script::new(FORGET),
            renew: Script::new(RENEW),
            since: Script::new(SINCE),
        }
    }
}
