-- worker_register.lua: a worker announces itself (worker_ready), or again after
-- its registration expired.
--
-- KEYS[1] worker hash   KEYS[2] worker index (zset: name -> expires_at ms)
-- ARGV[1] now override ms or ""   ARGV[2] worker format version   ARGV[3] ttl ms
-- ARGV[4] name   ARGV[5] node   ARGV[6] queues (JSON list)   ARGV[7] slots
-- ARGV[8] pool   ARGV[9] pid   ARGV[10] started_at ms, or "": keep the started_at
--   of a registration of the same pid that is still there, else now
-- ARGV[11] store: the id of the schedule store the worker serves, or ""
-- ARGV[12] tasks: the task names the worker has (JSON list), or "" (not given)
--
-- registered_at: when this instance first registered. The registration still
-- there is the same instance when its pid is ARGV[9] and its started_at is
-- ARGV[10] (any started_at when ARGV[10] is ""): its registered_at is kept;
-- otherwise (a restart under the same name, or none there) it is now.
--
-- The hash also gets a Redis TTL, so a dead worker's hash disappears by itself.
-- The worker generation is bumped (_prelude.lua: dgs_index_changed).
-- Returns {started_at, expires_at, registered_at}, or {"MALFORMED", key, reason}.

local now = dgs_now(ARGV[1])
for _, pair in ipairs({{KEYS[1], "hash"}, {KEYS[2], "zset"}}) do
  local wrong = dgs_wrong_type(pair[1], pair[2])
  if wrong then
    return {"MALFORMED", pair[1], wrong}
  end
end
local ttl = tonumber(ARGV[3])
local expires = now + ttl
local old = redis.call("HMGET", KEYS[1], "pid", "started_at", "registered_at")
local same_pid = old[1] == ARGV[9]
local started = tonumber(ARGV[10])
local same = same_pid and (not started or tonumber(old[2]) == started)
if not started then
  started = same_pid and tonumber(old[2]) or now
end
local registered = same and tonumber(old[3]) or now
redis.call("DEL", KEYS[1])
redis.call("HSET", KEYS[1],
  "format", ARGV[2], "name", ARGV[4], "node", ARGV[5], "queues", ARGV[6],
  "slots", ARGV[7], "pool", ARGV[8], "pid", ARGV[9],
  "started_at", dgs_int(started), "registered_at", dgs_int(registered),
  "expires_at", dgs_int(expires), "store", ARGV[11] or "", "tasks", ARGV[12] or "")
redis.call("PEXPIRE", KEYS[1], dgs_int(ttl))
redis.call("ZADD", KEYS[2], dgs_int(expires), ARGV[4])
dgs_index_changed(KEYS[2])
return {started, expires, registered}
