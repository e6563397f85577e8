//! Parsing and validating the AWS provider spec with the Go provider's rules
//! (pkg/aws/apis/validation), plus the checks for fields the Go provider
//! accepted but never sent. The first violation is returned, naming its field.

use aws_sdk_ec2::types::MarketType;
use machine_driver_api::{DriverError, Result, parse_provider_spec};

use crate::spec::{AwsProviderSpec, ROOT_DEVICE_NAME};

/// EBS volume types EC2 accepts.
pub(crate) const VOLUME_TYPES: &[&str] = &["standard", "gp2", "gp3", "io1", "io2", "st1", "sc1"];

/// Parses raw providerSpec JSON and validates it.
pub(crate) fn parse_and_validate(raw: &[u8]) -> Result<AwsProviderSpec> {
    let spec: AwsProviderSpec = parse_provider_spec(raw)?;
    validate(&spec)?;
    Ok(spec)
}

fn invalid(field: impl Into<String>, problem: impl std::fmt::Display) -> DriverError {
    DriverError::invalid_argument(format!("providerSpec.{}", field.into()), problem)
}

/// Checks `spec` against the Go provider's validation rules.
pub(crate) fn validate(spec: &AwsProviderSpec) -> Result<()> {
    if spec.ami.trim().is_empty() {
        return Err(invalid("ami", "is required"));
    }
    if !is_ami_id(&spec.ami) {
        return Err(invalid("ami", "must be an AMI id of the form ami- followed by 8 or 17 hex digits"));
    }
    if spec.region.trim().is_empty() {
        return Err(invalid("region", "is required"));
    }
    crate::provider_id::check_region("providerSpec.region", &spec.region)?;
    if spec.machine_type.trim().is_empty() {
        return Err(invalid("machineType", "is required"));
    }
    if spec.iam.name.is_empty() == spec.iam.arn.is_empty() {
        return Err(invalid("iam", "exactly one of name and arn must be set"));
    }
    validate_tags(spec)?;
    validate_network_interfaces(spec)?;
    validate_block_devices(spec)?;
    validate_options(spec)
}

fn validate_tags(spec: &AwsProviderSpec) -> Result<()> {
    // The cluster and role tags, exactly one of each: the markers that tell
    // this cluster's instances from others' (crate::ownership).
    crate::ownership::markers(spec)?;
    for key in spec.tags.keys() {
        if key.is_empty() || key.len() > 128 || key.starts_with("aws:") {
            return Err(invalid(format!("tags[{key}]"), "tag keys must be 1-128 characters and not start with aws:"));
        }
    }
    Ok(())
}

fn validate_network_interfaces(spec: &AwsProviderSpec) -> Result<()> {
    if spec.network_interfaces.is_empty() {
        return Err(invalid("networkInterfaces", "at least one network interface is required"));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, nic) in spec.network_interfaces.iter().enumerate() {
        let at = |f: &str| format!("networkInterfaces[{i}].{f}");
        if nic.subnet_id.trim().is_empty() {
            return Err(invalid(at("subnetID"), "is required"));
        }
        if nic.security_group_ids.is_empty() {
            return Err(invalid(at("securityGroupIDs"), "at least one security group is required"));
        }
        if let Some(j) = nic.security_group_ids.iter().position(|g| g.trim().is_empty()) {
            return Err(invalid(format!("networkInterfaces[{i}].securityGroupIDs[{j}]"), "must not be empty"));
        }
        if let Some(t) = nic.interface_type.as_deref()
            && !matches!(t, "interface" | "efa" | "efa-only")
        {
            return Err(invalid(at("interfaceType"), "must be one of interface, efa, efa-only"));
        }
        for (name, v) in [("ipv6AddressCount", nic.ipv6_address_count), ("ipv6PrefixCount", nic.ipv6_prefix_count)] {
            if v.is_some_and(|n| n < 0) {
                return Err(invalid(at(name), "must not be negative"));
            }
        }
        if nic.device_index.is_some_and(|n| n < 0) {
            return Err(invalid(at("deviceIndex"), "must not be negative"));
        }
        if !seen.insert((nic.network_card_index.unwrap_or(0), spec.device_index(i))) {
            return Err(invalid(at("deviceIndex"), "two interfaces share one device index on one network card"));
        }
    }
    Ok(())
}

fn is_data_device_name(name: &str) -> bool {
    // ^/dev/(sd[a-z]|xvd[a-c][a-z]?)$
    let lower = |c: u8| c.is_ascii_lowercase();
    match name.strip_prefix("/dev/") {
        Some(rest) if rest.starts_with("sd") => rest.len() == 3 && lower(rest.as_bytes()[2]),
        Some(rest) if rest.starts_with("xvd") => {
            let b = rest.as_bytes();
            (b.len() == 4 || b.len() == 5) && matches!(b[3], b'a'..=b'c') && (b.len() == 4 || lower(b[4]))
        }
        _ => false,
    }
}

fn validate_block_devices(spec: &AwsProviderSpec) -> Result<()> {
    let devices = &spec.block_devices;
    let mut roots = 0;
    let mut names = std::collections::BTreeSet::new();
    for (i, d) in devices.iter().enumerate() {
        let at = |f: &str| format!("blockDevices[{i}].{f}");
        if d.device_name == ROOT_DEVICE_NAME {
            roots += 1;
        } else if devices.len() > 1 && !is_data_device_name(&d.device_name) {
            return Err(invalid(at("deviceName"), "must be /root or match ^/dev/(sd[a-z]|xvd[a-c][a-z]?)$"));
        }
        if !names.insert(d.device_name.as_str()) {
            return Err(invalid(at("deviceName"), "device names must be unique"));
        }
        if !VOLUME_TYPES.contains(&d.ebs.volume_type.as_str()) {
            return Err(invalid(at("ebs.volumeType"), format!("must be one of {}", VOLUME_TYPES.join(", "))));
        }
        if d.ebs.volume_size <= 0 {
            return Err(invalid(at("ebs.volumeSize"), "must be a positive number of GiB"));
        }
        if d.ebs.iops < 0 || (matches!(d.ebs.volume_type.as_str(), "io1" | "io2") && d.ebs.iops == 0) {
            return Err(invalid(at("ebs.iops"), "must be positive, and is required for io1 and io2"));
        }
        if d.ebs.throughput.is_some_and(|t| t <= 0) {
            return Err(invalid(at("ebs.throughput"), "must be positive"));
        }
        if d.ebs.kms_key_id.is_some() && !d.ebs.encrypted {
            return Err(invalid(at("ebs.kmsKeyID"), "requires encrypted: true"));
        }
    }
    if roots > 1 || (roots == 0 && devices.len() > 1) {
        return Err(invalid("blockDevices", "exactly one device must be the root device (deviceName /root)"));
    }
    Ok(())
}

fn one_of(field: &str, value: Option<&str>, allowed: &[&str]) -> Result<()> {
    match value {
        Some(v) if !allowed.contains(&v) => Err(invalid(field, format!("must be one of {}", allowed.join(", ")))),
        _ => Ok(()),
    }
}

fn validate_options(spec: &AwsProviderSpec) -> Result<()> {
    if let Some(cr) = &spec.capacity_reservation {
        let targets = usize::from(cr.capacity_reservation_id.is_some())
            + usize::from(cr.capacity_reservation_resource_group_arn.is_some());
        if cr.capacity_reservation_preference.is_some() && targets > 0 {
            return Err(invalid(
                "capacityReservation",
                "capacityReservationPreference cannot be combined with a reservation id or resource group ARN",
            ));
        }
        if targets > 1 {
            return Err(invalid(
                "capacityReservation",
                "set only one of capacityReservationId and capacityReservationResourceGroupArn",
            ));
        }
        one_of(
            "capacityReservation.capacityReservationPreference",
            cr.capacity_reservation_preference.as_deref(),
            &["open", "none", "capacity-reservations-only"],
        )?;
    }
    if let Some(m) = &spec.instance_metadata_options {
        if m.http_put_response_hop_limit.is_some_and(|h| !(1..=64).contains(&h)) {
            return Err(invalid("instanceMetadataOptions.httpPutResponseHopLimit", "must be between 1 and 64"));
        }
        one_of("instanceMetadataOptions.httpEndpoint", m.http_endpoint.as_deref(), &["enabled", "disabled"])?;
        one_of("instanceMetadataOptions.httpTokens", m.http_tokens.as_deref(), &["required", "optional"])?;
        one_of("instanceMetadataOptions.httpProtocolIpv6", m.http_protocol_ipv6.as_deref(), &["enabled", "disabled"])?;
    }
    if let Some(c) = &spec.cpu_options {
        // Gardener writes `{"coreCount":null,"threadsPerCore":null,"amdSevSnp":"enabled"}`
        // when only SEV-SNP is asked for: both counts are optional, but go together.
        if c.core_count.is_some_and(|n| n <= 0) {
            return Err(invalid("cpuOptions.coreCount", "must be positive"));
        }
        if c.threads_per_core.is_some_and(|t| t != 1 && t != 2) {
            return Err(invalid("cpuOptions.threadsPerCore", "must be 1 or 2"));
        }
        if c.core_count.is_some() != c.threads_per_core.is_some() {
            let missing = if c.core_count.is_some() { "cpuOptions.threadsPerCore" } else { "cpuOptions.coreCount" };
            return Err(invalid(missing, "is required when the other of coreCount and threadsPerCore is set"));
        }
        one_of("cpuOptions.amdSevSnp", c.amd_sev_snp.as_deref(), &["enabled", "disabled"])?;
    }
    if let Some(p) = &spec.placement {
        one_of("placement.tenancy", p.tenancy.as_deref(), &["default", "dedicated", "host"])?;
        one_of("placement.affinity", p.affinity.as_deref(), &["default", "host"])?;
    }
    if let Some(m) = &spec.instance_market_options {
        if spec.spot_price.is_some() {
            return Err(invalid("instanceMarketOptions", "cannot be combined with spotPrice"));
        }
        validate_market_type(m.market_type.as_deref())?;
        if let Some(s) = &m.spot_options {
            one_of(
                "instanceMarketOptions.spotOptions.spotInstanceType",
                s.spot_instance_type.as_deref(),
                &["one-time", "persistent"],
            )?;
            one_of(
                "instanceMarketOptions.spotOptions.instanceInterruptionBehavior",
                s.instance_interruption_behavior.as_deref(),
                &["terminate", "stop", "hibernate"],
            )?;
        }
    }
    if spec.capacity_reservation.as_ref().and_then(|c| c.is_ml_capacity_block).unwrap_or(false)
        && (spec.spot_price.is_some() || spec.instance_market_options.is_some())
    {
        return Err(invalid("capacityReservation.isMLCapacityBlock", "cannot be combined with spot options"));
    }
    Ok(())
}

/// The market types RunInstances takes: every value of the SDK's `MarketType`
/// (the Go provider and the Gardener extension pass the class's value through;
/// the extension's `InstanceMarketOptions` in
/// gardener/gardener-extension-provider-aws `pkg/apis/aws/types_worker.go`
/// documents `spot`, `capacity-block`, `interruptible-capacity-reservation`)
/// except `on-demand`, which the EC2 API reference's
/// `InstanceMarketOptionsRequest.MarketType` does not list (valid values: spot |
/// capacity-block | interruptible-capacity-reservation; on-demand is what a
/// launch without market options is). A value a newer SDK adds is taken
/// without a change here, as by the Go provider.
pub(crate) fn run_instances_market_types() -> impl Iterator<Item = &'static str> {
    MarketType::values().iter().copied().filter(|v| *v != MarketType::OnDemand.as_str())
}

fn validate_market_type(market_type: Option<&str>) -> Result<()> {
    const FIELD: &str = "instanceMarketOptions.marketType";
    // Empty is absent, as the Go SDK's serializer omits an empty enum.
    let Some(t) = market_type.filter(|t| !t.is_empty()) else { return Ok(()) };
    if t == MarketType::OnDemand.as_str() {
        return Err(invalid(
            FIELD,
            "on-demand is what a launch without instanceMarketOptions is: RunInstances takes no on-demand market \
             type (omit instanceMarketOptions)",
        ));
    }
    if !run_instances_market_types().any(|v| v == t) {
        let all: Vec<_> = run_instances_market_types().collect();
        return Err(invalid(FIELD, format!("must be one of {}", all.join(", "))));
    }
    Ok(())
}

#[cfg(test)]
#[path = "spec_validation_tests.rs"]
mod tests;

/// EC2 image ids: `ami-` and 8 (old) or 17 (current) lowercase hex digits.
pub(crate) fn is_ami_id(id: &str) -> bool {
    id.strip_prefix("ami-").is_some_and(|hex| {
        (hex.len() == 8 || hex.len() == 17) && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod ami_tests {
    #[test]
    fn ami_ids() {
        assert!(super::is_ami_id("ami-0123456789abcdef0"));
        assert!(super::is_ami_id("ami-12345678"));
        for bad in ["not-an-ami", "ami-", "ami-XYZ12345", "ami-0123456789abcdef", "AMI-12345678"] {
            assert!(!super::is_ami_id(bad), "{bad}");
        }
    }
}
