-- beat_view.lua: everything beat's dispatch round reads from Redis about leases
-- and dispatch records, in one call and in a compact form. It sweeps like
-- sweep.lua (same rules: dgs_sweep in _prelude.lua) and, instead of every
-- lease hash, returns only what placement needs: which schedules run, how many
-- runs each worker holds, and which workers own a lease that went stale.
--
-- KEYS[1] lease index (zset: schedule -> last_ping_at ms)
-- KEYS[2] dispatch index (zset: schedule -> expires_at ms)
-- ARGV[1] now override ms or ""   ARGV[2] lease format version
-- ARGV[3] lease key prefix (KeySpace.lease_prefix(); lease key = prefix .. schedule)
-- ARGV[4] ping_timeout ms         ARGV[5] steal_delay ms
-- ARGV[6] how many dispatch records the caller expects in the dispatch index,
--   or "" : the index's members are returned only when its ZCARD differs
--   (or ARGV[6] is ""), so an unchanged index of pending dispatches costs O(1)
--
-- Fresh leases (score >= now - ping_timeout) cost one HMGET each (format,
-- owner_name); stale ones are read whole by the sweep.
--
-- Returns {now, takeable, marked, malformed, running, owners, stale_owners,
--          dispatch_count, dispatch_names}:
--   takeable, marked, malformed  as sweep.lua
--   running       schedules whose lease is held and not takeable (a pending
--                 steal still runs); foreign data under a lease key counts as
--                 running (nothing is dispatched for it until an operator
--                 removes it) and is also listed in malformed
--   owners        flat {owner_name, count, ...}: running leases per worker
--   stale_owners  owner_name of every lease not pinged within ping_timeout
--                 (steal pending or takeable): that worker is paused,
--                 partitioned or dead
--   dispatch_count  ZCARD of the dispatch index
--   dispatch_names  its members when read (see ARGV[6]), else {}
-- or {"MALFORMED", key, reason} when an index itself is foreign data.

local now = dgs_now(ARGV[1])
for _, key in ipairs({KEYS[1], KEYS[2]}) do
  local wrong = dgs_wrong_type(key, "zset")
  if wrong then
    return {"MALFORMED", key, wrong}
  end
end
local prefix, format = ARGV[3], ARGV[2]
local ping_timeout, steal_delay = tonumber(ARGV[4]), tonumber(ARGV[5])
local takeable, marked, malformed, visited = dgs_sweep(KEYS[1], prefix, format, now,
  ping_timeout, steal_delay)

local running, per_owner, stale = {}, {}, {}
local function add_running(schedule, owner)
  table.insert(running, schedule)
  per_owner[owner] = (per_owner[owner] or 0) + 1
end
for i = 1, #malformed, 2 do
  table.insert(running, malformed[i])
end
for i = 1, #visited, 3 do
  local schedule, owner, state = visited[i], visited[i + 1], visited[i + 2]
  if state ~= "live" then
    stale[owner] = true
  end
  if state ~= "takeable" then
    add_running(schedule, owner)
  end
end

local fresh = redis.call("ZRANGEBYSCORE", KEYS[1], dgs_int(now - ping_timeout), "+inf")
for _, schedule in ipairs(fresh) do
  local key = prefix .. schedule
  local got = redis.pcall("HMGET", key, "format", "owner_name")
  if got["err"] then
    local reason = dgs_wrong_type(key, "hash") or got["err"]
    table.insert(malformed, schedule)
    table.insert(malformed, reason)
    table.insert(running, schedule)
  elseif got[1] == false and got[2] == false then
    -- gone without its index entry (not by our scripts): not running; the
    -- sweep removes the entry once its score is older than ping_timeout
  elseif got[1] ~= format then
    table.insert(malformed, schedule)
    table.insert(malformed, "format version " .. tostring(got[1]) .. ", expected " .. format)
    table.insert(running, schedule)
  else
    add_running(schedule, got[2] or "")
  end
end

local owners, stale_owners = {}, {}
for owner, count in pairs(per_owner) do
  table.insert(owners, owner)
  table.insert(owners, count)
end
for owner, _ in pairs(stale) do
  table.insert(stale_owners, owner)
end

local dispatch_count = redis.call("ZCARD", KEYS[2])
local dispatch_names = {}
if ARGV[6] == "" or tonumber(ARGV[6]) ~= dispatch_count then
  dispatch_names = redis.call("ZRANGE", KEYS[2], 0, -1)
end
return {now, takeable, marked, malformed, running, owners, stale_owners, dispatch_count,
  dispatch_names}
