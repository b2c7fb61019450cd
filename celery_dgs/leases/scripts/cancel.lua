-- cancel.lua: ask one run (the lease's owner) to stop; it learns it at its next ping.
--
-- The request names the run it is aimed at, by owner_tag (the run id) and/or
-- fencing token. If the lease is held by another run (the targeted one ended
-- and a new one started meanwhile), nothing changes: a cancel never reaches
-- a run its sender did not see.
--
-- KEYS[1] lease hash
-- ARGV[1] lease format version
-- ARGV[2] owner_tag of the targeted run, or "" (not checked)
-- ARGV[3] fencing token of the targeted run, or "" (not checked)
--
-- Returns:
--   {"REQUESTED", owner_tag, token}  flag set on the targeted run
--   {"ALREADY", owner_tag, token}    the targeted run already had the flag
--   {"NO_LEASE"}                     no lease at all (the run ended)
--   {"OTHER_RUN", owner_tag, token}  another run holds the lease (the targeted one ended)
--   {"MALFORMED", key, reason}

local lease, _, err = dgs_read(KEYS[1], ARGV[1])
if err then
  return {"MALFORMED", KEYS[1], err}
end
if not lease then
  return {"NO_LEASE"}
end
local tag, token = lease["owner_tag"], lease["token"]
if (ARGV[2] ~= "" and tag ~= ARGV[2]) or (ARGV[3] ~= "" and token ~= ARGV[3]) then
  return {"OTHER_RUN", tag, token}
end
if lease["cancel_requested"] == "1" then
  return {"ALREADY", tag, token}
end
redis.call("HSET", KEYS[1], "cancel_requested", "1")
return {"REQUESTED", tag, token}
