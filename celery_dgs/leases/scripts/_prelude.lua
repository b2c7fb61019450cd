-- _prelude.lua: helpers prepended to every script in this directory (see
-- celery_dgs.connection.ScriptSet). Needs Redis >= 5 (writes after TIME are
-- replicated as effects).
--
-- Times are integer milliseconds since the epoch from the server's TIME.
-- A non-empty `override` (tests and the simulator inject their own clock)
-- replaces TIME; production code always passes "".

local function dgs_int(n)
  return string.format("%d", n)
end

local function dgs_now(override)
  if override ~= nil and override ~= "" then
    return tonumber(override)
  end
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The type of `key`, or an error string when it is neither absent nor `kind`.
local function dgs_wrong_type(key, kind)
  local found = redis.call("TYPE", key)["ok"]
  if found ~= "none" and found ~= kind then
    return "holds a " .. found .. ", not a " .. kind
  end
  return nil
end

-- Read a hash written by celery-dgs. Returns map, flat, err:
--   absent key       -> nil, nil, nil
--   foreign data     -> nil, nil, "what is wrong"
--   our hash         -> {field = value}, {f1, v1, f2, v2, ...}, nil
local function dgs_read(key, format)
  local wrong = dgs_wrong_type(key, "hash")
  if wrong then
    return nil, nil, wrong
  end
  local flat = redis.call("HGETALL", key)
  if #flat == 0 then
    return nil, nil, nil
  end
  local map = {}
  for i = 1, #flat, 2 do
    map[flat[i]] = flat[i + 1]
  end
  if map["format"] ~= format then
    return nil, nil, "format version " .. tostring(map["format"]) .. ", expected " .. format
  end
  return map, flat, nil
end

-- Which leases exist, or who owns one, changed (granted, taken over, released,
-- dropped): bump the lease generation that beat_view.lua compares, so beat
-- re-reads the owners only after a change. Key: the lease index's name ..
-- ":gen" (KeySpace.lease_generation()). A new counter starts at the server's
-- time in microseconds, so a counter lost with the data does not count up to
-- a value a beat remembers. Foreign data there is left alone (beat then reads
-- every lease each round).
local function dgs_leases_changed(index)
  local gen = index .. ":gen"
  if redis.call("EXISTS", gen) == 0 then
    local t = redis.call("TIME")
    redis.call("SET", gen, t[1] .. string.format("%06d", tonumber(t[2])))
  end
  redis.pcall("INCR", gen)
end

-- The steal sweep (sweep.lua, beat_view.lua). On every lease of the index whose
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

-- The restart epoch: when this Redis server was first seen by a celery-dgs
-- script (acquire, or beat's round). `epoch_key` holds {run_id, since}; a
-- server with another run_id (a restart, a failover), or no epoch at all (the
-- data was lost with it), starts a new epoch at `now`. `run_id` overrides the
-- server's (tests); "" reads INFO server. Returns `since` (ms).
local function dgs_epoch_since(epoch_key, run_id, now)
  if run_id == "" then
    run_id = string.match(redis.call("INFO", "server"), "run_id:(%x+)") or "unknown"
  end
  local epoch = redis.call("HMGET", epoch_key, "run_id", "since")
  local since = tonumber(epoch[2] or "")
  if epoch[1] ~= run_id or not since then
    since = now
    redis.call("HSET", epoch_key, "run_id", run_id, "since", dgs_int(now))
  end
  return since
end

-- The next fencing token of `counter_key`: INCR, raised to floor + 1 when the
-- counter is not above `floor` (a durable floor kept outside Redis, so a
-- token never repeats or goes down after Redis lost its data). Returns
-- token, nil or nil, err (the counter holds something INCR refuses).
local function dgs_next_token(counter_key, floor)
  local incr = redis.pcall("INCR", counter_key)
  if type(incr) == "table" and incr["err"] then
    return nil, incr["err"]
  end
  local token = incr
  if token <= floor then
    token = floor + 1
    redis.call("SET", counter_key, dgs_int(token))
  end
  return token, nil
end
