#!/usr/bin/env bash
# Validates Deploy/kubernetes and Deploy/kubernetes-postgresql offline.
#  1. kubernetes-validate --strict against Kubernetes 1.31's schemas: every built-in kind.
#  2. kubernetes-validate has no schema for custom resources (the ServiceMonitor) nor for
#     kustomization.yaml: it prints "Couldn't find schema" and still exits 0. So that warning is
#     a failure for any other file, and those two are checked by kubernetes-check.py instead:
#     cross-references (Service selection, port names, Secret keys, mounts, config paths) and
#     the kustomization's resource list. The ServiceMonitor's fields are not schema-checked here
#     (the Prometheus Operator's CRD is not on this machine).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
version=${KUBERNETES_VERSION:-1.31.0}

command -v kubernetes-validate >/dev/null \
    || { echo "kubernetes-check: FAIL: kubernetes-validate not installed (pip install --break-system-packages kubernetes-validate)" >&2; exit 1; }

# Deploy/kubernetes (SQLite on a volume) and Deploy/kubernetes-postgresql (a Deployment on
# PostgreSQL, made of the first less its StatefulSet plus its own files).
for dir in "$repo/Deploy/kubernetes" "$repo/Deploy/kubernetes-postgresql"; do
    status=0
    out=$(cd "$dir" && kubernetes-validate --strict -k "$version" ./*.yaml 2>&1) || status=$?
    echo "$out"
    unexpected=$(grep -v -E '^INFO .* passed for resource ' <<<"$out" \
        | grep -v -E "^WARN (\./)?(kustomization|servicemonitor)\.yaml Couldn't find schema for kind (Kustomization|ServiceMonitor) " || true)
    if [[ $status -ne 0 || -n $unexpected ]]; then
        echo "kubernetes-check: FAIL: kubernetes-validate of $dir (exit $status) reported:" >&2
        echo "$unexpected" >&2
        exit 1
    fi
    python3 "$repo/Tests/deploy/kubernetes-check.py" "$dir"
done
echo "kubernetes-check: passed (kubernetes-validate --strict -k $version, cross-references; SQLite and PostgreSQL variants)"
