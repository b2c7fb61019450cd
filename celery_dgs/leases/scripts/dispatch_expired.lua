-- dispatch_expired.lua: the dispatch records whose expires_at has passed.
-- Read-only except that index entries without a record are removed.
--
-- KEYS[1] dispatch index (zset: schedule -> expires_at ms)
-- ARGV[1] now override ms or ""   ARGV[2] dispatch key prefix
--   (KeySpace.dispatch_prefix(); record key = prefix .. schedule)
-- ARGV[3] the most records to return
--
-- Returns {now, {schedule, flat_hash_or_error, ...}} where the second element
-- is the record's HGETALL, or a string saying what is wrong with the key; or
-- {"MALFORMED", key, reason} when the index itself is foreign data.

local now = dgs_now(ARGV[1])
local wrong = dgs_wrong_type(KEYS[1], "zset")
if wrong then
  return {"MALFORMED", KEYS[1], wrong}
end
local out = {}
local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", dgs_int(now), "LIMIT", 0, tonumber(ARGV[3]))
for _, schedule in ipairs(due) do
  local key = ARGV[2] .. schedule
  local bad = dgs_wrong_type(key, "hash")
  if bad then
    table.insert(out, schedule)
    table.insert(out, bad)
  else
    local flat = redis.call("HGETALL", key)
    if #flat == 0 then
      redis.call("ZREM", KEYS[1], schedule)
    else
      table.insert(out, schedule)
      table.insert(out, flat)
    end
  end
end
return {now, out}
