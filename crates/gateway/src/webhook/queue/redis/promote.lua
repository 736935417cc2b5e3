-- Move lanes whose retry is due from the retry set back to the stream, in one step: a member is
-- removed exactly when its token is re-added, so two replicas running this at once can neither
-- lose a lane nor add its token twice.
--
-- KEYS[1] the webhook key prefix; ARGV now_ms, max. Members are "attempts \t sub \t task".
local wh = KEYS[1]
local due = redis.call('ZRANGEBYSCORE', wh .. 'retry', '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, m in ipairs(due) do
  redis.call('ZREM', wh .. 'retry', m)
  local a, s, t = string.match(m, '^(%d+)\t([^\t]+)\t(.*)$')
  if a then
    redis.call('XADD', wh .. 'stream', '*', 's', s, 't', t, 'a', a)
  end
end
return #due
