-- dispatch_take_back.lua: beat takes back a dispatch that did not start in
-- time; its message, if it is ever delivered, is then stale.
--
-- KEYS[1] dispatch record hash   KEYS[2] dispatch index (zset)
-- ARGV[1] dispatch format version   ARGV[2] schedule   ARGV[3] dispatch_id
--
-- Returns {1} removed, {0} the record is absent or for another dispatch (it
-- started, or was replaced), {"MALFORMED", key, reason}.

local record, _, err = dgs_read(KEYS[1], ARGV[1])
if err then
  return {"MALFORMED", KEYS[1], err}
end
if not record then
  redis.call("ZREM", KEYS[2], ARGV[2])
  return {0}
end
if record["dispatch_id"] ~= ARGV[3] then
  return {0}
end
redis.call("DEL", KEYS[1])
redis.call("ZREM", KEYS[2], ARGV[2])
return {1}
