-- An official A2A context's claim in Redis (ledger/redis/contexts.rs): whose the context is, for
-- how long, and each client's count of claims, in the context's partition (one hash tag).
--
-- KEYS[1] the claim's hash ({part}ctx:{agent}:{context}): owner, holds (messages on their way
--         that hold it), kept (1 once an answer named it or a task was recorded in it), live
--         (live tasks of the owner recorded in it), exp (ms: when it expires while none is live)
-- KEYS[2] the owner's claims in this partition ({part}ctxo:{owner}): a zset, member the
--         claim's key, score its expiry (ms); counted over every partition for max_contexts
-- ARGV[1] 'claim' | 'drop' | 'live'; ARGV[2] the owner; ARGV[3] now (ms)
--   claim: ARGV[4] 'hold' | 'keep', ARGV[5] for how long (ms), ARGV[6] '1' to make a claim
--          that is not there ('0': only look) -> 'claimed' | 'owned' | 'other' | 'absent'
--   drop:  a hold whose message came to nothing, freed unless kept -> 1
--   live:  ARGV[4] '1' a live task recorded in it, '0' one that ended; ARGV[5] how long after
--          the last live task ends it lives (ms); ARGV[6] how long it lives while one is live
--          (ms: the live tasks' own bound) -> 1
local owner, now = ARGV[2], tonumber(ARGV[3])
local c = redis.call('HMGET', KEYS[1], 'owner', 'holds', 'kept', 'live', 'exp')
-- Its owner's claims that expired are dropped from the count as the count is touched.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)

local function expire_at(ms)
  redis.call('HSET', KEYS[1], 'exp', ms)
  redis.call('PEXPIREAT', KEYS[1], ms)
  redis.call('ZADD', KEYS[2], ms, KEYS[1])
  -- The owner's zset lives as long as its latest claim: a client gone leaves none.
  local last = redis.call('ZREVRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if last[2] then redis.call('PEXPIREAT', KEYS[2], math.max(tonumber(last[2]), ms)) end
end

local op = ARGV[1]
if op == 'claim' then
  local until_ms = now + tonumber(ARGV[5])
  if c[1] then
    if c[1] ~= owner then return 'other' end
    if ARGV[4] == 'hold' then
      if c[3] ~= '1' then redis.call('HINCRBY', KEYS[1], 'holds', 1) end
    else
      redis.call('HSET', KEYS[1], 'kept', '1')
    end
    if tonumber(c[4] or '0') == 0 and until_ms > tonumber(c[5] or '0') then expire_at(until_ms) end
    return 'owned'
  end
  if ARGV[6] ~= '1' then return 'absent' end
  local hold = ARGV[4] == 'hold'
  redis.call('HSET', KEYS[1], 'owner', owner, 'holds', hold and 1 or 0, 'kept', hold and '0' or '1', 'live', 0)
  expire_at(until_ms)
  return 'claimed'
elseif op == 'drop' then
  if c[1] ~= owner or c[3] == '1' then return 1 end
  local holds = redis.call('HINCRBY', KEYS[1], 'holds', -1)
  if holds <= 0 and tonumber(c[4] or '0') == 0 then
    redis.call('DEL', KEYS[1])
    redis.call('ZREM', KEYS[2], KEYS[1])
  end
  return 1
else
  if c[1] and c[1] ~= owner then return 1 end
  if not c[1] then
    redis.call('HSET', KEYS[1], 'owner', owner, 'holds', 0, 'kept', '1', 'live', 0, 'exp', now)
  end
  redis.call('HSET', KEYS[1], 'kept', '1')
  if ARGV[4] == '1' then
    redis.call('HINCRBY', KEYS[1], 'live', 1)
    local until_ms = now + tonumber(ARGV[6])
    if until_ms > tonumber(c[5] or '0') then expire_at(until_ms) end
  else
    local live = redis.call('HINCRBY', KEYS[1], 'live', -1)
    if live < 0 then redis.call('HSET', KEYS[1], 'live', 0) end
    if live <= 0 then
      -- The last live task ended: the claim lives its retention after, or longer if it was
      -- kept longer (a live task's horizon is not kept: that was the live task's bound).
      expire_at(now + tonumber(ARGV[5]))
    end
  end
  return 1
end
