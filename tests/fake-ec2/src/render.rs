//! XML shapes of EC2 resources, with the element names of the EC2 API reference.

use std::time::Instant;

use crate::clock::iso8601;
use crate::model::{Image, Instance, InstanceState, NetworkInterface, Tags};
use crate::xml::Xml;

/// `<tagSet><item><key/><value/></item>...</tagSet>` (omitted when there are no tags).
pub(crate) fn tag_set(x: &mut Xml, tags: &Tags) {
    if tags.is_empty() {
        return;
    }
    x.items("tagSet", tags, |x, (key, value)| {
        x.leaf("key", key).leaf("value", value);
    });
}

/// `<groupSet>` with security group ids (names are the ids' fake names).
pub(crate) fn group_set(x: &mut Xml, groups: &[String]) {
    x.items("groupSet", groups, |x, id| {
        x.leaf("groupId", id).leaf("groupName", format!("sg-name-{}", id.trim_start_matches("sg-")));
    });
}

fn state_elem(x: &mut Xml, tag: &str, state: InstanceState) {
    x.elem(tag, |x| {
        x.leaf("code", state.code()).leaf("name", state.name());
    });
}

/// `instanceState`-shaped element for state changes.
pub(crate) fn state_change(x: &mut Xml, id: &str, previous: InstanceState, current: InstanceState) {
    x.leaf("instanceId", id);
    state_elem(x, "currentState", current);
    state_elem(x, "previousState", previous);
}

fn ipv6_sets(x: &mut Xml, eni: &NetworkInterface) {
    x.items("ipv6AddressesSet", &eni.ipv6_addresses, |x, address| {
        x.leaf("ipv6Address", address).leaf("isPrimaryIpv6", "false");
    });
    x.items("ipv6PrefixSet", &eni.ipv6_prefixes, |x, prefix| {
        x.leaf("ipv6Prefix", prefix);
    });
}

fn private_ip_set(x: &mut Xml, eni: &NetworkInterface) {
    x.items("privateIpAddressesSet", [eni], |x, eni| {
        x.leaf("privateIpAddress", &eni.private_ip).leaf("privateDnsName", &eni.private_dns).leaf("primary", "true");
    });
}

/// An interface as it appears inside an instance (`InstanceNetworkInterface`).
fn instance_interface(x: &mut Xml, eni: &NetworkInterface, instance: &Instance) {
    x.leaf("networkInterfaceId", &eni.id)
        .leaf("subnetId", &eni.subnet_id)
        .leaf("vpcId", &eni.vpc_id)
        .leaf("description", &eni.description)
        .leaf("ownerId", &instance.owner)
        .leaf("status", "in-use")
        .leaf("macAddress", &eni.mac)
        .leaf("privateIpAddress", &eni.private_ip)
        .leaf("privateDnsName", &eni.private_dns)
        .leaf("sourceDestCheck", eni.source_dest_check);
    group_set(x, &eni.security_groups);
    x.elem("attachment", |x| {
        x.leaf("attachmentId", &eni.attachment_id)
            .leaf("deviceIndex", eni.device_index)
            .leaf("networkCardIndex", eni.network_card_index)
            .leaf("status", "attached")
            .leaf("attachTime", iso8601(instance.launch_time))
            .leaf("deleteOnTermination", eni.delete_on_termination);
    });
    private_ip_set(x, eni);
    ipv6_sets(x, eni);
    x.leaf("interfaceType", &eni.interface_type);
}

/// An interface as DescribeNetworkInterfaces shows it (`NetworkInterface`).
pub(crate) fn network_interface(x: &mut Xml, eni: &NetworkInterface, instance: &Instance, attached: bool) {
    x.leaf("networkInterfaceId", &eni.id)
        .leaf("subnetId", &eni.subnet_id)
        .leaf("vpcId", &eni.vpc_id)
        .leaf("availabilityZone", &eni.availability_zone)
        .leaf("description", &eni.description)
        .leaf("ownerId", &instance.owner)
        .leaf("requesterManaged", "false")
        .leaf("status", if attached { "in-use" } else { "available" })
        .leaf("macAddress", &eni.mac)
        .leaf("privateIpAddress", &eni.private_ip)
        .leaf("privateDnsName", &eni.private_dns)
        .leaf("sourceDestCheck", eni.source_dest_check);
    group_set(x, &eni.security_groups);
    if attached {
        x.elem("attachment", |x| {
            x.leaf("attachmentId", &eni.attachment_id)
                .leaf("instanceId", &instance.id)
                .leaf("instanceOwnerId", &instance.owner)
                .leaf("deviceIndex", eni.device_index)
                .leaf("networkCardIndex", eni.network_card_index)
                .leaf("status", "attached")
                .leaf("attachTime", iso8601(instance.launch_time))
                .leaf("deleteOnTermination", eni.delete_on_termination);
        });
    }
    private_ip_set(x, eni);
    ipv6_sets(x, eni);
    x.leaf("interfaceType", &eni.interface_type);
    tag_set(x, &eni.tags);
}

/// One `instancesSet/item`.
pub(crate) fn instance(x: &mut Xml, instance: &Instance, now: Instant) {
    let state = instance.state(now);
    let terminated = state == InstanceState::Terminated;
    x.leaf("instanceId", &instance.id).leaf("imageId", &instance.image_id);
    state_elem(x, "instanceState", state);
    let primary = instance.primary_interface().filter(|_| !terminated);
    x.leaf("privateDnsName", primary.map_or("", |eni| eni.private_dns.as_str())).leaf("dnsName", "");
    match (&instance.end_reason, instance.terminate_requested) {
        (Some(reason), _) => x.leaf("reason", &reason.transition),
        (None, Some(_)) => x.leaf("reason", "User initiated"),
        (None, None) => x.leaf("reason", ""),
    };
    x.opt_leaf("keyName", instance.key_name.as_deref())
        .leaf("amiLaunchIndex", instance.ami_launch_index)
        .elem("productCodes", |_| {})
        .leaf("instanceType", &instance.instance_type)
        .leaf("launchTime", iso8601(instance.launch_time))
        .elem("placement", |x| {
            x.leaf("availabilityZone", &instance.availability_zone).leaf("groupName", "").leaf("tenancy", "default");
        })
        .elem("monitoring", |x| {
            x.leaf("state", "disabled");
        });
    if let Some(eni) = primary {
        x.leaf("subnetId", &eni.subnet_id).leaf("vpcId", &eni.vpc_id).leaf("privateIpAddress", &eni.private_ip);
        x.leaf("sourceDestCheck", eni.source_dest_check);
    }
    group_set(x, if terminated { &[] } else { &instance.security_groups });
    match &instance.end_reason {
        Some(reason) => {
            x.elem("stateReason", |x| {
                x.leaf("code", reason.code).leaf("message", reason.message);
            });
        }
        None if terminated => {
            x.elem("stateReason", |x| {
                x.leaf("code", "Client.UserInitiatedShutdown")
                    .leaf("message", "Client.UserInitiatedShutdown: User initiated shutdown");
            });
        }
        None => {}
    }
    x.leaf("architecture", "x86_64").leaf("rootDeviceType", "ebs").leaf("rootDeviceName", &instance.root_device_name);
    let volumes = if terminated { &[][..] } else { &instance.volumes[..] };
    x.items("blockDeviceMapping", volumes, |x, volume| {
        x.leaf("deviceName", &volume.device_name).elem("ebs", |x| {
            x.leaf("volumeId", &volume.id)
                .leaf("status", "attached")
                .leaf("attachTime", iso8601(instance.launch_time))
                .leaf("deleteOnTermination", volume.delete_on_termination);
        });
    });
    x.leaf("virtualizationType", "hvm").leaf("clientToken", instance.client_token.as_deref().unwrap_or(""));
    tag_set(x, &instance.tags);
    x.leaf("hypervisor", "xen");
    if let Some(market) = &instance.market {
        x.leaf("instanceLifecycle", &market.lifecycle)
            .opt_leaf("spotInstanceRequestId", market.spot_request_id.as_deref());
    }
    let interfaces = if terminated { &[][..] } else { &instance.interfaces[..] };
    x.items("networkInterfaceSet", interfaces, |x, eni| instance_interface(x, eni, instance));
    if let Some(profile) = &instance.iam_instance_profile {
        x.elem("iamInstanceProfile", |x| {
            x.leaf("arn", profile).leaf("id", "AIPAFAKEPROFILE0000000");
        });
    }
    x.leaf("ebsOptimized", "false").leaf("enaSupport", "true");
    x.elem("metadataOptions", |x| crate::actions::metadata::render(x, &instance.metadata, now));
    x.leaf("bootMode", "uefi-preferred").leaf("platformDetails", "Linux/UNIX").leaf("usageOperation", "RunInstances");
}

/// The body of a `Reservation` (reservationId, ownerId, groupSet, instancesSet).
pub(crate) fn reservation<'a>(x: &mut Xml, instances: impl IntoIterator<Item = &'a Instance> + Clone, now: Instant) {
    let mut iter = instances.clone().into_iter();
    let Some(first) = iter.next() else { return };
    x.leaf("reservationId", &first.reservation_id).leaf("ownerId", &first.owner);
    x.elem("groupSet", |_| {});
    x.items("instancesSet", instances, |x, i| instance(x, i, now));
}

/// One `imagesSet/item`.
pub(crate) fn image(x: &mut Xml, image: &Image) {
    x.leaf("imageId", &image.id)
        .leaf("imageLocation", format!("{}/{}", image.owner, image.name))
        .leaf("imageState", "available")
        .leaf("imageOwnerId", &image.owner)
        .leaf("creationDate", &image.creation_date)
        .leaf("isPublic", image.public)
        .leaf("architecture", &image.architecture)
        .leaf("imageType", "machine")
        .opt_leaf("imageOwnerAlias", image.owner_alias.as_deref())
        .leaf("name", &image.name)
        .leaf("description", &image.description)
        .leaf("rootDeviceType", "ebs")
        .leaf("rootDeviceName", &image.root_device_name);
    x.items("blockDeviceMapping", [image], |x, image| {
        x.leaf("deviceName", &image.root_device_name).elem("ebs", |x| {
            x.leaf("snapshotId", &image.snapshot_id)
                .leaf("volumeSize", image.volume_size)
                .leaf("deleteOnTermination", "true")
                .leaf("volumeType", "gp3")
                .leaf("encrypted", "false");
        });
    });
    x.leaf("virtualizationType", "hvm").leaf("hypervisor", "xen").leaf("enaSupport", "true");
    tag_set(x, &image.tags);
    x.leaf("platformDetails", "Linux/UNIX").leaf("usageOperation", "RunInstances");
}
