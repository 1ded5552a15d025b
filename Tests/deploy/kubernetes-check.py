"""Cross-reference checks of Deploy/kubernetes that no schema can make: each one is a way the
manifests can be individually valid and still not run together.

Usage: python3 kubernetes-check.py DIR   (exit 1 with one line per problem)
"""
import json
import os
import sys

import yaml

directory = sys.argv[1]
problems = []


def load(name):
    with open(os.path.join(directory, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def render(directory):
    """The objects `kubectl apply -k directory` would apply, by (kind, name): its resources
    (files, or another kustomization's directory, rendered first), its `labels` on their
    metadata, less what its patches delete (`$patch: delete`)."""
    def load(name):
        with open(os.path.join(directory, name)) as f:
            return [d for d in yaml.safe_load_all(f) if d]

    kustomization = load("kustomization.yaml")[0]
    listed = kustomization.get("resources", [])
    present = sorted(f for f in os.listdir(directory) if f.endswith(".yaml") and f != "kustomization.yaml")
    for name in listed:
        if not os.path.exists(os.path.join(directory, name)):
            problems.append(f"{directory}: kustomization lists {name}, which does not exist")
    for name in present:
        if name not in listed:
            problems.append(f"{name} is not in kustomization.yaml's resources: `kubectl apply -k` would skip it")
    # kustomize `labels` without includeSelectors touch metadata only, as applied here.
    extra_labels = {}
    for entry in kustomization.get("labels", []):
        extra_labels.update(entry.get("pairs", {}))
    rendered = {}
    for name in listed:
        path = os.path.join(directory, name)
        documents = list(render(path).values()) if os.path.isdir(path) else load(name)
        for doc in documents:
            doc.setdefault("metadata", {}).setdefault("labels", {}).update(extra_labels)
            rendered[(doc["kind"], doc["metadata"]["name"])] = doc
    for patch in kustomization.get("patches", []):
        doc = yaml.safe_load(patch["patch"])
        if doc.get("$patch") == "delete":
            if rendered.pop((doc["kind"], doc["metadata"]["name"]), None) is None:
                problems.append(f"{directory}: a patch deletes {doc['kind']} {doc['metadata']['name']}, which is not there")
        else:
            problems.append(f"{directory}: only $patch: delete patches are checked here")
    return rendered


objects = render(directory)


def get(kind, name):
    found = objects.get((kind, name))
    if found is None:
        problems.append(f"no {kind} named {name}")
    return found


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


# One gateway: a StatefulSet with its SQLite volume, or a Deployment on PostgreSQL (no volume:
# Recreate, so that the old pod has let go of the database before the new one starts).
workloads = [o for (k, _), o in objects.items() if k in ("StatefulSet", "Deployment")]
if len(workloads) != 1:
    problems.append(f"expected one StatefulSet or Deployment, found {len(workloads)}")
sts = workloads[0]
kind = sts["kind"]
spec = sts["spec"]
if spec.get("replicas") != 1:
    problems.append(f"the {kind} must have replicas: 1 (one gateway per store)")
if kind == "Deployment" and spec.get("strategy", {}).get("type") != "Recreate":
    problems.append("the Deployment must use strategy Recreate: a rolling update starts a second gateway on the store")
pod_labels = spec["template"]["metadata"]["labels"]
if not matches(spec["selector"]["matchLabels"], pod_labels):
    problems.append(f"the {kind}'s selector does not match its pod template")
if kind == "StatefulSet":
    get("Service", spec["serviceName"])
pod = spec["template"]["spec"]
container = pod["containers"][0]
ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}

# Pod security: what the image and the gateway are meant to run with.
psc, csc = pod.get("securityContext", {}), container.get("securityContext", {})
if not psc.get("runAsNonRoot") or psc.get("runAsUser", 0) == 0:
    problems.append("the pod must run as non-root with a numeric runAsUser")
if not csc.get("readOnlyRootFilesystem") or csc.get("allowPrivilegeEscalation") is not False:
    problems.append("the container needs readOnlyRootFilesystem and allowPrivilegeEscalation: false")
if csc.get("capabilities", {}).get("drop") != ["ALL"] or csc.get("capabilities", {}).get("add"):
    problems.append("the container must drop ALL capabilities and add none")
probes = {p: container.get(p, {}).get("httpGet", {}) for p in ("livenessProbe", "readinessProbe")}
if probes["livenessProbe"].get("path") != "/healthz" or probes["readinessProbe"].get("path") != "/readyz":
    problems.append("liveness must probe /healthz and readiness /readyz")
for name, probe in probes.items():
    if probe.get("port") not in ports:
        problems.append(f"{name} port {probe.get('port')} is not a container port")
for limit in ("cpu", "memory"):
    for kind in ("requests", "limits"):
        if limit not in container.get("resources", {}).get(kind, {}):
            problems.append(f"resources.{kind}.{limit} missing")

# Volumes: every mount has a volume, every Secret/ConfigMap key it names exists, the data
# directory is the claim template.
volumes = {v["name"]: v for v in pod.get("volumes", [])}
claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates", [])}
mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
for path, name in mounts.items():
    if name not in volumes and name not in claims:
        problems.append(f"mount {path} names no volume {name}")


def secret_keys(name):
    secret = objects.get(("Secret", name))
    return None if secret is None else set(secret.get("stringData", {})) | set(secret.get("data", {}))


for volume in volumes.values():
    if "secret" in volume:
        keys = secret_keys(volume["secret"]["secretName"])
        for item in volume["secret"].get("items", []):
            if keys is not None and item["key"] not in keys:
                problems.append(f"volume {volume['name']}: Secret {volume['secret']['secretName']} has no key {item['key']}")
    if "configMap" in volume:
        get("ConfigMap", volume["configMap"]["name"])
for env in container.get("env", []):
    ref = env.get("valueFrom", {}).get("secretKeyRef")
    if ref and (secret_keys(ref["name"]) or set()).isdisjoint({ref["key"]}):
        problems.append(f"env {env['name']}: Secret {ref['name']} has no key {ref['key']}")


def mounted_file(path):
    """The file at `path` is provided by some mount (a volume item, or a whole Secret/ConfigMap)."""
    parent, leaf = os.path.split(path)
    name = mounts.get(parent)
    volume = volumes.get(name)
    if volume is None:
        return False
    source = volume.get("secret") or volume.get("configMap") or {}
    items = source.get("items")
    if items is not None:
        return any(i["path"] == leaf for i in items)
    if "configMap" in volume:
        return leaf in get("ConfigMap", volume["configMap"]["name"]).get("data", {})
    keys = secret_keys(volume["secret"]["secretName"])
    return keys is None or leaf in keys  # a Secret the user creates (pushgate-tls): trust it


args = dict(a.split("=", 1) for a in container.get("args", []) if a.startswith("--") and "=" in a)
if "--database-url-file" in args:
    # PostgreSQL: the URL from a mounted Secret, and nothing on a volume.
    if claims or "--data-dir" in args:
        problems.append("with --database-url-file the gateway writes no data directory: no volume claim, no --data-dir")
    if "--database-url" in args:
        problems.append("--database-url in the arguments shows its password in the pod spec: use --database-url-file")
elif mounts.get(args.get("--data-dir")) not in claims:
    problems.append("--data-dir is not on the volumeClaimTemplate")
for flag in ("--config", "--tls-cert", "--tls-key", "--admin-token-file", "--database-url-file"):
    if flag in args and not mounted_file(args[flag]):
        problems.append(f"{flag} {args[flag]}: no mount provides it")
listen_port = int(args.get("--tls-listen", ":0").rsplit(":", 1)[1])
if listen_port not in ports.values():
    problems.append(f"--tls-listen port {listen_port} is not a container port")

# The configuration file parses, and each key file it names is mounted.
config_map = get("ConfigMap", volumes[mounts[os.path.dirname(args["--config"])]]["configMap"]["name"])
config = json.loads(config_map["data"][os.path.basename(args["--config"])])
for key in config.get("providerKeys", []):
    path = key.get("privateKeyFile") or key.get("publicKeyFile")
    if path and not (os.path.isabs(path) and mounted_file(path)):
        problems.append(f"provider key file {path}: not an absolute path that a mount provides")

# Services and the ServiceMonitor find the pod, and name real ports.
services = [o for (k, _), o in objects.items() if k == "Service"]
for service in services:
    if not matches(service["spec"]["selector"], pod_labels):
        problems.append(f"Service {service['metadata']['name']} selects no pod of the {kind}")
    for port in service["spec"]["ports"]:
        if port.get("targetPort") not in ports and port.get("targetPort") not in ports.values():
            problems.append(f"Service {service['metadata']['name']} targets unknown port {port.get('targetPort')}")
for (object_kind, name), monitor in objects.items():
    if object_kind != "ServiceMonitor":
        continue
    if monitor.get("apiVersion") != "monitoring.coreos.com/v1":
        problems.append("ServiceMonitor apiVersion must be monitoring.coreos.com/v1")
    selected = [s for s in services if matches(monitor["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])]
    if len(selected) != 1:
        problems.append(f"ServiceMonitor selects {len(selected)} Services; one, or the gateway is scraped more than once")
    for endpoint in monitor["spec"]["endpoints"]:
        if selected and endpoint["port"] not in {p["name"] for p in selected[0]["spec"]["ports"]}:
            problems.append(f"ServiceMonitor port {endpoint['port']} is not a port of the selected Service")
        if endpoint.get("path") != "/metrics":
            problems.append("ServiceMonitor must scrape /metrics")
        credentials = endpoint.get("authorization", {}).get("credentials", {})
        if (secret_keys(credentials.get("name")) or set()).isdisjoint({credentials.get("key")}):
            problems.append("ServiceMonitor's bearer credentials name no key of a Secret here")
        if credentials.get("key") and "--admin-token-file" in args and os.path.basename(args["--admin-token-file"]) != credentials["key"]:
            problems.append("ServiceMonitor's token is not the key the gateway reads as its admin token")

for (object_kind, name), pdb in objects.items():
    if object_kind == "PodDisruptionBudget" and not matches(pdb["spec"]["selector"]["matchLabels"], pod_labels):
        problems.append(f"PodDisruptionBudget {name} selects no pod of the {kind}")

for problem in problems:
    print(f"kubernetes-check: FAIL: {problem}", file=sys.stderr)
if problems:
    sys.exit(1)
print(f"kubernetes-check: cross-references hold ({len(objects)} objects)")
