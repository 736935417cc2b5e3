-- A blocking message's send in Redis (ledger/redis/sends.rs): the gateway's push config given to
-- an agent inline, held until the agent's first push names the task the message made.
--
-- KEYS[1] the send's hash ({p}send:{id}; one key, in no partition): 'entry' (the token, the
-- owner, the client's config), 'task' once bound.
-- ARGV[1] 'put' | 'bind' | 'end'
--   put:  ARGV[2] entry, ARGV[3] ttl ms -> 1
--   bind: ARGV[2] task id -> {entry, bound task id} (the first binding wins), or false for a
--         send unknown, ended or expired
--   end:  -> 1 (the send is forgotten)
local op = ARGV[1]
if op == 'put' then
  redis.call('HSET', KEYS[1], 'entry', ARGV[2])
  redis.call('HDEL', KEYS[1], 'task')
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
elseif op == 'bind' then
  local entry = redis.call('HGET', KEYS[1], 'entry')
  if not entry then return false end
  redis.call('HSETNX', KEYS[1], 'task', ARGV[2])
  return { entry, redis.call('HGET', KEYS[1], 'task') }
else
  redis.call('DEL', KEYS[1])
  return 1
end
