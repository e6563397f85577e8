#!/usr/bin/env bash
# Cross-checks fake-ecs with Alibaba Cloud's official Python SDKs (V3 and V1).
#
# Usage: tests/fake-ecs/crosscheck/run.sh PATH/TO/fake-ecs
#
# Creates (or reuses) a venv under ${TMPDIR:-/tmp} keyed by the hash of
# requirements.txt, installs the pinned SDKs, starts the fake on a free port,
# runs crosscheck.py against it and stops the fake again.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fake_bin="${1:?usage: run.sh PATH/TO/fake-ecs}"
[[ -x "$fake_bin" ]] || { echo "not executable: $fake_bin" >&2; exit 2; }

python="${PYTHON:-python3}"
hash="$(sha256sum "$here/requirements.txt" | cut -c1-16)"
venv="${TMPDIR:-/tmp}/fake-ecs-crosscheck-$hash"
if [[ ! -x "$venv/bin/python" ]] || [[ ! -f "$venv/.installed" ]]; then
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
    touch "$venv/.installed"
fi

port="$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
log="$(mktemp "${TMPDIR:-/tmp}/fake-ecs-crosscheck-log.XXXXXX")"
"$fake_bin" --listen "127.0.0.1:$port" >"$log" 2>&1 &
fake_pid=$!
cleanup() {
    kill "$fake_pid" 2>/dev/null || true
    wait "$fake_pid" 2>/dev/null || true
    rm -f "$log"
}
trap cleanup EXIT

url="http://127.0.0.1:$port"
for _ in $(seq 1 100); do
    if "$venv/bin/python" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/_admin/calls', timeout=1)" "$url" 2>/dev/null; then
        break
    fi
    if ! kill -0 "$fake_pid" 2>/dev/null; then
        echo "fake-ecs exited early:" >&2
        cat "$log" >&2
        exit 1
    fi
    sleep 0.1
done

"$venv/bin/python" "$here/crosscheck.py" "$url"
