-- cancel.lua: ask the lease's owner to stop; it learns it at its next ping.
--
-- KEYS[1] lease hash
-- ARGV[1] lease format version
--
-- Returns {1} flag set, {0} no lease, {"MALFORMED", key, reason}.

local lease, _, err = dgs_read(KEYS[1], ARGV[1])
if err then
  return {"MALFORMED", KEYS[1], err}
end
if not lease then
  return {0}
end
redis.call("HSET", KEYS[1], "cancel_requested", "1")
return {1}
