"""What the fakes' cross-checks share (tests/fake-*/crosscheck/crosscheck.py).

scripts/crosscheck-fake.sh puts this folder on PYTHONPATH. A cross-check counts
each assertion with `check`/`equal` (every one is printed; mismatches are
collected and the run exits 1 at the end), drives the fake's admin API
(`docs/fake-admin-api.md`) with `admin`, and runs its scenarios with `Run`, which
turns a crashing scenario into one failed check with its traceback.
"""

import json
import sys
import time
import traceback
import urllib.request

CHECKS = 0
FAILURES = []


def check(condition, what):
    """Counts one assertion and prints it; a mismatch is remembered (exit status 1 at the end)."""
    global CHECKS
    CHECKS += 1
    if condition:
        print(f"ok   {CHECKS:3d} {what}")
    else:
        FAILURES.append(what)
        print(f"FAIL {CHECKS:3d} {what}")
    return condition


def equal(actual, expected, what):
    """`check` that `actual == expected`, printing both on a mismatch."""
    return check(
        actual == expected, f"{what}: {actual!r}" if actual == expected else f"{what}: {actual!r} != {expected!r}"
    )


def admin(fake, path, body=None, method="POST"):
    """`METHOD <fake>/_admin/<path>` with a JSON body (none for GET); the JSON answer, `{}` when empty."""
    data = None if method == "GET" else json.dumps(body if body is not None else {}).encode()
    request = urllib.request.Request(
        f"{fake}/_admin/{path}", data=data, method=method, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        if resp.status != 200:
            raise RuntimeError(f"admin {method} {path}: {resp.status}")
        text = resp.read()
    return json.loads(text) if text else {}


class Run:
    """One cross-check run of fake `name`: timed scenarios, then the summary and exit status."""

    def __init__(self, name):
        self.name = name
        self.started = time.monotonic()

    def scenario(self, title, body):
        """Runs `body()`, timed; a crash is a failed check with its traceback. Its result, or None."""
        print(f"--- {title}")
        begun = time.monotonic()
        try:
            return body()
        except Exception:  # noqa: BLE001 - any crash is a failed check, reported with its traceback
            check(False, f"{title} raised:\n{traceback.format_exc()}")
            return None
        finally:
            print(f"--- {title}: {time.monotonic() - begun:.1f} s")

    def finish(self):
        """Prints the summary; exits 1 when any check failed."""
        elapsed = time.monotonic() - self.started
        if FAILURES:
            print(f"{self.name} cross-check: {len(FAILURES)} of {CHECKS} checks FAILED ({elapsed:.1f} s)", file=sys.stderr)
            for what in FAILURES:
                print(f"  FAIL {what}", file=sys.stderr)
            sys.exit(1)
        print(f"{self.name} cross-check: {CHECKS} checks passed ({elapsed:.1f} s)")
