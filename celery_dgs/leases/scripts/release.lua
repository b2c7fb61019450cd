-- release.lua: the run ended; delete the lease if this owner_tag holds it, and
-- signal the leading beat (its next round sees the schedule free).
--
-- KEYS[1] lease hash    KEYS[2] lease index (zset)    KEYS[3] beat wake list
-- ARGV[1] lease format version   ARGV[2] schedule   ARGV[3] owner_tag
-- ARGV[4] signals kept in the wake list   ARGV[5] its expiry (ms)
--
-- Returns {1} released, {0} not the owner (or no lease), {"MALFORMED", key, reason}.
-- The token counter is kept, so the next token is still larger. The lease
-- generation is bumped (_prelude.lua: dgs_leases_changed). The signal is
-- pushed whether or not this owner held the lease (the caller's slot is free
-- either way), and not when the lease is foreign data.

local lease, _, err = dgs_read(KEYS[1], ARGV[1])
if err then
  return {"MALFORMED", KEYS[1], err}
end
if not lease or lease["owner_tag"] ~= ARGV[3] then
  dgs_wake(KEYS[3], ARGV[4], ARGV[5])
  return {0}
end
redis.call("DEL", KEYS[1])
redis.call("ZREM", KEYS[2], ARGV[2])
dgs_leases_changed(KEYS[2])
dgs_wake(KEYS[3], ARGV[4], ARGV[5])
return {1}
