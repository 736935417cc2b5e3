#!/usr/bin/env bash
# Offline checks of what deploy/ ships for monitoring (CI runs this; no gateway, no network):
#   - deploy/prometheus/alerts.yml is valid (promtool check rules),
#   - every alert passes its unit tests, firing and quiet (promtool test rules),
#   - deploy/prometheus.yml is a valid config with its credentials file and rule file in place
#     (a temporary copy with those two /etc/prometheus paths pointed at real files),
#   - deploy/grafana/a2a-gateway.json parses as JSON and looks like an importable dashboard, and
#     every query in it is valid PromQL (checked by promtool as recording rules, with Grafana's
#     $__rate_interval and template variables filled in).
# That every metric these files name is really exported is checked against a live gateway by
# `cargo test --test it monitoring`. Needs promtool (Debian: apt-get install -y prometheus) and
# python3.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v promtool >/dev/null || { echo "promtool is required (apt-get install -y prometheus)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }

rules=deploy/prometheus/alerts.yml
rule_tests=deploy/prometheus/alerts.test.yml
config=deploy/prometheus.yml
dashboard=deploy/grafana/a2a-gateway.json

echo "== promtool check rules $rules"
promtool check rules "$rules"

echo "== promtool test rules $rule_tests"
promtool test rules "$rule_tests"

echo "== promtool check config $config"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
key=/etc/prometheus/a2a-gateway.key
installed_rules=/etc/prometheus/a2a-gateway-alerts.yml
for path in "$key" "$installed_rules"; do
  grep -qF "$path" "$config" || { echo "$config no longer names $path: update this script" >&2; exit 1; }
done
printf 'a-key-for-the-check\n' >"$tmp/a2a-gateway.key"
sed -e "s#$key#$tmp/a2a-gateway.key#" -e "s#$installed_rules#$PWD/$rules#" "$config" >"$tmp/prometheus.yml"
promtool check config "$tmp/prometheus.yml"

echo "== dashboard $dashboard"
python3 - "$dashboard" "$tmp/dashboard-queries.yml" <<'PY'
import json, sys

path, queries_out = sys.argv[1], sys.argv[2]
with open(path) as f:
    d = json.load(f)
problems = []
if not isinstance(d.get("schemaVersion"), int):
    problems.append("no integer schemaVersion")
variables = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
ds = variables.get("datasource")
if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
    problems.append("no `datasource` variable of type datasource (query prometheus)")
for name in ("agent", "client"):
    if name not in variables:
        problems.append(f"no `{name}` template variable")
panels = d.get("panels", [])
seen_ids = set()
graphs = 0
for p in panels:
    if p.get("id") in seen_ids:
        problems.append(f"panel id {p.get('id')} used twice")
    seen_ids.add(p.get("id"))
    if p.get("type") == "row":
        continue
    graphs += 1
    title = p.get("title", "?")
    if not p.get("description"):
        problems.append(f"panel {title!r} has no description")
    if p.get("datasource", {}).get("uid") != "${datasource}":
        problems.append(f"panel {title!r} does not use ${{datasource}}")
    targets = p.get("targets") or []
    if not targets or not all(t.get("expr") for t in targets):
        problems.append(f"panel {title!r} has a target without expr")
    for t in targets:
        if t.get("datasource", {}).get("uid") != "${datasource}":
            problems.append(f"a target of {title!r} does not use ${{datasource}}")
if problems:
    print("\n".join(f"  FAILED: {p}" for p in problems))
    sys.exit(1)
rows = sum(1 for p in panels if p.get("type") == "row")
print(f"  SUCCESS: {graphs} panels in {rows} rows, schemaVersion {d['schemaVersion']}")
# Every panel query as a recording rule, for promtool to parse.
with open(queries_out, "w") as out:
    out.write("groups:\n  - name: dashboard-queries\n    rules:\n")
    for p in panels:
        for t in p.get("targets") or []:
            expr = t["expr"].replace("$__rate_interval", "5m")
            for var in ("agent", "client", "subscriber"):
                expr = expr.replace("$" + var, ".*")
            out.write(f"      - record: dashboard:panel_{p['id']}_{t['refId']}\n")
            out.write(f"        expr: {json.dumps(expr)}\n")
PY
echo "== the dashboard's queries parse (promtool check rules)"
promtool check rules "$tmp/dashboard-queries.yml"
echo "monitoring checks passed"
