-- sweep.lua: beat's tick. Mark steal_start_at on every lease whose last ping is
-- older than ping_timeout, and list those that are takeable now.
--
-- Also notes the restart epoch (KEYS[2], see dgs_epoch_since and acquire.lua):
-- after a Redis restart the grace starts at beat's first round, not at the
-- first acquire, which waits for a worker's broker connection to come back.
--
-- KEYS[1] lease index (zset: schedule -> last_ping_at ms)
-- KEYS[2] epoch hash {run_id, since}
-- ARGV[1] now override ms or ""   ARGV[2] lease format version
-- ARGV[3] lease key prefix (KeySpace.lease_prefix(); lease key = prefix .. schedule)
-- ARGV[4] ping_timeout ms         ARGV[5] steal_delay ms
-- ARGV[6] run_id override or "" (tests; production reads INFO server)
--
-- Only index entries with score < now - ping_timeout are visited (ZRANGEBYSCORE).
-- Index entries whose lease is gone are removed.
--
-- Returns {now, takeable, marked, malformed}: takeable and marked are lists of
-- schedules, malformed a flat list {schedule, reason, ...}; or
-- {"MALFORMED", key, reason} when the index itself is foreign data.

local now = dgs_now(ARGV[1])
local wrong = dgs_wrong_type(KEYS[1], "zset")
if wrong then
  return {"MALFORMED", KEYS[1], wrong}
end
wrong = dgs_wrong_type(KEYS[2], "hash")
if wrong then
  return {"MALFORMED", KEYS[2], wrong}
end
dgs_epoch_since(KEYS[2], ARGV[6], now)
local ping_timeout, steal_delay = tonumber(ARGV[4]), tonumber(ARGV[5])
local stale = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", "(" .. dgs_int(now - ping_timeout))
local takeable, marked, malformed = {}, {}, {}
for _, schedule in ipairs(stale) do
  local key = ARGV[3] .. schedule
  local lease, _, err = dgs_read(key, ARGV[2])
  local last_ping = lease and tonumber(lease["last_ping_at"])
  if err then
    table.insert(malformed, schedule)
    table.insert(malformed, err)
  elseif not lease then
    redis.call("ZREM", KEYS[1], schedule)
  elseif not last_ping then
    table.insert(malformed, schedule)
    table.insert(malformed, "last_ping_at is not a number")
  elseif now - last_ping > ping_timeout then
    local steal = tonumber(lease["steal_start_at"] or "")
    if not steal then
      redis.call("HSET", key, "steal_start_at", dgs_int(now))
      table.insert(marked, schedule)
    elseif now - steal > steal_delay then
      table.insert(takeable, schedule)
    end
  end
end
return {now, takeable, marked, malformed}
