#!/usr/bin/env bash
# Cross-checks a fake cloud with the cloud's own client (scripts/test.sh runs it
# for every tests/fake-*/crosscheck/ folder).
#
# Usage: scripts/crosscheck-fake.sh tests/fake-<api>/crosscheck PATH/TO/fake-<api>
#
# The folder holds requirements.txt (the cloud's official SDK, pinned) and
# crosscheck.py (called with the fake's URL; exits non-zero on any mismatch).
# Creates (or reuses) a venv under ${TMPDIR:-/tmp} keyed by the fake and the
# hash of requirements.txt, installs the SDK, starts the fake on a free port,
# runs crosscheck.py against it and stops the fake again.
set -euo pipefail

dir="$(cd "${1:?usage: crosscheck-fake.sh CROSSCHECK_DIR FAKE_BINARY}" && pwd)"
fake_bin="${2:?usage: crosscheck-fake.sh CROSSCHECK_DIR FAKE_BINARY}"
[[ -x "$fake_bin" ]] || { echo "not executable: $fake_bin" >&2; exit 2; }
fake="$(basename "$fake_bin")"

python="${PYTHON:-python3}"
hash="$(sha256sum "$dir/requirements.txt" | cut -c1-16)"
venv="${TMPDIR:-/tmp}/$fake-crosscheck-$hash"
if [[ ! -x "$venv/bin/python" ]] || [[ ! -f "$venv/.installed" ]]; then
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$dir/requirements.txt"
    touch "$venv/.installed"
fi

port="$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
log="$(mktemp "${TMPDIR:-/tmp}/$fake-crosscheck-log.XXXXXX")"
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
        echo "$fake exited early:" >&2
        cat "$log" >&2
        exit 1
    fi
    sleep 0.1
done

# What the cross-checks share (check/equal, the admin API, the scenario runner).
support="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/fake-support/python" && pwd)"
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$support${PYTHONPATH:+:$PYTHONPATH}" "$venv/bin/python" "$dir/crosscheck.py" "$url"
