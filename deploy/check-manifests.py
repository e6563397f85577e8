#!/usr/bin/env python3
"""Checks rendered deploy manifests (deploy/check.sh runs it per overlay).

Usage: check-manifests.py PROVIDER RENDERED.yaml

- Pod Security Standard "restricted" (v1.30+ rules) on every pod template and
  every container, init containers included: runAsNonRoot, no root user, no
  privileged, no privilege escalation, all capabilities dropped (only
  NET_BIND_SERVICE may be added), seccomp RuntimeDefault or Localhost, no host
  namespaces, ports or hostPath volumes, only the volume types it allows.
- Beyond it: a read-only root filesystem on every container; every image
  pinned (a tag that is not `latest` or `placeholder`); the sidecar image is
  `machine-driver-PROVIDER`; the sidecar is a native sidecar with a startup probe.
Exits non-zero naming every violation.
"""

import sys

import yaml

ALLOWED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}


def pod_specs(doc):
    kind = doc.get("kind")
    if kind == "Pod":
        yield doc["metadata"]["name"], doc["spec"]
    elif kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        yield doc["metadata"]["name"], doc["spec"]["template"]["spec"]


def check_pod(name, spec, provider):
    errors = []
    pod_sc = spec.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            errors.append(f"{name}: {field} is set")
    for v in spec.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= ALLOWED_VOLUMES:
            errors.append(f"{name}: volume {v['name']} of type {sorted(kinds - ALLOWED_VOLUMES)} is not allowed")
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type")
    containers = [("init", c) for c in spec.get("initContainers") or []] + [("", c) for c in spec.get("containers") or []]
    sidecar = None
    for where, c in containers:
        cname = f"{name}/{c['name']}"
        sc = c.get("securityContext") or {}
        if not (sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True):
            errors.append(f"{cname}: runAsNonRoot is not true")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            errors.append(f"{cname}: runs as user 0")
        if sc.get("privileged"):
            errors.append(f"{cname}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            errors.append(f"{cname}: allowPrivilegeEscalation is not false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            errors.append(f"{cname}: capabilities do not drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            errors.append(f"{cname}: adds capabilities {caps.get('add')}")
        seccomp = (sc.get("seccompProfile") or {}).get("type", pod_seccomp)
        if seccomp not in ("RuntimeDefault", "Localhost"):
            errors.append(f"{cname}: seccompProfile is {seccomp!r}, not RuntimeDefault or Localhost")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            errors.append(f"{cname}: uses a hostPort")
        if sc.get("readOnlyRootFilesystem") is not True:
            errors.append(f"{cname}: root filesystem is not read-only")
        image = c.get("image", "")
        tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
        if "@sha256:" not in image and tag in ("", "latest", "placeholder"):
            errors.append(f"{cname}: image {image!r} is not pinned")
        if c["name"] == "machine-driver":
            sidecar = (where, c)
    if sidecar is None:
        errors.append(f"{name}: no machine-driver container")
    else:
        where, c = sidecar
        if not c.get("image", "").split("/")[-1].startswith(f"machine-driver-{provider}:"):
            errors.append(f"{name}: sidecar image {c.get('image')!r} is not machine-driver-{provider}")
        if where != "init" or c.get("restartPolicy") != "Always" or not c.get("startupProbe"):
            errors.append(f"{name}: machine-driver is not a native sidecar (init container, restartPolicy Always, startupProbe)")
    return errors


def main():
    provider, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    errors = []
    pods = 0
    for doc in docs:
        for name, spec in pod_specs(doc):
            pods += 1
            errors.extend(check_pod(name, spec, provider))
    if pods == 0:
        errors.append("no pod template rendered")
    for e in errors:
        print(f"FAIL {provider}: {e}")
    if errors:
        sys.exit(1)
    print(f"ok {provider}: {pods} pod template(s) pass Pod Security restricted, read-only roots, pinned images")


if __name__ == "__main__":
    main()
