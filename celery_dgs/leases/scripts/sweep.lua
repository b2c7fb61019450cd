-- sweep.lua: beat's tick. Mark steal_start_at on every lease whose last ping is
-- older than ping_timeout, and list those that are takeable now.
--
-- KEYS[1] lease index (zset: schedule -> last_ping_at ms)
-- ARGV[1] now override ms or ""   ARGV[2] lease format version
-- ARGV[3] lease key prefix (KeySpace.lease_prefix(); lease key = prefix .. schedule)
-- ARGV[4] ping_timeout ms         ARGV[5] steal_delay ms
--
-- Only index entries with score < now - ping_timeout are visited (ZRANGEBYSCORE).
-- Index entries whose lease is gone are removed. The rules are in _prelude.lua
-- (dgs_sweep), shared with beat_view.lua.
--
-- Returns {now, takeable, marked, malformed}: takeable and marked are lists of
-- schedules, malformed a flat list {schedule, reason, ...}; or
-- {"MALFORMED", key, reason} when the index itself is foreign data.

local now = dgs_now(ARGV[1])
local wrong = dgs_wrong_type(KEYS[1], "zset")
if wrong then
  return {"MALFORMED", KEYS[1], wrong}
end
local takeable, marked, malformed = dgs_sweep(KEYS[1], ARGV[3], ARGV[2], now,
  tonumber(ARGV[4]), tonumber(ARGV[5]))
return {now, takeable, marked, malformed}
