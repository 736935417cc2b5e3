#!/usr/bin/env bash
# The official A2A conformance kit (a2aproject/a2a-tck) against its reference agent, directly and
# through the gateway, with the per-test differences. Why: the kit is the outside judge of what
# the gateway does to an official A2A agent; a test that the agent passes alone and fails behind
# the gateway is the gateway's doing (or the front's), and this run, repeated after a fix, shows
# which ones are left. It starts and stops everything itself, on free loopback ports:
#
#   for each category and transport:
#     direct:  the reference agent (run.sh --sut), fresh        <- run.sh AGENT CATEGORY TRANSPORT
#     gateway: a fresh agent, a fresh gateway fronting it as `tck` (protocol "a2a", open, loopback
#              push URLs allowed), nginx in front as /work/shared/tools/tck/README.md says
#              ("Through the gateway")                           <- run.sh NGINX CATEGORY TRANSPORT
#   then run.sh --compare direct gateway for each pair.
#
# Usage (as root, for /etc/hosts and nginx's default user):
#   TCK_MIRROR=/work/.mirror/a2aproject+a2a-tck/repo A2A_GATEWAY_BIN=target/release/a2a-gateway \
#     scripts/tck-through-gateway.sh [OUT_DIR]
#
# Env:
#   TCK_MIRROR       the kit's git directory (the search tool's `fetch` of github:a2aproject/a2a-tck);
#                    run.sh clones it to TCK_DIR at its pinned commit. Not needed once TCK_DIR holds
#                    the checkout. Nothing of the kit is in this repository.
#   A2A_GATEWAY_BIN  the gateway binary (default: target/release/a2a-gateway of this checkout)
#   TCK_RUN          the kit's runner (default /work/shared/tools/tck/run.sh); TCK_DIR, TCK_VENV,
#                    TCK_TIMEOUT, TCK_A2A_VERSION... are passed on to it
#   TCK_CATEGORIES   default "mandatory capabilities"
#   TCK_TRANSPORTS   default "jsonrpc rest"; "grpc" too: the agent serves gRPC on a port of its own
#                    (run.sh --sut ... --grpc-port), and through the gateway a second nginx server
#                    (HTTP/2, h2c) fronts the gateway's gRPC service, rewriting each call to the
#                    agent's gRPC route (`/agents/tck/lf.a2a.v1.A2AService/...`: the kit's gRPC
#                    client sends no tenant); the gateway's public_url is that server, so the card
#                    the kit reads names it as the gRPC interface
#   TCK_MODES        default "direct gateway" (one of them runs that side only; no comparison)
#   TCK_HOSTS        1 (default): while it runs, /etc/hosts points the host names the kit's push
#                    tests register webhooks on at 127.0.0.1 (only lines it added are removed
#                    after); 0: /etc/hosts is left alone
#   NGINX            the nginx binary (default: nginx on PATH, else /usr/sbin/nginx)
#   TCK_TEST_TIMEOUT wall limit of one test, in seconds (default 120; 0: none), by a pytest plugin
#                    this script writes to OUT_DIR/pytest-plugin (PYTEST_ADDOPTS is extended, not
#                    replaced: `-k NAME` there runs chosen tests only)
# OUT_DIR (default /tmp/tck-through-gateway-TIME) gets MODE-CATEGORY-TRANSPORT.json (run.sh's
# reports, with .log and .raw.json beside), compare-CATEGORY-TRANSPORT.txt, and logs/ (the agent's,
# the gateway's and its config, nginx's config and access log, per run).
# Exit: 0 when no test passing directly fails through the gateway, 1 when some do, 2 when a run
# could not be made.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
RUN=${TCK_RUN:-/work/shared/tools/tck/run.sh}
GW_BIN=${A2A_GATEWAY_BIN:-$ROOT/target/release/a2a-gateway}
CATEGORIES=${TCK_CATEGORIES:-mandatory capabilities}
TRANSPORTS=${TCK_TRANSPORTS:-jsonrpc rest}
MODES=${TCK_MODES:-direct gateway}
OUT=${1:-/tmp/tck-through-gateway-$(date +%Y%m%d-%H%M%S)}
HOSTS_FILE=/etc/hosts
WEBHOOK_HOSTS="example.com test.example.com webhook.example.com webhook1.example.com webhook2.example.com"
MARK="# tck-through-gateway $$"

say() { printf 'tck-through-gateway: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

[ -x "$RUN" ] || die "no kit runner at $RUN (TCK_RUN)"
case " $MODES " in *" gateway "*)
  [ -x "$GW_BIN" ] || die "no gateway binary at $GW_BIN (A2A_GATEWAY_BIN)"
  NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
  [ -x "$NGINX" ] || die "no nginx (apt-get install -y nginx, or NGINX=path)" ;;
esac
command -v curl >/dev/null || die "curl is missing"
command -v python3 >/dev/null || die "python3 is missing"
mkdir -p "$OUT/logs" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)

# Every process started here, by pid; stopped one by one, never by name.
PIDS=()
stop_pid() {
  local pid=$1 _
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return 0
}
stop_all() {  # the last started first: nginx, the gateway, then the agent
  local i
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[i]}"; done
  PIDS=()
}

HOSTS_ADDED=0
hosts_add() {
  [ "${TCK_HOSTS:-1}" = 1 ] || return 0
  local missing=() h
  for h in $WEBHOOK_HOSTS; do
    getent ahostsv4 "$h" 2>/dev/null | grep -q '^127\.0\.0\.1 ' || missing+=("$h")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  [ -w "$HOSTS_FILE" ] || die "cannot write $HOSTS_FILE (run as root, or TCK_HOSTS=0)"
  # In place (the file may be a bind mount), one marked line per name, on a line of its own.
  [ -z "$(tail -c 1 "$HOSTS_FILE")" ] || echo >> "$HOSTS_FILE"
  for h in "${missing[@]}"; do printf '127.0.0.1 %s %s\n' "$h" "$MARK" >> "$HOSTS_FILE"; done
  HOSTS_ADDED=1
  say "$HOSTS_FILE: ${missing[*]} -> 127.0.0.1 while the kit runs"
}
hosts_restore() {
  [ "$HOSTS_ADDED" = 1 ] || return 0
  local kept
  kept=$(grep -vF -- "$MARK" "$HOSTS_FILE")
  printf '%s\n' "$kept" > "$HOSTS_FILE"
  HOSTS_ADDED=0
  say "$HOSTS_FILE restored"
}
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() { stop_all; hosts_restore; }
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_http URL PID SECONDS [GREP]: until URL answers 2xx (with GREP in its body), while PID lives.
wait_http() {
  local url=$1 pid=$2 secs=$3 want=${4:-} body _
  for _ in $(seq 1 $((secs * 4))); do
    kill -0 "$pid" 2>/dev/null || return 1
    if body=$(curl -fsS --max-time 2 "$url" 2>/dev/null); then
      [ -z "$want" ] || [[ $body == *"$want"* ]] && return 0
    fi
    sleep 0.25
  done
  return 1
}

# start_agent LOG [TRANSPORT]: the kit's reference agent on a free port (and its gRPC service on
# another, for grpc); sets AGENT_PORT.
start_agent() {
  local log=$1 tr=${2:-} pid grpc=()
  AGENT_PORT=$(free_port)
  [ "$tr" = grpc ] && grpc=(--grpc-port "$(free_port)")
  "$RUN" --sut "$AGENT_PORT" "${grpc[@]}" --log-level info >"$log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  wait_http "http://127.0.0.1:$AGENT_PORT/.well-known/agent-card.json" "$pid" 300 \
    || { tail -20 "$log" >&2; return 1; }
}

# start_gateway NAME [TRANSPORT]: a gateway fronting the agent as `tck`, nginx in front (and its
# h2c server for grpc); sets SUT_URL.
start_gateway() {
  local name=$1 tr=${2:-} dir="$OUT/logs/$1" gw_port ngx_port h2_port public pid h2_server=""
  mkdir -p "$dir/nginx-temp"
  gw_port=$(free_port)
  ngx_port=$(free_port)
  h2_port=$(free_port)
  public="127.0.0.1:$ngx_port"
  if [ "$tr" = grpc ]; then
    public="127.0.0.1:$h2_port"
    h2_server="server {
    listen 127.0.0.1:$h2_port http2;
    grpc_read_timeout 3600s;
    grpc_send_timeout 3600s;
    location /lf.a2a.v1.A2AService/ { rewrite ^(.*)\$ /agents/tck\$1 break; grpc_pass grpc://127.0.0.1:$gw_port; }
  }"
  fi
  cat >"$dir/gateway.toml" <<EOF
# written by scripts/tck-through-gateway.sh
listen = "127.0.0.1:$gw_port"
public_url = "http://$public"
access_log = true

[[agents]]
name = "tck"
protocol = "a2a"
url = "http://127.0.0.1:$AGENT_PORT"

[webhooks]
allow = ["127.0.0.1/32"]
EOF
  "$GW_BIN" check-config --config "$dir/gateway.toml" >"$dir/check-config.txt" 2>&1 \
    || { cat "$dir/check-config.txt" >&2; return 1; }
  "$GW_BIN" --config "$dir/gateway.toml" >"$dir/gateway.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  wait_http "http://127.0.0.1:$gw_port/agents/tck/.well-known/agent-card.json" "$pid" 60 "/agents/tck" \
    || { say "gateway did not serve the card"; tail -20 "$dir/gateway.log" >&2; return 1; }

  # As /work/shared/tools/tck/README.md "Through the gateway": the kit reads the card at the root
  # of its URL and sends REST and raw JSON-RPC to the host root.
  cat >"$dir/nginx.conf" <<EOF
# written by scripts/tck-through-gateway.sh
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/nginx-error.log info;
events { worker_connections 1024; }
http {
  log_format tck '\$time_iso8601 "\$request" \$status upstream=\$upstream_status '
                 'bytes=\$body_bytes_sent t=\$request_time';
  access_log $dir/nginx-access.log tck;
  client_body_temp_path $dir/nginx-temp/body;
  proxy_temp_path $dir/nginx-temp/proxy;
  fastcgi_temp_path $dir/nginx-temp/fastcgi;
  uwsgi_temp_path $dir/nginx-temp/uwsgi;
  scgi_temp_path $dir/nginx-temp/scgi;
  server {
    listen 127.0.0.1:$ngx_port;
    proxy_buffering off;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_set_header Host \$http_host;
    proxy_read_timeout 3600s;
    proxy_send_timeout 3600s;
    location /agents/ { proxy_pass http://127.0.0.1:$gw_port; }
    location = /.well-known/agent-card.json { proxy_pass http://127.0.0.1:$gw_port/agents/tck/.well-known/agent-card.json; }
    location = / { proxy_pass http://127.0.0.1:$gw_port/agents/tck/jsonrpc; }
    location / { proxy_pass http://127.0.0.1:$gw_port/agents/tck/; }
  }
  $h2_server
}
EOF
  "$NGINX" -t -q -c "$dir/nginx.conf" -g 'daemon off;' 2>"$dir/nginx-t.txt" \
    || { cat "$dir/nginx-t.txt" >&2; return 1; }
  "$NGINX" -c "$dir/nginx.conf" -g 'daemon off;' >"$dir/nginx.out" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  SUT_URL="http://127.0.0.1:$ngx_port"
  wait_http "$SUT_URL/.well-known/agent-card.json" "$pid" 30 "$public/agents/tck" \
    || { say "nginx did not serve the gateway's card"; cat "$dir/nginx-error.log" >&2; return 1; }
}

# A wall limit per test: through the gateway a stream can stay open where the agent's ends, and
# the kit's REST client reads a stream to its end without a deadline (the gateway's pings keep
# its read timeout from firing), which would stop the whole run at run.sh's TCK_TIMEOUT with no
# report. A pytest plugin of ours, outside the kit's checkout, fails that one test instead.
PLUGIN_DIR="$OUT/pytest-plugin"
mkdir -p "$PLUGIN_DIR"
cat >"$PLUGIN_DIR/tck_test_timeout.py" <<'PLUGIN'
# Written by scripts/tck-through-gateway.sh: a wall limit per test (setup, then call), so that a
# stream that never ends fails its test instead of stopping the run at run.sh's limit.
import os
import signal

import pytest

LIMIT = int(os.environ.get("TCK_TEST_TIMEOUT", "120"))


def _limited(phase):
    if LIMIT <= 0:
        yield
        return

    def on_alarm(signum, frame):
        pytest.fail(f"{phase} timed out after {LIMIT} s (TCK_TEST_TIMEOUT of tck-through-gateway.sh)", pytrace=False)

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(LIMIT)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _limited("setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _limited("test")
PLUGIN
export TCK_TEST_TIMEOUT=${TCK_TEST_TIMEOUT:-120}
export PYTHONPATH="$PLUGIN_DIR${PYTHONPATH:+:$PYTHONPATH}"
export PYTEST_ADDOPTS="-p tck_test_timeout${PYTEST_ADDOPTS:+ $PYTEST_ADDOPTS}"

hosts_add
FAILED_RUNS=0
declare -A TALLY=()
for cat in $CATEGORIES; do
  for tr in $TRANSPORTS; do
    for mode in $MODES; do
      name="$mode-$cat-$tr"
      mkdir -p "$OUT/logs/$name"
      say "$name: starting"
      if ! start_agent "$OUT/logs/$name/agent.log" "$tr"; then
        say "$name: the reference agent did not start"; stop_all; FAILED_RUNS=$((FAILED_RUNS + 1)); continue
      fi
      SUT_URL="http://127.0.0.1:$AGENT_PORT"
      if [ "$mode" = gateway ] && ! start_gateway "$name" "$tr"; then
        say "$name: the gateway or nginx did not start"; stop_all; FAILED_RUNS=$((FAILED_RUNS + 1)); continue
      fi
      line=$(TCK_REPORT="$OUT/$name.json" "$RUN" "$SUT_URL" "$cat" "$tr" 2>>"$OUT/logs/$name/run.stderr" | tail -1)
      [ -s "$OUT/$name.json" ] || { line="no report (see $OUT/logs/$name/run.stderr)"; FAILED_RUNS=$((FAILED_RUNS + 1)); }
      TALLY[$name]=$line
      say "$name: $line"
      stop_all
    done
  done
done
hosts_restore

echo "== tallies ($OUT)"
for cat in $CATEGORIES; do
  for tr in $TRANSPORTS; do
    for mode in $MODES; do
      printf '%-8s %-13s %-8s %s\n' "$mode" "$cat" "$tr" "${TALLY[$mode-$cat-$tr]:-not run}"
    done
  done
done

REGRESSED=0
if [[ " $MODES " == *" direct "* && " $MODES " == *" gateway "* ]]; then
  for cat in $CATEGORIES; do
    for tr in $TRANSPORTS; do
      a="$OUT/direct-$cat-$tr.json" b="$OUT/gateway-$cat-$tr.json"
      if [ ! -s "$a" ] || [ ! -s "$b" ]; then continue; fi
      echo
      echo "== $cat over $tr: direct -> through the gateway"
      "$RUN" --compare "$a" "$b" | tee "$OUT/compare-$cat-$tr.txt"
      n=$(grep -cE '^ *passed -> (failed|error) ' "$OUT/compare-$cat-$tr.txt")
      REGRESSED=$((REGRESSED + n))
    done
  done
  echo
  echo "== $REGRESSED test(s) pass directly and fail through the gateway"
fi
[ "$FAILED_RUNS" -eq 0 ] || { say "$FAILED_RUNS run(s) could not be made"; exit 2; }
[ "$REGRESSED" -eq 0 ] || exit 1
exit 0
