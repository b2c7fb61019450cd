-- worker_live.lua: drop expired registrations and return the live ones.
--
-- KEYS[1] worker index (zset: name -> expires_at ms)
-- ARGV[1] now override ms or ""   ARGV[2] worker key prefix
--   (KeySpace.worker_prefix(); worker key = prefix .. name)
--
-- Returns {now, {name, flat_hash_or_error, ...}}, or {"MALFORMED", key, reason}.
-- Dropping a registration bumps the worker generation (dgs_index_changed).

local now = dgs_now(ARGV[1])
local wrong = dgs_wrong_type(KEYS[1], "zset")
if wrong then
  return {"MALFORMED", KEYS[1], wrong}
end
local expired = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", dgs_int(now))
for _, name in ipairs(expired) do
  local key = ARGV[2] .. name
  if redis.call("TYPE", key)["ok"] == "hash" then
    redis.call("DEL", key)
  end
end
if #expired > 0 then
  redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", dgs_int(now))
  dgs_index_changed(KEYS[1])
end
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
      dgs_index_changed(KEYS[1])
    else
      table.insert(out, name)
      table.insert(out, flat)
    end
  end
end
return {now, out}
