"""Turns Deploy/kubernetes' StatefulSet pod into a `podman run` command line, so that the
manifests' container settings (args, env, mounts, user, read-only root, dropped capabilities)
are run for real without a cluster.

Usage: python3 kubernetes-pod.py MANIFEST_DIR WORK_DIR IMAGE NAME > args   (NUL-separated)

WORK_DIR must hold test values for the Secret: `secrets/<key>` files (the manifests' own values
are placeholders) and `tls/tls.crt`, `tls/tls.key` for the user's pushgate-tls Secret. The
ConfigMap's files are written under WORK_DIR/configmaps.
"""
import os
import sys

import yaml

manifests, work, image, name = sys.argv[1:5]
objects = {}
for file in os.listdir(manifests):
    if file.endswith(".yaml") and file != "kustomization.yaml":
        for doc in yaml.safe_load_all(open(os.path.join(manifests, file))):
            if doc:
                objects[(doc["kind"], doc["metadata"]["name"])] = doc

sts = next(o for (k, _), o in objects.items() if k == "StatefulSet")
pod = sts["spec"]["template"]["spec"]
container = pod["containers"][0]
psc, csc = pod.get("securityContext", {}), container.get("securityContext", {})

args = ["run", "-d", "--name", name]
args += ["--user", f"{psc['runAsUser']}:{psc['runAsGroup']}", "--group-add", str(psc["fsGroup"])]
if csc.get("readOnlyRootFilesystem"):
    args.append("--read-only")
for cap in csc.get("capabilities", {}).get("drop", []):
    args += ["--cap-drop", cap.lower()]
if csc.get("allowPrivilegeEscalation") is False:
    args += ["--security-opt", "no-new-privileges"]
limits = container.get("resources", {}).get("limits", {})
if "memory" in limits:
    args += ["--memory", limits["memory"].replace("Gi", "g").replace("Mi", "m")]
for port in container.get("ports", []):
    args += ["-p", f"127.0.0.1::{port['containerPort']}"]
for env in container.get("env", []):
    ref = env.get("valueFrom", {}).get("secretKeyRef")
    value = open(os.path.join(work, "secrets", ref["key"])).read() if ref else env["value"]
    args += ["-e", f"{env['name']}={value}"]

volumes = {v["name"]: v for v in pod.get("volumes", [])}
claims = {c["metadata"]["name"] for c in sts["spec"].get("volumeClaimTemplates", [])}
for mount in container.get("volumeMounts", []):
    target, volume = mount["mountPath"], volumes.get(mount["name"])
    ro = ":ro" if mount.get("readOnly") else ""
    if mount["name"] in claims:
        # A fresh claim: a named volume, which takes the image directory's owner (10001), as
        # fsGroup makes a new PersistentVolume writable for group 10001.
        args += ["-v", f"{name}-{mount['name']}:{target}"]
    elif "emptyDir" in volume:
        args += ["--tmpfs", f"{target}:rw,mode=1777"]
    elif "configMap" in volume:
        source = os.path.join(work, "configmaps", volume["configMap"]["name"])
        os.makedirs(source, exist_ok=True)
        for key, data in objects[("ConfigMap", volume["configMap"]["name"])]["data"].items():
            with open(os.path.join(source, key), "w") as f:
                f.write(data)
        args += ["-v", f"{source}:{target}{ro}"]
    elif "secret" in volume:
        secret = volume["secret"]["secretName"]
        source = os.path.join(work, "volumes", mount["name"])
        os.makedirs(source, exist_ok=True)
        origin = os.path.join(work, "tls") if secret == "pushgate-tls" else os.path.join(work, "secrets")
        items = volume["secret"].get("items") or [{"key": k, "path": k} for k in os.listdir(origin)]
        for item in items:
            data = open(os.path.join(origin, item["key"])).read()
            with open(os.path.join(source, item["path"]), "w") as f:
                f.write(data)
            # defaultMode 0400 with fsGroup: the kubelet makes the files the pod's group's.
            os.chmod(os.path.join(source, item["path"]), 0o440)
            os.chown(os.path.join(source, item["path"]), 0, psc["fsGroup"])
        args += ["-v", f"{source}:{target}{ro}"]
    else:
        sys.exit(f"kubernetes-pod: volume {mount['name']}: kind not handled")
args.append(image)
args += container.get("args", [])
sys.stdout.write("\0".join(args))
