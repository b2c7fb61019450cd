-- worker_heartbeat.lua: extend a live worker's registration by its TTL.
--
-- KEYS[1] worker hash   KEYS[2] worker index (zset)
-- ARGV[1] now override ms or ""   ARGV[2] worker format version   ARGV[3] ttl ms
-- ARGV[4] name
--
-- Returns {expires_at}, {0} when the registration is gone (expired: the worker
-- must register again), or {"MALFORMED", key, reason}.

local now = dgs_now(ARGV[1])
local worker, _, err = dgs_read(KEYS[1], ARGV[2])
if err then
  return {"MALFORMED", KEYS[1], err}
end
local expires_at = worker and tonumber(worker["expires_at"])
if not worker or not expires_at or expires_at <= now then
  return {0}
end
local ttl = tonumber(ARGV[3])
local expires = now + ttl
redis.call("HSET", KEYS[1], "expires_at", dgs_int(expires))
redis.call("PEXPIRE", KEYS[1], dgs_int(ttl))
redis.call("ZADD", KEYS[2], dgs_int(expires), ARGV[4])
return {expires}
