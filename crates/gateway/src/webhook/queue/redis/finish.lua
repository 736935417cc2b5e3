-- End a worker's hold on a lane token, atomically. Only the consumer the token is pending for
-- may end it (XACK alone does not check: a worker presumed dead, whose token was taken over,
-- would otherwise still finish it), and the lane's first message is dropped only if it is the
-- one the worker delivered, so a slow worker and the one that took over from it can never
-- drop two messages for one delivery.
--
-- KEYS[1] the webhook key prefix ({p}wh:)
-- ARGV    mode (delivered|retry|dead|park), token id, subscriber, task, msg_id, consumer, then
--         retry: due_ms, attempts | dead: meta json, max dead letters | park: reason or ''
-- An empty msg_id means the worker could not read the lane's first entry: an entry that does
-- not parse is then dropped (to the dead letters in 'dead' mode) so the lane cannot spin on it.
-- Returns 'done' or 'stale'.

local wh = KEYS[1]
local mode, token, sub, task, msg = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local stream = wh .. 'stream'
if #redis.call('XPENDING', stream, 'workers', token, token, 1, ARGV[6]) == 0 then
  return 'stale'
end
redis.call('XACK', stream, 'workers', token)
-- XACK alone leaves the entry in the stream: delete it or the stream grows forever.
redis.call('XDEL', stream, token)
local lane = wh .. 'lane:' .. sub .. ':' .. task

-- A share counter down by `by`; gone at zero, so the hashes hold only clients with a share.
local function down(hash, client, by)
  if redis.call('HINCRBY', wh .. hash, client, -by) <= 0 then redis.call('HDEL', wh .. hash, client) end
end

-- Entries are "enqueued_ms \n msg_id \n payload". The popped entry is uncounted: from the
-- queue's messages and bytes, and from its client's share if the lane is a push config's
-- (see apply.lua); returns it and that client.
local function pop_head()
  local head = redis.call('LINDEX', lane, 0)
  if not head then return nil end
  local a = string.find(head, '\n', 1, true)
  local b = a and string.find(head, '\n', a + 1, true)
  if (b and string.sub(head, a + 1, b - 1) == msg) or (msg == '' and not b) then
    redis.call('LPOP', lane)
    redis.call('DECR', wh .. 'queued')
    -- Below zero only for entries queued before bytes were counted: never less than none.
    if redis.call('DECRBY', wh .. 'qbytes', #head) < 0 then redis.call('SET', wh .. 'qbytes', 0) end
    local field = sub .. '\n' .. task
    local client = redis.call('HGET', wh .. 'owners', field)
    if client then
      down('cq', client, 1)
      down('cb', client, #head)
      if redis.call('LLEN', lane) == 0 then redis.call('HDEL', wh .. 'owners', field) end
    end
    return head, client
  end
  return nil
end

local function pass_on()
  if redis.call('LLEN', lane) > 0 then
    redis.call('XADD', stream, '*', 's', sub, 't', task, 'a', '0')
  end
end

if mode == 'delivered' then
  pop_head()
  pass_on()
elseif mode == 'retry' then
  redis.call('ZADD', wh .. 'retry', ARGV[7], ARGV[8] .. '\t' .. sub .. '\t' .. task)
elseif mode == 'dead' then
  local head, client = pop_head()
  if head then
    -- A push delivery's letter names its client, which a redrive counts it against again.
    local meta = ARGV[7]
    if client then meta = string.sub(meta, 1, -2) .. ',"client":' .. cjson.encode(client) .. '}' end
    redis.call('LPUSH', wh .. 'dead', meta .. '\n' .. head)
    redis.call('LTRIM', wh .. 'dead', 0, tonumber(ARGV[8]) - 1)
  end
  pass_on()
elseif mode == 'park' then
  if ARGV[7] ~= '' then redis.call('HSET', wh .. 'disabled', sub, ARGV[7]) end
  -- Enabled again since the worker looked: carry on instead of parking out of reach.
  if redis.call('HEXISTS', wh .. 'disabled', sub) == 1 then
    redis.call('SADD', wh .. 'parked:' .. sub, task)
  else
    redis.call('XADD', stream, '*', 's', sub, 't', task, 'a', '0')
  end
end
return 'done'
