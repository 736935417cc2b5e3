-- wrk script: GET one task (WRK_PATH, e.g. /agents/scripts/tasks/<id>), tallying status codes
-- like post_task.lua.
local common = dofile(os.getenv("WRK_LUA_DIR") .. "/common.lua")

wrk.method = "GET"
wrk.path = os.getenv("WRK_PATH")

common.install()
