#!/usr/bin/env python3
"""Prints a machinedriver.v1 request as grpcurl JSON, built from a provider's
examples (machine-class.json, secret.json), so README examples stay in sync.

usage: grpcurl-request.py RPC PROVIDER [MACHINE_NAME] [--provider-id ID]
  RPC: create | status | initialize | delete | list
"""
import base64
import json
import pathlib
import sys
import uuid

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    rpc, provider = argv[1], argv[2]
    rest = argv[3:]
    provider_id = ""
    if "--provider-id" in rest:
        i = rest.index("--provider-id")
        provider_id = rest[i + 1]
        del rest[i : i + 2]
    name = rest[0] if rest else "demo-1"
    examples = ROOT / "providers" / provider / "examples"
    spec = (examples / "machine-class.json").read_text()
    secret = json.loads((examples / "secret.json").read_text())
    data = {k: base64.b64encode(v.encode()).decode() for k, v in secret.items()}
    machine = {
        "name": name,
        "namespace": "default",
        # A uid derived from the name: repeating the command is a retry of one Machine.
        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, "machine-driver-demo/" + name)),
        "providerId": provider_id,
    }
    machine_class = {"name": f"{provider}-demo", "provider": provider.upper(), "providerSpec": spec}
    if rpc == "list":
        req = {"machineClass": machine_class, "secret": {"data": data}}
    elif rpc in ("create", "status", "initialize", "delete"):
        req = {"machine": machine, "machineClass": machine_class, "secret": {"data": data}}
    else:
        print(f"unknown rpc {rpc!r}", file=sys.stderr)
        return 2
    print(json.dumps(req))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
