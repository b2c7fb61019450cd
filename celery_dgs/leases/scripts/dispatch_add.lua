-- dispatch_add.lua: beat records many dispatches in one call, BEFORE it
-- publishes their messages. A record replaces the schedule's previous one, so
-- the previous dispatch's message becomes stale.
--
-- Leader fencing: when ARGV[4] (the caller's leader owner_tag) is not empty,
-- the call writes only if the leader hash still names that owner_tag AND that
-- token. A beat that lost its leadership (a standby took over while it was
-- stopped or cut off) is refused in the same atomic step, before anything is
-- written, and publishes nothing.
--
-- KEYS[1] dispatch index (zset: schedule -> expires_at ms)
-- KEYS[2] leader hash (see leader_elect.lua)
-- KEYS[3..n+2] one dispatch record hash per dispatch, in ARGV order
-- ARGV[1] now override ms or ""   ARGV[2] dispatch format version
-- ARGV[3] leader format version   ARGV[4] leader owner_tag, "" = not fenced
-- ARGV[5] leader token (ignored when not fenced)
-- ARGV[6 + 4*(i-1) ...] per dispatch i: schedule, dispatch_id, worker (Celery
--   hostname, e.g. celery@host), timeout ms
--
-- Returns {dispatched_at} (one Redis time for the batch),
-- {"NOT_LEADER", now, current leader token or "", current owner_tag or ""}, or
-- {"MALFORMED", key, reason}; nothing is written in the last two cases.

local now = dgs_now(ARGV[1])
local wrong = dgs_wrong_type(KEYS[1], "zset")
if wrong then
  return {"MALFORMED", KEYS[1], wrong}
end
if ARGV[4] ~= "" then
  local leader, _, err = dgs_read(KEYS[2], ARGV[3])
  if err then
    return {"MALFORMED", KEYS[2], err}
  end
  if not leader or leader["owner_tag"] ~= ARGV[4] or leader["token"] ~= ARGV[5] then
    return {"NOT_LEADER", now, leader and leader["token"] or "", leader and leader["owner_tag"] or ""}
  end
end
for i = 3, #KEYS do
  wrong = dgs_wrong_type(KEYS[i], "hash")
  if wrong then
    return {"MALFORMED", KEYS[i], wrong}
  end
end
for i = 3, #KEYS do
  local a = 6 + 4 * (i - 3)
  local expires = now + tonumber(ARGV[a + 3])
  redis.call("DEL", KEYS[i])
  redis.call("HSET", KEYS[i],
    "format", ARGV[2], "schedule", ARGV[a], "dispatch_id", ARGV[a + 1],
    "worker", ARGV[a + 2],
    "dispatched_at", dgs_int(now), "expires_at", dgs_int(expires))
  redis.call("ZADD", KEYS[1], dgs_int(expires), ARGV[a])
end
return {now}
