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

-- The members of `index` changed: bump its generation, `index` .. ":gen", that
-- beat_view.lua returns, so beat re-reads only after a change. For the lease
-- index (KeySpace.lease_generation()): a lease granted, taken over, released
-- or dropped; for the worker index
-- (KeySpace.worker_generation()): a worker registered, deregistered or
-- expired. A new counter starts at the server's time in microseconds, so a
-- counter lost with the data does not count up to a value a beat remembers.
-- Foreign data there is left alone (beat then reads every lease, or every
-- worker, each round).
local function dgs_index_changed(index)
  local gen = index .. ":gen"
  if redis.call("EXISTS", gen) == 0 then
    local t = redis.call("TIME")
    redis.call("SET", gen, t[1] .. string.format("%06d", tonumber(t[2])))
  end
  redis.pcall("INCR", gen)
end

-- The lease index changed (see dgs_index_changed).
local function dgs_leases_changed(index)
  dgs_index_changed(index)
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

-- Signal the leading beat that a slot is free (celery_dgs/wake.py): push to
-- the wake list, keep at most `max_signals`, expire it `ttl_ms` after this push.
-- The steal protocol's step for a lease held by another owner (acquire.lua,
-- reclaim.lua): "LIVE" while it was pinged within ping_timeout_ms and no
-- steal is marked; past that, a steal is marked at now ("PENDING": the owner
-- may still ping within steal_delay_ms, which clears the mark); "TAKEABLE"
-- once the mark is older than steal_delay_ms. nil, error for a malformed ping.
local function dgs_steal_step(key, lease, now, ping_timeout_ms, steal_delay_ms)
  local last_ping = tonumber(lease["last_ping_at"])
  if not last_ping then
    return nil, "last_ping_at is not a number"
  end
  local steal = tonumber(lease["steal_start_at"] or "")
  if not steal then
    if now - last_ping <= ping_timeout_ms then
      return "LIVE"
    end
    steal = now
    redis.call("HSET", key, "steal_start_at", dgs_int(now))
  end
  if now - steal <= steal_delay_ms then
    return "PENDING"
  end
  return "TAKEABLE"
end

local function dgs_wake(key, max_signals, ttl_ms)
  if dgs_wrong_type(key, "list") then
    return
  end
  redis.call("LPUSH", key, "1")
  redis.call("LTRIM", key, 0, tonumber(max_signals) - 1)
  redis.call("PEXPIRE", key, tonumber(ttl_ms))
end
