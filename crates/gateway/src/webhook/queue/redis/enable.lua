-- Re-enable a subscriber and send its parked lanes back to the stream.
-- KEYS[1] the webhook key prefix; ARGV subscriber
local wh = KEYS[1]
redis.call('HDEL', wh .. 'disabled', ARGV[1])
local parked = wh .. 'parked:' .. ARGV[1]
local tasks = redis.call('SMEMBERS', parked)
for _, t in ipairs(tasks) do
  redis.call('XADD', wh .. 'stream', '*', 's', ARGV[1], 't', t, 'a', '0')
end
redis.call('DEL', parked)
return #tasks
