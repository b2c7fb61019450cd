-- release.lua: the run ended; delete the lease if this owner_tag holds it.
--
-- KEYS[1] lease hash    KEYS[2] lease index (zset)
-- ARGV[1] lease format version   ARGV[2] schedule   ARGV[3] owner_tag
--
-- Returns {1} released, {0} not the owner (or no lease), {"MALFORMED", key, reason}.
-- The token counter is kept, so the next token is still larger. The lease
-- generation is bumped (_prelude.lua: dgs_leases_changed).

local lease, _, err = dgs_read(KEYS[1], ARGV[1])
if err then
  return {"MALFORMED", KEYS[1], err}
end
if not lease or lease["owner_tag"] ~= ARGV[3] then
  return {0}
end
redis.call("DEL", KEYS[1])
redis.call("ZREM", KEYS[2], ARGV[2])
dgs_leases_changed(KEYS[2])
return {1}
