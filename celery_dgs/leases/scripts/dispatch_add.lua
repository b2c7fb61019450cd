-- dispatch_add.lua: beat records many dispatches in one call, BEFORE it
-- publishes their messages. A record replaces the schedule's previous one, so
-- the previous dispatch's message becomes stale.
--
-- KEYS[1] dispatch index (zset: schedule -> expires_at ms)
-- KEYS[2..n+1] one dispatch record hash per dispatch, in ARGV order
-- ARGV[1] now override ms or ""   ARGV[2] dispatch format version
-- ARGV[3 + 4*(i-1) ...] per dispatch i: schedule, dispatch_id, worker (Celery
--   hostname, e.g. celery@host), timeout ms
--
-- Returns {dispatched_at} (one Redis time for the batch), or
-- {"MALFORMED", key, reason} before anything is written.

local now = dgs_now(ARGV[1])
local wrong = dgs_wrong_type(KEYS[1], "zset")
if wrong then
  return {"MALFORMED", KEYS[1], wrong}
end
for i = 2, #KEYS do
  wrong = dgs_wrong_type(KEYS[i], "hash")
  if wrong then
    return {"MALFORMED", KEYS[i], wrong}
  end
end
for i = 2, #KEYS do
  local a = 3 + 4 * (i - 2)
  local expires = now + tonumber(ARGV[a + 3])
  redis.call("DEL", KEYS[i])
  redis.call("HSET", KEYS[i],
    "format", ARGV[2], "schedule", ARGV[a], "dispatch_id", ARGV[a + 1],
    "worker", ARGV[a + 2],
    "dispatched_at", dgs_int(now), "expires_at", dgs_int(expires))
  redis.call("ZADD", KEYS[1], dgs_int(expires), ARGV[a])
end
return {now}
