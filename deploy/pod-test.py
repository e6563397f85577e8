#!/usr/bin/env python3
"""Turns a rendered overlay into the pod deploy/pod-test.sh plays with podman.

Usage: pod-test.py PROVIDER RENDERED.yaml SOCKET_DIR FAKE_PORT METRICS_PORT ALLOW_LIST > pod.yaml

The Deployment's pod keeps only the sidecar (the controller images come from a
registry this machine cannot reach, and podman 4.3 runs init containers to
completion, so the native sidecar becomes a plain container here) with its
image, user, security context and environment as rendered, and for the test:
- the image is the one deploy/image.sh built (localhost/machine-driver-PROVIDER:debug);
- the socket directory is a host directory, so the suite on the host dials it;
- host network, so the embedded fake's admin API (--embedded-fake on
  127.0.0.1:FAKE_PORT) and metrics (127.0.0.1:METRICS_PORT) are reachable;
- no probes (podman would run them as `curl` inside the container, which has no
  shell and no curl; a podman limitation, not the kubelet's).
"""

import sys

import yaml


def main():
    provider, rendered, socket_dir, fake_port, metrics_port, allow_list = sys.argv[1:7]
    with open(rendered) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    deployment = next(d for d in docs if d.get("kind") == "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    sidecar = next(c for c in spec.get("initContainers", []) if c["name"] == "machine-driver")
    sidecar.pop("restartPolicy", None)
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        sidecar.pop(probe, None)
    sidecar["image"] = f"localhost/machine-driver-{provider}:debug"
    sidecar["args"] = ["--embedded-fake", "--embedded-fake-listen", f"127.0.0.1:{fake_port}"]
    env = [e for e in sidecar.get("env", []) if e["name"] not in ("MACHINE_DRIVER_METRICS_LISTEN", "MACHINE_DRIVER_SHARE_IMAGE_ALLOW_LIST")]
    env.append({"name": "MACHINE_DRIVER_METRICS_LISTEN", "value": f"127.0.0.1:{metrics_port}"})
    env.append({"name": "MACHINE_DRIVER_SHARE_IMAGE_ALLOW_LIST", "value": allow_list})
    sidecar["env"] = env
    sidecar["ports"] = []
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"machine-driver-{provider}-test"},
        "spec": {
            "hostNetwork": True,
            "restartPolicy": "Never",
            "securityContext": spec.get("securityContext", {}),
            "terminationGracePeriodSeconds": spec.get("terminationGracePeriodSeconds", 30),
            "containers": [sidecar],
            "volumes": [{"name": "driver-socket", "hostPath": {"path": socket_dir, "type": "Directory"}}],
        },
    }
    yaml.safe_dump(pod, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
