-- wrk script: an official A2A SendMessage over JSON-RPC, one new messageId per request (the
-- gateway answers a messageId it has seen from its idempotency record, which would not be the
-- same work), and the status tally of common.lua. A JSON-RPC error comes with HTTP 200: a body
-- holding "error" is counted as a failure (status 599 in the tally), so a run of refusals
-- cannot pass as a fast one.
local common = dofile(os.getenv("WRK_LUA_DIR") .. "/common.lua")

wrk.method = "POST"
wrk.path = os.getenv("WRK_PATH") or "/a2a/jsonrpc"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["A2A-Version"] = "1.0"

local auth = os.getenv("WRK_AUTH")
if auth and auth ~= "" then
  wrk.headers["Authorization"] = auth
end

common.install()

-- Each thread numbers its own messages (common.number).
common.number("load")
local base_response = response

function request()
  n = n + 1
  local body = string.format(
    '{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"message":'
      .. '{"messageId":"%s-%d","role":"ROLE_USER","parts":[{"text":"hello"}]}}}',
    n, prefix, n)
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  if status == 200 and body and string.find(body, '"error"', 1, true) then
    status = 599
  end
  base_response(status, headers, body)
end
