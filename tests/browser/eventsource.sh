#!/usr/bin/env bash
# Shows that a real browser's EventSource receives a task's events through the gateway.
#
# Starts `a2a-gateway demo` (the gateway in front of two sample agents whose tasks progress by
# themselves) on a free loopback port, creates a task on the `scripts` agent, serves
# eventsource.html from a second loopback port, and lets headless chromium open
# `new EventSource(<gateway>/agents/scripts/tasks/<id>/stream)` on it (cross-origin, so chromium
# runs with --disable-web-security; the gateway sends no CORS headers). The page writes what it
# receives into its DOM; this script checks the dumped DOM for a `log` event with an id of the
# gateway's form <hex>-<n>, and, if the task ended, for the final `event: status`.
#
# Run from anywhere:   tests/browser/eventsource.sh        (WAIT_MS=15000 by default)
# Needs: cargo, curl, python3, chromium (Debian: apt-get install -y chromium).
# Exit 0 on success; non-zero (with what was received) otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
wait_ms=${WAIT_MS:-15000}
chromium=${CHROMIUM:-chromium}
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The first line matching $2 in file $1, waiting up to 30 s for it.
await_line() {
    for _ in $(seq 300); do
        grep -m1 -E "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "--- $1:" >&2; cat "$1" >&2; fail "no line matching '$2' in $1"
}

echo "== $("$chromium" --version 2>/dev/null)"
(cd "$root" && cargo build --release --quiet)
"$root/target/release/a2a-gateway" demo --listen 127.0.0.1:0 >"$tmp/demo.out" 2>"$tmp/demo.err" &
pids+=($!)

# The page's server: files from this directory, plus /hold?ms=N, which answers after N ms.
cat >"$tmp/serve.py" <<'PY'
import http.server, os, sys, time, urllib.parse
class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path != "/hold":
            return super().do_GET()
        time.sleep(int(urllib.parse.parse_qs(url.query)["ms"][0]) / 1000)
        self.send_response(204)
        self.end_headers()
    def log_message(self, *args): pass
os.chdir(sys.argv[1])
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("serving on", server.server_address[1], flush=True)
server.serve_forever()
PY
python3 "$tmp/serve.py" "$here" >"$tmp/serve.out" 2>&1 &
pids+=($!)

gw=$(await_line "$tmp/demo.out" '^listening on ' | sed 's/^listening on //')
page_port=$(await_line "$tmp/serve.out" '^serving on ' | sed 's/^serving on //')
await_line "$tmp/demo.out" '^Try these' >/dev/null # the demo is ready (cards fetched)
echo "== gateway $gw, page http://127.0.0.1:$page_port/eventsource.html"

task=$(curl -sS -X POST "$gw/agents/scripts/tasks" -H 'Content-Type: application/json' \
    -d '{"input":{"topic":"browser check","filename":"browser.py"}}')
id=$(sed -nE 's/.*"task_id":"([^"]+)".*/\1/p' <<<"$task")
[[ -n $id ]] || fail "no task created: $task"
echo "== task $id created"

stream="$gw/agents/scripts/tasks/$id/stream"
timeout $((wait_ms / 1000 + 30)) "$chromium" --headless=new --no-sandbox --disable-gpu \
    --disable-web-security --user-data-dir="$tmp/profile" --no-first-run \
    --dump-dom "http://127.0.0.1:$page_port/eventsource.html?src=$stream&wait=$wait_ms" \
    >"$tmp/dom.html" 2>"$tmp/chromium.err" || { tail -20 "$tmp/chromium.err" >&2; fail "chromium failed"; }

# The lines of <pre id="events">, as the browser saw them (type, lastEventId, data).
sed -n '/<pre id="events">/,/<\/pre>/p' "$tmp/dom.html" |
    sed -e 's/.*<pre id="events">//' -e 's/<\/pre>.*//' -e '/^$/d' >"$tmp/events.tsv"
echo "== the browser received (type, lastEventId, data):"
cut -c1-160 "$tmp/events.tsv"
echo "== page: $(sed -nE 's/.*<div id="done">([^<]*)<.*/\1/p' "$tmp/dom.html")"

[[ -s $tmp/events.tsv ]] || fail "the browser received no events"
grep -qP '^log\t[0-9a-f]+-[0-9]+\t' "$tmp/events.tsv" || fail "no log event with an id <hex>-<n>"
status=$(curl -sS "$gw/tasks/$id" | sed -nE 's/.*"status":"([A-Z_]+)".*/\1/p')
echo "== task status now: $status"
case $status in
COMPLETED | FAILED | CANCELED | CANCELLED | REJECTED)
    grep -qP '^status\t[0-9a-f]+-[0-9]+\t\{' "$tmp/events.tsv" || fail "task ended but no event: status"
    code=$(curl -s -o /dev/null -w '%{http_code}' "$stream")
    [[ $code == 204 ]] || fail "stream of an ended task answered $code, not 204"
    echo "== a new request for the ended task's stream answers $code" ;;
esac
echo "PASS: a browser EventSource received the task's events through the gateway"
