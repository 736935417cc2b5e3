#!/usr/bin/env bash
# Validate deploy/ offline: no cluster, no Docker engine, no systemd running the unit. Exits
# non-zero on the first failing section (each prints what failed).
#
#   bash deploy/check-manifests.sh
#   A2A_GATEWAY_BIN=target/debug/a2a-gateway bash deploy/check-manifests.sh   # + the binary's checks
#
# Needs: python3 with PyYAML and jsonschema, kubernetes-validate (all from PyPI:
#   pip install -r tests/requirements/deploy.txt
# ), and systemd-analyze (Debian's systemd package). Optional: kubectl (kustomize rendering)
# and A2A_GATEWAY_BIN (check-config on the shipped configs, the probe subcommand); each is
# skipped with a message when absent.
#
# 1. Kubernetes: every resource of deploy/k8s/kustomization.yaml against Kubernetes
#    $K8S_VERSION's schemas, strictly (an unknown field fails); a kind without a schema fails
#    too (kubernetes-validate only warns). The ServiceMonitor, a CRD that kubernetes-validate
#    has no schema for, against the Prometheus Operator's CRD schema vendored in
#    deploy/schemas/, made strict the same way. Then what schemas cannot see: probes, drain
#    timing against terminationGracePeriodSeconds, the security context, selectors, and every
#    *_file of the ConfigMap's gateway.toml present in the projected volume.
# 2. Compose: deploy/docker-compose.yml against the compose-spec JSON schema, vendored in
#    deploy/schemas/compose-spec.json (from github.com/compose-spec/compose-spec,
#    Apache-2.0; see deploy/schemas/README.md), plus health-gated dependencies and ports.
# 3. systemd: `systemd-analyze verify` and `systemd-analyze security --offline=yes` on
#    deploy/a2a-gateway.service, which must score at most 3.0.
# 4. With A2A_GATEWAY_BIN: `check-config` on the ConfigMap's gateway.toml laid out as the pod
#    sees it (with the Secret's placeholder files) and on deploy/replica.toml, and `probe`.
set -euo pipefail
# A relative A2A_GATEWAY_BIN is relative to where the script was started, not to deploy/.
if [[ -n ${A2A_GATEWAY_BIN:-} ]]; then
  [[ -x $A2A_GATEWAY_BIN ]] || { echo "FAIL: A2A_GATEWAY_BIN=$A2A_GATEWAY_BIN is not executable" >&2; exit 1; }
  A2A_GATEWAY_BIN=$(realpath "$A2A_GATEWAY_BIN")
fi
cd "$(dirname "$0")"   # deploy/

K8S_VERSION="${K8S_VERSION:-1.31.0}"
# systemd-analyze's --threshold counts in tenths: 30 is the "3.0" it prints.
SYSTEMD_MAX_EXPOSURE=30

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
section() { printf '\n== %s\n' "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

section "tools"
python3 -c 'import yaml, jsonschema' 2>/dev/null \
  || fail "python3 needs PyYAML and jsonschema: pip install -r tests/requirements/deploy.txt"
command -v kubernetes-validate >/dev/null \
  || fail "kubernetes-validate is missing: pip install -r tests/requirements/deploy.txt"
command -v systemd-analyze >/dev/null \
  || fail "systemd-analyze is missing: apt-get install systemd"
echo "kubernetes-validate $(kubernetes-validate --version), $(systemd-analyze --version | head -1)"

# ---------------------------------------------------------------------------------------------
section "Kubernetes: deploy/k8s against Kubernetes $K8S_VERSION (strict)"
python3 - >"$tmp/resources" <<'PY' || fail "deploy/k8s and its kustomization.yaml disagree"
import os, sys, yaml
k = yaml.safe_load(open("k8s/kustomization.yaml"))
listed = k.get("resources", [])
for f in listed:
    if not os.path.isfile(os.path.join("k8s", f)):
        sys.exit(f"kustomization.yaml lists {f}, which does not exist")
# Every manifest is either applied by the kustomization or, for a CRD kind, checked below.
extra = sorted(set(f for f in os.listdir("k8s") if f.endswith(".yaml"))
               - set(listed) - {"kustomization.yaml", "servicemonitor.yaml"})
if extra:
    sys.exit(f"k8s/{', '.join(extra)}: not in kustomization.yaml's resources")
print("\n".join("k8s/" + f for f in listed))
PY
mapfile -t resources <"$tmp/resources"
((${#resources[@]})) || fail "kustomization.yaml lists no resources"
out=$(kubernetes-validate --strict -k "$K8S_VERSION" "${resources[@]}" 2>&1) && rc=0 || rc=$?
echo "$out"
((rc == 0)) || fail "kubernetes-validate failed"
# A resource whose kind has no schema is only a WARN (exit 0): here it is a failure.
! grep -qE '^(WARN|ERROR|FATAL)' <<<"$out" || fail "kubernetes-validate could not validate everything"

if command -v kubectl >/dev/null; then
  # What `kubectl apply -k` would send, after kustomize's own processing.
  kubectl kustomize k8s >"$tmp/rendered.yaml" || fail "kubectl kustomize deploy/k8s"
  out=$(kubernetes-validate --strict -k "$K8S_VERSION" "$tmp/rendered.yaml" 2>&1) && rc=0 || rc=$?
  echo "$out" | sed "s#$tmp/rendered.yaml#kustomize output#"
  ((rc == 0)) && ! grep -qE '^(WARN|ERROR|FATAL)' <<<"$out" || fail "kustomize output does not validate"
else
  echo "skipped: kubectl kustomize (kubectl not installed); each resource file was validated"
fi

section "Kubernetes: servicemonitor.yaml against the vendored ServiceMonitor CRD (strict)"
python3 - <<'PY'
import sys, yaml, jsonschema

crd = yaml.safe_load(open("schemas/monitoring.coreos.com_servicemonitors.yaml"))
schema = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]

def strict(s):
    # The API server prunes unknown fields of a structural CRD schema silently: refuse them
    # here instead, as kubernetes-validate --strict does for core kinds.
    if isinstance(s, dict):
        if "properties" in s and "additionalProperties" not in s \
                and not s.get("x-kubernetes-preserve-unknown-fields"):
            s["additionalProperties"] = False
        for v in s.values():
            strict(v)
    elif isinstance(s, list):
        for v in s:
            strict(v)
    return s

validator = jsonschema.Draft7Validator(strict(schema))
docs = [d for d in yaml.safe_load_all(open("k8s/servicemonitor.yaml")) if d]
bad = 0
for d in docs:
    if (d.get("apiVersion"), d.get("kind")) != ("monitoring.coreos.com/v1", "ServiceMonitor"):
        sys.exit(f"servicemonitor.yaml: unexpected {d.get('apiVersion')} {d.get('kind')}")
    for e in validator.iter_errors(d):
        bad += 1
        print(f"ERROR servicemonitor.yaml: {'.'.join(map(str, e.path))}: {e.message}")
    if bad == 0:
        print(f"INFO servicemonitor.yaml passed for servicemonitor/{d['metadata']['name']} "
              f"against the CRD of operator {crd['metadata']['annotations']['operator.prometheus.io/version']}")
sys.exit(1 if bad else 0)
PY

section "Kubernetes: what the schemas do not check"
python3 - "$tmp/pod" <<'PY'
import os, re, sys, tomllib, yaml

pod_root = sys.argv[1]
docs = []
for f in sorted(os.listdir("k8s")):
    if f.endswith(".yaml") and f != "kustomization.yaml":
        docs += [(f, d) for d in yaml.safe_load_all(open(os.path.join("k8s", f))) if d]
def one(kind):
    found = [d for _, d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]
problems = []
def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        problems.append(what)

dep, svc, pdb, cm = one("Deployment"), one("Service"), one("PodDisruptionBudget"), one("ConfigMap")
secrets = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "Secret"}
spec = dep["spec"]
pod = spec["template"]["spec"]
labels = spec["template"]["metadata"]["labels"]
c = pod["containers"][0]
port = {p["name"]: p["containerPort"] for p in c["ports"]}

check(spec["replicas"] >= 2, f"Deployment: replicas >= 2 ({spec['replicas']})")
check(c["livenessProbe"]["httpGet"]["path"] == "/healthz", "liveness probe on /healthz")
check(c["readinessProbe"]["httpGet"]["path"] == "/readyz", "readiness probe on /readyz")
check(c["readinessProbe"].get("failureThreshold", 3) >= 3,
      f"readiness probe: failureThreshold >= 3 ({c['readinessProbe'].get('failureThreshold', 3)}): one slow answer must not take a pod out")
for kind in ("requests", "limits"):
    check({"cpu", "memory"} <= set(c.get("resources", {}).get(kind, {})), f"resources.{kind}: cpu and memory")

psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
check(psc.get("runAsNonRoot") is True and csc.get("runAsNonRoot", True) is True, "runAsNonRoot")
check(isinstance(psc.get("runAsUser"), int) and psc["runAsUser"] > 0, "runAsUser numeric, not 0")
check(csc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem")
check(csc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation: false")
check(csc.get("capabilities", {}).get("drop") == ["ALL"], "capabilities: drop ALL")
check((csc.get("seccompProfile") or psc.get("seccompProfile", {})).get("type") == "RuntimeDefault",
      "seccompProfile RuntimeDefault")
ann = spec["template"]["metadata"].get("annotations", {})
check(ann.get("prometheus.io/scrape") == "true" and int(ann.get("prometheus.io/port", 0)) == port["http"],
      "prometheus.io annotations name the http port")

def matches(sel):
    return sel and all(labels.get(k) == v for k, v in sel.items())
check(spec["selector"]["matchLabels"] == {k: labels[k] for k in spec["selector"]["matchLabels"]},
      "Deployment selector matches its pod labels")
check(matches(svc["spec"]["selector"]), "Service selects the gateway pods")
check(all(p["targetPort"] in port for p in svc["spec"]["ports"]), "Service targetPort names a container port")
check(matches(pdb["spec"]["selector"]["matchLabels"]), "PodDisruptionBudget selects the gateway pods")
mu = pdb["spec"].get("maxUnavailable")
check(mu is not None and mu < spec["replicas"] or pdb["spec"].get("minAvailable", spec["replicas"]) < spec["replicas"],
      "PodDisruptionBudget lets a drain proceed one pod at a time")
sm = [d for _, d in docs if d["kind"] == "ServiceMonitor"]
for d in sm:
    check(all(d["spec"]["selector"]["matchLabels"].get(k) == v for k, v in svc["metadata"]["labels"].items()
              if k in d["spec"]["selector"]["matchLabels"])
          and all(e["port"] in {p["name"] for p in svc["spec"]["ports"]} for e in d["spec"]["endpoints"]),
          "ServiceMonitor selects the Service and names its port")
    cred = d["spec"]["endpoints"][0]["authorization"]["credentials"]
    check(cred["key"] in secrets.get(cred["name"], {}).get("stringData", {}),
          f"ServiceMonitor's credentials ({cred['name']}/{cred['key']}) exist in secret.yaml")

# Lay the config volume out as the kubelet would, from the projected volume's sources.
args = c.get("args", [])
config_path = args[args.index("--config") + 1]
mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
vol = next(v for v in pod["volumes"] if os.path.commonpath([mounts[v["name"]], config_path]) == mounts[v["name"]])
mount = mounts[vol["name"]]
check(vol["projected"].get("defaultMode", 0o644) & 0o007 == 0, "config volume: not world-readable")
for src in vol["projected"]["sources"]:
    if "configMap" in src:
        data, name = cm["data"], src["configMap"]["name"]
        check(name == cm["metadata"]["name"], f"projected ConfigMap {name} is configmap.yaml's")
    else:
        name = src["secret"]["name"]
        data = secrets.get(name, {}).get("stringData", {})
        check(name in secrets, f"projected Secret {name} is in secret.yaml")
    for item in src[next(iter(src))]["items"]:
        check(item["key"] in data, f"{name} has key {item['key']}")
        p = os.path.join(pod_root, mount.lstrip("/"), item["path"])
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(data.get(item["key"], ""))

toml_file = os.path.join(pod_root, config_path.lstrip("/"))
check(os.path.isfile(toml_file), f"--config {config_path} is a file of the config volume")
cfg = tomllib.load(open(toml_file, "rb"))
print(f"ok    gateway.toml parses as TOML")
# Every *_file key (secrets, certificates, CA files): present in the volume, relative to the file.
def files(v, at=""):
    if isinstance(v, dict):
        for k, x in v.items():
            yield from ([(at + k, x)] if k.endswith("_file") else files(x, at + k + "."))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from files(x, f"{at[:-1]}[{i}].")
for key, path in files(cfg):
    full = os.path.join(os.path.dirname(toml_file), path)
    check(os.path.isfile(full), f"{key} = {path!r} is in the config volume")
listen_port = int(cfg["listen"].rsplit(":", 1)[1])
check(listen_port == port["http"], f"listen port {listen_port} is the container's http port")
check(not cfg["listen"].startswith(("127.", "[::1]", "localhost")), "listen is not loopback (probes come from the kubelet)")

# Drain: /readyz 503 for drain_delay_ms, shutdown_grace_ms for requests, up to 10 s of late
# answers; the kubelet's SIGKILL comes terminationGracePeriodSeconds after SIGTERM.
drain = cfg.get("drain_delay_ms", 0) / 1000
grace = cfg.get("shutdown_grace_ms", 10000) / 1000
late = 10 if cfg.get("late_answer_secs", 60) > 0 else 0
tgp = pod.get("terminationGracePeriodSeconds", 30)
check(drain >= 3, f"drain_delay_ms covers endpoint propagation ({drain:g} s >= 3 s)")
check(tgp > drain + grace + late,
      f"terminationGracePeriodSeconds {tgp} > drain {drain:g} + grace {grace:g} + late answers {late} s")
# The repo ships placeholders only: a real secret must never be committed here.
for name, d in secrets.items():
    check("data" not in d, f"Secret {name}: stringData only (readable placeholders)")
    for k, v in d.get("stringData", {}).items():
        check("REPLACE-ME" in v or "UkVQTEFDRS1NRS" in v, f"Secret {name}/{k} is a marked placeholder")
sys.exit(1 if problems else 0)
PY

# ---------------------------------------------------------------------------------------------
section "docker compose: docker-compose.yml against the compose-spec schema"
python3 - <<'PY'
import json, re, sys, tomllib, yaml, jsonschema

schema = json.load(open("schemas/compose-spec.json"))
doc = yaml.safe_load(open("docker-compose.yml"))
# The schema says "$schema": ".../draft-07/schema" (without the "#" jsonschema knows it by).
assert "draft-07" in schema["$schema"]
v = jsonschema.Draft7Validator(schema)
errors = sorted(v.iter_errors(doc), key=lambda e: list(map(str, e.path)))
for e in errors:
    print(f"ERROR docker-compose.yml: {'.'.join(map(str, e.path)) or '(top)'}: {e.message}")
if errors:
    sys.exit(1)
print("ok    docker-compose.yml is valid against compose-spec.json")

problems = []
def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        problems.append(what)
services = doc["services"]
for name, s in services.items():
    check(s.get("restart") in ("unless-stopped", "always", "on-failure"), f"{name}: restarts")
    deps = s.get("depends_on", {})
    check(isinstance(deps, dict), f"{name}: depends_on with conditions, not a bare list")
    for dep, how in (deps.items() if isinstance(deps, dict) else []):
        if how.get("condition") == "service_healthy":
            check("healthcheck" in services[dep], f"{name} waits for {dep}, which has a healthcheck")
# One image, built once, for the replicas; the sample agent runs from it too.
built = [n for n, s in services.items() if "build" in s]
check(built == ["gateway"], f"one service builds the image (gateway), not {built}")
gw = services["gateway"]
image = gw.get("image")
check(image is not None and gw.get("deploy", {}).get("replicas", 1) >= 2,
      f"gateway: a named image ({image}) run as at least two replicas")
check("stop_grace_period" in gw, "gateway: stop_grace_period for the drain")
agent = services.get("sample-agent", {})
check(agent.get("image") == image and agent.get("pull_policy") == "never"
      and "sample-agent" in agent.get("entrypoint", []),
      "sample-agent: `a2a-gateway sample-agent` from the gateway's image, never pulled")
replica = tomllib.load(open("replica.toml", "rb"))
agent_port = next((a.split(":")[-1] for a in agent.get("entrypoint", []) if a.startswith("0.0.0.0:")), None)
check(any(a["url"] == f"http://sample-agent:{agent_port}" for a in replica.get("agents", [])),
      f"replica.toml names the sample agent (http://sample-agent:{agent_port})")
# Prometheus runs deploy/prometheus.yml as shipped, with what it names mounted where it names it.
prom = services.get("prometheus", {})
mounts = dict(v.split(":")[:2] for v in prom.get("volumes", []) if v.startswith("./"))
shipped = yaml.safe_load(open("prometheus.yml"))
check(mounts.get("./prometheus.yml") == "/etc/prometheus/prometheus.yml", "prometheus: runs deploy/prometheus.yml")
check(mounts.get("./prometheus/alerts.yml") in shipped["rule_files"], "prometheus: the alert rules where rule_files names them")
job = shipped["scrape_configs"][0]
check(mounts.get("./prometheus/a2a-gateway.key") == job["authorization"]["credentials_file"],
      "prometheus: the key file where credentials_file names it")
check(any("gateway" in sd["names"] for sd in job.get("dns_sd_configs", [])),
      "prometheus.yml finds the replicas of the gateway service by DNS")
import hashlib
key = open("prometheus/a2a-gateway.key").read().strip()
clients = {c["name"]: c for c in replica.get("clients", [])}
check(clients.get("prometheus", {}).get("key_sha256") == hashlib.sha256(key.encode()).hexdigest()
      and clients["prometheus"].get("can") == ["metrics"],
      "replica.toml's prometheus client holds the shipped key's hash, with the metrics right only")
check(any(v.endswith(":/data") for v in services["redis"].get("volumes", [])) and
      all(v.split(":")[0] in (doc.get("volumes") or {}) for v in services["redis"]["volumes"]),
      "redis: /data on a named volume")
# One port everywhere: replica.toml's listen, the healthchecks, nginx's upstreams, the image.
port = tomllib.load(open("replica.toml", "rb"))["listen"].rsplit(":", 1)[1]
test = " ".join(services["gateway"]["healthcheck"]["test"])
check(f"127.0.0.1:{port}/readyz" in test, f"gateway healthcheck probes /readyz on replica.toml's port {port}")
docker = open("Dockerfile").read()
froms = re.findall(r"^FROM\s+(\S+)", docker, re.M)
for f in (f for f in froms if f != "scratch"):
    check(re.fullmatch(r"[a-z0-9./-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}", f) is not None,
          f"Dockerfile: FROM {f} is pinned by digest")
first_copy_all = docker.find("\nCOPY . .")
deps = docker.find("COPY Cargo.toml Cargo.lock")
check(0 <= deps < first_copy_all and docker.find("cargo build", deps) < first_copy_all,
      "Dockerfile: dependencies built in a layer of their own, before the sources are copied")
check(re.search(r"objcopy --only-keep-debug", docker) is not None
      and re.search(r"objcopy --strip-debug", docker) is not None
      and "COPY --from=build /out/a2a-gateway /usr/local/bin/a2a-gateway" in docker,
      "Dockerfile: ships the stripped binary; the debug info is kept apart (stage debug-info)")
check(re.search(rf'HEALTHCHECK[^\n]*(\\\n[^\n]*)*"probe", "http://127\.0\.0\.1:{port}/readyz"', docker) is not None,
      f"Dockerfile HEALTHCHECK probes /readyz on port {port}")
check(re.search(r"^USER \d+", docker, re.M) is not None, "Dockerfile: a numeric non-root USER")
nginx = open("nginx.conf").read()
check(f"server gateway:{port};" in nginx, f"nginx.conf's upstream is the gateway service on port {port}")
check(re.search(r"proxy_set_header X-Forwarded-Proto \$scheme;", nginx) is not None,
      "nginx.conf sets X-Forwarded-Proto")
sys.exit(1 if problems else 0)
PY

# ---------------------------------------------------------------------------------------------
section "systemd: a2a-gateway.service"
# `verify` checks that every Exec*= command is executable; /usr/local/bin/a2a-gateway is not
# installed here. `--root=` would need a whole unit tree (sysinit.target, /bin/kill) in the
# root, so verify a copy whose commands point at the binary under test (A2A_GATEWAY_BIN) or at a
# stub, under the same unit name: everything else is checked as written.
mkdir -p "$tmp/unit"
stub="${A2A_GATEWAY_BIN:-}"
if [[ -z $stub ]]; then
  stub="$tmp/unit/a2a-gateway"
  printf '#!/bin/sh\nexit 0\n' >"$stub"
  chmod +x "$stub"
fi
sed "s#/usr/local/bin/a2a-gateway#$stub#g" a2a-gateway.service >"$tmp/unit/a2a-gateway.service"
# verify exits 0 on an unknown key or a bad value, only printing it: any output is a failure.
out=$(systemd-analyze verify "$tmp/unit/a2a-gateway.service" 2>&1) && rc=0 || rc=$?
[[ $rc -eq 0 && -z $out ]] || { echo "$out"; fail "systemd-analyze verify a2a-gateway.service"; }
echo "ok    systemd-analyze verify: no complaint"
out=$(systemd-analyze security --offline=yes --threshold="$SYSTEMD_MAX_EXPOSURE" a2a-gateway.service 2>&1) && rc=0 || rc=$?
grep -E '^✗|Overall exposure' <<<"$out" || true
((rc == 0)) || fail "systemd-analyze security: exposure above ${SYSTEMD_MAX_EXPOSURE:0:1}.${SYSTEMD_MAX_EXPOSURE:1}"
echo "ok    systemd-analyze security --offline=yes: at most ${SYSTEMD_MAX_EXPOSURE:0:1}.${SYSTEMD_MAX_EXPOSURE:1}"

# ---------------------------------------------------------------------------------------------
section "the binary: check-config and probe"
if [[ -z ${A2A_GATEWAY_BIN:-} ]]; then
  echo "skipped: set A2A_GATEWAY_BIN (e.g. target/debug/a2a-gateway) to check the shipped configs"
else
  bin=$A2A_GATEWAY_BIN
  # The ConfigMap's file as the pod sees it, with the Secret's placeholder files beside it:
  # refused, at each placeholder, until the operator puts real secrets in.
  pod="$tmp/pod/etc/a2a-gateway"
  out=$("$bin" check-config --config "$pod/gateway.toml" 2>&1) && rc=0 || rc=$?
  ((rc != 0)) || fail "check-config accepted the k8s Secret's REPLACE-ME placeholders"
  for key in redis.url_file agents[0].ingest_token_file subscribers[0].secret_file; do
    grep -qF "$key: is a placeholder" <<<"$out" || { echo "$out"; fail "check-config did not refuse the placeholder at $key"; }
  done
  echo "ok    check-config: the k8s Secret's placeholders are refused, each at its key"
  for f in "$pod"/secrets/*; do
    [[ $f == *webhook-keys ]] && printf 'whsec_%s\n' "$(head -c 32 /dev/urandom | base64)" >"$f" && continue
    [[ $f == *redis-url ]] && echo "redis://a2a-gateway:$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')@redis.example.internal:6379" >"$f" && continue
    head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$f"
  done
  "$bin" check-config --config "$pod/gateway.toml" \
    || fail "check-config: deploy/k8s/configmap.yaml's gateway.toml with the secrets filled in"
  echo "ok    check-config: k8s ConfigMap's gateway.toml, its secrets filled in"
  "$bin" check-config --config replica.toml || fail "check-config: deploy/replica.toml"
  echo "ok    check-config: deploy/replica.toml"
  # The image's HEALTHCHECK: exit 1 (not 2, a usage error) when nothing answers.
  rc=0; "$bin" probe http://127.0.0.1:9/readyz >/dev/null 2>&1 || rc=$?
  ((rc == 1)) || fail "a2a-gateway probe of a closed port exited $rc, not 1"
  echo "ok    probe: exit 1 on a closed port"
fi

printf '\ndeploy/check-manifests.sh: all checks passed\n'
