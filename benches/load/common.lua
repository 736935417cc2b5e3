-- Shared by post_task.lua and get_task.lua: per-thread status tally, summed in done().
local M = {}

function M.install()
  local threads = {}

  function setup(thread)
    table.insert(threads, thread)
  end

  function init(args)
    codes = {}
  end

  function response(status, headers, body)
    codes[status] = (codes[status] or 0) + 1
  end

  function done(summary, latency, requests)
    local total = {}
    local non2xx = 0
    for _, t in ipairs(threads) do
      local c = t:get("codes")
      for code, n in pairs(c) do
        total[code] = (total[code] or 0) + n
      end
    end
    local keys = {}
    for code, _ in pairs(total) do table.insert(keys, code) end
    table.sort(keys)
    for _, code in ipairs(keys) do
      io.write(string.format("STATUS %d %d\n", code, total[code]))
      if code < 200 or code > 299 then non2xx = non2xx + total[code] end
    end
    local e = summary.errors
    local sock = e.connect + e.read + e.write + e.timeout
    io.write(string.format(
      "SUMMARY requests=%d duration_us=%d rps=%.1f p50_us=%d p99_us=%d non2xx=%d sock_errors=%d\n",
      summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
      latency:percentile(50), latency:percentile(99), non2xx, sock))
  end
end

-- Numbered requests (after install()): each thread numbers its requests under a prefix of its
-- own, `<label>-<thread>-<start time>`, kept in the thread's globals `prefix` and `n` for the
-- script's request() (a messageId, an Idempotency-Key: new on every request).
function M.number(label)
  local base_setup, base_init = setup, init
  local threads = 0

  function setup(thread)
    base_setup(thread)
    threads = threads + 1
    thread:set("tid", threads)
  end

  function init(args)
    base_init(args)
    prefix = string.format("%s-%d-%d", label, tid or 0, os.time())
    n = 0
  end
end

return M
