#!/usr/bin/env python3
"""Cross-checks fake-arm against Azure's official Python SDK.

Usage: crosscheck.py FAKE_URL   (e.g. http://127.0.0.1:8090)

The SDK is the oracle for ARM's wire protocol: its long-running-operation poller
follows `Azure-AsyncOperation`, its pager follows `nextLink`, and its error
mapping reads the ARM error body. Every result is asserted; any mismatch exits
non-zero.

Credentials: azure-identity's ClientSecretCredential refuses a non-https
authority ("The value must be a TLS protected (https) URL"), so a small
TokenCredential (FakeAadCredential) fetches tokens from the fake's AAD endpoint
with `requests` (client-credentials grant, the same form ClientSecretCredential
sends). azure-core refuses bearer tokens over plain http; AllowHttpBearer (the
clients' headers_policy, which runs before the authentication policy) sets the
pipeline context's `enforce_https` to False for every request, including LRO
polls and next pages.
"""

import base64
import inspect
import sys
import time

import requests
from azure.core import MatchConditions
from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.core.pipeline.policies import HeadersPolicy
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.compute import models as compute_models
from azure.mgmt.network import NetworkManagementClient
from azure.mgmt.resource.resources import ResourceManagementClient
from azure.mgmt.resourcegraph import ResourceGraphClient
from azure.mgmt.resourcegraph.models import QueryRequest, QueryRequestOptions

TENANT_ID = "72f988bf-86f1-41af-91ab-2d7cd011db47"
SUBSCRIPTION_ID = "00000000-0000-4000-8000-000000000001"
CLIENT_ID = "11111111-0000-4000-8000-000000000001"
CLIENT_SECRET = "fake-cluster-client-secret"
OWNER_SUBSCRIPTION_ID = "00000000-0000-4000-8000-000000000002"
OWNER_CLIENT_ID = "11111111-0000-4000-8000-000000000002"
OWNER_CLIENT_SECRET = "fake-owner-client-secret"
RG = "shoot--dev--conf"
LOCATION = "westeurope"
VNET = "shoot--dev--conf"
SUBNET = "shoot--dev--conf-nodes"
CLUSTER_TAG = "kubernetes.io-cluster-shoot--dev--conf"
USER_DATA = base64.b64encode(b"#cloud-config\nruncmd: [echo, hi]\n").decode()

CHECKS = 0


def check(condition, what):
    """Counts one assertion; exits non-zero on the first mismatch."""
    global CHECKS
    CHECKS += 1
    if not condition:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


class FakeAadCredential:
    """A TokenCredential that runs the client-credentials grant against the fake's AAD endpoint."""

    def __init__(self, authority, tenant_id, client_id, client_secret):
        self._url = f"{authority}/{tenant_id}/oauth2/v2.0/token"
        self._client_id = client_id
        self._secret = client_secret

    def get_token(self, *scopes, **_kwargs):
        resp = requests.post(
            self._url,
            data={
                "grant_type": "client_credentials",
                "client_id": self._client_id,
                "client_secret": self._secret,
                "scope": scopes[0] if scopes else "https://management.azure.com/.default",
            },
            timeout=10,
        )
        if resp.status_code != 200:
            raise RuntimeError(f"token request failed: {resp.status_code} {resp.text}")
        body = resp.json()
        return AccessToken(body["access_token"], int(time.time()) + int(body["expires_in"]))


class AllowHttpBearer(HeadersPolicy):
    """Runs before the bearer-token policy and lets it send tokens to the plain-http fake."""

    def on_request(self, request):
        super().on_request(request)
        request.context["enforce_https"] = False


def client_kwargs(fake):
    # No SDK retries (so a 429 surfaces), fast LRO polling where the fake sends no Retry-After
    # (Compute operations carry one: the seconds left, at least 1).
    return {"base_url": fake, "headers_policy": AllowHttpBearer(), "retry_total": 0, "polling_interval": 0.05}


def wire(model):
    """The wire-format dict of an SDK model."""
    return model.as_dict()


def admin(fake, path, body=None, method="POST"):
    resp = requests.request(method, f"{fake}/_admin/{path}", json=body if body is not None else {}, timeout=10)
    check(resp.status_code == 200, f"admin {path}: {resp.status_code} {resp.text}")
    return resp.json()


def subnet_id():
    return (
        f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/{RG}/providers/Microsoft.Network/"
        f"virtualNetworks/{VNET}/subnets/{SUBNET}"
    )


def nic_body(machine):
    return {
        "location": LOCATION,
        "tags": {CLUSTER_TAG: "1", "machine": machine},
        "properties": {
            "enableIPForwarding": True,
            "nicType": "Standard",
            "ipConfigurations": [
                {
                    "name": f"{machine}-nic",
                    "properties": {
                        "subnet": {"id": subnet_id()},
                        "privateIPAllocationMethod": "Dynamic",
                        "primary": True,
                    },
                }
            ],
        },
    }


def vm_body(name, nic_id, image=None):
    return {
        "location": LOCATION,
        "tags": {CLUSTER_TAG: "1", "machine": name},
        "zones": ["1"],
        "properties": {
            "hardwareProfile": {"vmSize": "Standard_D2s_v3"},
            "storageProfile": {
                "imageReference": image
                or {"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "24.04.202501140"},
                "osDisk": {
                    "name": f"{name}-os-disk",
                    "createOption": "FromImage",
                    "diskSizeGB": 50,
                    "caching": "ReadWrite",
                    "managedDisk": {"storageAccountType": "Premium_LRS"},
                    "deleteOption": "Delete",
                },
                "dataDisks": [
                    {
                        "lun": 0,
                        "name": f"{name}-data-0-data-disk",
                        "createOption": "Empty",
                        "diskSizeGB": 10,
                        "managedDisk": {"storageAccountType": "StandardSSD_LRS"},
                        "deleteOption": "Delete",
                    }
                ],
            },
            "osProfile": {
                "computerName": name,
                "adminUsername": "core",
                "customData": USER_DATA,
                "linuxConfiguration": {
                    "disablePasswordAuthentication": True,
                    "ssh": {
                        "publicKeys": [
                            {"path": "/home/core/.ssh/authorized_keys", "keyData": "ssh-rsa AAAAB3NzaC1yc2E fake"}
                        ]
                    },
                },
            },
            "networkProfile": {
                "networkInterfaces": [{"id": nic_id, "properties": {"primary": True, "deleteOption": "Delete"}}]
            },
        },
    }


def vm_with_nic_configuration(name, nic_name):
    """A VirtualMachine model whose network profile makes NIC `nic_name` (SDK models, as the driver sends)."""
    vm = compute_models.VirtualMachine(vm_body(name, "unused"))
    m = compute_models
    vm.properties.network_profile = m.NetworkProfile(
        network_api_version="2020-11-01",
        network_interface_configurations=[
            m.VirtualMachineNetworkInterfaceConfiguration(
                name=nic_name,
                properties=m.VirtualMachineNetworkInterfaceConfigurationProperties(
                    primary=True,
                    delete_option="Delete",
                    enable_ip_forwarding=True,
                    ip_configurations=[
                        m.VirtualMachineNetworkInterfaceIPConfiguration(
                            name=f"{nic_name}-ipconfig",
                            properties=m.VirtualMachineNetworkInterfaceIPConfigurationProperties(
                                subnet=m.SubResource(id=subnet_id()), primary=True
                            ),
                        )
                    ],
                ),
            )
        ],
    )
    return vm


def check_nic_configurations_and_create_only(compute, network):
    """A VM PUT that makes its NIC (networkInterfaceConfigurations) and the create-only PUT (If-None-Match: *)."""
    name, nic_name = "py-cfg", "py-cfg-nic"
    poller = compute.virtual_machines.begin_create_or_update(RG, name, vm_with_nic_configuration(name, nic_name))
    # The NIC is made at PUT time: readable through azure-mgmt-network before the VM's LRO finishes.
    nic = wire(network.network_interfaces.get(RG, nic_name))
    check(nic["name"] == nic_name and nic["id"].lower().endswith(f"/networkinterfaces/{nic_name}"), f"made nic {nic}")
    ip_config = nic["properties"]["ipConfigurations"][0]
    check(ip_config["properties"]["subnet"]["id"].lower() == subnet_id().lower(), f"made nic subnet {ip_config}")
    check(ip_config["properties"].get("privateIPAddress", "").startswith("10.250."), f"made nic ip {ip_config}")
    check(nic["properties"]["enableIPForwarding"] is True, f"made nic ip forwarding {nic['properties']}")
    check(nic["properties"]["virtualMachine"]["id"].lower().endswith(f"/virtualmachines/{name}"), "made nic attached")
    vm = wire(poller.result())
    check(vm["properties"]["provisioningState"] == "Succeeded", f"config vm state {vm['properties']}")
    refs = vm["properties"]["networkProfile"]["networkInterfaces"]
    check(len(refs) == 1 and refs[0]["id"].lower() == nic["id"].lower(), f"vm lists the made nic: {refs}")
    check(refs[0]["properties"]["deleteOption"] == "Delete", f"made nic deleteOption {refs}")
    got = compute.virtual_machines.get(RG, name)
    configs = got.properties.network_profile.network_interface_configurations
    check(configs[0].name == nic_name and got.properties.network_profile.network_api_version == "2020-11-01", "configs")
    expect_error(
        lambda: network.network_interfaces.begin_delete(RG, nic_name).result(), 400, "NicInUse", "made nic in use"
    )

    # Create-only PUT of the existing VM. azure-mgmt-compute 39.0.0 has no `if_none_match`
    # keyword: it sends `If-None-Match: *` for match_condition=MatchConditions.IfMissing.
    params = inspect.signature(compute.virtual_machines.begin_create_or_update).parameters
    if "if_none_match" in params:
        create_only = {"if_none_match": "*"}
        spelled = "if_none_match='*'"
    elif "match_condition" in params:
        print(
            "note: azure-mgmt-compute has no if_none_match keyword on virtual_machines.begin_create_or_update; "
            "the If-None-Match: * check uses its match_condition=MatchConditions.IfMissing (which sends that header)"
        )
        create_only = {"match_condition": MatchConditions.IfMissing}
        spelled = "match_condition=IfMissing"
    else:
        print("SKIP: this azure-mgmt-compute cannot send If-None-Match on virtual_machines.begin_create_or_update")
        return
    before = wire(compute.virtual_machines.get(RG, name))
    changed = vm_with_nic_configuration(name, nic_name)
    changed.tags = {"changed": "1"}
    err = expect_error(
        lambda: compute.virtual_machines.begin_create_or_update(RG, name, changed, **create_only),
        412,
        "PreconditionFailed",
        f"create-only PUT ({spelled}) of an existing vm",
    )
    if "match_condition" in create_only:
        check(isinstance(err, ResourceExistsError), f"412 with IfMissing maps to ResourceExistsError: {type(err)}")
    after = wire(compute.virtual_machines.get(RG, name))
    check(after["properties"]["vmId"] == before["properties"]["vmId"], "the refused PUT kept the vm")
    check(after.get("tags") == before.get("tags"), f"the refused PUT changed nothing: {after.get('tags')}")
    # The same keyword on an absent VM creates it.
    fresh = compute_models.VirtualMachine(vm_body("py-once", "unused"))
    fresh.properties.network_profile = vm_with_nic_configuration("py-once", "py-once-nic").properties.network_profile
    vm = wire(compute.virtual_machines.begin_create_or_update(RG, "py-once", fresh, **create_only).result())
    check(vm["properties"]["provisioningState"] == "Succeeded", f"create-only PUT of an absent vm: {vm['properties']}")

    # deleteOption Delete: the made NICs go with their VMs.
    for vm_name, nic in [(name, nic_name), ("py-once", "py-once-nic")]:
        compute.virtual_machines.begin_delete(RG, vm_name).result()
        expect_error(lambda: network.network_interfaces.get(RG, nic), 404, "ResourceNotFound", f"{nic} cascaded")


COMMUNITY_GALLERY = "gardenlinux-13e998fe-534d-4b0a-8a27-f16a73aef620"
IDENTITY = (
    f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/{RG}"
    "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/py-identity"
)


def check_images_identity_and_tags(compute, resources):
    """A marketplace image's plan, a community gallery version by region, a VM's
    user-assigned identity and a community gallery image, and the Tags API, through
    Azure's own clients and models."""
    img = wire(compute.virtual_machine_images.get(LOCATION, "sap", "gardenlinux", "greatest", "1443.3.0"))
    check(
        img["properties"]["plan"] == {"name": "greatest", "product": "gardenlinux", "publisher": "sap"},
        f"image plan {img}",
    )
    version = wire(compute.community_gallery_image_versions.get(LOCATION, COMMUNITY_GALLERY, "gardenlinux", "1592.1.0"))
    check(
        version["identifier"]["uniqueId"] == f"/CommunityGalleries/{COMMUNITY_GALLERY}/Images/gardenlinux/Versions/1592.1.0",
        f"community version {version}",
    )
    expect_error(
        lambda: compute.community_gallery_image_versions.get(LOCATION, COMMUNITY_GALLERY, "gardenlinux", "1443.10.0"),
        404,
        "ResourceNotFound",
        "community version not replicated here",
    )
    m = compute_models
    vm = vm_with_nic_configuration("py-ident", "py-ident-nic")
    vm.properties.storage_profile.image_reference = m.ImageReference(
        community_gallery_image_id=f"/CommunityGalleries/{COMMUNITY_GALLERY}/Images/gardenlinux/Versions/1592.1.0"
    )
    vm.identity = m.VirtualMachineIdentity(
        type="UserAssigned", user_assigned_identities={IDENTITY: m.UserAssignedIdentitiesValue()}
    )
    made = wire(compute.virtual_machines.begin_create_or_update(RG, "py-ident", vm).result())
    check(made["properties"]["provisioningState"] == "Succeeded", f"identity vm {made['properties']}")
    got = compute.virtual_machines.get(RG, "py-ident")
    ids = got.identity.user_assigned_identities
    check(list(ids) == [IDENTITY] and ids[IDENTITY].principal_id, f"identity as the SDK reads it: {wire(got)['identity']}")
    empty = vm_with_nic_configuration("py-ident-2", "py-ident-2-nic")
    empty.identity = m.VirtualMachineIdentity(type="UserAssigned", user_assigned_identities={})
    expect_error(
        lambda: compute.virtual_machines.begin_create_or_update(RG, "py-ident-2", empty).result(),
        400,
        "MissingIdentityIds",
        "UserAssigned identity without ids",
    )
    scope = f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/{RG}/providers/Microsoft.Network/networkInterfaces/py-ident-nic"
    from azure.mgmt.resource.resources import models as resource_models

    merged = resources.tags.begin_update_at_scope(
        scope,
        resource_models.TagsPatchResource(operation="Merge", properties=resource_models.Tags(tags={"k": "v"})),
    ).result()
    check(merged.properties.tags == {"k": "v"}, f"merged tags {wire(merged)}")
    check(resources.tags.get_at_scope(scope).properties.tags == {"k": "v"}, "tags read back")
    compute.virtual_machines.begin_delete(RG, "py-ident").result()



def graph_nic_query(rg):
    """The driver's one Resource Graph query (providers/azure/src/graph.rs), for resource group `rg`."""
    literal = "'" + rg.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return (
        "Resources | where type =~ 'microsoft.network/networkinterfaces' and resourceGroup =~ " + literal
        + " | where isnotempty(properties.virtualMachine.id)"
        + " | mv-expand ipconfig = properties.ipConfigurations"
        + " | where tobool(ipconfig.properties.primary)"
        + " | project vmId = tostring(properties.virtualMachine.id), nic = name, primary = tobool(properties.primary),"
        + " privateIp = tostring(ipconfig.properties.privateIPAddress)"
    )


def check_expand_and_resource_graph(fake, cred, resources, names):
    """The generic list's $expand=provisioningState and $top, and Resource Graph's answer, through the SDKs."""
    # $expand=provisioningState: GenericResourceExpanded.provisioning_state; $top=1 pages one at a time.
    admin(fake, "calls/reset")
    expanded = list(
        resources.resources.list_by_resource_group(
            RG, filter="resourceType eq 'Microsoft.Compute/virtualMachines'", expand="provisioningState", top=1
        )
    )
    got = sorted((r.name, r.provisioning_state) for r in expanded if r.name in names)
    check(got == [(n, "Succeeded") for n in names], f"expanded provisioning states: {got}")
    pages = requests.get(f"{fake}/_admin/calls", timeout=10).json()["calls"].get("resources.listByResourceGroup")
    check(pages == len(expanded), f"$top=1 pages one item a call: {pages} calls for {len(expanded)} items")
    nics = [r for r in resources.resources.list_by_resource_group(RG, expand="provisioningState")
            if r.type == "Microsoft.Network/networkInterfaces"]
    check(nics and all(r.provisioning_state == "Succeeded" for r in nics), "NICs expand as Succeeded")
    plain = list(resources.resources.list_by_resource_group(RG, filter="resourceType eq 'Microsoft.Compute/virtualMachines'"))
    check(all(r.provisioning_state is None for r in plain), "no provisioningState unless expanded")
    expect_error(
        lambda: list(resources.resources.list_by_resource_group(RG, top=0)), 400, "InvalidTopInQueryString", "$top=0"
    )

    # Resource Graph: the driver's query, two pages through skip_token.
    admin(fake, "azure/graph-lag", {"millis": 0})
    graph = ResourceGraphClient(cred, **client_kwargs(fake))
    query = graph_nic_query(RG)
    admin(fake, "calls/reset")
    first = graph.resources(
        QueryRequest(subscriptions=[SUBSCRIPTION_ID], query=query,
                     options=QueryRequestOptions(top=2, result_format="objectArray"))
    )
    check(first.count == 2 and first.total_records >= 3, f"graph first page: {first.count}/{first.total_records}")
    check(str(first.result_truncated).lower() == "false", f"resultTruncated {first.result_truncated}")
    check(first.skip_token, "graph first page has a skip token")
    rows = list(first.data)
    token = first.skip_token
    while token:
        page = graph.resources(
            QueryRequest(subscriptions=[SUBSCRIPTION_ID], query=query,
                         options=QueryRequestOptions(top=2, skip_token=token, result_format="objectArray"))
        )
        check(page.count == len(page.data), "count is the rows of the page")
        rows.extend(page.data)
        token = page.skip_token
    check(len(rows) == first.total_records, f"every row once across pages: {len(rows)} of {first.total_records}")
    by_vm = {r["vmId"].rsplit("/", 1)[-1]: r for r in rows}
    for name in names:
        row = by_vm.get(name)
        check(row is not None, f"graph row of {name}: {rows}")
        check(row["nic"] == f"{name}-nic" and row["primary"] is True, f"graph row {row}")
        check(row["privateIp"].startswith("10.250."), f"graph ip {row}")
    calls = requests.get(f"{fake}/_admin/calls", timeout=10).json()["calls"]
    check(calls.get("resourceGraph.resources") >= 2, f"graph calls counted: {calls}")
    # Subscriptions the caller may not read are skipped; another query is refused.
    hidden = graph.resources(QueryRequest(subscriptions=[OWNER_SUBSCRIPTION_ID], query=query))
    check(hidden.total_records == 0 and hidden.count == 0, f"hidden subscription skipped: {hidden.total_records}")
    err = expect_error(
        lambda: graph.resources(QueryRequest(subscriptions=[SUBSCRIPTION_ID], query="Resources | project name")),
        400, "BadRequest", "another query",
    )
    details = (err.response.json().get("error") or {}).get("details") or []
    check(details and details[0].get("code") == "InvalidQuery", f"InvalidQuery detail: {details}")
    # The per-user quota: 429 with the quota headers.
    admin(fake, "azure/graph-quota", {"queries": 1, "windowMillis": 60000})
    graph.resources(QueryRequest(subscriptions=[SUBSCRIPTION_ID], query=query))
    err = expect_error(
        lambda: graph.resources(QueryRequest(subscriptions=[SUBSCRIPTION_ID], query=query)), 429, "RateLimiting", "quota"
    )
    headers = err.response.headers
    check(headers.get("x-ms-user-quota-remaining") == "0", f"quota remaining {dict(headers)}")
    check(headers.get("x-ms-user-quota-resets-after", "").startswith("00:0"), f"quota resets {dict(headers)}")
    admin(fake, "azure/graph-quota", {"queries": 15, "windowMillis": 5000})


def expect_error(call, status, code, what):
    try:
        call()
    except HttpResponseError as err:
        check(err.status_code == status, f"{what}: status {err.status_code} != {status} ({err})")
        got = err.error.code if err.error is not None else None
        check(got == code, f"{what}: error.code {got!r} != {code!r}")
        return err
    check(False, f"{what}: no error raised")
    return None


def main():
    fake = (sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8090").rstrip("/")
    admin(fake, "reset")
    admin(fake, "timing", {"boot_ms": 300, "stop_ms": 200})

    # azure-identity's own credential refuses a plain-http authority (why FakeAadCredential exists).
    try:
        from azure.identity import ClientSecretCredential

        ClientSecretCredential(TENANT_ID, CLIENT_ID, CLIENT_SECRET, authority=fake)
        print("note: ClientSecretCredential accepted an http authority")
    except ValueError as err:
        print(f"note: ClientSecretCredential refuses http authority: {err}")

    cred = FakeAadCredential(fake, TENANT_ID, CLIENT_ID, CLIENT_SECRET)
    owner_cred = FakeAadCredential(fake, TENANT_ID, OWNER_CLIENT_ID, OWNER_CLIENT_SECRET)
    try:
        FakeAadCredential(fake, TENANT_ID, CLIENT_ID, "wrong").get_token("https://management.azure.com/.default")
        check(False, "a wrong client secret must be refused")
    except RuntimeError as err:
        check("invalid_client" in str(err) and "AADSTS7000215" in str(err), f"bad secret answer: {err}")

    kwargs = client_kwargs(fake)
    compute = ComputeManagementClient(cred, SUBSCRIPTION_ID, **kwargs)
    network = NetworkManagementClient(cred, SUBSCRIPTION_ID, **kwargs)
    resources = ResourceManagementClient(cred, SUBSCRIPTION_ID, **kwargs)
    owner_compute = ComputeManagementClient(owner_cred, OWNER_SUBSCRIPTION_ID, **kwargs)

    # NICs (Microsoft.Network LRO, already Succeeded) and VMs (Microsoft.Compute LRO via Azure-AsyncOperation).
    admin(fake, "azure/page-size", {"size": 2})
    names = ["py-vm-0", "py-vm-1", "py-vm-2"]
    nic_ids = {}
    for i, name in enumerate(names):
        nic = wire(network.network_interfaces.begin_create_or_update(RG, f"{name}-nic", nic_body(name)).result())
        check(nic["properties"]["provisioningState"] == "Succeeded", f"nic state {nic}")
        ip = nic["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"]
        check(ip == f"10.250.0.{4 + i}", f"nic ip {ip}")
        nic_ids[name] = nic["id"]
    started = time.monotonic()
    vm = wire(compute.virtual_machines.begin_create_or_update(RG, names[0], vm_body(names[0], nic_ids[names[0]])).result())
    check(time.monotonic() - started >= 0.25, "the poller waited for the async operation (boot_ms)")
    check(vm["properties"]["provisioningState"] == "Succeeded", f"vm state after LRO: {vm['properties']}")
    check(vm["name"] == names[0] and vm["zones"] == ["1"], f"vm body {vm}")
    check("customData" not in vm["properties"].get("osProfile", {}), "customData is never returned")
    for name in names[1:]:
        compute.virtual_machines.begin_create_or_update(RG, name, vm_body(name, nic_ids[name])).result()

    got = wire(compute.virtual_machines.get(RG, names[0], expand="instanceView"))
    codes = [s["code"] for s in got["properties"]["instanceView"]["statuses"]]
    check(codes == ["ProvisioningState/succeeded", "PowerState/running"], f"instance view {codes}")
    check(got["properties"]["vmId"] == vm["properties"]["vmId"], "vmId is stable")
    nic = wire(network.network_interfaces.get(RG, f"{names[0]}-nic"))
    check(nic["properties"]["virtualMachine"]["id"].lower() == vm["id"].lower(), f"nic attached: {nic['properties']}")

    # List by resource group across pages (page size 2, 3 VMs).
    listed = [wire(v)["name"] for v in compute.virtual_machines.list(RG)]
    check(sorted(listed) == names, f"vm list across pages: {listed}")
    admin(fake, "calls/reset")
    calls = requests.get(f"{fake}/_admin/calls", timeout=10).json()
    check(calls["total"] == 0, "counters reset")
    listed = [wire(v)["name"] for v in compute.virtual_machines.list(RG)]
    calls = requests.get(f"{fake}/_admin/calls", timeout=10).json()
    check(calls["calls"].get("virtualMachines.list") == 2, f"two pages fetched: {calls}")

    # Generic resource list with a tag filter (VMs, NICs, implicit disks are untagged).
    found = [
        wire(r)
        for r in resources.resources.list_by_resource_group(RG, filter=f"tagName eq '{CLUSTER_TAG}' and tagValue eq '1'")
    ]
    kinds = sorted((r["type"], r["name"]) for r in found)
    check(len(found) == 6, f"tag filter results: {kinds}")
    check(("Microsoft.Network/networkInterfaces", "py-vm-1-nic") in kinds, f"nic listed: {kinds}")
    check(all(r.get("tags") is None for r in found), "a tag-filtered list carries no tags (as ARM)")
    only_name = list(resources.resources.list_by_resource_group(RG, filter="tagName eq 'machine'"))
    check(len(only_name) == 6, f"tagName-only filter: {len(only_name)}")
    by_type = [
        wire(r)
        for r in resources.resources.list_by_resource_group(
            RG, filter="resourceType eq 'Microsoft.Network/networkInterfaces' or resourceType eq 'Microsoft.Compute/virtualMachines'"
        )
    ]
    check(by_type and all(r["type"] in ("Microsoft.Network/networkInterfaces", "Microsoft.Compute/virtualMachines") for r in by_type), f"type filter: {by_type}")
    check(any(r.get("tags") for r in by_type), "a type-filtered list carries the tags")

    check_expand_and_resource_graph(fake, cred, resources, names)

    # Missing VM: 404 ResourceNotFound through the SDK's error mapping.
    err = expect_error(lambda: compute.virtual_machines.get(RG, "absent"), 404, "ResourceNotFound", "missing vm")
    check(isinstance(err, ResourceNotFoundError), "404 maps to ResourceNotFoundError")

    # Throttle fault: 429 TooManyRequests with Retry-After.
    admin(fake, "faults", {"operation": "virtualMachines.get", "kind": "throttle", "times": 1})
    err = expect_error(lambda: compute.virtual_machines.get(RG, names[0]), 429, "TooManyRequests", "throttle")
    check(err.response.headers.get("Retry-After") == "1", "Retry-After on throttle")
    check(compute.virtual_machines.get(RG, names[0]) is not None, "fault consumed after one call")

    # Queued AllocationFailed: the LRO fails with the code; the VM stays in Failed.
    admin(fake, "azure/vm-failures", {"code": "AllocationFailed", "times": 1})
    nic = wire(network.network_interfaces.begin_create_or_update(RG, "py-fail-nic", nic_body("py-fail")).result())
    poller = compute.virtual_machines.begin_create_or_update(RG, "py-fail", vm_body("py-fail", nic["id"]))
    err = expect_error(poller.result, 200, "AllocationFailed", "allocation failure through the LRO")
    failed = wire(compute.virtual_machines.get(RG, "py-fail"))
    check(failed["properties"]["provisioningState"] == "Failed", f"failed vm stays: {failed['properties']}")

    check_nic_configurations_and_create_only(compute, network)
    check_images_identity_and_tags(compute, resources)

    # Delete with cascade: the NIC and disks with deleteOption Delete go with the VM.
    compute.virtual_machines.begin_delete(RG, names[2]).result()
    expect_error(lambda: compute.virtual_machines.get(RG, names[2]), 404, "ResourceNotFound", "deleted vm")
    expect_error(
        lambda: network.network_interfaces.get(RG, f"{names[2]}-nic"), 404, "ResourceNotFound", "nic cascaded"
    )
    expect_error(lambda: compute.disks.get(RG, f"{names[2]}-os-disk"), 404, "ResourceNotFound", "os disk cascaded")
    compute.virtual_machines.begin_delete(RG, "py-fail").result()

    # Disks: create (202 + Location/Azure-AsyncOperation), get, list, refuse delete while attached, delete.
    disk = wire(
        compute.disks.begin_create_or_update(
            RG,
            "py-disk",
            {
                "location": LOCATION,
                "sku": {"name": "Premium_LRS"},
                "tags": {"machine": "py-disk"},
                "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": 20},
            },
        ).result()
    )
    check(disk["properties"]["provisioningState"] == "Succeeded", f"disk after LRO: {disk}")
    check(disk["properties"]["diskSizeGB"] == 20 and disk["sku"]["name"] == "Premium_LRS", f"disk body {disk}")
    disk_names = sorted(wire(d)["name"] for d in compute.disks.list_by_resource_group(RG))
    check("py-disk" in disk_names and f"{names[0]}-os-disk" in disk_names, f"disk list {disk_names}")
    expect_error(
        lambda: compute.disks.begin_delete(RG, f"{names[0]}-os-disk").result(),
        409,
        "OperationNotAllowed",
        "attached disk delete",
    )
    # Disks - Update: an LRO the SDK's poller follows to the updated disk; a shrink refused (400).
    grown = wire(compute.disks.begin_update(RG, "py-disk", {"properties": {"diskSizeGB": 40}}).result())
    check(grown["properties"]["diskSizeGB"] == 40, f"disk after update LRO: {grown}")
    check(wire(compute.disks.get(RG, "py-disk"))["properties"]["diskSizeGB"] == 40, "the GET shows the update")
    expect_error(
        lambda: compute.disks.begin_update(RG, "py-disk", {"properties": {"diskSizeGB": 10}}).result(),
        400,
        "BadRequest",
        "disk shrink",
    )
    compute.disks.begin_delete(RG, "py-disk").result()
    expect_error(lambda: compute.disks.get(RG, "py-disk"), 404, "ResourceNotFound", "deleted disk")

    # Gallery direct sharing: owner Add (LRO), consumer sees the version; Remove hides it again.
    unique = f"{OWNER_SUBSCRIPTION_ID}-GARDENLINUX"
    expect_error(
        lambda: compute.shared_gallery_image_versions.get(LOCATION, unique, "gardenlinux", "1.0.0"),
        404,
        "ResourceNotFound",
        "not yet shared",
    )
    share = {"operationType": "Add", "groups": [{"type": "Subscriptions", "ids": [SUBSCRIPTION_ID]}]}
    result = wire(owner_compute.gallery_sharing_profile.begin_update("images", "gardenlinux", share).result())
    check(result["groups"][0]["ids"] == [SUBSCRIPTION_ID], f"share result {result}")
    gallery = wire(owner_compute.galleries.get("images", "gardenlinux"))
    groups = gallery["properties"]["sharingProfile"]["groups"]
    check(groups == [{"type": "Subscriptions", "ids": [SUBSCRIPTION_ID]}], f"gallery groups {groups}")
    shared = wire(compute.shared_gallery_image_versions.get(LOCATION, unique, "gardenlinux", "1.0.0"))
    check(
        shared["identifier"]["uniqueId"] == f"/SharedGalleries/{unique}/Images/gardenlinux/Versions/1.0.0",
        f"shared version {shared}",
    )
    image = {"sharedGalleryImageId": f"/SharedGalleries/{unique}/Images/gardenlinux/Versions/1.0.0"}
    nic = wire(network.network_interfaces.begin_create_or_update(RG, "py-shared-nic", nic_body("py-shared")).result())
    shared_vm = wire(
        compute.virtual_machines.begin_create_or_update(RG, "py-shared", vm_body("py-shared", nic["id"], image)).result()
    )
    check(shared_vm["properties"]["provisioningState"] == "Succeeded", "vm from the shared gallery image")
    share["operationType"] = "Remove"
    owner_compute.gallery_sharing_profile.begin_update("images", "gardenlinux", share).result()
    expect_error(
        lambda: compute.shared_gallery_image_versions.get(LOCATION, unique, "gardenlinux", "1.0.0"),
        404,
        "ResourceNotFound",
        "unshared again",
    )
    # Cross-subscription access is refused.
    expect_error(lambda: compute.galleries.get("images", "gardenlinux"), 404, "ResourceGroupNotFound", "no such rg")
    cluster_on_owner = ComputeManagementClient(cred, OWNER_SUBSCRIPTION_ID, **kwargs)
    expect_error(
        lambda: cluster_on_owner.galleries.get("images", "gardenlinux"), 403, "AuthorizationFailed", "cross-sub"
    )

    print(f"crosscheck OK: {CHECKS} checks against {fake}")


if __name__ == "__main__":
    main()
