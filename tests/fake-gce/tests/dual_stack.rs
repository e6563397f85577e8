//! Network interfaces with alias IP ranges, stack types and IPv6: stored and
//! shown on instances.get/list as Compute Engine shows them, bad values
//! refused with 400 `invalid`.

mod common;

use common::{Fake, instance_body};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// An insert body whose only network interface is `nic`.
fn with_nic(name: &str, nic: Value) -> Value {
    let mut body = instance_body(name, json!({}));
    body["networkInterfaces"] = json!([nic]);
    body
}

/// Inserts `body`, asserting success, and returns the instance as instances.get shows it.
async fn created(fake: &Fake, body: &Value) -> Value {
    let (status, op) = fake.insert(body, None).await;
    assert_eq!(status, StatusCode::OK, "{op}");
    let (status, instance) = fake.get_instance(body["name"].as_str().expect("name")).await;
    assert_eq!(status, StatusCode::OK, "{instance}");
    instance
}

/// The answer to an insert of `body` that must be refused: the error's reason and message.
async fn refused(fake: &Fake, body: &Value) -> (String, String) {
    let (status, err) = fake.insert(body, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    (
        err["error"]["errors"][0]["reason"].as_str().unwrap_or_default().to_string(),
        err["error"]["message"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test]
async fn a_dual_stack_interface_carries_its_alias_range_and_ipv6() {
    let fake = Fake::start().await;
    // What the GCP driver sends for a Gardener dual-stack class (ipv6AccessType EXTERNAL, no access config).
    let body = with_nic(
        "vm-ds-ext",
        json!({"subnetwork": "regions/us-central1/subnetworks/nodes", "stackType": "IPV4_IPV6",
               "ipv6AccessType": "EXTERNAL",
               "aliasIpRanges": [{"ipCidrRange": "/24", "subnetworkRangeName": "ipv4-pod-cidr"}]}),
    );
    let i = created(&fake, &body).await;
    let nic = &i["networkInterfaces"][0];
    assert_eq!(nic["stackType"], "IPV4_IPV6");
    assert_eq!(nic["ipv6AccessType"], "EXTERNAL");
    let ranges = nic["aliasIpRanges"].as_array().expect("aliasIpRanges");
    assert_eq!(ranges.len(), 1);
    assert_eq!(ranges[0]["subnetworkRangeName"], "ipv4-pod-cidr");
    let cidr = ranges[0]["ipCidrRange"].as_str().expect("allocated range");
    assert!(cidr.starts_with("10.") && cidr.ends_with("/24"), "{cidr}");
    assert!(nic.get("ipv6Address").is_none(), "external IPv6 only through an IPv6 access config: {nic}");
    assert!(nic.get("accessConfigs").is_none());

    // An internal IPv6 subnetwork: an internal /96 on the interface.
    let body = with_nic(
        "vm-ds-int",
        json!({"network": "global/networks/default", "stackType": "IPV4_IPV6", "ipv6AccessType": "INTERNAL",
               "aliasIpRanges": [{"ipCidrRange": "/24"}]}),
    );
    let i = created(&fake, &body).await;
    let nic = &i["networkInterfaces"][0];
    let v6 = nic["ipv6Address"].as_str().expect("internal IPv6");
    assert!(v6.parse::<std::net::Ipv6Addr>().is_ok() && v6.starts_with("fd20:"), "{v6}");
    assert_eq!(nic["internalIpv6PrefixLength"], 96);
    let second = nic["aliasIpRanges"][0]["ipCidrRange"].as_str().expect("range");
    assert_ne!(second, cidr, "ranges do not overlap");
    assert!(nic["aliasIpRanges"][0].get("subnetworkRangeName").is_none());

    // An external IPv6 access config gets the external /96.
    let body = with_nic(
        "vm-ds-cfg",
        json!({"network": "global/networks/default", "stackType": "IPV4_IPV6",
               "ipv6AccessConfigs": [{"type": "DIRECT_IPV6"}]}),
    );
    let i = created(&fake, &body).await;
    let nic = &i["networkInterfaces"][0];
    assert_eq!(nic["ipv6AccessType"], "EXTERNAL");
    let cfg = &nic["ipv6AccessConfigs"][0];
    assert_eq!(cfg["type"], "DIRECT_IPV6");
    assert_eq!(cfg["externalIpv6PrefixLength"], 96);
    assert!(cfg["externalIpv6"].as_str().is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok()), "{cfg}");

    // Given ranges are kept; the list shows what get shows.
    let body = with_nic(
        "vm-v4",
        json!({"network": "global/networks/default",
               "aliasIpRanges": [{"ipCidrRange": "10.9.8.0/24", "subnetworkRangeName": "pods"}, {"ipCidrRange": "10.9.9.7"}]}),
    );
    let i = created(&fake, &body).await;
    let nic = &i["networkInterfaces"][0];
    assert_eq!(nic["stackType"], "IPV4_ONLY");
    assert!(nic.get("ipv6AccessType").is_none());
    assert_eq!(
        nic["aliasIpRanges"],
        json!([{"ipCidrRange": "10.9.8.0/24", "subnetworkRangeName": "pods"}, {"ipCidrRange": "10.9.9.7/32"}])
    );
    let (status, list) = fake.list(&[("filter", "name = \"vm-v4\"")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["items"][0]["networkInterfaces"][0]["aliasIpRanges"], nic["aliasIpRanges"]);
}

#[tokio::test]
async fn bad_stack_ipv6_and_alias_values_are_400_invalid() {
    let fake = Fake::start().await;
    let net = || json!({"network": "global/networks/default"});
    let cases: Vec<(&str, Value, &str)> = vec![
        ("stackType", json!({"stackType": "IPV5"}), "resource.networkInterfaces[0].stackType"),
        ("ipv6AccessType", json!({"stackType": "IPV4_IPV6", "ipv6AccessType": "PUBLIC"}), ".ipv6AccessType"),
        (
            "config on IPv4",
            json!({"ipv6AccessConfigs": [{"type": "DIRECT_IPV6"}]}),
            "resource.networkInterfaces[0].ipv6AccessConfigs",
        ),
        (
            "config type",
            json!({"stackType": "IPV4_IPV6", "ipv6AccessConfigs": [{"type": "ONE_TO_ONE_NAT"}]}),
            "ipv6AccessConfigs[0].type",
        ),
        ("no cidr", json!({"aliasIpRanges": [{"subnetworkRangeName": "pods"}]}), "aliasIpRanges[0].ipCidrRange"),
        ("bad mask", json!({"aliasIpRanges": [{"ipCidrRange": "/33"}]}), "aliasIpRanges[0].ipCidrRange"),
        ("not a cidr", json!({"aliasIpRanges": [{"ipCidrRange": "pods"}]}), "aliasIpRanges[0].ipCidrRange"),
        ("host bits", json!({"aliasIpRanges": [{"ipCidrRange": "10.1.2.3/24"}]}), "aliasIpRanges[0].ipCidrRange"),
        (
            "range name",
            json!({"aliasIpRanges": [{"ipCidrRange": "/24", "subnetworkRangeName": "Pods_1"}]}),
            "aliasIpRanges[0].subnetworkRangeName",
        ),
    ];
    for (i, (what, extra, field)) in cases.into_iter().enumerate() {
        let mut nic = net();
        nic.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        let (reason, message) = refused(&fake, &with_nic(&format!("vm-bad-{i}"), nic)).await;
        assert_eq!(reason, "invalid", "{what}: {message}");
        assert!(message.starts_with("Invalid value for field '") && message.contains(field), "{what}: {message}");
    }
    assert!(fake.inventory().await.is_empty(), "no invalid insert created anything");
}
