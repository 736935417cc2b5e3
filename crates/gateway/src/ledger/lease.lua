-- The reconciler's lease on one quiet task, atomic in Redis: one replica checks a task at a time.
-- A task is offered (ledger::TaskLedger::quiet) while its score in its agent's quiet index is
-- before `before_ms`; taking it moves the score on by the backoff, so no replica is offered it
-- again until then. apply.lua resets both on every accepted change.
--
-- KEYS[1] the task hash, KEYS[2] the agent's quiet index ({part}quiet:{agent}), one partition.
-- ARGV    task_id, before_ms, now_ms, after_ms, floor_ms, max_backoff_ms
-- Returns 1 if taken, 0 if not (changed, checked by another replica, or gone).
-- The delay is ledger::next_look's: after_ms doubled per earlier check, at most max_backoff_ms,
-- at least floor_ms.

local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score then return 0 end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 0
end
if tonumber(score) >= tonumber(ARGV[2]) then return 0 end
local n = redis.call('HINCRBY', KEYS[1], 'rc_n', 1)
local after, floor, cap = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local delay = after * (2 ^ math.min(n - 1, 20))
if delay > cap then delay = cap end
if delay < floor then delay = floor end
redis.call('ZADD', KEYS[2], tonumber(ARGV[3]) + delay - after, ARGV[1])
return 1
