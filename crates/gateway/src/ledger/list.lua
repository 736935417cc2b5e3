-- A page of one partition's listing index (kept by apply.lua; see ledger::listing): entries of
-- expired tasks are dropped first, then, over the sets asked, how many of their tasks match and
-- the first `n` of them after the cursor, merged in the listing order: minus the status
-- timestamp, then the agent (the caller gives each set its agent's rank: Lua's string
-- comparison follows the server's locale, not bytes), then task_id bytewise. The merge of the
-- partitions is the caller's.
--
-- KEYS[1] the partition's prefix
-- ARGV    now_ms, n, scope ('*' or 'o:{owner}'), the highest score listed ('+inf', or minus
--         statusTimestampAfter), contextId ('' for any), the cursor's score and task_id ('' ''
--         for none), then per set: agent, STATUS (with a contextId: the agent's context set, and
--         the states listed, comma-separated), where it resumes: F (from its first task),
--         O (older than the cursor), A (at the cursor's timestamp or older), K (after the
--         cursor's task_id at its timestamp, then older), and its agent's rank in the order
-- Returns {total, set number (1-based), score, task_id, ...}: at most n entries
local P = KEYS[1]
local LS = P .. 'ls:'
local now, n = tonumber(ARGV[1]), tonumber(ARGV[2])
local scope, upper, ctx, cs, ck = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local upper_n = tonumber(upper)

-- Places of expired tasks dropped first (sweep.lua, prepended to this script).
sweep_listing(P, now, 10000)

-- With a context, the sets are the context's (every owner's, every state): each task is asked
-- for its state (one of those listed) and, for one owner's scope, its owner.
local wanted, owner = {}, nil
if scope ~= '*' then owner = string.sub(scope, 3) end
local function matches(id)
  if ctx == '' then return true end
  local cur = redis.call('HMGET', P .. 'task:' .. id, 'status', 'owner')
  if not cur[1] or not wanted[cur[1]] then return false end
  return owner == nil or cur[2] == owner
end

-- a > b, bytewise.
local function after(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end

local function start(key, mode)
  if mode == 'F' then return 0 end
  if mode == 'O' then return redis.call('ZCOUNT', key, '-inf', cs) end
  if mode == 'A' then return redis.call('ZCOUNT', key, '-inf', '(' .. cs) end
  local s = redis.call('ZSCORE', key, ck)
  if s and tonumber(s) == tonumber(cs) then return redis.call('ZRANK', key, ck) + 1 end
  -- The cursor's task moved since: past the ones of its timestamp that sort before it.
  local r = redis.call('ZCOUNT', key, '-inf', '(' .. cs)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', key, cs, cs)) do
    if after(id, ck) then break end
    r = r + 1
  end
  return r
end

local function count(key)
  if ctx == '' then return redis.call('ZCOUNT', key, '-inf', upper) end
  -- With a context: each task of the set within `upper` is asked (by rank, so linear).
  local n, off = 0, 0
  local last = redis.call('ZCOUNT', key, '-inf', upper)
  while off < last do
    local ids = redis.call('ZRANGE', key, off, math.min(off + 999, last - 1))
    for _, id in ipairs(ids) do
      if matches(id) then n = n + 1 end
    end
    off = off + 1000
  end
  return n
end

local function take(key, from)
  local out, r = {}, from
  while true do
    local rows = redis.call('ZRANGE', key, r, r + n - 1, 'WITHSCORES')
    for i = 1, #rows, 2 do
      if upper_n and tonumber(rows[i + 1]) > upper_n then return out end
      if matches(rows[i]) then
        out[#out + 1] = rows[i + 1]
        out[#out + 1] = rows[i]
        if #out >= 2 * n then return out end
      end
    end
    if #rows < 2 * n then return out end
    r = r + n
  end
end

local total, lists, set = 0, {}, 0
for i = 8, #ARGV, 4 do
  set = set + 1
  local key = LS .. scope .. ':' .. ARGV[i] .. ':' .. ARGV[i + 1]
  if ctx ~= '' then
    key = LS .. 'c:' .. ARGV[i] .. ':' .. ctx
    for st in string.gmatch(ARGV[i + 1], '[^,]+') do wanted[st] = true end
  end
  if redis.call('EXISTS', key) == 1 then
    total = total + count(key)
    local rows = take(key, start(key, ARGV[i + 2]))
    if #rows > 0 then
      local num = {}
      for j = 1, #rows, 2 do num[j] = tonumber(rows[j]) end
      lists[#lists + 1] = { rows = rows, num = num, n = #rows, i = 1, rank = tonumber(ARGV[i + 3]), set = set }
    end
  end
end
-- Each set is in order already: a k-way merge of their heads, n times.
local reply = { total }
for _ = 1, n do
  local best
  for _, l in ipairs(lists) do
    if l.i < l.n then
      if not best then
        best = l
      else
        local x, y = l.num[l.i], best.num[best.i]
        if x < y or (x == y and (l.rank < best.rank
            or (l.rank == best.rank and after(best.rows[best.i + 1], l.rows[l.i + 1])))) then
          best = l
        end
      end
    end
  end
  if not best then break end
  reply[#reply + 1] = best.set
  reply[#reply + 1] = best.rows[best.i]
  reply[#reply + 1] = best.rows[best.i + 1]
  best.i = best.i + 2
end
return reply
