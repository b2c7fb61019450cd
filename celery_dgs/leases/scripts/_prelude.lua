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

-- The restart epoch: when this Redis server was first seen by a celery-dgs
-- script (acquire, or beat's sweep). `epoch_key` holds {run_id, since}; a
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
