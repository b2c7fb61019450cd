-- leader_elect.lua: take or renew a leader lease (one per role, e.g. the
-- active beat when two or more run). Called by every candidate on each check.
--
-- KEYS[1] leader hash        KEYS[2] leader token counter (INCR, never deleted)
-- ARGV[1] now override ms or ""     ARGV[2] leader format version
-- ARGV[3] owner_tag (unique per candidate process)
-- ARGV[4] owner_node (host name)    ARGV[5] owner_pid
-- ARGV[6] timeout ms: a leader whose last ping is older may be replaced
-- ARGV[7] min_token: the new token is larger (the highest token the caller saw)
-- ARGV[8] store: the id of the schedule store the candidate serves, or ""
-- ARGV[9] gone_tag: an owner tag the caller knows has no process any more
--         (its own host, its pid ended), or ""
-- ARGV[10] gone_after ms: the least age of gone_tag's last ping for rule 2a
-- ARGV[11] scope: the candidate's process scope (host boot, pid namespace), or ""
--
-- Rules:
--   1. the hash is this owner_tag's       -> renewed: last_ping_at = now
--      (even after the timeout: nobody replaced it, so it still leads)
--   2a. the holder is gone_tag and pinged more than gone_after ago
--                                         -> granted, as in 3
--   2. another owner pinged at most timeout ago (now - last_ping_at <= timeout)
--                                         -> FOLLOWER, nothing written
--   3. absent, or another owner's ping is older than timeout
--                                         -> granted: token = max(INCR, min_token + 1),
--                                            a fresh hash, since = now
--
-- Returns:
--   {"LEADER", now, token, since, renewed (0|1), previous_flat}
--        previous_flat: the expired leader replaced ({} if none or renewed)
--   {"FOLLOWER", now, holder_flat}
--   {"MALFORMED", key, reason}

local now = dgs_now(ARGV[1])
local tag = ARGV[3]

local wrong = dgs_wrong_type(KEYS[2], "string")
if wrong then
  return {"MALFORMED", KEYS[2], wrong}
end
local leader, leader_flat, err = dgs_read(KEYS[1], ARGV[2])
if err then
  return {"MALFORMED", KEYS[1], err}
end

local previous = {}
if leader then
  local last_ping = tonumber(leader["last_ping_at"])
  local token = tonumber(leader["token"])
  local since = tonumber(leader["since"])
  if not last_ping or not token or not since then
    return {"MALFORMED", KEYS[1], "last_ping_at, token or since is not a number"}
  end
  if leader["owner_tag"] == tag then
    redis.call("HSET", KEYS[1], "last_ping_at", dgs_int(now))
    return {"LEADER", now, token, since, 1, {}}
  end
  local gone = ARGV[9] ~= nil and ARGV[9] ~= "" and leader["owner_tag"] == ARGV[9]
    and now - last_ping > tonumber(ARGV[10])
  if not gone and now - last_ping <= tonumber(ARGV[6]) then
    return {"FOLLOWER", now, leader_flat}
  end
  previous = leader_flat
end

local token, token_err = dgs_next_token(KEYS[2], tonumber(ARGV[7]))
if token_err then
  return {"MALFORMED", KEYS[2], token_err}
end

redis.call("DEL", KEYS[1])
redis.call("HSET", KEYS[1],
  "format", ARGV[2], "owner_tag", tag, "owner_node", ARGV[4], "owner_pid", ARGV[5],
  "since", dgs_int(now), "last_ping_at", dgs_int(now), "token", dgs_int(token),
  "store", ARGV[8] or "", "scope", ARGV[11] or "")
return {"LEADER", now, token, now, 0, previous}
