-- A task's A2A push configs in Redis (ledger/redis/push.rs), atomic with the task they belong
-- to: a config is stored only beside a recorded task, and expires with it.
--
-- KEYS[1] the task hash, KEYS[2] its push hash (config id -> stored config; fields starting
-- with '~' are the gateway's own: '~token', the token the agent sends with its pushes)
-- ARGV[1] 'put' | 'del' | 'token'
--   put:   ARGV[2] id, ARGV[3] config, ARGV[4] max configs -> 'created' | 'replaced' | 'full' | 'notask'
--   del:   ARGV[2] id -> 1 if it was there, else 0
--   token: ARGV[2] a fresh token ('' to only read) -> the standing token, or '' (none, or no task)
local function pttl()
  return redis.call('PTTL', KEYS[1])
end
local op = ARGV[1]
if op == 'put' then
  local ttl = pttl()
  if ttl == -2 then return 'notask' end
  if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then
    redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
    return 'replaced'
  end
  local n = redis.call('HLEN', KEYS[2]) - redis.call('HEXISTS', KEYS[2], '~token')
  if n >= tonumber(ARGV[4]) then return 'full' end
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
  return 'created'
elseif op == 'del' then
  return redis.call('HDEL', KEYS[2], ARGV[2])
else
  local standing = redis.call('HGET', KEYS[2], '~token')
  if standing then return standing end
  if ARGV[2] == '' then return '' end
  local ttl = pttl()
  if ttl == -2 then return '' end
  redis.call('HSET', KEYS[2], '~token', ARGV[2])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
  return ARGV[2]
end
