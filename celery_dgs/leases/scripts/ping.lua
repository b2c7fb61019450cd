-- ping.lua: the owner's heartbeat; clears a pending steal.
--
-- KEYS[1] lease hash    KEYS[2] lease index (zset)
-- ARGV[1] now override ms or ""   ARGV[2] lease format version
-- ARGV[3] schedule      ARGV[4] owner_tag   ARGV[5] progress, "" to leave it unchanged
--
-- Returns:
--   {"OK", now, token}          pinged; steal_start_at cleared
--   {"CANCELLED", now, token}   pinged (still the owner), but a cancel was requested
--   {"NOT_OWNER", now, holder}  another owner_tag (holder) holds it (stolen), or
--                               no lease at all (holder ""): taken over and since
--                               released, or lost with Redis's data
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
  return {"NOT_OWNER", now, lease and lease["owner_tag"] or ""}
end
redis.call("HSET", KEYS[1], "last_ping_at", dgs_int(now))
redis.call("HDEL", KEYS[1], "steal_start_at")
if ARGV[5] ~= "" then
  redis.call("HSET", KEYS[1], "progress", ARGV[5])
end
redis.call("ZADD", KEYS[2], dgs_int(now), ARGV[3])
local status = "OK"
if lease["cancel_requested"] == "1" then
  status = "CANCELLED"
end
return {status, now, tonumber(lease["token"])}
