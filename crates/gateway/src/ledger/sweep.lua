-- The listing index's sweep, shared by apply.lua and list.lua (prepended to each: a script
-- cannot include another). Places due to expire, at most `limit` of them, judged against the
-- task as it is now: the place of a task whose hash still lives (the caller's clock ahead of
-- the server's) is kept and due again when the hash is; a place the task no longer has (its
-- hash expired, or it was recorded again elsewhere since) leaves the sets the task is not in
-- now. apply.lua sweeps a few at each change, so the index of tasks that expired shrinks
-- without a listing; list.lua sweeps a large batch before it reads.
local function sweep_listing(P, now, limit)
  local LS = P .. 'ls:'
  local gone = redis.call('ZRANGEBYSCORE', P .. 'lsx', '-inf', now, 'LIMIT', 0, limit)
  for _, m in ipairs(gone) do
    local st, ag, ow, cx, id = string.match(m, '^([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n(.*)$')
    if st then
      local tk = P .. 'task:' .. id
      local cur = redis.call('HMGET', tk, 'status', 'agent', 'owner', 'ctx')
      local same = cur[1] == st and cur[2] == ag
      if same and (cur[3] or '') == ow and (cur[4] or '') == cx then
        redis.call('ZADD', P .. 'lsx', now + math.max(redis.call('PTTL', tk), 1000), m)
      else
        if not same then redis.call('ZREM', LS .. '*:' .. ag .. ':' .. st, id) end
        if ow ~= '' then redis.call('ZREM', LS .. 'o:' .. ow .. ':' .. ag .. ':' .. st, id) end
        if cx ~= '' and not (cur[2] == ag and (cur[4] or '') == cx) then
          redis.call('ZREM', LS .. 'c:' .. ag .. ':' .. cx, id)
        end
        redis.call('ZREM', P .. 'lsx', m)
      end
    else
      redis.call('ZREM', P .. 'lsx', m)
    end
  end
end
