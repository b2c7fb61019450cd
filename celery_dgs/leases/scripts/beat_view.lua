-- beat_view.lua: everything beat's dispatch round reads from Redis about leases
-- and dispatch records, in one call and in a compact form. It sweeps (dgs_sweep
-- below: marks steals, finds takeable leases) and, instead of every lease
-- hash, returns what placement needs. The owner of every lease is sent
-- only when the lease generation (bumped by acquire/release/sweep, see
-- dgs_leases_changed) is not the one the caller already has; otherwise a round
-- costs O(stale leases), not O(leases).
--
-- KEYS[1] lease index (zset: schedule -> last_ping_at ms)
-- KEYS[2] dispatch index (zset: schedule -> expires_at ms)
-- KEYS[3] lease generation (string; KeySpace.lease_generation(), = KEYS[1] .. ":gen")
-- KEYS[4] restart epoch hash {run_id, since} (see dgs_epoch_since, acquire.lua):
--   noted each round, so after a Redis restart the grace starts at beat's
--   first round, not at the first acquire (which waits for a worker's broker
--   connection to come back); left alone if it is foreign data
-- KEYS[5] worker generation (KeySpace.worker_generation()): returned, so beat
--   re-reads the live workers only after a change
-- ARGV[1] now override ms or ""   ARGV[2] lease format version
-- ARGV[3] lease key prefix (KeySpace.lease_prefix(); lease key = prefix .. schedule)
-- ARGV[4] ping_timeout ms         ARGV[5] steal_delay ms
-- ARGV[6] how many dispatch records the caller expects in the dispatch index,
--   or "": the index's members are returned only when its ZCARD differs
--   (or ARGV[6] is "")
-- ARGV[7] the lease generation the caller holds the owners of, or "": the
--   owners are returned only when the generation differs (or ARGV[7] is "", or
--   the generation key is absent or foreign data)
-- ARGV[8] run_id override or "" (tests; production reads INFO server)
--
-- Returns {now, takeable, marked, malformed, stale, generation, owners,
--          dispatch_count, dispatch_names, worker_generation}:
--   takeable, marked  lists of schedules (see dgs_sweep)
--   malformed     flat {schedule, reason, ...} of the leases read this call
--                 whose data is foreign
--   stale         flat {schedule, owner_name, state, last_ping_at, ...} of the
--                 leases not pinged within ping_timeout, state "stale" (steal
--                 pending) or "takeable" (the lease is no longer running)
--   generation    the lease generation ("" if absent or foreign data)
--   owners        when sent: flat {schedule, owner_name, last_ping_at, ...} of
--                 every lease in the index (last_ping_at: its index score, ms);
--                 owner_name "" for foreign data under the lease
--                 key (also in malformed): it counts as running, nothing is
--                 dispatched for it until an operator removes it. When not
--                 sent: {} and the generation equals ARGV[7].
--   dispatch_count  ZCARD of the dispatch index
--   dispatch_names  its members when read (see ARGV[6]), else {}
--   worker_generation  KEYS[5]'s value ("" if absent or foreign data)
-- or {"MALFORMED", key, reason} when an index itself is foreign data.

-- The steal sweep. On every lease of the index whose
-- score (last ping, ms) is older than ping_timeout: mark steal_start_at if not
-- marked; a lease whose mark is older than steal_delay is takeable. Index
-- entries whose lease is gone are removed.
-- Returns takeable, marked (lists of schedules), malformed (flat {schedule,
-- reason, ...}) and visited (flat {schedule, owner_name, state, last_ping_at,
-- ...}, state "live" | "stale" | "takeable") for the leases read without error.
local function dgs_sweep(index, prefix, format, now, ping_timeout, steal_delay)
  local stale = redis.call("ZRANGEBYSCORE", index, "-inf", "(" .. dgs_int(now - ping_timeout))
  local takeable, marked, malformed, visited = {}, {}, {}, {}
  for _, schedule in ipairs(stale) do
    local key = prefix .. schedule
    local lease, _, err = dgs_read(key, format)
    local last_ping = lease and tonumber(lease["last_ping_at"])
    if err then
      table.insert(malformed, schedule)
      table.insert(malformed, err)
    elseif not lease then
      redis.call("ZREM", index, schedule)
      dgs_leases_changed(index)
    elseif not last_ping then
      table.insert(malformed, schedule)
      table.insert(malformed, "last_ping_at is not a number")
    else
      local state = "live"
      if now - last_ping > ping_timeout then
        state = "stale"
        local steal = tonumber(lease["steal_start_at"] or "")
        if not steal then
          redis.call("HSET", key, "steal_start_at", dgs_int(now))
          table.insert(marked, schedule)
        elseif now - steal > steal_delay then
          state = "takeable"
          table.insert(takeable, schedule)
        end
      end
      table.insert(visited, schedule)
      table.insert(visited, lease["owner_name"] or "")
      table.insert(visited, state)
      table.insert(visited, last_ping)
    end
  end
  return takeable, marked, malformed, visited
end

local now = dgs_now(ARGV[1])
for _, key in ipairs({KEYS[1], KEYS[2]}) do
  local wrong = dgs_wrong_type(key, "zset")
  if wrong then
    return {"MALFORMED", key, wrong}
  end
end
if not dgs_wrong_type(KEYS[4], "hash") then
  dgs_epoch_since(KEYS[4], ARGV[8] or "", now)
end
local prefix, format = ARGV[3], ARGV[2]
local ping_timeout, steal_delay = tonumber(ARGV[4]), tonumber(ARGV[5])
local takeable, marked, malformed, visited = dgs_sweep(KEYS[1], prefix, format, now,
  ping_timeout, steal_delay)

local stale = {}
for i = 1, #visited, 4 do
  if visited[i + 2] ~= "live" then
    for j = 0, 3 do
      table.insert(stale, visited[i + j])
    end
  end
end

local function dgs_generation(key)
  local got = redis.pcall("GET", key)
  if type(got) == "string" and tonumber(got) then
    return got
  end
  return ""
end
local generation = dgs_generation(KEYS[3])

local owners = {}
if ARGV[7] == "" or generation == "" or generation ~= ARGV[7] then
  local bad = {}
  for i = 1, #malformed, 2 do
    bad[malformed[i]] = true
  end
  local scored = redis.call("ZRANGE", KEYS[1], 0, -1, "WITHSCORES")
  for i = 1, #scored - 1, 2 do
    local schedule = scored[i]
    local key = prefix .. schedule
    local got = redis.pcall("HMGET", key, "format", "owner_name")
    local owner = nil
    if bad[schedule] then
      owner = ""
    elseif got["err"] then
      table.insert(malformed, schedule)
      table.insert(malformed, dgs_wrong_type(key, "hash") or got["err"])
      owner = ""
    elseif got[1] == false and got[2] == false then
      -- gone without its index entry (not by our scripts): not running; the
      -- sweep removes the entry once its score is older than ping_timeout
    elseif got[1] ~= format then
      table.insert(malformed, schedule)
      table.insert(malformed, "format version " .. tostring(got[1]) .. ", expected " .. format)
      owner = ""
    else
      owner = got[2] or ""
    end
    if owner then
      table.insert(owners, schedule)
      table.insert(owners, owner)
      table.insert(owners, scored[i + 1])
    end
  end
end

local dispatch_count = redis.call("ZCARD", KEYS[2])
local dispatch_names = {}
if ARGV[6] == "" or tonumber(ARGV[6]) ~= dispatch_count then
  dispatch_names = redis.call("ZRANGE", KEYS[2], 0, -1)
end
return {now, takeable, marked, malformed, stale, generation, owners, dispatch_count,
  dispatch_names, dgs_generation(KEYS[5])}
