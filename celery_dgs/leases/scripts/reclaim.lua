-- reclaim.lua: beat's reaper frees the lease of a run whose owner went
-- silent, when no taker comes (its schedule is not dispatched: paused,
-- removed, in a blackout), by the steal protocol a taker follows.
--
-- KEYS[1] lease hash    KEYS[2] lease index (zset)
-- ARGV[1] now override ms or ""   ARGV[2] lease format version
-- ARGV[3] schedule      ARGV[4] owner_tag
-- ARGV[5] ping_timeout ms         ARGV[6] steal_delay ms
--
-- The steal step of acquire.lua (_prelude.lua: dgs_steal_step): a lease
-- pinged within ping_timeout is LIVE; past it, a steal is marked (PENDING:
-- the owner may still ping within steal_delay, which clears the mark); a
-- steal marked more than steal_delay ago: the lease is deleted (RECLAIMED;
-- the token counter is kept, so the next grant's token is larger, and a
-- resumed owner's ping finds no lease). The lease generation is bumped
-- (_prelude.lua: dgs_leases_changed).
--
-- Returns:
--   {"RECLAIMED", now, token}   {"PENDING", now}   {"LIVE", now}
--   {"OTHER", now}              no lease, or another owner_tag holds it
--   {"MALFORMED", key, reason}

local now = dgs_now(ARGV[1])
local wrong = dgs_wrong_type(KEYS[2], "zset")
if wrong then
  return {"MALFORMED", KEYS[2], wrong}
end
local lease, _, err = dgs_read(KEYS[1], ARGV[2])
if err then
  return {"MALFORMED", KEYS[1], err}
end
if not lease or lease["owner_tag"] ~= ARGV[4] then
  return {"OTHER", now}
end
local step, step_err = dgs_steal_step(KEYS[1], lease, now, tonumber(ARGV[5]), tonumber(ARGV[6]))
if step_err then
  return {"MALFORMED", KEYS[1], step_err}
end
if step ~= "TAKEABLE" then
  return {step, now}
end
redis.call("DEL", KEYS[1])
redis.call("ZREM", KEYS[2], ARGV[3])
dgs_leases_changed(KEYS[2])
return {"RECLAIMED", now, tonumber(lease["token"])}
