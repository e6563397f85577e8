//! Disks - Update (`PATCH .../disks/{name}`) as ARM answers it
//! (learn.microsoft.com/rest/api/compute/disks/update): a long-running
//! operation (202 + `Azure-AsyncOperation`) whose result the disk's GET shows;
//! growth while attached only where "Expand without downtime" allows it
//! (learn.microsoft.com/azure/virtual-machines/linux/expand-disks), never a
//! shrink; IOPS and throughput only on Ultra Disk and Premium SSD v2, within
//! their bounds and at most four changes a day
//! (learn.microsoft.com/azure/virtual-machines/disks-types).

#![allow(clippy::unwrap_used)]

mod common;

use common::{Fake, disk_path, vm_body};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const DISK_API: &str = "2024-03-02";

async fn patch(fake: &Fake, name: &str, properties: Value) -> common::Answer {
    let url = format!("{}?api-version={DISK_API}", disk_path(name));
    fake.call(Method::PATCH, &url, Some(json!({"properties": properties}))).await
}

async fn shown(fake: &Fake, name: &str) -> Value {
    let answer = fake.get(&format!("{}?api-version={DISK_API}", disk_path(name))).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.body
}

/// A running VM `name` (OS disk 50 GB Premium_LRS, data disk `<name>-data-0-data-disk` 10 GB StandardSSD_LRS).
async fn running_vm(fake: &Fake, name: &str) {
    let nic = format!("{name}-nic");
    assert_eq!(fake.put_nic(&nic, json!({})).await.status, StatusCode::CREATED);
    let created = fake.put_vm(name, vm_body(name, &nic, json!({}), "")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    fake.wait_op(created.header("azure-asyncoperation").unwrap()).await;
}

/// An empty disk `name` made with its own PUT, not attached.
async fn put_disk(fake: &Fake, name: &str, sku: &str, size: u64, performance: Option<(u64, u64)>) {
    let mut properties = json!({"creationData": {"createOption": "Empty"}, "diskSizeGB": size});
    if let Some((iops, mbps)) = performance {
        properties["diskIOPSReadWrite"] = json!(iops);
        properties["diskMBpsReadWrite"] = json!(mbps);
    }
    let body = json!({"location": "westeurope", "zones": ["1"], "sku": {"name": sku}, "properties": properties});
    let url = format!("{}?api-version={DISK_API}", disk_path(name));
    let answer = fake.call(Method::PUT, &url, Some(body)).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    fake.wait_op(answer.header("azure-asyncoperation").unwrap()).await;
}

#[tokio::test]
async fn an_attached_data_disk_grows_as_a_long_running_operation_and_the_get_shows_it() {
    let fake = Fake::start().await;
    running_vm(&fake, "dv-1").await;
    let answer = patch(&fake, "dv-1-data-0-data-disk", json!({"diskSizeGB": 20})).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    assert!(answer.header("location").is_some());
    let op = answer.header("azure-asyncoperation").unwrap().to_owned();
    assert!(op.contains("/providers/Microsoft.Compute/locations/westeurope/operations/"), "{op}");
    assert_eq!(fake.wait_op(&op).await["status"], "Succeeded");
    let disk = shown(&fake, "dv-1-data-0-data-disk").await;
    assert_eq!(disk["properties"]["diskSizeGB"], 20);
    assert_eq!(disk["properties"]["provisioningState"], "Succeeded");
    assert_eq!(disk["properties"]["diskState"], "Attached");
    let vm = fake.get(&common::vm_path("dv-1")).await;
    assert_eq!(vm.body["properties"]["storageProfile"]["dataDisks"][0]["diskSizeGB"], 20, "the VM shows it too");
    // The same size again is accepted and changes nothing.
    let same = patch(&fake, "dv-1-data-0-data-disk", json!({"diskSizeGB": 20})).await;
    assert_eq!(same.status, StatusCode::ACCEPTED, "{}", same.body);
    let counts = fake.admin_get("calls").await;
    assert_eq!(counts["calls"]["disks.update"], 2, "{counts}");
}

#[tokio::test]
async fn a_shrink_an_os_disk_growth_and_one_past_4_tib_are_refused_while_the_vm_runs() {
    let fake = Fake::start().await;
    running_vm(&fake, "dv-2").await;
    let shrink = patch(&fake, "dv-2-data-0-data-disk", json!({"diskSizeGB": 5})).await;
    assert_eq!((shrink.status, shrink.code()), (StatusCode::BAD_REQUEST, "BadRequest"), "{}", shrink.body);
    let os = patch(&fake, "dv-2-os-disk", json!({"diskSizeGB": 60})).await;
    assert_eq!((os.status, os.code()), (StatusCode::CONFLICT, "OperationNotAllowed"), "{}", os.body);
    let past = patch(&fake, "dv-2-data-0-data-disk", json!({"diskSizeGB": 5000})).await;
    assert_eq!((past.status, past.code()), (StatusCode::CONFLICT, "OperationNotAllowed"), "{}", past.body);
    let too_big = patch(&fake, "dv-2-data-0-data-disk", json!({"diskSizeGB": 40_000})).await;
    assert_eq!((too_big.status, too_big.code()), (StatusCode::BAD_REQUEST, "InvalidParameter"), "{}", too_big.body);
    assert_eq!(shown(&fake, "dv-2-os-disk").await["properties"]["diskSizeGB"], 50);
    assert_eq!(shown(&fake, "dv-2-data-0-data-disk").await["properties"]["diskSizeGB"], 10);
    // Performance on a type without it.
    let perf = patch(&fake, "dv-2-data-0-data-disk", json!({"diskIOPSReadWrite": 4000})).await;
    assert_eq!((perf.status, perf.code()), (StatusCode::BAD_REQUEST, "BadRequest"), "{}", perf.body);
    // Detached, a disk grows past 4 TiB.
    put_disk(&fake, "loose", "Premium_LRS", 1024, None).await;
    let grown = patch(&fake, "loose", json!({"diskSizeGB": 5000})).await;
    assert_eq!(grown.status, StatusCode::ACCEPTED, "{}", grown.body);
    fake.wait_op(grown.header("azure-asyncoperation").unwrap()).await;
    assert_eq!(shown(&fake, "loose").await["properties"]["diskSizeGB"], 5000);
    let gone = patch(&fake, "nobody", json!({"diskSizeGB": 5000})).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn premium_v2_performance_changes_within_its_bounds_four_times_a_day() {
    let fake = Fake::start().await;
    put_disk(&fake, "v2", "PremiumV2_LRS", 64, Some((4000, 150))).await;
    let disk = shown(&fake, "v2").await;
    assert_eq!(
        (disk["properties"]["diskIOPSReadWrite"].clone(), disk["properties"]["diskMBpsReadWrite"].clone()),
        (json!(4000), json!(150))
    );
    put_disk(&fake, "v2-default", "PremiumV2_LRS", 64, None).await;
    assert_eq!(shown(&fake, "v2-default").await["properties"]["diskIOPSReadWrite"], 3000, "the baseline");

    for (properties, target) in [
        (json!({"diskIOPSReadWrite": 90_000}), "diskIOPSReadWrite"),
        (json!({"diskIOPSReadWrite": 2000}), "diskIOPSReadWrite"),
        (json!({"diskMBpsReadWrite": 1500}), "diskMBpsReadWrite"),
        // 0.25 MB/s per IOPS: 4,000 IOPS take at most 1,000 MB/s.
        (json!({"diskMBpsReadWrite": 1100}), "diskMBpsReadWrite"),
    ] {
        let refused = patch(&fake, "v2", properties.clone()).await;
        assert_eq!(
            (refused.status, refused.code()),
            (StatusCode::BAD_REQUEST, "InvalidParameter"),
            "{properties}: {}",
            refused.body
        );
        assert_eq!(refused.body["error"]["target"], target, "{}", refused.body);
    }
    for iops in [5000, 6000, 7000, 8000] {
        let answer = patch(&fake, "v2", json!({"diskIOPSReadWrite": iops, "diskMBpsReadWrite": 200})).await;
        assert_eq!(answer.status, StatusCode::ACCEPTED, "{iops}: {}", answer.body);
        fake.wait_op(answer.header("azure-asyncoperation").unwrap()).await;
    }
    let fifth = patch(&fake, "v2", json!({"diskIOPSReadWrite": 9000})).await;
    assert_eq!((fifth.status, fifth.code()), (StatusCode::CONFLICT, "OperationNotAllowed"), "{}", fifth.body);
    assert!(fifth.body["error"]["message"].as_str().unwrap().contains("24 hours"), "{}", fifth.body);
    let disk = shown(&fake, "v2").await;
    assert_eq!(
        (disk["properties"]["diskIOPSReadWrite"].clone(), disk["properties"]["diskMBpsReadWrite"].clone()),
        (json!(8000), json!(200))
    );
    // A resize is not a performance change; a Premium SSD v2 grows past 4 TiB.
    let grown = patch(&fake, "v2", json!({"diskSizeGB": 5000})).await;
    assert_eq!(grown.status, StatusCode::ACCEPTED, "{}", grown.body);
}
