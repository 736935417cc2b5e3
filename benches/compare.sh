#!/usr/bin/env bash
# Two builds of the gateway, measured alternately in one session: the SSE fan-out bench (RSS per
# subscriber at SUBSCRIBERS, CPU per copy) and the load run (create through the gateway: req/s,
# p99, CPU us per create), ROUNDS times each, the order flipping every round so neither build
# always runs first. Each run's `other` CPU share (anything that is not the bench) is printed.
#
#   cargo bench --bench sse_fanout --no-run          # the client, built once
#   bash benches/compare.sh OLD_BINARY NEW_BINARY    # e.g. a copy of target/release/a2a-gateway
#                                                    # built at an older commit, then this one's
# Knobs: ROUNDS (5), SUBSCRIBERS (10000; a list such as 2000,10000 runs each), ROUTES (agent;
# "agent agentless" measures both stream routes), OUT (target/compare-<date>), and the load
# run's own.
# Medians: sort each column of OUT/fanout.txt and OUT/load.txt per build.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
[[ $# == 2 ]] || { echo "usage: $0 OLD_BINARY NEW_BINARY" >&2; exit 2; }
declare -A BIN=([old]="$(realpath "$1")" [new]="$(realpath "$2")")
ROUNDS="${ROUNDS:-5}"
SUBSCRIBERS="${SUBSCRIBERS:-10000}"
ROUTES="${ROUTES:-agent}"
OUT="${OUT:-$ROOT/target/compare-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
FANOUT="$(ls -t "$ROOT"/target/release/deps/sse_fanout-* 2>/dev/null | grep -v '\.d$' | head -1)"
[[ -x "$FANOUT" ]] || { echo "build the client first: cargo bench --bench sse_fanout --no-run" >&2; exit 1; }

# "busy total" jiffies of the whole machine, from /proc/stat.
busy() { read -r _ u n s i io irq sirq st _r </proc/stat; echo "$((u+n+s+irq+sirq+st)) $((u+n+s+i+io+irq+sirq+st))"; }
hz="$(getconf CLK_TCK)"

fanout() { # which route
    local which=$1 route=$2 b0 t0 b1 t1 u s e other
    read -r b0 t0 < <(busy)
    /usr/bin/time -f "%U %S %e" -o "$OUT/time.tmp" env A2A_GATEWAY_BIN="${BIN[$which]}" \
        SUBSCRIBERS="$SUBSCRIBERS" ROUTE="$route" "$FANOUT" --bench >"$OUT/fanout.tmp" 2>>"$OUT/fanout.err"
    read -r b1 t1 < <(busy)
    read -r u s e <"$OUT/time.tmp"
    # The bench's own CPU includes the gateway (its child): the rest of the machine is `other`.
    other=$(awk -v b=$((b1 - b0)) -v t=$((t1 - t0)) -v hz="$hz" -v u="$u" -v s="$s" \
        'BEGIN{o = (b / hz - (u + s)) * 100 / (t / hz); if (o < 0) o = 0; printf "%.0f%%", o}')
    grep "sse_fanout N=" "$OUT/fanout.tmp" | sed "s/^/$which route=$route other=$other /" | tee -a "$OUT/fanout.txt"
}

load() { # which
    local which=$1
    ROUNDS=1 A2A_GATEWAY_BIN="${BIN[$which]}" SKIP_BUILD=1 ORDER=gateway GET_RUN=0 \
        RESULTS_DIR="$OUT/load-$which-$(date +%s%N)" bash "$HERE/load/run.sh" >"$OUT/load.tmp" 2>&1
    echo "$which $(grep -E '^post-gateway' "$OUT/load.tmp" | head -1)" | tee -a "$OUT/load.txt"
}

for r in $(seq "$ROUNDS"); do
    order=(old new)
    ((r % 2)) || order=(new old)
    for route in $ROUTES; do
        for w in "${order[@]}"; do fanout "$w" "$route"; done
    done
    for w in "${order[@]}"; do load "$w"; done
done
echo "results: $OUT"
