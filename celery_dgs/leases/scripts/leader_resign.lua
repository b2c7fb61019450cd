-- leader_resign.lua: a leader steps down (clean shutdown), so a standby takes
-- over at its next check instead of after the timeout.
--
-- KEYS[1] leader hash
-- ARGV[1] leader format version   ARGV[2] owner_tag
--
-- Returns {1} if this owner_tag led and the hash is deleted, {0} otherwise
-- (another leader, or none), or {"MALFORMED", key, reason}.

local leader, _, err = dgs_read(KEYS[1], ARGV[1])
if err then
  return {"MALFORMED", KEYS[1], err}
end
if leader and leader["owner_tag"] == ARGV[2] then
  redis.call("DEL", KEYS[1])
  return {1}
end
return {0}
