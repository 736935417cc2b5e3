-- wrk script: POST the spec's example create-task body, and tally response status codes so a
-- run full of errors cannot pass as a fast one. Reports in done() as machine-readable lines:
--   STATUS <code> <count>     (one per distinct status seen)
--   SUMMARY requests=N duration_us=N rps=R p50_us=N p99_us=N non2xx=N sock_errors=N
-- The path comes from the environment (WRK_PATH), so one script serves every target.
local common = dofile(os.getenv("WRK_LUA_DIR") .. "/common.lua")

wrk.method = "POST"
wrk.path = os.getenv("WRK_PATH") or "/tasks"
wrk.body = '{"input":{"topic":"read a local CSV file and calculate the average of the age column","filename":"data_processor.py"}}'
wrk.headers["Content-Type"] = "application/json"

-- AUTH runs (run.sh): the same credential on every request.
local auth = os.getenv("WRK_AUTH")
if auth and auth ~= "" then
  wrk.headers["Authorization"] = auth
end

common.install()

-- CREATE_KEYS=1 (run.sh): every create carries a new Idempotency-Key, so the gateway claims and
-- completes a key for each, as it does an official A2A message's messageId (numbered as
-- common.number numbers them). nginx and the agent get the same header (the sample agent
-- ignores it).
if os.getenv("CREATE_KEYS") == "1" then
  common.number("create")

  function request()
    n = n + 1
    wrk.headers["Idempotency-Key"] = prefix .. "-" .. n
    return wrk.format()
  end
end
