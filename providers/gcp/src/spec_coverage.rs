//! No accepted providerSpec key is dropped silently: every field path of
//! [`GcpProviderSpec`] (walked with `machine_driver_api::spec_walk`) is either applied
//! to the `instances.insert` body (a probe below sets two values and finds
//! each where Compute reads it) or listed in the README's "Accepted and
//! ignored" table; and the README's field table names exactly the applied
//! fields.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::instance::{InstanceTarget, build_instance};
use crate::spec::GcpProviderSpec;
use machine_driver_api::spec_walk::{self, field_paths, merge_patch};

const README: &str = include_str!("../README.md");

/// The field paths of the spec type.
fn spec_paths() -> BTreeSet<String> {
    field_paths::<GcpProviderSpec>().expect("the spec type walks")
}

/// The field paths the README's tables under `heading` name.
fn readme_paths(heading: &str) -> BTreeSet<String> {
    spec_walk::readme_paths(README, heading).unwrap_or_else(|e| panic!("{e}"))
}

/// One probe: the spec field, where the insert body carries it, and two
/// variants (a merge patch over the example class, the value expected there).
struct Probe {
    field: &'static str,
    at: &'static str,
    variants: [(Value, Value); 2],
}

fn probe(field: &'static str, at: &'static str, a: (Value, Value), b: (Value, Value)) -> Probe {
    Probe { field, at, variants: [a, b] }
}

/// The example's boot disk with `extra` merged in.
fn boot(extra: Value) -> Value {
    let mut d = json!({"boot": true, "autoDelete": true, "sizeGb": 50, "type": "pd-balanced",
        "image": "projects/debian-cloud/global/images/debian-12", "labels": {"name": "worker-a"}});
    merge_patch(&mut d, &extra);
    d
}

fn disks(extra: Value) -> Value {
    json!({"disks": [boot(extra)]})
}

fn nic(extra: Value) -> Value {
    let mut n = json!({"network": "default", "disableExternalIP": false});
    merge_patch(&mut n, &extra);
    json!({"networkInterfaces": [n]})
}

fn probes() -> Vec<Probe> {
    let scratch = |iface: &str| {
        json!({"disks": [boot(json!({})),
            {"boot": false, "autoDelete": true, "sizeGb": 375, "type": "SCRATCH", "interface": iface}]})
    };
    let data = json!({"boot": false, "autoDelete": true, "sizeGb": 20, "type": "pd-standard"});
    let gpu = |g: Value| json!({"gpu": g, "scheduling": {"onHostMaintenance": "TERMINATE"}});
    let spot = |extra: Value| {
        let mut sched =
            json!({"provisioningModel": "SPOT", "automaticRestart": false, "onHostMaintenance": "TERMINATE"});
        merge_patch(&mut sched, &extra);
        json!({"scheduling": sched})
    };
    let limited = |d: Value| json!({"scheduling": {"instanceTerminationAction": "DELETE", "maxRunDuration": d}});
    let confidential = |c: Value| {
        json!({"machineType": "n2d-standard-2", "scheduling": {"onHostMaintenance": "TERMINATE"},
            "confidentialInstanceConfig": c})
    };
    vec![
        probe(
            "machineType",
            "/machineType",
            (json!({"machineType": "e2-small"}), json!("zones/europe-west1-b/machineTypes/e2-small")),
            (json!({"machineType": "n2-standard-4"}), json!("zones/europe-west1-b/machineTypes/n2-standard-4")),
        ),
        probe(
            "zone",
            "/machineType",
            (json!({"zone": "europe-west1-b"}), json!("zones/europe-west1-b/machineTypes/n1-standard-2")),
            (json!({"zone": "europe-west1-c"}), json!("zones/europe-west1-c/machineTypes/n1-standard-2")),
        ),
        probe(
            "region",
            "/networkInterfaces/0/subnetwork",
            (
                json!({"region": "europe-west1", "networkInterfaces": [{"subnetwork": "nodes"}]}),
                json!("regions/europe-west1/subnetworks/nodes"),
            ),
            (
                json!({"region": "us-east1", "zone": "us-east1-b", "networkInterfaces": [{"subnetwork": "nodes"}]}),
                json!("regions/us-east1/subnetworks/nodes"),
            ),
        ),
        probe(
            "canIpForward",
            "/canIpForward",
            (json!({"canIpForward": true}), json!(true)),
            (json!({"canIpForward": false}), json!(false)),
        ),
        probe(
            "deletionProtection",
            "/deletionProtection",
            (json!({"deletionProtection": true}), json!(true)),
            (json!({"deletionProtection": false}), json!(false)),
        ),
        probe(
            "description",
            "/description",
            (json!({"description": "a"}), json!("a")),
            (json!({"description": "b"}), json!("b")),
        ),
        probe(
            "disks[].autoDelete",
            "/disks/0/autoDelete",
            (disks(json!({"autoDelete": false})), json!(false)),
            (disks(json!({"autoDelete": true})), json!(true)),
        ),
        probe(
            "disks[].boot",
            "/disks/0/boot",
            (json!({"disks": [boot(json!({})), data.clone()]}), json!(true)),
            (json!({"disks": [data.clone(), boot(json!({}))]}), json!(false)),
        ),
        probe(
            "disks[].sizeGb",
            "/disks/0/initializeParams/diskSizeGb",
            (disks(json!({"sizeGb": 50})), json!("50")),
            (disks(json!({"sizeGb": 64})), json!("64")),
        ),
        probe(
            "disks[].type",
            "/disks/0/initializeParams/diskType",
            (disks(json!({"type": "pd-ssd"})), json!("zones/europe-west1-b/diskTypes/pd-ssd")),
            (disks(json!({"type": "hyperdisk-balanced"})), json!("zones/europe-west1-b/diskTypes/hyperdisk-balanced")),
        ),
        probe(
            "disks[].interface",
            "/disks/1/interface",
            (scratch("NVME"), json!("NVME")),
            (scratch("SCSI"), json!("SCSI")),
        ),
        probe(
            "disks[].image",
            "/disks/0/initializeParams/sourceImage",
            (disks(json!({"image": "projects/a/global/images/x"})), json!("projects/a/global/images/x")),
            (disks(json!({"image": "projects/b/global/images/y"})), json!("projects/b/global/images/y")),
        ),
        probe(
            "disks[].labels",
            "/disks/0/initializeParams/labels/name",
            (disks(json!({"labels": {"name": "a"}})), json!("a")),
            (disks(json!({"labels": {"name": "b"}})), json!("b")),
        ),
        probe(
            "disks[].encryption.kmsKeyName",
            "/disks/0/diskEncryptionKey/kmsKeyName",
            (disks(json!({"encryption": {"kmsKeyName": "k1"}})), json!("k1")),
            (disks(json!({"encryption": {"kmsKeyName": "k2"}})), json!("k2")),
        ),
        probe(
            "disks[].encryption.kmsKeyServiceAccount",
            "/disks/0/diskEncryptionKey/kmsKeyServiceAccount",
            (disks(json!({"encryption": {"kmsKeyName": "k", "kmsKeyServiceAccount": "a@p.iam"}})), json!("a@p.iam")),
            (disks(json!({"encryption": {"kmsKeyName": "k", "kmsKeyServiceAccount": "b@p.iam"}})), json!("b@p.iam")),
        ),
        probe(
            "disks[].provisionedIops",
            "/disks/0/initializeParams/provisionedIops",
            (disks(json!({"provisionedIops": 3000})), json!("3000")),
            (disks(json!({"provisionedIops": 4000})), json!("4000")),
        ),
        probe(
            "disks[].provisionedThroughput",
            "/disks/0/initializeParams/provisionedThroughput",
            (disks(json!({"provisionedThroughput": 140})), json!("140")),
            (disks(json!({"provisionedThroughput": 200})), json!("200")),
        ),
        probe(
            "disks[].storagePool",
            "/disks/0/initializeParams/storagePool",
            (disks(json!({"storagePool": "pool-a"})), json!("pool-a")),
            (disks(json!({"storagePool": "pool-b"})), json!("pool-b")),
        ),
        probe(
            "labels",
            "/labels/name",
            (json!({"labels": {"name": "a"}}), json!("a")),
            (json!({"labels": {"name": "b"}}), json!("b")),
        ),
        probe(
            "metadata[].key",
            "/metadata/items/0/key",
            (json!({"metadata": [{"key": "a", "value": "v"}]}), json!("a")),
            (json!({"metadata": [{"key": "b", "value": "v"}]}), json!("b")),
        ),
        probe(
            "metadata[].value",
            "/metadata/items/0/value",
            (json!({"metadata": [{"key": "k", "value": "a"}]}), json!("a")),
            (json!({"metadata": [{"key": "k", "value": "b"}]}), json!("b")),
        ),
        probe(
            "networkInterfaces[].network",
            "/networkInterfaces/0/network",
            (nic(json!({"network": "a"})), json!("projects/p-1/global/networks/a")),
            (nic(json!({"network": "b"})), json!("projects/p-1/global/networks/b")),
        ),
        probe(
            "networkInterfaces[].subnetwork",
            "/networkInterfaces/0/subnetwork",
            (nic(json!({"subnetwork": "a"})), json!("regions/europe-west1/subnetworks/a")),
            (nic(json!({"subnetwork": "b"})), json!("regions/europe-west1/subnetworks/b")),
        ),
        probe(
            "networkInterfaces[].disableExternalIP",
            "/networkInterfaces/0/accessConfigs/0/type",
            (nic(json!({"disableExternalIP": false})), json!("ONE_TO_ONE_NAT")),
            (nic(json!({"disableExternalIP": true})), Value::Null),
        ),
        probe(
            "networkInterfaces[].stackType",
            "/networkInterfaces/0/stackType",
            (nic(json!({"stackType": "IPV4_ONLY"})), json!("IPV4_ONLY")),
            (nic(json!({"stackType": "IPV6_ONLY"})), json!("IPV6_ONLY")),
        ),
        probe(
            "networkInterfaces[].ipv6AccessType",
            "/networkInterfaces/0/ipv6AccessType",
            (nic(json!({"stackType": "IPV4_IPV6", "ipv6AccessType": "EXTERNAL"})), json!("EXTERNAL")),
            (nic(json!({"stackType": "IPV4_IPV6", "ipv6AccessType": "INTERNAL"})), json!("INTERNAL")),
        ),
        probe(
            "networkInterfaces[].ipCidrRange",
            "/networkInterfaces/0/aliasIpRanges/0/ipCidrRange",
            (nic(json!({"useAliasIPs": true, "ipCidrRange": "/24"})), json!("/24")),
            (nic(json!({"useAliasIPs": true, "ipCidrRange": "/25"})), json!("/25")),
        ),
        probe(
            "networkInterfaces[].subnetworkRangeName",
            "/networkInterfaces/0/aliasIpRanges/0/subnetworkRangeName",
            (nic(json!({"useAliasIPs": true, "ipCidrRange": "/24", "subnetworkRangeName": "a"})), json!("a")),
            (nic(json!({"useAliasIPs": true, "ipCidrRange": "/24", "subnetworkRangeName": "b"})), json!("b")),
        ),
        probe(
            "networkInterfaces[].useAliasIPs",
            "/networkInterfaces/0/aliasIpRanges/0/ipCidrRange",
            (nic(json!({"useAliasIPs": true, "ipCidrRange": "/24"})), json!("/24")),
            (nic(json!({"useAliasIPs": false, "ipCidrRange": "/24"})), Value::Null),
        ),
        probe(
            "scheduling.automaticRestart",
            "/scheduling/automaticRestart",
            (json!({"scheduling": {"automaticRestart": true}}), json!(true)),
            (json!({"scheduling": {"automaticRestart": false}}), json!(false)),
        ),
        probe(
            "scheduling.onHostMaintenance",
            "/scheduling/onHostMaintenance",
            (json!({"scheduling": {"onHostMaintenance": "MIGRATE"}}), json!("MIGRATE")),
            (json!({"scheduling": {"onHostMaintenance": "TERMINATE"}}), json!("TERMINATE")),
        ),
        probe(
            "scheduling.preemptible",
            "/scheduling/preemptible",
            (json!({"scheduling": {"preemptible": true, "onHostMaintenance": "TERMINATE"}}), json!(true)),
            (json!({"scheduling": {"preemptible": false}}), json!(false)),
        ),
        probe(
            "scheduling.provisioningModel",
            "/scheduling/provisioningModel",
            (spot(json!({})), json!("SPOT")),
            (json!({"scheduling": {"provisioningModel": "STANDARD"}}), json!("STANDARD")),
        ),
        probe(
            "scheduling.instanceTerminationAction",
            "/scheduling/instanceTerminationAction",
            (spot(json!({"instanceTerminationAction": "STOP"})), json!("STOP")),
            (spot(json!({"instanceTerminationAction": "DELETE"})), json!("DELETE")),
        ),
        probe(
            "scheduling.maxRunDuration.seconds",
            "/scheduling/maxRunDuration/seconds",
            (limited(json!({"seconds": 3600})), json!("3600")),
            (limited(json!({"seconds": 7200})), json!("7200")),
        ),
        probe(
            "scheduling.maxRunDuration.nanos",
            "/scheduling/maxRunDuration/nanos",
            (limited(json!({"seconds": 3600, "nanos": 5})), json!(5)),
            (limited(json!({"seconds": 3600})), Value::Null),
        ),
        probe(
            "confidentialInstanceConfig.confidentialInstanceType",
            "/confidentialInstanceConfig/confidentialInstanceType",
            (confidential(json!({"confidentialInstanceType": "SEV"})), json!("SEV")),
            (confidential(json!({"confidentialInstanceType": "SEV_SNP"})), json!("SEV_SNP")),
        ),
        probe(
            "confidentialInstanceConfig.enableConfidentialCompute",
            "/confidentialInstanceConfig/enableConfidentialCompute",
            (confidential(json!({"enableConfidentialCompute": true})), json!(true)),
            (confidential(json!({"enableConfidentialCompute": false})), json!(false)),
        ),
        probe(
            "serviceAccounts[].email",
            "/serviceAccounts/0/email",
            (json!({"serviceAccounts": [{"email": "a@p.iam"}]}), json!("a@p.iam")),
            (json!({"serviceAccounts": [{"email": "b@p.iam"}]}), json!("b@p.iam")),
        ),
        probe(
            "serviceAccounts[].scopes",
            "/serviceAccounts/0/scopes/0",
            (json!({"serviceAccounts": [{"email": "a@p.iam", "scopes": ["s1"]}]}), json!("s1")),
            (json!({"serviceAccounts": [{"email": "a@p.iam", "scopes": ["s2"]}]}), json!("s2")),
        ),
        probe(
            "tags",
            "/tags/items/0",
            (
                json!({"tags": ["extra-a", "kubernetes-io-cluster-shoot--demo--local", "kubernetes-io-role-node"]}),
                json!("extra-a"),
            ),
            (
                json!({"tags": ["extra-b", "kubernetes-io-cluster-shoot--demo--local", "kubernetes-io-role-node"]}),
                json!("extra-b"),
            ),
        ),
        probe(
            "gpu.acceleratorType",
            "/guestAccelerators/0/acceleratorType",
            (
                gpu(json!({"acceleratorType": "nvidia-tesla-t4", "count": 1})),
                json!("projects/p-1/zones/europe-west1-b/acceleratorTypes/nvidia-tesla-t4"),
            ),
            (
                gpu(json!({"acceleratorType": "nvidia-l4", "count": 1})),
                json!("projects/p-1/zones/europe-west1-b/acceleratorTypes/nvidia-l4"),
            ),
        ),
        probe(
            "gpu.count",
            "/guestAccelerators/0/acceleratorCount",
            (gpu(json!({"acceleratorType": "nvidia-l4", "count": 1})), json!(1)),
            (gpu(json!({"acceleratorType": "nvidia-l4", "count": 2})), json!(2)),
        ),
        probe(
            "minCpuPlatform",
            "/minCpuPlatform",
            (json!({"minCpuPlatform": "Intel Skylake"}), json!("Intel Skylake")),
            (json!({"minCpuPlatform": "AMD Milan"}), json!("AMD Milan")),
        ),
        probe(
            "resourceManagerTags",
            "/params/resourceManagerTags/tagKeys~11",
            (json!({"resourceManagerTags": {"tagKeys/1": "tagValues/2"}}), json!("tagValues/2")),
            (json!({"resourceManagerTags": {"tagKeys/1": "tagValues/3"}}), json!("tagValues/3")),
        ),
        probe(
            "shieldedInstanceConfiguration.secureBoot",
            "/shieldedInstanceConfig/enableSecureBoot",
            (json!({"shieldedInstanceConfiguration": {"secureBoot": true}}), json!(true)),
            (json!({"shieldedInstanceConfiguration": {"secureBoot": false}}), json!(false)),
        ),
        probe(
            "shieldedInstanceConfiguration.vtpm",
            "/shieldedInstanceConfig/enableVtpm",
            (json!({"shieldedInstanceConfiguration": {"vtpm": true}}), json!(true)),
            (json!({"shieldedInstanceConfiguration": {"vtpm": false}}), json!(false)),
        ),
        probe(
            "shieldedInstanceConfiguration.integrityMonitoring",
            "/shieldedInstanceConfig/enableIntegrityMonitoring",
            (json!({"shieldedInstanceConfiguration": {"integrityMonitoring": true}}), json!(true)),
            (json!({"shieldedInstanceConfiguration": {"integrityMonitoring": false}}), json!(false)),
        ),
        probe(
            "advancedMachineFeatures.enableNestedVirtualization",
            "/advancedMachineFeatures/enableNestedVirtualization",
            (json!({"advancedMachineFeatures": {"enableNestedVirtualization": true}}), json!(true)),
            (json!({"advancedMachineFeatures": {"enableNestedVirtualization": false}}), json!(false)),
        ),
    ]
}

/// The insert body (wire JSON) for the example class with `patch` merged in.
fn body_with(patch: &Value) -> Value {
    let mut spec: Value =
        serde_json::from_slice(include_bytes!("../examples/machine-class.json")).expect("example class");
    merge_patch(&mut spec, patch);
    let parsed = GcpProviderSpec::parse(spec.to_string().as_bytes())
        .unwrap_or_else(|e| panic!("probe spec {patch} must be valid: {e}"));
    let target = InstanceTarget { project: "p-1", name: "m-1", uid: "uid-1" };
    let instance = build_instance(&parsed, target, b"").expect("insert body");
    serde_json::to_value(&instance).expect("serializable")
}

#[test]
fn every_applied_field_reaches_the_insert_body() {
    for p in probes() {
        let [(patch_a, want_a), (patch_b, want_b)] = &p.variants;
        assert_ne!(want_a, want_b, "{}: the two variants must differ", p.field);
        for (patch, want) in [(patch_a, want_a), (patch_b, want_b)] {
            let body = body_with(patch);
            let got = body.pointer(p.at).cloned().unwrap_or(Value::Null);
            assert_eq!(&got, want, "{} (patch {patch}) is not in the insert body at {}: {body}", p.field, p.at);
        }
    }
}

#[test]
fn every_accepted_key_is_applied_or_documented_as_ignored() {
    let fields = spec_paths();
    let applied: BTreeSet<String> = probes().iter().map(|p| p.field.to_string()).collect();
    let ignored = readme_paths("Accepted and ignored");
    let documented = readme_paths("Provider spec");

    let unaccounted: Vec<_> = fields.iter().filter(|f| !applied.contains(*f) && !ignored.contains(*f)).collect();
    assert!(unaccounted.is_empty(), "accepted but neither applied nor documented as ignored: {unaccounted:?}");
    let both: Vec<_> = applied.intersection(&ignored).collect();
    assert!(both.is_empty(), "applied and listed as ignored: {both:?}");
    let stale: Vec<_> = applied.iter().chain(&ignored).filter(|f| !fields.contains(*f)).collect();
    assert!(stale.is_empty(), "probed or documented but not a field of the spec: {stale:?}");
    assert_eq!(documented, applied, "the README field table must name exactly the applied fields");
}

#[test]
fn the_walk_finds_nested_and_listed_fields() {
    let fields = field_paths::<GcpProviderSpec>().expect("the spec type walks");
    for want in ["disks[].encryption.kmsKeyName", "tags", "serviceAccounts[].scopes", "scheduling.preemptible"] {
        assert!(fields.contains(want), "{want} not in {fields:?}");
    }
}
