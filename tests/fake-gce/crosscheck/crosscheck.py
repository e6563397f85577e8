#!/usr/bin/env python3
"""Cross-checks fake-gce against Google's official Python client (google-cloud-compute).

Usage: crosscheck.py FAKE_URL   (e.g. http://127.0.0.1:8089)

`google.cloud.compute_v1` with its REST transport is the oracle for Compute Engine's
wire protocol: it builds the `/compute/v1/projects/P/zones/Z/...` paths and query
parameters (`requestId`, `filter`, `maxResults`, `pageToken`), serializes the
Instance and GlobalSetPolicyRequest bodies (camelCase JSON, int64 as strings), parses
every answer into its proto-plus messages (typed fields: int64 ids and sizes, enums,
maps, repeated messages), follows `nextPageToken` in its pagers, polls its
ExtendedOperation (the LRO wrapper of `instances.insert`/`delete`) and maps GCE's
error body to `google.api_core.exceptions` (class by HTTP status, `errors[]` from
the body). Every result is asserted field by field; one line is printed per check,
and any mismatch makes the script exit non-zero. The admin API (`/_admin`) is
driven with urllib.

Endpoint: `client_options={"api_endpoint": FAKE_URL}`; the REST transport keeps an
explicit `http://` scheme (it adds `https://` only to a bare host). Credentials:
`AnonymousCredentials` (no Authorization header: the fake's anonymous caller, who
sees what `allUsers` may), and `google.oauth2.credentials.Credentials(token=...)`
with the fake's `sa:EMAIL` bearer form for a service account (the image owner, the
cluster's node account); a token without expiry is never refreshed.

Client quirk worked around: the ExtendedOperation returned by `InstancesClient.insert`
/ `delete` polls through a ZoneOperationsClient that the transport makes on its own
(`transports/base.py` `_zone_operations_client`) with the credentials but *without*
the client options, i.e. against compute.googleapis.com. `instances()` below puts a
ZoneOperationsClient for the fake into the transport's `_extended_operations_services`
cache first. (The Rust driver polls zoneOperations.wait/get itself.)
"""

import datetime
import ipaddress
import sys
import time
import uuid

from google.api_core import exceptions
from google.api_core.future import polling
from google.auth import credentials as auth_credentials
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1
from crosscheck_support import Run, admin, check, equal

PROJECT = "proj"
ZONE = "us-central1-a"
REGION = "us-central1"
API = "https://www.googleapis.com/compute/v1"
PUBLIC_IMAGE = "projects/debian-cloud/global/images/debian-12"
PRIVATE_IMAGE = "projects/image-owner/global/images/custom-gardenlinux"
IMAGE_OWNER = "owner@image-owner.iam.gserviceaccount.com"
NODE_SA = "nodes@proj.iam.gserviceaccount.com"
CLUSTER_LABEL = "kubernetes-io-cluster-shoot--dev--crosscheck"
ROLE_LABEL = "kubernetes-io-role-node"
USER_DATA = "#cloud-config\nruncmd: [echo, crosscheck]\n"
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]

# Fast polling for ExtendedOperation.result() (the default starts at 1 s).
FAST_POLLING = polling.DEFAULT_POLLING.with_delay(initial=0.05, maximum=0.2, multiplier=1.5).with_timeout(10)


# --- admin API ---------------------------------------------------------------------------


def inventory(fake):
    return admin(fake, "inventory", method="GET")["instances"]


# --- clients -----------------------------------------------------------------------------


class StaticToken(auth_credentials.Credentials):
    """A fixed bearer token (the fake reads `sa:EMAIL` as that service account). google-auth's
    AuthorizedSession answers a 401 by refreshing the credentials and resending (twice at most);
    a refresh here re-arms the same token and is counted."""

    def __init__(self, token):
        super().__init__()
        self.token = token
        self.refreshes = 0

    def refresh(self, request):
        self.refreshes += 1
        self.token = self.token


def credentials(principal=None):
    """Anonymous, or a bearer token the fake reads as the caller (`sa:EMAIL`, or any other string)."""
    return AnonymousCredentials() if principal is None else StaticToken(principal)


CLIENTS = {}


def client(kind, fake, principal=None):
    key = (kind.__name__, fake, principal)
    if key not in CLIENTS:
        CLIENTS[key] = kind(credentials=credentials(principal), transport="rest", client_options={"api_endpoint": fake})
    return CLIENTS[key]


def operations(fake, principal=None):
    return client(compute_v1.ZoneOperationsClient, fake, principal)


def instances(fake, principal=None):
    made = client(compute_v1.InstancesClient, fake, principal)
    # See the module docstring: the ExtendedOperation must poll the fake, not compute.googleapis.com.
    made._transport._extended_operations_services["zone_operations"] = operations(fake, principal)
    return made


def images(fake, principal=None):
    return client(compute_v1.ImagesClient, fake, principal)


def fails(call):
    """Runs a call that must fail; returns the google.api_core exception (or None)."""
    try:
        call()
    except exceptions.GoogleAPICallError as error:
        return error
    return None


def reason_of(error):
    """GCE's `errors[0].reason` as the client parsed it from the error body."""
    errors = getattr(error, "errors", None) or []
    first = errors[0] if errors else {}
    return first.get("reason") if isinstance(first, dict) else getattr(first, "reason", None)


def expect_error(call, error_class, code, reason, what):
    error = fails(call)
    got = (type(error).__name__, getattr(error, "code", None), reason_of(error))
    wanted = (error_class.__name__, code, reason)
    message = getattr(error, "message", "")
    check(
        got == wanted,
        f"{what} → {got[0]} {got[1]} {got[2]} ({message})" if got == wanted else f"{what}: {got} != {wanted}",
    )
    return error


def recent(timestamp, what, slack=120):
    try:
        parsed = datetime.datetime.fromisoformat(timestamp)
    except (TypeError, ValueError):
        parsed = None
    now = datetime.datetime.now(datetime.timezone.utc)
    check(
        parsed is not None and parsed.tzinfo is not None and abs((now - parsed).total_seconds()) < slack,
        f"{what} is a recent RFC 3339 time: {timestamp!r}",
    )


def zone_url(path=""):
    return f"{API}/projects/{PROJECT}/zones/{ZONE}{path}"


def vm(name, image=PUBLIC_IMAGE, **overrides):
    """The Instance body the driver builds (providers/gcp/src/instance.rs), in the Python client's types."""
    body = compute_v1.Instance(
        name=name,
        machine_type=f"zones/{ZONE}/machineTypes/e2-standard-2",
        can_ip_forward=True,
        deletion_protection=False,
        description="crosscheck machine",
        labels={CLUSTER_LABEL: "1", ROLE_LABEL: "1", "machine-uid": "crosscheck"},
        tags=compute_v1.Tags(items=["shoot--dev--crosscheck-nodes"]),
        disks=[
            compute_v1.AttachedDisk(
                auto_delete=True,
                boot=True,
                type_="PERSISTENT",
                initialize_params=compute_v1.AttachedDiskInitializeParams(
                    disk_size_gb=50,
                    disk_type=f"zones/{ZONE}/diskTypes/pd-balanced",
                    labels={"role": "boot"},
                    source_image=image,
                ),
            )
        ],
        metadata=compute_v1.Metadata(
            items=[
                compute_v1.Items(key="user-data", value=USER_DATA),
                compute_v1.Items(key="block-project-ssh-keys", value="TRUE"),
            ]
        ),
        network_interfaces=[
            compute_v1.NetworkInterface(
                network=f"projects/{PROJECT}/global/networks/shoot--dev--crosscheck",
                subnetwork=f"regions/{REGION}/subnetworks/shoot--dev--crosscheck-nodes",
                access_configs=[compute_v1.AccessConfig(name="External NAT", type_="ONE_TO_ONE_NAT")],
            )
        ],
        scheduling=compute_v1.Scheduling(automatic_restart=True, on_host_maintenance="MIGRATE", preemptible=False),
        service_accounts=[compute_v1.ServiceAccount(email=NODE_SA, scopes=SCOPES)],
    )
    for field, value in overrides.items():
        setattr(body, field, value)
    return body


def insert(fake, body, request_id=None, principal=None):
    request = compute_v1.InsertInstanceRequest(project=PROJECT, zone=ZONE, instance_resource=body)
    if request_id is not None:
        request.request_id = request_id
    return instances(fake, principal).insert(request=request)


def delete(fake, name, request_id=None):
    request = compute_v1.DeleteInstanceRequest(project=PROJECT, zone=ZONE, instance=name)
    if request_id is not None:
        request.request_id = request_id
    return instances(fake).delete(request=request)


def get(fake, name, principal=None):
    return instances(fake, principal).get(project=PROJECT, zone=ZONE, instance=name)


def list_request(filter_=None, max_results=None):
    request = compute_v1.ListInstancesRequest(project=PROJECT, zone=ZONE)
    if filter_ is not None:
        request.filter = filter_
    if max_results is not None:
        request.max_results = max_results
    return request


def names(items):
    return [i.name for i in items]


def wait_status(fake, name, wanted, seconds=5.0):
    seen = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = get(fake, name).status
        if not seen or seen[-1] != status:
            seen.append(status)
        if status == wanted:
            break
        time.sleep(0.05)
    return seen


# --- scenarios ---------------------------------------------------------------------------


def insert_and_get(fake):
    """instances.insert with a requestId (idempotent), zoneOperations.wait/get, instances.get."""
    Status = compute_v1.Operation.Status
    request_id = str(uuid.uuid4())
    op = insert(fake, vm("crosscheck-0"), request_id)
    equal(op.status, Status.RUNNING, "insert Operation.status (enum)")
    equal(op.operation_type, "insert", "insert Operation.operation_type")
    equal(op.client_operation_id, request_id, "insert Operation.client_operation_id = requestId")
    equal(op.target_link, zone_url("/instances/crosscheck-0"), "insert Operation.target_link")
    equal(op.zone, zone_url(), "insert Operation.zone (full URL)")
    equal(op.self_link, zone_url(f"/operations/{op.name}"), "insert Operation.self_link")
    check(isinstance(op.target_id, int) and op.target_id > 0, f"insert Operation.target_id (int64): {op.target_id}")
    check(isinstance(op.id, int) and op.id > 0, f"insert Operation.id (int64): {op.id}")
    check(0 <= op.progress < 100, f"insert Operation.progress (int32) while RUNNING: {op.progress}")
    recent(op.insert_time, "insert Operation.insert_time")
    equal(op.user, "anonymous", "insert Operation.user for an anonymous caller")

    again = insert(fake, vm("crosscheck-0"), request_id)
    equal(again.name, op.name, "same requestId → same Operation")
    equal(again.target_id, op.target_id, "same requestId → same target_id")
    equal(sum(1 for i in inventory(fake) if i["name"] == "crosscheck-0"), 1, "same requestId → one instance")

    ops = operations(fake)
    waited = ops.wait(project=PROJECT, zone=ZONE, operation=op.name)
    equal(waited.status, Status.DONE, "zoneOperations.wait → DONE (insert done at STAGING)")
    equal(waited.progress, 100, "wait: progress 100")
    recent(waited.end_time, "wait: end_time")
    check(not waited.error.errors and not waited.http_error_status_code, "wait: no error, no httpErrorStatusCode")
    got = ops.get(project=PROJECT, zone=ZONE, operation=op.name)
    equal((got.name, got.status, got.target_id), (op.name, Status.DONE, op.target_id), "zoneOperations.get")
    op.result(polling=FAST_POLLING)
    check(op.done() and op.exception() is None, "ExtendedOperation.result() of the insert: done, no error")
    replay = insert(fake, vm("crosscheck-0"), request_id)
    equal((replay.name, replay.status), (op.name, Status.DONE), "same requestId once DONE → the DONE Operation")

    inst = get(fake, "crosscheck-0")
    equal(inst.id, op.target_id, "instances.get id = Operation.target_id (int64)")
    equal(inst.kind, "compute#instance", "kind")
    check(inst.status in ("PROVISIONING", "STAGING", "RUNNING"), f"status after insert: {inst.status}")
    equal(inst.self_link, zone_url("/instances/crosscheck-0"), "self_link")
    equal(inst.zone, zone_url(), "zone (full URL)")
    equal(inst.machine_type, zone_url("/machineTypes/e2-standard-2"), "machine_type (full URL)")
    equal(dict(inst.labels), {CLUSTER_LABEL: "1", ROLE_LABEL: "1", "machine-uid": "crosscheck"}, "labels (map)")
    check(bool(inst.label_fingerprint), f"label_fingerprint: {inst.label_fingerprint}")
    equal(list(inst.tags.items), ["shoot--dev--crosscheck-nodes"], "tags.items")
    equal(
        {i.key: i.value for i in inst.metadata.items},
        {"user-data": USER_DATA, "block-project-ssh-keys": "TRUE"},
        "metadata.items",
    )
    check(bool(inst.metadata.fingerprint), "metadata.fingerprint")
    equal(inst.can_ip_forward, True, "can_ip_forward (bool)")
    equal(inst.deletion_protection, False, "deletion_protection (bool)")
    equal(inst.description, "crosscheck machine", "description")
    recent(inst.creation_timestamp, "creation_timestamp")
    equal(len(inst.disks), 1, "one disk")
    disk = inst.disks[0]
    equal(
        (disk.boot, disk.auto_delete, disk.type_, disk.disk_size_gb, disk.index),
        (True, True, "PERSISTENT", 50, 0),
        "boot disk (boot, auto_delete, type, disk_size_gb int64, index)",
    )
    equal(disk.source, zone_url("/disks/crosscheck-0"), "boot disk source (full URL)")
    check(bool(disk.device_name), f"boot disk device_name: {disk.device_name}")
    equal(len(inst.network_interfaces), 1, "one network interface")
    nic = inst.network_interfaces[0]
    equal(nic.name, "nic0", "nic name")
    equal(nic.network, f"{API}/projects/{PROJECT}/global/networks/shoot--dev--crosscheck", "nic network (full URL)")
    equal(
        nic.subnetwork,
        f"{API}/projects/{PROJECT}/regions/{REGION}/subnetworks/shoot--dev--crosscheck-nodes",
        "nic subnetwork (full URL)",
    )
    ip = ipaddress.ip_address(nic.network_i_p)
    check(ip in ipaddress.ip_network("10.128.0.0/9"), f"nic network_i_p in 10.128.0.0/9: {ip}")
    equal(nic.stack_type, "IPV4_ONLY", "nic stack_type default")
    equal(len(nic.access_configs), 1, "one access config")
    ac = nic.access_configs[0]
    equal((ac.name, ac.type_), ("External NAT", "ONE_TO_ONE_NAT"), "access config name and type")
    check(ipaddress.ip_address(ac.nat_i_p).is_global, f"access config nat_i_p is a public address: {ac.nat_i_p}")
    sched = inst.scheduling
    equal(
        (sched.automatic_restart, sched.on_host_maintenance, sched.preemptible),
        (True, "MIGRATE", False),
        "scheduling",
    )
    equal([(s.email, list(s.scopes)) for s in inst.service_accounts], [(NODE_SA, SCOPES)], "service_accounts")
    seen = wait_status(fake, "crosscheck-0", "RUNNING")
    equal(seen[-1], "RUNNING", f"status reaches RUNNING (seen {seen})")
    return op


def insert_errors(fake):
    expect_error(
        lambda: insert(fake, vm("crosscheck-0"), str(uuid.uuid4())),
        exceptions.Conflict,
        409,
        "alreadyExists",
        "insert of an existing name with another requestId",
    )
    expect_error(
        lambda: insert(fake, vm("crosscheck-0")),
        exceptions.Conflict,
        409,
        "alreadyExists",
        "insert of an existing name without requestId",
    )
    expect_error(
        lambda: insert(fake, vm("crosscheck-bad-id"), "not-a-uuid"),
        exceptions.BadRequest,
        400,
        "invalid",
        "insert with a requestId that is no UUID",
    )
    body = vm("crosscheck-no-type")
    body.machine_type = ""
    expect_error(lambda: insert(fake, body), exceptions.BadRequest, 400, "required", "insert without machineType")
    expect_error(
        lambda: insert(fake, vm("Crosscheck_Bad")), exceptions.BadRequest, 400, "invalid", "insert with a bad name"
    )
    expect_error(
        lambda: insert(fake, vm("crosscheck-no-image", image="projects/debian-cloud/global/images/nope")),
        exceptions.NotFound,
        404,
        "notFound",
        "insert from an image that does not exist",
    )
    expect_error(
        lambda: insert(fake, vm("crosscheck-private", image=PRIVATE_IMAGE)),
        exceptions.Forbidden,
        403,
        "forbidden",
        "insert from a private image the caller may not use",
    )
    expect_error(
        lambda: get(fake, "crosscheck-missing"),
        exceptions.NotFound,
        404,
        "notFound",
        "instances.get of a missing instance",
    )
    error = fails(lambda: get(fake, "crosscheck-missing"))
    # api_core prefixes "METHOD URL: " to the body's error.message.
    check(
        getattr(error, "message", "").endswith(
            f": The resource 'projects/{PROJECT}/zones/{ZONE}/instances/crosscheck-missing' was not found"
        ),
        f"NotFound message parsed from the body's error.message: {getattr(error, 'message', None)!r}",
    )
    leaked = sorted(i["name"] for i in inventory(fake) if i["name"] != "crosscheck-0")
    equal(leaked, [], "refused inserts made no instance")


def list_and_page(fake):
    """instances.list: the driver's label filter, the regex name filter, maxResults pages through the pager."""
    batch = [f"crosscheck-list-{c}" for c in "abcde"]
    ops = [insert(fake, vm(name), str(uuid.uuid4())) for name in batch]
    for op in ops:
        op.result(polling=FAST_POLLING)
    client_ = instances(fake)
    everyone = ["crosscheck-0", *batch]

    labelled = client_.list(
        request=list_request(f'labels.{CLUSTER_LABEL}="1" AND labels.{ROLE_LABEL}="1"', max_results=500)
    )
    equal(names(labelled), everyone, "list with the driver's label filter (name order)")
    regex = client_.list(request=list_request('name eq "crosscheck-list-(?:b|d|zz)"'))
    equal(names(regex), ["crosscheck-list-b", "crosscheck-list-d"], 'list name eq "crosscheck-list-(?:b|d|zz)"')
    whole = client_.list(request=list_request('name eq "crosscheck-list"'))
    equal(names(whole), [], "the regex must match the whole name")
    ne = client_.list(request=list_request('name ne "crosscheck-list-.*"'))
    equal(names(ne), ["crosscheck-0"], 'list name ne "crosscheck-list-.*"')
    pager = client_.list(request=list_request('name eq "crosscheck-.*"', max_results=2))
    pages = list(pager.pages)
    equal([len(p.items) for p in pages], [2, 2, 2], "maxResults=2 → pages of 2, 2, 2")
    tokens = [p.next_page_token for p in pages]
    check(all(tokens[:-1]) and not tokens[-1], f"next_page_token on all but the last page: {tokens}")
    check(len(set(tokens[:-1])) == len(tokens) - 1, "page tokens differ")
    equal([i.name for p in pages for i in p.items], everyone, "pages concatenate to the whole list, in order")
    equal(pages[0].kind, "compute#instanceList", "InstanceList.kind")
    equal(
        names(client_.list(request=list_request('name eq "crosscheck-.*"', max_results=4))),
        everyone,
        "iterating the pager follows nextPageToken",
    )
    empty = list(client_.list(request=list_request('name eq "nothing-.*"')).pages)
    equal([(len(p.items), p.next_page_token) for p in empty], [(0, "")], "an empty list: one page, no items")
    by_id = client_.list(request=list_request(f"id = {get(fake, 'crosscheck-list-c').id}"))
    equal(names(by_id), ["crosscheck-list-c"], "list filter id = N")
    for bad, what in (
        ('name eq "crosscheck-(" ', "an invalid regex"),
        ('name = "a" OR name = "b"', "OR"),
        ('name eq "a" AND labels.x = "y"', "mixing the regex and comparison forms"),
        ('colour = "blue"', "an unknown field"),
    ):
        expect_error(
            lambda bad=bad: list(client_.list(request=list_request(bad), retry=None)),
            exceptions.BadRequest,
            400,
            "invalid",
            f"list filter with {what}",
        )
    return batch, [op.name for op in ops]


def zone_operations(fake, batch_ops):
    ops = operations(fake)
    Status = compute_v1.Operation.Status
    wanted = sorted([batch_ops[0], batch_ops[2]])
    request = compute_v1.ListZoneOperationsRequest(
        project=PROJECT, zone=ZONE, filter=f'name eq "(?:{batch_ops[0]}|{batch_ops[2]})"', max_results=1
    )
    pages = list(ops.list(request=request).pages)
    equal([[o.name for o in p.items] for p in pages], [[w] for w in wanted], "zoneOperations.list regex, 1 per page")
    check(bool(pages[0].next_page_token) and not pages[-1].next_page_token, "zoneOperations.list page tokens")
    equal(pages[0].kind, "compute#operationList", "OperationList.kind")
    listed = [o for p in pages for o in p.items]
    equal({(o.status, o.operation_type) for o in listed}, {(Status.DONE, "insert")}, "listed operations DONE inserts")
    done = ops.list(request=compute_v1.ListZoneOperationsRequest(project=PROJECT, zone=ZONE, filter="status = DONE"))
    check({o.name for o in done} >= set(batch_ops), "zoneOperations.list status = DONE has the batch's operations")
    expect_error(
        lambda: ops.get(project=PROJECT, zone=ZONE, operation="operation-missing", retry=None),
        exceptions.NotFound,
        404,
        "notFound",
        "zoneOperations.get of a missing operation",
    )
    expect_error(
        lambda: ops.wait(project=PROJECT, zone=ZONE, operation="operation-missing", retry=None),
        exceptions.NotFound,
        404,
        "notFound",
        "zoneOperations.wait of a missing operation",
    )


def delete_instances(fake, batch):
    Status = compute_v1.Operation.Status
    request_id = str(uuid.uuid4())
    op = delete(fake, "crosscheck-0", request_id)
    equal((op.operation_type, op.status), ("delete", Status.RUNNING), "delete Operation (type, status)")
    equal(op.client_operation_id, request_id, "delete Operation.client_operation_id = requestId")
    equal(op.target_link, zone_url("/instances/crosscheck-0"), "delete Operation.target_link")
    equal(get(fake, "crosscheck-0").status, "STOPPING", "status while deleting")
    again = delete(fake, "crosscheck-0", request_id)
    equal(again.name, op.name, "same delete requestId → same Operation")
    op.result(polling=FAST_POLLING)
    check(op.done() and op.exception() is None, "ExtendedOperation.result() of the delete: done, no error")
    expect_error(
        lambda: get(fake, "crosscheck-0"), exceptions.NotFound, 404, "notFound", "instances.get after the delete"
    )
    finished = operations(fake).get(project=PROJECT, zone=ZONE, operation=op.name)
    equal(finished.status, Status.DONE, "zoneOperations.get of the delete: DONE")
    expect_error(
        lambda: delete(fake, "crosscheck-0", str(uuid.uuid4())),
        exceptions.NotFound,
        404,
        "notFound",
        "delete of a missing instance",
    )
    # Delete the rest without waiting in between, then wait for them all, as the driver's drain does.
    pending = [delete(fake, name, str(uuid.uuid4())) for name in batch]
    for each in pending:
        each.result(polling=FAST_POLLING)
    equal(names(instances(fake).list(request=list_request())), [], "every instance deleted")

    protected = vm("crosscheck-protected", deletion_protection=True)
    insert(fake, protected, str(uuid.uuid4())).result(polling=FAST_POLLING)
    expect_error(
        lambda: delete(fake, "crosscheck-protected", str(uuid.uuid4())),
        exceptions.BadRequest,
        400,
        "invalidResourceUsage",
        "delete of a deletion-protected instance",
    )


def faults(fake):
    admin(fake, "faults", {"operation": "instances.insert", "kind": "capacity", "times": 1, "phase": "after"})
    op = insert(fake, vm("crosscheck-stockout"), str(uuid.uuid4()))
    error = fails(lambda: op.result(polling=FAST_POLLING))
    equal(
        (type(error).__name__, getattr(error, "code", None)),
        ("ServiceUnavailable", 503),
        "stockout: ExtendedOperation.result() raises from httpErrorStatusCode",
    )
    equal(
        [e.code for e in op.error.errors], ["ZONE_RESOURCE_POOL_EXHAUSTED"], "stockout: Operation.error.errors[].code"
    )
    equal(op.http_error_status_code, 503, "stockout: Operation.http_error_status_code (int32)")
    expect_error(
        lambda: get(fake, "crosscheck-stockout"),
        exceptions.NotFound,
        404,
        "notFound",
        "stockout: the instance vanished",
    )
    # Placement after: the zone cannot host the machine now; the operation names it.
    admin(fake, "faults", {"operation": "instances.insert", "kind": "placement", "times": 1, "phase": "after"})
    op = insert(fake, vm("crosscheck-unplaced"), str(uuid.uuid4()))
    fails(lambda: op.result(polling=FAST_POLLING))
    equal(
        [e.code for e in op.error.errors],
        ["ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"],
        "placement after: Operation.error.errors[].code",
    )
    cases = [
        ("placement", "instances.insert", exceptions.BadRequest, 400, "invalid"),
        ("throttle", "instances.get", exceptions.TooManyRequests, 429, "rateLimitExceeded"),
        ("unavailable", "instances.get", exceptions.ServiceUnavailable, 503, "backendError"),
        ("internal", "instances.list", exceptions.InternalServerError, 500, "internalError"),
        ("capacity", "instances.insert", exceptions.Forbidden, 403, "quotaExceeded"),
        ("permission", "instances.delete", exceptions.Forbidden, 403, "forbidden"),
    ]
    client_ = instances(fake)
    calls = {
        "instances.get": lambda: client_.get(project=PROJECT, zone=ZONE, instance="crosscheck-x", retry=None),
        "instances.list": lambda: list(client_.list(request=list_request(), retry=None)),
        "instances.insert": lambda: insert(fake, vm("crosscheck-quota"), str(uuid.uuid4())),
        "instances.delete": lambda: delete(fake, "crosscheck-x", str(uuid.uuid4())),
    }
    for kind, operation, error_class, code, reason in cases:
        admin(fake, "faults", {"operation": operation, "kind": kind, "times": 1})
        expect_error(calls[operation], error_class, code, reason, f"fault {kind} on {operation}")
    admin(fake, "faults", method="DELETE")

    # 401: google-auth refreshes the token and resends; GCE's 401 must look like one it recovers from.
    node = instances(fake, f"sa:{NODE_SA}")
    token = node._transport._credentials
    admin(fake, "faults", {"operation": "instances.get", "kind": "auth", "times": 1})
    admin(fake, "calls/reset")
    expect_error(
        lambda: node.get(project=PROJECT, zone=ZONE, instance="crosscheck-x", retry=None),
        exceptions.NotFound,
        404,
        "notFound",
        "fault auth on instances.get: the client refreshes its token, resends and gets the real answer",
    )
    equal(token.refreshes, 1, "fault auth: one token refresh")
    equal(admin(fake, "calls", method="GET")["calls"].get("instances.get"), 2, "fault auth: two instances.get calls")
    bogus = instances(fake, "ya29.not-a-token-the-fake-issued")
    expect_error(
        lambda: bogus.get(project=PROJECT, zone=ZONE, instance="crosscheck-x", retry=None),
        exceptions.Unauthorized,
        401,
        "authError",
        "an unknown bearer token (after the client's refresh attempts)",
    )
    equal(bogus._transport._credentials.refreshes, 2, "unknown bearer token: google-auth refreshed twice, then gave up")
    anonymous = None
    admin(fake, "faults", {"operation": "instances.get", "kind": "auth", "times": 1})
    try:
        get(fake, "crosscheck-x")
    except Exception as error:  # noqa: BLE001 - the exception class is what is checked
        anonymous = error
    admin(fake, "faults", method="DELETE")
    equal(
        type(anonymous).__name__,
        "InvalidOperation",
        "fault auth with AnonymousCredentials: google-auth tries to refresh them and raises",
    )


def images_and_iam(fake):
    public = images(fake).get(project="debian-cloud", image="debian-12")
    equal((public.name, public.family, public.status), ("debian-12", "debian-12", "READY"), "images.get public image")
    equal(public.self_link, f"{API}/{PUBLIC_IMAGE}", "image self_link")
    equal((public.disk_size_gb, public.archive_size_bytes), (10, 412324864), "image sizes (int64)")
    check(isinstance(public.id, int) and public.id > 0, f"image id (uint64): {public.id}")
    equal(public.architecture, "X86_64", "image architecture")
    check("UEFI_COMPATIBLE" in [f.type_ for f in public.guest_os_features], "image guest_os_features[].type")
    expect_error(
        lambda: images(fake).get(project="image-owner", image="custom-gardenlinux", retry=None),
        exceptions.Forbidden,
        403,
        "forbidden",
        "anonymous images.get of the private image",
    )
    expect_error(
        lambda: images(fake).get(project="debian-cloud", image="nope", retry=None),
        exceptions.NotFound,
        404,
        "notFound",
        "images.get of a missing image",
    )
    owner_token = f"sa:{IMAGE_OWNER}"
    owner = images(fake, owner_token)
    private = owner.get(project="image-owner", image="custom-gardenlinux")
    equal(private.family, "gardenlinux", "owner's images.get of the private image")
    expect_error(
        lambda: images(fake).get_iam_policy(project="image-owner", resource="custom-gardenlinux", retry=None),
        exceptions.Forbidden,
        403,
        "forbidden",
        "anonymous images.getIamPolicy",
    )
    policy = owner.get_iam_policy(
        request=compute_v1.GetIamPolicyImageRequest(
            project="image-owner", resource="custom-gardenlinux", options_requested_policy_version=3
        )
    )
    equal(
        [(b.role, list(b.members)) for b in policy.bindings],
        [("roles/owner", [f"serviceAccount:{IMAGE_OWNER}"])],
        "getIamPolicy bindings",
    )
    check(bool(policy.etag), f"getIamPolicy etag: {policy.etag!r}")
    check(policy.version in (1, 3), f"getIamPolicy version (int32): {policy.version}")

    # The driver's share: read-modify-write with the etag (providers/gcp/src/share_image.rs).
    shared = compute_v1.Policy(policy)
    shared.bindings.append(compute_v1.Binding(role="roles/compute.imageUser", members=[f"serviceAccount:{NODE_SA}"]))
    updated = owner.set_iam_policy(
        project="image-owner",
        resource="custom-gardenlinux",
        global_set_policy_request_resource=compute_v1.GlobalSetPolicyRequest(policy=shared),
    )
    check(bool(updated.etag) and updated.etag != policy.etag, f"setIamPolicy: new etag {updated.etag!r}")
    equal(
        sorted((b.role, tuple(b.members)) for b in updated.bindings),
        [
            ("roles/compute.imageUser", (f"serviceAccount:{NODE_SA}",)),
            ("roles/owner", (f"serviceAccount:{IMAGE_OWNER}",)),
        ],
        "setIamPolicy bindings",
    )
    equal(
        owner.get_iam_policy(project="image-owner", resource="custom-gardenlinux").etag,
        updated.etag,
        "getIamPolicy after the change: the new etag",
    )
    stale = compute_v1.Policy(policy)
    stale.bindings.append(compute_v1.Binding(role="roles/viewer", members=["user:someone@example.com"]))
    expect_error(
        lambda: owner.set_iam_policy(
            project="image-owner",
            resource="custom-gardenlinux",
            global_set_policy_request_resource=compute_v1.GlobalSetPolicyRequest(policy=stale),
            retry=None,
        ),
        exceptions.PreconditionFailed,
        412,
        "conditionNotMet",
        "setIamPolicy with a stale etag",
    )
    expect_error(
        lambda: images(fake, f"sa:{NODE_SA}").set_iam_policy(
            project="image-owner",
            resource="custom-gardenlinux",
            global_set_policy_request_resource=compute_v1.GlobalSetPolicyRequest(policy=updated),
            retry=None,
        ),
        exceptions.Forbidden,
        403,
        "forbidden",
        "setIamPolicy by an imageUser",
    )

    # The node account now may read and boot from the private image.
    node = f"sa:{NODE_SA}"
    equal(
        images(fake, node).get(project="image-owner", image="custom-gardenlinux").name,
        "custom-gardenlinux",
        "the shared image is readable by the node account",
    )
    op = insert(fake, vm("crosscheck-private", image=PRIVATE_IMAGE), str(uuid.uuid4()), principal=node)
    equal(op.user, NODE_SA, "Operation.user = the bearer token's service account")
    op.result(polling=FAST_POLLING)
    check(op.exception() is None, "insert from the shared private image as the node account")
    delete(fake, "crosscheck-private", str(uuid.uuid4())).result(polling=FAST_POLLING)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    fake = sys.argv[1].rstrip("/")
    run = Run("fake-gce")
    admin(fake, "reset")
    admin(fake, "timing", {"boot_ms": 300, "stop_ms": 300})
    state = {}

    scenario = run.scenario

    scenario("instances.insert / zoneOperations.wait / instances.get", lambda: insert_and_get(fake))
    scenario("insert and get errors", lambda: insert_errors(fake))
    listed = scenario("instances.list", lambda: list_and_page(fake))
    if listed:
        state["batch"], state["ops"] = listed
        scenario("zoneOperations.list / get / wait", lambda: zone_operations(fake, state["ops"]))
        scenario("instances.delete", lambda: delete_instances(fake, state["batch"]))
    scenario("faults and auth", lambda: faults(fake))
    scenario("images and IAM", lambda: images_and_iam(fake))
    admin(fake, "reset")
    run.finish()


if __name__ == "__main__":
    main()
