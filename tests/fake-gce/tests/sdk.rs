//! The real `google-cloud-compute-v1` client against the fake: proves that the
//! wire shapes (paths, query parameters, JSON bodies, errors) parse.

use google_cloud_auth::credentials::anonymous::Builder as Anonymous;
use google_cloud_compute_v1::client::{Images, Instances, ZoneOperations};
use google_cloud_compute_v1::model::{
    AccessConfig, AttachedDisk, AttachedDiskInitializeParams, Binding, GlobalSetPolicyRequest, Instance,
    NetworkInterface, instance, operation,
};
use google_cloud_gax::paginator::{ItemPaginator as _, Paginator as _};
use google_cloud_lro::Poller as _;
use serde_json::json;

const PROJECT: &str = "proj";
const ZONE: &str = "us-central1-a";

fn vm(name: &str) -> Instance {
    Instance::new()
        .set_name(name)
        .set_machine_type(format!("zones/{ZONE}/machineTypes/e2-small"))
        .set_labels([("sidecar-machine", name)])
        .set_can_ip_forward(true)
        .set_disks([AttachedDisk::new().set_boot(true).set_auto_delete(true).set_initialize_params(
            AttachedDiskInitializeParams::new().set_source_image(fake_gce::PUBLIC_IMAGE).set_disk_size_gb(20),
        )])
        .set_network_interfaces([NetworkInterface::new()
            .set_network("global/networks/default")
            .set_access_configs([AccessConfig::new().set_name("External NAT")])])
}

#[tokio::test]
async fn real_client_round_trip() -> Result<(), Box<dyn std::error::Error>> {
    let fake = fake_gce::start("127.0.0.1:0".parse()?).await?;
    let http = reqwest::Client::new();
    http.post(format!("{}/timing", fake.admin_url())).json(&json!({"boot_ms": 200, "stop_ms": 200})).send().await?;
    let client =
        Instances::builder().with_endpoint(fake.url()).with_credentials(Anonymous::new().build()).build().await?;

    let op = client
        .insert()
        .set_project(PROJECT)
        .set_zone(ZONE)
        .set_request_id(uuid::Uuid::new_v4().to_string())
        .set_body(vm("vm-sdk"))
        .send()
        .await?;
    assert_eq!(op.status, Some(operation::Status::Running));
    let op_name = op.name.clone().expect("operation name");
    let got = client.get_operation().set_project(PROJECT).set_zone(ZONE).set_operation(&op_name).send().await?;
    assert_eq!(got.name.as_deref(), Some(op_name.as_str()));
    assert!(got.target_id.is_some());

    let vm = client.get().set_project(PROJECT).set_zone(ZONE).set_instance("vm-sdk").send().await?;
    assert_eq!(vm.status, Some(instance::Status::Provisioning));
    assert_eq!(vm.id, got.target_id);
    let nic = &vm.network_interfaces[0];
    assert!(nic.network_ip.as_deref().is_some_and(|ip| ip.starts_with("10.")));
    assert!(nic.access_configs[0].nat_ip.is_some());
    assert_eq!(vm.disks[0].disk_size_gb, Some(20));

    let mut items =
        client.list().set_project(PROJECT).set_zone(ZONE).set_filter("labels.sidecar-machine=vm-sdk").by_item();
    let mut names = Vec::new();
    while let Some(item) = items.next().await {
        names.push(item?.name.unwrap_or_default());
    }
    assert_eq!(names, ["vm-sdk"]);

    let err = client.get().set_project(PROJECT).set_zone(ZONE).set_instance("missing").send().await.expect_err("404");
    assert_eq!(err.http_status_code(), Some(404));

    let done = client
        .delete()
        .set_project(PROJECT)
        .set_zone(ZONE)
        .set_instance("vm-sdk")
        .set_request_id(uuid::Uuid::new_v4().to_string())
        .poller()
        .until_done()
        .await?;
    assert_eq!(done.status, Some(operation::Status::Done));
    let err = client.get().set_project(PROJECT).set_zone(ZONE).set_instance("vm-sdk").send().await.expect_err("gone");
    assert_eq!(err.http_status_code(), Some(404));

    // Images and IAM, acting as the image owner through the admin default caller.
    http.post(format!("{}/gce/caller", fake.admin_url()))
        .json(&json!({"principal": fake_gce::IMAGE_OWNER}))
        .send()
        .await?;
    let images = Images::builder().with_endpoint(fake.url()).with_credentials(Anonymous::new().build()).build().await?;
    let image = images.get().set_project("image-owner").set_image("custom-gardenlinux").send().await?;
    assert_eq!(image.family.as_deref(), Some("gardenlinux"));
    let policy = images.get_iam_policy().set_project("image-owner").set_resource("custom-gardenlinux").send().await?;
    let old_etag = policy.etag.clone();
    let mut bindings = policy.bindings.clone();
    bindings.push(
        Binding::new()
            .set_role("roles/compute.imageUser")
            .set_members(["serviceAccount:n@proj.iam.gserviceaccount.com"]),
    );
    let updated = images
        .set_iam_policy()
        .set_project("image-owner")
        .set_resource("custom-gardenlinux")
        .set_body(GlobalSetPolicyRequest::new().set_policy(policy.clone().set_bindings(bindings)))
        .send()
        .await?;
    assert_ne!(updated.etag, old_etag);
    assert_eq!(updated.bindings.len(), 2);
    let stale = images
        .set_iam_policy()
        .set_project("image-owner")
        .set_resource("custom-gardenlinux")
        .set_body(GlobalSetPolicyRequest::new().set_policy(policy))
        .send()
        .await
        .expect_err("stale etag");
    assert_eq!(stale.http_status_code(), Some(412));
    Ok(())
}

/// `zoneOperations.list` through the real client: the regex name filter, `maxResults`
/// pages (`nextPageToken` followed by the client's paginator) and the statuses parse.
#[tokio::test]
async fn real_client_lists_zone_operations() -> Result<(), Box<dyn std::error::Error>> {
    let fake = fake_gce::start("127.0.0.1:0".parse()?).await?;
    let http = reqwest::Client::new();
    http.post(format!("{}/timing", fake.admin_url())).json(&json!({"boot_ms": 200, "stop_ms": 200})).send().await?;
    let instances =
        Instances::builder().with_endpoint(fake.url()).with_credentials(Anonymous::new().build()).build().await?;
    let operations =
        ZoneOperations::builder().with_endpoint(fake.url()).with_credentials(Anonymous::new().build()).build().await?;
    let mut ops = Vec::new();
    for name in ["vm-op-a", "vm-op-b", "vm-op-c"] {
        let op = instances
            .insert()
            .set_project(PROJECT)
            .set_zone(ZONE)
            .set_request_id(uuid::Uuid::new_v4().to_string())
            .set_body(vm(name))
            .send()
            .await?;
        ops.push(op.name.clone().expect("operation name"));
    }
    let filter = format!("name eq \"(?:{}|{})\"", ops[0], ops[2]);
    let mut wanted = vec![ops[0].clone(), ops[2].clone()];
    wanted.sort();

    // One page of one: the first match and a token.
    let first =
        operations.list().set_project(PROJECT).set_zone(ZONE).set_filter(&filter).set_max_results(1_u32).send().await?;
    assert_eq!(first.kind.as_deref(), Some("compute#operationList"));
    assert_eq!(first.items.iter().map(|o| o.name.clone().unwrap_or_default()).collect::<Vec<_>>(), wanted[..1]);
    let token = first.next_page_token.clone().expect("a next page token");
    let second = operations
        .list()
        .set_project(PROJECT)
        .set_zone(ZONE)
        .set_filter(&filter)
        .set_max_results(1_u32)
        .set_page_token(token)
        .send()
        .await?;
    assert_eq!(second.items.iter().map(|o| o.name.clone().unwrap_or_default()).collect::<Vec<_>>(), wanted[1..]);
    assert!(second.next_page_token.as_deref().unwrap_or_default().is_empty());

    // The client's paginator follows the tokens: both matches, once each, as insert operations.
    let mut pages =
        operations.list().set_project(PROJECT).set_zone(ZONE).set_filter(&filter).set_max_results(1_u32).by_page();
    let mut seen = Vec::new();
    let mut page_count = 0;
    while let Some(page) = pages.next().await {
        page_count += 1;
        for op in page?.items {
            assert_eq!(op.operation_type.as_deref(), Some("insert"));
            assert!(op.status.is_some());
            assert!(op.target_link.as_deref().is_some_and(|t| t.contains("/instances/vm-op-")));
            seen.push(op.name.unwrap_or_default());
        }
    }
    assert_eq!(seen, wanted);
    assert_eq!(page_count, 2);

    // Once the inserts are done, the filtered list reports DONE.
    for op in &ops {
        operations.wait().set_project(PROJECT).set_zone(ZONE).set_operation(op).send().await?;
    }
    let mut items = operations.list().set_project(PROJECT).set_zone(ZONE).set_filter(&filter).by_item();
    let mut statuses = Vec::new();
    while let Some(op) = items.next().await {
        statuses.push(op?.status);
    }
    assert_eq!(statuses, [Some(operation::Status::Done), Some(operation::Status::Done)]);

    let err = operations
        .list()
        .set_project(PROJECT)
        .set_zone(ZONE)
        .set_filter("name eq \"operation-(\"")
        .send()
        .await
        .expect_err("a bad regex");
    assert_eq!(err.http_status_code(), Some(400));
    Ok(())
}
