#!/usr/bin/env python3
"""Canary secret for the conformance run, and the search for it (scripts/canary-check.sh).

  canary-check.py prepare --examples DIR --fake-src DIR --out DIR
      Writes OUT/secret.json and OUT/conformance.json: the provider's example
      secret and conformance file (shareImage owner/consumer secrets) with a
      fresh random canary in every secret value, and OUT/needles.json (what
      the scan looks for).
  canary-check.py scan --needles FILE [--trace-log FILE] [--otlp SUMMARY] FILE...
      Searches FILEs for the canary and for the secret values (below) in
      every encoding below; exit 1 on any hit, with file, line, encoding and
      the secret key. --trace-log/--otlp make sure the capture is not empty
      (TRACE lines in the driver's JSON log, span exports at the collector).
  canary-check.py selftest
      Proves that the scan finds a canary in each encoding, and nothing in a
      clean file.

How each secret value is marked (the rules name secret keys, not clouds):
  - userData: a comment line `# <canary>` appended (cloud-config and scripts);
    user data travels base64-encoded to the clouds, hence the encodings.
  - a key that names an identifier (IDENTIFIER_KEYS: key ids, tenant,
    subscription, project, user and domain names, URLs): kept, not searched;
    identifiers are not secrets and legitimately appear in logs and provider IDs.
  - a value that is itself a JSON object (GCP's serviceAccountJSON): the same
    rules for each of its keys, plus an extra "canary" key.
  - any other value is a secret. If the fake cloud's source has it verbatim,
    the fake checks it (a password, a signing key), so it is kept as it is;
    otherwise the canary is put in front of it. Either way its original text
    is searched too (each line of 12+ characters, 8 of them different,
    without PEM armour).
  - two extra keys with the canary as value ("canaryExtraSecret",
    "canary-extra.token").

Encodings searched, for the canary and each secret value: plain; hex (lower
and upper case); percent-encoding of every byte (both cases); a decimal byte
list ("[67, 110, ...]", Rust's Debug of a Vec<u8>, with and without spaces);
base64, standard and URL-safe alphabets, at the three offsets a string can
start at inside a longer encoded buffer, also with + and / percent-encoded (a
query string or form body, as EC2's UserData parameter travels), and in a copy of each file with
line breaks (and JSON-escaped line breaks) removed, for wrapped base64.
"""

import argparse
import base64
import concurrent.futures
import json
import os
import re
import secrets
import sys
import tempfile
import urllib.parse
from pathlib import Path

IDENTIFIER_KEYS = {
    # AWS, Alibaba Cloud: the public half of an access key pair (AWS logs it at debug).
    "accessKeyID",
    "providerAccessKeyId",
    "alicloudAccessKeyID",
    "roleARN",
    "workloadIdentityTokenFile",  # a path
    # Azure.
    "clientID",
    "azureClientId",
    "tenantID",
    "azureTenantId",
    "subscriptionID",
    "azureSubscriptionId",
    # OpenStack.
    "authURL",
    "domainName",
    "domainID",
    "tenantName",
    "projectName",
    "projectID",
    "userDomainName",
    "userDomainID",
    "username",
    "applicationCredentialID",
    "applicationCredentialName",
    "region",
    # Inside GCP's service account key JSON.
    "type",
    "project_id",
    "client_email",
    "token_uri",
    "auth_uri",
    "auth_provider_x509_cert_url",
    "client_x509_cert_url",
    "universe_domain",
}
EXTRA_KEYS = ("canaryExtraSecret", "canary-extra.token")
MIN_LITERAL = 12
MIN_DISTINCT = 8  # "000...0" is no needle
SOURCE_SUFFIXES = {".rs", ".json", ".toml", ".yaml", ".yml", ".xml", ".txt"}


class Canaries:
    """One random base per run; each marked place gets its own tagged canary."""

    def __init__(self, base=None):
        self.base = base or "CnRy" + secrets.token_hex(8)
        self.places = {}

    def new(self, place):
        canary = f"{self.base}x{len(self.places):02d}"
        self.places[canary] = place
        return canary


def fake_source_text(fake_dir):
    parts = []
    for path in sorted(Path(fake_dir).rglob("*")):
        if path.is_file() and path.suffix in SOURCE_SUFFIXES and "target" not in path.parts:
            parts.append(path.read_text(errors="replace"))
    return "\n".join(parts)


def literal_pieces(value):
    pieces = []
    for line in value.replace("\\n", "\n").splitlines():
        line = line.strip()
        if len(line) >= MIN_LITERAL and len(set(line)) >= MIN_DISTINCT and not line.startswith("-----"):
            pieces.append(line)
    return pieces


def mark(secret, place, canaries, fake_src, literals, extra=True):
    """Returns `secret` (a dict of strings) with canaries in it; records secret literals."""
    out = {}
    for key, value in secret.items():
        where = f"{place}.{key}"
        if not isinstance(value, str):
            out[key] = value
        elif key == "userData":
            sep = "" if value.endswith("\n") or not value else "\n"
            out[key] = f"{value}{sep}# {canaries.new(where)}\n"
        elif key in IDENTIFIER_KEYS:
            out[key] = value
        elif _json_object(value) is not None:
            inner = mark(_json_object(value), where, canaries, fake_src, literals, extra=False)
            inner["canary"] = canaries.new(where + ".canary")
            out[key] = json.dumps(inner)
        else:
            for piece in literal_pieces(value):
                literals[piece] = f"{literals[piece]}, {where}" if piece in literals else where
            out[key] = value if value in fake_src else canaries.new(where) + value
    if extra:
        for key in EXTRA_KEYS:
            out[key] = canaries.new(f"{place}.{key}")
    return out


def _json_object(value):
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def prepare(args):
    examples, out = Path(args.examples), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fake_src = fake_source_text(args.fake_src)
    canaries, literals = Canaries(), {}
    secret = json.loads((examples / "secret.json").read_text())
    (out / "secret.json").write_text(json.dumps(mark(secret, "secret", canaries, fake_src, literals), indent=2))
    conformance = json.loads((examples / "conformance.json").read_text())
    share = conformance.get("shareImage") or {}
    for key in ("ownerSecret", "consumerSecret"):
        if isinstance(share.get(key), dict):
            share[key] = mark(share[key], f"shareImage.{key}", canaries, fake_src, literals)
    (out / "conformance.json").write_text(json.dumps(conformance, indent=2))
    kept = sorted(p for v, p in literals.items() if v in fake_src)
    needles = {"base": canaries.base, "canaries": canaries.places, "literals": literals}
    (out / "needles.json").write_text(json.dumps(needles, indent=2))
    print(
        f"canary {canaries.base}: {len(canaries.places)} places, {len(literals)} secret values searched"
        + (f" (kept as the fake checks them: {', '.join(kept)})" if kept else "")
    )


# ---------------------------------------------------------------- encodings


def b64_cores(data, alphabet):
    """The part of base64(prefix + data + suffix) that depends on `data` only,
    for each of the three offsets of `data` in the encoded buffer."""
    encode = base64.b64encode if alphabet == "std" else base64.urlsafe_b64encode
    cores = []
    for offset in range(3):
        text = encode(b"\0" * offset + data)
        start = 0 if offset == 0 else 4  # the first group mixes in the prefix
        end = ((offset + len(data)) // 3) * 4  # a partial last group mixes in the suffix
        core = text[start:end]
        if len(core) >= 8:
            cores.append((f"base64-{alphabet}@{offset}", core))
            # In a query string or form body (EC2's UserData=...): + / = percent-encoded.
            quoted = core.replace(b"+", b"%2B").replace(b"/", b"%2F")
            if quoted != core:
                cores.append((f"base64-{alphabet}@{offset}-percent", quoted))
                cores.append((f"base64-{alphabet}@{offset}-percent-lower", quoted.replace(b"%2B", b"%2b").replace(b"%2F", b"%2f")))
    return cores


def forms(text):
    """(encoding, bytes) to look for, for one needle."""
    data = text.encode()
    out = [("plain", data), ("hex", data.hex().encode()), ("HEX", data.hex().upper().encode())]
    out.append(("percent", "".join(f"%{b:02X}" for b in data).encode()))
    out.append(("percent-lower", "".join(f"%{b:02x}" for b in data).encode()))
    out.append(("decimal-list", ", ".join(str(b) for b in data).encode()))
    out.append(("decimal-list-tight", ",".join(str(b) for b in data).encode()))
    b64 = b64_cores(data, "std") + [f for f in b64_cores(data, "url") if f[1] not in {c for _, c in b64_cores(data, "std")}]
    return out, b64


UNWRAP = re.compile(rb"\r|\n|\\r|\\n")


def line_of(data, pos):
    start = data.rfind(b"\n", 0, pos) + 1
    end = data.find(b"\n", pos)
    end = len(data) if end < 0 else end
    return data.count(b"\n", 0, pos) + 1, data[max(start, pos - 160) : min(end, pos + 160)]


def scan_files(needles, files):
    """Returns the hits: (file, line, encoding, secret place, snippet); one process per file."""
    files = [f for f in files if Path(f).is_file()]
    if len(files) < 2:
        return [hit for name in files for hit in scan_file(needles, name)]
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(len(files), os.cpu_count() or 1)) as pool:
        return [hit for hits in pool.map(scan_file, [needles] * len(files), files) for hit in hits]


def scan_file(needles, name):
    """The hits in one file: the canary's and each secret value's forms, in the file
    and (base64 only) in a copy of it without line breaks."""
    targets = [(needles["base"], None)] + [(v, p) for v, p in needles["literals"].items()]
    tagged = {c: forms(c) for c in needles["canaries"]}
    data = Path(name).read_bytes()
    unwrapped = UNWRAP.sub(b"", data)
    hits = []
    for needle, place in targets:
        plain_forms, b64_forms = forms(needle)
        views = [(data, plain_forms + b64_forms, ""), (unwrapped, b64_forms, " (line breaks removed)")]
        for view, candidates, note in views:
            for encoding, form in candidates:
                pos = view.find(form)
                if pos < 0 or (note and data.find(form) >= 0):
                    continue  # not there, or already reported from the file itself
                where = place or _which_canary(view, pos, encoding, tagged, needles["canaries"])
                line, snippet = line_of(view, pos)
                hits.append((name, line if not note else "?", encoding + note, where, snippet))
    return hits


def _which_canary(view, pos, encoding, tagged, places):
    window = view[max(0, pos - 32) : pos + 512]
    for canary, (plain_forms, b64_forms) in tagged.items():
        for enc, form in plain_forms + b64_forms:
            if enc == encoding and form in window:
                return places[canary]
    return "the canary (which secret value: see the snippet)"


def scan(args):
    needles = json.loads(Path(args.needles).read_text())
    problems = []
    if args.trace_log:
        log = Path(args.trace_log)
        text = log.read_bytes() if log.is_file() else b""
        if b'"level":"TRACE"' not in text:
            problems.append(f"{log}: no TRACE line in the driver's JSON log: nothing was checked at trace level")
    if args.otlp:
        stats = json.loads(Path(args.otlp).read_text()) if Path(args.otlp).is_file() else {}
        if not stats.get("messages"):
            problems.append(f"{args.otlp}: the OTLP collector received no export: nothing was checked in traces")
    hits = scan_files(needles, args.files)
    for name, line, encoding, where, snippet in hits:
        print(f"LEAK {name}:{line}: {where} ({encoding}): {snippet.decode(errors='replace')}", file=sys.stderr)
    for problem in problems:
        print(f"CANARY CHECK: {problem}", file=sys.stderr)
    sizes = ", ".join(f"{Path(f).name} {Path(f).stat().st_size // 1024} KiB" for f in args.files if Path(f).is_file())
    if hits or problems:
        return 1
    print(f"no secret value in any form in: {sizes}")
    return 0


# ---------------------------------------------------------------- self-test


def selftest(_args):
    """The scan must find the canary in each encoding, and nothing in a clean file."""
    canaries = Canaries()
    canary = canaries.new("secret.userData")
    literal = "fake-selftest-???>>>?-password"  # its base64 has + and /
    needles = {"base": canaries.base, "canaries": canaries.places, "literals": {literal: "secret.password"}}
    user_data = f"#cloud-config\nruncmd:\n  - echo hi\n# {canary}\n".encode()
    secret_bytes = canary.encode()
    cases = {
        "plain-json-log": json.dumps({"level": "TRACE", "fields": {"message": f"secret={canary}"}}).encode(),
        "hex": f"body={secret_bytes.hex()}".encode(),
        "HEX": f"body={secret_bytes.hex().upper()}".encode(),
        "percent": ("q=" + "".join(f"%{b:02X}" for b in secret_bytes)).encode(),
        "decimal-list": f"user_data: {list(user_data)}".encode(),
        "literal-plain": f"password={literal}".encode(),
        "literal-base64": base64.b64encode(f"x{literal}y".encode()),
        "literal-form": ("a=" + urllib.parse.quote(base64.b64encode(f"x{literal}y".encode()).decode(), safe="")).encode(),
    }
    for prefix in range(3):
        blob = b"#" * prefix + user_data
        cases[f"base64-std@{prefix}"] = b"UserData=" + base64.b64encode(blob)
        cases[f"base64-url@{prefix}"] = b'"ud":"' + base64.urlsafe_b64encode(b"\xff\xfe" + blob) + b'"'
        wrapped = base64.encodebytes(b"#" * 50 + b"#" * prefix + user_data)  # 76-column lines
        cases[f"base64-wrapped@{prefix}"] = json.dumps({"message": wrapped.decode()}).encode()
        query = base64.b64encode(b"\xfb\xff" * 30 + b"#" * prefix + user_data).decode()  # has + and /
        cases[f"base64-form@{prefix}"] = ("Action=RunInstances&UserData=" + urllib.parse.quote(query, safe="")).encode()
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, content in cases.items():
            path = os.path.join(tmp, name)
            Path(path).write_bytes(b"noise before\n" + content + b"\nnoise after\n")
            hits = scan_files(needles, [path])
            if not hits:
                failed.append(f"missed the secret in {name}")
            elif name == "literal-form" and not any("-percent" in h[2] for h in hits):
                failed.append(f"missed the percent-encoded base64 in {name}: {hits}")
        clean = os.path.join(tmp, "clean")
        Path(clean).write_bytes(user_data.replace(canary.encode(), b"x" * len(canary)) + b"fake-selftest-pass")
        if scan_files(needles, [clean]):
            failed.append("found a secret in a clean file")
    for f in failed:
        print(f"canary self-test: {f}", file=sys.stderr)
    if failed:
        return 1
    print(f"canary self-test: found in all {len(cases)} encodings, nothing in a clean file")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--examples", required=True)
    p.add_argument("--fake-src", required=True)
    p.add_argument("--out", required=True)
    s = sub.add_parser("scan")
    s.add_argument("--needles", required=True)
    s.add_argument("--trace-log")
    s.add_argument("--otlp")
    s.add_argument("files", nargs="+")
    sub.add_parser("selftest")
    args = parser.parse_args()
    return {"prepare": prepare, "scan": scan, "selftest": selftest}[args.cmd](args) or 0


if __name__ == "__main__":
    sys.exit(main())
