//! No accepted providerSpec key is silently dropped (issue 28): the keys the
//! spec types accept are read from the types themselves (their serde field
//! lists, [`fields_of`]), and each is either proven to reach the cloud (a
//! probe below: a create on the fake with that key set, its value checked on
//! what Nova, Neutron or Cinder made) or listed in the README under
//! "Accepted, not sent". The README's field table must list exactly the
//! probed keys: a key added to the type without a probe and a README row, a
//! README row of a key the type no longer has, or a key the driver stops
//! sending each fail here.

use std::collections::BTreeSet;

use fake_cloud_support::{AdminClient, InventoryInstance};
use machine_driver_api::{
    CallContext, CloudOptions, CreateMachine, Driver, DriverError, Machine, MachineClass, SecretBytes, SecretData,
};
use serde::de::{self, DeserializeOwned, Visitor};
use serde_json::{Value, json};

use crate::config::OpenStackConfig;
use crate::driver::OpenStackDriver;
use crate::spec::{Envelope, NetworkRef, OpenStackSpec};

/// The README, whose field table and "Accepted, not sent" list are checked.
const README: &str = include_str!("../README.md");

/// A deserializer that only records the field list `deserialize_struct` is given.
struct FieldNames<'a>(&'a mut Option<&'static [&'static str]>);

impl<'de> de::Deserializer<'de> for FieldNames<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = Some(fields);
        Err(de::Error::custom("field names recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

/// The JSON keys the struct `T` accepts, as its `Deserialize` names them (renames applied).
fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields = None;
    let _ = T::deserialize(FieldNames(&mut fields));
    fields.unwrap_or_else(|| panic!("{} is not a struct", std::any::type_name::<T>()))
}

/// Every providerSpec key, as the README names them: the envelope's (less
/// `spec`), `spec`'s, and `networks[].<key>` for an entry of `networks`.
fn accepted_keys() -> BTreeSet<String> {
    let mut keys: BTreeSet<String> =
        fields_of::<Envelope>().iter().filter(|k| **k != "spec").map(|k| (*k).to_string()).collect();
    keys.extend(fields_of::<OpenStackSpec>().iter().map(|k| (*k).to_string()));
    keys.extend(fields_of::<NetworkRef>().iter().map(|k| format!("networks[].{k}")));
    keys
}

/// The backticked words of `text`.
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The README's "Provider spec" section.
fn spec_section() -> &'static str {
    let start = README.find("## Provider spec").expect("README: no \"## Provider spec\"");
    let rest = &README[start + 3..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
}

/// The keys of the README's field table (its first column).
fn readme_table_keys() -> BTreeSet<String> {
    let section = spec_section();
    let table = &section[..section.find("### Accepted, not sent").unwrap_or(section.len())];
    table
        .lines()
        .filter(|l| l.starts_with("| `"))
        .flat_map(|l| backticked(l.split('|').nth(1).unwrap_or_default()))
        .map(str::to_string)
        .collect()
}

/// The keys of the README's "Accepted, not sent" list.
fn readme_unsent_keys() -> BTreeSet<String> {
    let section = spec_section();
    let start = section.find("### Accepted, not sent").expect("README: no \"### Accepted, not sent\"");
    section[start..]
        .lines()
        .filter(|l| l.starts_with("- `"))
        .filter_map(|l| backticked(l).first().map(|k| (*k).to_string()))
        .collect()
}

/// What the fake holds of one probe's machine after its create.
struct Made {
    /// The create's answer.
    answer: Result<String, DriverError>,
    /// The live server named after the machine (none when the create failed).
    server: Option<InventoryInstance>,
    /// Its live ports.
    ports: Vec<InventoryInstance>,
    /// Its live volumes.
    volumes: Vec<InventoryInstance>,
}

impl Made {
    fn server(&self) -> &InventoryInstance {
        self.server.as_ref().unwrap_or_else(|| panic!("no server: {:?}", self.answer))
    }

    fn port(&self) -> &InventoryInstance {
        assert_eq!(self.ports.len(), 1, "one port: {:?}", self.ports);
        &self.ports[0]
    }

    fn pairs_of(port: &InventoryInstance) -> Vec<String> {
        port.extra["allowed_address_pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["ip_address"].as_str().unwrap().to_string())
            .collect()
    }

    fn subnets(&self) -> Vec<String> {
        let ips = self.port().extra["fixed_ips"].as_array().unwrap();
        ips.iter().map(|ip| ip["subnet_id"].as_str().unwrap().to_string()).collect()
    }
}

/// One key's proof: the patch of the example class's `spec` that sets it
/// (`null` removes a key) and the check of what the cloud made.
struct Probe {
    key: &'static str,
    patch: Value,
    check: fn(&Made),
}

fn probes() -> Vec<Probe> {
    use fake_openstack::*;
    let no_volume = || json!({"rootDiskSize": null, "rootDiskType": null});
    let merged = |a: Value, b: Value| {
        let mut a = a;
        a.as_object_mut().unwrap().extend(b.as_object().unwrap().clone());
        a
    };
    vec![
        Probe {
            key: "region",
            patch: json!({"region": "RegionTwo"}),
            check: |m| {
                let e = m.answer.as_ref().unwrap_err();
                assert!(e.message().contains("RegionTwo"), "the region selects the endpoints: {e:?}");
            },
        },
        Probe {
            key: "availabilityZone",
            patch: json!({"availabilityZone": "az-2"}),
            check: |m| assert_eq!(m.server().extra["availability_zone"], "az-2"),
        },
        Probe {
            key: "flavorName",
            patch: json!({"flavorName": "m1.small"}),
            check: |m| assert_eq!(m.server().extra["flavor"], "2"),
        },
        Probe {
            key: "imageID",
            patch: merged(no_volume(), json!({"imageID": PUBLIC_IMAGE})),
            check: |m| assert_eq!(m.server().extra["image"], PUBLIC_IMAGE),
        },
        Probe {
            key: "imageName",
            patch: merged(no_volume(), json!({"imageID": null, "imageName": "ubuntu-24.04"})),
            check: |m| assert_eq!(m.server().extra["image"], PUBLIC_IMAGE),
        },
        Probe {
            key: "keyName",
            patch: json!({"keyName": KEY_NAME}),
            check: |m| assert_eq!(m.server().extra["key_name"], KEY_NAME),
        },
        Probe {
            key: "serverGroupID",
            patch: json!({"serverGroupID": SERVER_GROUP_ID}),
            check: |m| assert_eq!(m.server().extra["server_group"], SERVER_GROUP_ID),
        },
        Probe {
            key: "useConfigDrive",
            patch: json!({"useConfigDrive": true}),
            check: |m| assert_eq!(m.server().extra["config_drive"], true),
        },
        Probe {
            key: "securityGroups",
            patch: json!({"securityGroups": ["default"]}),
            check: |m| assert_eq!(m.port().extra["security_groups"], json!([DEFAULT_SECURITY_GROUP_ID])),
        },
        Probe {
            key: "tags",
            patch: json!({"tags": {
                "kubernetes.io-cluster-shoot--dev--conf": "1", "kubernetes.io-role-node": "1", "probe.key": "probe-value"}}),
            check: |m| {
                assert_eq!(m.server().tags.get("probe.key").map(String::as_str), Some("probe-value"));
                for marker in ["kubernetes.io-cluster-shoot--dev--conf", "kubernetes.io-role-node"] {
                    assert!(m.port().tags.contains_key(marker), "{marker} on the port: {:?}", m.port().tags);
                }
            },
        },
        Probe {
            key: "networkID",
            patch: json!({"networkID": NETWORK_ID}),
            check: |m| assert_eq!(m.port().extra["network_id"], NETWORK_ID),
        },
        Probe {
            key: "subnetID",
            patch: json!({"subnetID": SUBNET_V6_ID, "subnetIDs": null}),
            check: |m| assert_eq!(m.subnets(), vec![SUBNET_V6_ID]),
        },
        Probe {
            key: "subnetIDs",
            patch: json!({"subnetID": null, "subnetIDs": [SUBNET_V6_ID]}),
            check: |m| assert_eq!(m.subnets(), vec![SUBNET_V6_ID]),
        },
        Probe {
            key: "networks",
            patch: json!({"networkID": null, "subnetID": null, "networks": [{"id": NETWORK_ID}, {"id": NETWORK_ID}]}),
            check: |m| {
                assert_eq!(m.ports.len(), 2, "one port per entry: {:?}", m.ports);
                assert!(m.ports.iter().all(|p| p.extra["network_id"] == NETWORK_ID));
            },
        },
        Probe {
            key: "networks[].id",
            patch: json!({"networkID": null, "subnetID": null, "networks": [{"id": NETWORK_ID}]}),
            check: |m| assert_eq!(m.port().extra["network_id"], NETWORK_ID),
        },
        Probe {
            key: "networks[].name",
            patch: json!({"networkID": null, "subnetID": null, "networks": [{"name": NETWORK_NAME}]}),
            check: |m| assert_eq!(m.port().extra["network_id"], NETWORK_ID),
        },
        Probe {
            key: "networks[].podNetwork",
            patch: json!({"networkID": null, "subnetID": null,
                "networks": [{"id": NETWORK_ID, "podNetwork": false}, {"name": NETWORK_NAME, "podNetwork": true}]}),
            check: |m| {
                let mut pairs: Vec<Vec<String>> = m.ports.iter().map(Made::pairs_of).collect();
                pairs.sort();
                let cidrs = vec!["100.96.0.0/11".to_string(), "fd00:100:96::/48".to_string()];
                assert_eq!(pairs, vec![Vec::new(), cidrs], "only the pod network's port has the pairs");
            },
        },
        Probe {
            key: "podNetworkCidr",
            patch: json!({"podNetworkCIDRs": null, "podNetworkCidr": "100.64.0.0/16"}),
            check: |m| assert_eq!(Made::pairs_of(m.port()), vec!["100.64.0.0/16"]),
        },
        Probe {
            key: "podNetworkCIDRs",
            patch: json!({"podNetworkCIDRs": ["100.65.0.0/16"]}),
            check: |m| assert_eq!(Made::pairs_of(m.port()), vec!["100.65.0.0/16"]),
        },
        Probe {
            key: "rootDiskSize",
            patch: json!({"rootDiskSize": 21, "rootDiskType": null}),
            check: |m| {
                assert_eq!(m.volumes.len(), 1, "{:?}", m.volumes);
                assert_eq!(m.volumes[0].extra["size"], 21);
                assert_eq!(m.server().extra["image"], Value::Null, "booted from the volume");
            },
        },
        Probe {
            key: "rootDiskType",
            patch: json!({"rootDiskSize": 22, "rootDiskType": "ssd"}),
            check: |m| assert_eq!(m.volumes.first().map(|v| &v.extra["volume_type"]), Some(&json!("ssd"))),
        },
    ]
}

/// Creates machine `name` with the example class's `spec` patched; what the fake holds of it.
async fn made(driver: &OpenStackDriver, admin: &AdminClient, name: String, patch: &Value) -> Made {
    {
        let mut class: Value = serde_json::from_slice(include_bytes!("../examples/machine-class.json")).unwrap();
        for (k, v) in patch.as_object().unwrap() {
            if v.is_null() {
                class["spec"].as_object_mut().unwrap().remove(k);
            } else {
                class["spec"][k] = v.clone();
            }
        }
        let secret: std::collections::BTreeMap<String, String> =
            serde_json::from_str(include_str!("../examples/secret.json")).unwrap();
        let req = CreateMachine {
            machine: Machine { name: name.clone(), uid: format!("uid-{name}"), ..Default::default() },
            class: MachineClass {
                name: "class".into(),
                provider: "OpenStack".into(),
                provider_spec: serde_json::to_vec(&class).unwrap(),
                node_template: None,
            },
            secret: secret.into_iter().collect::<SecretData>(),
            user_data: SecretBytes(b"#cloud-config\n".to_vec()),
        };
        let ctx = CallContext::with_timeout("create", std::time::Duration::from_secs(30));
        let answer = driver.create_machine(&ctx, req).await.map(|c| c.provider_id);
        let inventory = admin.inventory().await.unwrap();
        let server = inventory.instances.into_iter().find(|i| i.live && i.name == name);
        let (ports, volumes) = inventory
            .dependents
            .into_iter()
            .filter(|d| d.live && d.name == name)
            .partition(|d| d.extra["kind"] == "port");
        Made { answer, server, ports, volumes }
    }
}

#[test]
fn the_readme_lists_every_accepted_key_once_and_no_other() {
    let accepted = accepted_keys();
    let table = readme_table_keys();
    let unsent = readme_unsent_keys();
    assert!(
        table.is_disjoint(&unsent),
        "both sent and not sent: {:?}",
        table.intersection(&unsent).collect::<Vec<_>>()
    );
    let documented: BTreeSet<String> = table.union(&unsent).cloned().collect();
    assert_eq!(documented, accepted, "README keys (left) against the keys the spec types accept (right)");
    assert!(accepted.contains("flavorName") && accepted.contains("networks[].podNetwork"), "{accepted:?}");
}

#[test]
fn every_key_in_the_readme_table_has_a_probe_and_no_probe_is_of_another_key() {
    let probed: BTreeSet<String> = probes().iter().map(|p| p.key.to_string()).collect();
    assert_eq!(probed, readme_table_keys(), "probed keys (left) against the README's field table (right)");
}

#[tokio::test]
async fn every_sent_key_reaches_the_cloud() {
    let fake = fake_openstack::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let admin = AdminClient::for_cloud_url(&fake.url()).unwrap();
    let options = CloudOptions { endpoint: Some(fake.url()), rate_limit: 0.0, burst: 0 };
    let driver = OpenStackDriver::new(OpenStackConfig::from_options(&options));
    let probes = probes();
    // The example class itself makes a machine: each probe changes only its key.
    let baseline = made(&driver, &admin, "probe-baseline".into(), &json!({})).await;
    baseline.answer.as_ref().unwrap();
    let runs = probes.iter().enumerate().map(|(i, p)| made(&driver, &admin, format!("probe-{i}"), &p.patch));
    let results = futures::future::join_all(runs).await;
    for (probe, made) in probes.iter().zip(&results) {
        let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (probe.check)(made)));
        assert!(checked.is_ok(), "providerSpec.spec.{} does not reach the cloud as the README says", probe.key);
    }
}
