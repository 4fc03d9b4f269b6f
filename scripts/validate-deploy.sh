#!/usr/bin/env bash
# Validates deploy/ offline with the real tools, without a cluster, a Docker engine or systemd
# running:
#   - Prometheus rules: `promtool check rules`, plus generated `promtool test rules` cases (lag read
#     from the leader only, no replica ready, circuit open, credentials, leader missing, dead
#     letters);
#   - Grafana dashboard: every panel query compiled by promtool (as a recording rule);
#   - Kubernetes manifests: `kubernetes-validate --strict` on every built-in resource against the
#     Kubernetes 1.28 and 1.37 schemas; KEDA's ScaledObject/TriggerAuthentication (no schema there)
#     parse as YAML with apiVersion keda.sh/v1alpha1, kind, metadata.name and spec; the three
#     kustomize trees render with `kubectl kustomize` when kubectl is installed, and the rendered
#     output is validated too;
#   - systemd unit: `systemd-analyze verify` and `systemd-analyze security --offline` (skipped when
#     systemd-analyze is missing).
# What ties deploy/ to the code (metric names, settings, probes and the HTTP port, grace period,
# security contexts, alert shapes, the Secret's keys) is checked once, by DeployManifestTests.
# Installs promtool (Debian package prometheus) and kubernetes-validate (PyPI) when missing.
# Quiet on success: one summary line. Exits non-zero, naming each failure, otherwise.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

FAILURES=0
CHECKS=0
SKIPPED=()

fail() {
    echo "validate-deploy: FAIL: $*" >&2
    FAILURES=$((FAILURES + 1))
}

# Runs a check; on failure prints its captured output under the check's name.
check() {
    local name=$1
    shift
    CHECKS=$((CHECKS + 1))
    if ! "$@" >"$TMP/out" 2>&1; then
        fail "$name"
        sed 's/^/    /' "$TMP/out" >&2
    fi
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi
}

# ---------------------------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------------------------
if ! command -v promtool >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    if ! as_root apt-get install -y -qq --no-install-recommends prometheus >"$TMP/apt.log" 2>&1; then
        as_root apt-get update -qq >>"$TMP/apt.log" 2>&1 || true
        if ! as_root apt-get install -y -qq --no-install-recommends prometheus >>"$TMP/apt.log" 2>&1; then
            cat "$TMP/apt.log" >&2
            echo "validate-deploy: cannot install promtool (apt-get install prometheus)" >&2
            exit 1
        fi
    fi
fi
if ! python3 -c 'import kubernetes_validate, yaml' 2>/dev/null; then
    # A Debian/Ubuntu system Python refuses plain `pip install` (PEP 668): fall back to --user.
    if ! python3 -m pip install -q --disable-pip-version-check kubernetes-validate >"$TMP/pip.log" 2>&1 &&
        ! { grep -q externally-managed "$TMP/pip.log" &&
            python3 -m pip install -q --disable-pip-version-check --user --break-system-packages \
                kubernetes-validate >>"$TMP/pip.log" 2>&1 && export PATH="$HOME/.local/bin:$PATH"; }; then
        cat "$TMP/pip.log" >&2
        echo "validate-deploy: cannot install kubernetes-validate (pip install kubernetes-validate)" >&2
        exit 1
    fi
fi

# ---------------------------------------------------------------------------------------------
# Prometheus alert rules
# ---------------------------------------------------------------------------------------------
check "promtool check rules deploy/prometheus/alerts.yaml" promtool check rules deploy/prometheus/alerts.yaml

# promtool compares annotations too; the unit tests check expressions, `for:` and labels, so they
# run against a copy of the rules without annotations.
python3 - deploy/prometheus/alerts.yaml "$TMP/rules-bare.yaml" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
for group in doc["groups"]:
    for rule in group["rules"]:
        rule.pop("annotations", None)
yaml.safe_dump(doc, open(sys.argv[2], "w"))
PY
cat >"$TMP/rules-test.yaml" <<EOF
rule_files: [$TMP/rules-bare.yaml]
evaluation_interval: 1m
tests:
  # Lag comes from the leader only: a stale reading on a former leader neither fires nor hides.
  - interval: 1m
    input_series:
      - {series: 'herald_outbox_lag_seconds{instance="a"}', values: '200x30'}
      - {series: 'herald_maintenance_leader{instance="a"}', values: '1x30'}
      - {series: 'herald_outbox_lag_seconds{instance="b"}', values: '5000x30'}
      - {series: 'herald_maintenance_leader{instance="b"}', values: '0x30'}
      - {series: 'herald_ready{instance="a"}', values: '1x30'}
      - {series: 'herald_ready{instance="b"}', values: '1x30'}
    alert_rule_test:
      - {eval_time: 3m, alertname: HeraldOutboxLagHigh, exp_alerts: []}
      - eval_time: 10m
        alertname: HeraldOutboxLagHigh
        exp_alerts: [{exp_labels: {severity: warning}}]
      - {eval_time: 10m, alertname: HeraldOutboxLagCritical, exp_alerts: []}
      - {eval_time: 10m, alertname: HeraldNoReplicaReady, exp_alerts: []}
      - {eval_time: 10m, alertname: HeraldMaintenanceLeaderMissing, exp_alerts: []}
  # Nothing scraped at all: absent(herald_ready) fires.
  - interval: 1m
    input_series:
      - {series: 'up{job="herald"}', values: '0x30'}
    alert_rule_test:
      - eval_time: 10m
        alertname: HeraldNoReplicaReady
        exp_alerts: [{exp_labels: {severity: critical}}]
  # Replicas up but none ready (draining, schema behind), and nobody leads maintenance.
  - interval: 1m
    input_series:
      - {series: 'herald_ready{instance="a"}', values: '0x30'}
      - {series: 'herald_ready{instance="b"}', values: '0x30'}
      - {series: 'herald_maintenance_leader{instance="a"}', values: '0x30'}
      - {series: 'herald_maintenance_leader{instance="b"}', values: '0x30'}
    alert_rule_test:
      - eval_time: 10m
        alertname: HeraldNoReplicaReady
        exp_alerts: [{exp_labels: {severity: critical}}]
      - eval_time: 10m
        alertname: HeraldMaintenanceLeaderMissing
        exp_alerts: [{exp_labels: {severity: warning}}]
  # Providers: a circuit open from minute 2 (apns on replica a, probing half-open every third
  # minute; closed on replica b), one that opened for 4 minutes and closed (expo), broken credentials, dead letters growing
  # (3 a minute).
  - interval: 1m
    input_series:
      - {series: 'herald_provider_circuit_state{instance="a", provider="apns"}', values: '0 0 2 2 1 2 2 1 2 2 1 2 2 1 2 2 1 2 2 1 2 2 1 2 2 1 2 2 1 2 2'}
      - {series: 'herald_provider_circuit_state{instance="b", provider="apns"}', values: '0x30'}
      - {series: 'herald_provider_circuit_state{instance="a", provider="fcm"}', values: '0x30'}
      - {series: 'herald_provider_circuit_state{instance="a", provider="expo"}', values: '0 2 2 1 2 0x26'}
      - {series: 'herald_delivery_attempts_total{instance="a", provider="fcm", outcome="credentials_broken", reason="unauthenticated"}', values: '0+5x30'}
      - {series: 'herald_delivery_attempts_total{instance="a", provider="apns", outcome="accepted", reason="ok"}', values: '0+100x30'}
      - {series: 'herald_jobs_dead_lettered_total{instance="a"}', values: '0+3x60'}
      - {series: 'herald_dead_letters{instance="a"}', values: '2000x60'}
      - {series: 'herald_maintenance_leader{instance="a"}', values: '1x60'}
    alert_rule_test:
      - {eval_time: 6m, alertname: HeraldProviderCircuitOpen, exp_alerts: []}
      - eval_time: 10m
        alertname: HeraldProviderCircuitOpen
        exp_alerts: [{exp_labels: {severity: critical, provider: apns}}]
      - eval_time: 10m
        alertname: HeraldProviderCredentialsBroken
        exp_alerts: [{exp_labels: {severity: critical, provider: fcm}}]
      - eval_time: 35m
        alertname: HeraldDeadLettersGrowing
        exp_alerts: [{exp_labels: {severity: warning}}]
      - eval_time: 45m
        alertname: HeraldDeadLettersOpen
        exp_alerts: [{exp_labels: {severity: warning}}]
  # Deadlines: sos misses 10 of 100 a minute (burns), chat 1 of 100 (within budget); a pause
  # held for 3 hours on the leader.
  - interval: 1m
    input_series:
      - {series: 'herald_delivery_latency_seconds_count{instance="a", category="sos"}', values: '0+100x90'}
      - {series: 'herald_deadline_missed_total{instance="a", category="sos"}', values: '0+10x90'}
      - {series: 'herald_delivery_latency_seconds_count{instance="a", category="chat"}', values: '0+100x90'}
      - {series: 'herald_deadline_missed_total{instance="a", category="chat"}', values: '0+1x90'}
      - {series: 'herald_pauses{instance="a"}', values: '1x200'}
      - {series: 'herald_maintenance_leader{instance="a"}', values: '1x200'}
    alert_rule_test:
      - eval_time: 30m
        alertname: HeraldDeadlineSLOBurn
        exp_alerts: [{exp_labels: {severity: critical, category: sos}}]
      - {eval_time: 60m, alertname: HeraldPausedForLong, exp_alerts: []}
      - eval_time: 150m
        alertname: HeraldPausedForLong
        exp_alerts: [{exp_labels: {severity: warning}}]
EOF
check "promtool test rules (generated cases)" promtool test rules "$TMP/rules-test.yaml"

# ---------------------------------------------------------------------------------------------
# Grafana dashboard
# ---------------------------------------------------------------------------------------------
DASHBOARD=deploy/grafana/herald-dashboard.json

dashboard_queries() {
    python3 - "$DASHBOARD" "$TMP/dashboard-rules.yaml" <<'PY' && promtool check rules "$TMP/dashboard-rules.yaml"
import json, sys, yaml
d = json.load(open(sys.argv[1]))
problems, rules, ids = [], [], set()
def walk(panels):
    for p in panels:
        yield p
        yield from walk(p.get("panels", []))
panels = list(walk(d.get("panels", [])))
if not panels:
    problems.append("no panels")
names = {v.get("name") for v in d.get("templating", {}).get("list", [])}
if "datasource" not in names:
    problems.append("no datasource template variable")
for p in panels:
    if p.get("id") in ids:
        problems.append(f"duplicate panel id {p.get('id')}")
    ids.add(p.get("id"))
    if p.get("type") == "row":
        continue
    targets = p.get("targets", [])
    if not targets:
        problems.append(f"panel {p.get('title')!r} has no query")
    for i, t in enumerate(targets):
        expr = t.get("expr", "")
        if not expr:
            problems.append(f"panel {p.get('title')!r} target {i} has no expr")
            continue
        expr = expr.replace("$__rate_interval", "5m").replace("$job", ".+")
        rules.append({"record": f"dashboard:panel_{p['id']}_{i}", "expr": expr})
if problems:
    sys.exit("\n".join(problems))
yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(sys.argv[2], "w"))
PY
}
check "dashboard panels have queries that promtool compiles" dashboard_queries

# ---------------------------------------------------------------------------------------------
# Kubernetes manifests
# ---------------------------------------------------------------------------------------------
# Splits YAML files into built-in resources (for kubernetes-validate) and checks KEDA and
# kustomize documents structurally. Args: output dir, files...
split_manifests() {
    python3 - "$@" <<'PY'
import pathlib, sys, yaml
out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
problems, n = [], 0
for name in sys.argv[2:]:
    try:
        docs = [d for d in yaml.safe_load_all(open(name)) if d is not None]
    except yaml.YAMLError as e:
        problems.append(f"{name}: not YAML: {e}")
        continue
    if not docs:
        problems.append(f"{name}: empty")
    for i, doc in enumerate(docs):
        where = f"{name} document {i + 1}"
        if not isinstance(doc, dict):
            problems.append(f"{where}: not a mapping")
            continue
        api, kind = doc.get("apiVersion", ""), doc.get("kind")
        if api.startswith("kustomize.config.k8s.io/"):
            if kind not in ("Kustomization", "Component") or not doc.get("resources") and not doc.get("components"):
                problems.append(f"{where}: a Kustomization needs resources")
            continue
        if api.startswith("keda.sh/"):
            meta = doc.get("metadata") or {}
            if api != "keda.sh/v1alpha1":
                problems.append(f"{where}: apiVersion {api}, expected keda.sh/v1alpha1")
            if kind not in ("ScaledObject", "TriggerAuthentication"):
                problems.append(f"{where}: unexpected KEDA kind {kind}")
            if not meta.get("name"):
                problems.append(f"{where}: no metadata.name")
            if not isinstance(doc.get("spec"), dict) or not doc["spec"]:
                problems.append(f"{where}: no spec")
            elif kind == "ScaledObject":
                spec = doc["spec"]
                if not (spec.get("scaleTargetRef") or {}).get("name"):
                    problems.append(f"{where}: no spec.scaleTargetRef.name")
                for t in spec.get("triggers") or []:
                    md = t.get("metadata") or {}
                    if t.get("type") != "postgresql" or not md.get("query") or not md.get("targetQueryValue"):
                        problems.append(f"{where}: trigger needs type postgresql, query and targetQueryValue")
                    if not (t.get("authenticationRef") or {}).get("name"):
                        problems.append(f"{where}: trigger without authenticationRef")
                if not spec.get("triggers"):
                    problems.append(f"{where}: no triggers")
            continue
        if not kind or not api:
            problems.append(f"{where}: no apiVersion/kind")
            continue
        n += 1
        yaml.safe_dump(doc, open(out / f"{n:03d}-{kind.lower()}.yaml", "w"))
if problems:
    sys.exit("\n".join(problems))
PY
}

k8s_validate_dir() {
    local dir=$1 version
    for version in 1.28.0 1.37.0; do
        # --quiet prints only warnings and errors: an unknown kind is a warning, so any output fails.
        kubernetes-validate -k "$version" --strict --quiet "$dir"/*.yaml >"$TMP/kv.out" 2>&1 || {
            cat "$TMP/kv.out"
            return 1
        }
        if [ -s "$TMP/kv.out" ]; then
            cat "$TMP/kv.out"
            return 1
        fi
    done
}

mapfile -t MANIFESTS < <(find deploy/kubernetes -name '*.yaml' | sort)
check "kubernetes manifests parse (KEDA and kustomize documents checked by shape)" \
    split_manifests "$TMP/k8s-files" "${MANIFESTS[@]}"
check "kubernetes-validate --strict on each manifest" k8s_validate_dir "$TMP/k8s-files"

if command -v kubectl >/dev/null; then
    for tree in deploy/kubernetes/base deploy/kubernetes/overlays/hpa deploy/kubernetes/overlays/staging-simulator; do
        name=$(basename "$tree")
        render() { kubectl kustomize "$1" >"$2"; }
        check "kubectl kustomize $tree" render "$tree" "$TMP/rendered-$name.yaml"
        check "kubernetes-validate --strict on the rendered $tree" \
            bash -c "$(declare -f split_manifests k8s_validate_dir); TMP='$TMP'; \
                split_manifests '$TMP/rendered-$name' '$TMP/rendered-$name.yaml' && k8s_validate_dir '$TMP/rendered-$name'"
    done
else
    SKIPPED+=("kustomize render (no kubectl)")
fi

# ---------------------------------------------------------------------------------------------
# systemd unit
# ---------------------------------------------------------------------------------------------
if command -v systemd-analyze >/dev/null; then
    # verify also checks that ExecStart's binary exists: do it in a scratch root holding a stand-in
    # /usr/local/bin/herald and the host's unit files (for the targets the unit depends on).
    SROOT="$TMP/sysroot"
    mkdir -p "$SROOT/usr/local/bin" "$SROOT/etc/systemd/system" "$SROOT/usr/lib/systemd"
    printf '#!/bin/sh\n' >"$SROOT/usr/local/bin/herald"
    chmod +x "$SROOT/usr/local/bin/herald"
    cp deploy/systemd/herald.service "$SROOT/etc/systemd/system/"
    for dir in /usr/lib/systemd/system /lib/systemd/system; do
        [ -d "$dir" ] && cp -a "$dir" "$SROOT/usr/lib/systemd/" && break
    done
    verify_unit() {
        local out
        out=$(systemd-analyze verify --root="$SROOT" herald.service 2>&1) || { echo "$out"; return 1; }
        # Unknown keys and similar problems are printed as warnings with exit 0: fail on any output.
        [ -z "$out" ] || { echo "$out"; return 1; }
    }
    check "systemd-analyze verify deploy/systemd/herald.service" verify_unit
    if systemd-analyze security --help 2>/dev/null | grep -q -- '--offline'; then
        check "systemd-analyze security --offline (exposure at most 2.0)" \
            systemd-analyze security --offline=true --root="$SROOT" --threshold=20 herald.service
    else
        SKIPPED+=("systemd security (no --offline)")
    fi
else
    SKIPPED+=("systemd-analyze (not installed)")
fi

# ---------------------------------------------------------------------------------------------
summary="$CHECKS checks"
[ ${#SKIPPED[@]} -eq 0 ] || summary="$summary; skipped: $(IFS=,; echo "${SKIPPED[*]}")"
if [ "$FAILURES" -ne 0 ]; then
    echo "validate-deploy: FAILED: $FAILURES of $summary failed" >&2
    exit 1
fi
echo "validate-deploy: OK ($summary)"
