#!/usr/bin/env python3
"""Cross-checks fake-ecs against Alibaba Cloud's official Python SDKs.

Usage: crosscheck.py FAKE_URL   (e.g. http://127.0.0.1:8091)

Two independent clients are the oracles for the wire protocol:

- V3: alibabacloud-ecs20140526 / alibabacloud-sts20150401 on alibabacloud-tea-openapi,
  signing every request with ACS3-HMAC-SHA256 (Authorization header over the method,
  path, sorted query, all request headers and the body hash).
- V1: aliyun-python-sdk-ecs on aliyun-python-sdk-core, signing with HMAC-SHA1
  (Signature query parameter); STS through core's CommonRequest.

Both parse the fake's JSON answers into their models and its error bodies into their
exceptions (V3: ClientException/ServerException `.code`/`.status_code`; V1:
ServerException `get_error_code()`/`get_http_status()`). Every result is asserted; any
mismatch exits non-zero.
"""

import base64
import json
import sys
import time
import uuid
from urllib.parse import urlparse

import requests
from alibabacloud_ecs20140526 import models as ecs_models
from alibabacloud_ecs20140526.client import Client as EcsClient
from alibabacloud_sts20150401.client import Client as StsClient
from alibabacloud_tea_openapi.models import Config
from alibabacloud_tea_util.models import RuntimeOptions
from aliyunsdkcore.acs_exception.exceptions import ServerException
from aliyunsdkcore.client import AcsClient
from aliyunsdkcore.request import CommonRequest
from aliyunsdkecs.request.v20140526.DeleteInstanceRequest import DeleteInstanceRequest
from aliyunsdkecs.request.v20140526.DescribeImageSharePermissionRequest import DescribeImageSharePermissionRequest
from aliyunsdkecs.request.v20140526.DescribeImagesRequest import DescribeImagesRequest
from aliyunsdkecs.request.v20140526.DescribeInstancesRequest import DescribeInstancesRequest
from aliyunsdkecs.request.v20140526.ModifyImageSharePermissionRequest import ModifyImageSharePermissionRequest
from aliyunsdkecs.request.v20140526.RunInstancesRequest import RunInstancesRequest

ACCOUNT_ID = "5123456789012345"
ACCESS_KEY_ID = "LTAI5tFakeClusterKey0001"
ACCESS_KEY_SECRET = "fake-cluster-access-key-secret"
OWNER_ACCOUNT_ID = "5987654321098765"
OWNER_ACCESS_KEY_ID = "LTAI5tFakeOwnerKey000001"
OWNER_ACCESS_KEY_SECRET = "fake-owner-access-key-secret"
REGION = "eu-central-1"
ZONE = "eu-central-1a"
SECURITY_GROUP = "sg-gw8fake0000000000001"
VSWITCH = "vsw-gw8fake000000000001"
PUBLIC_IMAGE = "ubuntu_24_04_x64_20G_alibase_20250101.vhd"
ALLOWED_IMAGE = "m-gw8fakeallowed000001"
NOT_ALLOWED_IMAGE = "m-gw8fakenotallowed001"
CLUSTER_TAG = "kubernetes.io/cluster/shoot--dev--conf"
ROLE_TAG = "kubernetes.io/role/node"
USER_DATA = base64.b64encode(b"#cloud-config\nruncmd: [echo, hi]\n").decode()

CLUSTER = (ACCESS_KEY_ID, ACCESS_KEY_SECRET)
OWNER = (OWNER_ACCESS_KEY_ID, OWNER_ACCESS_KEY_SECRET)
NO_RETRY = RuntimeOptions(autoretry=False, max_attempts=0)

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


# --- clients -----------------------------------------------------------------------------


def v3_config(endpoint, identity):
    ak, secret = identity
    return Config(access_key_id=ak, access_key_secret=secret, endpoint=endpoint, protocol="http", region_id=REGION)


def v3_ecs(endpoint, identity):
    return EcsClient(v3_config(endpoint, identity))


def v3_sts(endpoint, identity):
    return StsClient(v3_config(endpoint, identity))


def v3_error(call):
    """Runs a V3 call that must fail; returns (status_code, code)."""
    try:
        call()
    except Exception as error:  # ClientException / ServerException of alibabacloud_tea_openapi
        return getattr(error, "status_code", None), getattr(error, "code", None)
    check(False, "the V3 call unexpectedly succeeded")
    return None, None


class V1:
    """aliyun-python-sdk-core against the fake: endpoint and plain http on every request."""

    def __init__(self, endpoint, identity):
        self.endpoint = endpoint
        self.client = AcsClient(identity[0], identity[1], REGION, auto_retry=False, max_retry_time=0)

    def call(self, request):
        request.set_endpoint(self.endpoint)
        request.set_protocol_type("http")
        request.set_accept_format("JSON")
        return json.loads(self.client.do_action_with_exception(request))

    def error(self, request):
        """Runs a call that must fail; returns (http status, error code)."""
        try:
            self.call(request)
        except ServerException as error:
            return error.get_http_status(), error.get_error_code()
        check(False, "the V1 call unexpectedly succeeded")
        return None, None

    def caller_identity(self):
        request = CommonRequest(domain=self.endpoint, version="2015-04-01", action_name="GetCallerIdentity")
        request.set_method("POST")
        request.set_protocol_type("http")
        request.set_accept_format("JSON")
        return json.loads(self.client.do_action_with_exception(request))


# --- helpers -------------------------------------------------------------------------------


def v3_run(ecs, name, token, tags, image=PUBLIC_IMAGE):
    request = ecs_models.RunInstancesRequest(
        region_id=REGION,
        zone_id=ZONE,
        image_id=image,
        instance_type="ecs.g7.large",
        security_group_id=SECURITY_GROUP,
        v_switch_id=VSWITCH,
        instance_name=name,
        instance_charge_type="PostPaid",
        internet_charge_type="PayByTraffic",
        internet_max_bandwidth_in=5,
        internet_max_bandwidth_out=5,
        spot_strategy="NoSpot",
        io_optimized="optimized",
        user_data=USER_DATA,
        client_token=token,
        system_disk=ecs_models.RunInstancesRequestSystemDisk(category="cloud_essd", size="50"),
        data_disk=[
            ecs_models.RunInstancesRequestDataDisk(
                category="cloud_essd",
                size=100,
                encrypted="true",
                disk_name=f"{name}-data-data-disk",
                description="data",
                delete_with_instance=True,
            )
        ],
        tag=[ecs_models.RunInstancesRequestTag(key=k, value=v) for k, v in tags],
    )
    return ecs.run_instances_with_options(request, NO_RETRY).body


def v1_run_request(name, token, tags, image=PUBLIC_IMAGE):
    request = RunInstancesRequest()
    request.add_query_param("RegionId", REGION)
    request.set_ZoneId(ZONE)
    request.set_ImageId(image)
    request.set_InstanceType("ecs.c7.large")
    request.set_SecurityGroupId(SECURITY_GROUP)
    request.set_VSwitchId(VSWITCH)
    request.set_InstanceName(name)
    request.set_UserData(USER_DATA)
    request.set_ClientToken(token)
    request.set_SystemDiskCategory("cloud_essd")
    request.set_SystemDiskSize(40)
    request.set_DataDisks([{"Category": "cloud_efficiency", "Size": 40, "Encrypted": False, "DiskName": f"{name}-d1"}])
    request.set_Tags([{"Key": k, "Value": v} for k, v in tags])
    return request


def v3_describe(ecs, **kwargs):
    request = ecs_models.DescribeInstancesRequest(region_id=REGION, **kwargs)
    return ecs.describe_instances_with_options(request, NO_RETRY).body


def v3_status(ecs, instance_id):
    body = v3_describe(ecs, instance_ids=json.dumps([instance_id]))
    instances = body.instances.instance or []
    return instances[0].status if instances else "gone"


def wait_status(ecs, instance_id, status):
    seen = []
    for _ in range(300):
        now = v3_status(ecs, instance_id)
        if not seen or seen[-1] != now:
            seen.append(now)
        if now == status:
            return seen
        time.sleep(0.02)
    check(False, f"{instance_id} never reached {status}: {seen}")
    return seen


def v3_delete(ecs, instance_id, force):
    return ecs.delete_instance_with_options(
        ecs_models.DeleteInstanceRequest(instance_id=instance_id, force=force), NO_RETRY
    )


def v1_delete_request(instance_id, force):
    request = DeleteInstanceRequest()
    request.set_InstanceId(instance_id)
    request.set_Force(force)
    return request


def v3_images(ecs, **kwargs):
    return ecs.describe_images_with_options(ecs_models.DescribeImagesRequest(region_id=REGION, **kwargs), NO_RETRY).body


def v1_images_request(**params):
    request = DescribeImagesRequest()
    request.add_query_param("RegionId", REGION)
    for key, value in params.items():
        request.add_query_param(key, value)
    return request


# --- scenarios -----------------------------------------------------------------------------


def caller_identity(endpoint):
    for identity, account in ((CLUSTER, ACCOUNT_ID), (OWNER, OWNER_ACCOUNT_ID)):
        body = v3_sts(endpoint, identity).get_caller_identity().body
        check(body.account_id == account, f"V3 GetCallerIdentity account: {body.account_id}")
        check(body.arn == f"acs:ram::{account}:root", f"V3 arn: {body.arn}")
        check(body.identity_type == "Account", f"V3 identity type: {body.identity_type}")
        check(body.principal_id == account and body.user_id == account, "V3 principal/user id")
        check(bool(body.request_id), "V3 RequestId")
        body = V1(endpoint, identity).caller_identity()
        check(body["AccountId"] == account, f"V1 GetCallerIdentity: {body}")


def run_and_idempotency(fake, endpoint):
    ecs = v3_ecs(endpoint, CLUSTER)
    v1 = V1(endpoint, CLUSTER)
    tags = [(CLUSTER_TAG, "1"), (ROLE_TAG, "1")]

    # V3: ClientToken replay returns the same instance, a changed request with it is refused.
    token = str(uuid.uuid4())
    first = v3_run(ecs, "v3-machine-0", token, tags)
    ids = first.instance_id_sets.instance_id_set
    check(len(ids) == 1 and ids[0].startswith("i-") and len(ids[0]) == 22, f"V3 RunInstances ids: {ids}")
    check(first.trade_price == 0 and bool(first.order_id) and bool(first.request_id), "V3 RunInstances answer")
    again = v3_run(ecs, "v3-machine-0", token, tags)
    check(again.instance_id_sets.instance_id_set == ids, "V3 ClientToken replay answers the same id")
    status, code = v3_error(lambda: v3_run(ecs, "v3-machine-changed", token, tags))
    check((status, code) == (400, "IdempotentParameterMismatch"), f"V3 token mismatch: {status} {code}")

    # V1: the same through the classic SDK.
    token1 = str(uuid.uuid4())
    body = v1.call(v1_run_request("v1-machine-0", token1, tags))
    v1_ids = body["InstanceIdSets"]["InstanceIdSet"]
    check(len(v1_ids) == 1, f"V1 RunInstances: {body}")
    body = v1.call(v1_run_request("v1-machine-0", token1, tags))
    check(body["InstanceIdSets"]["InstanceIdSet"] == v1_ids, "V1 ClientToken replay answers the same id")
    check(
        v1.error(v1_run_request("v1-machine-changed", token1, tags)) == (400, "IdempotentParameterMismatch"),
        "V1 token mismatch",
    )

    # The instance as DescribeInstances shows it (V3 model).
    instance = v3_describe(ecs, instance_ids=json.dumps(ids)).instances.instance[0]
    check(instance.instance_id == ids[0] and instance.instance_name == "v3-machine-0", "V3 describe by id")
    check(instance.status in ("Pending", "Starting"), f"fresh instance status: {instance.status}")
    check(instance.zone_id == ZONE and instance.region_id == REGION, "zone/region")
    check(instance.instance_type == "ecs.g7.large" and instance.image_id == PUBLIC_IMAGE, "type/image")
    check(instance.vpc_attributes.v_switch_id == VSWITCH, "vswitch")
    check(instance.vpc_attributes.private_ip_address.ip_address == ["10.250.0.10"], "first private IP")
    check(instance.security_group_ids.security_group_id == [SECURITY_GROUP], "security groups")
    check({(t.tag_key, t.tag_value) for t in instance.tags.tag} == set(tags), "tags")
    check(instance.host_name == f"iz{ids[0][2:]}z", f"host name: {instance.host_name}")

    inventory = admin(fake, "inventory", method="GET")
    entries = {i["id"]: i for i in inventory["instances"]}
    check(set(entries) == {ids[0], v1_ids[0]}, f"inventory ids: {sorted(entries)}")
    check(entries[ids[0]]["user_data"] == USER_DATA, "inventory user_data as sent")
    check(entries[ids[0]]["data_disks"][0]["encrypted"] is True, "V3 data disk encrypted")
    check(entries[ids[0]]["data_disks"][0]["size"] == 100, "V3 data disk size")
    check(entries[v1_ids[0]]["data_disks"][0]["category"] == "cloud_efficiency", "V1 data disk category")
    check(entries[v1_ids[0]]["tags"] == dict(tags), "V1 tags")
    check(entries[v1_ids[0]]["client_token"] == token1, "V1 client token")

    seen = wait_status(ecs, ids[0], "Running")
    check(seen[0] in ("Pending", "Starting") and seen[-1] == "Running", f"lifecycle: {seen}")
    wait_status(ecs, v1_ids[0], "Running")
    return ids[0], v1_ids[0]


def describe_paging(endpoint, existing):
    ecs = v3_ecs(endpoint, CLUSTER)
    v1 = V1(endpoint, CLUSTER)
    tags = [(CLUSTER_TAG, "1"), (ROLE_TAG, "1")]
    created = [v3_run(ecs, f"v3-machine-{n}", str(uuid.uuid4()), tags).instance_id_sets.instance_id_set[0] for n in (1, 2)]
    untagged = v3_run(ecs, "untagged", str(uuid.uuid4()), []).instance_id_sets.instance_id_set[0]
    tagged = list(existing) + created  # creation order

    # V3: NextToken/MaxResults paging with a tag filter (key and value).
    tag_filter = [ecs_models.DescribeInstancesRequestTag(key=CLUSTER_TAG, value="1")]
    seen, token, pages = [], None, 0
    while True:
        body = v3_describe(ecs, tag=tag_filter, max_results=2, next_token=token)
        pages += 1
        check(body.total_count == 4, f"V3 TotalCount by tag: {body.total_count}")
        seen += [i.instance_id for i in body.instances.instance]
        token = body.next_token
        if not token:
            break
    check(pages == 2 and seen == tagged, f"V3 NextToken paging: {pages} pages, {seen} vs {tagged}")

    # V1: PageNumber/PageSize paging with the same tag filter.
    seen = []
    for page in (1, 2, 3):
        request = DescribeInstancesRequest()
        request.add_query_param("RegionId", REGION)
        request.set_PageSize(2)
        request.set_PageNumber(page)
        request.set_Tags([{"Key": CLUSTER_TAG, "Value": "1"}])
        body = v1.call(request)
        check(body["TotalCount"] == 4 and body["PageNumber"] == page, f"V1 page {page}: {body['TotalCount']}")
        seen += [i["InstanceId"] for i in body["Instances"]["Instance"]]
    check(seen == tagged, f"V1 PageNumber paging: {seen}")

    # V1: NextToken from a first page without NextToken (the Go provider's loop), PageSize 2.
    seen, token = [], None
    while True:
        request = DescribeInstancesRequest()
        request.add_query_param("RegionId", REGION)
        request.set_PageSize(2)
        if token:
            request.set_NextToken(token)
        body = v1.call(request)
        seen += [i["InstanceId"] for i in body["Instances"]["Instance"]]
        token = body["NextToken"]
        if not token:
            break
    check(seen == tagged + [untagged], f"V1 NextToken paging over all: {seen}")

    # By ids, a tag key without value, by name; the other account sees none of them.
    request = DescribeInstancesRequest()
    request.add_query_param("RegionId", REGION)
    request.set_InstanceIds(json.dumps([tagged[0], untagged, "i-gw8doesnotexist00000"]))
    body = v1.call(request)
    check(sorted(i["InstanceId"] for i in body["Instances"]["Instance"]) == sorted([tagged[0], untagged]), "V1 by ids")
    body = v3_describe(ecs, tag=[ecs_models.DescribeInstancesRequestTag(key=ROLE_TAG)], page_size=50)
    check(body.total_count == 4, f"tag key without value: {body.total_count}")
    body = v3_describe(ecs, instance_name="v3-machine-2")
    check([i.instance_id for i in body.instances.instance] == [created[1]], "by InstanceName")
    body = v3_describe(v3_ecs(endpoint, OWNER))
    check(body.total_count == 0, "the owner account does not see the cluster's instances")
    return tagged + [untagged]


def delete_rules(fake, endpoint, running):
    ecs = v3_ecs(endpoint, CLUSTER)
    v1 = V1(endpoint, CLUSTER)
    admin(fake, "timing", {"boot_ms": 600, "stop_ms": 300})
    fresh = v3_run(ecs, "to-delete", str(uuid.uuid4()), []).instance_id_sets.instance_id_set[0]
    check(v3_error(lambda: v3_delete(ecs, fresh, True)) == (403, "IncorrectInstanceStatus"), "V3 delete Pending")
    check(v1.error(v1_delete_request(fresh, True)) == (403, "IncorrectInstanceStatus"), "V1 delete Pending")
    # Running without Force.
    check(v3_error(lambda: v3_delete(ecs, running[0], False)) == (403, "IncorrectInstanceStatus"), "V3 no Force")
    check(v1.error(v1_delete_request(running[1], False)) == (403, "IncorrectInstanceStatus"), "V1 no Force")
    # Running with Force: Stopping, refused again, then gone.
    body = v3_delete(ecs, running[0], True).body
    check(bool(body.request_id), "V3 DeleteInstance answer")
    check(v3_status(ecs, running[0]) == "Stopping", "Stopping after delete")
    check(v3_error(lambda: v3_delete(ecs, running[0], True)) == (403, "IncorrectInstanceStatus"), "delete Stopping")
    body = v1.call(v1_delete_request(running[1], True))
    check("RequestId" in body, f"V1 DeleteInstance: {body}")
    wait_status(ecs, running[0], "gone")
    wait_status(ecs, running[1], "gone")
    check(v3_error(lambda: v3_delete(ecs, running[0], True)) == (404, "InvalidInstanceId.NotFound"), "V3 gone")
    check(v1.error(v1_delete_request(running[1], True)) == (404, "InvalidInstanceId.NotFound"), "V1 gone")
    inventory = admin(fake, "inventory", method="GET")
    states = {i["id"]: (i["state"], i["live"]) for i in inventory["instances"]}
    check(states[running[0]] == ("Deleted", False), f"inventory keeps deleted: {states[running[0]]}")


def image_sharing(endpoint):
    cluster3, owner3 = v3_ecs(endpoint, CLUSTER), v3_ecs(endpoint, OWNER)
    cluster1, owner1 = V1(endpoint, CLUSTER), V1(endpoint, OWNER)

    body = v3_images(cluster3)
    check([i.image_id for i in body.images.image] == [PUBLIC_IMAGE], "cluster sees only the system image")
    check(body.images.image[0].image_owner_alias == "system" and body.images.image[0].is_public, "system image")
    check(v3_images(cluster3, image_id=ALLOWED_IMAGE).total_count == 0, "unshared image invisible (V3)")
    check(cluster1.call(v1_images_request(ImageId=ALLOWED_IMAGE))["TotalCount"] == 0, "unshared image invisible (V1)")
    body = owner1.call(v1_images_request(ImageOwnerAlias="self"))
    check(
        sorted(i["ImageId"] for i in body["Images"]["Image"]) == sorted([ALLOWED_IMAGE, NOT_ALLOWED_IMAGE]),
        f"owner's own images: {body}",
    )
    status, code = v3_error(lambda: v3_run(cluster3, "no-image", str(uuid.uuid4()), [], image=ALLOWED_IMAGE))
    check((status, code) == (404, "InvalidImageId.NotFound"), f"launch unshared: {status} {code}")

    # Only the owner may share.
    status, code = v3_error(
        lambda: cluster3.modify_image_share_permission_with_options(
            ecs_models.ModifyImageSharePermissionRequest(
                region_id=REGION, image_id=ALLOWED_IMAGE, add_account=[ACCOUNT_ID]
            ),
            NO_RETRY,
        )
    )
    check((status, code) == (404, "InvalidImageId.NotFound"), f"consumer shares: {status} {code}")

    # Share (V3); adding again is a no-op; the consumer sees it as `others` and launches it.
    share = ecs_models.ModifyImageSharePermissionRequest(region_id=REGION, image_id=ALLOWED_IMAGE, add_account=[ACCOUNT_ID])
    check(bool(owner3.modify_image_share_permission_with_options(share, NO_RETRY).body.request_id), "V3 share")
    owner3.modify_image_share_permission_with_options(share, NO_RETRY)
    body = cluster1.call(v1_images_request(ImageId=ALLOWED_IMAGE))
    check(body["TotalCount"] == 1 and body["Images"]["Image"][0]["ImageOwnerAlias"] == "others", f"shared: {body}")
    check(v3_images(cluster3, image_owner_alias="others").total_count == 1, "V3 alias filter others")
    check(v3_images(cluster3, image_id=NOT_ALLOWED_IMAGE).total_count == 0, "the other image stays private")
    launched = cluster1.call(v1_run_request("from-shared", str(uuid.uuid4()), [], image=ALLOWED_IMAGE))
    check(len(launched["InstanceIdSets"]["InstanceIdSet"]) == 1, "consumer launches the shared image")

    body = owner3.describe_image_share_permission_with_options(
        ecs_models.DescribeImageSharePermissionRequest(region_id=REGION, image_id=ALLOWED_IMAGE), NO_RETRY
    ).body
    check([a.aliyun_id for a in body.accounts.account] == [ACCOUNT_ID], "V3 DescribeImageSharePermission")
    check(body.image_id == ALLOWED_IMAGE and body.total_count == 1, "V3 share permission fields")
    request = DescribeImageSharePermissionRequest()
    request.add_query_param("RegionId", REGION)
    request.set_ImageId(ALLOWED_IMAGE)
    body = owner1.call(request)
    check(body["Accounts"]["Account"] == [{"AliyunId": ACCOUNT_ID}], f"V1 DescribeImageSharePermission: {body}")
    check(cluster1.error(request) == (404, "InvalidImageId.NotFound"), "consumer reads share permission")

    # Revoke (V1): the consumer can neither see nor launch it.
    request = ModifyImageSharePermissionRequest()
    request.add_query_param("RegionId", REGION)
    request.set_ImageId(ALLOWED_IMAGE)
    request.set_RemoveAccounts([ACCOUNT_ID])
    owner1.call(request)
    check(v3_images(cluster3, image_id=ALLOWED_IMAGE).total_count == 0, "revoked image invisible")
    check(
        cluster1.error(v1_run_request("revoked", str(uuid.uuid4()), [], image=ALLOWED_IMAGE))
        == (404, "InvalidImageId.NotFound"),
        "revoked image not launchable",
    )
    body = owner3.describe_image_share_permission_with_options(
        ecs_models.DescribeImageSharePermissionRequest(region_id=REGION, image_id=ALLOWED_IMAGE), NO_RETRY
    ).body
    check((body.accounts.account or []) == [] and body.total_count == 0, "share list empty after revoke")


def faults_and_signatures(fake, endpoint):
    ecs = v3_ecs(endpoint, CLUSTER)
    v1 = V1(endpoint, CLUSTER)
    admin(fake, "calls/reset")
    admin(fake, "faults", {"operation": "DescribeInstances", "kind": "throttle", "times": 2})
    check(v3_error(lambda: v3_describe(ecs)) == (400, "Throttling.User"), "V3 throttle fault")
    request = DescribeInstancesRequest()
    request.add_query_param("RegionId", REGION)
    check(v1.error(request) == (400, "Throttling.User"), "V1 throttle fault")
    check(v3_describe(ecs).request_id, "calls pass once the fault is used up")
    calls = admin(fake, "calls", method="GET")
    check(calls["calls"].get("DescribeInstances") == 3, f"throttled calls are counted, no SDK retries: {calls}")

    admin(fake, "faults", {"operation": "create", "kind": "capacity", "times": 1})
    status, code = v3_error(lambda: v3_run(ecs, "no-stock", str(uuid.uuid4()), []))
    check((status, code) == (403, "OperationDenied.NoStock"), f"capacity fault: {status} {code}")
    admin(fake, "faults", {"operation": "create", "kind": "placement", "times": 1})
    status, code = v3_error(lambda: v3_run(ecs, "not-on-sale", str(uuid.uuid4()), []))
    check((status, code) == (403, "Zone.NotOnSale"), f"placement fault: {status} {code}")

    # Wrong secrets: refused before the call gate (not counted in /_admin/calls).
    wrong3 = v3_ecs(endpoint, (ACCESS_KEY_ID, "not-the-secret"))
    check(v3_error(lambda: v3_describe(wrong3)) == (400, "SignatureDoesNotMatch"), "V3 wrong secret")
    wrong1 = V1(endpoint, (ACCESS_KEY_ID, "not-the-secret"))
    # aliyun-python-sdk-core compares the server's string to sign (from the message) with its
    # own and, when they are equal, reports InvalidAccessKeySecret: the fake's V1 canonical
    # string is byte-identical to the SDK's.
    request = DescribeInstancesRequest()
    request.add_query_param("RegionId", REGION)
    check(wrong1.error(request) == (400, "InvalidAccessKeySecret"), "V1 wrong secret (same string to sign)")
    unknown = v3_ecs(endpoint, ("LTAI5tNobodyKey", "x"))
    check(v3_error(lambda: v3_describe(unknown)) == (404, "InvalidAccessKeyId.NotFound"), "unknown AccessKey")
    calls = admin(fake, "calls", method="GET")
    check(calls["total"] == 5, f"refused signatures are not calls: {calls}")
    refused = admin(fake, "ecs/refused", method="GET")
    check(refused["refused"].get("SignatureDoesNotMatch") == 2, f"refusals counted: {refused}")


def main():
    fake = sys.argv[1].rstrip("/")
    endpoint = urlparse(fake).netloc
    admin(fake, "reset")
    admin(fake, "timing", {"boot_ms": 300, "stop_ms": 300})
    caller_identity(endpoint)
    running = run_and_idempotency(fake, endpoint)
    describe_paging(endpoint, running)
    delete_rules(fake, endpoint, running)
    image_sharing(endpoint)
    faults_and_signatures(fake, endpoint)
    admin(fake, "reset")
    print(f"fake-ecs crosscheck: {CHECKS} checks passed")


if __name__ == "__main__":
    main()
