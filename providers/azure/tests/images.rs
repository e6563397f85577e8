//! Classes the Go provider and the Gardener extension write, end to end on the fake:
//! a user-assigned identity (the fake refuses the empty form ARM refuses), a Garden
//! Linux marketplace image with a purchase plan (the plan set, its terms accepted once),
//! `skipMarketplaceAgreement`, a community gallery image, and a size the location
//! cannot place (RESOURCE_EXHAUSTED).

#![allow(clippy::unwrap_used)]

mod support;

use machine_driver_api::{Driver, ErrorKind};
use serde_json::{Value, json};
use support::{FakeCloud, class_with, ctx};

const IDENTITY: &str = "/subscriptions/00000000-0000-4000-8000-000000000001/resourceGroups/shoot--dev--conf/providers/Microsoft.ManagedIdentity/userAssignedIdentities/shoot--dev--conf-identity";

impl FakeCloud {
    /// The VM `name` as ARM shows it.
    async fn vm(&self, name: &str) -> Value {
        let (status, vm) =
            self.arm("GET", &self.arm_path("Microsoft.Compute/virtualMachines", name), "2024-07-01", None).await;
        assert_eq!(status, 200, "VM {name}: {vm}");
        vm
    }

    /// Polls the VM's status until it runs (or fails, answering the error).
    async fn until_running(
        &self,
        driver: &machine_driver_azure::AzureDriver,
        name: &str,
        class: &machine_driver_api::MachineClass,
    ) -> Result<(), machine_driver_api::DriverError> {
        let mut req = self.machine_ref(name);
        req.class = class.clone();
        for _ in 0..100 {
            if driver.get_machine_status(&ctx("status", 10), req.clone()).await?.vm_state == "running" {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("{name} never runs");
    }
}

fn create(
    cloud: &FakeCloud,
    name: &str,
    class: &machine_driver_api::MachineClass,
) -> machine_driver_api::CreateMachine {
    let mut req = cloud.create_request(name);
    req.class = class.clone();
    req
}

#[tokio::test]
async fn an_identity_class_creates_a_vm_with_that_identity() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    let class = class_with(&cloud.class, |spec| spec["properties"]["identityID"] = json!(IDENTITY));
    driver.create_machine(&ctx("create", 30), create(&cloud, "id-1", &class)).await.unwrap();
    let vm = cloud.vm("id-1").await;
    assert_eq!(vm["identity"]["type"], "UserAssigned");
    let ids: Vec<&String> = vm["identity"]["userAssignedIdentities"].as_object().unwrap().keys().collect();
    assert_eq!(ids, vec![IDENTITY], "{vm}");
    cloud.until_running(&driver, "id-1", &class).await.unwrap();
}

#[tokio::test]
async fn a_garden_linux_urn_gets_its_plan_and_the_terms_are_accepted_once() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    // The example class: sap:gardenlinux:greatest, whose image carries a plan.
    driver.create_machine(&ctx("create", 30), cloud.create_request("gl-1")).await.unwrap();
    assert_eq!(
        cloud.calls().await.breakdown(),
        "marketplaceAgreements.create×1, marketplaceAgreements.get×1, virtualMachineImages.get×1, virtualMachines.createOrUpdate×1"
    );
    assert_eq!(
        cloud.vm("gl-1").await["plan"],
        json!({"name": "greatest", "product": "gardenlinux", "publisher": "sap"})
    );
    cloud.until_running(&driver, "gl-1", &cloud.class).await.unwrap();
    // The plan and the accepted terms are remembered: the next create is the one PUT.
    cloud.admin.reset_calls().await.unwrap();
    driver.create_machine(&ctx("create", 30), cloud.create_request("gl-2")).await.unwrap();
    assert_eq!(cloud.calls().await.breakdown(), "virtualMachines.createOrUpdate×1");
    assert!(cloud.vm("gl-2").await["plan"].is_object());

    // Terms cancelled since: ARM refuses the PUT, the driver accepts them again once.
    cloud.admin("/azure/marketplace", json!({"cancelAgreements": true})).await;
    cloud.admin.reset_calls().await.unwrap();
    driver.create_machine(&ctx("create", 30), cloud.create_request("gl-3")).await.unwrap();
    assert_eq!(
        cloud.calls().await.breakdown(),
        "marketplaceAgreements.create×1, marketplaceAgreements.get×1, virtualMachines.createOrUpdate×2"
    );
    cloud.until_running(&driver, "gl-3", &cloud.class).await.unwrap();
}

#[tokio::test]
async fn without_permission_to_accept_the_error_names_the_missing_action() {
    let cloud = FakeCloud::start().await;
    cloud.admin("/azure/marketplace", json!({"mayAcceptTerms": false})).await;
    let driver = cloud.driver();
    let err = driver.create_machine(&ctx("create", 30), cloud.create_request("gl-1")).await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::PermissionDenied, "MARKETPLACE_TERMS_NOT_ACCEPTED"), "{err:?}");
    assert!(
        err.message().contains("Microsoft.MarketplaceOrdering/offertypes/publishers/offers/plans/agreements/write"),
        "{}",
        err.message()
    );
    assert!(err.message().contains("az vm image terms accept --publisher sap --offer gardenlinux --plan greatest"));
    assert!(cloud.live_resources("gl-1").await.is_empty(), "nothing is made");
    assert_eq!(
        cloud.calls().await.breakdown(),
        "marketplaceAgreements.create×1, marketplaceAgreements.get×1, virtualMachineImages.get×1"
    );
}

#[tokio::test]
async fn skip_marketplace_agreement_reads_no_plan() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    // A plan-less image with the Go-style switch: the one PUT, no image read.
    let ubuntu = class_with(&cloud.class, |spec| {
        spec["properties"]["storageProfile"]["imageReference"] = json!({
            "urn": "Canonical:ubuntu-24_04-lts:server:24.04.202501140", "skipMarketplaceAgreement": true
        });
    });
    driver.create_machine(&ctx("create", 30), create(&cloud, "sk-1", &ubuntu)).await.unwrap();
    assert_eq!(cloud.calls().await.breakdown(), "virtualMachines.createOrUpdate×1");
    cloud.until_running(&driver, "sk-1", &ubuntu).await.unwrap();
    // Without the switch the image is read once (it has no plan, which is remembered).
    let plain = class_with(&ubuntu, |spec| {
        spec["properties"]["storageProfile"]["imageReference"]["skipMarketplaceAgreement"] = json!(false);
    });
    cloud.admin.reset_calls().await.unwrap();
    for name in ["sk-2", "sk-3"] {
        driver.create_machine(&ctx("create", 30), create(&cloud, name, &plain)).await.unwrap();
    }
    assert_eq!(cloud.calls().await.breakdown(), "virtualMachineImages.get×1, virtualMachines.createOrUpdate×2");
    assert!(cloud.vm("sk-2").await.get("plan").is_none());
    // The switch on the plan image: no plan is sent, as the Go provider, and ARM fails the VM.
    let skipped = class_with(&cloud.class, |spec| {
        spec["properties"]["storageProfile"]["imageReference"]["skipMarketplaceAgreement"] = json!(true);
    });
    cloud.admin.reset_calls().await.unwrap();
    driver.create_machine(&ctx("create", 30), create(&cloud, "sk-4", &skipped)).await.unwrap();
    assert_eq!(cloud.calls().await.breakdown(), "virtualMachines.createOrUpdate×1");
    let err = cloud.until_running(&driver, "sk-4", &skipped).await.unwrap_err();
    assert_eq!(err.reason(), "VMMarketplaceInvalidInput", "{err:?}");
}

#[tokio::test]
async fn a_garden_linux_community_gallery_class_creates_a_vm() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    let community = |image: &str| {
        class_with(&cloud.class, |spec| {
            spec["properties"]["storageProfile"]["imageReference"] = json!({"communityGalleryImageID": image});
        })
    };
    let class = community(fake_arm::COMMUNITY_IMAGE);
    driver.create_machine(&ctx("create", 30), create(&cloud, "cg-1", &class)).await.unwrap();
    assert_eq!(cloud.calls().await.breakdown(), "virtualMachines.createOrUpdate×1");
    assert_eq!(
        cloud.vm("cg-1").await["properties"]["storageProfile"]["imageReference"]["communityGalleryImageId"],
        fake_arm::COMMUNITY_IMAGE
    );
    cloud.until_running(&driver, "cg-1", &class).await.unwrap();
    // A version not replicated to the class's location: the class's error, nothing made.
    let elsewhere = community(fake_arm::COMMUNITY_IMAGE_ELSEWHERE);
    let err = driver.create_machine(&ctx("create", 30), create(&cloud, "cg-2", &elsewhere)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err:?}");
    assert_eq!(err.field(), Some("providerSpec.properties.storageProfile.imageReference"));
    assert!(
        err.message().contains("GalleryImageNotFound") && err.message().contains("westeurope"),
        "{}",
        err.message()
    );
    assert!(cloud.live_resources("cg-2").await.is_empty());
}

#[tokio::test]
async fn a_size_the_location_cannot_place_is_resource_exhausted() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    cloud
        .admin("/faults", json!({"operation": "virtualMachines.createOrUpdate", "kind": "placement", "times": 1}))
        .await;
    let err = driver.create_machine(&ctx("create", 30), cloud.create_request("pl-1")).await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::ResourceExhausted, "SkuNotAvailable"), "{err:?}");
    assert!(cloud.live_resources("pl-1").await.is_empty(), "a refused PUT makes nothing");
    // The fault was one refusal: the retry makes the VM.
    driver.create_machine(&ctx("create", 30), cloud.create_request("pl-1")).await.unwrap();
}
