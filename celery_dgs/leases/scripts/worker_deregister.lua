-- worker_deregister.lua: a worker leaves (its shutdown): remove its registration.
--
-- KEYS[1] worker hash   KEYS[2] worker index (zset: name -> expires_at ms)
-- ARGV[1] name
--
-- Returns {1} when the hash was there, else {0}. The worker generation is
-- bumped when anything was removed (_prelude.lua: dgs_index_changed).

local deleted = redis.call("DEL", KEYS[1])
local removed = 0
if not dgs_wrong_type(KEYS[2], "zset") then
  removed = redis.call("ZREM", KEYS[2], ARGV[1])
end
if deleted + removed > 0 then
  dgs_index_changed(KEYS[2])
end
return {deleted}
