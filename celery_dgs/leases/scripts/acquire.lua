-- acquire.lua: take a schedule's lease (fresh, or by take-over after a steal).
--
-- KEYS[1] lease hash          KEYS[2] token counter     KEYS[3] lease index (zset)
-- KEYS[4] dispatch record     KEYS[5] dispatch index (zset)
-- KEYS[6] epoch hash: {run_id, since} of the Redis server last seen here
-- ARGV[1] now override ms or ""     ARGV[2] lease format version
-- ARGV[3] schedule                  ARGV[4] owner_node   ARGV[5] owner_name
-- ARGV[6] owner_tag                 ARGV[7] dispatch_id, "" for an ad-hoc run
-- ARGV[8] min_token (durable floor) ARGV[9] ping_timeout ms  ARGV[10] steal_delay ms
-- ARGV[11] dispatch record format version
-- ARGV[12] restart grace ms (ping_timeout + steal_delay in production)
-- ARGV[13] run_id override or "" (tests; production reads INFO server)
--
-- Order of checks:
--   1. the lease is already this owner_tag's  -> GRANTED again (idempotent retry)
--   2. dispatch_id given and the dispatch record is absent or for another
--      dispatch                               -> STALE_DISPATCH (nothing written)
--   3. a lease exists: its last ping is at most ping_timeout old and no steal
--      is marked                              -> HELD
--      ping older than ping_timeout, no steal -> mark steal_start_at = now
--      now - steal_start_at <= steal_delay    -> STEAL_PENDING
--      otherwise                              -> take over
--   4. restart grace: when the server's run_id is not the one in the epoch
--      hash (a restart, a failover, or the data was lost with the hash itself),
--      the epoch is reset to {run_id, now} (beat's beat_view.lua does the same
--      each round, so the grace starts at beat's first round after a restart
--      at the latest). While now - since < grace, a
--      schedule whose token counter is below min_token (this server lost a
--      grant the store recorded) gets RECOVERING: a lease lost with the data
--      may still have a live owner, who stops at its next ping (NOT_OWNER) or
--      fences itself before ping_timeout. A grant lost before the store
--      recorded it needs no wait: the store refuses the second start of a token.
--   5. grant: token = max(INCR, min_token + 1); a fresh hash; index updated;
--      the matching dispatch record is deleted (the dispatch has started);
--      the lease generation is bumped (_prelude.lua: dgs_leases_changed).
--
-- Returns:
--   {"GRANTED", now, token, started_at, previous_flat, renewed}
--        previous_flat: the lease taken over ({} if none); renewed: 1 for a retry
--        by the owner_tag that already holds the lease, and then token and
--        started_at are 0 and previous_flat is the caller's own lease
--   {"HELD", now, holder_flat}
--   {"STEAL_PENDING", now, holder_flat}
--   {"STALE_DISPATCH", now, current_dispatch_id or ""}
--   {"RECOVERING", now, grace_ends_at}
--   {"MALFORMED", key, reason}

local now = dgs_now(ARGV[1])
local schedule, tag, dispatch_id = ARGV[3], ARGV[6], ARGV[7]

for _, pair in ipairs({{KEYS[2], "string"}, {KEYS[3], "zset"}, {KEYS[5], "zset"},
                       {KEYS[6], "hash"}}) do
  local wrong = dgs_wrong_type(pair[1], pair[2])
  if wrong then
    return {"MALFORMED", pair[1], wrong}
  end
end

local lease, lease_flat, err = dgs_read(KEYS[1], ARGV[2])
if err then
  return {"MALFORMED", KEYS[1], err}
end

if lease and lease["owner_tag"] == tag then
  redis.call("HSET", KEYS[1], "last_ping_at", dgs_int(now))
  redis.call("HDEL", KEYS[1], "steal_start_at")
  redis.call("ZADD", KEYS[3], dgs_int(now), schedule)
  return {"GRANTED", now, 0, 0, redis.call("HGETALL", KEYS[1]), 1}
end

if dispatch_id ~= "" then
  local record, _, derr = dgs_read(KEYS[4], ARGV[11])
  if derr then
    return {"MALFORMED", KEYS[4], derr}
  end
  if not record or record["dispatch_id"] ~= dispatch_id then
    return {"STALE_DISPATCH", now, record and record["dispatch_id"] or ""}
  end
end

local previous = {}
if lease then
  local step, step_err = dgs_steal_step(KEYS[1], lease, now, tonumber(ARGV[9]), tonumber(ARGV[10]))
  if step_err then
    return {"MALFORMED", KEYS[1], step_err}
  end
  if step == "LIVE" then
    return {"HELD", now, lease_flat}
  end
  if step == "PENDING" then
    return {"STEAL_PENDING", now, redis.call("HGETALL", KEYS[1])}
  end
  previous = lease_flat
end

local since = dgs_epoch_since(KEYS[6], ARGV[13], now)
local grace = tonumber(ARGV[12])
local counter = tonumber(redis.call("GET", KEYS[2]) or "0") or 0
if counter < tonumber(ARGV[8]) and now - since < grace then
  return {"RECOVERING", now, dgs_int(since + grace)}
end

local token, token_err = dgs_next_token(KEYS[2], tonumber(ARGV[8]))
if token_err then
  return {"MALFORMED", KEYS[2], token_err}
end

redis.call("DEL", KEYS[1])
redis.call("HSET", KEYS[1],
  "format", ARGV[2], "schedule", schedule,
  "owner_node", ARGV[4], "owner_name", ARGV[5], "owner_tag", tag,
  "started_at", dgs_int(now), "last_ping_at", dgs_int(now),
  "token", dgs_int(token), "progress", "", "cancel_requested", "0",
  "dispatch_id", dispatch_id)
redis.call("ZADD", KEYS[3], dgs_int(now), schedule)
dgs_leases_changed(KEYS[3])
if dispatch_id ~= "" then
  redis.call("DEL", KEYS[4])
  redis.call("ZREM", KEYS[5], schedule)
end
return {"GRANTED", now, token, now, previous, 0}
