//! Marketplace images with a purchase plan and their agreements, community gallery
//! images and their regions, a VM's user-assigned identity, and the placement fault,
//! each answered as ARM answers it.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Fake, nic_id, vm_body, vm_path};
use fake_arm::{COMMUNITY_IMAGE, COMMUNITY_IMAGE_ELSEWHERE, LOCATION, SUBSCRIPTION_ID};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const USER_DATA: &str = "I2Nsb3VkLWNvbmZpZwo=";
const AGREEMENTS_API: &str = "2021-01-01";

fn image_path() -> String {
    format!(
        "/subscriptions/{SUBSCRIPTION_ID}/providers/Microsoft.Compute/locations/{LOCATION}/publishers/sap/artifacttypes/vmimage/offers/gardenlinux/skus/greatest/versions/1443.3.0"
    )
}

fn agreement_path() -> String {
    format!(
        "/subscriptions/{SUBSCRIPTION_ID}/providers/Microsoft.MarketplaceOrdering/offerTypes/virtualmachine/publishers/sap/offers/gardenlinux/plans/greatest/agreements/current?api-version={AGREEMENTS_API}"
    )
}

/// A VM body of the Garden Linux marketplace image, with `plan` when given.
fn garden_linux_vm(name: &str, plan: Option<Value>) -> Value {
    let mut body = vm_body(name, "unused", json!({}), USER_DATA);
    body["properties"]["storageProfile"]["imageReference"] =
        json!({"publisher": "sap", "offer": "gardenlinux", "sku": "greatest", "version": "1443.3.0"});
    body["properties"]["networkProfile"] = made_nic(name);
    if let Some(plan) = plan {
        body["plan"] = plan;
    }
    body
}

fn made_nic(name: &str) -> Value {
    json!({
        "networkApiVersion": "2020-11-01",
        "networkInterfaceConfigurations": [{"name": format!("{name}-nic"), "properties": {
            "primary": true, "deleteOption": "Delete",
            "ipConfigurations": [{"name": "ip", "properties": {"subnet": {"id": common::subnet_id()}}}]
        }}]
    })
}

fn plan() -> Value {
    json!({"name": "greatest", "product": "gardenlinux", "publisher": "sap"})
}

async fn provisioning_of(fake: &Fake, name: &str) -> (String, Value) {
    for _ in 0..100 {
        let vm = fake.get(&format!("{}?$expand=instanceView", vm_path(name))).await;
        let state = vm.body["properties"]["provisioningState"].as_str().unwrap_or("").to_owned();
        if state == "Succeeded" || state == "Failed" {
            return (state, vm.body);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("VM {name} never finished provisioning");
}

#[tokio::test]
async fn a_plan_image_needs_its_plan_and_accepted_terms() {
    let fake = Fake::start().await;
    // The image version shows its purchase plan.
    let image = fake.get(&image_path()).await;
    assert_eq!(image.status, StatusCode::OK, "{}", image.body);
    assert_eq!(image.body["properties"]["plan"], plan());
    // A plan-less image shows none.
    let ubuntu = fake
        .get(
            &image_path()
                .replace("sap", "Canonical")
                .replace("gardenlinux", "ubuntu-24_04-lts")
                .replace("greatest/versions/1443.3.0", "server/versions/24.04.202501140"),
        )
        .await;
    assert_eq!(ubuntu.status, StatusCode::OK, "{}", ubuntu.body);
    assert!(ubuntu.body["properties"].get("plan").is_none());

    // With the plan but terms not accepted: refused at once, nothing made.
    let refused = fake.put_vm("gl-1", garden_linux_vm("gl-1", Some(plan()))).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::BAD_REQUEST, "ResourcePurchaseValidationFailed"));
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("You have not accepted the legal terms on this subscription"), "{message}");
    assert!(message.contains(SUBSCRIPTION_ID) && message.contains("offer = 'gardenlinux'"), "{message}");
    assert_eq!(fake.get(&vm_path("gl-1")).await.status, StatusCode::NOT_FOUND);

    // The agreement: not accepted, with the terms' links and signature.
    let terms = fake.get(&agreement_path()).await;
    assert_eq!(terms.status, StatusCode::OK, "{}", terms.body);
    assert_eq!(terms.body["type"], "Microsoft.MarketplaceOrdering/offertypes");
    assert_eq!(terms.body["name"], "greatest");
    let props = &terms.body["properties"];
    assert_eq!(
        (&props["publisher"], &props["product"], &props["plan"]),
        (&json!("sap"), &json!("gardenlinux"), &json!("greatest"))
    );
    assert_eq!(props["accepted"], false);
    assert!(props["signature"].is_string() && props["licenseTextLink"].is_string());

    // An identity that may not accept: 403 naming the action on the agreement's scope.
    fake.admin("azure/marketplace", json!({"mayAcceptTerms": false})).await;
    let mut accept = terms.body.clone();
    accept["properties"]["accepted"] = json!(true);
    let denied = fake.call(Method::PUT, &agreement_path(), Some(accept.clone())).await;
    assert_eq!((denied.status, denied.code()), (StatusCode::FORBIDDEN, "AuthorizationFailed"));
    let message = denied.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("Microsoft.MarketplaceOrdering/offertypes/publishers/offers/plans/agreements/write"),
        "{message}"
    );
    assert!(message.contains("/plans/greatest/agreements/current"), "{message}");
    assert_eq!(fake.get(&agreement_path()).await.body["properties"]["accepted"], false);

    // Accepted (the GET's answer sent back, as the Go provider does).
    fake.admin("azure/marketplace", json!({"mayAcceptTerms": true})).await;
    let accepted = fake.call(Method::PUT, &agreement_path(), Some(accept)).await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.body);
    assert_eq!(accepted.body["properties"]["accepted"], true);
    assert_eq!(fake.get(&agreement_path()).await.body["properties"]["accepted"], true);
    let no_flag = fake.call(Method::PUT, &agreement_path(), Some(json!({"properties": {}}))).await;
    assert_eq!((no_flag.status, no_flag.code()), (StatusCode::BAD_REQUEST, "InvalidParameter"));

    // Now the VM with its plan is made; without the plan ARM takes the PUT and the VM fails.
    let made = fake.put_vm("gl-1", garden_linux_vm("gl-1", Some(plan()))).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    assert_eq!(made.body["plan"], plan());
    assert_eq!(provisioning_of(&fake, "gl-1").await.0, "Succeeded");
    let without = fake.put_vm("gl-2", garden_linux_vm("gl-2", None)).await;
    assert_eq!(without.status, StatusCode::CREATED, "{}", without.body);
    let (state, vm) = provisioning_of(&fake, "gl-2").await;
    assert_eq!(state, "Failed");
    let status = &vm["properties"]["instanceView"]["statuses"][0];
    assert_eq!(status["code"], "ProvisioningState/failed/VMMarketplaceInvalidInput");
    assert!(status["message"].as_str().unwrap().contains("requires Plan information in the request"), "{status}");
    // Another plan than the image's is no plan either.
    let wrong = json!({"name": "other", "product": "gardenlinux", "publisher": "sap"});
    assert_eq!(fake.put_vm("gl-3", garden_linux_vm("gl-3", Some(wrong))).await.status, StatusCode::CREATED);
    assert_eq!(provisioning_of(&fake, "gl-3").await.0, "Failed");

    // Cancelled terms refuse the next VM again.
    fake.admin("azure/marketplace", json!({"cancelAgreements": true})).await;
    let again = fake.put_vm("gl-4", garden_linux_vm("gl-4", Some(plan()))).await;
    assert_eq!(again.code(), "ResourcePurchaseValidationFailed");
    // Unknown plans have no agreement.
    let unknown = fake.get(&agreement_path().replace("plans/greatest", "plans/nope")).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
}

fn community_path(location: &str, version: &str) -> String {
    format!(
        "/subscriptions/{SUBSCRIPTION_ID}/providers/Microsoft.Compute/locations/{location}/communityGalleries/{}/images/gardenlinux/versions/{version}",
        fake_arm::COMMUNITY_GALLERY
    )
}

#[tokio::test]
async fn community_gallery_images_are_usable_where_they_are_replicated() {
    let fake = Fake::start().await;
    // The version as any subscription reads it in a region it is replicated to.
    let here = fake.get(&community_path(LOCATION, "1592.1.0")).await;
    assert_eq!(here.status, StatusCode::OK, "{}", here.body);
    assert_eq!(here.body["identifier"]["uniqueId"], COMMUNITY_IMAGE);
    assert_eq!(here.body["location"], LOCATION);
    assert!(here.body["properties"]["storageProfile"]["osDiskImage"].is_object());
    // Not replicated to westeurope: not there; in eastus it is.
    assert_eq!(fake.get(&community_path(LOCATION, "1443.10.0")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(fake.get(&community_path("eastus", "1443.10.0")).await.status, StatusCode::OK);
    assert_eq!(fake.get(&community_path(LOCATION, "9.9.9")).await.status, StatusCode::NOT_FOUND);

    let community_vm = |name: &str, image: &str| {
        let mut body = vm_body(name, "unused", json!({}), USER_DATA);
        body["properties"]["storageProfile"]["imageReference"] = json!({"communityGalleryImageId": image});
        body["properties"]["networkProfile"] = made_nic(name);
        body
    };
    let made = fake.put_vm("cg-1", community_vm("cg-1", COMMUNITY_IMAGE)).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    assert_eq!(provisioning_of(&fake, "cg-1").await.0, "Succeeded");
    // The OS disk is made from the community image.
    let inventory = fake.inventory().await;
    assert!(inventory["dependents"].as_array().unwrap().iter().any(|d| d["name"] == "cg-1-os-disk"), "{inventory}");
    // A version not replicated to the VM's region: GalleryImageNotFound, nothing made.
    let refused = fake.put_vm("cg-2", community_vm("cg-2", COMMUNITY_IMAGE_ELSEWHERE)).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::NOT_FOUND, "GalleryImageNotFound"));
    assert!(refused.body["error"]["message"].as_str().unwrap().contains("is not available in westeurope region"));
    assert_eq!(fake.get(&vm_path("cg-2")).await.status, StatusCode::NOT_FOUND);
    // Without a version: the latest one replicated to the region.
    let latest = COMMUNITY_IMAGE.rsplit_once("/Versions/").unwrap().0;
    assert_eq!(fake.put_vm("cg-3", community_vm("cg-3", latest)).await.status, StatusCode::CREATED);
}

fn identity_vm(name: &str, identity: Value) -> Value {
    let mut body = vm_body(name, "unused", json!({}), USER_DATA);
    body["properties"]["networkProfile"] = made_nic(name);
    body["identity"] = identity;
    body
}

#[tokio::test]
async fn a_user_assigned_identity_needs_valid_ids() {
    let fake = Fake::start().await;
    let id = format!(
        "/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/shoot--dev--conf/providers/Microsoft.ManagedIdentity/userAssignedIdentities/shoot--dev--conf-identity"
    );
    // The form an SDK model without the ids sends: refused as ARM refuses it.
    for empty in [json!({"type": "UserAssigned", "userAssignedIdentities": {}}), json!({"type": "UserAssigned"})] {
        let refused = fake.put_vm("id-1", identity_vm("id-1", empty)).await;
        assert_eq!((refused.status, refused.code()), (StatusCode::BAD_REQUEST, "MissingIdentityIds"));
        assert_eq!(
            refused.body["error"]["message"],
            "The identity ids must not be null or empty for 'UserAssigned' identity type."
        );
    }
    // Ids that are no user-assigned identity's ARM id.
    for bad in [
        "/subscriptions/not-a-guid/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/x-1",
        "/subscriptions/00000000-0000-4000-8000-000000000001/resourceGroups/rg/providers/Micrososft.ManagedIdentity/userAssignedIdentities/msi",
        "/subscriptions/00000000-0000-4000-8000-000000000001/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities",
        "shoot--dev--conf-identity",
    ] {
        let refused = fake
            .put_vm("id-1", identity_vm("id-1", json!({"type": "UserAssigned", "userAssignedIdentities": {bad: {}}})))
            .await;
        assert_eq!((refused.status, refused.code()), (StatusCode::BAD_REQUEST, "InvalidIdentityId"), "{bad}");
        assert!(refused.body["error"]["message"].as_str().unwrap().contains(bad));
    }
    let system_with_ids = identity_vm("id-1", json!({"type": "SystemAssigned", "userAssignedIdentities": {&id: {}}}));
    assert_eq!(fake.put_vm("id-1", system_with_ids).await.code(), "InvalidParameter");
    assert_eq!(fake.get(&vm_path("id-1")).await.status, StatusCode::NOT_FOUND, "nothing made");

    // The Go provider's form: the id as the key of an empty object.
    let made = fake
        .put_vm("id-1", identity_vm("id-1", json!({"type": "UserAssigned", "userAssignedIdentities": {&id: {}}})))
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    let vm = fake.get(&vm_path("id-1")).await.body;
    assert_eq!(vm["identity"]["type"], "UserAssigned");
    let ids = vm["identity"]["userAssignedIdentities"].as_object().unwrap();
    assert_eq!(ids.keys().collect::<Vec<_>>(), vec![&id]);
    assert!(ids[&id]["principalId"].is_string() && ids[&id]["clientId"].is_string(), "{vm}");
    assert_eq!(vm, fake.get(&vm_path("id-1")).await.body, "the identity's ids do not change between reads");
}

#[tokio::test]
async fn the_placement_fault_answers_sku_not_available() {
    let fake = Fake::start().await;
    fake.admin("faults", json!({"operation": "virtualMachines.createOrUpdate", "kind": "placement", "times": 1})).await;
    fake.put_nic("pl-1-nic", json!({})).await;
    let refused = fake.put_vm("pl-1", vm_body("pl-1", "pl-1-nic", json!({}), USER_DATA)).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::CONFLICT, "SkuNotAvailable"));
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("is currently not available in location 'westeurope'"), "{message}");
    assert!(message.contains("https://aka.ms/azureskunotavailable"), "{message}");
    assert_eq!(refused.body["error"]["details"], json!([]));
    // The fault is spent: the next PUT makes the VM (and its NIC was not reserved).
    let made = fake.put_vm("pl-1", vm_body("pl-1", "pl-1-nic", json!({}), USER_DATA)).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    assert!(
        made.body["properties"]["networkProfile"]["networkInterfaces"][0]["id"]
            .as_str()
            .unwrap()
            .eq_ignore_ascii_case(&nic_id("pl-1-nic"))
    );
}

#[tokio::test]
async fn tags_at_a_resources_scope_merge_replace_and_delete() {
    let fake = Fake::start().await;
    fake.put_nic("tg-nic", json!({"keep": "1"})).await;
    let scope = |path: String| format!("{path}/providers/Microsoft.Resources/tags/default?api-version=2021-04-01");
    let nic = scope(common::nic_path("tg-nic"));
    let merged = fake
        .call(
            Method::PATCH,
            &nic,
            Some(json!({"operation": "Merge", "properties": {"tags": {"KUBERNETES.io-role-node": "1", "b": "2"}}})),
        )
        .await;
    assert_eq!(merged.status, StatusCode::OK, "{}", merged.body);
    assert_eq!(merged.body["type"], "Microsoft.Resources/tags");
    assert_eq!(merged.body["properties"]["tags"], json!({"keep": "1", "KUBERNETES.io-role-node": "1", "b": "2"}));
    // The NIC's own reads and the generic list show them.
    let read = fake.get(&format!("{}?api-version={}", common::nic_path("tg-nic"), common::NET_API)).await;
    assert_eq!(read.body["tags"]["b"], "2");
    let deleted =
        fake.call(Method::PATCH, &nic, Some(json!({"operation": "Delete", "properties": {"tags": {"b": ""}}}))).await;
    assert_eq!(deleted.body["properties"]["tags"], json!({"keep": "1", "KUBERNETES.io-role-node": "1"}));
    let replaced = fake.call(Method::PUT, &nic, Some(json!({"properties": {"tags": {"only": "x"}}}))).await;
    assert_eq!(replaced.body["properties"]["tags"], json!({"only": "x"}));
    assert_eq!(fake.call(Method::GET, &nic, None).await.body["properties"]["tags"], json!({"only": "x"}));
    // An absent resource, and an operation ARM does not know.
    let absent = fake.call(Method::PATCH, &scope(common::disk_path("nope")), Some(json!({"operation": "Merge"}))).await;
    assert_eq!((absent.status, absent.code()), (StatusCode::NOT_FOUND, "ResourceNotFound"));
    let bad = fake.call(Method::PATCH, &nic, Some(json!({"operation": "Append", "properties": {"tags": {}}}))).await;
    assert_eq!(bad.code(), "InvalidParameter");
}

#[tokio::test]
async fn tags_at_a_scope_keep_arms_limits_and_change_nothing_when_refused() {
    let fake = Fake::start().await;
    fake.put_nic("tl-nic", json!({"keep": "1"})).await;
    let nic =
        format!("{}/providers/Microsoft.Resources/tags/default?api-version=2021-04-01", common::nic_path("tl-nic"));
    let patch = |operation: &str, tags: Value| json!({"operation": operation, "properties": {"tags": tags}});
    let refused = [
        (patch("Merge", json!({"a/b": "1"})), "InvalidTagNameCharacters"),
        (patch("Replace", json!({"a\u{1}": "1"})), "InvalidTagNameCharacters"),
        (patch("Merge", json!({"k".repeat(513): "1"})), "InvalidTagName"),
        (patch("Merge", json!({"k": "v".repeat(257)})), "InvalidTagValueLength"),
        (patch("Merge", Value::Object((0..50).map(|i| (format!("t{i}"), json!("x"))).collect())), "InvalidTags"),
    ];
    for (body, code) in refused {
        let answer = fake.call(Method::PATCH, &nic, Some(body)).await;
        assert_eq!((answer.status, answer.code()), (StatusCode::BAD_REQUEST, code), "{}", answer.body);
    }
    assert_eq!(fake.call(Method::GET, &nic, None).await.body["properties"]["tags"], json!({"keep": "1"}));
    // At the limits: 512-character names, 256-character values, 50 tags in all.
    let mut fifty: serde_json::Map<String, Value> = (0..48).map(|i| (format!("t{i}"), json!("x"))).collect();
    fifty.insert("k".repeat(512), json!("v".repeat(256)));
    let ok = fake.call(Method::PATCH, &nic, Some(patch("Merge", Value::Object(fifty)))).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
    assert_eq!(ok.body["properties"]["tags"].as_object().unwrap().len(), 50);
    // A Delete names tags: a name ARM would refuse to set is no error there.
    let deleted = fake.call(Method::PATCH, &nic, Some(patch("Delete", json!({"a/b": "", "t0": "x"})))).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.body);
    assert_eq!(deleted.body["properties"]["tags"].as_object().unwrap().len(), 49);
}

/// A VM of `properties` merged into a made-NIC body.
fn vm_with(name: &str, properties: Value) -> Value {
    let mut body = vm_body(name, "unused", json!({}), USER_DATA);
    body["properties"]["networkProfile"] = made_nic(name);
    if let (Some(target), Value::Object(extra)) = (body["properties"].as_object_mut(), properties) {
        target.extend(extra);
    }
    body
}

#[tokio::test]
async fn spot_fields_are_checked_as_arm_checks_them_and_returned() {
    let fake = Fake::start().await;
    let refused = |body: Value| {
        let fake = &fake;
        async move {
            let answer = fake.put_vm("spot-1", body).await;
            (answer.status, answer.code().to_owned(), answer.body["error"]["target"].as_str().unwrap_or("").to_owned())
        }
    };
    let bad = StatusCode::BAD_REQUEST;
    // The Spot error table's codes (learn.microsoft.com/azure/virtual-machines/error-codes-spot).
    assert_eq!(
        refused(vm_with("spot-1", json!({"evictionPolicy": "Delete"}))).await,
        (bad, "EvictionPolicyCanBeSetOnlyOnAzureSpotVirtualMachines".into(), "evictionPolicy".into())
    );
    assert_eq!(
        refused(vm_with("spot-1", json!({"priority": "Regular", "evictionPolicy": "Deallocate"}))).await.1,
        "EvictionPolicyCanBeSetOnlyOnAzureSpotVirtualMachines"
    );
    assert_eq!(
        refused(vm_with("spot-1", json!({"priority": "Spot", "billingProfile": {"maxPrice": 0}}))).await,
        (bad, "MaxPriceValueInvalid".into(), "billingProfile.maxPrice".into())
    );
    assert_eq!(
        refused(vm_with("spot-1", json!({"priority": "Spot", "evictionPolicy": "Stop"}))).await,
        (bad, "InvalidParameter".into(), "evictionPolicy".into())
    );
    assert_eq!(refused(vm_with("spot-1", json!({"priority": "Cheap"}))).await.2, "priority");
    assert_eq!(refused(vm_with("spot-1", json!({"billingProfile": {"maxPrice": 0.5}}))).await.1, "InvalidParameter");
    let set = format!(
        "/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/shoot--dev--conf/providers/Microsoft.Compute/availabilitySets/as-1"
    );
    assert_eq!(
        refused(vm_with("spot-1", json!({"priority": "Spot", "availabilitySet": {"id": set}}))).await.1,
        "AzureSpotVMNotSupportedInAvailabilitySet"
    );
    assert_eq!(fake.get(&vm_path("spot-1")).await.status, StatusCode::NOT_FOUND, "nothing made");

    // A valid Spot VM: recorded and returned as sent.
    let spot = json!({"priority": "Spot", "evictionPolicy": "Delete", "billingProfile": {"maxPrice": 0.01538}});
    let made = fake.put_vm("spot-1", vm_with("spot-1", spot)).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    let vm = fake.get(&vm_path("spot-1")).await.body;
    assert_eq!(vm["properties"]["priority"], "Spot");
    assert_eq!(vm["properties"]["evictionPolicy"], "Delete");
    assert_eq!(vm["properties"]["billingProfile"]["maxPrice"], 0.01538);

    // A VM made without a priority cannot become Spot.
    let regular = fake.put_vm("reg-1", vm_with("reg-1", json!({}))).await;
    assert_eq!(regular.status, StatusCode::CREATED, "{}", regular.body);
    assert_eq!(
        fake.put_vm("reg-1", vm_with("reg-1", json!({"priority": "Spot"}))).await.code(),
        "VMPriorityCannotBeApplied"
    );
}

#[tokio::test]
async fn encryption_at_host_needs_the_subscription_feature() {
    let fake = Fake::start().await;
    let asking = |on: bool| vm_with("eah-1", json!({"securityProfile": {"encryptionAtHost": on}}));
    // Feature off: the property is refused, `false` too, with ARM's message.
    let off = fake.admin("azure/features", json!({"encryptionAtHost": false})).await;
    assert_eq!(off["encryptionAtHost"], false);
    for on in [true, false] {
        let refused = fake.put_vm("eah-1", asking(on)).await;
        assert_eq!((refused.status, refused.code()), (StatusCode::BAD_REQUEST, "InvalidParameter"), "{on}");
        assert_eq!(refused.body["error"]["target"], "securityProfile.encryptionAtHost");
        assert_eq!(
            refused.body["error"]["message"],
            "The property 'securityProfile.encryptionAtHost' is not valid because the 'Microsoft.Compute/EncryptionAtHost' feature is not enabled for this subscription."
        );
    }
    // Without the property a VM is made whatever the feature.
    assert_eq!(fake.put_vm("plain-1", vm_with("plain-1", json!({}))).await.status, StatusCode::CREATED);
    // Feature on (as seeded): accepted, recorded and returned.
    fake.admin("azure/features", json!({"encryptionAtHost": true})).await;
    let made = fake.put_vm("eah-1", asking(true)).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    assert_eq!(fake.get(&vm_path("eah-1")).await.body["properties"]["securityProfile"]["encryptionAtHost"], true);
}
