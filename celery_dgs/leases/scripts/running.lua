-- running.lua: the schedules whose lease is live, i.e. held and not takeable.
-- A lease whose steal is pending still counts as running (its owner may ping).
-- Read-only.
--
-- KEYS[1] lease index (zset: schedule -> last_ping_at ms)
-- ARGV[1] now override ms or ""   ARGV[2] lease format version
-- ARGV[3] lease key prefix        ARGV[4] ping_timeout ms   ARGV[5] steal_delay ms
-- ARGV[6] "1": return names; "0": return only the count
--
-- Returns {count, names} (names is {} when ARGV[6] is "0"), or
-- {"MALFORMED", key, reason}. Foreign data under a lease key counts as running:
-- nothing is dispatched for that schedule until an operator removes it.

local now = dgs_now(ARGV[1])
local wrong = dgs_wrong_type(KEYS[1], "zset")
if wrong then
  return {"MALFORMED", KEYS[1], wrong}
end
local ping_timeout, steal_delay = tonumber(ARGV[4]), tonumber(ARGV[5])
local cutoff = dgs_int(now - ping_timeout)
local names = {}
local count = redis.call("ZCOUNT", KEYS[1], cutoff, "+inf")
if ARGV[6] == "1" then
  names = redis.call("ZRANGEBYSCORE", KEYS[1], cutoff, "+inf")
end
for _, schedule in ipairs(redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", "(" .. cutoff)) do
  local lease, _, err = dgs_read(ARGV[3] .. schedule, ARGV[2])
  local live = err ~= nil
  if lease then
    local last_ping = tonumber(lease["last_ping_at"])
    local steal = tonumber(lease["steal_start_at"] or "")
    live = (not last_ping) or (now - last_ping <= ping_timeout) or (not steal)
      or (now - steal <= steal_delay)
  end
  if live then
    count = count + 1
    if ARGV[6] == "1" then
      table.insert(names, schedule)
    end
  end
end
return {count, names}
