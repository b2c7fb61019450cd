-- worker_live.lua: drop expired registrations and return the live ones.
--
-- KEYS[1] worker index (zset: name -> expires_at ms)
-- ARGV[1] now override ms or ""   ARGV[2] worker key prefix
--   (KeySpace.worker_prefix(); worker key = prefix .. name)
--
-- Returns {now, {name, flat_hash_or_error, ...}}, or {"MALFORMED", key, reason}.

local now = dgs_now(ARGV[1])
local wrong = dgs_wrong_type(KEYS[1], "zset")
if wrong then
  return {"MALFORMED", KEYS[1], wrong}
end
for _, name in ipairs(redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", dgs_int(now))) do
  local key = ARGV[2] .. name
  if redis.call("TYPE", key)["ok"] == "hash" then
    redis.call("DEL", key)
  end
end
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", dgs_int(now))
local out = {}
for _, name in ipairs(redis.call("ZRANGE", KEYS[1], 0, -1)) do
  local key = ARGV[2] .. name
  local bad = dgs_wrong_type(key, "hash")
  if bad then
    table.insert(out, name)
    table.insert(out, bad)
  else
    local flat = redis.call("HGETALL", key)
    if #flat == 0 then
      redis.call("ZREM", KEYS[1], name)
    else
      table.insert(out, name)
      table.insert(out, flat)
    end
  end
end
return {now, out}
