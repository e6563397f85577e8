//! The instances.insert body built from a validated spec, and the reading of
//! an instance back into addresses and state.

use std::collections::HashMap;

use google_cloud_compute_v1::model::{
    AcceleratorConfig, AccessConfig, AdvancedMachineFeatures, AliasIpRange, AttachedDisk, AttachedDiskInitializeParams,
    ConfidentialInstanceConfig, CustomerEncryptionKey, Duration, Instance, InstanceParams, Metadata, NetworkInterface,
    Scheduling, ServiceAccount, ShieldedInstanceConfig, Tags, access_config, attached_disk,
    confidential_instance_config, metadata, network_interface, scheduling,
};
use machine_driver_api::{Address, AddressType, DriverError};

use crate::naming::{MACHINE_UID_LABEL, MEMBERSHIP_LABEL_VALUE, uid_label_value};
use crate::spec::{
    DISK_TYPE_SCRATCH, Disk, GcpProviderSpec, NetworkInterface as SpecNic, PROVISIONING_SPOT, STACK_IPV4_ONLY,
};

/// Metadata key for cloud-init user data.
pub(crate) const USER_DATA_KEY: &str = "user-data";
/// Metadata key for a startup script.
pub(crate) const STARTUP_SCRIPT_KEY: &str = "startup-script";

/// What the instance is created for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InstanceTarget<'a> {
    /// Project id.
    pub(crate) project: &'a str,
    /// Instance name (the machine name).
    pub(crate) name: &'a str,
    /// Machine uid (goes into a label).
    pub(crate) uid: &'a str,
}

/// The metadata key user data goes to: `user-data` for cloud-init formats
/// (`#cloud-config`, MIME multi-part, `#include`, `#cloud-boothook`, jinja
/// templates), `startup-script` for anything else (as the Go provider does).
pub(crate) fn user_data_key(user_data: &[u8]) -> &'static str {
    const CLOUD_INIT_PREFIXES: &[&[u8]] =
        &[b"#cloud-config", b"Content-Type: multipart/", b"#include", b"#cloud-boothook", b"## template: jinja"];
    if CLOUD_INIT_PREFIXES.iter().any(|p| user_data.starts_with(p)) { USER_DATA_KEY } else { STARTUP_SCRIPT_KEY }
}

/// Builds the instances.insert body.
pub(crate) fn build_instance(
    spec: &GcpProviderSpec,
    target: InstanceTarget<'_>,
    user_data: &[u8],
) -> Result<Instance, DriverError> {
    let zone = spec.zone.as_str();
    let markers = spec.markers()?;
    let mut i = Instance::new();
    i.name = Some(target.name.to_string());
    i.machine_type =
        Some(partial_url(&spec.machine_type, || format!("zones/{zone}/machineTypes/{}", spec.machine_type)));
    i.can_ip_forward = Some(spec.can_ip_forward);
    i.deletion_protection = Some(spec.deletion_protection);
    i.description = spec.description.clone();
    i.min_cpu_platform = spec.min_cpu_platform.clone().filter(|s| !s.is_empty());

    let mut labels: HashMap<String, String> = spec.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    // The markers as labels too (network tags are also made for firewall
    // rules; a label is this sidecar's own mark, see `crate::ownership`).
    labels.insert(markers.cluster().to_string(), MEMBERSHIP_LABEL_VALUE.to_string());
    labels.insert(markers.role().to_string(), MEMBERSHIP_LABEL_VALUE.to_string());
    labels.insert(MACHINE_UID_LABEL.to_string(), uid_label_value(target.uid));
    i.labels = labels;

    let mut tags = Tags::new();
    tags.items = spec.tags.clone();
    i.tags = Some(tags);

    i.disks = spec.disks.iter().map(|d| attached_disk(d, zone)).collect();
    i.metadata = Some(metadata_items(spec, user_data)?);
    i.network_interfaces = spec
        .network_interfaces
        .iter()
        .map(|nic| {
            let mut n = NetworkInterface::new();
            if !nic.network.is_empty() {
                n.network = Some(partial_url(&nic.network, || {
                    format!("projects/{}/global/networks/{}", target.project, nic.network)
                }));
            }
            if !nic.subnetwork.is_empty() {
                n.subnetwork = Some(partial_url(&nic.subnetwork, || {
                    format!("regions/{}/subnetworks/{}", spec.region, nic.subnetwork)
                }));
            }
            if !nic.disable_external_ip {
                let mut ac = AccessConfig::new();
                ac.name = Some("External NAT".into());
                ac.r#type = Some(access_config::Type::from("ONE_TO_ONE_NAT"));
                n.access_configs = vec![ac];
            }
            stack_and_alias_ranges(nic, &mut n);
            n
        })
        .collect();

    let mut sched = Scheduling::new();
    sched.automatic_restart = Some(spec.scheduling.automatic_restart);
    sched.on_host_maintenance = Some(scheduling::OnHostMaintenance::from(spec.scheduling.on_host_maintenance.as_str()));
    sched.preemptible = Some(spec.scheduling.preemptible);
    let non_empty = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
    sched.provisioning_model =
        non_empty(&spec.scheduling.provisioning_model).map(|m| scheduling::ProvisioningModel::from(m.as_str()));
    sched.instance_termination_action = non_empty(&spec.scheduling.instance_termination_action)
        .map(|a| scheduling::InstanceTerminationAction::from(a.as_str()));
    sched.max_run_duration = spec.scheduling.max_run_duration.map(|d| {
        let mut out = Duration::new();
        out.seconds = Some(d.seconds);
        out.nanos = Some(d.nanos).filter(|n| *n != 0);
        out
    });
    i.scheduling = Some(sched);

    i.service_accounts = spec
        .service_accounts
        .iter()
        .map(|sa| {
            let mut s = ServiceAccount::new();
            s.email = Some(sa.email.clone());
            s.scopes = sa.scopes.clone();
            s
        })
        .collect();

    if let Some(gpu) = &spec.gpu {
        let mut a = AcceleratorConfig::new();
        a.accelerator_type = Some(partial_url(&gpu.accelerator_type, || {
            format!("projects/{}/zones/{zone}/acceleratorTypes/{}", target.project, gpu.accelerator_type)
        }));
        a.accelerator_count = i32::try_from(gpu.count).ok();
        i.guest_accelerators = vec![a];
    }
    if let Some(sc) = &spec.shielded_instance_configuration {
        let mut c = ShieldedInstanceConfig::new();
        c.enable_secure_boot = sc.secure_boot;
        c.enable_vtpm = sc.vtpm;
        c.enable_integrity_monitoring = sc.integrity_monitoring;
        i.shielded_instance_config = Some(c);
    }
    if let Some(amf) = &spec.advanced_machine_features
        && let Some(nested) = amf.enable_nested_virtualization
    {
        let mut a = AdvancedMachineFeatures::new();
        a.enable_nested_virtualization = Some(nested);
        i.advanced_machine_features = Some(a);
    }
    if let Some(cc) = &spec.confidential_instance_config {
        let mut c = ConfidentialInstanceConfig::new();
        c.confidential_instance_type = cc
            .confidential_instance_type
            .as_deref()
            .filter(|t| !t.is_empty())
            .map(confidential_instance_config::ConfidentialInstanceType::from);
        c.enable_confidential_compute = cc.enable_confidential_compute;
        i.confidential_instance_config = Some(c);
    }
    if !spec.resource_manager_tags.is_empty() {
        let mut p = InstanceParams::new();
        p.resource_manager_tags = spec.resource_manager_tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        i.params = Some(p);
    }
    Ok(i)
}

/// The stack type, IPv6 access type and alias IP range of an interface, as
/// the Go provider sets them: `stackType` as given (`IPV4_ONLY`, Compute's
/// default, is what the Go provider's omission means), `ipv6AccessType` with
/// an IPv6 stack only, no `ipv6AccessConfigs`; one alias range
/// `{ipCidrRange, subnetworkRangeName}` when [`SpecNic::alias_ips`], with
/// empty values left out (as Go's `omitempty`: an empty `ipCidrRange` is for
/// Compute to refuse).
fn stack_and_alias_ranges(nic: &SpecNic, n: &mut NetworkInterface) {
    let non_empty = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
    if let Some(st) = non_empty(&nic.stack_type) {
        if st != STACK_IPV4_ONLY
            && let Some(at) = non_empty(&nic.ipv6_access_type)
        {
            n.ipv_6_access_type = Some(network_interface::Ipv6AccessType::from(at.as_str()));
        }
        n.stack_type = Some(network_interface::StackType::from(st.as_str()));
    }
    if nic.alias_ips() {
        let mut alias = AliasIpRange::new();
        alias.ip_cidr_range = non_empty(&nic.ip_cidr_range);
        alias.subnetwork_range_name = non_empty(&nic.subnetwork_range_name);
        n.alias_ip_ranges = vec![alias];
    }
}

/// `value` when it already is a (partial) URL, otherwise the URL `make` builds from a bare name.
fn partial_url(value: &str, make: impl FnOnce() -> String) -> String {
    if value.contains('/') { value.to_string() } else { make() }
}

pub(crate) fn attached_disk(d: &Disk, zone: &str) -> AttachedDisk {
    let mut a = AttachedDisk::new();
    a.auto_delete = Some(d.auto_delete.unwrap_or(true));
    let mut p = AttachedDiskInitializeParams::new();
    if d.disk_type == DISK_TYPE_SCRATCH {
        a.r#type = Some(attached_disk::Type::from("SCRATCH"));
        a.boot = Some(false);
        a.interface = d.interface.as_deref().map(attached_disk::Interface::from);
        p.disk_type = Some(format!("zones/{zone}/diskTypes/local-ssd"));
    } else {
        a.r#type = Some(attached_disk::Type::from("PERSISTENT"));
        a.boot = Some(d.boot);
        a.interface = d.interface.as_deref().filter(|s| !s.is_empty()).map(attached_disk::Interface::from);
        p.disk_size_gb = Some(d.size_gb);
        p.disk_type = Some(partial_url(&d.disk_type, || format!("zones/{zone}/diskTypes/{}", d.disk_type)));
        p.labels = d.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        p.source_image = Some(d.image.clone()).filter(|s| !s.is_empty());
        p.provisioned_iops = d.provisioned_iops.filter(|v| *v > 0);
        p.provisioned_throughput = d.provisioned_throughput.filter(|v| *v > 0);
        p.storage_pool = d.storage_pool.clone().filter(|s| !s.is_empty());
    }
    a.initialize_params = Some(p);
    if let Some(enc) = d.encryption.as_ref().filter(|e| !e.is_empty()) {
        let mut k = CustomerEncryptionKey::new();
        k.kms_key_name = Some(enc.kms_key_name.trim().to_string());
        let sa = enc.kms_key_service_account.trim();
        k.kms_key_service_account = Some(sa.to_string()).filter(|s| !s.is_empty());
        a.disk_encryption_key = Some(k);
    }
    a
}

fn metadata_items(spec: &GcpProviderSpec, user_data: &[u8]) -> Result<Metadata, DriverError> {
    let mut items = Vec::new();
    let user_key = (!user_data.is_empty()).then(|| user_data_key(user_data));
    if let Some(key) = user_key {
        let text = std::str::from_utf8(user_data).map_err(|_| {
            DriverError::invalid_argument("secret.userData", "is not valid UTF-8 (GCE metadata is text)")
        })?;
        let mut item = metadata::Items::new();
        item.key = Some(key.to_string());
        item.value = Some(text.to_string());
        items.push(item);
    }
    for (idx, m) in spec.metadata.iter().enumerate() {
        if user_key == Some(m.key.as_str()) {
            return Err(DriverError::invalid_argument(
                format!("providerSpec.metadata[{idx}].key"),
                format!("{} is already set from the secret's userData", m.key),
            ));
        }
        let mut item = metadata::Items::new();
        item.key = Some(m.key.clone());
        item.value = m.value.clone();
        items.push(item);
    }
    let mut md = Metadata::new();
    md.items = items;
    Ok(md)
}

/// Addresses of an instance: internal IPs, external NAT IPs and internal IPv6.
pub(crate) fn addresses(i: &Instance) -> Vec<Address> {
    let mut out = Vec::new();
    for nic in &i.network_interfaces {
        if let Some(ip) = nic.network_ip.as_ref().filter(|s| !s.is_empty()) {
            out.push(Address::new(AddressType::InternalIp, ip));
        }
        for ac in &nic.access_configs {
            if let Some(ip) = ac.nat_ip.as_ref().filter(|s| !s.is_empty()) {
                out.push(Address::new(AddressType::ExternalIp, ip));
            }
        }
        if let Some(ip) = nic.ipv_6_address.as_ref().filter(|s| !s.is_empty()) {
            out.push(Address::new(AddressType::InternalIp, ip));
        }
    }
    out
}

/// The instance's status word (`RUNNING`, `STOPPING`, `TERMINATED`, ...).
pub(crate) fn status_word(i: &Instance) -> String {
    i.status.as_ref().and_then(|s| s.name()).unwrap_or("UNKNOWN").to_string()
}

/// How Compute shows a Spot VM it reclaimed, `None` for every other instance:
/// a Spot VM (`scheduling.provisioningModel: SPOT`, or the legacy
/// `scheduling.preemptible: true`) whose status is `TERMINATED`.
///
/// Compute preempts a Spot VM whose `instanceTerminationAction` is STOP (the
/// default) by stopping it: it stays, `TERMINATED`, with `lastStopTimestamp`
/// ("Spot VMs", "Preemption process"). This driver never stops a VM (it
/// inserts, reads and deletes them), and Compute stops a Spot VM on its own
/// only to preempt it (a Spot VM neither restarts automatically nor
/// live-migrates, so a host event ends it the same way), so `TERMINATED` on
/// a Spot VM is decided from the instance the status read already has,
/// without reading the zone's `compute.instances.preempted` operations. An
/// operator who stops such a VM by hand gets the same answer: its machine is
/// replaced either way. A `STOPPING` Spot VM is not decided yet (a delete
/// shows `STOPPING` too). A Spot VM reclaimed with DELETE leaves no instance:
/// that is Compute's plain 404 and the driver's NOT_FOUND, indistinguishable
/// from any deleted VM without reading zone operations. A standard VM that is
/// `TERMINATED` (a `maxRunDuration` with STOP, an operator's stop) is not
/// reclaimed: its status is answered as before.
pub(crate) fn spot_reclaim(i: &Instance) -> Option<String> {
    if i.status.as_ref().and_then(|s| s.name()) != Some("TERMINATED") {
        return None;
    }
    let sched = i.scheduling.as_ref()?;
    let model = if sched.provisioning_model.as_ref().and_then(|m| m.name()) == Some(PROVISIONING_SPOT) {
        "scheduling.provisioningModel SPOT"
    } else if sched.preemptible == Some(true) {
        "scheduling.preemptible true"
    } else {
        return None;
    };
    let mut shown = format!("status TERMINATED, {model}");
    if let Some(action) = sched.instance_termination_action.as_ref().and_then(|a| a.name()) {
        shown.push_str(&format!(", instanceTerminationAction {action}"));
    }
    if let Some(at) = i.last_stop_timestamp.as_deref().filter(|t| !t.is_empty()) {
        shown.push_str(&format!(", lastStopTimestamp {at}"));
    }
    Some(shown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::GcpProviderSpec;

    fn spec() -> GcpProviderSpec {
        GcpProviderSpec::parse(include_bytes!("../examples/machine-class.json")).expect("valid example")
    }

    const TARGET: InstanceTarget<'static> = InstanceTarget { project: "p-1", name: "m-1", uid: "UID-1" };

    #[test]
    fn user_data_placement() {
        assert_eq!(user_data_key(b"#cloud-config\nruncmd: []"), USER_DATA_KEY);
        assert_eq!(user_data_key(b"Content-Type: multipart/mixed; boundary=x"), USER_DATA_KEY);
        assert_eq!(user_data_key(b"#!/bin/bash\necho hi"), STARTUP_SCRIPT_KEY);
        assert_eq!(user_data_key(b"plain"), STARTUP_SCRIPT_KEY);
    }

    #[test]
    fn body_carries_membership_and_uid_labels_and_user_data() {
        let i = build_instance(&spec(), TARGET, b"#cloud-config\n").unwrap();
        assert_eq!(i.name.as_deref(), Some("m-1"));
        assert_eq!(i.machine_type.as_deref(), Some("zones/europe-west1-b/machineTypes/n1-standard-2"));
        assert_eq!(i.labels.get("mcm-machine-uid").map(String::as_str), Some("uid-1"));
        assert!(i.labels.keys().any(|k| k.starts_with("kubernetes-io-cluster-")));
        assert!(i.labels.keys().any(|k| k.starts_with("kubernetes-io-role-")));
        let md = i.metadata.unwrap();
        assert_eq!(md.items[0].key.as_deref(), Some("user-data"));
        assert_eq!(md.items[0].value.as_deref(), Some("#cloud-config\n"));
        let boot = &i.disks[0];
        assert_eq!(boot.boot, Some(true));
        let p = boot.initialize_params.as_ref().unwrap();
        assert_eq!(p.disk_type.as_deref(), Some("zones/europe-west1-b/diskTypes/pd-balanced"));
        assert_eq!(p.source_image.as_deref(), Some("projects/debian-cloud/global/images/debian-12"));
        assert!(i.network_interfaces[0].network.as_deref().unwrap().starts_with("projects/p-1/global/networks/"));
    }

    /// The interface built from the example class with `nic` as its only network interface.
    fn nic_of(nic: serde_json::Value) -> NetworkInterface {
        let mut v: serde_json::Value =
            serde_json::from_slice(include_bytes!("../examples/machine-class.json")).expect("json");
        v["networkInterfaces"] = serde_json::json!([nic]);
        let s = GcpProviderSpec::parse(v.to_string().as_bytes()).expect("valid spec");
        let mut i = build_instance(&s, TARGET, b"").unwrap();
        assert_eq!(i.network_interfaces.len(), 1);
        i.network_interfaces.remove(0)
    }

    fn wire(n: &NetworkInterface) -> serde_json::Value {
        serde_json::to_value(n).expect("serializable")
    }

    #[test]
    fn a_gardener_dual_stack_interface_is_built_field_by_field() {
        use serde_json::json;
        // As gardener-extension-provider-gcp writes it for a dual-stack shoot.
        let n = nic_of(json!({"useAliasIPs": true, "subnetwork": "shoot--p--c-nodes", "disableExternalIP": true,
            "stackType": "IPV4_IPV6", "ipv6accessType": "EXTERNAL", "ipCidrRange": "/24",
            "subnetworkRangeName": "ipv4-pod-cidr"}));
        assert_eq!(n.subnetwork.as_deref(), Some("regions/europe-west1/subnetworks/shoot--p--c-nodes"));
        assert_eq!(n.network, None);
        assert!(n.access_configs.is_empty(), "disableExternalIP");
        assert_eq!(n.stack_type.as_ref().and_then(|s| s.name()), Some("IPV4_IPV6"));
        assert_eq!(n.ipv_6_access_type.as_ref().and_then(|s| s.name()), Some("EXTERNAL"));
        assert!(n.ipv_6_access_configs.is_empty(), "the Go provider sets no ipv6AccessConfigs");
        assert_eq!(n.alias_ip_ranges.len(), 1);
        assert_eq!(n.alias_ip_ranges[0].ip_cidr_range.as_deref(), Some("/24"));
        assert_eq!(n.alias_ip_ranges[0].subnetwork_range_name.as_deref(), Some("ipv4-pod-cidr"));
        let w = wire(&n);
        assert_eq!(w["stackType"], "IPV4_IPV6");
        assert_eq!(w["ipv6AccessType"], "EXTERNAL");
        assert_eq!(w["aliasIpRanges"], json!([{"ipCidrRange": "/24", "subnetworkRangeName": "ipv4-pod-cidr"}]));
        assert!(w.get("ipv6AccessConfigs").is_none(), "{w}");
    }

    #[test]
    fn use_alias_ips_false_or_absent_adds_no_alias_range() {
        use serde_json::json;
        let base = json!({"subnetwork": "nodes", "disableExternalIP": true, "ipCidrRange": "/24",
            "subnetworkRangeName": "ipv4-pod-cidr"});
        let with = |extra: serde_json::Value| {
            let mut v = base.clone();
            v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            nic_of(v)
        };
        // false: never, also for a dual-stack interface.
        let n = with(json!({"useAliasIPs": false, "stackType": "IPV4_IPV6", "ipv6accessType": "INTERNAL"}));
        assert!(n.alias_ip_ranges.is_empty());
        assert_eq!(n.stack_type.as_ref().and_then(|s| s.name()), Some("IPV4_IPV6"));
        assert_eq!(n.ipv_6_access_type.as_ref().and_then(|s| s.name()), Some("INTERNAL"));
        assert!(wire(&n).get("aliasIpRanges").is_none());
        // absent, IPv4 (no stackType): no alias range, no stack type, no IPv6 access type.
        let n = with(json!({"ipv6accessType": "EXTERNAL"}));
        assert!(n.alias_ip_ranges.is_empty());
        assert_eq!(n.stack_type, None);
        assert_eq!(n.ipv_6_access_type, None, "IPv6 access type only with an IPv6 stack");
        // absent, IPV4_ONLY: the same.
        let n = with(json!({"stackType": "IPV4_ONLY", "ipv6accessType": "EXTERNAL"}));
        assert!(n.alias_ip_ranges.is_empty());
        assert_eq!(n.stack_type.as_ref().and_then(|s| s.name()), Some("IPV4_ONLY"));
        assert_eq!(n.ipv_6_access_type, None);
        // absent, IPV4_IPV6: the Go provider's rule, the range is added.
        let n = with(json!({"stackType": "IPV4_IPV6"}));
        assert_eq!(n.alias_ip_ranges.len(), 1);
        assert_eq!(n.ipv_6_access_type, None, "not given, not sent");
    }

    #[test]
    fn use_alias_ips_true_adds_the_range_on_any_stack_and_leaves_empty_values_out() {
        use serde_json::json;
        // What the extension writes for an IPv6 single-stack shoot (stackType IPV4_ONLY).
        let n = nic_of(json!({"useAliasIPs": true, "subnetwork": "nodes", "stackType": "IPV4_ONLY",
            "ipv6accessType": "EXTERNAL", "ipCidrRange": "/24", "subnetworkRangeName": "ipv4-pod-cidr"}));
        assert_eq!(wire(&n)["aliasIpRanges"], json!([{"ipCidrRange": "/24", "subnetworkRangeName": "ipv4-pod-cidr"}]));
        assert_eq!(n.ipv_6_access_type, None);
        assert_eq!(n.access_configs.len(), 1, "external NAT unless disableExternalIP");
        // Without a secondary range: from the primary range.
        let n = nic_of(json!({"useAliasIPs": true, "network": "default", "ipCidrRange": "10.1.2.0/24"}));
        assert_eq!(wire(&n)["aliasIpRanges"], json!([{"ipCidrRange": "10.1.2.0/24"}]));
        // Empty ipCidrRange: sent without it (Go's omitempty); Compute refuses it.
        let n = nic_of(json!({"useAliasIPs": true, "network": "default", "ipCidrRange": "",
            "subnetworkRangeName": "pods"}));
        assert_eq!(wire(&n)["aliasIpRanges"], json!([{"subnetworkRangeName": "pods"}]));
    }

    /// An instance as Compute answers it: `status`, and `scheduling` as JSON.
    fn read_back(status: &str, scheduling: serde_json::Value) -> Instance {
        serde_json::from_value(serde_json::json!({"status": status, "scheduling": scheduling,
            "lastStopTimestamp": "2026-12-02T10:00:00.000-08:00"}))
        .expect("an instance")
    }

    #[test]
    fn only_a_terminated_spot_or_preemptible_vm_is_reclaimed() {
        use serde_json::json;
        let spot = json!({"provisioningModel": "SPOT", "instanceTerminationAction": "STOP", "preemptible": false});
        let shown = spot_reclaim(&read_back("TERMINATED", spot.clone())).expect("reclaimed");
        assert_eq!(
            shown,
            "status TERMINATED, scheduling.provisioningModel SPOT, instanceTerminationAction STOP, \
             lastStopTimestamp 2026-12-02T10:00:00.000-08:00"
        );
        let legacy = spot_reclaim(&read_back("TERMINATED", json!({"preemptible": true}))).expect("reclaimed");
        assert!(legacy.starts_with("status TERMINATED, scheduling.preemptible true"), "{legacy}");
        for status in ["RUNNING", "STOPPING", "PROVISIONING", "STAGING", "SUSPENDED"] {
            assert_eq!(spot_reclaim(&read_back(status, spot.clone())), None, "{status}");
        }
        let standard = json!({"provisioningModel": "STANDARD", "instanceTerminationAction": "STOP",
            "maxRunDuration": {"seconds": "3600"}});
        assert_eq!(spot_reclaim(&read_back("TERMINATED", standard)), None, "a run-time limit is not a reclaim");
        assert_eq!(spot_reclaim(&read_back("TERMINATED", json!({}))), None);
    }

    #[test]
    fn a_script_goes_to_startup_script_and_may_not_be_duplicated() {
        let mut s = spec();
        let i = build_instance(&s, TARGET, b"#!/bin/sh\n").unwrap();
        assert_eq!(i.metadata.unwrap().items[0].key.as_deref(), Some("startup-script"));
        s.metadata.push(crate::spec::MetadataItem { key: "startup-script".into(), value: Some("x".into()) });
        let e = build_instance(&s, TARGET, b"#!/bin/sh\n").unwrap_err();
        assert!(e.field().unwrap().starts_with("providerSpec.metadata["), "{e}");
    }
}
