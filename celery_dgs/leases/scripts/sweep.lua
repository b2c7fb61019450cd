-- sweep.lua: beat's tick. Mark steal_start_at on every lease whose last ping is
-- older than ping_timeout, and list those that are takeable now.
--
-- Also notes the restart epoch (KEYS[2], see dgs_epoch_since and acquire.lua):
-- after a Redis restart the grace starts at beat's first round, not at the
-- first acquire, which waits for a worker's broker connection to come back.
--
-- KEYS[1] lease index (zset: schedule -> last_ping_at ms)
-- KEYS[2] epoch hash {run_id, since} (left alone if it is foreign data)
-- ARGV[1] now override ms or ""   ARGV[2] lease format version
-- ARGV[3] lease key prefix (KeySpace.lease_prefix(); lease key = prefix .. schedule)
-- ARGV[4] ping_timeout ms         ARGV[5] steal_delay ms
-- ARGV[6] run_id override or "" (tests; production reads INFO server)
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
if not dgs_wrong_type(KEYS[2], "hash") then  -- foreign data: acquire reports it
  dgs_epoch_since(KEYS[2], ARGV[6], now)
end
local takeable, marked, malformed = dgs_sweep(KEYS[1], ARGV[3], ARGV[2], now,
  tonumber(ARGV[4]), tonumber(ARGV[5]))
return {now, takeable, marked, malformed}
