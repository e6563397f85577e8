//! No accepted providerSpec key is silently dropped (issue 28): the keys the
//! spec types accept are read from the types themselves ([`accepted_keys`]
//! walks them with `machine_driver_api::spec_walk`), and each is either
//! proven to reach the cloud (a probe below: a create on the fake with that
//! key set, its value checked on what Nova, Neutron or Cinder made) or listed
//! in the README under "Accepted, not sent". The README's field table (read
//! with the kit's `readme_table`) must list exactly the probed keys: a key
//! added to the type without a probe and a README row, a README row of a key
//! the type no longer has, or a key the driver stops sending each fail here.

use std::collections::BTreeSet;

use fake_cloud_support::{AdminClient, InventoryInstance};
use machine_driver_api::spec_walk::{expand_notation, field_paths, merge_patch, normalise_readme_path, readme_table};
use machine_driver_api::{
    CallContext, CloudOptions, CreateMachine, Driver, DriverError, Machine, MachineClass, SecretBytes, SecretData,
};
use serde_json::{Value, json};

use crate::config::OpenStackConfig;
use crate::driver::OpenStackDriver;
use crate::spec::Envelope;

/// The README, whose field table and "Accepted, not sent" list are checked.
const README: &str = include_str!("../README.md");

/// The heading of the README's field table (the section ends at the next heading).
const TABLE: &str = "Provider spec";

/// The heading of the README's list of keys that are read but not sent.
const UNSENT: &str = "Accepted, not sent";

/// Every providerSpec key, as the README names them: the envelope's leaf
/// paths (the walk of [`Envelope`]) with `spec.` dropped from those under
/// `spec`, and each list of objects by its own key too (`networks`, whose
/// entries' keys are `networks[].<key>`), since a list of objects makes one
/// port per entry whatever its entries hold.
fn accepted_keys() -> BTreeSet<String> {
    let leaves = field_paths::<Envelope>().unwrap_or_else(|e| panic!("{e}"));
    let mut keys: BTreeSet<String> = leaves.iter().map(|p| p.strip_prefix("spec.").unwrap_or(p).to_string()).collect();
    let lists: Vec<String> = keys.iter().filter_map(|k| k.split_once("[]").map(|(list, _)| list.to_string())).collect();
    keys.extend(lists);
    keys
}

/// The keys of the README's field table, each once (a key in two rows fails).
fn readme_table_keys() -> BTreeSet<String> {
    let rows = readme_table(README, TABLE).unwrap_or_else(|e| panic!("{e}"));
    let named: Vec<String> = rows.into_iter().flat_map(|row| row.paths).collect();
    let keys: BTreeSet<String> = named.iter().cloned().collect();
    assert_eq!(keys.len(), named.len(), "a key is in two rows of the README's {TABLE:?} table: {named:?}");
    keys
}

/// The keys of the README's "Accepted, not sent" list: the first backquoted
/// token of each `- ` bullet under that heading, up to the next heading, in
/// the table's notation. (The kit's [`readme_table`] reads tables only.)
fn readme_unsent_keys() -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let (mut found, mut inside) = (0usize, false);
    for line in README.lines() {
        if line.starts_with('#') {
            inside = line.trim_start_matches('#').trim() == UNSENT;
            found += usize::from(inside);
        } else if inside && let Some(bullet) = line.strip_prefix("- ") {
            let token = bullet.split('`').nth(1).unwrap_or_else(|| panic!("{UNSENT:?}: {line:?} names no key"));
            let paths = expand_notation(token).unwrap_or_else(|e| panic!("{e}"));
            keys.extend(paths.iter().map(|p| normalise_readme_path(p)));
        }
    }
    assert_eq!(found, 1, "README: one heading {UNSENT:?}");
    assert!(!keys.is_empty(), "README: {UNSENT:?} lists no key");
    keys
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
/// (a JSON Merge Patch: `null` removes a key) and the check of what the cloud made.
struct Probe {
    key: &'static str,
    patch: Value,
    check: fn(&Made),
}

fn probes() -> Vec<Probe> {
    use fake_openstack::*;
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
            patch: json!({"rootDiskSize": null, "rootDiskType": null, "imageID": PUBLIC_IMAGE}),
            check: |m| assert_eq!(m.server().extra["image"], PUBLIC_IMAGE),
        },
        Probe {
            key: "imageName",
            patch: json!({"rootDiskSize": null, "rootDiskType": null, "imageID": null, "imageName": "ubuntu-24.04"}),
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
        merge_patch(&mut class["spec"], patch);
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
