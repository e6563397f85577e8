#!/usr/bin/env bash
# Runs one provider's sidecar image the way the pod runs it, with podman, and
# drives it from the host:
#
#   deploy/pod-test.sh PROVIDER
#
# 1. deploy/image.sh PROVIDER (the debug binary with the embedded fake);
# 2. the rendered overlay's sidecar as a pod (deploy/pod-test.py): user 65532,
#    read-only root, no capabilities, the socket in a host directory;
# 3. the conformance suite from the host against the socket in that directory
#    (the embedded fake's admin API for the fault scenarios);
# 4. SIGTERM to the pod while a call is in flight (the fake answers after 3 s):
#    the call is answered, and the socket is gone afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
source deploy/podman/env.sh
provider="${1:?usage: deploy/pod-test.sh PROVIDER}"
target="${CARGO_TARGET_DIR:-target}"

deploy/image.sh "$provider"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
fake_port="$(free_port)"
metrics_port="$(free_port)"
work="$(mktemp -d "${TMPDIR:-/tmp}/pod-test.XXXXXX")"
sock_dir="$work/sock"
mkdir -p "$sock_dir"
chown 65532:65532 "$sock_dir" 2>/dev/null || chmod 0777 "$sock_dir"
pod="machine-driver-$provider-test"
cleanup() {
    podman pod rm -f -t 0 "$pod" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

allow="$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])).get("shareImage") or {}; print(",".join(x for x in (s.get("allowedImage"), s.get("visibleImage")) if x))' "providers/$provider/examples/conformance.json")"
deploy/render.sh "deploy/overlays/$provider" >"$work/rendered.yaml"
python3 deploy/pod-test.py "$provider" "$work/rendered.yaml" "$sock_dir" "$fake_port" "$metrics_port" "$allow" >"$work/pod.yaml"
podman pod rm -f -t 0 "$pod" >/dev/null 2>&1 || true
podman kube play --quiet "$work/pod.yaml" >/dev/null
for _ in $(seq 100); do [[ -S "$sock_dir/driver.sock" ]] && break; sleep 0.1; done
if [[ ! -S "$sock_dir/driver.sock" ]]; then
    echo "the pod did not create its socket:" >&2
    podman pod logs "$pod" >&2 || true
    exit 1
fi
mode="$(stat -c '%a %u' "$sock_dir/driver.sock")"
echo "socket $sock_dir/driver.sock: mode and owner $mode"
[[ "$mode" == "660 65532" ]] || { echo "expected mode 660, owner 65532" >&2; exit 1; }

"$target/debug/machine-driver-conformance" \
    --endpoint "unix://$sock_dir/driver.sock" \
    --fake-admin "http://127.0.0.1:$fake_port/_admin" \
    --machine-class "providers/$provider/examples/machine-class.json" \
    --secret "providers/$provider/examples/secret.json" \
    --repeat 2

# SIGTERM with a call in flight: the call gets its answer, then the socket goes.
python3 -c 'import sys, urllib.request as u; u.urlopen(u.Request(sys.argv[1], data=b"{\"operation\": \"*\", \"ms\": 3000}", headers={"Content-Type": "application/json"}))' \
    "http://127.0.0.1:$fake_port/_admin/latency"
scripts/grpcurl-request.py status "$provider" pod-test-in-flight \
    | grpcurl -plaintext -unix -d @ "$sock_dir/driver.sock" machinedriver.v1.MachineDriverService/GetMachineStatus \
        >"$work/in-flight.out" 2>&1 &
call=$!
sleep 1
podman pod stop -t 30 "$pod" >/dev/null
wait "$call" || true
if ! grep -q "NotFound" "$work/in-flight.out"; then
    echo "the call in flight at SIGTERM got no answer:" >&2
    cat "$work/in-flight.out" >&2
    podman pod logs "$pod" >&2 || true
    exit 1
fi
echo "in-flight call at SIGTERM answered: $(grep -o 'Code: [A-Za-z]*' "$work/in-flight.out")"
[[ ! -e "$sock_dir/driver.sock" ]] || { echo "the socket outlived the pod" >&2; exit 1; }
echo "socket removed at shutdown"
