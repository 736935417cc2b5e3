-- A task's A2A push configs in Redis (ledger/redis/push.rs), atomic with the task they belong
-- to: a config is stored only beside a recorded task, and expires with it.
--
-- KEYS[1] the task hash, KEYS[2] its push hash (config id -> stored config; fields starting
-- with '~' are the gateway's own: '~token', the token the agent sends with its pushes)
-- ARGV[1] 'put' | 'del' | 'token'
--   put:   ARGV[2] id, ARGV[3] config, ARGV[4] max configs -> 'created' | 'replaced' | 'full' | 'notask'
--   del:   ARGV[2] id -> 1 if it was there, else 0
--   token: ARGV[2] a fresh token ('' to only read) -> the standing token, or '' (none, or no task)
--   now:   ARGV[2] id, ARGV[3] the lane entry's head ("enqueued_ms version \n msg_id \n"),
--          ARGV[4] the queue's bounds (the partition's share, as apply.lua reads them: the task's
--          owner's push deliveries within its share), ARGV[5] the partition's webhook prefix,
--          ARGV[6] the task's ledger key -> 1 when the task as it is now was queued for config
--          id (its lane "~push:{id}"), else 0 (no task, no such config, no room). The webhook
--          keys are named from ARGV: they are the task's partition's, in its slot.
local function pttl()
  return redis.call('PTTL', KEYS[1])
end
local op = ARGV[1]
-- The store's own fields are never a client's config.
if (op == 'put' or op == 'del') and string.sub(ARGV[2], 1, 1) == '~' then return 'notask' end
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
elseif op == 'now' then
  if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 0 then return 0 end
  local task = redis.call('HGET', KEYS[1], 'task')
  if not task then return 0 end
  local wh = ARGV[5]
  local client = redis.call('HGET', KEYS[1], 'owner') or ''
  local maxq, maxb, pc, pcb = string.match(ARGV[4], '^(%d+) (%d+) (%d+) (%d+)$')
  local entry = ARGV[3] .. '{"task":' .. task .. '}'
  local queued = tonumber(redis.call('GET', wh .. 'queued') or '0')
  local qbytes = tonumber(redis.call('GET', wh .. 'qbytes') or '0')
  local cn = tonumber(redis.call('HGET', wh .. 'cq', client) or '0')
  local cb = tonumber(redis.call('HGET', wh .. 'cb', client) or '0')
  if queued + 1 > tonumber(maxq) or qbytes + #entry > tonumber(maxb) or cn + 1 > tonumber(pc)
    or cb + #entry > tonumber(pcb) then
    return 0
  end
  local sub = '~push:' .. ARGV[2]
  if redis.call('RPUSH', wh .. 'lane:' .. sub .. ':' .. ARGV[6], entry) == 1 then
    redis.call('XADD', wh .. 'stream', '*', 's', sub, 't', ARGV[6], 'a', '0')
  end
  redis.call('HSET', wh .. 'owners', sub .. '\n' .. ARGV[6], client)
  redis.call('HINCRBY', wh .. 'cq', client, 1)
  redis.call('HINCRBY', wh .. 'cb', client, #entry)
  redis.call('INCRBY', wh .. 'queued', 1)
  redis.call('INCRBY', wh .. 'qbytes', #entry)
  return 1
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
