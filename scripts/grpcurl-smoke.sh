#!/usr/bin/env bash
# Starts machine-driver-aws on its embedded fake and drives it with grpcurl
# exactly as the README shows: list, describe, health, and a machine lifecycle.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET="${CARGO_TARGET_DIR:-target}"
BIN="$TARGET/debug/machine-driver-aws"
[ -x "$BIN" ] || cargo build --workspace --all-features --bins
DIR="$(mktemp -d)"
SOCK="$DIR/driver.sock"
"$BIN" --embedded-fake --endpoint "unix://$SOCK" >"$DIR/driver.log" 2>&1 &
PID=$!
cleanup() { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || { echo "driver did not create $SOCK"; cat "$DIR/driver.log"; exit 1; }

# Exactly as the README prints them: no -authority flag.
G=(grpcurl -plaintext -unix)
fail() { echo "FAIL $1: wanted '$2' in:"; echo "$3"; echo "--- driver log"; tail -20 "$DIR/driver.log"; exit 1; }
check() { # name, expected substring, command... (must succeed)
    local name="$1" want="$2"; shift 2
    local out
    if ! out="$("$@" 2>&1)" || [[ "$out" != *"$want"* ]]; then fail "$name" "$want" "$out"; fi
    echo "PASS $name"
}
check_error() { # name, expected substring, command... (must fail with that status)
    local name="$1" want="$2"; shift 2
    local out
    if out="$("$@" 2>&1)" || [[ "$out" != *"$want"* ]] || [[ "$out" == *"is not recognized"* ]]; then fail "$name" "$want" "$out"; fi
    echo "PASS $name"
}
check list "machinedriver.v1.MachineDriverService" "${G[@]}" "$SOCK" list
check describe "rpc CreateMachine" "${G[@]}" "$SOCK" describe machinedriver.v1.MachineDriverService
check health '"SERVING"' "${G[@]}" "$SOCK" grpc.health.v1.Health/Check
check identity '"provider": "aws"' "${G[@]}" "$SOCK" machinedriver.v1.IdentityService/GetPluginInfo
check_error status-absent "NotFound" sh -c "scripts/grpcurl-request.py status aws smoke-1 | ${G[*]} -d @ $SOCK machinedriver.v1.MachineDriverService/GetMachineStatus"
check create '"providerId": "aws:///' sh -c "scripts/grpcurl-request.py create aws smoke-1 | ${G[*]} -d @ $SOCK machinedriver.v1.MachineDriverService/CreateMachine"
PROVIDER_ID="$(scripts/grpcurl-request.py create aws smoke-1 | "${G[@]}" -d @ "$SOCK" machinedriver.v1.MachineDriverService/CreateMachine | python3 -c 'import json,sys; print(json.load(sys.stdin)["providerId"])')"
check list-machines "$PROVIDER_ID" sh -c "scripts/grpcurl-request.py list aws | ${G[*]} -d @ $SOCK machinedriver.v1.MachineDriverService/ListMachines"
check delete "{" sh -c "scripts/grpcurl-request.py delete aws smoke-1 | ${G[*]} -d @ $SOCK machinedriver.v1.MachineDriverService/DeleteMachine"
check_error bad-input "InvalidArgument" sh -c "echo '{\"machine\":{\"name\":\"x\"},\"machineClass\":{\"providerSpec\":\"{\"}}' | ${G[*]} -d @ $SOCK machinedriver.v1.MachineDriverService/CreateMachine"
# Error details decode through reflection (google.rpc types are served too).
check_error error-details-decoded '"fieldViolations"' sh -c "echo '{\"machine\":{\"name\":\"x\"},\"machineClass\":{\"providerSpec\":\"{\"}}' | ${G[*]} -d @ $SOCK machinedriver.v1.MachineDriverService/CreateMachine"
kill -TERM "$PID"; wait "$PID" || true
[ ! -e "$SOCK" ] || { echo "FAIL socket left behind after SIGTERM"; exit 1; }
echo "PASS shutdown removes the socket"
echo "grpcurl smoke test passed"
