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
# and A2A_GATEWAY_BIN (check-config on the shipped configs, the probe subcommand, and the
# compose run of 5, which then needs redis-server and redis-cli too); each is skipped with a
# message when absent.
#
# 1. Kubernetes: every resource of deploy/k8s/kustomization.yaml against Kubernetes
#    $K8S_VERSION's schemas, strictly (an unknown field fails); a kind without a schema fails
#    too (kubernetes-validate only warns). The ServiceMonitor, a CRD that kubernetes-validate
#    has no schema for, against the Prometheus Operator's CRD schema vendored in
#    deploy/schemas/, made strict the same way. Then what schemas cannot see: probes, drain
#    timing against terminationGracePeriodSeconds, the security context, selectors, every
#    *_file of the ConfigMap's gateway.toml present in the projected volume, and the sample
#    agents (sample-agent.yaml, sample-agent-a2a.yaml): each one's Service an agent of
#    gateway.toml in the protocol it is started with, one agent of each protocol in all.
# 2. Compose: deploy/docker-compose.yml against the compose-spec JSON schema, vendored in
#    deploy/schemas/compose-spec.json (from github.com/compose-spec/compose-spec,
#    Apache-2.0; see deploy/schemas/README.md), plus health-gated dependencies and ports, the
#    sample agents (one per protocol, each an agent of replica.toml, started in its protocol),
#    and the image: deploy/Dockerfile ships the release profile's binary as built, and
#    Cargo.toml's release profile has no debug info (the profiling profile has).
# 3. systemd: `systemd-analyze verify` and `systemd-analyze security --offline=yes` on
#    deploy/a2a-gateway.service, which must score at most 3.0.
# 4. With A2A_GATEWAY_BIN: `check-config` on the ConfigMap's gateway.toml laid out as the pod
#    sees it (with the Secret's placeholder files) and on deploy/replica.toml, and `probe`.
# 5. With A2A_GATEWAY_BIN: docker-compose.yml run without Docker. Its sample agents, Redis and
#    one gateway, started as the file declares them (entrypoint, command, environment, the
#    gateway's mounted config, healthchecks, depends_on order) on loopback ports, then a
#    SendMessage to each official A2A agent and a create to each Clawpedia agent through the
#    gateway, each answered COMPLETED. See the section for the substitutions it makes.
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
# The processes the compose run starts (their pids in $tmp/compose/pids) are stopped there; any
# still running when this script ends, however it ends, are killed here.
cleanup() {
  local pid
  if [[ -s $tmp/compose/pids ]]; then
    while read -r pid; do kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null; done <"$tmp/compose/pids"
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
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
def one(kind, component=None):
    found = [d for _, d in docs if d["kind"] == kind and (component is None or
             d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component)]
    assert len(found) == 1, f"expected one {kind} {component or ''}, found {len(found)}"
    return found[0]
problems = []
def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        problems.append(what)

# The gateway's objects carry app.kubernetes.io/component: gateway; the sample agents' are
# checked further down.
dep, svc = one("Deployment", "gateway"), one("Service", "gateway")
pdb, cm = one("PodDisruptionBudget"), one("ConfigMap")
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

def hardened(pod, c, who=""):
    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    check(psc.get("runAsNonRoot") is True and csc.get("runAsNonRoot", True) is True, f"{who}runAsNonRoot")
    check(isinstance(psc.get("runAsUser"), int) and psc["runAsUser"] > 0, f"{who}runAsUser numeric, not 0")
    check(csc.get("readOnlyRootFilesystem") is True, f"{who}readOnlyRootFilesystem")
    check(csc.get("allowPrivilegeEscalation") is False, f"{who}allowPrivilegeEscalation: false")
    check(csc.get("capabilities", {}).get("drop") == ["ALL"], f"{who}capabilities: drop ALL")
    check((csc.get("seccompProfile") or psc.get("seccompProfile", {})).get("type") == "RuntimeDefault",
          f"{who}seccompProfile RuntimeDefault")
hardened(pod, c)
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

# The sample agents (sample-agent-*.yaml): each Deployment runs `a2a-gateway sample-agent` from
# the gateway's image, behind a Service of its own that an [[agents]] table of gateway.toml
# names, in the protocol the agent is started with; one agent of each protocol in all.
CARD = {"clawpedia": "/agent-card.json", "a2a": "/.well-known/agent-card.json"}
agents = cfg.get("agents", [])
for d in (d for _, d in docs if d["kind"] == "Deployment" and d is not dep):
    name = d["metadata"]["name"]
    aspec = d["spec"]
    apod = aspec["template"]["spec"]
    alabels = aspec["template"]["metadata"]["labels"]
    ac = apod["containers"][0]
    aport = {p["name"]: p["containerPort"] for p in ac["ports"]}
    aargs = ac.get("args", [])
    check(ac["image"] == c["image"] and not ac.get("command") and aargs[:1] == ["sample-agent"],
          f"{name}: `a2a-gateway sample-agent` from the gateway's image ({c['image']})")
    listen = aargs[aargs.index("--listen") + 1] if "--listen" in aargs else ""
    check(listen == f"0.0.0.0:{aport.get('http')}", f"{name}: --listen {listen} is every interface, on its http port")
    proto = aargs[aargs.index("--protocol") + 1] if "--protocol" in aargs else "clawpedia"
    for probe in ("readinessProbe", "livenessProbe"):
        check(ac.get(probe, {}).get("httpGet", {}).get("path") == CARD[proto],
              f"{name}: {probe} on the {proto} card ({CARD[proto]})")
    for kind in ("requests", "limits"):
        check({"cpu", "memory"} <= set(ac.get("resources", {}).get(kind, {})), f"{name}: resources.{kind}: cpu and memory")
    hardened(apod, ac, f"{name}: ")
    check(aspec["selector"]["matchLabels"].items() <= alabels.items(), f"{name}: selector matches its pod labels")
    check(not (spec["selector"]["matchLabels"].items() <= alabels.items()
               or svc["spec"]["selector"].items() <= alabels.items()
               or pdb["spec"]["selector"]["matchLabels"].items() <= alabels.items()),
          f"{name}: its pods are not selected by the gateway's Deployment, Service or PodDisruptionBudget")
    asvc = [s for _, s in docs if s["kind"] == "Service" and s["spec"].get("selector")
            and s["spec"]["selector"].items() <= alabels.items()]
    check(len(asvc) == 1, f"{name}: one Service selects its pods")
    if len(asvc) != 1:
        continue
    sname = asvc[0]["metadata"]["name"]
    sports = {p["port"] for p in asvc[0]["spec"]["ports"] if p["targetPort"] in aport}
    check(bool(sports), f"{name}: Service {sname}'s targetPort names a container port")
    urls = {f"http://{sname}:{p}" for p in sports}
    named = [a for a in agents if a["url"].rstrip("/") in urls]
    check(len(named) == 1, f"gateway.toml has an agent at the Service {sname} ({', '.join(sorted(urls))})")
    if named:
        a = named[0]
        check(a.get("protocol", "clawpedia") == proto,
              f"gateway.toml's agent {a['name']!r} has protocol = {proto!r}, as {name} is started")
        if proto == "a2a":
            cb = a.get("callback_url", "")
            check(cb.rstrip("/") in {f"http://{svc['metadata']['name']}:{p['port']}" for p in svc["spec"]["ports"]},
                  f"gateway.toml's agent {a['name']!r}: callback_url {cb!r} is the gateway's Service")
check({a.get("protocol", "clawpedia") for a in agents} == set(CARD),
      "gateway.toml fronts an agent of each protocol (clawpedia, a2a)")

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
import json, os, re, sys, tomllib, yaml, jsonschema

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
# The sample agents: `a2a-gateway sample-agent` from the gateway's image, each an agent of
# replica.toml in the protocol it is started with, its card probed; one of each protocol.
CARD = {"clawpedia": "/agent-card.json", "a2a": "/.well-known/agent-card.json"}
replica = tomllib.load(open("replica.toml", "rb"))
agents = replica.get("agents", [])
samples = {n: s for n, s in services.items() if "sample-agent" in s.get("entrypoint", [])}
check(len(samples) >= 2, f"sample agents: {', '.join(samples)}")
for name, agent in samples.items():
    argv = agent["entrypoint"] + (agent.get("command") or [])
    check(agent.get("image") == image and agent.get("pull_policy") == "never"
          and argv[:2] == ["a2a-gateway", "sample-agent"],
          f"{name}: `a2a-gateway sample-agent` from the gateway's image, never pulled")
    listen = argv[argv.index("--listen") + 1] if "--listen" in argv else ""
    check(listen.startswith("0.0.0.0:"), f"{name}: --listen {listen!r} on every interface")
    agent_port = listen.rsplit(":", 1)[-1]
    proto = argv[argv.index("--protocol") + 1] if "--protocol" in argv else "clawpedia"
    named = [a for a in agents if a["url"].rstrip("/") == f"http://{name}:{agent_port}"]
    check(len(named) == 1 and named[0].get("protocol", "clawpedia") == proto,
          f"replica.toml names {name} (http://{name}:{agent_port}) with protocol = {proto!r}")
    test = agent.get("healthcheck", {}).get("test", [])
    check(test[:3] == ["CMD", "a2a-gateway", "probe"] and test[3:] == [f"http://127.0.0.1:{agent_port}{CARD[proto]}"],
          f"{name}: its healthcheck probes its {proto} card on port {agent_port}")
    check(gw.get("depends_on", {}).get(name, {}).get("condition") == "service_healthy",
          f"gateway waits for {name} to be healthy")
check({a.get("protocol", "clawpedia") for a in agents} == set(CARD),
      "replica.toml fronts an agent of each protocol (clawpedia, a2a)")
for a in agents:
    host = a["url"].split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[0]
    check(host in services, f"replica.toml's agent {a['name']!r}: {host} is a service of docker-compose.yml")
    if a.get("callback_url"):
        check(a["callback_url"].rstrip("/") == f"http://gateway:{replica['listen'].rsplit(':', 1)[1]}",
              f"replica.toml's agent {a['name']!r}: callback_url is the gateway service on its listen port")
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
# The image ships the release profile's binary as built: no debug info (Cargo.toml, checked
# below), nothing stripped or re-linked here, never the profiling profile's build.
code = "\n".join(l for l in docker.splitlines() if not l.lstrip().startswith("#"))
builds = re.findall(r"cargo build[^;&\n]*", code)
check(builds and all("--release" in b and "--profile" not in b for b in builds),
      f"Dockerfile: every cargo build is --release ({len(builds)})")
check(re.search(r"\b(objcopy|strip|eu-strip)\b|target/profiling|debug-info", code) is None,
      "Dockerfile: no strip, objcopy or profiling build: the binary ships as the release profile makes it")
check("COPY --from=build /src/target/release/a2a-gateway /usr/local/bin/a2a-gateway" in docker,
      "Dockerfile: ships target/release/a2a-gateway")
# The dependency layer builds the workspace from its manifests alone: each member's Cargo.toml
# (cargo refuses a workspace with one missing) and a stub of each build script it names.
cargo = tomllib.load(open("../Cargo.toml", "rb"))
for m in cargo["workspace"]["members"]:
    member = tomllib.load(open(f"../{m}/Cargo.toml", "rb"))
    check(docker.find(f"COPY {m}/Cargo.toml {m}/") in range(0, first_copy_all),
          f"Dockerfile: the dependency layer copies {m}/Cargo.toml")
    build = member.get("package", {}).get("build")
    if build:
        check(f"> {m}/{build}" in docker[:first_copy_all], f"Dockerfile: the dependency layer stubs {m}/{build}")
# What the build reads from outside its crate (a2a-grpc's build script compiles a2a.proto from
# docs/spec/) must be in the build context, which .dockerignore trims (its `docs/` line and the
# exception after it).
import fnmatch
rules = [l.strip() for l in open("../.dockerignore") if l.strip() and not l.startswith("#")]
def ignored(path):
    out = False
    for r in rules:
        neg = r.startswith("!")
        pat = r.lstrip("!").rstrip("/")
        parts = path.split("/")
        if any(fnmatch.fnmatchcase("/".join(parts[:i]), pat) for i in range(1, len(parts) + 1)):
            out = not neg
    return out
for m in cargo["workspace"]["members"]:
    b = f"../{m}/build.rs"
    for rel_path in re.findall(r'join\("((?:\.\./)+[^"]+)"\)', open(b).read()) if os.path.isfile(b) else []:
        path = os.path.normpath(os.path.join(m, rel_path))
        check(not ignored(path), f"{path} ({m}/build.rs reads it) is in the image's build context "
              f"(.dockerignore lets it in: !{path})")
# What ships has no debug info; `profiling` is the same build with it, for perf.
rel, prof = cargo["profile"]["release"], cargo["profile"].get("profiling", {})
check(rel.get("debug", False) in (False, 0, "none") and rel.get("strip", "debuginfo") in ("debuginfo", "symbols", True),
      f"Cargo.toml: [profile.release] without debug info (debug = {rel.get('debug')!r}, strip = {rel.get('strip')!r})")
check(prof.get("inherits") == "release" and prof.get("debug") not in (None, False, 0, "none")
      and prof.get("strip", "none") in ("none", False),
      "Cargo.toml: [profile.profiling] inherits release, with debug info, not stripped")
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

# ---------------------------------------------------------------------------------------------
section "docker compose, run without Docker: its sample agents, Redis and a gateway, as it declares them"
# Each service of docker-compose.yml that runs the gateway's image (the sample agents, the
# gateway) is started from A2A_GATEWAY_BIN with the entrypoint, command and environment the
# file gives it (the image's ENTRYPOINT and CMD where it gives none, as compose does), redis
# with its command and redis-server from PATH; in depends_on order, each once the one before
# passes its healthcheck, run as the file writes it. Compose's network becomes loopback: each
# service's port is a free 127.0.0.1 port, and only these substitutions are made, each printed:
# a sample agent's --listen, redis's --port/--bind/--dir (added), a healthcheck's
# 127.0.0.1:PORT; in the gateway's config (the file its volume mounts, copied) `listen`, every
# "://SERVICE:PORT", and one client's key_sha256 (a key made here). An address of the config
# that names no service port fails. Then one message to each agent through the gateway:
# SendMessage over JSON-RPC to each official A2A agent (COMPLETED), a create to each Clawpedia
# agent (SUBMITTED, then COMPLETED). nginx and Prometheus are not run (the sections above check
# their files). About 5 s.
if [[ -z ${A2A_GATEWAY_BIN:-} ]]; then
  echo "skipped: set A2A_GATEWAY_BIN (e.g. target/debug/a2a-gateway) to run the compose file's services"
else
  for t in redis-server redis-cli; do
    command -v "$t" >/dev/null || fail "$t is missing (the compose file's redis service): apt-get install redis-server redis-tools"
  done
  mkdir -p "$tmp/compose"
  python3 - "$A2A_GATEWAY_BIN" "$tmp/compose" <<'PY' || fail "docker-compose.yml's services, run with its own config, did not answer (logs above)"
import hashlib, json, os, re, secrets, shutil, signal, socket, subprocess, sys, time, tomllib
import urllib.error, urllib.request
import yaml

bin_, run = sys.argv[1], sys.argv[2]
sys.stdout.reconfigure(line_buffering=True)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
doc = yaml.safe_load(open("docker-compose.yml"))
services = doc["services"]
image = services["gateway"]["image"]
# The image (its last stage): ENTRYPOINT, CMD, and what /usr/local/bin holds (the binary under
# test stands for it).
docker = open("Dockerfile").read()
final = docker[docker.rindex("\nFROM "):]
entry = json.loads(re.search(r"^ENTRYPOINT (\[.*\])$", final, re.M).group(1))
cmd = json.loads(re.search(r"^CMD (\[.*\])$", final, re.M).group(1))
programs = {os.path.basename(p): bin_ for p in re.findall(r"^COPY --from=\S+ \S+ /usr/local/bin/(\S+)$", final, re.M)}
programs["redis-server"], programs["redis-cli"] = shutil.which("redis-server"), shutil.which("redis-cli")
print("programs: " + ", ".join(f"{k} = {v}" for k, v in programs.items()))

def fail(why):
    print(f"FAIL  {why}")
    sys.exit(1)

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def argv_of(name, s):
    # compose: an entrypoint drops the image's CMD; a command replaces it.
    if s.get("image") != image:
        return list(s.get("command") or [])
    if "entrypoint" in s:
        return list(s["entrypoint"]) + list(s.get("command") or [])
    return entry + list(s["command"] if "command" in s else cmd)

def flag(argv, name):
    return argv[argv.index(name) + 1] if name in argv and argv.index(name) + 1 < len(argv) else None

def local(argv, what):
    prog = programs.get(argv[0]) if argv else None
    if not prog:
        fail(f"{what}: {argv[:1]} is not a program of the image (deploy/Dockerfile) nor redis")
    return [prog] + argv[1:]

# Which services run here, and the port each listens on in its container.
run_set, port_of, argvs = [], {}, {}
for name, s in services.items():
    argv = argv_of(name, s)
    if s.get("image") == image:
        argvs[name] = argv
    elif str(s.get("image", "")).startswith("redis:"):
        argvs[name] = argv or ["redis-server"]
        port_of[name] = int(flag(argvs[name], "--port") or 6379)
    else:
        print(f"not run: {name} ({s.get('image')})")
        continue
    run_set.append(name)
gw_argv = argvs["gateway"]
# The gateway's files: each bind mount of its volumes, copied under run/root at its container path.
root = os.path.join(run, "root")
for v in services["gateway"].get("volumes", []):
    src, dst = v.split(":")[:2]
    if src.startswith("."):
        os.makedirs(os.path.dirname(root + dst), exist_ok=True)
        shutil.copy(src, root + dst)
config_in = flag(gw_argv, "--config")
if not config_in or not os.path.isfile(root + config_in):
    fail(f"gateway: --config {config_in} is not a file the gateway's volumes mount")
config = root + config_in
gw_argv[gw_argv.index("--config") + 1] = config
text = open(config).read()
cfg = tomllib.loads(text)
port_of["gateway"] = int(cfg["listen"].rsplit(":", 1)[1])
for name in run_set:
    if name in argvs and name not in port_of:
        listen = flag(argvs[name], "--listen")
        if not listen:
            fail(f"{name}: no --listen in {argvs[name]}")
        port_of[name] = int(listen.rsplit(":", 1)[1])
local_port = {name: free_port() for name in run_set}

# The substitutions, explicit.
def sub(old, new, text, where):
    n = text.count(old)
    print(f"      {where}: {old} -> {new} ({n}x)")
    return text.replace(old, new)
print("the gateway's config (docker-compose.yml mounts deploy/" + os.path.basename(
      next(v.split(":")[0] for v in services["gateway"]["volumes"] if v.split(":")[1] == config_in)) + "), on loopback:")
text = re.sub(r'(?m)^listen = "[^"]*"$', f'listen = "127.0.0.1:{local_port["gateway"]}"', text, count=1)
print(f"      listen = \"{cfg['listen']}\" -> \"127.0.0.1:{local_port['gateway']}\"")
for name in run_set:
    text = sub(f"://{name}:{port_of[name]}", f"://127.0.0.1:{local_port[name]}", text, name)
client = next((c for c in cfg.get("clients", []) if "tasks" in c.get("can", ["tasks"])
               and c.get("agents", ["*"]) == ["*"] and c.get("key_sha256")), None)
if client is None:
    fail("the gateway's config has no client with the tasks right on every agent")
key = secrets.token_hex(24)
text = sub(f'key_sha256 = "{client["key_sha256"]}"',
           f'key_sha256 = "{hashlib.sha256(key.encode()).hexdigest()}"', text, f"client {client['name']!r}")
open(config, "w").write(text)
cfg = tomllib.loads(text)
# Every address the gateway dials must now be one of those ports: a host or a port that names
# no service of the compose file is an error of the file, not of the test.
dials = [(f"redis.url", cfg.get("redis", {}).get("url"))]
for i, a in enumerate(cfg.get("agents", [])):
    dials += [(f"agents[{i}] ({a['name']}).{k}", a.get(k)) for k in ("url", "callback_url", "grpc_url")]
mapped = {f"127.0.0.1:{p}" for p in local_port.values()}
for where, url in dials:
    if url and url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1] not in mapped:
        fail(f"{where} = {url!r} names no service port of docker-compose.yml")

procs = []   # (name, Popen, stop signal)
pids = open(os.path.join(run, "pids"), "a")

def logs():
    for name, p, _ in procs:
        lines = open(os.path.join(run, f"{name}.log"), errors="replace").read().splitlines()
        print(f"--- {name} (pid {p.pid}, {'running' if p.poll() is None else f'exited {p.returncode}'}), last lines:")
        print("\n".join(lines[-15:]))

def healthy(name, deadline):
    s = services[name]
    test = list(s.get("healthcheck", {}).get("test", []))
    if test[:1] != ["CMD"]:
        fail(f"{name}: its healthcheck is not an exec form [\"CMD\", ...]")
    # It runs in the service's container: 127.0.0.1 is the service itself, on its own port.
    for a in test[1:]:
        for port in re.findall(r"(?:127\.0\.0\.1|localhost):(\d+)", a):
            if int(port) != port_of[name]:
                fail(f"{name}: its healthcheck ({a}) asks port {port}, where it does not listen ({port_of[name]})")
    argv = [re.sub(rf"(127\.0\.0\.1|localhost):{port_of[name]}\b", f"127.0.0.1:{local_port[name]}", a)
            for a in test[1:]]
    if argv[0] == "redis-cli":
        argv[1:1] = ["-p", str(local_port[name])]
    argv = local(argv, f"{name}'s healthcheck")
    p = next(p for n, p, _ in procs if n == name)
    while True:
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
            if r.returncode == 0 and (argv[0] != programs["redis-cli"] or b"PONG" in r.stdout):
                return
        except subprocess.TimeoutExpired:
            pass
        if p.poll() is not None or time.monotonic() > deadline:
            logs()
            fail(f"{name}: its healthcheck ({' '.join(test[1:])}) never passed")
        time.sleep(0.1)

def call(method, path, body=None, headers=()):
    req = urllib.request.Request(f"http://127.0.0.1:{local_port['gateway']}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json", **dict(headers)})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")

try:
    # depends_on order.
    order, seen = [], set()
    def visit(n):
        if n not in seen:
            seen.add(n)
            for d in services[n].get("depends_on", {}):
                if d in run_set:
                    visit(d)
            order.append(n)
    for n in run_set:
        visit(n)
    t0 = time.monotonic()
    for name in order:
        s = services[name]
        argv = argvs[name]
        if name == "gateway":
            shown = argv
        elif s.get("image") == image:
            listen = flag(argv, "--listen")
            argv = [a if a != listen else f"127.0.0.1:{local_port[name]}" for a in argv]
            shown = argv
        else:
            data = os.path.join(run, f"{name}-data")
            os.makedirs(data)
            argv = argv + ["--port", str(local_port[name]), "--bind", "127.0.0.1", "--dir", data]
            shown = argv
        env = dict(os.environ)
        e = s.get("environment") or {}
        env.update(e if isinstance(e, dict) else dict(x.split("=", 1) for x in e))
        argv = local(argv, name)
        p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                             stdout=open(os.path.join(run, f"{name}.log"), "w"), stderr=subprocess.STDOUT)
        pids.write(f"{p.pid}\n")
        pids.flush()
        procs.append((name, p, getattr(signal, s.get("stop_signal", "SIGTERM"))))
        healthy(name, time.monotonic() + 20)
        print(f"ok    {name}, its :{port_of[name]} on 127.0.0.1:{local_port[name]}, healthy: "
              + " ".join(shown).replace(run, "$tmp/compose"))
    print(f"      all healthy in {time.monotonic() - t0:.1f} s")

    # One message to each agent, through the gateway.
    done = []
    for a in cfg.get("agents", []):
        name = a["name"]
        if a.get("protocol", "clawpedia") == "a2a":
            msg = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
                "messageId": secrets.token_hex(8), "role": "ROLE_USER", "parts": [{"text": "hello"}]}}}
            st, v = call("POST", f"/agents/{name}/jsonrpc", msg, {"A2A-Version": "1.0"})
            state = v.get("result", {}).get("task", {}).get("status", {}).get("state") if isinstance(v, dict) else None
            if st != 200 or state != "TASK_STATE_COMPLETED":
                logs()
                fail(f"{name} (official A2A): SendMessage at /agents/{name}/jsonrpc answered {st}: {v}")
            print(f"ok    {name} (official A2A): SendMessage over JSON-RPC through the gateway: {state}")
        else:
            st, v = call("POST", f"/agents/{name}/tasks", {"input": {"topic": "compose check", "filename": "check.py"}})
            if st != 202 or not isinstance(v, dict) or v.get("status") != "SUBMITTED":
                logs()
                fail(f"{name} (Clawpedia): create at /agents/{name}/tasks answered {st}: {v}")
            print(f"ok    {name} (Clawpedia): create through the gateway: 202 {v['status']}")
            done.append((name, v["task_id"], time.monotonic()))
    for name, task, since in done:
        while True:
            st, v = call("GET", f"/tasks/{task}")
            if st == 200 and v.get("status") == "COMPLETED":
                print(f"ok    {name} (Clawpedia): the task COMPLETED {time.monotonic() - since:.1f} s after its create")
                break
            if time.monotonic() - since > 15:
                logs()
                fail(f"{name} (Clawpedia): task {task} not COMPLETED after 15 s: {st} {v}")
            time.sleep(0.2)
finally:
    for name, p, sig in reversed(procs):
        if p.poll() is None:
            p.send_signal(sig)
    for name, p, _ in reversed(procs):
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
PY
fi

printf '\ndeploy/check-manifests.sh: all checks passed\n'
