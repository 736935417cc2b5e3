-- An idempotency key of a create, atomically (see idempotency.rs): one script, three operations.
--
-- KEYS[1] the key's hash: state ('inflight' or 'done'), fp (hex SHA-256 of the request body),
--         token (the holder's, while in flight), status, ctype, body (the answer, once done)
-- ARGV[1] 'claim'    ARGV fp, token, lease_ms
--           a free key becomes the caller's: returns {'claimed'}; otherwise
--           {state, fp, status, ctype, body} of what holds it
-- ARGV[1] 'complete' ARGV fp, token, ttl_ms, status, ctype, body
--           stores the answer if the key is the caller's, or nobody's (its lease ended):
--           returns 1 (also when the caller stored it already); 0 if another request holds it
-- Every operation may be sent twice (a retry after a broken connection) with the same result.
-- ARGV[1] 'release'  ARGV '', token
--           frees the key if the caller still holds it in flight

local op = ARGV[1]
local cur = redis.call('HMGET', KEYS[1], 'state', 'fp', 'token', 'status', 'ctype', 'body')
if op == 'claim' then
  -- The caller's own claim, sent again after a broken connection: still the caller's.
  if not cur[1] or (cur[1] == 'inflight' and cur[3] == ARGV[3]) then
    redis.call('HSET', KEYS[1], 'state', 'inflight', 'fp', ARGV[2], 'token', ARGV[3])
    redis.call('PEXPIRE', KEYS[1], ARGV[4])
    return { 'claimed' }
  end
  return { cur[1], cur[2] or '', cur[4] or '', cur[5] or '', cur[6] or '' }
elseif op == 'complete' then
  -- The caller's own completion, sent again after a broken connection, is done already.
  if cur[1] == 'done' and cur[3] == ARGV[3] then return 1 end
  if cur[1] and not (cur[1] == 'inflight' and cur[3] == ARGV[3]) then
    return 0
  end
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'state', 'done', 'fp', ARGV[2], 'token', ARGV[3], 'status', ARGV[5],
    'ctype', ARGV[6], 'body', ARGV[7])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return 1
elseif op == 'release' then
  if cur[1] == 'inflight' and cur[3] == ARGV[3] then
    redis.call('DEL', KEYS[1])
  end
  return 1
end
return redis.error_reply('unknown operation')
