#!/usr/bin/env bash
# Schemathesis against a live gateway: checks that what the gateway answers is what
# GET /openapi.json documents, and that its credentials and ownership hold.
#
# Starts two sample agents (`a2a-gateway sample-agent --progress`), one official A2A sample
# agent (`--protocol a2a`, named echo) and the built gateway in front of them, with three clients (alice and bob: tasks, streams, events; ops: metrics,
# admin, rate-limited), an agent ingest token and a webhook subscriber that always fails (so
# dead letters exist). Validates the served document (openapi-spec-validator, and byte-equal
# to the one in the repo), then runs schemathesis with a fixed seed, a bounded number of
# examples per operation, a request timeout, bounded event streams and a wall-time cap. Exits
# non-zero on any failure, and stops every process it started. Needs the packages of
# tests/requirements/schemathesis.txt, curl, and a built binary (cargo build --bin a2a-gateway).
#
# Environment (all optional):
#   A2A_GATEWAY_BIN           the binary (default: $CARGO_TARGET_DIR or target, /debug/a2a-gateway)
#   SCHEMATHESIS_SEED         the seed (default 14)
#   SCHEMATHESIS_MAX_EXAMPLES examples per operation and phase (default 50: about 90 s here)
#   SCHEMATHESIS_WALL_SECS    the cap on the schemathesis run (default 240)
#   SCHEMATHESIS_REPORT_DIR   where the reports (JUnit, HAR) and the logs go (default
#                             schemathesis/ in that target directory)
#   SCHEMATHESIS_EXTRA        more `st run` options, split on spaces (e.g. --output-sanitize false)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
bin=${A2A_GATEWAY_BIN:-$target/debug/a2a-gateway}
seed=${SCHEMATHESIS_SEED:-14}
max_examples=${SCHEMATHESIS_MAX_EXAMPLES:-50}
wall=${SCHEMATHESIS_WALL_SECS:-240}
report=${SCHEMATHESIS_REPORT_DIR:-$target/schemathesis}

[[ -x $bin ]] || { echo "run.sh: no gateway binary at $bin (cargo build --bin a2a-gateway)" >&2; exit 2; }
need="pip install -r tests/requirements/schemathesis.txt"
command -v st >/dev/null || { echo "run.sh: schemathesis is not installed ($need)" >&2; exit 2; }
python3 -c 'import openapi_spec_validator' 2>/dev/null || { echo "run.sh: openapi-spec-validator is not installed ($need)" >&2; exit 2; }
command -v curl >/dev/null || { echo "run.sh: curl is needed" >&2; exit 2; }

work=$(mktemp -d)
mkdir -p "$report"
pids=()
cleanup() {
    local status=$?
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    cp "$work"/*.log "$report"/ 2>/dev/null || true
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Start "$@" in the background with its output in $work/$name.log, and set $url to the first
# URL it announces on stdout ("... listening on http://..."). Not in a subshell: $pids must
# keep the process for the cleanup.
start() {
    local name=$1
    shift
    "$@" >"$work/$name.log" 2>"$work/$name.err.log" &
    pids+=($!)
    url=""
    for _ in $(seq 1 200); do
        url=$(grep -o 'listening on http://[0-9.:]*' "$work/$name.log" 2>/dev/null | head -n1 | cut -d' ' -f3 || true)
        [[ -n $url ]] && break
        kill -0 "${pids[-1]}" 2>/dev/null || break
        sleep 0.05
    done
    [[ -n $url ]] || { echo "run.sh: $name did not start:" >&2; cat "$work/$name.err.log" >&2; exit 1; }
}

sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }

alice=alice-key-0123456789abcdef
bob=bob-key-0123456789abcdef
ops=ops-key-0123456789abcdef
ingest=ingest-token-0123456789abcdef

start scripts "$bin" sample-agent --listen 127.0.0.1:0 --progress
scripts=$url
start summaries "$bin" sample-agent --listen 127.0.0.1:0 --progress
summaries=$url
start echo "$bin" sample-agent --protocol a2a --listen 127.0.0.1:0 --progress
echo_agent=$url

cat >"$work/gateway.toml" <<EOF
listen = "127.0.0.1:0"
workers = 1

[[clients]]
name = "alice"
key_sha256 = "$(sha "$alice")"
can = ["tasks", "streams", "events"]

[[clients]]
name = "bob"
key_sha256 = "$(sha "$bob")"
can = ["tasks", "streams", "events"]

[[clients]]
name = "ops"
key_sha256 = "$(sha "$ops")"
can = ["metrics", "admin"]
# Rate-limited, so that 429 RATE_LIMITED and its headers are among the answers checked.
rate_per_sec = 4
burst = 8

[[agents]]
name = "scripts"
url = "$scripts"
ingest_token = "$ingest"

[[agents]]
name = "summaries"
url = "$summaries"
ingest_token = "$ingest"

# An official A2A agent: the a2a-tagged operations (example name "echo") are its, and the
# templates both protocols share (/agents/{name}/...) are tried with either agent's name (their
# `name` examples are "scripts" and "echo"): each answers in its agent's protocol's shape.
[[agents]]
name = "echo"
url = "$echo_agent"
protocol = "a2a"

# A subscriber nothing listens for: its deliveries fail and are dead-lettered within seconds.
[[subscribers]]
name = "orchestrator"
url = "http://127.0.0.1:9/hooks"

[webhooks]
allow = ["127.0.0.1/32"]
retry_schedule_secs = [1]
max_attempts = 2
timeout_ms = 1000
visibility_timeout_secs = 6

[streams]
ping_interval_ms = 200
EOF
"$bin" check-config --config "$work/gateway.toml" >/dev/null
start gateway "$bin" --config "$work/gateway.toml"
base=$url

for _ in $(seq 1 200); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' "$base/readyz") == 200 ]] && break
    sleep 0.05
done
[[ $(curl -s -o /dev/null -w '%{http_code}' "$base/readyz") == 200 ]] || { echo "run.sh: the gateway never got ready" >&2; exit 1; }

# The served document is the one in the repo, and valid OpenAPI 3.1 (schemathesis would also
# refuse an invalid one, less legibly). Schemathesis reads this copy rather than the URL: given
# the URL, it leaves GET /openapi.json itself out of the operations it tests.
curl -sf "$base/openapi.json" -o "$work/openapi.json"
cmp "$work/openapi.json" "$root/crates/gateway/src/http/openapi.json"
python3 -c '
import sys
from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename
doc, _ = read_from_filename(sys.argv[1])
validate(doc)
print("openapi.json: valid OpenAPI", doc["openapi"], "with", len(doc["paths"]), "paths")
' "$work/openapi.json"

# The identities, in the order schemathesis tries them on an operation that refuses one: alice
# first; bob is alice's peer (neither may read the other's tasks); ops for metrics and admin;
# the agent's ingest token for pushes.
cat >"$work/auth.json" <<EOF
{
  "auth": [
    {"name": "alice", "fixedHeaders": [{"name": "Authorization", "value": "Bearer $alice"}]},
    {"name": "bob", "fixedHeaders": [{"name": "Authorization", "value": "Bearer $bob"}]},
    {"name": "ops", "fixedHeaders": [{"name": "Authorization", "value": "Bearer $ops"}]},
    {"name": "agent", "fixedHeaders": [{"name": "Authorization", "value": "Bearer $ingest"}]}
  ]
}
EOF
cat >"$work/schemathesis.toml" <<EOF
# Event streams are read until they end, 5 events, or the request timeout.
max-stream-events = 5

# Nothing carried over from an earlier run (which identity each operation settled on): every
# run starts from the same state.
[cache]
enabled = false

[auth.wfc]
path = "$work/auth.json"
peers = ["alice", "bob"]

# The checks run (here rather than on the command line, so an operation can leave one out).
# peer_refused and a2a_peer_refused are hooks.py's.
[checks]
enabled = false
not_a_server_error.enabled = true
status_code_conformance.enabled = true
content_type_conformance.enabled = true
response_schema_conformance.enabled = true
response_headers_conformance.enabled = true
ignored_auth.enabled = true
object_level_authorization.enabled = true
peer_refused.enabled = true
a2a_peer_refused.enabled = true
negative_data_rejection.enabled = true
unsupported_method.enabled = true
allow_header_conformance.enabled = true
ensure_resource_availability.enabled = true
missing_required_header.enabled = true

# Values are not carried from one operation's answers to another's parameters: one path
# template is a Clawpedia route on a Clawpedia agent and an official A2A route on an A2A agent
# (the agent's protocol decides), which one operation per path and method cannot say, so a
# name from GET /agents would put the other protocol's agent on an operation. The documented
# links (creates to their task's routes, SendMessage to GetTask, CancelTask and ListTasks) are
# followed; tests/it/openapi.rs checks every template on its own protocol's agent.
[phases.examples.extra-data-sources]
responses = false
[phases.fuzzing.extra-data-sources]
responses = false
[phases.coverage.extra-data-sources]
responses = false
[phases.stateful.inference]
algorithms = ["location-headers"]

# JSON-RPC answers its errors with 200 (§9: the error is in the body), whatever the request:
# one without A2A-Version, or not the proto's, gets its JSON-RPC error with 200.
[[operations]]
include-operation-id = ["a2aJsonRpc", "a2aFleet"]
checks.negative_data_rejection.enabled = false
checks.missing_required_header.enabled = false

# SendMessage's documented body is the plain text message clients send most, so that what
# schemathesis generates is a message and its links (GetTask, CancelTask, ListTasks) reach
# real A2A tasks; the gateway takes every message of the proto, so a body outside that subset
# is not an invalid one.
[[operations]]
include-operation-id = "a2aSendMessage"
checks.negative_data_rejection.enabled = false

# The gRPC service (application/grpc, HTTP/2): nothing schemathesis can write (no serializer for
# protobuf), and its answers are HTTP 200 with the status in trailers. The conformance kit's gRPC
# transport and a2a-sdk's gRPC client test it (tests/it/a2a_grpc.rs, scripts/tck-through-gateway.sh);
# a request at its path that is not gRPC gets plain HTTP errors, tested in tests/it/a2a_grpc.rs.
[[operations]]
include-operation-id = ["a2aGrpc", "a2aAgentGrpc"]
enabled = false

# /agents/{name}/tasks takes GET (ListTasks) on an A2A agent and POST (create) on a Clawpedia
# one: its Allow header names the agent's method, never both.
[[operations]]
include-path = "/agents/{name}/tasks"
checks.allow_header_conformance.enabled = false
EOF

echo "schemathesis $(st --version | awk '{print $NF}') against $base: seed $seed, $max_examples examples, cap ${wall}s"
started=$(date +%s)
status=0
# peer_refused (hooks.py): the owner's reads of what the built-in check cannot compare (an
# artifact's content, a task's stream), replayed with the peer's key.
export SCHEMATHESIS_HOOKS=$root/tests/schemathesis/hooks.py A2A_OWNER_KEY=$alice A2A_PEER_KEY=$bob
# The official A2A routes (tag a2a) are the `echo` agent's; the SDK tests drive them too
# (tests/it/a2a_*.rs), with both official SDKs.
timeout --kill-after=10 "$wall" st --config-file "$work/schemathesis.toml" run "$work/openapi.json" --url "$base" \
    --seed "$seed" \
    --max-examples "$max_examples" \
    --request-timeout 5 \
    --workers 1 \
    --generation-database none \
    --suppress-health-check all \
    --no-color \
    ${SCHEMATHESIS_EXTRA:-} \
    --report junit,har --report-junit-path "$report/junit.xml" --report-har-path "$report/requests.har" &
# In the background and waited for, so that a TERM to this script runs the cleanup at once.
pids+=($!)
wait "${pids[-1]}" || status=$?
echo "schemathesis: exit $status after $(($(date +%s) - started))s"
if [[ $status == 124 || $status == 137 ]]; then
    echo "run.sh: schemathesis did not finish within ${wall}s" >&2
fi
exit "$status"
