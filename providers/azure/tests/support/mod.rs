//! What the driver tests against `fake-arm` share: the generic provider
//! fixture (`machine-driver-provider-fixture`) on `fake-arm` with this
//! provider's examples, and ARM requests of the tests' own.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)] // each test binary uses a part of it

use machine_driver_api::MachineClass;
use machine_driver_azure::AzureDriver;
use machine_driver_provider_fixture::Fixture;
pub use machine_driver_provider_fixture::ctx;
use serde_json::Value;

machine_driver_provider_fixture::fake_cloud! {
    /// A running fake ARM with the example class and secret.
    pub struct FakeCloud(AzureDriver);
}

impl FakeCloud {
    /// Starts the fake on a free port.
    pub async fn start() -> Self {
        Self(Fixture::start("Azure", concat!(env!("CARGO_MANIFEST_DIR"), "/examples"), fake_arm::start).await)
    }

    /// Live VMs, NICs and disks whose name starts with `name`.
    pub async fn live_resources(&self, name: &str) -> Vec<String> {
        let inv = self.inventory().await;
        inv.instances
            .into_iter()
            .chain(inv.dependents)
            .filter(|i| i.live && i.name.starts_with(name))
            .map(|i| i.name)
            .collect()
    }
}

/// The example class with `patch` applied to its providerSpec.
pub use machine_driver_provider_fixture::patched_class as class_with;

impl FakeCloud {
    /// The example class as another cluster of the same resource group has it
    /// (its cluster tag `kubernetes.io-cluster-shoot--dev--other`).
    pub fn other_cluster_class(&self) -> MachineClass {
        class_with(&self.class, |spec| {
            let tags = spec["tags"].as_object_mut().unwrap();
            tags.remove("kubernetes.io-cluster-shoot--dev--conf");
            tags.insert("kubernetes.io-cluster-shoot--dev--other".into(), "1".into());
            tags.insert("Name".into(), "shoot--dev--other".into());
        })
    }

    /// One ARM request made outside the driver (as the portal, the CLI or the
    /// Go provider would): `method` on `path` (`/subscriptions/...`, without
    /// the api-version) with the cluster identity's token. Its status and
    /// JSON body (`null` when empty).
    pub async fn arm(&self, method: &str, path: &str, api_version: &str, body: Option<Value>) -> (u16, Value) {
        let form = format!(
            "grant_type=client_credentials&client_id={}&client_secret={}&scope=https%3A%2F%2Fmanagement.azure.com%2F.default",
            fake_arm::CLIENT_ID,
            fake_arm::CLIENT_SECRET
        );
        let token_path = format!("/{}/oauth2/v2.0/token", fake_arm::TENANT_ID);
        let (_, token) = raw_http(
            &self.fake.url(),
            "POST",
            &token_path,
            &[("content-type", "application/x-www-form-urlencoded")],
            form,
        )
        .await;
        let token = token["access_token"].as_str().unwrap().to_string();
        let auth = format!("Bearer {token}");
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let path = format!("{path}?api-version={api_version}");
        raw_http(
            &self.fake.url(),
            method,
            &path,
            &[("authorization", &auth), ("content-type", "application/json")],
            body,
        )
        .await
    }

    /// The ARM path of `kind` (`Microsoft.Compute/virtualMachines`, ...) `name` in the seeded group.
    pub fn arm_path(&self, kind: &str, name: &str) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}/providers/{kind}/{name}",
            fake_arm::SUBSCRIPTION_ID,
            fake_arm::RESOURCE_GROUP
        )
    }

    /// The tags ARM shows on the VM `name` (`null` when it has none; panics when it is absent).
    pub async fn vm_tags(&self, name: &str) -> Value {
        let (status, vm) =
            self.arm("GET", &self.arm_path("Microsoft.Compute/virtualMachines", name), "2024-07-01", None).await;
        assert_eq!(status, 200, "VM {name}: {vm}");
        vm["tags"].clone()
    }

    /// Makes a free NIC `name` in the seeded subnet carrying `tags` (a leftover of a VM that is gone).
    pub async fn put_nic(&self, name: &str, tags: Value) {
        let subnet = format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/{}/subnets/{}",
            fake_arm::SUBSCRIPTION_ID,
            fake_arm::RESOURCE_GROUP,
            fake_arm::VNET,
            fake_arm::SUBNET
        );
        let body = serde_json::json!({
            "location": fake_arm::LOCATION,
            "tags": tags,
            "properties": {"ipConfigurations": [{"name": "ipconfig1", "properties": {"subnet": {"id": subnet}}}]}
        });
        let (status, answer) = self
            .arm("PUT", &self.arm_path("Microsoft.Network/networkInterfaces", name), "2024-03-01", Some(body))
            .await;
        assert!(status == 200 || status == 201, "NIC {name}: {status} {answer}");
    }

    /// Makes a free empty managed disk `name` carrying `tags` (`null`: none).
    pub async fn put_disk(&self, name: &str, tags: Value) {
        let mut body = serde_json::json!({
            "location": fake_arm::LOCATION,
            "sku": {"name": "Standard_LRS"},
            "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": 8}
        });
        if !tags.is_null() {
            body["tags"] = tags;
        }
        let (status, answer) =
            self.arm("PUT", &self.arm_path("Microsoft.Compute/disks", name), "2024-03-02", Some(body)).await;
        assert!((200..300).contains(&status), "disk {name}: {status} {answer}");
    }
}

/// One HTTP/1.0 request (no client dependency): status and JSON body (`null` when empty or not JSON).
async fn raw_http(base: &str, method: &str, path: &str, headers: &[(&str, &str)], body: String) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = base.strip_prefix("http://").unwrap().trim_end_matches('/');
    let mut conn = tokio::net::TcpStream::connect(host).await.unwrap();
    let mut head = format!("{method} {path} HTTP/1.0\r\nHost: {host}\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(body.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).await.unwrap();
    let raw = String::from_utf8_lossy(&raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}
