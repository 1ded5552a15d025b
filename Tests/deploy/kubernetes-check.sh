#!/usr/bin/env bash
# Validates the Kubernetes manifests offline: Deploy/kubernetes (SQLite on a volume),
# Deploy/kubernetes-postgresql (the cluster on PostgreSQL: the first less its StatefulSet, plus
# its own files) and that with its example-database component.
#  1. kubernetes-validate --strict against Kubernetes 1.31's schemas: every built-in kind, in
#     each file as written and in the objects as kustomize renders them (patches applied).
#  2. kubernetes-validate has no schema for custom resources (the ServiceMonitor) nor for
#     kustomization.yaml: it prints "Couldn't find schema" and still exits 0. So that warning is
#     a failure for any other file, and those are checked by kubernetes-check.py instead:
#     cross-references (selectors, ports, Secret keys, mounts, config paths, the cluster's
#     listener, NetworkPolicy, disruption budget and grace period, the example database's URL)
#     and the kustomizations' resource lists. The ServiceMonitor's fields are not schema-checked
#     here (the Prometheus Operator's CRD is not on this machine).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
version=${KUBERNETES_VERSION:-1.31.0}

command -v kubernetes-validate >/dev/null \
    || { echo "kubernetes-check: FAIL: kubernetes-validate not installed (pip install --break-system-packages kubernetes-validate)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# kubernetes-validate FILES... in the current directory; any finding but a pass, or the missing
# schema of a kustomization or a ServiceMonitor, fails.
validate() {
    local status=0 out unexpected
    out=$(kubernetes-validate --strict -k "$version" "$@" 2>&1) || status=$?
    echo "$out"
    unexpected=$(grep -v -E '^INFO .* passed for resource ' <<<"$out" \
        | grep -v -E "^WARN [^ ]*(kustomization\.yaml Couldn't find schema for kind (Kustomization|Component)|(servicemonitor|rendered[^ ]*)\.yaml Couldn't find schema for kind ServiceMonitor) " || true)
    if [[ $status -ne 0 || -n $unexpected ]]; then
        echo "kubernetes-check: FAIL: kubernetes-validate in $PWD (exit $status) reported:" >&2
        echo "$unexpected" >&2
        exit 1
    fi
}

for dir in Deploy/kubernetes Deploy/kubernetes-postgresql Deploy/kubernetes-postgresql/example-database; do
    (cd "$repo/$dir" && validate ./*.yaml)
done
# DIR and, for a component, its name: the objects `kubectl apply -k` applies.
for variant in "Deploy/kubernetes" "Deploy/kubernetes-postgresql" "Deploy/kubernetes-postgresql example-database"; do
    read -r dir component <<<"$variant"
    rendered=$work/rendered-${component:-$(basename "$dir")}.yaml
    python3 "$repo/Tests/deploy/kubernetes-check.py" "$repo/$dir" ${component:+--component "$component"} --rendered "$rendered"
    (cd "$work" && validate "$(basename "$rendered")")
done
echo "kubernetes-check: passed (kubernetes-validate --strict -k $version, cross-references; SQLite, PostgreSQL cluster, and with its example database)"
