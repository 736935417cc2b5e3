-- Put one dead letter back at the end of its lane. LREM makes it idempotent: of two admins
-- redriving the same letter, one moves it and the other gets 0.
--
-- KEYS[1] the webhook key prefix; ARGV the dead-letter item, subscriber, task
local wh = KEYS[1]
-- From the tail, where the oldest letters (the ones redriven first) are.
if redis.call('LREM', wh .. 'dead', -1, ARGV[1]) == 0 then return 0 end
local nl = string.find(ARGV[1], '\n', 1, true)
local entry = string.sub(ARGV[1], nl + 1)
local lane = wh .. 'lane:' .. ARGV[2] .. ':' .. ARGV[3]
if redis.call('RPUSH', lane, entry) == 1 then
  redis.call('XADD', wh .. 'stream', '*', 's', ARGV[2], 't', ARGV[3], 'a', '0')
end
redis.call('INCR', wh .. 'queued')
redis.call('INCRBY', wh .. 'qbytes', #entry)
-- A push delivery counts against its client's share again (finish.lua wrote it in the letter).
local ok, meta = pcall(cjson.decode, string.sub(ARGV[1], 1, nl - 1))
if ok and type(meta) == 'table' and type(meta.client) == 'string' then
  redis.call('HSET', wh .. 'owners', ARGV[2] .. '\n' .. ARGV[3], meta.client)
  redis.call('HINCRBY', wh .. 'cq', meta.client, 1)
  redis.call('HINCRBY', wh .. 'cb', meta.client, #entry)
end
return 1
