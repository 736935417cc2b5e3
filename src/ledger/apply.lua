-- The ledger's compare-and-set, atomic in Redis: judge the update against the record and store
-- it only if accepted. The rule is protocol::task::judge plus ledger::decide, line for line; a
-- test applies every (recorded, update) combination through both and compares the verdicts.
--
-- KEYS[1] the task hash, KEYS[2] the per-state index prefix (zsets KEYS[2]..STATUS)
-- ARGV    agent, status, updated_ms, task, now_ms, terminal_ttl_ms, live_ttl_ms, task_id
-- Returns {verdict, agent, status, updated_ms, task, previous status or ''}: the record after
--   the call (the new one when accepted, with task left empty since the caller has it; the
--   standing one otherwise) and the state it left.

local TERMINAL = { COMPLETED = true, FAILED = true, CANCELLED = true }
local agent, status, updated = ARGV[1], ARGV[2], tonumber(ARGV[3])
local rec = redis.call('HMGET', KEYS[1], 'agent', 'status', 'updated_ms', 'task')

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
    if updated == rupdated then verdict = 'duplicate' else verdict = 'refresh' end
  else
    verdict = 'transition'
  end
end

if verdict ~= 'new' and verdict ~= 'transition' and verdict ~= 'refresh' then
  return { verdict, rec[1], rec[2], rec[3], rec[4], rec[2] or '' }
end

local now = tonumber(ARGV[5])
local ttl = tonumber(TERMINAL[status] and ARGV[6] or ARGV[7])
redis.call('HSET', KEYS[1], 'agent', agent, 'status', status, 'updated_ms', ARGV[3], 'task', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ttl)
if rec[2] and rec[2] ~= status then
  redis.call('ZREM', KEYS[2] .. rec[2], ARGV[8])
end
redis.call('ZADD', KEYS[2] .. status, now + ttl, ARGV[8])
-- The caller holds the accepted document already: do not send it back.
return { verdict, agent, status, ARGV[3], '', rec[2] or '' }
