-- wrk script: an A2A 0.3 `message/send` over JSON-RPC, as a2a-sdk 0.3 and @a2a-js/sdk 0.3 send
-- it (a2a.json's shapes, no A2A-Version: §3.6 of 1.0 reads that as 0.3), one new messageId per
-- request, and the status tally of common.lua. A JSON-RPC error comes with HTTP 200: a body
-- holding "error" is counted as a failure (status 599 in the tally).
local common = dofile(os.getenv("WRK_LUA_DIR") .. "/common.lua")

wrk.method = "POST"
wrk.path = os.getenv("WRK_PATH") or "/a2a/jsonrpc"
wrk.headers["Content-Type"] = "application/json"

local auth = os.getenv("WRK_AUTH")
if auth and auth ~= "" then
  wrk.headers["Authorization"] = auth
end

common.install()

-- Each thread numbers its own messages (common.number).
common.number("load03")
local base_response = response

function request()
  n = n + 1
  local body = string.format(
    '{"jsonrpc":"2.0","id":%d,"method":"message/send","params":{"message":'
      .. '{"kind":"message","messageId":"%s-%d","role":"user","parts":[{"kind":"text","text":"hello"}]}}}',
    n, prefix, n)
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  if status == 200 and body and string.find(body, '"error"', 1, true) then
    status = 599
  end
  base_response(status, headers, body)
end
