//! Dual-stack classes as the Gardener GCP extension writes them: the created
//! instance carries the stack type and the alias IP range (`useAliasIPs`),
//! and GetMachineStatus answers its addresses.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use machine_driver_api::{AddressType, CallContext, Driver, ErrorKind};
use serde_json::{Value, json};
use support::FakeCloud;

/// The example class with `nic` as its only network interface.
fn with_nic(s: &mut FakeCloud, nic: Value) {
    let mut spec: Value = serde_json::from_slice(&s.class.provider_spec).unwrap();
    spec["networkInterfaces"] = json!([nic]);
    s.class.provider_spec = spec.to_string().into_bytes();
}

/// The interface the extension writes for a dual-stack shoot, with `ipv6accessType` `access`.
fn gardener_nic(access: &str) -> Value {
    json!({"useAliasIPs": true, "subnetwork": "shoot--demo--local-nodes", "disableExternalIP": true,
           "stackType": "IPV4_IPV6", "ipv6accessType": access, "ipCidrRange": "/24",
           "subnetworkRangeName": "ipv4-pod-cidr"})
}

fn ctx(rpc: &'static str) -> CallContext {
    CallContext::with_timeout(rpc, Duration::from_secs(10))
}

/// Creates machine `name` and returns the fake's network interfaces of its instance.
async fn create(s: &FakeCloud, name: &str) -> Vec<Value> {
    let driver = s.driver(0.0, 1).await;
    driver.create_machine(&ctx("CreateMachine"), s.create_request(name)).await.unwrap();
    let inventory = s.inventory().await;
    let vm = inventory.iter().find(|i| i.name == name).expect("created");
    vm.extra["networkInterfaces"].as_array().cloned().unwrap()
}

#[tokio::test]
async fn a_dual_stack_class_creates_alias_range_and_stack_type_and_status_answers_the_addresses() {
    let mut s = FakeCloud::start().await;
    with_nic(&mut s, gardener_nic("EXTERNAL"));
    let nics = create(&s, "ds-external").await;
    assert_eq!(nics.len(), 1);
    let nic = &nics[0];
    assert_eq!(nic["stackType"], "IPV4_IPV6");
    assert_eq!(nic["ipv6AccessType"], "EXTERNAL");
    assert!(
        nic["subnetwork"].as_str().unwrap().ends_with("/regions/europe-west1/subnetworks/shoot--demo--local-nodes")
    );
    let ranges = nic["aliasIpRanges"].as_array().unwrap();
    assert_eq!(ranges.len(), 1);
    assert_eq!(ranges[0]["subnetworkRangeName"], "ipv4-pod-cidr");
    assert!(ranges[0]["ipCidrRange"].as_str().unwrap().ends_with("/24"), "{ranges:?}");
    assert!(nic.get("accessConfigs").is_none() && nic.get("ipv6AccessConfigs").is_none(), "{nic}");

    let driver = s.driver(0.0, 1).await;
    let status = driver.get_machine_status(&ctx("GetMachineStatus"), s.machine_ref("ds-external")).await.unwrap();
    let internal_v4 = nic["networkIP"].as_str().unwrap();
    // No IPv6 address without an IPv6 access config (the Go provider sets none); alias ranges are not addresses.
    assert_eq!(status.addresses.len(), 1, "{:?}", status.addresses);
    assert_eq!(status.addresses[0].kind, AddressType::InternalIp);
    assert_eq!(status.addresses[0].address, internal_v4);

    // On an internal IPv6 subnetwork the interface's IPv6 address is reported too.
    with_nic(&mut s, gardener_nic("INTERNAL"));
    let nics = create(&s, "ds-internal").await;
    let v6 = nics[0]["ipv6Address"].as_str().expect("internal IPv6").to_string();
    let status = driver.get_machine_status(&ctx("GetMachineStatus"), s.machine_ref("ds-internal")).await.unwrap();
    let got: Vec<(AddressType, String)> = status.addresses.iter().map(|a| (a.kind, a.address.clone())).collect();
    assert_eq!(
        got,
        vec![
            (AddressType::InternalIp, nics[0]["networkIP"].as_str().unwrap().to_string()),
            (AddressType::InternalIp, v6)
        ]
    );
}

#[tokio::test]
async fn use_alias_ips_false_creates_no_alias_range_and_an_empty_range_is_refused() {
    let mut s = FakeCloud::start().await;
    let mut nic = gardener_nic("INTERNAL");
    nic["useAliasIPs"] = json!(false);
    with_nic(&mut s, nic);
    let nics = create(&s, "ds-no-alias").await;
    assert_eq!(nics[0]["stackType"], "IPV4_IPV6");
    assert!(nics[0].get("aliasIpRanges").is_none(), "{}", nics[0]);

    // useAliasIPs without ipCidrRange: sent as the Go provider sends it, refused by Compute.
    let mut nic = gardener_nic("INTERNAL");
    nic["ipCidrRange"] = json!("");
    with_nic(&mut s, nic);
    let driver = s.driver(0.0, 1).await;
    let err = driver.create_machine(&ctx("CreateMachine"), s.create_request("ds-empty")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err:?}");
    assert!(err.to_string().contains("aliasIpRanges[0].ipCidrRange"), "{err}");
}
