"""Cross-reference checks of Deploy/kubernetes and its PostgreSQL overlay that no schema can
make: each one is a way the manifests can be individually valid and still not run together.

Usage: python3 kubernetes-check.py DIR [--component NAME] [--rendered FILE]
  --component NAME  render DIR with the component that its kustomization.yaml names in a
                    commented-out `components:` entry, uncommented as a user would
  --rendered FILE   write the objects as rendered, for kubernetes-validate
Exit 1 with one line per problem.

The rendering is this script's model of kustomize (resources, components, labels, images,
`$patch: delete` and map-only strategic merge patches). When kubectl is installed, its own
`kubectl kustomize` must give the same objects, so the model cannot drift from kustomize.
"""
import argparse
import base64
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

import yaml

parser = argparse.ArgumentParser()
parser.add_argument("directory")
parser.add_argument("--component")
parser.add_argument("--rendered")
options = parser.parse_args()
directory = os.path.abspath(options.directory)
problems = []


def load_yaml(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def key(doc):
    return (doc["kind"], doc["metadata"]["name"])


def merge(target, patch, where):
    """A strategic merge patch of maps: a key set to null is removed; lists are not modelled."""
    for name, value in patch.items():
        if value is None:
            target.pop(name, None)
        elif isinstance(value, dict) and isinstance(target.get(name), dict):
            merge(target[name], value, where)
        elif isinstance(value, list):
            problems.append(f"{where}: a patch with a list ({name}) is not modelled here")
        else:
            target[name] = copy.deepcopy(value)


def pod_specs(doc):
    template = doc.get("spec", {}).get("template", {}).get("spec")
    return [template] if template else []


def render(path):
    """The objects `kubectl apply -k path` would apply, by (kind, name), in kustomize's order:
    its resources (files, or another kustomization's directory, rendered first), then its
    components (their resources, then their patches), then its own patches, labels (metadata
    only, as `labels` without includeSelectors) and images."""
    kustomization = load_yaml(os.path.join(path, "kustomization.yaml"))[0]
    listed = kustomization.get("resources", [])
    present = sorted(f for f in os.listdir(path) if f.endswith(".yaml") and f != "kustomization.yaml")
    for name in listed:
        if not os.path.exists(os.path.join(path, name)):
            problems.append(f"{path}: kustomization lists {name}, which does not exist")
    for name in present:
        if name not in listed:
            problems.append(f"{path}/{name} is not in kustomization.yaml's resources: `kubectl apply -k` would skip it")
    rendered = {}

    def add(documents, source):
        for doc in documents:
            if key(doc) in rendered:
                problems.append(f"{source}: {key(doc)} is there already (kustomize refuses a second one)")
            rendered[key(doc)] = doc

    for name in listed:
        resource = os.path.join(path, name)
        add(list(render(resource).values()) if os.path.isdir(resource) else load_yaml(resource), resource)
    for name in kustomization.get("components") or []:
        component_path = os.path.join(path, name)
        component = load_yaml(os.path.join(component_path, "kustomization.yaml"))[0]
        if component.get("kind") != "Component":
            problems.append(f"{component_path}: a component's kustomization.yaml must be kind: Component")
        for resource in component.get("resources", []):
            add(load_yaml(os.path.join(component_path, resource)), component_path)
        for file in sorted(f for f in os.listdir(component_path) if f.endswith(".yaml") and f != "kustomization.yaml"):
            if file not in component.get("resources", []):
                problems.append(f"{component_path}/{file} is not in the component's resources")
        apply_patches(rendered, component, component_path)
    apply_patches(rendered, kustomization, path)
    labels = {}
    for entry in kustomization.get("labels", []):
        labels.update(entry.get("pairs", {}))
    for doc in rendered.values():
        if labels:
            doc.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
        for image in kustomization.get("images", []):
            for pod in pod_specs(doc):
                for container in pod.get("containers", []) + pod.get("initContainers", []):
                    if re.split(r"[:@]", container["image"])[0] == image["name"]:
                        container["image"] = f"{image.get('newName', image['name'])}:{image.get('newTag', 'latest')}"
    return rendered


def apply_patches(rendered, kustomization, where):
    for patch in kustomization.get("patches", []):
        doc = yaml.safe_load(patch["patch"])
        target = rendered.get(key(doc))
        if target is None:
            problems.append(f"{where}: a patch names {key(doc)}, which is not there")
        elif doc.get("$patch") == "delete":
            del rendered[key(doc)]
        else:
            merge(target, {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}, where)


def with_component_uncommented(work):
    """A copy of DIR's parent in `work`, with DIR's kustomization.yaml's commented-out
    `components:` entry for the component uncommented, exactly as its comment tells users to."""
    copy_root = os.path.join(work, "Deploy")
    shutil.copytree(os.path.dirname(directory), copy_root)
    copied = os.path.join(copy_root, os.path.basename(directory))
    path = os.path.join(copied, "kustomization.yaml")
    with open(path) as f:
        text = f.read()
    lines = ["# components:", f"#   - {options.component}"]
    if not all(re.search(rf"^{re.escape(line)}$", text, re.M) for line in lines):
        sys.exit(
            f"kubernetes-check: FAIL: {directory}/kustomization.yaml has no commented-out entry for"
            f" component {options.component} ({' / '.join(lines)}), as its documentation says"
        )
    for line in lines:
        text = re.sub(rf"^{re.escape(line)}$", line[2:], text, flags=re.M)
    with open(path, "w") as f:
        f.write(text)
    return copied


with tempfile.TemporaryDirectory() as work:
    source = with_component_uncommented(work) if options.component else directory
    objects = render(source)
    if shutil.which("kubectl"):
        run = subprocess.run(["kubectl", "kustomize", source], capture_output=True, text=True)
        if run.returncode != 0:
            problems.append(f"kubectl kustomize {directory} failed: {run.stderr.strip()}")
        else:
            theirs = {key(d): d for d in yaml.safe_load_all(run.stdout) if d}
            for k in sorted(set(theirs) | set(objects)):
                if theirs.get(k) != objects.get(k):
                    problems.append(f"kubectl kustomize renders {k} differently from this script's model of it")
    else:
        print("kubernetes-check: kubectl not installed: the rendering is this script's model of kustomize alone")
variant = os.path.basename(directory) + (f" with {options.component}" if options.component else "")
if options.rendered:
    with open(options.rendered, "w") as f:
        yaml.safe_dump_all(list(objects.values()), f, sort_keys=False)


def get(kind, name):
    found = objects.get((kind, name))
    if found is None:
        problems.append(f"no {kind} named {name}")
    return found


def matches(selector, labels):
    """A Service's selector (a map) or a label selector (its matchLabels: these manifests write no
    matchExpressions) selects these labels. Empty selects everything; none selects nothing."""
    if selector is None:
        return False
    if "matchExpressions" in selector:
        problems.append(f"selector {selector}: matchExpressions are not modelled here")
    match_labels = selector.get("matchLabels", {}) if "matchLabels" in selector or "matchExpressions" in selector else selector
    return all(labels.get(k) == v for k, v in match_labels.items())


def secret_keys(name):
    secret = objects.get(("Secret", name))
    return None if secret is None else set(secret.get("stringData", {})) | set(secret.get("data", {}))


def secret_value(name, item):
    secret = objects.get(("Secret", name)) or {}
    if item in secret.get("stringData", {}):
        return secret["stringData"][item]
    return base64.b64decode(secret["data"][item]).decode() if item in secret.get("data", {}) else None


def flags(container):
    """--name=value arguments, each name with every value given (some flags repeat)."""
    found = {}
    for argument in container.get("args", []):
        if argument.startswith("--"):
            name, _, value = argument.partition("=")
            found.setdefault(name, []).append(value)
    return found


def one(found, flag, default=None):
    return found.get(flag, [default])[-1]


def port_of(host_port):
    return int(host_port.rsplit(":", 1)[1])


# The gateway: the one workload with a container named pushgate (a StatefulSet with its SQLite
# volume, or the PostgreSQL cluster's Deployment). Anything else is the example database.
workloads = [o for (k, _), o in objects.items() if k in ("StatefulSet", "Deployment")]
gateways = [w for w in workloads if any(c["name"] == "pushgate" for c in pod_specs(w)[0]["containers"])]
if len(gateways) != 1:
    problems.append(f"expected one gateway StatefulSet or Deployment, found {len(gateways)}")
    gateways = gateways or workloads[:1]
gateway = gateways[0]
others = [w for w in workloads if w is not gateway]
kind = gateway["kind"]
spec = gateway["spec"]
replicas = spec.get("replicas", 1)
pod_labels = spec["template"]["metadata"]["labels"]
if not matches(spec["selector"], pod_labels):
    problems.append(f"the {kind}'s selector does not match its pod template")
if kind == "StatefulSet":
    get("Service", spec["serviceName"])
pod = spec["template"]["spec"]
container = next(c for c in pod["containers"] if c["name"] == "pushgate")
ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
if container["image"] == "pushgate":
    problems.append("the gateway's image is still the bare name pushgate: no kustomization's images setting reached it")
args = flags(container)
arg = {name: values[-1] for name, values in args.items()}
cluster = "--database-url-file" in arg or "--database-url" in arg


def resolve(port, container_ports):
    """A Service targetPort or NetworkPolicy port (a name or a number) as a number."""
    return container_ports.get(port, port)


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
    for part in ("requests", "limits"):
        if limit not in container.get("resources", {}).get(part, {}):
            problems.append(f"resources.{part}.{limit} missing")

# A drain fits in the grace period: /readyz 503 for the drain grace, then in-flight requests get
# the shutdown timeout, then the store's last commit (and a node's leaving the cluster).
drain = int(one(args, "--drain-grace-seconds", "5"))
shutdown = int(one(args, "--shutdown-timeout", "10"))
grace = pod.get("terminationGracePeriodSeconds", 30)
if grace < drain + shutdown + 5:
    problems.append(
        f"terminationGracePeriodSeconds {grace} leaves under 5 s after --drain-grace-seconds {drain}"
        f" + --shutdown-timeout {shutdown}: the kubelet's SIGKILL would cut the drain short"
    )

# Volumes: every mount has a volume, every Secret/ConfigMap key it names exists, the data
# directory is the claim template.
volumes = {v["name"]: v for v in pod.get("volumes", [])}
claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates", [])}
mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
for path, name in mounts.items():
    if name not in volumes and name not in claims:
        problems.append(f"mount {path} names no volume {name}")
for volume in volumes.values():
    if "secret" in volume:
        keys = secret_keys(volume["secret"]["secretName"])
        for item in volume["secret"].get("items", []):
            if keys is not None and item["key"] not in keys:
                problems.append(f"volume {volume['name']}: Secret {volume['secret']['secretName']} has no key {item['key']}")
    if "configMap" in volume:
        get("ConfigMap", volume["configMap"]["name"])
for variable in container.get("env", []):
    ref = variable.get("valueFrom", {}).get("secretKeyRef")
    if ref and (secret_keys(ref["name"]) or set()).isdisjoint({ref["key"]}):
        problems.append(f"env {variable['name']}: Secret {ref['name']} has no key {ref['key']}")

# $(NAME) in the arguments is expanded from the container's environment; an unknown name is
# left as it is, and the gateway would be given the literal text.
env = {e["name"]: e for e in container.get("env", [])}
for argument in container.get("args", []):
    for name in re.findall(r"\$\((\w+)\)", argument):
        if name not in env:
            problems.append(f"argument {argument}: no env {name} in the container, so $({name}) stays as written")


def field_ref(name):
    return env.get(name, {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")


def mounted_file(path):
    """The file at `path` is provided by some mount (a volume item, or a whole Secret/ConfigMap)."""
    parent, leaf = os.path.split(path)
    volume = volumes.get(mounts.get(parent))
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


if cluster:
    # PostgreSQL: the URL from a mounted Secret, and nothing on a volume.
    if claims or "--data-dir" in arg:
        problems.append("with --database-url-file the gateway writes no data directory: no volume claim, no --data-dir")
    if "--database-url" in arg:
        problems.append("--database-url in the arguments shows its password in the pod spec: use --database-url-file")
elif mounts.get(arg.get("--data-dir")) not in claims:
    problems.append("--data-dir is not on the volumeClaimTemplate")
for flag in ("--config", "--tls-cert", "--tls-key", "--admin-token-file", "--database-url-file"):
    if flag in arg and not mounted_file(arg[flag]):
        problems.append(f"{flag} {arg[flag]}: no mount provides it")
tls_port = port_of(arg.get("--tls-listen", ":0"))
if tls_port not in ports.values():
    problems.append(f"--tls-listen port {tls_port} is not a container port")

# The configuration file parses, and each key file it names is mounted.
config_map = get("ConfigMap", volumes[mounts[os.path.dirname(arg["--config"])]]["configMap"]["name"])
config = json.loads(config_map["data"][os.path.basename(arg["--config"])])
for provider_key in config.get("providerKeys", []):
    path = provider_key.get("privateKeyFile") or provider_key.get("publicKeyFile")
    if path and not (os.path.isabs(path) and mounted_file(path)):
        problems.append(f"provider key file {path}: not an absolute path that a mount provides")

# Services and the ServiceMonitor find the pods, name real ports, and expose TLS only: a
# cleartext listener (the nodes' own) is never behind the Service.
services = [o for (k, _), o in objects.items() if k == "Service"]
gateway_services = [s for s in services if matches(s["spec"].get("selector"), pod_labels)]
if not gateway_services:
    problems.append(f"no Service selects the pods of the {kind}")
for service in gateway_services:
    for port in service["spec"]["ports"]:
        target = resolve(port.get("targetPort", port["port"]), ports)
        if target not in ports.values():
            problems.append(f"Service {service['metadata']['name']} targets unknown port {port.get('targetPort')}")
        elif target != tls_port:
            problems.append(f"Service {service['metadata']['name']} exposes port {target}, which is not the TLS listener's {tls_port}")
for (object_kind, name), monitor in objects.items():
    if object_kind != "ServiceMonitor":
        continue
    if monitor.get("apiVersion") != "monitoring.coreos.com/v1":
        problems.append("ServiceMonitor apiVersion must be monitoring.coreos.com/v1")
    selected = [s for s in services if matches(monitor["spec"]["selector"], s["metadata"].get("labels", {}))]
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
        if credentials.get("key") and "--admin-token-file" in arg and os.path.basename(arg["--admin-token-file"]) != credentials["key"]:
            problems.append("ServiceMonitor's token is not the key the gateway reads as its admin token")

pdbs = [o for (k, _), o in objects.items() if k == "PodDisruptionBudget"]
for pdb in pdbs:
    if not matches(pdb["spec"]["selector"], pod_labels):
        problems.append(f"PodDisruptionBudget {pdb['metadata']['name']} selects no pod of the {kind}")
    if "minAvailable" in pdb["spec"] and "maxUnavailable" in pdb["spec"]:
        problems.append(f"PodDisruptionBudget {pdb['metadata']['name']} has both minAvailable and maxUnavailable")

if not cluster:
    # SQLite: one gateway per store.
    if replicas != 1:
        problems.append(f"the {kind} must have replicas: 1 (one gateway per SQLite store)")
else:
    # The cluster: several nodes, replaced one at a time, each reachable by the others on its
    # cleartext listener and by nothing else there.
    if kind != "Deployment":
        problems.append("the cluster runs as a Deployment: its nodes keep nothing on disk")
    if replicas < 2:
        problems.append(f"replicas: {replicas}: a cluster of one loses every device with its node")
    strategy = spec.get("strategy", {})
    rolling = strategy.get("rollingUpdate", {})
    if strategy.get("type", "RollingUpdate") != "RollingUpdate" or rolling.get("maxUnavailable") != 0 or not rolling.get("maxSurge"):
        problems.append("the Deployment must roll with maxUnavailable: 0 and a maxSurge: a new node ready before an old one drains")
    for pdb in pdbs:
        budget = pdb["spec"]
        allowed = budget.get("maxUnavailable", replicas - budget.get("minAvailable", replicas))
        if not isinstance(allowed, int) or not 0 < allowed < replicas:
            problems.append(
                f"PodDisruptionBudget {pdb['metadata']['name']}: {allowed} of {replicas} replicas may go at once;"
                " at least one and fewer than all, or drains either hang or take every node"
            )
    spread = pod.get("topologySpreadConstraints", [])
    anti = pod.get("affinity", {}).get("podAntiAffinity", {})
    anti_terms = [t.get("podAffinityTerm", t) for p in anti.values() for t in p]
    if not spread and not anti_terms:
        problems.append("no topologySpreadConstraints nor podAntiAffinity: every node may land on one machine")
    for term in spread + anti_terms:
        if not matches(term.get("labelSelector", {}), pod_labels):
            problems.append(f"topology spread or anti-affinity on {term.get('topologyKey')}: its labelSelector selects no gateway pod")

    node_name, node_address = one(args, "--node-name"), one(args, "--node-address")
    listens = args.get("--listen", [])
    if not node_name or field_ref(node_name.strip("$()")) != "metadata.name":
        problems.append("--node-name must be $(POD_NAME), the pod's name from the downward API (metadata.name)")
    if len(listens) != 1:
        problems.append(f"expected one --listen (the nodes' cleartext listener), found {len(listens)}")
    listen = listens[0] if len(listens) == 1 else None
    node_port = port_of(listen) if listen else None
    if listen:
        host = listen.rsplit(":", 1)[0].strip("[]")
        if field_ref(host.strip("$()")) != "status.podIP":
            problems.append(f"--listen {listen}: must be the pod's address, $(POD_IP) from status.podIP, for the other nodes to reach it")
        if node_address != f"http://{listen}":
            problems.append(f"--node-address {node_address} is not http:// and the --listen address {listen}")
        if "--allow-insecure-cleartext" not in args:
            problems.append("--listen off loopback without --allow-insecure-cleartext: the gateway refuses to start")
        if node_port not in ports.values():
            problems.append(f"--listen port {node_port} is not a container port")
        if node_port == tls_port:
            problems.append("--listen and --tls-listen share a port")

    # NetworkPolicy: ingress to the gateway pods is isolated; the node port is admitted from
    # gateway pods alone, the TLS port from anywhere. Policies add up, so every one that selects
    # the pods is read.
    policies = [
        o
        for (k, _), o in objects.items()
        if k == "NetworkPolicy" and matches(o["spec"].get("podSelector", {}), pod_labels) and "Ingress" in o["spec"].get("policyTypes", ["Ingress"])
    ]
    if not policies:
        problems.append("no NetworkPolicy isolates the gateway pods: their cleartext node port is open to every pod")
    def admits(rule, port):
        """The rule admits this port: it names no ports, or this one, or an entry without one."""
        named = [resolve(p.get("port"), ports) for p in rule.get("ports", [])]
        return not named or port in named or None in named

    node_peers_ok, tls_open = False, False
    for policy in policies:
        for rule in policy["spec"].get("ingress", []):
            peers = rule.get("from", [])
            if admits(rule, tls_port) and not peers:
                tls_open = True
            if node_port is None or not admits(rule, node_port):
                continue
            narrow = peers and all(
                set(peer) == {"podSelector"}
                and peer["podSelector"].get("matchLabels")
                and matches(peer["podSelector"], pod_labels)
                for peer in peers
            )
            if not narrow:
                problems.append(
                    f"NetworkPolicy {policy['metadata']['name']} admits the node port {node_port} from {peers or 'anywhere'}:"
                    " only gateway pods (a podSelector of their labels) may reach it"
                )
            else:
                node_peers_ok = True
    if policies and listen and not node_peers_ok:
        problems.append(f"no NetworkPolicy rule admits the node port {node_port} from the gateway pods: nodes cannot forward to each other")
    if policies and not tls_open:
        problems.append(f"no NetworkPolicy rule admits the TLS port {tls_port} from anywhere: devices and providers are shut out")

    # What the gateway's selectors pick must be its own pods only (the example database is beside them).
    for other in others:
        labels = other["spec"]["template"]["metadata"]["labels"]
        for selecting in gateway_services + pdbs + policies:
            selector = selecting["spec"].get("selector", selecting["spec"].get("podSelector", {}))
            if matches(selector, labels):
                problems.append(f"{selecting['kind']} {selecting['metadata']['name']} also selects the pods of {other['kind']} {other['metadata']['name']}")

# The example database: its Service finds it, and the gateways' URL names its Service, port,
# user, password and database.
for other in others:
    postgres = next((c for c in pod_specs(other)[0]["containers"] if c["image"].split(":")[0] == "postgres"), None)
    if postgres is None:
        problems.append(f"{other['kind']} {other['metadata']['name']} is neither the gateway nor the example database")
        continue
    labels = other["spec"]["template"]["metadata"]["labels"]
    postgres_ports = {p["name"]: p["containerPort"] for p in postgres.get("ports", [])}
    get("Service", other["spec"].get("serviceName"))
    postgres_env = {e["name"]: e for e in postgres.get("env", [])}

    def env_value(name):
        ref = postgres_env.get(name, {}).get("valueFrom", {}).get("secretKeyRef")
        if ref and ref["key"] not in (secret_keys(ref["name"]) or set()):
            problems.append(f"env {name} of the database: Secret {ref['name']} has no key {ref['key']}")
        return secret_value(ref["name"], ref["key"]) if ref else postgres_env.get(name, {}).get("value")

    database_mounts = {m["mountPath"]: m["name"] for m in postgres.get("volumeMounts", [])}
    database_claims = {c["metadata"]["name"] for c in other["spec"].get("volumeClaimTemplates", [])}
    data = env_value("PGDATA") or "/var/lib/postgresql/data"
    data_mount = next((m for m in database_mounts if data.startswith(m + "/")), None)
    if data_mount is None or database_mounts[data_mount] not in database_claims:
        problems.append(f"PGDATA {data} is not a directory below the database's volume claim (initdb refuses a mount's root)")
    url_secret = volumes.get(mounts.get(os.path.dirname(arg.get("--database-url-file", ""))), {}).get("secret", {})
    url = urllib.parse.urlsplit(secret_value(url_secret.get("secretName"), os.path.basename(arg.get("--database-url-file", ""))) or "")
    query = urllib.parse.parse_qs(url.query)
    service = objects.get(("Service", url.hostname))
    if service is None or not matches(service["spec"].get("selector"), labels):
        problems.append(f"the gateways' URL names host {url.hostname}, which is no Service of the example database")
    elif not any(
        p["port"] == (url.port or 5432) and resolve(p.get("targetPort", p["port"]), postgres_ports) == 5432
        for p in service["spec"]["ports"]
    ):
        problems.append(f"the gateways' URL port {url.port or 5432} does not reach the database's 5432 through Service {url.hostname}")
    expected = {"user": env_value("POSTGRES_USER"), "password": env_value("POSTGRES_PASSWORD")}
    given = {"user": urllib.parse.unquote(url.username or ""), "password": urllib.parse.unquote(url.password or "")}
    for part in ("user", "password"):
        if given[part] != expected[part]:
            problems.append(f"the gateways' URL {part} is not the example database's")
    if url.path.lstrip("/") != (env_value("POSTGRES_DB") or expected["user"]):
        problems.append(f"the gateways' URL database {url.path.lstrip('/')} is not the example database's")
    if query.get("sslmode") != ["disable"]:
        problems.append("the example database serves no TLS: its URL needs sslmode=disable")

for problem in problems:
    print(f"kubernetes-check: FAIL ({variant}): {problem}", file=sys.stderr)
if problems:
    sys.exit(1)
print(f"kubernetes-check: cross-references hold ({variant}: {len(objects)} objects)")
