//! RunInstances, DescribeInstances and DeleteInstance: lifecycle, ClientToken idempotency,
//! validation, paging, tag filters, delete state rules, consistency, faults and inventory.

#![allow(clippy::unwrap_used)]

mod common;

use fake_cloud_support::{Fault, OpClass, Timing};
use std::time::Duration;

use base64::Engine;
use common::{CLUSTER, Fake, OWNER};
use fake_ecs::{ALLOWED_IMAGE, REGION, SECURITY_GROUP, VSWITCH, ZONE_A, ZONE_B};
use serde_json::{Value, json};

const CLUSTER_TAG: &str = "kubernetes.io/cluster/shoot--dev--conf";
const ROLE_TAG: &str = "kubernetes.io/role/node";

#[tokio::test]
async fn run_boots_pending_starting_running_with_the_requested_shape() {
    let fake = Fake::start().await;
    fake.admin_client.set_timing(Timing { boot_ms: 400, stop_ms: 200, operation_ms: None }).await.expect("timing");
    let user_data = base64::engine::general_purpose::STANDARD.encode("#cloud-config\nruncmd: [echo, hi]\n");
    let ids = fake
        .run(&[
            ("ZoneId", ZONE_A),
            ("InstanceName", "shoot--dev--conf-worker-a"),
            ("Tag.1.Key", CLUSTER_TAG),
            ("Tag.1.Value", "1"),
            ("Tag.2.Key", ROLE_TAG),
            ("Tag.2.Value", "1"),
            ("UserData", &user_data),
            ("SystemDisk.Category", "cloud_essd"),
            ("SystemDisk.Size", "50"),
            ("DataDisk.1.Category", "cloud_essd"),
            ("DataDisk.1.Size", "100"),
            ("DataDisk.1.Encrypted", "true"),
            ("DataDisk.1.DiskName", "shoot--dev--conf-worker-a-data-data-disk"),
            ("DataDisk.1.DeleteWithInstance", "true"),
            ("InstanceChargeType", "PostPaid"),
            ("InternetChargeType", "PayByTraffic"),
            ("InternetMaxBandwidthIn", "5"),
            ("InternetMaxBandwidthOut", "5"),
            ("SpotStrategy", "NoSpot"),
            ("IoOptimized", "optimized"),
            ("PrivateIpAddress", ""),
            ("KeyPairName", ""),
        ])
        .await;
    assert_eq!(ids.len(), 1);
    let id = &ids[0];
    assert!(id.starts_with("i-") && id.len() == 22, "{id}");
    let instance = fake.describe_one(id).await;
    assert_eq!(instance["Status"], "Pending");
    assert_eq!(instance["InstanceName"], "shoot--dev--conf-worker-a");
    assert_eq!(instance["HostName"], format!("iz{}z", &id[2..]));
    assert_eq!(instance["ZoneId"], ZONE_A);
    assert_eq!(instance["RegionId"], REGION);
    assert_eq!(instance["InstanceType"], "ecs.g7.large");
    assert_eq!(instance["VpcAttributes"]["VSwitchId"], VSWITCH);
    assert_eq!(instance["VpcAttributes"]["VpcId"], fake_ecs::VPC);
    assert_eq!(instance["VpcAttributes"]["PrivateIpAddress"]["IpAddress"], json!(["10.250.0.10"]));
    assert_eq!(instance["SecurityGroupIds"]["SecurityGroupId"], json!([SECURITY_GROUP]));
    assert_eq!(
        instance["Tags"]["Tag"],
        json!([{"TagKey": CLUSTER_TAG, "TagValue": "1"}, {"TagKey": ROLE_TAG, "TagValue": "1"}])
    );
    assert!(instance["CreationTime"].as_str().unwrap().ends_with('Z'));
    let seen = fake.wait_status(id, "Running").await;
    assert!(
        seen == ["Pending", "Running"] || seen == ["Pending", "Starting", "Running"],
        "statuses in order: {seen:?}"
    );

    let inventory = fake.inventory().await;
    let entry = &inventory["instances"][0];
    assert_eq!(entry["id"], id.as_str());
    assert_eq!(entry["name"], "shoot--dev--conf-worker-a");
    assert_eq!(entry["state"], "Running");
    assert_eq!(entry["live"], true);
    assert_eq!(entry["tags"][CLUSTER_TAG], "1");
    assert_eq!(entry["user_data"], user_data);
    assert_eq!(entry["private_ip"], "10.250.0.10");
    assert_eq!(entry["data_disks"][0]["encrypted"], true);
    assert_eq!(entry["data_disks"][0]["size"], 100);

    // Sequential IPs; an explicit one is honoured and cannot be reused.
    let second = fake.run(&[]).await;
    assert_eq!(fake.describe_one(&second[0]).await["VpcAttributes"]["PrivateIpAddress"]["IpAddress"][0], "10.250.0.11");
    let third = fake.run(&[("PrivateIpAddress", "10.250.9.9")]).await;
    assert_eq!(fake.describe_one(&third[0]).await["VpcAttributes"]["PrivateIpAddress"]["IpAddress"][0], "10.250.9.9");
    fake.run_as(CLUSTER, &[("PrivateIpAddress", "10.250.9.9")]).await.expect(400, "InvalidPrivateIpAddress.Duplicated");
    fake.run_as(CLUSTER, &[("PrivateIpAddress", "10.9.0.1")]).await.expect(400, "InvalidPrivateIpAddress");
    // Amount creates several.
    assert_eq!(fake.run(&[("Amount", "3")]).await.len(), 3);
}

#[tokio::test]
async fn client_token_replays_and_mismatches() {
    let fake = Fake::start().await;
    let params = [("InstanceName", "m-1"), ("ClientToken", "machine-uid-0001")];
    let first = fake.run(&params).await;
    let again = fake.run(&params).await;
    assert_eq!(first, again, "same token, same parameters: same instance");
    let changed = fake.run_as(CLUSTER, &[("InstanceName", "m-2"), ("ClientToken", "machine-uid-0001")]).await;
    changed.expect(400, "IdempotentParameterMismatch");
    // Tokens are per account: the owner account has no network, so its RunInstances fails on validation.
    fake.run_as(OWNER, &params).await.expect(404, "InvalidVSwitchId.NotFound");
    let long = "x".repeat(65);
    fake.run_as(CLUSTER, &[("ClientToken", &long)]).await.expect(400, "InvalidClientToken.Malformed");
    assert_eq!(fake.inventory().await["instances"].as_array().unwrap().len(), 1);

    // A lost answer (phase `after`): the retry with the same token gets the created instance.
    fake.admin_client
        .add_fault(Fault { operation: "create", kind: "internal", times: Some(1), phase: "after" })
        .await
        .expect("fault");
    let lost = [("InstanceName", "m-3"), ("ClientToken", "machine-uid-0003")];
    fake.run_as(CLUSTER, &lost).await.expect(500, "InternalError");
    let retried = fake.run(&lost).await;
    let inventory = fake.inventory().await;
    let created: Vec<&Value> =
        inventory["instances"].as_array().unwrap().iter().filter(|i| i["name"] == "m-3").collect();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0]["id"], retried[0].as_str());
    assert_eq!(created[0]["client_token"], "machine-uid-0003");
}

#[tokio::test]
async fn run_validation_uses_ecs_codes() {
    let fake = Fake::start().await;
    fake.run_as(CLUSTER, &[("ImageId", "m-doesnotexist")]).await.expect(404, "InvalidImageId.NotFound");
    fake.run_as(CLUSTER, &[("ImageId", ALLOWED_IMAGE)]).await.expect(404, "InvalidImageId.NotFound");
    fake.run_as(CLUSTER, &[("InstanceType", "ecs.g9.huge")]).await.expect(400, "InvalidInstanceType.NotSupported");
    fake.run_as(CLUSTER, &[("VSwitchId", "vsw-nope")]).await.expect(404, "InvalidVSwitchId.NotFound");
    fake.run_as(CLUSTER, &[("SecurityGroupId", "sg-nope")]).await.expect(404, "InvalidSecurityGroupId.NotFound");
    fake.run_as(CLUSTER, &[("ZoneId", ZONE_B)]).await.expect(400, "InvalidParameter.Mismatch");
    fake.run_as(CLUSTER, &[("RegionId", "cn-hangzhou")]).await.expect(404, "InvalidRegionId.NotFound");
    fake.run_as(CLUSTER, &[("DataDisk.1.Category", "floppy"), ("DataDisk.1.Size", "20")])
        .await
        .expect(400, "InvalidDataDiskCategory.ValueNotSupported");
    let big = base64::engine::general_purpose::STANDARD.encode(vec![b'a'; 32 * 1024 + 1]);
    fake.run_as(CLUSTER, &[("UserData", &big)]).await.expect(400, "InvalidUserData.SizeExceeded");
    let max = base64::engine::general_purpose::STANDARD.encode(vec![b'a'; 32 * 1024]);
    fake.run(&[("UserData", &max)]).await;
    fake.run_as(CLUSTER, &[("UserData", "%%%")]).await.expect(403, "InvalidUserData.Base64FormatInvalid");
    fake.run_as(CLUSTER, &[("DryRun", "true")]).await.expect(400, "DryRunOperation");
    fake.call("RunInstances", &[("RegionId", REGION)]).await.expect(400, "MissingParameter");
    assert_eq!(fake.inventory().await["instances"].as_array().unwrap().len(), 1, "only the valid one exists");
}

#[tokio::test]
async fn describe_pages_by_next_token_and_page_number_and_filters_by_tag() {
    let fake = Fake::start().await;
    let mut tagged = Vec::new();
    for n in 0..5 {
        let name = format!("worker-{n}");
        let ids = fake.run(&[("InstanceName", &name), ("Tag.1.Key", CLUSTER_TAG), ("Tag.1.Value", "1")]).await;
        tagged.push(ids[0].clone());
    }
    let other = fake.run(&[("InstanceName", "other"), ("Tag.1.Key", CLUSTER_TAG), ("Tag.1.Value", "2")]).await;
    let untagged = fake.run(&[("InstanceName", "untagged")]).await;

    // NextToken paging, 2 per page.
    let mut token = String::new();
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let mut params =
            vec![("RegionId", REGION), ("MaxResults", "2"), ("Tag.1.Key", CLUSTER_TAG), ("Tag.1.Value", "1")];
        if !token.is_empty() {
            params.push(("NextToken", &token));
        }
        let body = fake.call("DescribeInstances", &params).await.ok();
        pages += 1;
        assert_eq!(body["TotalCount"], 5);
        for instance in body["Instances"]["Instance"].as_array().unwrap() {
            seen.push(instance["InstanceId"].as_str().unwrap().to_owned());
        }
        token = body["NextToken"].as_str().unwrap().to_owned();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, tagged);

    // Without NextToken/MaxResults the first page still carries a NextToken (the Go provider's loop).
    let body = fake.call("DescribeInstances", &[("RegionId", REGION), ("PageSize", "4")]).await.ok();
    assert_eq!(body["Instances"]["Instance"].as_array().unwrap().len(), 4);
    assert_eq!(body["TotalCount"], 7);
    let next = body["NextToken"].as_str().unwrap().to_owned();
    assert!(!next.is_empty());
    let body =
        fake.call("DescribeInstances", &[("RegionId", REGION), ("PageSize", "4"), ("NextToken", &next)]).await.ok();
    assert_eq!(body["Instances"]["Instance"].as_array().unwrap().len(), 3);
    assert_eq!(body["NextToken"], "");

    // PageNumber/PageSize.
    let body =
        fake.call("DescribeInstances", &[("RegionId", REGION), ("PageSize", "3"), ("PageNumber", "3")]).await.ok();
    assert_eq!((body["PageNumber"].as_u64(), body["PageSize"].as_u64()), (Some(3), Some(3)));
    assert_eq!(body["Instances"]["Instance"][0]["InstanceId"], untagged[0].as_str());
    fake.call("DescribeInstances", &[("RegionId", REGION), ("PageSize", "101")]).await.expect(400, "InvalidParameter");

    // Tag key without value matches any value; key and value must both match otherwise.
    let body = fake
        .call("DescribeInstances", &[("RegionId", REGION), ("Tag.1.Key", CLUSTER_TAG), ("PageSize", "50")])
        .await
        .ok();
    assert_eq!(body["TotalCount"], 6);
    let body = fake
        .call("DescribeInstances", &[("RegionId", REGION), ("Tag.1.Key", CLUSTER_TAG), ("Tag.1.Value", "2")])
        .await
        .ok();
    assert_eq!(body["Instances"]["Instance"][0]["InstanceId"], other[0].as_str());
    assert_eq!(body["TotalCount"], 1);

    // InstanceName, InstanceIds (≤100), other accounts see nothing.
    let body = fake.call("DescribeInstances", &[("RegionId", REGION), ("InstanceName", "worker-3")]).await.ok();
    assert_eq!(body["Instances"]["Instance"][0]["InstanceId"], tagged[3].as_str());
    let ids = json!([tagged[0], tagged[1], "i-gw8doesnotexist00000"]).to_string();
    assert_eq!(
        fake.call("DescribeInstances", &[("RegionId", REGION), ("InstanceIds", &ids)]).await.ok()["TotalCount"],
        2
    );
    let many = serde_json::to_string(&(0..101).map(|n| format!("i-{n}")).collect::<Vec<_>>()).unwrap();
    fake.call("DescribeInstances", &[("RegionId", REGION), ("InstanceIds", &many)])
        .await
        .expect(400, "InvalidParameter");
    fake.call("DescribeInstances", &[("RegionId", REGION), ("InstanceIds", "i-1,i-2")])
        .await
        .expect(400, "InvalidInstanceIds.Malformed");
    assert_eq!(fake.call_as(OWNER, "DescribeInstances", &[("RegionId", REGION)]).await.ok()["TotalCount"], 0);
}

#[tokio::test]
async fn delete_follows_the_state_rules() {
    let fake = Fake::start().await;
    fake.call("DeleteInstance", &[("InstanceId", "i-gw8doesnotexist00000")])
        .await
        .expect(404, "InvalidInstanceId.NotFound");
    let id = fake.run(&[]).await.remove(0);
    let answer = fake.call("DeleteInstance", &[("InstanceId", &id), ("Force", "true")]).await;
    answer.expect(403, "IncorrectInstanceStatus");
    assert_eq!(answer.body["Message"], "The current status of the resource does not support this operation.");
    fake.wait_status(&id, "Running").await;
    fake.call("DeleteInstance", &[("InstanceId", &id)]).await.expect(403, "IncorrectInstanceStatus");
    fake.call_as(OWNER, "DeleteInstance", &[("InstanceId", &id), ("Force", "true")])
        .await
        .expect(404, "InvalidInstanceId.NotFound");
    fake.call("DeleteInstance", &[("InstanceId", &id), ("Force", "true")]).await.ok();
    assert_eq!(fake.describe_one(&id).await["Status"], "Stopping");
    fake.call("DeleteInstance", &[("InstanceId", &id), ("Force", "true")]).await.expect(403, "IncorrectInstanceStatus");
    fake.wait_status(&id, "gone").await;
    fake.call("DeleteInstance", &[("InstanceId", &id), ("Force", "true")])
        .await
        .expect(404, "InvalidInstanceId.NotFound");
    let inventory = fake.inventory().await;
    assert_eq!(inventory["instances"][0]["live"], false);
    assert_eq!(inventory["instances"][0]["state"], "Deleted");
}

#[tokio::test]
async fn new_instances_are_invisible_for_the_consistency_window() {
    let fake = Fake::start().await;
    fake.admin_client.set_invisible_ms(300).await.expect("consistency");
    let id = fake.run(&[]).await.remove(0);
    assert!(fake.describe_one(&id).await.is_null());
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(fake.describe_one(&id).await["InstanceId"], id.as_str());
}

#[tokio::test]
async fn faults_answer_with_ecs_errors_and_are_counted() {
    let fake = Fake::start().await;
    for (kind, status, code) in [
        ("throttle", 400, "Throttling.User"),
        ("capacity", 403, "OperationDenied.NoStock"),
        ("placement", 403, "Zone.NotOnSale"),
        ("unavailable", 503, "ServiceUnavailable"),
        ("internal", 500, "InternalError"),
        ("auth", 404, "InvalidAccessKeyId.NotFound"),
        ("permission", 403, "Forbidden.RAM"),
        ("invalid", 400, "InvalidParameter"),
    ] {
        fake.admin_client
            .add_fault(Fault { operation: "RunInstances", kind, times: Some(1), phase: "before" })
            .await
            .expect("fault");
        fake.run_as(CLUSTER, &[]).await.expect(status, code);
    }
    assert_eq!(fake.inventory().await["instances"].as_array().unwrap().len(), 0, "before-faults have no effect");
    fake.admin_client
        .add_fault(Fault { operation: "read", kind: "throttle", times: Some(1), phase: "before" })
        .await
        .expect("fault");
    let answer = fake.call("DescribeInstances", &[("RegionId", REGION)]).await;
    answer.expect(400, "Throttling.User");
    assert_eq!(answer.body["Message"], "Request was denied due to user flow control.");
    fake.call("DescribeInstances", &[("RegionId", REGION)]).await.ok();
    let calls = fake.calls().await;
    assert_eq!(calls.of("RunInstances"), 8);
    assert_eq!(calls.of_class(OpClass::Create), 8);
    assert_eq!(calls.of_class(OpClass::Read), 2);

    fake.run(&[]).await;
    fake.admin_client.set_rate_limit(1, 1).await.expect("rate limit");
    fake.call("DescribeInstances", &[("RegionId", REGION)]).await.ok();
    fake.call("DescribeInstances", &[("RegionId", REGION)]).await.expect(400, "Throttling.User");
    assert_eq!(fake.calls().await.throttled, 1);

    assert_eq!(fake.inventory().await["instances"].as_array().unwrap().len(), 1);
    fake.admin_client.reset().await.expect("reset");
    assert_eq!(fake.inventory().await["instances"].as_array().unwrap().len(), 0);
    fake.call("DescribeInstances", &[("RegionId", REGION)]).await.ok();
    fake.call("DescribeInstances", &[("RegionId", REGION)]).await.ok();
    assert_eq!(fake.calls().await.total, 2, "reset zeroes counters and lifts the rate limit");
}

#[tokio::test]
async fn terminate_releases_at_once_like_a_spot_reclaim() {
    let fake = Fake::start().await;
    let params = [("InstanceName", "m-spot"), ("ClientToken", "machine-uid-spot"), ("SpotStrategy", "SpotAsPriceGo")];
    let id = fake.run(&params).await.remove(0);
    let other = fake.run(&[]).await.remove(0);
    fake.wait_status(&id, "Running").await;
    let calls_before = fake.calls().await.total;
    let terminate = |id: String| {
        let url = format!("{}/instances/{id}/terminate", fake.handle.admin_url());
        let http = fake.http.clone();
        async move {
            let resp = http.post(url).send().await.unwrap();
            (resp.status().as_u16(), resp.json::<Value>().await.unwrap())
        }
    };

    let (status, _) = terminate(id.clone()).await;
    assert_eq!(status, 200);
    assert_eq!(fake.calls().await.total, calls_before, "the hook counts no call");
    assert!(fake.describe_one(&id).await.is_null(), "released at once, no Stopping");
    fake.call("DeleteInstance", &[("InstanceId", &id), ("Force", "true")])
        .await
        .expect(404, "InvalidInstanceId.NotFound");
    let inventory = fake.inventory().await;
    let instances = inventory["instances"].as_array().unwrap();
    let entry = instances.iter().find(|i| i["id"] == id.as_str()).unwrap();
    assert_eq!((entry["state"].as_str(), entry["live"].as_bool()), (Some("Deleted"), Some(false)));
    assert_eq!(entry["client_token"], "machine-uid-spot");
    let kept = instances.iter().find(|i| i["id"] == other.as_str()).unwrap();
    assert_eq!(kept["live"], true, "other instances are untouched");
    // Its system disk and primary ENI went with it; the other instance's are live.
    let dependents = inventory["dependents"].as_array().unwrap();
    let of = |instance: &str| -> Vec<(String, bool)> {
        dependents
            .iter()
            .filter(|d| d["instance_id"] == instance)
            .map(|d| (d["kind"].as_str().unwrap().to_owned(), d["live"].as_bool().unwrap()))
            .collect()
    };
    assert_eq!(of(&id), [("disk".to_owned(), false), ("eni".to_owned(), false)]);
    assert_eq!(of(&other), [("disk".to_owned(), true), ("eni".to_owned(), true)]);

    let (status, body) = terminate(id.clone()).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"], format!("no live instance {id}"));
    assert_eq!(terminate("i-gw8doesnotexist00000".to_owned()).await.0, 404);

    // ClientToken: ECS answers a replay with the first result (the released id) and creates nothing.
    assert_eq!(fake.run(&params).await, [id.as_str()]);
    assert!(fake.describe_one(&id).await.is_null());
    assert_eq!(fake.inventory().await["instances"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn spot_parameters_are_validated_as_the_run_instances_reference_documents_them() {
    let fake = Fake::start().await;
    let id = fake
        .run(&[("SpotStrategy", "SpotWithPriceLimit"), ("SpotPriceLimit", "0.125"), ("SpotDuration", "0")])
        .await
        .remove(0);
    let instance = fake.describe_one(&id).await;
    assert_eq!(instance["SpotStrategy"], "SpotWithPriceLimit");
    assert_eq!(instance["SpotPriceLimit"], 0.125);
    assert_eq!(instance["SpotDuration"], 0);
    let entry =
        fake.inventory().await["instances"].as_array().unwrap().iter().find(|i| i["id"] == id.as_str()).cloned();
    let entry = entry.unwrap();
    assert_eq!((entry["spot_price_limit"].clone(), entry["spot_duration"].clone()), (json!("0.125"), json!(0)));

    // SpotAsPriceGo ignores a limit (ECS uses it only with SpotWithPriceLimit); the duration defaults to 1.
    let id = fake.run(&[("SpotStrategy", "SpotAsPriceGo"), ("SpotPriceLimit", "0.5")]).await.remove(0);
    let instance = fake.describe_one(&id).await;
    assert_eq!((instance["SpotPriceLimit"].clone(), instance["SpotDuration"].clone()), (json!(0.0), json!(1)));
    let plain = fake.run(&[]).await.remove(0);
    assert_eq!(fake.describe_one(&plain).await["SpotDuration"], 0, "no spot, no protection hours");

    for (params, status, code) in [
        (vec![("SpotStrategy", "Cheap")], 400, "InvalidSpotStrategy"),
        (vec![("SpotStrategy", "SpotWithPriceLimit"), ("SpotPriceLimit", "0.1234")], 400, "InvalidSpotPriceLimit"),
        (vec![("SpotStrategy", "SpotWithPriceLimit"), ("SpotPriceLimit", "-1")], 400, "InvalidSpotPriceLimit"),
        (vec![("SpotStrategy", "SpotWithPriceLimit"), ("SpotPriceLimit", "cheap")], 400, "InvalidSpotPriceLimit"),
        (vec![("SpotStrategy", "SpotAsPriceGo"), ("SpotDuration", "2")], 400, "InvalidSpotDuration"),
        (vec![("SpotStrategy", "SpotAsPriceGo"), ("InstanceChargeType", "PrePaid")], 400, "InvalidSpotPrepaid"),
    ] {
        fake.run_as(CLUSTER, &params).await.expect(status, code);
    }
}

#[tokio::test]
async fn reclaim_stops_a_spot_instance_locks_it_for_release_and_releases_it_later() {
    let fake = Fake::start().await;
    let admin = fake_cloud_support::AdminClient::for_cloud_url(&fake.handle.url()).unwrap();
    fake.admin("ecs/reclaim-release", json!({"ms": 400})).await;
    let spot = fake.run(&[("InstanceName", "m-spot"), ("SpotStrategy", "SpotAsPriceGo"), ("SpotDuration", "0")]).await;
    let spot = &spot[0];
    let on_demand = fake.run(&[("InstanceName", "m-on-demand")]).await.remove(0);
    fake.wait_status(spot, "Running").await;
    fake.wait_status(&on_demand, "Running").await;
    assert_eq!(fake.describe_one(spot).await["OperationLocks"], json!({"LockReason": []}), "running: no lock");
    let calls_before = fake.calls().await.total;

    let shown = admin.reclaim(spot).await.unwrap();
    assert!(shown.contains("Stopped") && shown.contains("Recycling"), "{shown}");
    assert_eq!(fake.calls().await.total, calls_before, "the hook counts no call");
    let instance = fake.describe_one(spot).await;
    assert_eq!(instance["Status"], "Stopped");
    assert_eq!(instance["OperationLocks"], json!({"LockReason": [{"LockReason": "Recycling", "LockMsg": ""}]}));
    assert_eq!(instance["SpotStrategy"], "SpotAsPriceGo");
    let stopped = fake.call("DescribeInstances", &[("RegionId", REGION), ("Status", "Stopped")]).await.ok();
    assert_eq!(stopped["TotalCount"], 1, "the Status filter sees it: {stopped}");
    let inventory = fake.inventory().await;
    let entry = inventory["instances"].as_array().unwrap().iter().find(|i| i["id"] == spot.as_str()).unwrap();
    assert_eq!((entry["state"].as_str(), entry["live"].as_bool()), (Some("Stopped"), Some(true)));
    assert_eq!(entry["operation_locks"], json!(["Recycling"]));
    assert!(admin.reclaim(spot).await.unwrap().contains("Recycling"), "a second reclaim answers as the first");

    // An on-demand instance is never reclaimed (409) and is untouched; no instance → 404.
    let err = admin.reclaim(&on_demand).await.unwrap_err();
    assert!(err.contains("409"), "{err}");
    let untouched = fake.describe_one(&on_demand).await;
    assert_eq!(
        (untouched["Status"].as_str(), untouched["OperationLocks"].clone()),
        (Some("Running"), json!({"LockReason": []}))
    );
    let err = admin.reclaim("i-gw8doesnotexist00000").await.unwrap_err();
    assert!(err.contains("404"), "{err}");

    // ECS releases it some minutes later (here 400 ms): gone from reads, Deleted in the inventory.
    let seen = fake.wait_status(spot, "gone").await;
    assert_eq!(seen, ["Stopped", "gone"]);
    let inventory = fake.inventory().await;
    let entry = inventory["instances"].as_array().unwrap().iter().find(|i| i["id"] == spot.as_str()).unwrap();
    assert_eq!((entry["state"].as_str(), entry["live"].as_bool()), (Some("Deleted"), Some(false)));
    assert!(admin.reclaim(spot).await.unwrap_err().contains("404"), "a released instance is no live instance");
}

#[tokio::test]
async fn a_reclaimed_instance_is_deleted_like_a_stopped_one() {
    let fake = Fake::start().await;
    let admin = fake_cloud_support::AdminClient::for_cloud_url(&fake.handle.url()).unwrap();
    let id = fake.run(&[("SpotStrategy", "SpotWithPriceLimit"), ("SpotPriceLimit", "0.2")]).await.remove(0);
    admin.reclaim(&id).await.unwrap();
    // Stopped (default release: minutes away): DeleteInstance needs no Force, as for any stopped instance.
    fake.call("DeleteInstance", &[("InstanceId", &id)]).await.ok();
    let instance = fake.describe_one(&id).await;
    assert_eq!(instance["Status"], "Stopping");
    assert_eq!(instance["OperationLocks"]["LockReason"][0]["LockReason"], "Recycling", "locked until gone");
    assert!(admin.reclaim(&id).await.unwrap_err().contains("404"), "on its way out: no live instance");
    fake.wait_status(&id, "gone").await;
    let inventory = fake.inventory().await;
    assert_eq!(inventory["instances"][0]["state"], "Deleted");
    assert_eq!(inventory["instances"][0]["live"], false);
}
