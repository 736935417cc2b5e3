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
return 1
