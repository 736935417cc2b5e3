-- wrk script: GET one task (WRK_PATH, e.g. /agents/scripts/tasks/<id>), tallying status codes
-- like post_task.lua.
local common = dofile(os.getenv("WRK_LUA_DIR") .. "/common.lua")

wrk.method = "GET"
wrk.path = os.getenv("WRK_PATH")

-- AUTH runs (run.sh): the same credential on every request.
local auth = os.getenv("WRK_AUTH")
if auth and auth ~= "" then
  wrk.headers["Authorization"] = auth
end

common.install()
