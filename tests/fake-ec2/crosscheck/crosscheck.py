#!/usr/bin/env python3
"""Cross-checks fake-ec2 against AWS's official Python SDK (boto3 / botocore).

Usage: crosscheck.py FAKE_URL   (e.g. http://127.0.0.1:4566)

botocore is the oracle for the wire protocol: it serializes every request the EC2 way
(`InstanceId.1`, `Filter.1.Value.1`, `NetworkInterface.1.Ipv6PrefixCount`, base64
`UserData`, an automatic `ClientToken`), signs it with SigV4 (the fake reads the access
key id and region from the credential scope), and parses the fake's XML answers against
the EC2 and STS service models: element names, types (booleans, integers, timestamps),
lists (`item`), the EC2 error document (`Response/Errors/Error`, `RequestID`) and the STS
one (`ErrorResponse/Error`). Paginators and waiters come from botocore's own data files.
Retries are off unless a check is about them. Every result is asserted field by field;
one line is printed per check, and any mismatch makes the script exit non-zero.
The admin API (`/_admin`) is driven with urllib.
"""

import base64
import datetime
import ipaddress
import json
import os
import re
import sys
import time
import uuid

# No shared config, credential files or instance metadata: everything is explicit below.
os.environ["AWS_CONFIG_FILE"] = os.devnull
os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
for _name in list(os.environ):
    if _name.startswith("AWS_ENDPOINT_URL") or _name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        del os.environ[_name]

import boto3  # noqa: E402
from botocore import UNSIGNED  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402
from crosscheck_support import Run, admin, check, equal  # noqa: E402

REGION = "eu-west-1"
ZONE = "eu-west-1a"
OWNER_KEY = "AKIDOWNER"
OWNER_ACCOUNT = "111111111111"
CLUSTER_KEY = "AKIDCLUSTER"
CLUSTER_ACCOUNT = "222222222222"
SECRET = "any-secret-the-fake-does-not-verify"
PUBLIC_IMAGE = "ami-0123456789abcdef0"
PUBLIC_IMAGE_2 = "ami-0f1e2d3c4b5a69788"
PRIVATE_IMAGE = "ami-0000000000000a11d"
PRIVATE_SNAPSHOT = "snap-0000000000000a11d"
SUBNET = "subnet-0a1b2c3d4e5f60718"
SECURITY_GROUP = "sg-0a1b2c3d4e5f60718"
UNKNOWN_INSTANCE = "i-0fffffffffffffff0"
CLUSTER_TAG = "kubernetes.io/cluster/shoot--dev--crosscheck"
ROLE_TAG = "kubernetes.io/role/node"
USER_DATA = "#cloud-config\nruncmd: [echo, crosscheck]\n"
PROFILE_ARN = f"arn:aws:iam::{CLUSTER_ACCOUNT}:instance-profile/shoot--dev--crosscheck-nodes"

NO_RETRY = {"total_max_attempts": 1, "mode": "standard"}


# --- admin API ---------------------------------------------------------------------------


def inventory(fake):
    return {i["id"]: i for i in admin(fake, "inventory", method="GET")["instances"]}


# --- clients -----------------------------------------------------------------------------


CLIENTS = {}
# One botocore session for every client: its loader parses the service models once.
SESSION = boto3.session.Session()


def cached(make):
    """One client per distinct set of arguments."""

    def client(*args, **kwargs):
        key = (make.__name__, args, repr(sorted(kwargs.items())))
        if key not in CLIENTS:
            CLIENTS[key] = make(*args, **kwargs)
        return CLIENTS[key]

    return client


@cached
def ec2(fake, key=CLUSTER_KEY, secret=SECRET, token=None, retries=None, **config):
    return SESSION.client(
        "ec2",
        endpoint_url=fake,
        region_name=REGION,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        aws_session_token=token,
        config=Config(retries=retries or NO_RETRY, connect_timeout=5, read_timeout=15, **config),
    )


@cached
def sts(fake, key=CLUSTER_KEY, secret=SECRET, token=None, **config):
    kwargs = {}
    if key is not None:
        kwargs = {"aws_access_key_id": key, "aws_secret_access_key": secret, "aws_session_token": token}
    return SESSION.client(
        "sts",
        endpoint_url=fake,
        region_name=REGION,
        config=Config(retries=NO_RETRY, connect_timeout=5, read_timeout=15, **config),
        **kwargs,
    )


def fails(call):
    """Runs a call that must fail; returns (HTTP status, error code, message, parsed response)."""
    try:
        call()
    except ClientError as error:
        response = error.response
        return (
            response["ResponseMetadata"].get("HTTPStatusCode"),
            response["Error"].get("Code"),
            response["Error"].get("Message", ""),
            response,
        )
    return None, "<no error>", "", {}


def expect_error(call, status, code, what):
    got_status, got_code, message, response = fails(call)
    ok = check(
        (got_status, got_code) == (status, code),
        (
            f"{what} → {got_status} {got_code} ({message})"
            if (got_status, got_code) == (status, code)
            else f"{what}: {got_status} {got_code} != {status} {code}"
        ),
    )
    return ok, message, response


def recent(timestamp, what, slack=120):
    now = datetime.datetime.now(datetime.timezone.utc)
    check(
        isinstance(timestamp, datetime.datetime)
        and timestamp.tzinfo is not None
        and abs((now - timestamp).total_seconds()) < slack,
        f"{what} is a recent tz-aware datetime: {timestamp!r}",
    )


def jwt(claims):
    def part(value):
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256', 'kid': 'crosscheck', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


def instances_of(response):
    return [i for r in response["Reservations"] for i in r["Instances"]]


def describe_one(client, instance_id):
    found = instances_of(client.describe_instances(InstanceIds=[instance_id]))
    return found[0] if len(found) == 1 else None


def state_of(client, instance_id):
    instance = describe_one(client, instance_id)
    return instance["State"]["Name"] if instance else "gone"


def wait_state(client, instance_id, wanted, seconds=10.0):
    seen = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        state = state_of(client, instance_id)
        if not seen or seen[-1] != state:
            seen.append(state)
        if state == wanted:
            break
        time.sleep(0.05)
    return seen


def run_args(**overrides):
    args = {
        "ImageId": PUBLIC_IMAGE,
        "InstanceType": "m5.large",
        "MinCount": 1,
        "MaxCount": 1,
        "UserData": USER_DATA,
        "Placement": {"AvailabilityZone": ZONE},
        "IamInstanceProfile": {"Arn": PROFILE_ARN},
        "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 2},
        "NetworkInterfaces": [
            {
                "DeviceIndex": 0,
                "SubnetId": SUBNET,
                "Groups": [SECURITY_GROUP],
                "Ipv6AddressCount": 1,
                "DeleteOnTermination": True,
                "Description": "primary",
            }
        ],
        "BlockDeviceMappings": [
            {
                "DeviceName": "/dev/xvda",
                "Ebs": {"VolumeSize": 50, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True},
            },
            {
                "DeviceName": "/dev/xvdb",
                "Ebs": {"VolumeSize": 100, "VolumeType": "io2", "Iops": 3000, "DeleteOnTermination": False},
            },
        ],
        "TagSpecifications": [
            {
                "ResourceType": "instance",
                "Tags": [
                    {"Key": "Name", "Value": "crosscheck-0"},
                    {"Key": CLUSTER_TAG, "Value": "1"},
                    {"Key": ROLE_TAG, "Value": "1"},
                ],
            },
            {"ResourceType": "volume", "Tags": [{"Key": CLUSTER_TAG, "Value": "1"}]},
            {"ResourceType": "network-interface", "Tags": [{"Key": CLUSTER_TAG, "Value": "1"}]},
        ],
    }
    args.update(overrides)
    return args


# --- scenarios ---------------------------------------------------------------------------


def caller_identity(fake):
    for key, account in ((CLUSTER_KEY, CLUSTER_ACCOUNT), (OWNER_KEY, OWNER_ACCOUNT)):
        out = sts(fake, key).get_caller_identity()
        equal(out["Account"], account, f"STS GetCallerIdentity {key} Account")
        check(
            re.fullmatch(rf"arn:aws:(iam|sts)::{account}:\S+", out["Arn"]) is not None,
            f"STS GetCallerIdentity {key} Arn in the account: {out['Arn']}",
        )
        check(bool(out["UserId"]), f"STS GetCallerIdentity {key} UserId: {out['UserId']}")
        meta = out["ResponseMetadata"]
        check(
            meta["HTTPStatusCode"] == 200 and meta["RequestId"] == meta["HTTPHeaders"].get("x-amzn-requestid"),
            f"STS RequestId from ResponseMetadata matches x-amzn-requestid: {meta['RequestId']}",
        )


def run_instances(fake):
    """RunInstances with everything the driver sends; ClientToken idempotency."""
    client = ec2(fake)
    token = str(uuid.uuid4())
    out = client.run_instances(ClientToken=token, **run_args())
    meta = out["ResponseMetadata"]
    check(
        meta["RequestId"] == meta["HTTPHeaders"].get("x-amzn-requestid"), "EC2 requestId parsed into ResponseMetadata"
    )
    check(re.fullmatch(r"r-[0-9a-f]{17}", out["ReservationId"]) is not None, f"ReservationId: {out['ReservationId']}")
    equal(out["OwnerId"], CLUSTER_ACCOUNT, "reservation OwnerId")
    equal(len(out["Instances"]), 1, "one instance launched")
    inst = out["Instances"][0]
    instance_id = inst["InstanceId"]
    check(re.fullmatch(r"i-[0-9a-f]{17}", instance_id) is not None, f"InstanceId: {instance_id}")
    equal(inst["ImageId"], PUBLIC_IMAGE, "ImageId")
    equal(inst["State"], {"Code": 0, "Name": "pending"}, "State at launch")
    equal(inst["InstanceType"], "m5.large", "InstanceType")
    equal(inst["AmiLaunchIndex"], 0, "AmiLaunchIndex")
    recent(inst["LaunchTime"], "LaunchTime")
    equal(inst["Placement"]["AvailabilityZone"], ZONE, "Placement.AvailabilityZone")
    equal(inst["ClientToken"], token, "ClientToken echoed")
    equal(inst["SubnetId"], SUBNET, "SubnetId")
    check(inst["VpcId"].startswith("vpc-"), f"VpcId: {inst['VpcId']}")
    ip = ipaddress.ip_address(inst["PrivateIpAddress"])
    check(ip in ipaddress.ip_network("10.0.0.0/16"), f"PrivateIpAddress in 10.0.0.0/16: {ip}")
    equal(inst["PrivateDnsName"], f"ip-{str(ip).replace('.', '-')}.{REGION}.compute.internal", "PrivateDnsName")
    equal(inst["SourceDestCheck"], True, "SourceDestCheck (bool)")
    equal(
        {(t["Key"], t["Value"]) for t in inst["Tags"]},
        {("Name", "crosscheck-0"), (CLUSTER_TAG, "1"), (ROLE_TAG, "1")},
        "instance Tags from TagSpecifications",
    )
    equal([g["GroupId"] for g in inst["SecurityGroups"]], [SECURITY_GROUP], "SecurityGroups")
    equal(inst["IamInstanceProfile"]["Arn"], PROFILE_ARN, "IamInstanceProfile.Arn")
    equal(inst["MetadataOptions"]["HttpTokens"], "required", "MetadataOptions.HttpTokens")
    equal(inst["RootDeviceName"], "/dev/xvda", "RootDeviceName")
    equal(
        [(b["DeviceName"], b["Ebs"]["DeleteOnTermination"]) for b in inst["BlockDeviceMappings"]],
        [("/dev/xvda", True), ("/dev/xvdb", False)],
        "BlockDeviceMappings (device, DeleteOnTermination)",
    )
    check(all(b["Ebs"]["VolumeId"].startswith("vol-") for b in inst["BlockDeviceMappings"]), "volume ids")
    equal(len(inst["NetworkInterfaces"]), 1, "one network interface")
    eni = inst["NetworkInterfaces"][0]
    check(
        re.fullmatch(r"eni-[0-9a-f]{17}", eni["NetworkInterfaceId"]) is not None, f"eni id {eni['NetworkInterfaceId']}"
    )
    equal(eni["Attachment"]["DeviceIndex"], 0, "interface Attachment.DeviceIndex (int)")
    equal(eni["Attachment"]["DeleteOnTermination"], True, "interface Attachment.DeleteOnTermination")
    equal(eni["Description"], "primary", "interface Description")
    equal(eni["InterfaceType"], "interface", "InterfaceType")
    equal(eni["PrivateIpAddress"], str(ip), "interface PrivateIpAddress")
    equal(eni["PrivateIpAddresses"][0]["Primary"], True, "PrivateIpAddresses[0].Primary")
    subnet64 = None
    equal(len(eni["Ipv6Addresses"]), 1, "Ipv6AddressCount=1 → one Ipv6Addresses entry")
    if eni["Ipv6Addresses"]:
        address = ipaddress.ip_address(eni["Ipv6Addresses"][0]["Ipv6Address"])
        check(address.version == 6, f"IPv6 address parses: {address}")
        subnet64 = ipaddress.ip_network(f"{address}/64", strict=False)
    equal(eni.get("Ipv6Prefixes", []), [], "no Ipv6PrefixCount → no Ipv6Prefixes")
    # IPv6 prefixes at launch come on an interface without IPv6 addresses; both on one is refused.
    with_prefix = dict(run_args()["NetworkInterfaces"][0], Ipv6PrefixCount=1)
    del with_prefix["Ipv6AddressCount"]
    untagged = [{"ResourceType": "instance", "Tags": [{"Key": "purpose", "Value": "ipv6-prefix"}]}]
    launched = client.run_instances(**run_args(NetworkInterfaces=[with_prefix], TagSpecifications=untagged))
    launched = launched["Instances"][0]
    prefixes = launched["NetworkInterfaces"][0]["Ipv6Prefixes"]
    equal(len(prefixes), 1, "Ipv6PrefixCount=1 → one Ipv6Prefixes entry")
    if prefixes:
        prefix = ipaddress.ip_network(prefixes[0]["Ipv6Prefix"], strict=True)
        check(prefix.prefixlen == 80, f"IPv6 prefix is a strict /80: {prefix}")
        check(subnet64 is not None and prefix.subnet_of(subnet64), f"/80 inside the subnet's /64 {subnet64}")
    expect_error(
        lambda: client.run_instances(**run_args(NetworkInterfaces=[dict(with_prefix, Ipv6AddressCount=1)])),
        400,
        "InvalidParameterValue",
        "Ipv6AddressCount and Ipv6PrefixCount on one interface",
    )

    again = client.run_instances(ClientToken=token, **run_args())
    equal(again["ReservationId"], out["ReservationId"], "same ClientToken → same reservation")
    equal([i["InstanceId"] for i in again["Instances"]], [instance_id], "same ClientToken → same instance")
    expect_error(
        lambda: client.run_instances(ClientToken=token, **run_args(InstanceType="m5.xlarge")),
        400,
        "IdempotentParameterMismatch",
        "same ClientToken, other InstanceType",
    )
    # The token is per account: the owner may use the same one for its own launch.
    other = ec2(fake, OWNER_KEY).run_instances(ClientToken=token, **run_args())
    check(other["ReservationId"] != out["ReservationId"], "same ClientToken in another account → new reservation")
    equal(other["OwnerId"], OWNER_ACCOUNT, "owner's reservation OwnerId")

    # botocore fills ClientToken by itself (idempotencyToken in the model).
    auto = client.run_instances(
        ImageId=PUBLIC_IMAGE_2,
        InstanceType="t3.micro",
        MinCount=2,
        MaxCount=2,
        SubnetId=SUBNET,
        SecurityGroupIds=[SECURITY_GROUP],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": CLUSTER_TAG, "Value": "1"}]}],
    )
    pair = [i["InstanceId"] for i in auto["Instances"]]
    equal([i["AmiLaunchIndex"] for i in auto["Instances"]], [0, 1], "MinCount=MaxCount=2 → AmiLaunchIndex 0, 1")
    equal(len({i["ClientToken"] for i in auto["Instances"]}), 1, "one ClientToken for the reservation")
    check(
        re.fullmatch(r"[0-9a-f-]{36}", auto["Instances"][0]["ClientToken"]) is not None,
        f"botocore generated a ClientToken: {auto['Instances'][0]['ClientToken']}",
    )
    equal(auto["Instances"][0]["PrivateDnsName"].endswith(f".{REGION}.compute.internal"), True, "t3 DNS suffix")

    entry = inventory(fake).get(instance_id, {})
    equal(
        entry.get("user_data"), base64.b64encode(USER_DATA.encode()).decode(), "UserData: botocore base64s, fake keeps"
    )
    equal(entry.get("client_token"), token, "inventory client_token")
    equal(entry.get("instance_type"), "m5.large", "inventory instance_type")
    equal(entry.get("iam_instance_profile"), PROFILE_ARN, "inventory iam_instance_profile")
    devices = {d["device_name"]: d for d in entry.get("block_devices", [])}
    equal(
        (devices.get("/dev/xvda", {}).get("size_gib"), devices.get("/dev/xvda", {}).get("encrypted")),
        (50, True),
        "root volume 50 GiB encrypted",
    )
    equal(
        (
            devices.get("/dev/xvdb", {}).get("volume_type"),
            devices.get("/dev/xvdb", {}).get("iops"),
            devices.get("/dev/xvdb", {}).get("snapshot_id"),
        ),
        ("io2", 3000, None),
        "data volume io2/3000 IOPS, no snapshot",
    )
    equal(devices.get("/dev/xvda", {}).get("tags"), {CLUSTER_TAG: "1"}, "volume tags from TagSpecifications")
    nics = entry.get("network_interfaces", [])
    equal([n.get("tags") for n in nics], [{CLUSTER_TAG: "1"}], "interface tags from TagSpecifications")
    return instance_id, eni["NetworkInterfaceId"], pair


def market_types(fake):
    client = ec2(fake)
    expect_error(
        lambda: client.run_instances(**run_args(InstanceMarketOptions={"MarketType": "on-demand"})),
        400,
        "InvalidParameterValue",
        "market type outside InstanceMarketOptionsRequest's enum (on-demand)",
    )
    named = [{"ResourceType": "instance", "Tags": [{"Key": "Name", "Value": "crosscheck-market"}]}]
    launched = client.run_instances(
        **run_args(
            InstanceMarketOptions={"MarketType": "interruptible-capacity-reservation"}, TagSpecifications=named
        )
    )
    instance_id = launched["Instances"][0]["InstanceId"]
    equal(
        inventory(fake)[instance_id]["instance_lifecycle"],
        "interruptible-capacity-reservation",
        "RunInstances market type interruptible-capacity-reservation kept as the instance's lifecycle",
    )
    client.terminate_instances(InstanceIds=[instance_id])


def spot_requests_and_volume_defaults(fake):
    client = ec2(fake)
    persistent = {
        "MarketType": "spot",
        "SpotOptions": {"SpotInstanceType": "persistent", "InstanceInterruptionBehavior": "stop"},
    }
    named = [{"ResourceType": "instance", "Tags": [{"Key": "Name", "Value": "crosscheck-spot"}]}]
    launched = client.run_instances(**run_args(InstanceMarketOptions=persistent, TagSpecifications=named))
    instance = launched["Instances"][0]
    instance_id, request_id = instance["InstanceId"], instance["SpotInstanceRequestId"]
    check(re.fullmatch(r"sir-[0-9a-f]{8}", request_id) is not None, f"a Spot launch names its request {request_id}")
    requests = client.describe_spot_instance_requests(SpotInstanceRequestIds=[request_id])["SpotInstanceRequests"]
    equal(
        (requests[0]["State"], requests[0]["Type"], requests[0]["InstanceId"], requests[0]["Status"]["Code"]),
        ("active", "persistent", instance_id, "fulfilled"),
        "DescribeSpotInstanceRequests of the launch",
    )
    attached = [
        (a["Device"], v.get("Iops"), v.get("Throughput"))
        for v in client.describe_volumes()["Volumes"]
        for a in v.get("Attachments", [])
        if a["InstanceId"] == instance_id
    ]
    equal(
        sorted(attached),
        [("/dev/xvda", 3000, 125), ("/dev/xvdb", 3000, None)],
        "DescribeVolumes: a gp3 launched without Iops/Throughput has EC2's 3000 and 125, the io2 its own Iops",
    )
    client.terminate_instances(InstanceIds=[instance_id])
    equal(
        client.describe_spot_instance_requests(SpotInstanceRequestIds=[request_id])["SpotInstanceRequests"][0]["State"],
        "open",
        "a persistent request re-opens when its instance is terminated",
    )
    time.sleep(1.2)
    relaunched = client.describe_spot_instance_requests(SpotInstanceRequestIds=[request_id])["SpotInstanceRequests"][0]
    check(
        relaunched["State"] == "active" and relaunched["InstanceId"] != instance_id,
        f"EC2 launched another instance for the open request: {relaunched['State']} {relaunched.get('InstanceId')}",
    )
    cancelled = client.cancel_spot_instance_requests(SpotInstanceRequestIds=[request_id])
    equal(
        cancelled["CancelledSpotInstanceRequests"],
        [{"SpotInstanceRequestId": request_id, "State": "cancelled"}],
        "CancelSpotInstanceRequests",
    )
    again = client.cancel_spot_instance_requests(SpotInstanceRequestIds=[request_id])
    equal(again["CancelledSpotInstanceRequests"][0]["State"], "cancelled", "cancelling again is idempotent")
    expect_error(
        lambda: client.cancel_spot_instance_requests(SpotInstanceRequestIds=["sir-0000beef"]),
        400,
        "InvalidSpotInstanceRequestID.NotFound",
        "an unknown Spot request",
    )
    client.terminate_instances(InstanceIds=[relaunched["InstanceId"]])


def run_errors(fake):
    client = ec2(fake)
    expect_error(
        lambda: client.run_instances(MinCount=1, MaxCount=1), 400, "MissingParameter", "RunInstances without ImageId"
    )
    expect_error(
        lambda: client.run_instances(**run_args(ImageId="ami-nothex")),
        400,
        "InvalidAMIID.Malformed",
        "malformed AMI id",
    )
    expect_error(
        lambda: client.run_instances(**run_args(ImageId="ami-0abcdefabcdefabcd")),
        400,
        "InvalidAMIID.NotFound",
        "unknown AMI",
    )
    expect_error(
        lambda: client.run_instances(**run_args(ImageId=PRIVATE_IMAGE)),
        400,
        "InvalidAMIID.NotFound",
        "the owner's private AMI, not shared",
    )
    expect_error(
        lambda: client.run_instances(**run_args(InstanceType="m5.huge")),
        400,
        "InvalidParameterValue",
        "bad instance type",
    )
    expect_error(
        lambda: client.run_instances(
            **run_args(TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "aws:x", "Value": "1"}]}])
        ),
        400,
        "InvalidParameterValue",
        "reserved aws: tag",
    )
    expect_error(
        lambda: client.run_instances(**run_args(MinCount=3, MaxCount=2)),
        400,
        "InvalidParameterValue",
        "MaxCount < MinCount",
    )
    expect_error(
        lambda: client.run_instances(
            **run_args(BlockDeviceMappings=[{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 2}}])
        ),
        400,
        "InvalidBlockDeviceMapping",
        "root volume smaller than the snapshot",
    )
    expect_error(
        lambda: client.run_instances(**run_args(NetworkInterfaces=[{"DeviceIndex": 0, "SubnetId": "subnet-nothing"}])),
        400,
        "InvalidSubnetID.NotFound",
        "unknown subnet",
    )
    expect_error(
        lambda: client.run_instances(**run_args(SubnetId=SUBNET)),
        400,
        "InvalidParameterCombination",
        "SubnetId together with NetworkInterfaces",
    )
    expect_error(
        lambda: client.run_instances(
            UserData="x" * (17 * 1024), **{k: v for k, v in run_args().items() if k != "UserData"}
        ),
        400,
        "InvalidParameterValue",
        "user data over 16 KiB",
    )
    expect_error(
        lambda: client.run_instances(DryRun=True, **run_args()), 412, "DryRunOperation", "RunInstances with DryRun"
    )


def describe_and_paginate(fake, instance_id, pair):
    client = ec2(fake)
    inst = describe_one(client, instance_id)
    check(inst is not None, "DescribeInstances by id")
    out = client.describe_instances(InstanceIds=[instance_id])
    equal(len(out["Reservations"]), 1, "one reservation for one id")
    equal(out["Reservations"][0]["OwnerId"], CLUSTER_ACCOUNT, "Reservations[0].OwnerId")
    check("NextToken" not in out, "no NextToken without MaxResults")
    seen = wait_state(client, instance_id, "running")
    equal(seen[-1], "running", f"pending → running after boot_ms (seen {seen})")
    inst = describe_one(client, instance_id)
    equal(inst["State"], {"Code": 16, "Name": "running"}, "State running (code 16)")
    equal(inst["Tags"] and {t["Key"] for t in inst["Tags"]} >= {"Name", CLUSTER_TAG}, True, "tags on describe")
    equal(len(inst["NetworkInterfaces"][0]["Ipv6Addresses"]), 1, "IPv6 address on describe")

    # Both instances of the pair come back in one reservation.
    out = client.describe_instances(InstanceIds=pair)
    equal(len(out["Reservations"]), 1, "pair: one reservation")
    equal(sorted(i["InstanceId"] for i in instances_of(out)), sorted(pair), "pair by ids")

    # Filters.
    by_tag = instances_of(client.describe_instances(Filters=[{"Name": f"tag:{CLUSTER_TAG}", "Values": ["1"]}]))
    equal(sorted(i["InstanceId"] for i in by_tag), sorted([instance_id, *pair]), f"filter tag:{CLUSTER_TAG}")
    by_name = instances_of(client.describe_instances(Filters=[{"Name": "tag:Name", "Values": ["crosscheck-*"]}]))
    equal([i["InstanceId"] for i in by_name], [instance_id], "filter tag:Name with a * wildcard")
    by_key = instances_of(client.describe_instances(Filters=[{"Name": "tag-key", "Values": [ROLE_TAG]}]))
    equal([i["InstanceId"] for i in by_key], [instance_id], "filter tag-key")
    running = instances_of(
        client.describe_instances(
            Filters=[
                {"Name": f"tag:{CLUSTER_TAG}", "Values": ["1"]},
                {"Name": "instance-state-name", "Values": ["running"]},
            ]
        )
    )
    check(instance_id in {i["InstanceId"] for i in running}, "filter instance-state-name=running (AND tag)")
    none = instances_of(client.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["stopped"]}]))
    equal(none, [], "filter instance-state-name=stopped → none")
    by_subnet = instances_of(client.describe_instances(Filters=[{"Name": "subnet-id", "Values": [SUBNET]}]))
    check(instance_id in {i["InstanceId"] for i in by_subnet}, "filter subnet-id")
    owner_view = instances_of(
        ec2(fake, OWNER_KEY).describe_instances(Filters=[{"Name": "instance-id", "Values": [instance_id]}])
    )
    equal(owner_view, [], "another account does not see the instance")
    expect_error(
        lambda: ec2(fake, OWNER_KEY).describe_instances(InstanceIds=[instance_id]),
        400,
        "InvalidInstanceID.NotFound",
        "another account describes it by id",
    )

    # MaxResults / NextToken by hand over a batch of 7.
    batch = client.run_instances(
        ImageId=PUBLIC_IMAGE,
        InstanceType="t3.small",
        MinCount=7,
        MaxCount=7,
        SubnetId=SUBNET,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "batch", "Value": "page"}]}],
    )
    batch_ids = [i["InstanceId"] for i in batch["Instances"]]
    flt = [{"Name": "tag:batch", "Values": ["page"]}]
    page1 = client.describe_instances(Filters=flt, MaxResults=5)
    equal(len(instances_of(page1)), 5, "MaxResults=5 → 5 instances on page 1")
    check(bool(page1.get("NextToken")), "page 1 has a NextToken")
    page2 = client.describe_instances(Filters=flt, MaxResults=5, NextToken=page1["NextToken"])
    equal(len(instances_of(page2)), 2, "page 2 has the other 2")
    check("NextToken" not in page2 or not page2["NextToken"], "last page has no NextToken")
    equal(
        sorted(i["InstanceId"] for i in instances_of(page1) + instances_of(page2)), sorted(batch_ids), "pages cover all"
    )
    # botocore's paginator (NextToken → NextToken, PageSize → MaxResults).
    paginator = client.get_paginator("describe_instances")
    pages = list(paginator.paginate(Filters=flt, PaginationConfig={"PageSize": 5}))
    equal(len(pages), 2, "paginator: 2 pages")
    ids = list(
        paginator.paginate(Filters=flt, PaginationConfig={"PageSize": 5}).search(
            "Reservations[].Instances[].InstanceId"
        )
    )
    equal(sorted(ids), sorted(batch_ids), "paginator JMESPath search over all pages")
    full = paginator.paginate(Filters=flt, PaginationConfig={"PageSize": 5, "MaxItems": 100}).build_full_result()
    equal(len([i for r in full["Reservations"] for i in r["Instances"]]), 7, "paginator build_full_result")

    # Errors of DescribeInstances.
    expect_error(
        lambda: client.describe_instances(InstanceIds=[UNKNOWN_INSTANCE]),
        400,
        "InvalidInstanceID.NotFound",
        "unknown id",
    )
    ok, message, _ = expect_error(
        lambda: client.describe_instances(InstanceIds=[instance_id, UNKNOWN_INSTANCE]),
        400,
        "InvalidInstanceID.NotFound",
        "known + unknown id",
    )
    check(UNKNOWN_INSTANCE in message and instance_id not in message, f"NotFound names only the unknown id: {message}")
    expect_error(
        lambda: client.describe_instances(InstanceIds=["i-xyz"]), 400, "InvalidInstanceID.Malformed", "malformed id"
    )
    expect_error(
        lambda: client.describe_instances(Filters=[{"Name": "no-such-filter", "Values": ["x"]}]),
        400,
        "InvalidParameterValue",
        "unknown filter",
    )
    expect_error(lambda: client.describe_instances(MaxResults=4), 400, "InvalidParameterValue", "MaxResults below 5")
    expect_error(
        lambda: client.describe_instances(InstanceIds=[instance_id], MaxResults=5),
        400,
        "InvalidParameterCombination",
        "InstanceIds with MaxResults",
    )
    expect_error(
        lambda: client.describe_instances(MaxResults=5, NextToken="garbage"),
        400,
        "InvalidParameterValue",
        "bad NextToken",
    )
    return batch_ids


def network_interfaces(fake, instance_id, eni_id):
    client = ec2(fake)
    out = client.describe_network_interfaces(NetworkInterfaceIds=[eni_id])
    equal(len(out["NetworkInterfaces"]), 1, "DescribeNetworkInterfaces by id")
    eni = out["NetworkInterfaces"][0]
    equal(eni["NetworkInterfaceId"], eni_id, "NetworkInterfaceId")
    equal(eni["Status"], "in-use", "Status in-use")
    equal(eni["SubnetId"], SUBNET, "interface SubnetId")
    equal(eni["AvailabilityZone"], ZONE, "interface AvailabilityZone")
    equal(eni["OwnerId"], CLUSTER_ACCOUNT, "interface OwnerId")
    equal(eni["RequesterManaged"], False, "RequesterManaged (bool)")
    equal(eni["Attachment"]["InstanceId"], instance_id, "Attachment.InstanceId")
    equal(eni["Attachment"]["InstanceOwnerId"], CLUSTER_ACCOUNT, "Attachment.InstanceOwnerId")
    equal(eni["Attachment"]["DeviceIndex"], 0, "Attachment.DeviceIndex")
    equal(eni["Attachment"]["Status"], "attached", "Attachment.Status")
    recent(eni["Attachment"]["AttachTime"], "Attachment.AttachTime")
    equal(eni["SourceDestCheck"], True, "SourceDestCheck before")
    equal([g["GroupId"] for g in eni["Groups"]], [SECURITY_GROUP], "Groups")
    equal(eni["TagSet"], [{"Key": CLUSTER_TAG, "Value": "1"}], "TagSet")
    check(
        re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", eni["MacAddress"]) is not None, f"MacAddress {eni['MacAddress']}"
    )
    equal(len(eni["Ipv6Addresses"]), 1, "Ipv6Addresses")
    equal(eni.get("Ipv6Prefixes", []), [], "Ipv6Prefixes (none at launch)")
    by_instance = client.describe_network_interfaces(
        Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]}]
    )
    equal(
        [e["NetworkInterfaceId"] for e in by_instance["NetworkInterfaces"]], [eni_id], "filter attachment.instance-id"
    )
    paginator = client.get_paginator("describe_network_interfaces")
    all_enis = list(
        paginator.paginate(PaginationConfig={"PageSize": 5}).search("NetworkInterfaces[].NetworkInterfaceId")
    )
    check(eni_id in all_enis and len(all_enis) == len(set(all_enis)), f"paginator over {len(all_enis)} interfaces")

    out = client.modify_network_interface_attribute(NetworkInterfaceId=eni_id, SourceDestCheck={"Value": False})
    equal(out["ResponseMetadata"]["HTTPStatusCode"], 200, "ModifyNetworkInterfaceAttribute SourceDestCheck=false")
    eni = client.describe_network_interfaces(NetworkInterfaceIds=[eni_id])["NetworkInterfaces"][0]
    equal(eni["SourceDestCheck"], False, "SourceDestCheck after (interface)")
    inst = describe_one(client, instance_id)
    equal(inst["SourceDestCheck"], False, "SourceDestCheck after (instance)")
    equal(inst["NetworkInterfaces"][0]["SourceDestCheck"], False, "SourceDestCheck after (instance interface)")
    client.modify_network_interface_attribute(NetworkInterfaceId=eni_id, Description={"Value": "changed"})
    equal(
        client.describe_network_interfaces(NetworkInterfaceIds=[eni_id])["NetworkInterfaces"][0]["Description"],
        "changed",
        "Description.Value",
    )
    expect_error(
        lambda: client.modify_network_interface_attribute(NetworkInterfaceId=eni_id),
        400,
        "MissingParameter",
        "ModifyNetworkInterfaceAttribute without an attribute",
    )
    expect_error(
        lambda: client.modify_network_interface_attribute(
            NetworkInterfaceId=eni_id, SourceDestCheck={"Value": True}, Groups=[SECURITY_GROUP]
        ),
        400,
        "InvalidParameterCombination",
        "ModifyNetworkInterfaceAttribute with two attributes",
    )
    other_group = "sg-0fedcba9876543210"
    client.modify_network_interface_attribute(NetworkInterfaceId=eni_id, Groups=[other_group, SECURITY_GROUP])
    eni = client.describe_network_interfaces(NetworkInterfaceIds=[eni_id])["NetworkInterfaces"][0]
    equal([g["GroupId"] for g in eni["Groups"]], [other_group, SECURITY_GROUP], "Groups replaced (interface)")
    inst = describe_one(client, instance_id)
    equal(
        [g["GroupId"] for g in inst["SecurityGroups"]], [other_group, SECURITY_GROUP], "Groups replaced (instance)"
    )
    client.modify_network_interface_attribute(NetworkInterfaceId=eni_id, Groups=[SECURITY_GROUP])

    out = client.modify_instance_metadata_options(
        InstanceId=instance_id, HttpTokens="required", HttpPutResponseHopLimit=3
    )
    equal(out["InstanceId"], instance_id, "ModifyInstanceMetadataOptions InstanceId")
    options = out["InstanceMetadataOptions"]
    equal(
        (options["State"], options["HttpTokens"], options["HttpPutResponseHopLimit"], options["HttpEndpoint"]),
        ("pending", "required", 3, "enabled"),
        "InstanceMetadataOptions answered",
    )
    shown = describe_one(client, instance_id)["MetadataOptions"]
    equal((shown["HttpTokens"], shown["HttpPutResponseHopLimit"]), ("required", 3), "MetadataOptions described")
    check(shown["State"] in ("pending", "applied"), f"MetadataOptions.State {shown['State']}")
    expect_error(
        lambda: client.modify_instance_metadata_options(InstanceId=instance_id, HttpPutResponseHopLimit=65),
        400,
        "InvalidParameterValue",
        "ModifyInstanceMetadataOptions hop limit 65",
    )

    out = client.assign_ipv6_addresses(NetworkInterfaceId=eni_id, Ipv6AddressCount=2)
    equal(out["NetworkInterfaceId"], eni_id, "AssignIpv6Addresses NetworkInterfaceId")
    equal(len(out["AssignedIpv6Addresses"]), 2, "AssignedIpv6Addresses: 2")
    check(all(ipaddress.ip_address(a).version == 6 for a in out["AssignedIpv6Addresses"]), "assigned addresses parse")
    prefixes = client.assign_ipv6_addresses(NetworkInterfaceId=eni_id, Ipv6PrefixCount=1)
    equal(len(prefixes["AssignedIpv6Prefixes"]), 1, "AssignedIpv6Prefixes: 1")
    check(
        all(ipaddress.ip_network(p, strict=True).prefixlen == 80 for p in prefixes["AssignedIpv6Prefixes"]),
        f"assigned /80 prefixes: {prefixes['AssignedIpv6Prefixes']}",
    )
    eni = client.describe_network_interfaces(NetworkInterfaceIds=[eni_id])["NetworkInterfaces"][0]
    equal(len(eni["Ipv6Addresses"]), 3, "3 IPv6 addresses after the assignment")
    equal(len(eni["Ipv6Prefixes"]), 1, "1 IPv6 prefix after the assignment")
    check(
        set(out["AssignedIpv6Addresses"]) <= {a["Ipv6Address"] for a in eni["Ipv6Addresses"]},
        "assigned addresses show up on the interface",
    )
    expect_error(
        lambda: client.assign_ipv6_addresses(NetworkInterfaceId=eni_id),
        400,
        "MissingParameter",
        "AssignIpv6Addresses without count/addresses",
    )
    expect_error(
        lambda: client.describe_network_interfaces(NetworkInterfaceIds=["eni-0fffffffffffffff0"]),
        400,
        "InvalidNetworkInterfaceID.NotFound",
        "unknown interface",
    )
    expect_error(
        lambda: client.describe_network_interfaces(NetworkInterfaceIds=["eni-zz"]),
        400,
        "InvalidNetworkInterfaceID.Malformed",
        "malformed interface id",
    )
    expect_error(
        lambda: client.modify_network_interface_attribute(
            NetworkInterfaceId="eni-0fffffffffffffff0", SourceDestCheck={"Value": False}
        ),
        400,
        "InvalidNetworkInterfaceID.NotFound",
        "modify an unknown interface",
    )
    expect_error(
        lambda: ec2(fake, OWNER_KEY).assign_ipv6_addresses(NetworkInterfaceId=eni_id, Ipv6AddressCount=1),
        400,
        "InvalidNetworkInterfaceID.NotFound",
        "another account's interface",
    )


def tags(fake, instance_id, eni_id):
    client = ec2(fake)
    inst = describe_one(client, instance_id)
    volume_id = inst["BlockDeviceMappings"][0]["Ebs"]["VolumeId"]
    out = client.create_tags(
        Resources=[instance_id, eni_id, volume_id],
        Tags=[{"Key": "extra", "Value": "x"}, {"Key": "Name", "Value": "crosscheck-0"}],
    )
    equal(out["ResponseMetadata"]["HTTPStatusCode"], 200, "CreateTags on instance, interface, volume")
    inst = describe_one(client, instance_id)
    equal({t["Key"]: t["Value"] for t in inst["Tags"]}.get("extra"), "x", "instance tag added")
    eni = client.describe_network_interfaces(NetworkInterfaceIds=[eni_id])["NetworkInterfaces"][0]
    equal({t["Key"]: t["Value"] for t in eni["TagSet"]}.get("extra"), "x", "interface tag added")
    found = instances_of(client.describe_instances(Filters=[{"Name": "tag-value", "Values": ["x"]}]))
    equal([i["InstanceId"] for i in found], [instance_id], "filter tag-value finds the new tag")
    expect_error(
        lambda: client.create_tags(Resources=[UNKNOWN_INSTANCE], Tags=[{"Key": "k", "Value": "v"}]),
        400,
        "InvalidInstanceID.NotFound",
        "CreateTags on an unknown instance",
    )
    expect_error(
        lambda: client.create_tags(Resources=[PRIVATE_IMAGE], Tags=[{"Key": "k", "Value": "v"}]),
        400,
        "InvalidAMIID.NotFound",
        "CreateTags on another account's image",
    )
    expect_error(
        lambda: client.create_tags(Resources=[instance_id], Tags=[{"Key": "aws:reserved", "Value": "v"}]),
        400,
        "InvalidParameterValue",
        "CreateTags with an aws: key",
    )
    owner = ec2(fake, OWNER_KEY)
    owner.create_tags(Resources=[PRIVATE_IMAGE], Tags=[{"Key": "team", "Value": "images"}])
    image = owner.describe_images(ImageIds=[PRIVATE_IMAGE])["Images"][0]
    equal(image.get("Tags"), [{"Key": "team", "Value": "images"}], "CreateTags on the owner's image")


def terminate_and_states(fake, instance_id, pair, batch_ids):
    client = ec2(fake)
    admin(fake, "timing", {"boot_ms": 300, "stop_ms": 800})
    eni_ids = [e["NetworkInterfaceId"] for e in describe_one(client, instance_id)["NetworkInterfaces"]]
    out = client.terminate_instances(InstanceIds=[instance_id])
    change = out["TerminatingInstances"][0]
    equal(change["InstanceId"], instance_id, "TerminatingInstances[0].InstanceId")
    equal(change["PreviousState"], {"Code": 16, "Name": "running"}, "PreviousState running")
    equal(change["CurrentState"], {"Code": 32, "Name": "shutting-down"}, "CurrentState shutting-down")
    equal(describe_one(client, instance_id)["State"]["Name"], "shutting-down", "describe: shutting-down")
    # botocore's own waiter (its acceptors read Reservations[].Instances[].State.Name).
    client.get_waiter("instance_terminated").wait(
        InstanceIds=[instance_id], WaiterConfig={"Delay": 0.1, "MaxAttempts": 100}
    )
    inst = describe_one(client, instance_id)
    equal(inst["State"], {"Code": 48, "Name": "terminated"}, "terminated (code 48), still visible")
    equal(inst.get("StateReason", {}).get("Code"), "Client.UserInitiatedShutdown", "StateReason.Code")
    equal(inst.get("NetworkInterfaces"), [], "terminated: no interfaces")
    again = client.terminate_instances(InstanceIds=[instance_id])["TerminatingInstances"][0]
    equal(
        (again["PreviousState"]["Name"], again["CurrentState"]["Name"]),
        ("terminated", "terminated"),
        "TerminateInstances is idempotent",
    )
    by_state = instances_of(
        client.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["terminated"]}])
    )
    equal([i["InstanceId"] for i in by_state], [instance_id], "filter instance-state-name=terminated")
    expect_error(
        lambda: client.describe_network_interfaces(NetworkInterfaceIds=eni_ids),
        400,
        "InvalidNetworkInterfaceID.NotFound",
        "DeleteOnTermination interface gone with the instance",
    )
    entry = inventory(fake).get(instance_id, {})
    equal((entry.get("state"), entry.get("live")), ("terminated", False), "inventory: terminated, not live")

    # A pending instance terminates too (pending → shutting-down).
    admin(fake, "timing", {"boot_ms": 5000, "stop_ms": 300})
    slow = client.run_instances(ImageId=PUBLIC_IMAGE, InstanceType="t3.micro", MinCount=1, MaxCount=1)["Instances"][0]
    change = client.terminate_instances(InstanceIds=[slow["InstanceId"]])["TerminatingInstances"][0]
    equal(
        (change["PreviousState"]["Name"], change["CurrentState"]["Name"]),
        ("pending", "shutting-down"),
        "pending → shutting-down",
    )
    admin(fake, "timing", {"boot_ms": 300, "stop_ms": 300})

    client.get_waiter("instance_running").wait(InstanceIds=pair, WaiterConfig={"Delay": 0.1, "MaxAttempts": 100})
    check(all(state_of(client, i) == "running" for i in pair), "instance_running waiter on the pair")
    out = client.terminate_instances(InstanceIds=pair + batch_ids)
    equal(len(out["TerminatingInstances"]), len(pair) + len(batch_ids), "terminate many at once")
    expect_error(
        lambda: client.terminate_instances(InstanceIds=[]), 400, "MissingParameter", "TerminateInstances without ids"
    )
    expect_error(
        lambda: client.terminate_instances(InstanceIds=[UNKNOWN_INSTANCE]),
        400,
        "InvalidInstanceID.NotFound",
        "terminate an unknown instance",
    )
    expect_error(
        lambda: client.terminate_instances(InstanceIds=["i-bad"]),
        400,
        "InvalidInstanceID.Malformed",
        "terminate malformed",
    )

    # Eventual consistency: a new instance is invisible by id for invisible_ms.
    admin(fake, "consistency", {"invisible_ms": 1000})
    fresh = client.run_instances(ImageId=PUBLIC_IMAGE, InstanceType="t3.micro", MinCount=1, MaxCount=1)["Instances"][0]
    expect_error(
        lambda: client.describe_instances(InstanceIds=[fresh["InstanceId"]]),
        400,
        "InvalidInstanceID.NotFound",
        "consistency: new instance not yet visible",
    )
    time.sleep(1.1)
    check(describe_one(client, fresh["InstanceId"]) is not None, "consistency: visible after invisible_ms")
    admin(fake, "consistency", {"invisible_ms": 0})
    client.terminate_instances(InstanceIds=[fresh["InstanceId"]])


def images(fake):
    owner = ec2(fake, OWNER_KEY)
    cluster = ec2(fake, CLUSTER_KEY)

    amazon = cluster.describe_images(Owners=["amazon"])["Images"]
    equal(sorted(i["ImageId"] for i in amazon), sorted([PUBLIC_IMAGE, PUBLIC_IMAGE_2]), "Owners=amazon")
    image = next(i for i in amazon if i["ImageId"] == PUBLIC_IMAGE)
    equal(image["Public"], True, "Public (bool)")
    equal(image["ImageOwnerAlias"], "amazon", "ImageOwnerAlias")
    equal(image["State"], "available", "State")
    equal(image["RootDeviceName"], "/dev/xvda", "RootDeviceName")
    equal(image["RootDeviceType"], "ebs", "RootDeviceType")
    equal(image["Architecture"], "x86_64", "Architecture")
    equal(image["ImageType"], "machine", "ImageType")
    equal(image["VirtualizationType"], "hvm", "VirtualizationType")
    equal(image["EnaSupport"], True, "EnaSupport (bool)")
    ebs = image["BlockDeviceMappings"][0]["Ebs"]
    equal((ebs["SnapshotId"], ebs["VolumeSize"], ebs["Encrypted"]), ("snap-0123456789abcdef0", 8, False), "root Ebs")
    check(
        re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z", image["CreationDate"]) is not None,
        f"CreationDate is an ISO 8601 string: {image['CreationDate']}",
    )

    mine = owner.describe_images(Owners=["self"])["Images"]
    equal([i["ImageId"] for i in mine], [PRIVATE_IMAGE], "owner: Owners=self")
    equal((mine[0]["OwnerId"], mine[0]["Public"]), (OWNER_ACCOUNT, False), "private image OwnerId / Public")
    equal(mine[0]["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"], PRIVATE_SNAPSHOT, "private image snapshot")
    equal(cluster.describe_images(Owners=["self"])["Images"], [], "cluster: Owners=self → none")
    visible = {i["ImageId"] for i in cluster.describe_images()["Images"]}
    equal(visible, {PUBLIC_IMAGE, PUBLIC_IMAGE_2}, "cluster sees only the public images")
    expect_error(
        lambda: cluster.describe_images(ImageIds=[PRIVATE_IMAGE]),
        400,
        "InvalidAMIID.NotFound",
        "cluster: private by id",
    )
    expect_error(lambda: cluster.describe_images(ImageIds=["ami-x"]), 400, "InvalidAMIID.Malformed", "malformed AMI id")
    expect_error(lambda: cluster.describe_images(Owners=["nobody"]), 400, "InvalidUserID.Malformed", "bad owner")
    equal(cluster.describe_images(ExecutableUsers=["self"])["Images"], [], "cluster: ExecutableBy=self → none yet")
    equal(
        sorted(i["ImageId"] for i in cluster.describe_images(ExecutableUsers=["all"])["Images"]),
        sorted([PUBLIC_IMAGE, PUBLIC_IMAGE_2]),
        "ExecutableBy=all → public images",
    )
    equal(
        cluster.describe_images(Filters=[{"Name": "name", "Values": ["gardenlinux-*"]}])["Images"][0]["ImageId"],
        PUBLIC_IMAGE_2,
        "filter name with a wildcard",
    )

    attr = owner.describe_image_attribute(ImageId=PRIVATE_IMAGE, Attribute="launchPermission")
    equal((attr["ImageId"], attr["LaunchPermissions"]), (PRIVATE_IMAGE, []), "launchPermission initially empty")
    owner.modify_image_attribute(ImageId=PRIVATE_IMAGE, LaunchPermission={"Add": [{"UserId": CLUSTER_ACCOUNT}]})
    attr = owner.describe_image_attribute(ImageId=PRIVATE_IMAGE, Attribute="launchPermission")
    equal(attr["LaunchPermissions"], [{"UserId": CLUSTER_ACCOUNT}], "LaunchPermission.Add UserId")
    equal(
        [i["ImageId"] for i in cluster.describe_images(ImageIds=[PRIVATE_IMAGE])["Images"]],
        [PRIVATE_IMAGE],
        "cluster sees the shared image by id",
    )
    equal(
        [i["ImageId"] for i in cluster.describe_images(ExecutableUsers=["self"])["Images"]],
        [PRIVATE_IMAGE],
        "cluster: ExecutableBy=self",
    )
    equal(
        [i["ImageId"] for i in cluster.describe_images(Owners=[OWNER_ACCOUNT])["Images"]],
        [PRIVATE_IMAGE],
        "cluster: Owners=<owner account>",
    )
    equal(
        [i["ImageId"] for i in owner.describe_images(ExecutableUsers=[CLUSTER_ACCOUNT])["Images"]],
        [PRIVATE_IMAGE],
        "owner: ExecutableBy=<cluster account> → only what is shared with it",
    )
    equal(
        sorted(i["ImageId"] for i in cluster.describe_images(ExecutableUsers=[CLUSTER_ACCOUNT])["Images"]),
        [PRIVATE_IMAGE],
        "cluster: ExecutableBy=<own account> = ExecutableBy=self",
    )
    launched = cluster.run_instances(ImageId=PRIVATE_IMAGE, InstanceType="t3.micro", MinCount=1, MaxCount=1)
    equal(launched["Instances"][0]["ImageId"], PRIVATE_IMAGE, "cluster launches the shared image")
    cluster.terminate_instances(InstanceIds=[launched["Instances"][0]["InstanceId"]])
    expect_error(
        lambda: cluster.describe_image_attribute(ImageId=PRIVATE_IMAGE, Attribute="launchPermission"),
        401,
        "AuthFailure",
        "cluster reads the owner's launchPermission",
    )
    expect_error(
        lambda: cluster.modify_image_attribute(
            ImageId=PRIVATE_IMAGE, LaunchPermission={"Add": [{"UserId": "333333333333"}]}
        ),
        401,
        "AuthFailure",
        "cluster modifies the owner's launchPermission",
    )
    inv = {i["id"]: i for i in admin(fake, "inventory", method="GET")["images"]}
    equal(inv[PRIVATE_IMAGE]["launch_permissions"], [CLUSTER_ACCOUNT], "inventory launch_permissions")

    # The flat form (Attribute + OperationType + UserIds), as older callers send it.
    owner.modify_image_attribute(
        ImageId=PRIVATE_IMAGE, Attribute="launchPermission", OperationType="remove", UserIds=[CLUSTER_ACCOUNT]
    )
    equal(
        owner.describe_image_attribute(ImageId=PRIVATE_IMAGE, Attribute="launchPermission")["LaunchPermissions"],
        [],
        "OperationType=remove UserIds",
    )
    expect_error(
        lambda: cluster.describe_images(ImageIds=[PRIVATE_IMAGE]), 400, "InvalidAMIID.NotFound", "unshared again"
    )
    owner.modify_image_attribute(ImageId=PRIVATE_IMAGE, LaunchPermission={"Add": [{"Group": "all"}]})
    equal(
        owner.describe_image_attribute(ImageId=PRIVATE_IMAGE, Attribute="launchPermission")["LaunchPermissions"],
        [{"Group": "all"}],
        "LaunchPermission.Add Group=all",
    )
    equal(cluster.describe_images(ImageIds=[PRIVATE_IMAGE])["Images"][0]["Public"], True, "public after Group=all")
    owner.modify_image_attribute(ImageId=PRIVATE_IMAGE, LaunchPermission={"Remove": [{"Group": "all"}]})
    equal(owner.describe_images(ImageIds=[PRIVATE_IMAGE])["Images"][0]["Public"], False, "private after Remove all")
    expect_error(
        lambda: owner.modify_image_attribute(ImageId=PRIVATE_IMAGE, LaunchPermission={"Add": [{"UserId": "12"}]}),
        400,
        "InvalidAMIAttributeItemValue",
        "bad account id in launchPermission",
    )
    expect_error(
        lambda: owner.describe_image_attribute(ImageId="ami-0abcdefabcdefabcd", Attribute="launchPermission"),
        400,
        "InvalidAMIID.NotFound",
        "attribute of an unknown image",
    )
    expect_error(
        lambda: owner.describe_image_attribute(ImageId=PRIVATE_IMAGE, Attribute="kernel"),
        400,
        "InvalidParameterValue",
        "unsupported image attribute",
    )

    snap = owner.describe_snapshot_attribute(SnapshotId=PRIVATE_SNAPSHOT, Attribute="createVolumePermission")
    equal((snap["SnapshotId"], snap["CreateVolumePermissions"]), (PRIVATE_SNAPSHOT, []), "createVolumePermission empty")
    owner.modify_snapshot_attribute(
        SnapshotId=PRIVATE_SNAPSHOT, CreateVolumePermission={"Add": [{"UserId": CLUSTER_ACCOUNT}]}
    )
    snap = owner.describe_snapshot_attribute(SnapshotId=PRIVATE_SNAPSHOT, Attribute="createVolumePermission")
    equal(snap["CreateVolumePermissions"], [{"UserId": CLUSTER_ACCOUNT}], "CreateVolumePermission.Add UserId")
    expect_error(
        lambda: cluster.describe_snapshot_attribute(SnapshotId=PRIVATE_SNAPSHOT, Attribute="createVolumePermission"),
        401,
        "AuthFailure",
        "cluster reads the owner's createVolumePermission",
    )
    owner.modify_snapshot_attribute(
        SnapshotId=PRIVATE_SNAPSHOT,
        Attribute="createVolumePermission",
        OperationType="remove",
        UserIds=[CLUSTER_ACCOUNT],
    )
    snap = owner.describe_snapshot_attribute(SnapshotId=PRIVATE_SNAPSHOT, Attribute="createVolumePermission")
    equal(snap["CreateVolumePermissions"], [], "OperationType=remove on the snapshot")
    expect_error(
        lambda: cluster.describe_snapshot_attribute(SnapshotId=PRIVATE_SNAPSHOT, Attribute="createVolumePermission"),
        400,
        "InvalidSnapshot.NotFound",
        "cluster: unshared snapshot not found",
    )
    expect_error(
        lambda: owner.describe_snapshot_attribute(SnapshotId="snap-x", Attribute="createVolumePermission"),
        400,
        "InvalidSnapshotID.Malformed",
        "malformed snapshot id",
    )


def auth_and_faults(fake):
    unsigned = ec2(fake, signature_version=UNSIGNED)
    expect_error(lambda: unsigned.describe_instances(), 401, "AuthFailure", "unsigned EC2 request")

    client = ec2(fake)
    admin(fake, "calls/reset")
    instances_before = len(inventory(fake))
    cases = [
        ("throttle", "DescribeInstances", 503, "RequestLimitExceeded"),
        ("capacity", "RunInstances", 500, "InsufficientInstanceCapacity"),
        ("placement", "RunInstances", 400, "Unsupported"),
        ("unavailable", "DescribeInstances", 503, "Unavailable"),
        ("internal", "DescribeImages", 500, "InternalError"),
        ("auth", "DescribeInstances", 401, "AuthFailure"),
        ("permission", "TerminateInstances", 403, "UnauthorizedOperation"),
        ("invalid", "DescribeNetworkInterfaces", 400, "InvalidParameterValue"),
    ]
    calls = {
        "DescribeInstances": lambda: client.describe_instances(),
        "RunInstances": lambda: client.run_instances(
            ImageId=PUBLIC_IMAGE, InstanceType="t3.micro", MinCount=1, MaxCount=1
        ),
        "DescribeImages": lambda: client.describe_images(Owners=["amazon"]),
        "TerminateInstances": lambda: client.terminate_instances(InstanceIds=[UNKNOWN_INSTANCE]),
        "DescribeNetworkInterfaces": lambda: client.describe_network_interfaces(),
    }
    for kind, operation, status, code in cases:
        admin(fake, "faults", {"operation": operation, "kind": kind, "times": 1})
        expect_error(calls[operation], status, code, f"fault {kind} on {operation}")
    equal(len(inventory(fake)), instances_before, "capacity fault (phase before) launched nothing")
    counted = admin(fake, "calls", method="GET")
    equal(sum(counted["injected"].values()), len(cases), "admin calls: every injected fault counted")
    admin(fake, "faults", {"operation": "DescribeInstances", "kind": "throttle", "times": 1})
    retrying = ec2(fake, retries={"total_max_attempts": 2, "mode": "standard"})
    out = retrying.describe_instances(Filters=[{"Name": "instance-id", "Values": [UNKNOWN_INSTANCE]}])
    equal(out["ResponseMetadata"]["RetryAttempts"], 1, "botocore retries RequestLimitExceeded (a throttling code)")
    admin(fake, "faults", {"operation": "create", "kind": "throttle", "times": 1, "phase": "after"})
    token = str(uuid.uuid4())
    expect_error(
        lambda: client.run_instances(
            ClientToken=token, ImageId=PUBLIC_IMAGE, InstanceType="t3.micro", MinCount=1, MaxCount=1
        ),
        503,
        "RequestLimitExceeded",
        "fault in phase after (answer lost)",
    )
    replay = client.run_instances(
        ClientToken=token, ImageId=PUBLIC_IMAGE, InstanceType="t3.micro", MinCount=1, MaxCount=1
    )
    lost = [i for i in inventory(fake).values() if i.get("client_token") == token]
    equal(
        [i["id"] for i in lost],
        [replay["Instances"][0]["InstanceId"]],
        "retry with the same ClientToken finds the lost launch",
    )
    client.terminate_instances(InstanceIds=[i["id"] for i in lost])

    admin(fake, "faults", {"operation": "GetCallerIdentity", "kind": "throttle", "times": 1})
    expect_error(lambda: sts(fake).get_caller_identity(), 400, "Throttling", "STS fault throttle")
    admin(fake, "faults", {"operation": "AssumeRoleWithWebIdentity", "kind": "invalid", "times": 1})
    expect_error(
        lambda: sts(fake, None, signature_version=UNSIGNED).assume_role_with_web_identity(
            RoleArn=f"arn:aws:iam::{OWNER_ACCOUNT}:role/r", RoleSessionName="s1", WebIdentityToken=jwt({"sub": "x"})
        ),
        400,
        "ValidationError",
        "STS fault invalid",
    )
    admin(fake, "faults", method="DELETE")


def web_identity(fake):
    unsigned = sts(fake, None, signature_version=UNSIGNED)
    role = f"arn:aws:iam::{OWNER_ACCOUNT}:role/shoot--dev--crosscheck-machine-driver"
    subject = "system:serviceaccount:shoot--dev--crosscheck:machine-controller-manager"
    claims = {
        "iss": "https://oidc.crosscheck.example",
        "sub": subject,
        "aud": "sts.amazonaws.com",
        "iat": int(time.time()),
        "exp": int(time.time()) + 600,
    }
    before = admin(fake, "sts", method="GET")["sessionsIssued"]
    out = unsigned.assume_role_with_web_identity(
        RoleArn=role, RoleSessionName="crosscheck", WebIdentityToken=jwt(claims)
    )
    creds = out["Credentials"]
    check(re.fullmatch(r"ASIA[A-Z0-9]{16}", creds["AccessKeyId"]) is not None, f"AccessKeyId: {creds['AccessKeyId']}")
    check(bool(creds["SecretAccessKey"]) and bool(creds["SessionToken"]), "SecretAccessKey and SessionToken present")
    remaining = (creds["Expiration"] - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    check(3500 < remaining <= 3600, f"Expiration ≈ now + 3600 s (default DurationSeconds): {creds['Expiration']}")
    equal(
        out["AssumedRoleUser"]["Arn"],
        f"arn:aws:sts::{OWNER_ACCOUNT}:assumed-role/shoot--dev--crosscheck-machine-driver/crosscheck",
        "AssumedRoleUser.Arn",
    )
    check(
        out["AssumedRoleUser"]["AssumedRoleId"].endswith(":crosscheck"),
        f"AssumedRoleId: {out['AssumedRoleUser']['AssumedRoleId']}",
    )
    equal(out.get("SubjectFromWebIdentityToken"), subject, "SubjectFromWebIdentityToken = the token's sub")
    equal(out.get("Audience"), "sts.amazonaws.com", "Audience = the token's aud")
    # STS answers the ARN of the role account's OIDC provider for the token's iss.
    equal(
        out.get("Provider"),
        f"arn:aws:iam::{OWNER_ACCOUNT}:oidc-provider/oidc.crosscheck.example",
        "Provider = the OIDC provider of the token's iss",
    )
    equal(admin(fake, "sts", method="GET")["sessionsIssued"], before + 1, "admin sts: sessionsIssued")
    short = unsigned.assume_role_with_web_identity(
        RoleArn=role, RoleSessionName="short", WebIdentityToken=jwt(claims), DurationSeconds=900
    )
    remaining = (short["Credentials"]["Expiration"] - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    check(800 < remaining <= 900, f"DurationSeconds=900 → Expiration ≈ now + 900 s ({remaining:.0f})")

    temp = dict(key=creds["AccessKeyId"], secret=creds["SecretAccessKey"], token=creds["SessionToken"])
    role_ec2 = ec2(fake, **temp)
    mine = role_ec2.run_instances(ImageId=PRIVATE_IMAGE, InstanceType="t3.micro", MinCount=1, MaxCount=1)
    equal(mine["OwnerId"], OWNER_ACCOUNT, "temporary keys act in the role's account (launch the owner's image)")
    described = role_ec2.describe_instances()
    seen = [i["InstanceId"] for i in instances_of(described)]
    check(mine["Instances"][0]["InstanceId"] in seen, "DescribeInstances with temporary keys finds the launch")
    equal(
        {r["OwnerId"] for r in described["Reservations"]},
        {OWNER_ACCOUNT},
        "DescribeInstances with temporary keys: only the role account's reservations",
    )
    identity = sts(fake, **temp).get_caller_identity()
    equal(
        identity["Arn"],
        f"arn:aws:sts::{OWNER_ACCOUNT}:assumed-role/shoot--dev--crosscheck-machine-driver/crosscheck",
        "GetCallerIdentity with temporary keys: the assumed-role ARN",
    )
    equal(identity["UserId"], out["AssumedRoleUser"]["AssumedRoleId"], "GetCallerIdentity UserId = AssumedRoleId")
    equal(sts(fake, **temp).get_caller_identity()["Account"], OWNER_ACCOUNT, "GetCallerIdentity with temporary keys")
    role_ec2.terminate_instances(InstanceIds=[mine["Instances"][0]["InstanceId"]])
    wrong = ec2(fake, key=temp["key"], secret=temp["secret"], token="not-the-session-token")
    expect_error(lambda: wrong.describe_instances(), 401, "AuthFailure", "temporary key with a wrong session token")
    expect_error(
        lambda: sts(fake, key=temp["key"], secret=temp["secret"], token="nope").get_caller_identity(),
        403,
        "InvalidClientTokenId",
        "STS with a wrong session token",
    )
    expect_error(
        lambda: ec2(fake, key=temp["key"], secret=temp["secret"]).describe_instances(),
        401,
        "AuthFailure",
        "temporary key without its session token",
    )

    admin(fake, "sts", {"sessionSeconds": 1})
    equal(admin(fake, "sts", method="GET").get("sessionSeconds"), 1, "admin sts: sessionSeconds")
    brief = unsigned.assume_role_with_web_identity(RoleArn=role, RoleSessionName="brief", WebIdentityToken=jwt(claims))
    bc = brief["Credentials"]
    remaining = (bc["Expiration"] - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    check(remaining <= 1.5, f"sessionSeconds=1 → Expiration ≈ now + 1 s ({remaining:.2f})")
    brief_ec2 = ec2(fake, bc["AccessKeyId"], bc["SecretAccessKey"], bc["SessionToken"])
    equal(brief_ec2.describe_instances()["ResponseMetadata"]["HTTPStatusCode"], 200, "brief session works at first")
    time.sleep(1.2)
    expect_error(lambda: brief_ec2.describe_instances(), 400, "RequestExpired", "EC2 with expired temporary keys")
    expect_error(
        lambda: sts(fake, bc["AccessKeyId"], bc["SecretAccessKey"], bc["SessionToken"]).get_caller_identity(),
        400,
        "ExpiredToken",
        "STS with expired temporary keys",
    )
    admin(fake, "sts", {"sessionSeconds": 0})

    expect_error(
        lambda: unsigned.assume_role_with_web_identity(
            RoleArn=role, RoleSessionName="crosscheck", WebIdentityToken="not-a-jwt-at-all"
        ),
        400,
        "InvalidIdentityToken",
        "AssumeRoleWithWebIdentity with a token that is no JWT",
    )
    expect_error(
        lambda: unsigned.assume_role_with_web_identity(
            RoleArn=role, RoleSessionName="crosscheck", WebIdentityToken=jwt({**claims, "exp": int(time.time()) - 60})
        ),
        400,
        "ExpiredTokenException",
        "AssumeRoleWithWebIdentity with an expired JWT",
    )
    expect_error(
        lambda: unsigned.assume_role_with_web_identity(
            RoleArn="arn:aws:iam::1234:role/too-short-account",
            RoleSessionName="crosscheck",
            WebIdentityToken=jwt(claims),
        ),
        400,
        "ValidationError",
        "AssumeRoleWithWebIdentity with a bad RoleArn",
    )
    lax = sts(fake, None, signature_version=UNSIGNED, parameter_validation=False)
    expect_error(
        lambda: lax.assume_role_with_web_identity(
            RoleArn=role, RoleSessionName="crosscheck", WebIdentityToken=jwt(claims), DurationSeconds=60
        ),
        400,
        "ValidationError",
        "DurationSeconds below 900",
    )
    expect_error(
        lambda: lax.assume_role_with_web_identity(RoleArn=role, RoleSessionName="x", WebIdentityToken=jwt(claims)),
        400,
        "ValidationError",
        "RoleSessionName shorter than 2",
    )


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    fake = sys.argv[1].rstrip("/")
    run = Run("fake-ec2")
    admin(fake, "reset")
    admin(fake, "timing", {"boot_ms": 300, "stop_ms": 300})
    state = {}

    scenario = run.scenario

    scenario("STS GetCallerIdentity", lambda: caller_identity(fake))
    launched = scenario("RunInstances", lambda: run_instances(fake))
    scenario("RunInstances errors", lambda: run_errors(fake))
    if launched:
        instance_id, eni_id, pair = launched
        state["batch"] = scenario("DescribeInstances", lambda: describe_and_paginate(fake, instance_id, pair)) or []
        scenario("network interfaces", lambda: network_interfaces(fake, instance_id, eni_id))
        scenario("CreateTags", lambda: tags(fake, instance_id, eni_id))
        scenario("TerminateInstances", lambda: terminate_and_states(fake, instance_id, pair, state["batch"]))
    scenario("images and snapshots", lambda: images(fake))
    scenario("auth and faults", lambda: auth_and_faults(fake))
    scenario("STS AssumeRoleWithWebIdentity", lambda: web_identity(fake))
    scenario("RunInstances market types", lambda: market_types(fake))
    scenario("Spot requests and volume defaults", lambda: spot_requests_and_volume_defaults(fake))
    admin(fake, "reset")
    run.finish()


if __name__ == "__main__":
    main()
