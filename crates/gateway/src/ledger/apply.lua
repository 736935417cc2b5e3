-- The ledger's compare-and-set, atomic in Redis: judge the update against the record and store
-- it only if accepted. The rule is protocol::task::judge plus ledger::decide, line for line; a
-- test applies every (recorded, update) combination through both and compares the verdicts.
--
-- KEYS[1] the task hash, KEYS[2] the per-state index prefix (zsets KEYS[2]..STATUS),
-- KEYS[3] the webhook key prefix (lanes, stream, queued counter; see webhook/queue/redis/),
-- KEYS[4] the partition's prefix, for its reconciler index ({part}quiet:{agent}, a zset of the
--         agent's tasks neither final nor INPUT_REQUIRED, score the ms they went quiet; see
--         lease.lua) and its clients' live tasks ({part}live:{owner}, score expiry ms)
-- KEYS[5] the task's A2A push configs (a hash: config id -> stored config; fields starting
--         with '~' are the gateway's own, such as the agent's push token): each accepted change
--         is queued for each config too, on lane "~push:{id}", as the StreamResponse
--         {"task": ...}; the hash expires with the task
-- ARGV    agent, status, updated_ms, task, now_ms, terminal_ttl_ms, live_ttl_ms, task_id,
--         msg_id prefix, timestamp (RFC 3339, always given), the queue's bounds ("queued bytes
--         per_client per_client_bytes", webhook::queue::Bounds::arg), max_dead (both this partition's share), change
--         channel, owner ('' for none), publish command (SPUBLISH on a cluster, PUBLISH on one
--         node), lane entry format version (with the trace context after it, if any: see
--         webhook::queue::entry_version), the task's A2A contextId ('' for none), the task's
--         content digest (task::TaskRef::content, 16 hex digits; '' for none), the replica
--         that answered (host:port; '' for none), subscriber...
-- Every key is in the task's partition (one hash tag): a script may touch one slot only.
-- The owner is the client whose create this answers: recorded if the task has none yet,
-- whatever the verdict (a push may have recorded the task first), except on another agent's
-- task. An owner is never replaced. The replica that holds the task ('rp') likewise.
-- A first sighting or a transition is queued for every subscriber named, in this same step:
-- a change is never recorded without its deliveries, nor delivered without being recorded.
-- The task's push configs hear of those and of every refresh whose content digest differs
-- from the record's field 'cd' (ledger::news); a live task's update in the same state at the
-- same time with other content is a refresh, not a duplicate (ledger::decide).
-- A disabled subscriber's (410 Gone) go straight to the dead letters, to be redriven once it
-- is back: its lanes cannot fill the queue that every other subscriber shares.
-- The queue counts its messages ('queued') and their bytes ('qbytes'), and each client's push
-- deliveries (hashes 'cq' and 'cb', owner -> messages, bytes; 'owners', "lane \n task" -> owner
-- while the lane holds messages, for finish.lua to uncount): a client past its share has its
-- push deliveries of the change left out, never another client's.
-- Every first sighting or transition is also published on the partition's change channel
-- ("agent \n task_id \n STATUS \n owner \n task"), for the live streams of every replica, and
-- every refusal ("agent \n task_id \n ~refused \n reason \n RECORDED OFFERED timestamp
-- recorded_agent"), for
-- the operators' live feed.
-- The listing index (ledger::listing) is kept here too: the task in {part}ls:*:{agent}:{STATUS},
-- once it has an owner in {part}ls:o:{owner}:{agent}:{STATUS}, and an A2A task with a context
-- in {part}ls:c:{agent}:{contextId} (score minus the status timestamp, so ZRANGE's ascending
-- order is newest first, ties by key), and in {part}lsx ("STATUS \n agent \n owner \n
-- contextId \n task_id", score its expiry) so list.lua can drop it from them once the task
-- hash has expired.
-- Returns {verdict, agent, status, updated_ms, task, previous status or '', owner or '', created_ms,
--   push deliveries left out for want of room, replica or ''}: the record after
--   the call (the new one when accepted, with task left empty since the caller has it; the
--   standing one otherwise) and the state it left.

local TERMINAL = { COMPLETED = true, FAILED = true, CANCELLED = true, REJECTED = true }
local agent, status, updated = ARGV[1], ARGV[2], tonumber(ARGV[3])
local rec = redis.call('HMGET', KEYS[1], 'agent', 'status', 'updated_ms', 'task', 'owner', 'created_ms', 'ctx', 'cd', 'rp')
local owner = rec[5] or ''
local claims = ARGV[14] ~= '' and owner == ''
local content, had = ARGV[18], rec[8] or ''
local replica = rec[9] or ''
local pins = ARGV[19] ~= '' and replica == ''
local FIRST_SUB = 20
local created = rec[6] or rec[3] or ARGV[5]

local LS = KEYS[4] .. 'ls:'
-- Out of (or into, with `score` and `expiry`) the listing index.
local function relist(st, ag, ow, cx, id, score, expiry)
  local sets = { LS .. '*:' .. ag .. ':' .. st }
  if ow ~= '' then sets[#sets + 1] = LS .. 'o:' .. ow .. ':' .. ag .. ':' .. st end
  if cx ~= '' then sets[#sets + 1] = LS .. 'c:' .. ag .. ':' .. cx end
  local member = st .. '\n' .. ag .. '\n' .. ow .. '\n' .. cx .. '\n' .. id
  for _, k in ipairs(sets) do
    if score then redis.call('ZADD', k, score, id) else redis.call('ZREM', k, id) end
  end
  if score then redis.call('ZADD', KEYS[4] .. 'lsx', expiry, member)
  else redis.call('ZREM', KEYS[4] .. 'lsx', member) end
  -- A context's set (one per context: as many as conversations) lives no longer than its
  -- latest task: a conversation whose tasks expired leaves no key, listed or not.
  if score and cx ~= '' then
    local k = LS .. 'c:' .. ag .. ':' .. cx
    local left = redis.call('PTTL', k)
    local want = expiry - tonumber(ARGV[5])
    if left < want then redis.call('PEXPIRE', k, math.max(want, 1)) end
  end
end
local function score_of(updated_ms) return string.format('%d', -tonumber(updated_ms)) end

local function reaches(from, to)
  if from == to then return true end
  if TERMINAL[from] then return false end
  return to ~= 'SUBMITTED'
end

local verdict
if not rec[1] then
  verdict = 'new'
elseif rec[1] ~= agent then
  verdict = 'foreign_agent'
else
  local rstatus, rupdated = rec[2], tonumber(rec[3])
  if TERMINAL[rstatus] then
    if rstatus == status and rupdated == updated then verdict = 'duplicate' else verdict = 'terminal' end
  elseif not reaches(rstatus, status) then
    verdict = 'backwards'
  elseif updated < rupdated then
    verdict = 'stale'
  elseif rstatus == status then
    if updated == rupdated and (content == '' or content == had) then verdict = 'duplicate' else verdict = 'refresh' end
  else
    verdict = 'transition'
  end
end

if verdict ~= 'new' and verdict ~= 'transition' and verdict ~= 'refresh' then
  -- Not taken, but where the task lives is known now, if it was not.
  if pins and rec[1] and verdict ~= 'foreign_agent' then
    replica = ARGV[19]
    redis.call('HSET', KEYS[1], 'rp', replica)
  end
  -- Not taken, but the creator's claim on a task without an owner still stands.
  if claims and verdict ~= 'foreign_agent' then
    owner = ARGV[14]
    redis.call('HSET', KEYS[1], 'owner', owner)
    local pttl = redis.call('PTTL', KEYS[1])
    if pttl > 0 then
      relist(rec[2], rec[1], '', rec[7] or '', ARGV[8])
      relist(rec[2], rec[1], owner, rec[7] or '', ARGV[8], score_of(rec[3]), tonumber(ARGV[5]) + pttl)
    end
    if not TERMINAL[rec[2]] then
      redis.call('ZADD', KEYS[4] .. 'live:' .. owner, tonumber(ARGV[5]) + tonumber(ARGV[7]), ARGV[8])
    end
  end
  -- A refusal is news too, for the operators' live feed, published in the step that judged it.
  if verdict ~= 'duplicate' and ARGV[13] ~= '' then
    redis.call(ARGV[15], ARGV[13], agent .. '\n' .. ARGV[8] .. '\n~refused\n' .. verdict .. '\n'
      .. rec[2] .. ' ' .. status .. ' ' .. ARGV[10] .. ' ' .. rec[1])
  end
  return { verdict, rec[1], rec[2], rec[3], rec[4], rec[2] or '', owner, created, 0, replica }
end

local changed = verdict == 'new' or verdict == 'transition'
-- Subscribers hear of status changes; push configs of every change they would read.
local news = changed or (verdict == 'refresh' and content ~= '' and content ~= had)
local wh, nsubs = KEYS[3], 0
if changed then nsubs = #ARGV - FIRST_SUB + 1 end
local pushes = {}
if news and ARGV[9] ~= '' then
  for _, id in ipairs(redis.call('HKEYS', KEYS[5])) do
    if string.sub(id, 1, 1) ~= '~' then pushes[#pushes + 1] = '~push:' .. id end
  end
end
local notify = nsubs > 0 or #pushes > 0
local dropped = 0
-- The client whose push configs these are: the task's owner (the one it gets now, if none).
local client = owner
if claims then client = ARGV[14] end
if notify then
  local maxq, maxb, pc, pcb = string.match(ARGV[11], '^(%d+) (%d+) (%d+) (%d+)$')
  maxq, maxb, pc, pcb = tonumber(maxq), tonumber(maxb), tonumber(pc), tonumber(pcb)
  local queued = tonumber(redis.call('GET', wh .. 'queued') or '0')
  local qbytes = tonumber(redis.call('GET', wh .. 'qbytes') or '0')
  -- A message's bytes: the document and its envelope (the id and head are under 256 bytes).
  local size = #ARGV[4] + 256
  if queued + nsubs > maxq or qbytes + nsubs * size > maxb then
    return { 'queue_full', rec[1] or agent, rec[2] or status, rec[3] or ARGV[3], '', rec[2] or '', owner, created, 0, replica }
  end
  -- Clients' push configs never make a change unrecordable: without room, in the queue or in
  -- the client's share, their deliveries of this change are left out (and counted by the caller).
  if #pushes > 0 then
    local cn = tonumber(redis.call('HGET', wh .. 'cq', client) or '0')
    local cb = tonumber(redis.call('HGET', wh .. 'cb', client) or '0')
    local n = nsubs + #pushes
    if queued + n > maxq or qbytes + n * size > maxb or cn + #pushes > pc
      or cb + #pushes * size > pcb then
      dropped = #pushes
      pushes = {}
    end
  end
end

-- Accepted and room in the queue: the claim is recorded with the change, in the HSET below.
if claims then owner = ARGV[14] end
local now = tonumber(ARGV[5])
local ttl = tonumber(TERMINAL[status] and ARGV[6] or ARGV[7])
redis.call('HSET', KEYS[1], 'agent', agent, 'status', status, 'updated_ms', ARGV[3], 'task', ARGV[4], 'owner', owner,
  'created_ms', created)
if ARGV[17] ~= '' then redis.call('HSET', KEYS[1], 'ctx', ARGV[17]) else redis.call('HDEL', KEYS[1], 'ctx') end
if content ~= '' then redis.call('HSET', KEYS[1], 'cd', content) else redis.call('HDEL', KEYS[1], 'cd') end
if pins then
  replica = ARGV[19]
  redis.call('HSET', KEYS[1], 'rp', replica)
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[5], ttl)
if rec[1] then relist(rec[2], rec[1], rec[5] or '', rec[7] or '', ARGV[8]) end
relist(status, agent, owner, ARGV[17], ARGV[8], score_of(ARGV[3]), now + ttl)
if rec[2] and rec[2] ~= status then
  redis.call('ZREM', KEYS[2] .. rec[2], ARGV[8])
end
redis.call('ZADD', KEYS[2] .. status, now + ttl, ARGV[8])
-- Fresh again for the reconciler (its backoff starts over), or out of its index. Members of
-- tasks that expired while live (quiet since before the live TTL) are trimmed on the way, so
-- the index of an agent whose reconciler is off stays bounded too.
redis.call('HDEL', KEYS[1], 'rc_n')
local quiet = KEYS[4] .. 'quiet:' .. agent
if TERMINAL[status] or status == 'INPUT_REQUIRED' or status == 'AUTH_REQUIRED' then
  redis.call('ZREM', quiet, ARGV[8])
else
  redis.call('ZADD', quiet, now, ARGV[8])
end
redis.call('ZREMRANGEBYSCORE', quiet, '-inf', now - tonumber(ARGV[7]))
-- The listing index of tasks that expired, a few places at each change (sweep.lua, prepended
-- to this script): it shrinks as tasks expire whether or not anyone lists.
sweep_listing(KEYS[4], now, 4)
if owner ~= '' then
  local live = KEYS[4] .. 'live:' .. owner
  if TERMINAL[status] then
    redis.call('ZREM', live, ARGV[8])
  else
    redis.call('ZADD', live, now + ttl, ARGV[8])
    -- Its newest member's expiry (the live ttl is one constant): a client gone leaves none.
    redis.call('PEXPIRE', live, ttl)
  end
  -- Tasks of this client that expired while live.
  redis.call('ZREMRANGEBYSCORE', live, '-inf', now)
end
if notify then
  -- The task's change number makes the message id unique per change.
  local n = redis.call('HINCRBY', KEYS[1], 'changes', 1)
  -- Lane entries are "enqueued_ms version[ trace] \n msg_id \n payload" (webhook::queue::encode_entry);
  -- a lane that was empty gets its token.
  -- An official A2A task (key "{agent}/{id}") says its protocol and agent (webhook::queue::payload).
  local a2a = ''
  if string.find(ARGV[8], '/', 1, true) then a2a = '"protocol":"a2a","agent":"' .. agent .. '",' end
  local entry = ARGV[5] .. ' ' .. ARGV[16] .. '\n' .. ARGV[9] .. '_' .. n .. '\n'
    .. '{"event_type":"task.status.updated",' .. a2a .. '"timestamp":"' .. ARGV[10] .. '","data":' .. ARGV[4] .. '}'
  local queued, bytes = 0, 0
  for i = FIRST_SUB, FIRST_SUB + nsubs - 1 do
    if redis.call('HEXISTS', wh .. 'disabled', ARGV[i]) == 1 then
      local meta = cjson.encode({ subscriber = ARGV[i], task_id = ARGV[8], attempts = 0,
        last_error = 'subscriber disabled', failed_at = ARGV[10] })
      redis.call('LPUSH', wh .. 'dead', meta .. '\n' .. entry)
      redis.call('LTRIM', wh .. 'dead', 0, tonumber(ARGV[12]) - 1)
    else
      queued = queued + 1
      bytes = bytes + #entry
      if redis.call('RPUSH', wh .. 'lane:' .. ARGV[i] .. ':' .. ARGV[8], entry) == 1 then
        redis.call('XADD', wh .. 'stream', '*', 's', ARGV[i], 't', ARGV[8], 'a', '0')
      end
    end
  end
  if #pushes > 0 then
    local body = ARGV[5] .. ' ' .. ARGV[16] .. '\n' .. ARGV[9] .. '_' .. n .. '\n{"task":' .. ARGV[4] .. '}'
    for _, sub in ipairs(pushes) do
      queued = queued + 1
      bytes = bytes + #body
      if redis.call('RPUSH', wh .. 'lane:' .. sub .. ':' .. ARGV[8], body) == 1 then
        redis.call('XADD', wh .. 'stream', '*', 's', sub, 't', ARGV[8], 'a', '0')
      end
      redis.call('HSET', wh .. 'owners', sub .. '\n' .. ARGV[8], client)
    end
    redis.call('HINCRBY', wh .. 'cq', client, #pushes)
    redis.call('HINCRBY', wh .. 'cb', client, #pushes * #body)
  end
  redis.call('INCRBY', wh .. 'queued', queued)
  redis.call('INCRBY', wh .. 'qbytes', bytes)
end
if changed and ARGV[13] ~= '' then
  redis.call(ARGV[15], ARGV[13], agent .. '\n' .. ARGV[8] .. '\n' .. status .. '\n' .. owner .. '\n' .. ARGV[4])
end
-- The caller holds the accepted document already: do not send it back.
return { verdict, agent, status, ARGV[3], '', rec[2] or '', owner, created, dropped, replica }
