#!/usr/bin/env python3
"""Cross-checks fake-openstack against OpenStack's own Python SDK.

Usage: crosscheck.py FAKE_URL   (e.g. http://127.0.0.1:8092)

openstacksdk (on keystoneauth1) is the oracle for the wire protocol: it authenticates
against Keystone v3 (password and application credentials), follows the service
catalog and every service's version discovery document, negotiates Nova's
microversion, pages through `servers_links` / `ports_links` / Glance's `next`, and maps
the fake's error bodies to its exceptions. python-openstackclient (pinned next to it in
requirements.txt) runs a few commands on the same cloud. Every result is asserted; any
mismatch exits non-zero. The admin API (`/_admin`) is driven with requests.
"""

import base64
import json
import os
import subprocess
import sys
import time
import uuid

import openstack
import requests
from openstack import exceptions

REGION = "RegionOne"
DOMAIN = "Default"
PROJECT_ID = "5d9a3e2f6b8c4d1e9f0a7b3c2d1e0f98"
PROJECT_NAME = "shoot--dev--conf"
USERNAME = "machine-driver"
PASSWORD = "fake-cluster-password"
APP_CREDENTIAL_ID = "3f1e2d4c5b6a47988a9b0c1d2e3f4a5b"
APP_CREDENTIAL_NAME = "machine-driver"
APP_CREDENTIAL_SECRET = "fake-cluster-app-credential-secret"
OWNER_PROJECT_ID = "8e7d6c5b4a3f42e1b0c9d8e7f6a5b4c3"
OWNER_PROJECT_NAME = "image-owner"
OWNER_USERNAME = "image-publisher"
OWNER_PASSWORD = "fake-owner-password"
NETWORK_ID = "b1a2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
NETWORK_NAME = "shoot--dev--conf"
SUBNET_ID = "c2b3d4e5-f6a7-4b8c-9d0e-1f2a3b4c5d6e"
SUBNET_V6_ID = "d3c4e5f6-a7b8-4c9d-8e1f-2a3b4c5d6e7f"
SECURITY_GROUP_ID = "e4d5f6a7-b8c9-4d0e-9f2a-3b4c5d6e7f80"
SECURITY_GROUP_NAME = "shoot--dev--conf"
KEY_NAME = "shoot--dev--conf-ssh-publickey"
SERVER_GROUP_ID = "f5e6a7b8-c9d0-4e1f-8a3b-4c5d6e7f8091"
PUBLIC_IMAGE = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
ALLOWED_IMAGE = "1b2c3d4e-5f6a-4b7c-9d8e-0f1a2b3c4d5e"
NOT_ALLOWED_IMAGE = "2c3d4e5f-6a7b-4c8d-ae9f-1a2b3c4d5e6f"
USER_DATA = base64.b64encode(b"#cloud-config\nruncmd: [echo, hi]\n").decode()

CHECKS = 0


def check(condition, what):
    """Counts one assertion; exits non-zero on the first mismatch."""
    global CHECKS
    CHECKS += 1
    if not condition:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


def admin(fake, path, body=None, method="POST"):
    resp = requests.request(method, f"{fake}/_admin/{path}", json=body if body is not None else {}, timeout=10)
    check(resp.status_code == 200, f"admin {path}: {resp.status_code} {resp.text}")
    return resp.json()


def admin_get(fake, path):
    resp = requests.get(f"{fake}/_admin/{path}", timeout=10)
    check(resp.status_code == 200, f"admin GET {path}: {resp.status_code}")
    return resp.json()


def connect(fake, username=USERNAME, password=PASSWORD, project=PROJECT_NAME):
    return openstack.connect(
        auth_url=f"{fake}/identity/v3",
        username=username,
        password=password,
        project_name=project,
        user_domain_name=DOMAIN,
        project_domain_name=DOMAIN,
        region_name=REGION,
    )


def failure(call):
    """Runs a call that must fail; returns the exception."""
    try:
        call()
    except exceptions.SDKException as error:
        return error
    check(False, "the call unexpectedly succeeded")
    return None


def status_of(error):
    return getattr(error, "status_code", None)


# --- Keystone -------------------------------------------------------------------------------


def check_identity(fake):
    conn = connect(fake)
    token = conn.authorize()
    check(token.startswith("gAAAAA"), f"token {token[:10]}")
    check(conn.current_project_id == PROJECT_ID, f"project {conn.current_project_id}")
    check(conn.current_user_id == "0c6d5e4f3a2b41c09d8e7f6a5b4c3d21", "user id")
    endpoints = {
        "compute": f"{fake}/compute/v2.1",
        "network": f"{fake}/network",
        "image": f"{fake}/image",
        "block-storage": f"{fake}/volume/v3/{PROJECT_ID}",
    }
    for service, expected in endpoints.items():
        got = conn.session.get_endpoint(service_type=service, interface="public", region_name=REGION)
        check(got and got.rstrip("/") == expected, f"{service} endpoint {got} != {expected}")
    discovered = {
        "network": conn.network.get_endpoint(),
        "image": conn.image.get_endpoint(),
        "compute": conn.compute.get_endpoint(),
    }
    for service, got in discovered.items():
        expected = {"network": f"{fake}/network/v2.0", "image": f"{fake}/image/v2", "compute": f"{fake}/compute/v2.1"}[service]
        check(got.rstrip("/") == expected, f"{service} discovered endpoint {got} != {expected}")
    access = conn.session.auth.get_access(conn.session)
    types = {entry["type"] for entry in access.service_catalog.catalog}
    check({"identity", "compute", "network", "image", "volumev3", "block-storage"} <= types, f"catalog {types}")
    check(access.role_names and "member" in access.role_names, f"roles {access.role_names}")

    app = openstack.connect(
        auth_type="v3applicationcredential",
        auth_url=f"{fake}/identity/v3",
        application_credential_id=APP_CREDENTIAL_ID,
        application_credential_secret=APP_CREDENTIAL_SECRET,
        region_name=REGION,
    )
    check(app.current_project_id == PROJECT_ID, "app credential scope")
    check(len(list(app.compute.flavors())) == 4, "app credential lists flavors")
    by_name = openstack.connect(
        auth_type="v3applicationcredential",
        auth_url=f"{fake}/identity/v3",
        application_credential_name=APP_CREDENTIAL_NAME,
        application_credential_secret=APP_CREDENTIAL_SECRET,
        username=USERNAME,
        user_domain_name=DOMAIN,
        region_name=REGION,
    )
    check(by_name.current_project_id == PROJECT_ID, "app credential by name")

    bad = connect(fake, password="wrong")
    error = failure(bad.authorize)
    check(status_of(error) == 401 or "401" in str(error), f"bad password: {error!r}")

    issued = admin_get(fake, "openstack/tokens")["issued"]
    check(issued >= 3, f"issued tokens {issued}")
    return conn


# --- Nova -----------------------------------------------------------------------------------


def check_flavors(conn):
    names = sorted(f.name for f in conn.compute.flavors())
    check(names == ["m1.large", "m1.medium", "m1.small", "m1.xlarge"], f"flavors {names}")
    large = conn.compute.find_flavor("m1.large")
    check(large is not None and large.id == "4" and large.vcpus == 4 and large.ram == 8192, f"m1.large {large}")


def check_networks(conn):
    network = conn.network.find_network(NETWORK_NAME)
    check(network is not None and network.id == NETWORK_ID, "network by name")
    subnets = {s.id: s for s in conn.network.subnets(network_id=NETWORK_ID)}
    check(set(subnets) == {SUBNET_ID, SUBNET_V6_ID}, f"subnets {list(subnets)}")
    check(subnets[SUBNET_ID].cidr == "10.250.0.0/16" and subnets[SUBNET_V6_ID].ip_version == 6, "subnet details")
    groups = list(conn.network.security_groups(name=SECURITY_GROUP_NAME))
    check([g.id for g in groups] == [SECURITY_GROUP_ID], f"security groups {groups}")
    error = failure(lambda: conn.network.get_network(str(uuid.uuid4())))
    check(isinstance(error, exceptions.NotFoundException), f"unknown network: {error!r}")


def check_ports(fake, conn):
    port = conn.network.create_port(
        network_id=NETWORK_ID, name="machine-0", fixed_ips=[{"subnet_id": SUBNET_ID}], security_groups=[SECURITY_GROUP_ID]
    )
    check(port.status == "DOWN" and port.device_id == "", f"new port {port.status}")
    check(len(port.fixed_ips) == 1 and port.fixed_ips[0]["ip_address"].startswith("10.250."), f"port ips {port.fixed_ips}")
    check(port.mac_address.startswith("fa:16:3e:"), "mac")
    first_revision = port.revision_number
    updated = conn.network.update_port(port, allowed_address_pairs=[{"ip_address": "10.96.0.0/11"}, {"ip_address": "192.168.7.7"}])
    pairs = sorted(p["ip_address"] for p in updated.allowed_address_pairs)
    check(pairs == ["10.96.0.0/11", "192.168.7.7"], f"pairs {pairs}")
    check(all(p["mac_address"] == port.mac_address for p in updated.allowed_address_pairs), "pair mac defaults")
    replaced = conn.network.update_port(port, allowed_address_pairs=[{"ip_address": "100.64.0.0/10"}])
    check([p["ip_address"] for p in replaced.allowed_address_pairs] == ["100.64.0.0/10"], "pairs are replaced")
    check(replaced.revision_number > first_revision + 1, "revision bumps")
    error = failure(lambda: conn.network.update_port(port, allowed_address_pairs=[{"ip_address": "not-an-ip"}]))
    check(status_of(error) == 400, f"bad pair: {error!r}")
    conn.network.set_tags(port, ["kubernetes.io-cluster-shoot", "machine-0"])
    tagged = list(conn.network.ports(tags="kubernetes.io-cluster-shoot,machine-0"))
    check([p.id for p in tagged] == [port.id], f"tags filter {tagged}")
    check(list(conn.network.ports(tags="kubernetes.io-cluster-shoot,other")) == [], "tags need all")
    check([p.id for p in conn.network.ports(any_tags="other,machine-0")] == [port.id], "tags-any")
    check([p.id for p in conn.network.ports(name="machine-0")] == [port.id], "name filter")
    check(conn.network.get_port(port.id).tags == ["kubernetes.io-cluster-shoot", "machine-0"], "tags stored")
    spare = conn.network.create_port(network_id=NETWORK_ID, name="spare")
    check(len(spare.fixed_ips) == 2, "a port without fixed_ips gets one IP per subnet")
    conn.network.delete_port(spare)
    check(conn.network.find_port("spare") is None, "deleted port is gone")
    error = failure(lambda: conn.network.delete_port(spare, ignore_missing=False))
    check(isinstance(error, exceptions.NotFoundException), f"second delete: {error!r}")
    # Bulk create (`{"ports": [...]}`): answered in order, all or nothing.
    bulk = list(conn.network.create_ports([
        {"network_id": NETWORK_ID, "name": "bulk-a"},
        {"network_id": NETWORK_ID, "name": "bulk-b", "allowed_address_pairs": [{"ip_address": "10.96.0.0/11"}]},
    ]))
    check([p.name for p in bulk] == ["bulk-a", "bulk-b"] and all(p.id for p in bulk), f"bulk create {bulk}")
    check(bulk[1].allowed_address_pairs[0]["ip_address"] == "10.96.0.0/11", "bulk create keeps each body")
    error = failure(lambda: list(conn.network.create_ports([
        {"network_id": NETWORK_ID, "name": "bulk-c"},
        {"network_id": "nope", "name": "bulk-d"},
    ])))
    check(isinstance(error, exceptions.NotFoundException), f"bulk create with a bad item: {error!r}")
    check(conn.network.find_port("bulk-c") is None, "a refused bulk create leaves no port")
    either = conn.network.get("/ports?name=bulk-a&name=bulk-b&name=bulk-c").json()["ports"]
    check(sorted(p["name"] for p in either) == ["bulk-a", "bulk-b"], f"a repeated filter is any of: {either}")
    for made in bulk:
        conn.network.delete_port(made)
    return port


def check_servers(fake, conn, port):
    server = conn.compute.create_server(
        name="machine-0",
        image_id=PUBLIC_IMAGE,
        flavor_id="4",
        networks=[{"port": port.id}, {"uuid": NETWORK_ID}],
        metadata={"kubernetes.io-cluster-shoot": "1", "role": "node"},
        user_data=USER_DATA,
        key_name=KEY_NAME,
        availability_zone="az-2",
        config_drive=True,
        scheduler_hints={"group": SERVER_GROUP_ID},
        security_groups=[{"name": SECURITY_GROUP_NAME}],
    )
    check(server.id and server.admin_password, "create answers id and adminPass")
    building = conn.compute.get_server(server.id)
    check(building.status == "BUILD", f"status {building.status}")
    active = conn.compute.wait_for_server(server, status="ACTIVE", interval=0.1, wait=20)
    check(active.status == "ACTIVE" and active.power_state == 1 and active.task_state is None, "ACTIVE")
    got = conn.compute.get_server(server.id)
    check(got.name == "machine-0" and got.metadata == {"kubernetes.io-cluster-shoot": "1", "role": "node"}, "metadata")
    check(got.flavor.original_name == "m1.large" and got.flavor.vcpus == 4, f"flavor {got.flavor}")
    check(got.image.id == PUBLIC_IMAGE, "image")
    check(got.availability_zone == "az-2" and got.key_name == KEY_NAME, "az and key")
    check(str(got.has_config_drive) in ("True", "true"), f"config drive {got.has_config_drive}")
    addresses = [a["addr"] for a in got.addresses[NETWORK_NAME]]
    check(port.fixed_ips[0]["ip_address"] in addresses and len(addresses) == 3, f"addresses {addresses}")
    attached = conn.network.get_port(port.id)
    check(attached.device_id == server.id and attached.status == "ACTIVE", "user port attached and ACTIVE")
    check(attached.device_owner == "compute:az-2", f"device owner {attached.device_owner}")
    nova_ports = [p for p in conn.network.ports(device_id=server.id) if p.id != port.id]
    check(len(nova_ports) == 1 and nova_ports[0].security_group_ids == [SECURITY_GROUP_ID], "Nova-made port")
    inventory = admin_get(fake, "inventory")
    entry = next(i for i in inventory["instances"] if i["id"] == server.id)
    check(entry["user_data"] == USER_DATA and entry["server_group"] == SERVER_GROUP_ID, "inventory user data")
    named = [d for d in inventory["dependents"] if d["id"] == nova_ports[0].id]
    check(named and named[0]["name"] == "machine-0" and named[0]["made_by"] == "nova", "Nova port named after server")

    listed = list(conn.compute.servers(details=True, name="^machine-"))
    check([s.id for s in listed] == [server.id], f"name regex {listed}")
    check(list(conn.compute.servers(name="^nomatch$")) == [], "no match")

    admin(fake, "openstack/page-size", {"size": 2})
    pages = [conn.compute.create_server(name=f"page-{i}", image_id=PUBLIC_IMAGE, flavor_id="2", networks="none") for i in range(3)]
    admin(fake, "calls/reset")
    names = [s.name for s in conn.compute.servers(details=True, name="^page-")]
    check(names == ["page-2", "page-1", "page-0"], f"paged list {names}")
    calls = admin_get(fake, "calls")["calls"].get("servers.list", 0)
    check(calls >= 2, f"paging took {calls} calls")
    admin(fake, "openstack/page-size", {"size": 1000})
    for page in pages:
        conn.compute.delete_server(page)

    conn.compute.delete_server(server)
    deleting = conn.compute.get_server(server.id)
    check(deleting.task_state == "deleting", f"task state {deleting.task_state}")
    conn.compute.wait_for_delete(server, interval=0.1, wait=20)
    error = failure(lambda: conn.compute.get_server(server.id))
    check(isinstance(error, exceptions.NotFoundException) and status_of(error) == 404, f"gone: {error!r}")
    detached = conn.network.get_port(port.id)
    check(detached.device_id == "" and detached.status == "DOWN", "user port detached")
    check(conn.network.find_port(nova_ports[0].id) is None, "Nova-made port deleted with server")

    admin(fake, "openstack/server-failures", {"times": 1})
    doomed = conn.compute.create_server(name="doomed", image_id=PUBLIC_IMAGE, flavor_id="2", networks=[{"uuid": NETWORK_ID}])
    error = failure(lambda: conn.compute.wait_for_server(doomed, status="ACTIVE", interval=0.1, wait=20))
    check(isinstance(error, exceptions.ResourceFailure), f"failure: {error!r}")
    failed = conn.compute.get_server(doomed.id)
    check(failed.status == "ERROR" and "No valid host" in failed.fault["message"], f"fault {failed.fault}")
    check(list(conn.network.ports(device_id=doomed.id)) == [], "ERROR server lost its Nova ports")
    conn.compute.delete_server(doomed)
    conn.compute.wait_for_delete(doomed, interval=0.1, wait=20)

    error = failure(lambda: conn.compute.create_server(name="x", image_id=NOT_ALLOWED_IMAGE, flavor_id="2", networks="none"))
    check(isinstance(error, exceptions.BadRequestException), f"invisible image: {error!r}")
    error = failure(lambda: conn.compute.create_server(name="x", image_id=PUBLIC_IMAGE, flavor_id="2", networks="none", availability_zone="moon"))
    check(status_of(error) == 400 and "availability zone" in str(error), f"bad zone: {error!r}")


# --- Glance ---------------------------------------------------------------------------------


def check_images(fake, conn, owner):
    listed = {i.id for i in conn.image.images()}
    check(listed == {PUBLIC_IMAGE}, f"cluster sees {listed}")
    check(conn.image.get_image(PUBLIC_IMAGE).name == "ubuntu-24.04", "public image")
    error = failure(lambda: conn.image.get_image(ALLOWED_IMAGE))
    check(isinstance(error, exceptions.NotFoundException), f"private image: {error!r}")
    owned = {i.id for i in owner.image.images()}
    check(owned == {PUBLIC_IMAGE, ALLOWED_IMAGE, NOT_ALLOWED_IMAGE}, f"owner sees {owned}")
    error = failure(lambda: conn.image.update_image(PUBLIC_IMAGE, name="stolen"))
    check(isinstance(error, exceptions.ForbiddenException), f"non-owner update: {error!r}")

    shared = owner.image.update_image(ALLOWED_IMAGE, visibility="shared")
    check(shared.visibility == "shared", "owner shares")
    member = owner.image.add_member(ALLOWED_IMAGE, member_id=PROJECT_ID)
    check(member.status == "pending", f"member {member.status}")
    error = failure(lambda: owner.image.add_member(ALLOWED_IMAGE, member_id=PROJECT_ID))
    check(status_of(error) == 409, f"duplicate member: {error!r}")
    check(conn.image.get_image(ALLOWED_IMAGE).id == ALLOWED_IMAGE, "pending member can get")
    check(ALLOWED_IMAGE not in {i.id for i in conn.image.images()}, "pending member does not list")
    pending = {i.id for i in conn.image.images(visibility="shared", member_status="pending")}
    check(pending == {ALLOWED_IMAGE}, f"pending filter {pending}")
    error = failure(lambda: owner.image.update_member(PROJECT_ID, ALLOWED_IMAGE, status="accepted"))
    check(isinstance(error, exceptions.ForbiddenException), f"owner may not accept: {error!r}")
    accepted = conn.image.update_member(PROJECT_ID, ALLOWED_IMAGE, status="accepted")
    check(accepted.status == "accepted", "member accepts")
    check(ALLOWED_IMAGE in {i.id for i in conn.image.images()}, "accepted member lists")
    members = list(owner.image.members(ALLOWED_IMAGE))
    check([m.status for m in members] == ["accepted"], f"members {members}")
    own_view = list(conn.image.members(ALLOWED_IMAGE))
    check(len(own_view) == 1, "member sees its own entry")
    inventory = admin_get(fake, "inventory")
    image = next(i for i in inventory["images"] if i["id"] == ALLOWED_IMAGE)
    check(image["members"] == [{"member": PROJECT_ID, "status": "accepted"}], f"inventory members {image}")
    owner.image.remove_member(PROJECT_ID, ALLOWED_IMAGE)
    error = failure(lambda: conn.image.get_image(ALLOWED_IMAGE))
    check(isinstance(error, exceptions.NotFoundException), f"removed member: {error!r}")
    error = failure(lambda: conn.image.get_image(NOT_ALLOWED_IMAGE))
    check(isinstance(error, exceptions.NotFoundException), "never shared image stays invisible")

    admin(fake, "openstack/page-size", {"size": 1})
    paged = [i.id for i in owner.image.images()]
    check(sorted(paged) == sorted([PUBLIC_IMAGE, ALLOWED_IMAGE, NOT_ALLOWED_IMAGE]) and len(paged) == 3, f"glance paging {paged}")
    admin(fake, "openstack/page-size", {"size": 1000})


# --- Cinder ---------------------------------------------------------------------------------


def check_volumes(conn):
    volume = conn.block_storage.create_volume(size=3, name="data-0", metadata={"role": "data"})
    check(volume.status == "creating", f"volume {volume.status}")
    ready = conn.block_storage.wait_for_status(volume, status="available", interval=0.1, wait=20)
    check(ready.status == "available" and ready.size == 3, "volume available")
    got = conn.block_storage.get_volume(volume.id)
    check(got.name == "data-0" and got.volume_type == "standard" and got.metadata == {"role": "data"}, "volume details")
    listed = [v.id for v in conn.block_storage.volumes(details=True, name="data-0")]
    check(listed == [volume.id], f"volume list {listed}")
    conn.block_storage.delete_volume(volume)
    conn.block_storage.wait_for_delete(volume, interval=0.1, wait=20)
    error = failure(lambda: conn.block_storage.get_volume(volume.id))
    check(isinstance(error, exceptions.NotFoundException), f"volume gone: {error!r}")


# --- errors ---------------------------------------------------------------------------------


def check_errors(fake, conn, port):
    admin(fake, "faults", {"operation": "servers.list", "kind": "throttle", "times": 1})
    error = failure(lambda: list(conn.compute.servers()))
    check(status_of(error) == 429, f"throttle: {error!r}")
    admin(fake, "faults", {"operation": "ports.create", "kind": "permission", "times": 1})
    error = failure(lambda: conn.network.create_port(network_id=NETWORK_ID))
    check(isinstance(error, exceptions.ForbiddenException) and status_of(error) == 403, f"permission: {error!r}")
    admin(fake, "faults", {"operation": "ports.update", "kind": "capacity", "times": 1})
    error = failure(lambda: conn.network.update_port(port, name="x"))
    check(isinstance(error, exceptions.ConflictException) and status_of(error) == 409, f"capacity: {error!r}")
    # (the SDK retries 503s of Glance with back-off: 500 here keeps the run fast)
    admin(fake, "faults", {"operation": "images.get", "kind": "internal", "times": 1})
    error = failure(lambda: conn.image.get_image(PUBLIC_IMAGE))
    check(status_of(error) == 500, f"internal: {error!r}")
    admin(fake, "faults", {"operation": "volumes.get", "kind": "unavailable", "times": 1})
    error = failure(lambda: conn.block_storage.get_volume(str(uuid.uuid4())))
    check(status_of(error) == 503, f"unavailable: {error!r}")
    admin(fake, "faults", {}, method="DELETE")
    admin(fake, "faults", {"operation": "volumes.create", "kind": "capacity", "times": 1})
    error = failure(lambda: conn.block_storage.create_volume(size=1))
    check(status_of(error) == 413, f"volume quota: {error!r}")
    error = failure(lambda: conn.compute.get_server(str(uuid.uuid4())))
    check(isinstance(error, exceptions.NotFoundException) and status_of(error) == 404, "unknown server")
    # keystoneauth re-authenticates once on a 401: the fault must hit both attempts.
    admin(fake, "faults", {"operation": "flavors.list", "kind": "auth", "times": 2})
    error = failure(lambda: list(conn.compute.flavors()))
    check(status_of(error) == 401, f"auth: {error!r}")
    admin(fake, "faults", {"operation": "tokens.create", "kind": "unavailable", "times": 1})
    error = failure(connect(fake).authorize)
    check("503" in str(error) or status_of(error) == 503, f"token fault: {error!r}")
    before = len(list(conn.network.ports()))
    admin(fake, "faults", {"operation": "ports.create", "kind": "internal", "times": 1, "phase": "after"})
    error = failure(lambda: conn.network.create_port(network_id=NETWORK_ID, name="lost"))
    check(status_of(error) == 500, f"lost response: {error!r}")
    check(len(list(conn.network.ports())) == before + 1, "the lost create took effect")
    admin(fake, "openstack/revoke-tokens")
    check(len(list(conn.compute.flavors())) == 4, "a revoked token is replaced after the 401")


# --- CLI ------------------------------------------------------------------------------------


def check_cli(fake):
    """python-openstackclient on the same cloud (skipped if it is not installed)."""
    env = dict(os.environ)
    env.update(
        OS_AUTH_URL=f"{fake}/identity/v3",
        OS_USERNAME=USERNAME,
        OS_PASSWORD=PASSWORD,
        OS_PROJECT_NAME=PROJECT_NAME,
        OS_USER_DOMAIN_NAME=DOMAIN,
        OS_PROJECT_DOMAIN_NAME=DOMAIN,
        OS_REGION_NAME=REGION,
        OS_IDENTITY_API_VERSION="3",
    )
    cli = os.path.join(os.path.dirname(sys.executable), "openstack")
    if not os.path.exists(cli):
        print("python-openstackclient not installed: CLI checks skipped")
        return

    def run(*args):
        out = subprocess.run([cli, *args, "-f", "json"], env=env, capture_output=True, text=True, timeout=60)
        check(out.returncode == 0, f"openstack {' '.join(args)}: {out.stderr}")
        return json.loads(out.stdout)

    flavors = sorted(f["Name"] for f in run("flavor", "list"))
    check(flavors == ["m1.large", "m1.medium", "m1.small", "m1.xlarge"], f"cli flavors {flavors}")
    images = [i["ID"] for i in run("image", "list")]
    check(images == [PUBLIC_IMAGE], f"cli images {images}")
    ports = run("port", "list", "--network", NETWORK_ID)
    check(isinstance(ports, list), "cli port list")
    run("server", "create", "--image", PUBLIC_IMAGE, "--flavor", "m1.small", "--network", NETWORK_ID, "--wait", "cli-0")
    servers = run("server", "list", "--name", "^cli-")
    check([s["Name"] for s in servers] == ["cli-0"] and servers[0]["Status"] == "ACTIVE", f"cli servers {servers}")
    subprocess.run([cli, "server", "delete", "--wait", "cli-0"], env=env, check=True, timeout=60, capture_output=True)
    check(run("server", "list", "--name", "^cli-") == [], "cli server deleted")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    fake = sys.argv[1].rstrip("/")
    admin(fake, "reset")
    admin(fake, "timing", {"boot_ms": 300, "stop_ms": 200})
    conn = check_identity(fake)
    owner = connect(fake, OWNER_USERNAME, OWNER_PASSWORD, OWNER_PROJECT_NAME)
    check(owner.current_project_id == OWNER_PROJECT_ID, "owner scope")
    check_flavors(conn)
    check_networks(conn)
    port = check_ports(fake, conn)
    check_servers(fake, conn, port)
    check_images(fake, conn, owner)
    check_volumes(conn)
    check_errors(fake, conn, port)
    check_cli(fake)
    print(f"fake-openstack cross-check: {CHECKS} checks passed")


if __name__ == "__main__":
    main()
