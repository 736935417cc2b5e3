#!/usr/bin/env bash
# Load run: creating a task through the gateway vs. nginx as a plain reverse proxy, both in front
# of the same sample agent, plus the agent on its own as the ceiling. See README.md beside this.
#
#   bash benches/load/run.sh
#
# Knobs (environment): THREADS (2) CONNS (64) DURATION (15s) WARMUP (3s) PIN (0) GET_RUN (1)
# ORDER ("agent nginx gateway") ROUNDS (1) SKIP_BUILD (0) QUIET_WAIT (120) QUIET_PCT (10)
# AUTH (none; "key": one API key client, "jwt": an RS256 JWT checked against the test JWKS
# file ([auth.jwt]), "oidc": the same RS256 JWT issued by a loopback identity provider whose
# keys the gateway fetches by URL ([[auth.oidc]]: python3 -m http.server serving a discovery
# document and the test JWKS); every target is sent the same Authorization header, which only
# the gateway reads)
# LEDGER (memory; "redis": the gateway records in a redis-server started here on a free port;
# "cluster": in a three-master Redis Cluster started here, joined with redis-cli --cluster create)
# FILE_RUN (0; 1: GET a FILE_BYTES (10 MiB) file artifact's content through each, FILE_CONNS (8)
# connections; MB/s and the gateway's peak RSS) RATE_RUN (0; 1: after the POST runs, the
# open-loop client (benches/open_loop.rs) POSTs to nginx and the gateway at RATE_SHARE (0.5) of
# nginx's best req/s, for the tail at a fixed rate)
# TELEMETRY (off; "on": [telemetry] exports the spans of TELEMETRY_RATIO (1.0) of the requests
# to the nginx of the run, which accepts and drops them)
# POST_RUN (1; 0 skips the create runs) PROFILE (release: the cargo profile built and run;
# "profiling" is release's optimisations with debug info, for perf: target/profiling/a2a-gateway)
# A2A_GATEWAY_BIN (target/$PROFILE/a2a-gateway)
# AGENT_BIN (A2A_GATEWAY_BIN: whose `sample-agent` is the agent; set it to compare two gateway
# builds in front of the same agent) RESULTS_DIR (target/load-results/<date>)
# MAX_TASKS (4000000, and max_ledger_bytes 4 GiB: the ledger's bounds, above what five rounds make) RECONCILE_AFTER_MS (unset: the default, 15000; 0 turns the reconciler off; the agent's tasks
# never move, so with a short value every task is checked again and again during the run).
# A2A_RUN (1; 0 skips them): an official A2A SendMessage over JSON-RPC (send_message.lua, a new
# messageId each) to an official A2A sample agent (`sample-agent --protocol a2a`), direct,
# through nginx and through the gateway (`[[agents]] protocol = "a2a"`), in the same rounds.
# A2A03_RUN (1 when A2A_RUN is; 0 skips them): an A2A 0.3 `message/send` (send_message_v0_3.lua,
# a2a.json's shapes, no A2A-Version) to the sample agent speaking 0.3 (`--a2a-version 0.3`),
# direct, through nginx and through the gateway (which reads and writes 0.3 on both sides), in
# the same rounds as the 1.0 SendMessage.
# GRPC_RUN (1 when A2A_RUN is; 0 skips them): an official A2A SendMessage over gRPC (h2c, a new
# messageId each, benches/grpc_load.rs: GRPC_CONNS (8) HTTP/2 connections x GRPC_STREAMS (8)
# calls in flight) to the same official A2A sample agent's gRPC service, direct, through nginx's
# grpc_pass and through the gateway (the agent as `[[agents]] binding = "GRPC"`: gRPC on both
# sides), in the same rounds.
# CREATE_KEYS (0; 1: every create carries a new Idempotency-Key, so the gateway keeps a key
# record for each create as it does for each A2A message's messageId).
# REPLICAS_RUN (0; 1: two more sample agents of each protocol on free ports, and beside the
# one-url agents the gateway gets `scripts3` and `echo3`, each with `urls` = the three of its
# protocol (issue 49: new work balanced by power of two choices, each task pinned to its
# replica); in the same rounds the create and the SendMessage also go through them (rows
# post-replicas, a2a-replicas; with GET_RUN, get-replicas: a GET pinned to the replica holding the
# task), one-replica first in odd rounds, three-replica first in even ones; agent-cpu then sums
# the three agents; the table ends with each replica's share of the tasks (/agents tasks_held)).
# Everything listens on 127.0.0.1 only; every process started here is killed on exit.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

THREADS="${THREADS:-2}"
CONNS="${CONNS:-64}"
DURATION="${DURATION:-15s}"
WARMUP="${WARMUP:-3s}"
PIN="${PIN:-0}"
GET_RUN="${GET_RUN:-1}"
ORDER="${ORDER:-agent nginx gateway}"
ROUNDS="${ROUNDS:-1}"
SKIP_BUILD="${SKIP_BUILD:-0}"
PROFILE="${PROFILE:-release}"
BIN="${A2A_GATEWAY_BIN:-$ROOT/target/$PROFILE/a2a-gateway}"
AGENT_BIN="${AGENT_BIN:-$BIN}"
AUTH="${AUTH:-none}"
LEDGER="${LEDGER:-memory}"
FILE_RUN="${FILE_RUN:-0}"
FILE_BYTES="${FILE_BYTES:-10485760}"
FILE_CONNS="${FILE_CONNS:-8}"
RATE_RUN="${RATE_RUN:-0}"
RATE_SHARE="${RATE_SHARE:-0.5}"
POST_RUN="${POST_RUN:-1}"
A2A_RUN="${A2A_RUN:-1}"
A2A_NAME=echo
A2A03_RUN="${A2A03_RUN:-$A2A_RUN}"
A2A03_NAME=legacy
GRPC_RUN="${GRPC_RUN:-$A2A_RUN}"
GRPC_NAME=echo-grpc
GRPC_CONNS="${GRPC_CONNS:-8}"
GRPC_STREAMS="${GRPC_STREAMS:-8}"
TELEMETRY="${TELEMETRY:-off}"
TELEMETRY_RATIO="${TELEMETRY_RATIO:-1.0}"
AGENT_NAME=scripts
REPLICAS_RUN="${REPLICAS_RUN:-0}"
REPLICA_NAME=scripts3
A2A_REPLICA_NAME=echo3

# --- tools: checked, never installed silently -------------------------------------------------
missing=()
for tool in wrk nginx curl; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
    echo "missing: ${missing[*]}" >&2
    echo "install them with:  apt-get install -y wrk nginx curl   (after apt-get update)" >&2
    exit 1
fi
if [[ "$REPLICAS_RUN" == 1 ]] && ! command -v jq >/dev/null 2>&1; then
    echo "REPLICAS_RUN=1 needs jq (apt-get install -y jq): it reads the replicas' shares from /agents" >&2; exit 1
fi
if [[ "$PIN" == 1 ]]; then
    command -v taskset >/dev/null 2>&1 || { echo "PIN=1 needs taskset (apt-get install -y util-linux)" >&2; exit 1; }
    if (($(nproc) < 2)); then echo "PIN=1 needs at least 2 CPUs" >&2; exit 1; fi
fi

if [[ "$LEDGER" == redis || "$LEDGER" == cluster ]] && ! command -v redis-server >/dev/null 2>&1; then
    echo "LEDGER=$LEDGER needs redis-server and redis-cli (apt-get install -y redis-server)" >&2; exit 1
fi
if [[ "$SKIP_BUILD" != 1 ]]; then
    echo "building the $PROFILE binary (cargo build --profile $PROFILE; SKIP_BUILD=1 skips) ..."
    (cd "$ROOT" && cargo build --profile "$PROFILE" --quiet)
    if [[ "$RATE_RUN" == 1 ]]; then (cd "$ROOT" && cargo bench --bench open_loop --no-run --quiet); fi
    if [[ "$GRPC_RUN" == 1 ]]; then (cd "$ROOT" && cargo bench --bench grpc_load --no-run --quiet); fi
fi
[[ -x "$BIN" ]] || { echo "no binary at $BIN: run cargo build --profile $PROFILE" >&2; exit 1; }
if [[ "$RATE_RUN" == 1 ]]; then
    OPEN_LOOP="$(ls -t "$ROOT"/target/release/deps/open_loop-* 2>/dev/null | grep -v '\.d$' | head -n1 || true)"
    [[ -x "$OPEN_LOOP" ]] || { echo "RATE_RUN=1 needs the open-loop client: cargo bench --bench open_loop --no-run" >&2; exit 1; }
fi

if [[ "$GRPC_RUN" == 1 ]]; then
    GRPC_LOAD="$(ls -t "$ROOT"/target/release/deps/grpc_load-* 2>/dev/null | grep -v '\.d$' | head -n1 || true)"
    [[ -x "$GRPC_LOAD" ]] || { echo "GRPC_RUN=1 needs the gRPC load client: cargo bench --bench grpc_load --no-run" >&2; exit 1; }
fi

# --- scratch space, results, cleanup ------------------------------------------------------------
STAMP="$(date +%Y%m%d-%H%M%S)"
RESULTS="${RESULTS_DIR:-$ROOT/target/load-results/$STAMP}"
mkdir -p "$RESULTS"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/a2a-load.XXXXXX")"
chmod 755 "$TMP"
PIDS=()

# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        # nginx's master takes its workers down with it on SIGTERM; give everyone 5 s.
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# CPU placement (see README "Fairness"): PIN=0 leaves every process to the scheduler on all CPUs;
# PIN=1 gives the proxy under test CPU 0 and puts the agent and wrk on CPU 1.
if [[ "$PIN" == 1 ]]; then
    ON_PROXY=(taskset -c 0)
    ON_REST=(taskset -c 1)
    NGINX_WORKERS=1   # nginx 1.22's "auto" counts online CPUs, not the affinity mask
else
    ON_PROXY=()
    ON_REST=()
    NGINX_WORKERS=auto
fi

# A free loopback port (nginx needs a fixed one; the agent and the gateway take port 0). Below
# the kernel's ephemeral range (32768-60999 by default): a port from that range can be taken by
# the gateway's port 0 or by a client socket between this check and nginx's bind, and nginx then
# fails to start (seen in about one run in three).
free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 12000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return
        fi
    done
}

# wait_line FILE REGEX PID: wait up to 15 s for a line in FILE, print its first match.
wait_line() {
    local file="$1" re="$2" pid="$3" line
    for _ in $(seq 150); do
        line="$(grep -Eo "$re" "$file" 2>/dev/null | head -n1 || true)"
        if [[ -n "$line" ]]; then echo "$line"; return 0; fi
        kill -0 "$pid" 2>/dev/null || { echo "process $pid exited; its output:" >&2; cat "$file" >&2; return 1; }
        sleep 0.1
    done
    echo "timed out waiting for /$re/ in $file" >&2
    cat "$file" >&2
    return 1
}

# --- the agent ------------------------------------------------------------------------------------
AGENT_ARGS=()
if [[ "$FILE_RUN" == 1 ]]; then AGENT_ARGS=(--file-bytes "$FILE_BYTES"); fi
# REPLICAS_RUN: replicas of one agent share its identity. Without one agent_id for the three, each
# process would draw its own, and the gateway (one card per agent) refuses a task naming another
# (502 AGENT_PROTOCOL_VIOLATION): two creates in three, in a first try of this run.
if [[ "$REPLICAS_RUN" == 1 ]]; then
    REPLICA_AGENT_ID="$(cat /proc/sys/kernel/random/uuid)"
    AGENT_ARGS+=(--agent-id "$REPLICA_AGENT_ID")
fi
"${ON_REST[@]}" "$AGENT_BIN" sample-agent --listen 127.0.0.1:0 "${AGENT_ARGS[@]}" >"$TMP/agent.out" 2>"$TMP/agent.err" &
PIDS+=($!)
AGENT_PID=$!
AGENT_URL="$(wait_line "$TMP/agent.out" 'http://127\.0\.0\.1:[0-9]+' "${PIDS[-1]}")"
if [[ "$FILE_RUN" == 1 ]]; then
    FILE_PATH="$(wait_line "$TMP/agent.out" '/artifacts/[0-9a-f-]+/content' "$AGENT_PID")"
fi
AGENT_ADDR="${AGENT_URL#http://}"
# The official A2A agent (A2A_RUN), always started: nginx names it.
"${ON_REST[@]}" "$AGENT_BIN" sample-agent --protocol a2a --listen 127.0.0.1:0 >"$TMP/a2a-agent.out" 2>"$TMP/a2a-agent.err" &
PIDS+=($!)
A2A_AGENT_PID=$!
A2A_AGENT_URL="$(wait_line "$TMP/a2a-agent.out" 'http://127\.0\.0\.1:[0-9]+' "$A2A_AGENT_PID")"
# The same agent speaking A2A 0.3 (A2A03_RUN), always started: nginx names it.
"${ON_REST[@]}" "$AGENT_BIN" sample-agent --protocol a2a --a2a-version 0.3 --listen 127.0.0.1:0 \
    >"$TMP/a2a03-agent.out" 2>"$TMP/a2a03-agent.err" &
PIDS+=($!)
A2A03_AGENT_PID=$!
A2A03_AGENT_URL="$(wait_line "$TMP/a2a03-agent.out" 'http://127\.0\.0\.1:[0-9]+' "$A2A03_AGENT_PID")"
# REPLICAS_RUN: two more of each of the first two, on ports of their own; the first one of each
# kind is the third replica, so the one-replica and three-replica agents share one process.
if [[ "$REPLICAS_RUN" == 1 ]]; then
    REPLICA_URLS=("$AGENT_URL") REPLICA_PIDS="$AGENT_PID"
    A2A_REPLICA_URLS=("$A2A_AGENT_URL") A2A_REPLICA_PIDS="$A2A_AGENT_PID"
    for i in 2 3; do
        "${ON_REST[@]}" "$AGENT_BIN" sample-agent --listen 127.0.0.1:0 --agent-id "$REPLICA_AGENT_ID" \
            >"$TMP/agent-$i.out" 2>"$TMP/agent-$i.err" &
        PIDS+=($!)
        REPLICA_PIDS="$REPLICA_PIDS $!"
        REPLICA_URLS+=("$(wait_line "$TMP/agent-$i.out" 'http://127\.0\.0\.1:[0-9]+' "$!")")
        "${ON_REST[@]}" "$AGENT_BIN" sample-agent --protocol a2a --listen 127.0.0.1:0 >"$TMP/a2a-agent-$i.out" 2>"$TMP/a2a-agent-$i.err" &
        PIDS+=($!)
        A2A_REPLICA_PIDS="$A2A_REPLICA_PIDS $!"
        A2A_REPLICA_URLS+=("$(wait_line "$TMP/a2a-agent-$i.out" 'http://127\.0\.0\.1:[0-9]+' "$!")")
    done
fi

# --- nginx ----------------------------------------------------------------------------------------
NGINX_PORT="$(free_port)"
NGINX_A2A_PORT="$(free_port)"
while [[ "$NGINX_A2A_PORT" == "$NGINX_PORT" ]]; do NGINX_A2A_PORT="$(free_port)"; done
NGINX_A2A03_PORT="$(free_port)"
while [[ "$NGINX_A2A03_PORT" == "$NGINX_PORT" || "$NGINX_A2A03_PORT" == "$NGINX_A2A_PORT" ]]; do NGINX_A2A03_PORT="$(free_port)"; done
NGINX_GRPC_PORT="$(free_port)"
while [[ " $NGINX_PORT $NGINX_A2A_PORT $NGINX_A2A03_PORT " == *" $NGINX_GRPC_PORT "* ]]; do NGINX_GRPC_PORT="$(free_port)"; done
mkdir -p "$TMP/nginx/tmp" "$TMP/nginx/logs"
if [[ "$(id -u)" == 0 ]]; then USER_LINE="user root root;"; else USER_LINE=""; fi
sed -e "s|@USER_LINE@|$USER_LINE|" \
    -e "s|@LISTEN@|127.0.0.1:$NGINX_PORT|" \
    -e "s|@UPSTREAM@|$AGENT_ADDR|" \
    -e "s|@LISTEN_A2A@|127.0.0.1:$NGINX_A2A_PORT|" \
    -e "s|@UPSTREAM_A2A@|${A2A_AGENT_URL#http://}|" \
    -e "s|@LISTEN_A2A03@|127.0.0.1:$NGINX_A2A03_PORT|" \
    -e "s|@UPSTREAM_A2A03@|${A2A03_AGENT_URL#http://}|" \
    -e "s|@LISTEN_GRPC@|127.0.0.1:$NGINX_GRPC_PORT|" \
    -e "s|^worker_processes auto;|worker_processes $NGINX_WORKERS;|" \
    "$HERE/nginx.conf" >"$TMP/nginx/nginx.conf"
cp "$TMP/nginx/nginx.conf" "$RESULTS/nginx.conf"
"${ON_PROXY[@]}" nginx -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" -e "$TMP/nginx/error.log" \
    >"$TMP/nginx.out" 2>&1 &
PIDS+=($!)
NGINX_PID=$!
NGINX_URL="http://127.0.0.1:$NGINX_PORT"
NGINX_A2A_URL="http://127.0.0.1:$NGINX_A2A_PORT"
NGINX_A2A03_URL="http://127.0.0.1:$NGINX_A2A03_PORT"
NGINX_GRPC_URL="http://127.0.0.1:$NGINX_GRPC_PORT"

# --- the gateway ----------------------------------------------------------------------------------
cat >"$TMP/gateway.toml" <<EOF
# Written by benches/load/run.sh: config/examples/minimal.toml with a free port and the bench agent.
listen = "127.0.0.1:0"
# Five rounds of creates and messages make about 1.3M tasks, and a created task stays SUBMITTED
# (the agent never moves it): past the default 1M the ledger rightly refuses (LEDGER_FULL).
max_tasks = ${MAX_TASKS:-4000000}
max_ledger_bytes = 4294967296

[[agents]]
name = "$AGENT_NAME"
url = "$AGENT_URL"

[[agents]]
name = "$A2A_NAME"
url = "$A2A_AGENT_URL"
protocol = "a2a"

[[agents]]
name = "$A2A03_NAME"
url = "$A2A03_AGENT_URL"
protocol = "a2a"

[[agents]]
name = "$GRPC_NAME"
url = "$A2A_AGENT_URL"
protocol = "a2a"
binding = "GRPC"
EOF
if [[ "$REPLICAS_RUN" == 1 ]]; then
    toml_list() { local u out=""; for u in "$@"; do out="${out:+$out, }\"$u\""; done; echo "[$out]"; }
    printf '\n[[agents]]\nname = "%s"\nurls = %s\n\n[[agents]]\nname = "%s"\nurls = %s\nprotocol = "a2a"\n' \
        "$REPLICA_NAME" "$(toml_list "${REPLICA_URLS[@]}")" \
        "$A2A_REPLICA_NAME" "$(toml_list "${A2A_REPLICA_URLS[@]}")" >>"$TMP/gateway.toml"
fi
if [[ -n "${RECONCILE_AFTER_MS:-}" ]]; then
    printf 'reconcile_after_ms = %d\n' "$RECONCILE_AFTER_MS" >>"$TMP/gateway.toml"
fi
# AUTH: the credential every request carries (WRK_AUTH, read by the wrk scripts and by curl).
b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
case "$AUTH" in
    none) WRK_AUTH="" ;;
    key)
        KEY="bench-key-$(openssl rand -hex 16)"
        WRK_AUTH="Bearer $KEY"
        # Every SendMessage starts a conversation of its own: the client's max_contexts (10 000
        # by default) and its share of the ledger are lifted above what the run makes.
        printf '\n[[clients]]\nname = "bench"\nkey_sha256 = "%s"\nmax_contexts = 1000000000\nmax_ledger_bytes = 4294967296\n' \
            "$(printf %s "$KEY" | sha256sum | cut -d' ' -f1)" >>"$TMP/gateway.toml" ;;
    jwt|oidc)
        JWT_DIR="$ROOT/tests/fixtures/jwt"
        if [[ "$AUTH" == oidc ]]; then
            # Keys by URL: a loopback identity provider serving its discovery document and the
            # test JWKS, which the gateway fetches at start (and every jwks_refresh_secs, 300).
            command -v python3 >/dev/null 2>&1 || { echo "AUTH=oidc needs python3 (its http.server)" >&2; exit 1; }
            IDP_URL="http://127.0.0.1:$(free_port)"
            mkdir -p "$TMP/idp/.well-known"
            printf '{"issuer":"%s","jwks_uri":"%s/jwks.json"}\n' "$IDP_URL" "$IDP_URL" \
                >"$TMP/idp/.well-known/openid-configuration"
            cp "$JWT_DIR/jwks.json" "$TMP/idp/jwks.json"
            python3 -m http.server "${IDP_URL##*:}" --bind 127.0.0.1 --directory "$TMP/idp" \
                >"$TMP/idp.out" 2>&1 &
            PIDS+=($!)
            for _ in $(seq 100); do curl -sf -o /dev/null "$IDP_URL/jwks.json" && break; sleep 0.1; done
            curl -sf -o /dev/null "$IDP_URL/.well-known/openid-configuration" \
                || { echo "the loopback identity provider did not start: $(cat "$TMP/idp.out")" >&2; exit 1; }
            ISS="$IDP_URL"
        else
            ISS="https://idp.example.test/"
        fi
        header="$(printf '{"alg":"RS256","typ":"JWT","kid":"rsa-1"}' | b64url)"
        # a2a_can/a2a_agents grant [auth.jwt]'s token its rights; an [[auth.oidc]] token's come
        # from its scope (the issuer's `scopes` table below).
        payload="$(printf '{"sub":"bench","iss":"%s","aud":"a2a-gateway","scope":"a2a.send","a2a_agents":["*"],"a2a_can":["tasks"],"exp":%d}' \
            "$ISS" $(($(date +%s) + 86400)) | b64url)"
        sig="$(printf '%s.%s' "$header" "$payload" | openssl dgst -sha256 -sign "$JWT_DIR/rsa.pem" -binary | b64url)"
        WRK_AUTH="Bearer $header.$payload.$sig"
        # The token's subject has no [[clients]] entry: it is limited per subject (requests a
        # second, conversations), here beyond what the run sends, so the run measures
        # verification rather than 429s.
        printf '\n[auth]\ntoken_rate_per_sec = 1000000\ntoken_burst = 1000000\ntoken_max_contexts = 1000000000\n' >>"$TMP/gateway.toml"
        if [[ "$AUTH" == oidc ]]; then
            printf '[[auth.oidc]]\nname = "bench"\nissuer = "%s"\naudience = "a2a-gateway"\nscopes = { "a2a.send" = { can = ["tasks", "streams"] } }\n' \
                "$ISS" >>"$TMP/gateway.toml"
        else
            printf '[auth.jwt]\njwks_file = "%s"\nissuer = "%s"\naudience = "a2a-gateway"\n' \
                "$JWT_DIR/jwks.json" "$ISS" >>"$TMP/gateway.toml"
        fi ;;
    *) echo "AUTH must be none, key, jwt or oidc" >&2; exit 1 ;;
esac
case "$LEDGER" in
    memory) ;;
    redis)
        # A redis-server of this run's own (no persistence: the ledger's cost, not the disk's).
        REDIS_PORT="$(free_port)"
        "${ON_REST[@]}" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
            --dir "$TMP" >"$TMP/redis.out" 2>&1 &
        PIDS+=($!)
        REDIS_PID=$!
        wait_line "$TMP/redis.out" 'Ready to accept connections' "$REDIS_PID" >/dev/null
        printf '\n[redis]\nurl = "redis://127.0.0.1:%s"\n' "$REDIS_PORT" >>"$TMP/gateway.toml" ;;
    cluster)
        # Three masters of this run's own (ports whose bus port, +10000, is free too).
        REDIS_PID="" URLS=() NODES=()
        for _ in 1 2 3; do
            while :; do port="$(free_port)"; ((port < 55000)) && ! (exec 3<>"/dev/tcp/127.0.0.1/$((port + 10000))") 2>/dev/null && break; done
            mkdir -p "$TMP/node-$port"
            "${ON_REST[@]}" redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
                --cluster-enabled yes --cluster-config-file nodes.conf --dir "$TMP/node-$port" \
                >"$TMP/redis-$port.out" 2>&1 &
            PIDS+=($!)
            REDIS_PID="${REDIS_PID:+$REDIS_PID }$!"
            wait_line "$TMP/redis-$port.out" 'Ready to accept connections' "$!" >/dev/null
            URLS+=("\"redis://127.0.0.1:$port\"") NODES+=("127.0.0.1:$port")
        done
        redis-cli --cluster create "${NODES[@]}" --cluster-replicas 0 --cluster-yes >"$TMP/cluster.out" 2>&1
        for n in "${NODES[@]}"; do
            until redis-cli -p "${n#*:}" cluster info | grep -q 'cluster_state:ok'; do sleep 0.1; done
        done
        printf '\n[redis]\ncluster = true\nurls = [%s]\n' "$(IFS=,; echo "${URLS[*]}")" >>"$TMP/gateway.toml" ;;
    *) echo "LEDGER must be memory, redis or cluster" >&2; exit 1 ;;
esac
case "$TELEMETRY" in
    off) ;;
    on) printf '\n[telemetry]\notlp_endpoint = "%s"\nsample_ratio = %s\n' "$NGINX_URL" "$TELEMETRY_RATIO" >>"$TMP/gateway.toml" ;;
    *) echo "TELEMETRY must be off or on" >&2; exit 1 ;;
esac
export WRK_AUTH
CREATE_KEYS="${CREATE_KEYS:-0}"
export CREATE_KEYS
cp "$TMP/gateway.toml" "$RESULTS/gateway.toml"
"${ON_PROXY[@]}" "$BIN" --config "$TMP/gateway.toml" >"$TMP/gateway.out" 2>"$TMP/gateway.err" &
PIDS+=($!)
GATEWAY_PID=$!
# The gateway's CPU includes its redis-servers' (LEDGER=redis, cluster): the ledger's work is the
# gateway's.
GATEWAY_CPU="$GATEWAY_PID${REDIS_PID:+ $REDIS_PID}"
GATEWAY_URL="$(wait_line "$TMP/gateway.out" 'http://127\.0\.0\.1:[0-9]+' "${PIDS[-1]}")"

# --- ready checks: one create through each, and the gateway must have the agent's card --------
BODY='{"input":{"topic":"read a local CSV file and calculate the average of the age column","filename":"data_processor.py"}}'
post() { curl -s -o "$TMP/ready.body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    ${WRK_AUTH:+-H "Authorization: $WRK_AUTH"} -d "$BODY" "$1" || true; }
ready() {
    local url="$1" code
    for _ in $(seq 100); do
        code="$(post "$url")"
        [[ "$code" =~ ^2 ]] && return 0
        sleep 0.1
    done
    echo "$url never answered 2xx (last: $code): $(cat "$TMP/ready.body" 2>/dev/null)" >&2
    return 1
}
ready "$AGENT_URL/tasks"
ready "$NGINX_URL/tasks"
ready "$GATEWAY_URL/agents/$AGENT_NAME/tasks"
if [[ "$REPLICAS_RUN" == 1 ]]; then
    ready "$GATEWAY_URL/agents/$REPLICA_NAME/tasks"
    # Every replica of both must be up and serving the agent's card before a measured run.
    for _ in $(seq 100); do
        okays="$(curl -s ${WRK_AUTH:+-H "Authorization: $WRK_AUTH"} "$GATEWAY_URL/agents" | jq -r --arg a "$REPLICA_NAME" --arg b "$A2A_REPLICA_NAME" \
            '[.agents[] | select(.name == $a or .name == $b) | .replicas[] | select(.health == "ok")] | length' 2>/dev/null || true)"
        [[ "$okays" == 6 ]] && break
        sleep 0.1
    done
    [[ "$okays" == 6 ]] || { echo "the replica agents' six replicas are not all ok: $(curl -s "$GATEWAY_URL/agents")" >&2; exit 1; }
fi
# One SendMessage through each A2A target must answer a task.
send() { curl -s -X POST -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \
    ${WRK_AUTH:+-H "Authorization: $WRK_AUTH"} \
    -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"SendMessage\",\"params\":{\"message\":{\"messageId\":\"ready-$RANDOM$RANDOM\",\"role\":\"ROLE_USER\",\"parts\":[{\"text\":\"hello\"}]}}}" "$1" || true; }
if [[ "$A2A_RUN" == 1 ]]; then
    for url in "$A2A_AGENT_URL/a2a/jsonrpc" "$NGINX_A2A_URL/a2a/jsonrpc" "$GATEWAY_URL/agents/$A2A_NAME/jsonrpc" \
        ${REPLICA_PIDS:+"$GATEWAY_URL/agents/$A2A_REPLICA_NAME/jsonrpc"}; do
        for _ in $(seq 100); do
            answer="$(send "$url")"
            [[ "$answer" == *'"result"'* ]] && break
            sleep 0.1
        done
        [[ "$answer" == *'"result"'* ]] || { echo "$url never answered a SendMessage: $answer" >&2; exit 1; }
    done
fi
# One 0.3 message/send through each 0.3 target must answer a task.
send03() { curl -s -X POST -H 'Content-Type: application/json' \
    ${WRK_AUTH:+-H "Authorization: $WRK_AUTH"} \
    -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"message/send\",\"params\":{\"message\":{\"kind\":\"message\",\"messageId\":\"ready-$RANDOM$RANDOM\",\"role\":\"user\",\"parts\":[{\"kind\":\"text\",\"text\":\"hello\"}]}}}" "$1" || true; }
if [[ "$A2A03_RUN" == 1 ]]; then
    for url in "$A2A03_AGENT_URL/a2a/jsonrpc" "$NGINX_A2A03_URL/a2a/jsonrpc" "$GATEWAY_URL/agents/$A2A03_NAME/jsonrpc"; do
        for _ in $(seq 100); do
            answer="$(send03 "$url")"
            [[ "$answer" == *'"kind":"task"'* ]] && break
            sleep 0.1
        done
        [[ "$answer" == *'"kind":"task"'* ]] || { echo "$url never answered a 0.3 message/send: $answer" >&2; exit 1; }
    done
fi

# One gRPC SendMessage through each gRPC target must answer OK.
if [[ "$GRPC_RUN" == 1 ]]; then
    for target in "$A2A_AGENT_URL|-" "$NGINX_GRPC_URL|-" "$GATEWAY_URL|$GRPC_NAME"; do
        url="${target%|*}"; tenant="${target#*|}"
        for _ in $(seq 50); do
            answer="$("$GRPC_LOAD" "$url" 0.2 1 1 "$tenant" 2>&1 || true)"
            [[ "$answer" == *" ok="[1-9]* && "$answer" == *" failed=0 errors=0 "* ]] && break
            sleep 0.2
        done
        [[ "$answer" == *" ok="[1-9]* && "$answer" == *" failed=0 errors=0 "* ]] \
            || { echo "$url never answered a gRPC SendMessage: $answer" >&2; exit 1; }
    done
fi

{
    echo "date: $(date -Is)"
    echo "host: nproc=$(nproc) cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
    echo "kernel: $(uname -r)"
    echo "wrk: $(wrk -v 2>&1 | head -n1)"
    echo "nginx: $(nginx -v 2>&1)"
    echo "binary: $BIN ($("$BIN" --version 2>/dev/null || true), built $(date -r "$BIN" -Is))"
    echo "agent: $AGENT_BIN sample-agent"
    dirty=""
    if [[ -n "$(cd "$ROOT" && git status --porcelain -- src 2>/dev/null)" ]]; then dirty=" (src/ has uncommitted changes)"; fi
    echo "work tree: $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?')$dirty"
    echo "params: THREADS=$THREADS CONNS=$CONNS DURATION=$DURATION WARMUP=$WARMUP PIN=$PIN ROUNDS=$ROUNDS ORDER=\"$ORDER\" AUTH=$AUTH LEDGER=$LEDGER FILE_RUN=$FILE_RUN RATE_RUN=$RATE_RUN CREATE_KEYS=$CREATE_KEYS nginx worker_processes=$NGINX_WORKERS"
    if [[ "$REPLICAS_RUN" == 1 ]]; then echo "replicas: $REPLICA_NAME=${REPLICA_URLS[*]} $A2A_REPLICA_NAME=${A2A_REPLICA_URLS[*]}"; fi
    echo "agent=$AGENT_URL nginx=$NGINX_URL gateway=$GATEWAY_URL a2a-agent=$A2A_AGENT_URL a2a-nginx=$NGINX_A2A_URL A2A_RUN=$A2A_RUN a2a03-agent=$A2A03_AGENT_URL a2a03-nginx=$NGINX_A2A03_URL A2A03_RUN=$A2A03_RUN grpc-nginx=$NGINX_GRPC_URL GRPC_RUN=$GRPC_RUN (${GRPC_CONNS}x$GRPC_STREAMS)"
} | tee "$RESULTS/env.txt"

# --- CPU accounting: user+system time of a process and its children (nginx's workers) ----------
CLK_TCK="$(getconf CLK_TCK)"
cpu_ticks() {
    local total=0 pid stat rest f
    for pid in "$@" $(ps -o pid= --ppid "$1" 2>/dev/null || true); do
        stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || continue
        rest="${stat##*) }"          # fields from 3 on; comm may hold spaces
        read -r -a f <<<"$rest"
        total=$((total + f[11] + f[12]))  # utime, stime (fields 14, 15)
    done
    echo "$total"
}

# --- noise: other engineers' builds on a 2-core box skew every figure, so measure them -----------
# machine_ticks: "busy total" jiffies summed over all CPUs, from /proc/stat.
machine_ticks() {
    local _cpu u n sy idle io irq sirq steal _rest
    read -r _cpu u n sy idle io irq sirq steal _rest </proc/stat
    echo "$((u + n + sy + irq + sirq + steal)) $((u + n + sy + idle + io + irq + sirq + steal))"
}
# children_ticks VAR: CPU time of this shell's finished children (wrk), in clock ticks, into VAR.
# (`times` must run in this shell, not in a $(...) subshell, whose children start at zero.)
children_ticks() {
    times >"$TMP/times"   # second line: "XmY.YYYs XmY.YYYs", user and system of children
    printf -v "$1" '%s' "$(tail -n1 "$TMP/times" | awk -v hz="$CLK_TCK" '{ t = 0
        for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); t += a[1] * 60 + a[2] }
        printf "%d", t * hz }')"
}
# wait_quiet: before a measured run, wait (up to QUIET_WAIT s) until the machine is at most
# QUIET_PCT % busy with everything at rest here; the run goes ahead anyway after that, and its
# "other%" column tells how much CPU something else took during it.
QUIET_WAIT="${QUIET_WAIT:-120}"
QUIET_PCT="${QUIET_PCT:-10}"
wait_quiet() {
    local waited=0 b0 t0 b1 t1 pct
    while :; do
        read -r b0 t0 <<<"$(machine_ticks)"; sleep 1; read -r b1 t1 <<<"$(machine_ticks)"
        pct=$(((b1 - b0) * 100 / (t1 - t0 > 0 ? t1 - t0 : 1)))
        ((pct <= QUIET_PCT)) && return 0
        if ((waited >= QUIET_WAIT)); then
            echo "   machine still ${pct}% busy with something else after ${QUIET_WAIT}s; running anyway" >&2
            return 0
        fi
        ((waited == 0)) && echo "   machine ${pct}% busy with something else; waiting for quiet (up to ${QUIET_WAIT}s)" >&2
        waited=$((waited + 1))
    done
}

# --- the runs -------------------------------------------------------------------------------------
ROWS=()
BAD=0

# load SCRIPT URL_BASE PATH DURATION: one load run, wrk with SCRIPT on URL_BASE and PATH, or
# with SCRIPT "grpc" the gRPC load client on URL_BASE, PATH the tenant ("-" for none). Both
# print a SUMMARY line and STATUS lines.
load() {
    local script="$1" base="$2" path="$3" duration="$4"
    if [[ "$script" == grpc ]]; then
        "${ON_REST[@]}" "$GRPC_LOAD" "$base" "${duration%s}" "$GRPC_CONNS" "$GRPC_STREAMS" "$path"
    else
        WRK_LUA_DIR="$HERE" WRK_PATH="$path" "${ON_REST[@]}" \
            wrk -t"$THREADS" -c"${BENCH_CONNS:-$CONNS}" --latency -s "$HERE/$script" -d"$duration" "$base"
    fi
}

# bench LABEL SCRIPT URL_BASE PATH PROXY_PID ("" for the agent run); SCRIPT "grpc": see load.
bench() {
    local label="$1" script="$2" base="$3" path="$4" proxy_pid="$5" out summary codes
    local a0 a1 p0=0 p1=0 w0 w1 m0 m1 mt0 mt1
    echo "== $label: warm-up $WARMUP, then $DURATION: $script $base $path" >&2
    load "$script" "$base" "$path" "$WARMUP" >"$RESULTS/$label.warmup.txt" 2>&1 || true
    out="$RESULTS/$label.txt"
    wait_quiet
    # shellcheck disable=SC2086  # proxy_pid may list two processes (the gateway and its redis),
    # BENCH_AGENT_PID three (REPLICAS_RUN)
    a0="$(cpu_ticks ${BENCH_AGENT_PID:-$AGENT_PID})"; [[ -n "$proxy_pid" ]] && p0="$(cpu_ticks $proxy_pid)"
    children_ticks w0; read -r m0 mt0 <<<"$(machine_ticks)"
    load "$script" "$base" "$path" "$DURATION" >"$out" 2>&1 || true
    read -r m1 mt1 <<<"$(machine_ticks)"; children_ticks w1
    # shellcheck disable=SC2086
    a1="$(cpu_ticks ${BENCH_AGENT_PID:-$AGENT_PID})"; [[ -n "$proxy_pid" ]] && p1="$(cpu_ticks $proxy_pid)"
    summary="$(grep '^SUMMARY ' "$out" || true)"
    if [[ -z "$summary" ]]; then
        echo "wrk gave no summary for $label; see $out" >&2
        ROWS+=("$label|-|-|-|-|-|-|-|-|no summary")
        BAD=1
        return
    fi
    field() { sed -E "s/.* $1=([^ ]+).*/\1/" <<<"$summary"; }
    codes="$(awk '/^STATUS /{printf "%s%s:%s", sep, $2, $3; sep=" "}' "$out")"
    local rps p50 p99 non2xx sock
    rps="$(field rps)"; p50="$(field p50_us)"; p99="$(field p99_us)"
    non2xx="$(field non2xx)"; sock="$(field sock_errors)"
    if [[ "$non2xx" != 0 || "$sock" != 0 ]]; then BAD=1; fi
    # CPU microseconds per request spent in the proxy (all its processes) and in the agent.
    local reqs proxy_us agent_us
    reqs="$(field requests)"
    agent_us="$(awk -v t=$((a1 - a0)) -v hz="$CLK_TCK" -v n="$reqs" 'BEGIN{printf "%.1f", t * 1e6 / hz / n}')"
    if [[ -n "$proxy_pid" ]]; then
        proxy_us="$(awk -v t=$((p1 - p0)) -v hz="$CLK_TCK" -v n="$reqs" 'BEGIN{printf "%.1f", t * 1e6 / hz / n}')"
    else
        proxy_us="-"
    fi
    # Share of the machine's CPU taken by anything but the agent, the proxy and wrk.
    local other
    other="$(awk -v busy=$((m1 - m0)) -v tot=$((mt1 - mt0)) -v ours=$(((a1 - a0) + (p1 - p0) + (w1 - w0))) \
        'BEGIN{ o = (busy - ours) * 100 / (tot > 0 ? tot : 1); if (o < 0) o = 0; printf "%.0f%%", o }')"
    echo "CPU proxy_us_per_req=$proxy_us agent_us_per_req=$agent_us other_cpu=$other" >>"$out"
    ROWS+=("$label|$rps|$p50|$p99|$non2xx|$sock|$proxy_us|$agent_us|$other|$codes")
}

fmt_ms() { awk -v us="$1" 'BEGIN{ if (us == "-") print "-"; else printf "%.2f ms", us / 1000 }'; }

# With ROUNDS > 1 the targets take turns (agent nginx gateway agent nginx gateway ...), each run
# labelled -rN, so a burst of outside load hits one round rather than one target.
suffix() { if ((ROUNDS > 1)); then echo "-r$1"; fi; }
if [[ "$FILE_RUN" == 1 ]]; then
    # First: the create runs fill the agent's task map (it keeps its newest 100 000), which
    # would evict the file's task. The same file artifact through each; the gateway streams it (no clients configured, so
    # the agent-prefixed route needs no listing first). Its peak RSS says whether memory stays
    # flat while 10 MiB bodies pass.
    for round in $(seq "$ROUNDS"); do
        for target in $ORDER; do
            case "$target" in
                agent)   BENCH_CONNS=$FILE_CONNS bench "file-agent$(suffix "$round")"   get_task.lua "$AGENT_URL"   "$FILE_PATH" "" ;;
                nginx)   BENCH_CONNS=$FILE_CONNS bench "file-nginx$(suffix "$round")"   get_task.lua "$NGINX_URL"   "$FILE_PATH" "$NGINX_PID" ;;
                gateway) BENCH_CONNS=$FILE_CONNS bench "file-gateway$(suffix "$round")" get_task.lua "$GATEWAY_URL" "/agents/$AGENT_NAME$FILE_PATH" "$GATEWAY_PID" ;;
            esac
        done
    done
    echo "gateway memory after the file runs: $(grep -E '^Vm(HWM|RSS)' "/proc/$GATEWAY_PID/status" | tr -s ' \t' ' ' | tr '\n' ' ')" \
        | tee -a "$RESULTS/env.txt"
fi

# REPLICAS_RUN: the same create and SendMessage through the agents of three replicas, beside the
# one-replica runs (before them in even rounds, after in odd ones: the ledger grows through a run).
post_replicas() {
    BENCH_AGENT_PID="$REPLICA_PIDS" bench "post-replicas$(suffix "$1")" post_task.lua "$GATEWAY_URL" "/agents/$REPLICA_NAME/tasks" "$GATEWAY_CPU"
}
a2a_replicas() {
    BENCH_AGENT_PID="$A2A_REPLICA_PIDS" bench "a2a-replicas$(suffix "$1")" send_message.lua "$GATEWAY_URL" "/agents/$A2A_REPLICA_NAME/jsonrpc" "$GATEWAY_CPU"
}
for round in $(seq "$ROUNDS"); do
    for target in $ORDER; do
        [[ "$POST_RUN" == 1 ]] || break
        case "$target" in
            agent)   bench "post-agent$(suffix "$round")"   post_task.lua "$AGENT_URL"   "/tasks" "" ;;
            nginx)   bench "post-nginx$(suffix "$round")"   post_task.lua "$NGINX_URL"   "/tasks" "$NGINX_PID" ;;
            gateway)
                if [[ "$REPLICAS_RUN" == 1 ]] && ((round % 2 == 0)); then post_replicas "$round"; fi
                bench "post-gateway$(suffix "$round")" post_task.lua "$GATEWAY_URL" "/agents/$AGENT_NAME/tasks" "$GATEWAY_CPU"
                if [[ "$REPLICAS_RUN" == 1 ]] && ((round % 2 == 1)); then post_replicas "$round"; fi ;;
            *) echo "unknown target in ORDER: $target" >&2; exit 2 ;;
        esac
    done
    # The same round: SendMessage to the official A2A agent, direct, through nginx, through the
    # gateway, so both protocols' ratios to nginx come from the same minutes of the machine.
    [[ "$A2A_RUN" == 1 ]] || continue
    for target in $ORDER; do
        case "$target" in
            agent)   BENCH_AGENT_PID=$A2A_AGENT_PID bench "a2a-agent$(suffix "$round")"   send_message.lua "$A2A_AGENT_URL" "/a2a/jsonrpc" "" ;;
            nginx)   BENCH_AGENT_PID=$A2A_AGENT_PID bench "a2a-nginx$(suffix "$round")"   send_message.lua "$NGINX_A2A_URL" "/a2a/jsonrpc" "$NGINX_PID" ;;
            gateway)
                if [[ "$REPLICAS_RUN" == 1 ]] && ((round % 2 == 0)); then a2a_replicas "$round"; fi
                BENCH_AGENT_PID=$A2A_AGENT_PID bench "a2a-gateway$(suffix "$round")" send_message.lua "$GATEWAY_URL" "/agents/$A2A_NAME/jsonrpc" "$GATEWAY_CPU"
                if [[ "$REPLICAS_RUN" == 1 ]] && ((round % 2 == 1)); then a2a_replicas "$round"; fi ;;
        esac
    done
    # And gRPC's SendMessage, in the same round (gRPC on both sides of each proxy).
    if [[ "$GRPC_RUN" == 1 ]]; then
        for target in $ORDER; do
            case "$target" in
                agent)   BENCH_AGENT_PID=$A2A_AGENT_PID bench "grpc-agent$(suffix "$round")"   grpc "$A2A_AGENT_URL"  - "" ;;
                nginx)   BENCH_AGENT_PID=$A2A_AGENT_PID bench "grpc-nginx$(suffix "$round")"   grpc "$NGINX_GRPC_URL" - "$NGINX_PID" ;;
                gateway) BENCH_AGENT_PID=$A2A_AGENT_PID bench "grpc-gateway$(suffix "$round")" grpc "$GATEWAY_URL"    "$GRPC_NAME" "$GATEWAY_CPU" ;;
            esac
        done
    fi
    # And A2A 0.3's message/send, in the same round.
    [[ "$A2A03_RUN" == 1 ]] || continue
    for target in $ORDER; do
        case "$target" in
            agent)   BENCH_AGENT_PID=$A2A03_AGENT_PID bench "a2a03-agent$(suffix "$round")"   send_message_v0_3.lua "$A2A03_AGENT_URL" "/a2a/jsonrpc" "" ;;
            nginx)   BENCH_AGENT_PID=$A2A03_AGENT_PID bench "a2a03-nginx$(suffix "$round")"   send_message_v0_3.lua "$NGINX_A2A03_URL" "/a2a/jsonrpc" "$NGINX_PID" ;;
            gateway) BENCH_AGENT_PID=$A2A03_AGENT_PID bench "a2a03-gateway$(suffix "$round")" send_message_v0_3.lua "$GATEWAY_URL" "/agents/$A2A03_NAME/jsonrpc" "$GATEWAY_CPU" ;;
        esac
    done
done

# What the ledger holds after the create and SendMessage rounds (from the gateway's own
# /metrics: tasks by state, and evictions), so a run meant to grow it past a size can be checked.
LEDGER_LINE="ledger after the rounds: $(curl -s ${WRK_AUTH:+-H "Authorization: $WRK_AUTH"} "$GATEWAY_URL/metrics" \
    | awk '/^a2a_gateway_tasks\{/ { held += $2 } /^a2a_gateway_ledger_evictions_total\{/ { gone += $2 }
        END { printf "%d tasks held, %d evicted", held, gone }'), max_tasks ${MAX_TASKS:-4000000}"
echo "$LEDGER_LINE" | tee -a "$RESULTS/env.txt"

if [[ "$GET_RUN" == 1 ]]; then
    # One task created through the gateway after the POST runs (the sample agent keeps its newest
    # 100 000 tasks), so the agent and the gateway's ledger both know it. It stays SUBMITTED (no
    # --progress), so the gateway forwards every GET to the agent.
    code="$(post "$GATEWAY_URL/agents/$AGENT_NAME/tasks")"
    [[ "$code" =~ ^2 ]] || { echo "cannot create the GET task: $code $(cat "$TMP/ready.body")" >&2; exit 1; }
    TASK_ID="$(sed -E 's/.*"task_id":"([^"]+)".*/\1/' "$TMP/ready.body")"
    echo "GET runs on task $TASK_ID" | tee -a "$RESULTS/env.txt"
    if [[ "$REPLICAS_RUN" == 1 ]]; then
        # And one through the agent of three replicas: its GETs go to the replica holding it.
        code="$(post "$GATEWAY_URL/agents/$REPLICA_NAME/tasks")"
        [[ "$code" =~ ^2 ]] || { echo "cannot create the replicas' GET task: $code $(cat "$TMP/ready.body")" >&2; exit 1; }
        REPLICA_TASK_ID="$(sed -E 's/.*"task_id":"([^"]+)".*/\1/' "$TMP/ready.body")"
        echo "replicas' GET runs on task $REPLICA_TASK_ID" | tee -a "$RESULTS/env.txt"
    fi
    for round in $(seq "$ROUNDS"); do
        for target in $ORDER; do
            case "$target" in
                agent)   bench "get-agent$(suffix "$round")"   get_task.lua "$AGENT_URL"   "/tasks/$TASK_ID" "" ;;
                nginx)   bench "get-nginx$(suffix "$round")"   get_task.lua "$NGINX_URL"   "/tasks/$TASK_ID" "$NGINX_PID" ;;
                gateway)
                    if [[ "$REPLICAS_RUN" == 1 ]] && ((round % 2 == 0)); then
                        BENCH_AGENT_PID="$REPLICA_PIDS" bench "get-replicas$(suffix "$round")" get_task.lua "$GATEWAY_URL" "/agents/$REPLICA_NAME/tasks/$REPLICA_TASK_ID" "$GATEWAY_PID"
                    fi
                    bench "get-gateway$(suffix "$round")" get_task.lua "$GATEWAY_URL" "/agents/$AGENT_NAME/tasks/$TASK_ID" "$GATEWAY_PID"
                    if [[ "$REPLICAS_RUN" == 1 ]] && ((round % 2 == 1)); then
                        BENCH_AGENT_PID="$REPLICA_PIDS" bench "get-replicas$(suffix "$round")" get_task.lua "$GATEWAY_URL" "/agents/$REPLICA_NAME/tasks/$REPLICA_TASK_ID" "$GATEWAY_PID"
                    fi ;;
            esac
        done
    done
fi

RATE_ROWS=()
if [[ "$RATE_RUN" == 1 ]]; then
    # Half (RATE_SHARE) of nginx's best saturated rate in this run, offered to both at a fixed
    # rate: the tail that callers see when neither is saturated.
    best_nginx=0
    for r in "${ROWS[@]}"; do
        [[ "${r%%|*}" == post-nginx* ]] || continue
        v="$(cut -d'|' -f2 <<<"$r")"
        best_nginx="$(awk -v a="$v" -v b="$best_nginx" 'BEGIN{print (a > b ? a : b)}')"
    done
    RATE="$(awk -v n="$best_nginx" -v s="$RATE_SHARE" 'BEGIN{printf "%d", n * s}')"
    if ((RATE < 100)); then echo "RATE_RUN=1 needs a post-nginx run (ORDER with nginx)" >&2; exit 1; fi
    secs="${DURATION%s}"
    for round in $(seq "$ROUNDS"); do
        for target in $ORDER; do
            case "$target" in
                nginx)   url="$NGINX_URL/tasks" ;;
                gateway) url="$GATEWAY_URL/agents/$AGENT_NAME/tasks" ;;
                *) continue ;;
            esac
            label="rate-$target$(suffix "$round")"
            echo "== $label: $RATE req/s for ${secs}s, open loop, $CONNS connections" >&2
            wait_quiet
            "${ON_REST[@]}" "$OPEN_LOOP" "$url" "$RATE" "$secs" "$CONNS" "$BODY" "$WRK_AUTH" \
                >"$RESULTS/$label.txt" 2>&1 || { echo "open loop failed: $(cat "$RESULTS/$label.txt")" >&2; BAD=1; }
            line="$(grep '^OPENLOOP ' "$RESULTS/$label.txt" || true)"
            of() { sed -E "s/.* $1=([^ ]+).*/\1/" <<<"$line"; }
            if [[ -z "$line" || "$(of non2xx)" != 0 || "$(of errors)" != 0 ]]; then BAD=1; fi
            RATE_ROWS+=("$label|$RATE|$(of sent)|$(of p50_us)|$(of p90_us)|$(of p99_us)|$(of p999_us)|$(of late_ms)|$(of non2xx)/$(of errors)")
        done
    done
fi

# --- the table ------------------------------------------------------------------------------------
{
    echo
    echo "wrk -t$THREADS -c$CONNS -d$DURATION (after a $WARMUP warm-up), PIN=$PIN, ROUNDS=$ROUNDS, $(nproc) CPUs"
    printf '%-16s %10s %10s %10s %8s %8s %10s %10s %7s  %s\n' target req/s p50 p99 non-2xx sockerr \
        proxy-cpu agent-cpu other "status codes"
    for row in "${ROWS[@]}"; do
        IFS='|' read -r label rps p50 p99 non2xx sock proxy_us agent_us other codes <<<"$row"
        printf '%-16s %10s %10s %10s %8s %8s %10s %10s %7s  %s\n' "$label" "$rps" "$(fmt_ms "$p50")" \
            "$(fmt_ms "$p99")" "$non2xx" "$sock" "$proxy_us" "$agent_us" "$other" "$codes"
    done
    echo "proxy-cpu, agent-cpu: CPU microseconds per request (user+system) of the proxy's processes and of the agent."
    if [[ "$FILE_RUN" == 1 ]]; then
        for row in "${ROWS[@]}"; do
            IFS='|' read -r label rps _ <<<"$row"
            [[ "$label" == file-* ]] || continue
            awk -v l="$label" -v r="$rps" -v b="$FILE_BYTES" 'BEGIN{printf "%s: %.0f MB/s (%s bytes x %s/s)\n", l, r * b / 1e6, b, r}'
        done
    fi
    if ((${#RATE_ROWS[@]})); then
        echo
        echo "open loop (benches/open_loop.rs): fixed rate, latency from each request's due time"
        printf '%-16s %8s %8s %10s %10s %10s %10s %8s  %s\n' target rate sent p50 p90 p99 p99.9 late non2xx/err
        for row in "${RATE_ROWS[@]}"; do
            IFS='|' read -r label rate sent p50 p90 p99 p999 late errs <<<"$row"
            printf '%-16s %8s %8s %10s %10s %10s %10s %6sms  %s\n' "$label" "$rate" "$sent" "$(fmt_ms "$p50")" \
                "$(fmt_ms "$p90")" "$(fmt_ms "$p99")" "$(fmt_ms "$p999")" "$late" "$errs"
        done
    fi
    echo "other: share of the machine's CPU taken during the run by anything else (builds, tests); above a few % the run is noisy."
    # Best round of each target (outside load only ever slows a run down).
    best_of() {
        local r best=- label
        for r in "${ROWS[@]}"; do
            label="${r%%|*}"
            [[ "$label" == "$1" || "$label" == "$1"-r* ]] || continue
            # A round with non-2xx answers or socket errors does not count (INVALID below).
            [[ "$(cut -d'|' -f5 <<<"$r")" == 0 && "$(cut -d'|' -f6 <<<"$r")" == 0 ]] || continue
            r="$(cut -d'|' -f2 <<<"$r")"
            [[ "$r" == - ]] && continue
            if [[ "$best" == - ]] || awk -v a="$r" -v b="$best" 'BEGIN{exit !(a > b)}'; then best="$r"; fi
        done
        echo "$best"
    }
    for kind in post a2a a2a03 grpc get file; do
        g="$(best_of "$kind-gateway")"; n="$(best_of "$kind-nginx")"
        if [[ "$g" != - && "$n" != - ]]; then
            awk -v g="$g" -v n="$n" -v k="$kind" -v r="$ROUNDS" 'BEGIN{
                printf "%s: gateway %.0f req/s vs nginx %.0f req/s%s: gateway/nginx = %.2f (%s)\n", k, g, n,
                    (r > 1 ? " (best of " r ")" : ""), g / n, (g > n ? "gateway faster" : "gateway SLOWER than nginx") }'
        fi
    done
    if [[ "$REPLICAS_RUN" == 1 ]]; then
        # Median (min-max) over the rounds of one replica's and three replicas' figures.
        med() {
            local label="$1" col="$2" r
            for r in "${ROWS[@]}"; do
                [[ "${r%%|*}" == "$label" || "${r%%|*}" == "$label"-r* ]] || continue
                cut -d'|' -f"$col" <<<"$r"
            done | grep -v '^-$' | sort -g | awk '{ v[NR] = $1 } END { if (!NR) { print "-"; exit }
                m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                printf "%.1f (%.1f-%.1f)", m, v[1], v[NR] }'
        }
        echo "one replica against three (median (min-max) over $ROUNDS rounds): gateway CPU us/req | req/s | p99 us"
        for kind in post a2a get; do
            for who in gateway replicas; do
                [[ " ${ROWS[*]%%|*} " == *" $kind-$who"* ]] || continue
                printf '  %-14s %-24s %-30s %s\n' "$kind-$who" "$(med "$kind-$who" 7)" "$(med "$kind-$who" 2)" "$(med "$kind-$who" 4)"
            done
        done
        # Each replica's share of the tasks made through it (warm-ups and ready checks included).
        curl -s ${WRK_AUTH:+-H "Authorization: $WRK_AUTH"} "$GATEWAY_URL/agents" | jq -r --arg a "$REPLICA_NAME" --arg b "$A2A_REPLICA_NAME" '
            .agents[] | select(.name == $a or .name == $b)
            | (([.replicas[].tasks_held] | add) as $t
               | "tasks held by \(.name)'"'"'s replicas: " + ([.replicas[] | "\(.address // "?") \(.tasks_held) (\(if $t > 0 then (.tasks_held * 1000 / $t | round / 10) else 0 end)%)"] | join(", ")))'
    fi
    if ((BAD)); then
        echo "INVALID: some run had non-2xx answers or socket errors; its req/s does not count."
    fi
    echo "$LEDGER_LINE"
    echo "raw wrk outputs: $RESULTS"
} | tee "$RESULTS/table.txt"

exit "$BAD"
