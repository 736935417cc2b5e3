#!/usr/bin/env bash
# What one official A2A SendMessage keeps in Redis: a redis-server of its own, the sample agent
# (official A2A, JSON-RPC), a gateway on that Redis with one client (so the task, its messageId
# and its context are a client's, as in production), wrk sending SendMessage with a new
# messageId each for DURATION; then Redis's used_memory and key count before and after, per
# message, and the keys by kind (from a SCAN).
#
#   benches/load/redis_bytes.sh                  # DURATION=20s, the debug build (bytes do not
#                                                # depend on the build)
#   A2A_GATEWAY_BIN=target/release/a2a-gateway DURATION=60s benches/load/redis_bytes.sh
#
# Needs redis-server, redis-cli and wrk (Debian). Prints one summary block.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${A2A_GATEWAY_BIN:-target/debug/a2a-gateway}
DURATION=${DURATION:-20s}
[[ -x $BIN ]] || cargo build --quiet
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
RPORT=$(free_port)
APORT=$(free_port)
redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --logfile "$work/redis.log" --daemonize no &
pids+=($!)
"$BIN" sample-agent --listen "127.0.0.1:$APORT" --protocol a2a >"$work/agent.log" 2>&1 &
pids+=($!)
KEY=bytes-key-0123456789abcdef
SHA=$(printf %s "$KEY" | sha256sum | cut -d' ' -f1)
cat >"$work/gw.toml" <<EOF
listen = "127.0.0.1:0"
workers = 2
[[agents]]
name = "echo"
protocol = "a2a"
url = "http://127.0.0.1:$APORT"
[[clients]]
name = "load"
key_sha256 = "$SHA"
[redis]
url = "redis://127.0.0.1:$RPORT"
prefix = "b:"
EOF
for _ in $(seq 50); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
"$BIN" --config "$work/gw.toml" >"$work/gw.out" 2>"$work/gw.err" &
pids+=($!)
for _ in $(seq 100); do grep -q "listening on" "$work/gw.out" 2>/dev/null && break; sleep 0.1; done
ADDR=$(sed -n 's/.*listening on http:\/\///p' "$work/gw.out" | head -1)
for _ in $(seq 100); do
  curl -sf "http://$ADDR/readyz" >/dev/null && break
  sleep 0.2
done
mem() { redis-cli -p "$RPORT" info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p'; }
keys() { redis-cli -p "$RPORT" dbsize; }
m0=$(mem)
k0=$(keys)
WRK_LUA_DIR=benches/load WRK_PATH=/agents/echo/jsonrpc WRK_AUTH="Bearer $KEY" \
  wrk -t2 -c16 -d "$DURATION" -s benches/load/send_message.lua "http://$ADDR" >"$work/wrk.out"
m1=$(mem)
k1=$(keys)
msgs=$(awk '/requests in/ {print $1}' "$work/wrk.out")
ok=$(grep -Eo '"?200"?[:=] *[0-9]+' "$work/wrk.out" | grep -Eo '[0-9]+$' | head -1 || true)
echo "messages sent: $msgs (answered 200 without error: ${ok:-?})"
sed -n '/status/,$p' "$work/wrk.out" | head -5
echo "used_memory: $m0 -> $m1 B: $(( (m1 - m0) / msgs )) B per message"
echo "keys: $k0 -> $k1: $(awk -v a="$k0" -v b="$k1" -v n="$msgs" 'BEGIN { printf "%.2f", (b - a) / n }') per message"
echo "keys by kind (a SCAN of every key, kind = the name with its ids left out):"
redis-cli -p "$RPORT" --scan \
  | sed -E 's/^b:(\{[^}]*\})?//; s/:[^:]*$/:*/' | sort | uniq -c | sort -rn | head -20
echo "TTL and MEMORY USAGE of one key of each kind:"
for pat in '*:task:*' '*idem:msg:*' '*:ctx:*' '*:ctxo:*' '*:ls:c:*' '*:live:*'; do
  k=$(redis-cli -p "$RPORT" --scan --pattern "$pat" | head -1 || true)
  if [[ -n $k ]]; then
    echo "  $pat: $(redis-cli -p "$RPORT" ttl "$k") s, $(redis-cli -p "$RPORT" memory usage "$k") B"
  fi
done
