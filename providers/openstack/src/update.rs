//! UpdateMachine on OpenStack (issue 32): what Nova and Neutron change on a
//! running server in place, field by field ([`machine_driver_api::UpdatePlan`]).
//! The Go provider has no such call (gardener/machine-controller-manager-provider-openstack
//! v0.27.1 `pkg/driver/executor/executor.go` sets the metadata only in
//! `deployServer` and the port tags only in `getOrCreatePort`/`TagPort`); this
//! keeps exactly the sets those give (and this driver's create gives,
//! [`crate::create::server_metadata`], [`crate::create::port_tags`]).
//!
//! Reads: `GET /servers/{id}` (the full record: the coalesced status reads keep
//! only the markers of the metadata) and, alongside, `GET /ports?device_id={id}`.
//! The server is judged as GetMachineStatus judges it ([`crate::ownership`]):
//! another cluster's or another machine's server is NOT_FOUND and nothing is
//! written. Then:
//!
//! - `providerSpec.spec.tags`, in place: the server's metadata is kept at the
//!   class's tags plus the machine uid, one [`TagPlan`] (a key is removed only
//!   when the previous class set it); the machine's ports (those named for the
//!   machine, as both drivers name them) keep the class's cluster and role keys
//!   as Neutron tags, one plan each. Writes (the compute API reference, "Server
//!   metadata"; the networking API reference, "Tag extension"): nothing to
//!   remove → `POST /servers/{id}/metadata` with the keys to set (Nova merges:
//!   keys set meanwhile by others stay); something to remove → one
//!   `PUT /servers/{id}/metadata` with the whole set the read showed, changed
//!   (Nova replaces: a key someone set between the read and the write is lost,
//!   the price of one call instead of one `DELETE /servers/{id}/metadata/{key}`
//!   per key); a port → one `PUT /ports/{id}/tags` with its tags, changed.
//!   Nova takes at most `metadata_items` (quota, 128 by default) items: more is
//!   its 403, RESOURCE_EXHAUSTED. Keys and values are checked as create checks
//!   them ([`OpenStackSpec::parse`]).
//! - `providerSpec.spec.securityGroups`, in place when the class names groups:
//!   each machine port's groups (by id, resolved as create resolves them) are
//!   completed with the class's, and a group only the previous class named is
//!   taken off: `PUT /ports/{id}` with the port's revision (`If-Match`: a
//!   concurrent change is 412, UNAVAILABLE, and the retry reads again). A
//!   class that names no group where the previous class named some is
//!   NEEDS_REPLACEMENT (a new server gets Neutron's `default`; the ports keep theirs).
//! - replacement only, from the server read (no further call): the flavor
//!   (`flavor.original_name`, microversion 2.47 on), the availability zone
//!   (`OS-EXT-AZ:availability_zone`), the region (the providerID's, where the
//!   server is read), the boot source (`rootDiskSize` 0 boots from the image,
//!   more from a volume: Nova shows `image` `""` then) and, for a server booted
//!   from the image, `imageID` (`image.id`).
//! - replacement only, from the previous class (Nova's record does not show
//!   them; a Cinder, Glance or Neutron read each would): another non-zero
//!   `rootDiskSize` of a boot volume (the volume keeps its size) and the image
//!   of a boot volume or by `imageName` here; every other field the class
//!   changes (`networkID`, `subnetID`, `subnetIDs`, `networks`,
//!   `podNetworkCidr`, `podNetworkCIDRs`, `keyName`, `serverGroupID`,
//!   `useConfigDrive`, `rootDiskType`, ...) by the kit's
//!   `UpdatePlan::for_request`. NEEDS_REPLACEMENT when the class changes
//!   them, else not reported (never UNCHANGED: nothing was read to tell);
//!   without a previous class they are not compared.
//!
//! `validate_only` makes the reads only. A repeat after success writes nothing.
//! Cost of a tag change: 2 reads, 1 write on the server, 1 per port whose tags change.

use std::collections::BTreeMap;

use machine_driver_api::{
    CallContext, DriverError, Ownership, TagPlan, UpdateMachine, UpdatePlan, UpdatedMachine, foreign_not_found,
};
use serde_json::json;

use crate::clients::{Api, Call, Verb};
use crate::create::{port_tags, server_metadata};
use crate::credentials::OsCredentials;
use crate::driver::OpenStackDriver;
use crate::lookup::get_server;
use crate::naming::{MACHINE_UID_KEY, answered_id, parse_provider_id, provider_id};
use crate::os::keystone::Service;
use crate::os::model::{Port, Server};
use crate::ownership::log_foreign;
use crate::ports;
use crate::spec::{ImageRef, OpenStackSpec};

/// The class field of the server's metadata and the ports' tags.
const TAGS_FIELD: &str = "providerSpec.spec.tags";
/// The class field of the ports' security groups.
const SECURITY_GROUPS_FIELD: &str = "providerSpec.spec.securityGroups";

/// One machine port and what changes on it.
struct PortChange<'a> {
    port: &'a Port,
    /// "port <id>", for the answer.
    what: String,
    tags: TagPlan,
    groups: Option<TagPlan>,
}

impl OpenStackDriver {
    /// UpdateMachine (see the module docs).
    pub(crate) async fn update(&self, ctx: &CallContext, req: UpdateMachine) -> Result<UpdatedMachine, DriverError> {
        let creds = OsCredentials::from_secret(&req.secret, "secret")?;
        let spec = OpenStackSpec::parse(&req.class.provider_spec)?;
        let markers = spec.markers()?;
        let previous = match &req.previous_class {
            Some(class) => Some(OpenStackSpec::parse(&class.provider_spec).map_err(previous_class_error)?),
            None => None,
        };
        let pid = req.machine.provider_id.as_deref().unwrap_or_default();
        let (region, id) = parse_provider_id(pid)?;
        let api = self.pool.api(&creds, &region, ctx)?;
        let what = provider_id(&region, &id);
        let (server, attached) = tokio::join!(get_server(&api, &id), ports::of_server(&api, &id));
        let server = server?.ok_or_else(|| DriverError::not_found(format!("server {what}")))?;
        if let Ownership::Foreign(why) = markers.judge(&server, &req.machine) {
            log_foreign("update", &server, why);
            return Err(foreign_not_found(format!("server {what}"), why));
        }
        if server.is_deleting() {
            return Err(DriverError::not_found(format!("server {what} (it is being deleted)")));
        }
        let attached = attached?;
        let uid = req.machine.uid.as_str();

        let vm_plan = TagPlan::new(
            &server.metadata,
            &desired_metadata(&spec, uid),
            previous.as_ref().map(|p| desired_metadata(p, uid)).as_ref(),
        );
        let port_desired = as_set(&port_tags(&markers));
        let port_previous = match &previous {
            Some(p) => Some(as_set(&port_tags(&p.markers()?))),
            None => None,
        };
        let groups = self.desired_groups(&api, &creds, &spec, previous.as_ref()).await?;
        let machine_ports: Vec<&Port> =
            attached.iter().filter(|p| p.name == server.name && !p.name.is_empty()).collect();
        let changes: Vec<PortChange<'_>> = machine_ports
            .into_iter()
            .map(|port| PortChange {
                port,
                what: format!("port {}", port.id),
                tags: TagPlan::new(&as_set(&port.tags), &port_desired, port_previous.as_ref()),
                groups: groups
                    .as_ref()
                    .map(|(desired, prev)| TagPlan::new(&as_set(&port.security_groups), desired, prev.as_ref())),
            })
            .collect();

        let mut plan = UpdatePlan::for_request(what, &req);
        let tag_plans =
            std::iter::once(("the server", &vm_plan)).chain(changes.iter().map(|c| (c.what.as_str(), &c.tags)));
        plan.tags(TAGS_FIELD, tag_plans);
        if groups.is_some() {
            plan.tags(
                SECURITY_GROUPS_FIELD,
                changes.iter().filter_map(|c| c.groups.as_ref().map(|g| (c.what.as_str(), g))),
            );
        } else if let Some(before) = previous.as_ref().filter(|p| !p.security_groups.is_empty()) {
            // The class names no group any more: create would leave Neutron's
            // `default`; the ports keep the groups they have.
            plan.compare_replacement(SECURITY_GROUPS_FIELD, &before.security_groups.join(", "), "Neutron's default");
        }
        compare_replacements(&mut plan, &spec, previous.as_ref(), &server, &region);

        if !plan.validate_only() {
            let writes = changes.iter().map(|c| write_port(&api, c));
            let (vm, ports) = tokio::join!(write_metadata(&api, &server, &vm_plan), futures::future::join_all(writes));
            vm?;
            ports.into_iter().collect::<Result<Vec<()>, DriverError>>()?;
        }
        plan.finish()
    }

    /// The security group ids the machine's ports should carry and, with a
    /// previous class, the ids it named (`None` when the class names none:
    /// create then left Neutron's `default` group, and nothing is compared).
    /// A previous class's group that no longer resolves is not taken off.
    async fn desired_groups(
        &self,
        api: &Api<'_>,
        creds: &OsCredentials,
        spec: &OpenStackSpec,
        previous: Option<&OpenStackSpec>,
    ) -> Result<Option<(BTreeMap<String, String>, Option<BTreeMap<String, String>>)>, DriverError> {
        if spec.security_groups.is_empty() {
            return Ok(None);
        }
        let desired = as_set(&self.resolver.security_groups(creds.fingerprint, api, &spec.security_groups).await?);
        let previous = match previous.filter(|p| !p.security_groups.is_empty()) {
            Some(p) => match self.resolver.security_groups(creds.fingerprint, api, &p.security_groups).await {
                Ok(ids) => Some(as_set(&ids)),
                Err(e) => {
                    tracing::info!(error = %e, "the previous class's security groups do not resolve: none is taken off");
                    None
                }
            },
            None => None,
        };
        Ok(Some((desired, previous)))
    }
}

/// The metadata the machine's server should carry: what create gives it (the
/// uid left out when the request has none: it is never blanked).
fn desired_metadata(spec: &OpenStackSpec, uid: &str) -> BTreeMap<String, String> {
    let mut out = server_metadata(spec, uid);
    if uid.is_empty() {
        out.remove(MACHINE_UID_KEY);
    }
    out
}

/// Strings as the keys of a [`TagPlan`] map (Neutron tags and security groups have no values).
fn as_set(items: &[String]) -> BTreeMap<String, String> {
    items.iter().map(|t| (t.clone(), String::new())).collect()
}

/// `current` in its order without what `plan` removes, then what it adds.
fn applied_list(current: &[String], plan: &TagPlan) -> Vec<String> {
    let mut out: Vec<String> = current.iter().filter(|t| !plan.remove.contains(*t)).cloned().collect();
    for key in plan.set.keys() {
        if !out.contains(key) {
            out.push(key.clone());
        }
    }
    out
}

/// The fields only a new server can change: compared with the server's
/// record where it shows them (the flavor, the availability zone, the
/// providerID's region, the boot source and, for a server booted from the
/// image, `imageID`), else with the previous class (the boot volume's size and
/// image; the kit's `UpdatePlan::for_request` reports the class's other changes).
fn compare_replacements(
    plan: &mut UpdatePlan,
    spec: &OpenStackSpec,
    previous: Option<&OpenStackSpec>,
    server: &Server,
    region: &str,
) {
    let flavor = server.flavor.original_name.as_deref().or(server.flavor.id.as_deref()).unwrap_or_default();
    plan.compare_replacement("providerSpec.spec.flavorName", flavor, spec.flavor_name.trim());
    plan.compare_replacement(
        "providerSpec.spec.availabilityZone",
        &server.availability_zone,
        spec.availability_zone.trim(),
    );
    plan.compare_replacement("providerSpec.spec.region", region, spec.region.trim());
    let boot = |from_volume: bool| if from_volume { "boots from a volume" } else { "boots from the image" };
    let booted_from_volume = server.image.is_none();
    let wants_volume = spec.root_disk_size > 0;
    if booted_from_volume != wants_volume {
        plan.compare_replacement(ROOT_DISK_SIZE_FIELD, boot(booted_from_volume), boot(wants_volume));
    } else if !booted_from_volume {
        plan.unchanged(ROOT_DISK_SIZE_FIELD);
    } else if let Some(before) = previous.map(|p| p.root_disk_size).filter(|size| *size > 0) {
        // Nova does not show the boot volume's size (a Cinder read): only the
        // previous class tells whether it changes; the volume keeps its size.
        let gb = |size: i64| format!("a boot volume of {size} GB");
        if before != spec.root_disk_size {
            plan.compare_replacement(ROOT_DISK_SIZE_FIELD, &gb(before), &gb(spec.root_disk_size));
        }
    }
    if booted_from_volume == wants_volume {
        match (server.image.as_deref(), spec.image()) {
            (Some(current), ImageRef::Id(desired)) => {
                plan.compare_replacement("providerSpec.spec.imageID", current, desired);
            }
            (_, desired) => {
                if let Some(before) = previous.map(OpenStackSpec::image).filter(|before| *before != desired) {
                    let field = match desired {
                        ImageRef::Id(_) => "providerSpec.spec.imageID",
                        ImageRef::Name(_) => "providerSpec.spec.imageName",
                    };
                    plan.compare_replacement(field, &image_text(before), &image_text(desired));
                }
            }
        }
    }
}

/// The class field of the boot volume's size.
const ROOT_DISK_SIZE_FIELD: &str = "providerSpec.spec.rootDiskSize";

/// An image reference in an answer.
fn image_text(image: ImageRef<'_>) -> String {
    match image {
        ImageRef::Id(id) => format!("imageID {id:?}"),
        ImageRef::Name(name) => format!("imageName {name:?}"),
    }
}

/// The server's metadata write: `POST` (merge) with the keys to set, or `PUT`
/// (replace) of the whole changed set when a key goes; no call when nothing changes.
async fn write_metadata(api: &Api<'_>, server: &Server, plan: &TagPlan) -> Result<(), DriverError> {
    if plan.is_empty() {
        return Ok(());
    }
    let path = format!("/servers/{}/metadata", answered_id("the id of a server", &server.id)?);
    let (call, items) = if plan.remove.is_empty() {
        (Call::new(Service::Compute, "servers.metadata.update", Verb::Post, &path), plan.set.clone())
    } else {
        (Call::new(Service::Compute, "servers.metadata.replace", Verb::Put, &path), plan.apply_to(&server.metadata))
    };
    api.json::<serde_json::Value>(call, &[], Some(&json!({"metadata": items}))).await?;
    Ok(())
}

/// A port's writes: its tags (`PUT /ports/{id}/tags`) and its security groups
/// (`PUT /ports/{id}` on its revision), each only when it changes.
async fn write_port(api: &Api<'_>, change: &PortChange<'_>) -> Result<(), DriverError> {
    let id = answered_id("the id of a port", &change.port.id)?;
    if !change.tags.is_empty() {
        let path = format!("/ports/{id}/tags");
        let body = json!({"tags": applied_list(&change.port.tags, &change.tags)});
        api.json::<serde_json::Value>(Call::new(Service::Network, "ports.tags", Verb::Put, &path), &[], Some(&body))
            .await?;
    }
    if let Some(groups) = change.groups.as_ref().filter(|g| !g.is_empty()) {
        let path = format!("/ports/{id}");
        let body = serde_json::to_vec(
            &json!({"port": {"security_groups": applied_list(&change.port.security_groups, groups)}}),
        )
        .unwrap_or_default();
        let revision = change.port.revision_number.map(|r| format!("revision_number={r}"));
        let headers: Vec<(&str, &str)> = revision.as_deref().map(|r| ("If-Match", r)).into_iter().collect();
        let call = Call::new(Service::Network, "ports.update", Verb::Put, &path);
        api.raw_with(call, &[], Some((&body, "application/json")), &headers).await?;
    }
    Ok(())
}

/// A previous class that does not parse: INVALID_ARGUMENT naming the field
/// under `previous_machine_class` (the request field, as the server names it).
fn previous_class_error(e: DriverError) -> DriverError {
    let field = format!("previous_machine_class.{}", e.field().unwrap_or("providerSpec"));
    DriverError::invalid_argument(field, e.message().to_string())
}

#[cfg(test)]
mod tests {
    use machine_driver_api::ChangeOutcome;

    use super::*;
    use crate::os::model::ServerFlavor;

    /// The example class's providerSpec with `patch` merged into its `spec`.
    fn class_json(patch: &serde_json::Value) -> Vec<u8> {
        let mut class = crate::spec::tests_support::example();
        for (k, v) in patch.as_object().unwrap() {
            class["spec"][k] = v.clone();
        }
        serde_json::to_vec(&class).unwrap()
    }

    fn spec(patch: serde_json::Value) -> OpenStackSpec {
        OpenStackSpec::parse(&class_json(&patch)).unwrap()
    }

    fn outcomes(plan: UpdatePlan) -> Vec<(String, ChangeOutcome)> {
        match plan.finish() {
            Ok(done) => done.changes.into_iter().map(|c| (c.field, c.outcome)).collect(),
            Err(e) => vec![(e.message().to_string(), ChangeOutcome::NeedsReplacement)],
        }
    }

    #[test]
    fn replacement_fields_come_from_the_server_record() {
        let server = Server {
            flavor: ServerFlavor { original_name: Some("m1.large".into()), id: None },
            image: Some("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d".into()),
            availability_zone: "nova".into(),
            ..Server::default()
        };
        let mut plan = UpdatePlan::new("s", true);
        compare_replacements(&mut plan, &spec(serde_json::json!({})), None, &server, "RegionOne");
        assert!(outcomes(plan).iter().all(|(_, o)| *o == ChangeOutcome::Unchanged));
        let mut plan = UpdatePlan::new("s", true);
        let changed = spec(serde_json::json!({"flavorName": "m1.xlarge", "imageID": "x"}));
        compare_replacements(&mut plan, &changed, None, &server, "RegionOne");
        let all = outcomes(plan);
        assert_eq!(all.len(), 1, "{all:?}");
        assert!(all[0].0.contains("flavorName") && all[0].0.contains("imageID"), "{all:?}");
        let mut plan = UpdatePlan::new("s", true);
        compare_replacements(&mut plan, &spec(serde_json::json!({"rootDiskSize": 20})), None, &server, "RegionOne");
        let all = outcomes(plan);
        assert!(all[0].0.contains("rootDiskSize") && !all[0].0.contains("imageID"), "{all:?}");
        let mut plan = UpdatePlan::new("s", true);
        compare_replacements(&mut plan, &spec(serde_json::json!({})), None, &server, "RegionTwo");
        let all = outcomes(plan);
        assert!(all[0].0.contains("providerSpec.spec.region"), "the providerID's region is the server's: {all:?}");
    }

    /// (field, outcome) of every field the answer reports for a server booted
    /// from a volume, from `previous` to `now`: `compare_replacements` and the
    /// kit's check of the class's other changes (`UpdatePlan::for_request`).
    fn from_volume(previous: serde_json::Value, now: serde_json::Value) -> Vec<(String, ChangeOutcome)> {
        let server = Server {
            flavor: ServerFlavor { original_name: Some("m1.large".into()), id: None },
            image: None,
            availability_zone: "nova".into(),
            ..Server::default()
        };
        let class = |patch: &serde_json::Value| machine_driver_api::MachineClass {
            provider_spec: class_json(patch),
            ..Default::default()
        };
        let req = UpdateMachine {
            machine: machine_driver_api::Machine::default(),
            class: class(&now),
            previous_class: Some(class(&previous)),
            secret: machine_driver_api::SecretData::default(),
            validate_only: false,
        };
        let mut plan = UpdatePlan::for_request("s", &req);
        // `applied` keeps `finish` from folding the answer into one error.
        plan.applied("providerSpec.spec.tags", "t");
        compare_replacements(&mut plan, &spec(now), Some(&spec(previous)), &server, "RegionOne");
        let mut all = outcomes(plan);
        all.retain(|(field, _)| field != "providerSpec.spec.tags");
        all
    }

    #[test]
    fn what_nova_does_not_show_is_compared_with_the_previous_class() {
        let unchanged = |field: &str| (format!("providerSpec.spec.{field}"), ChangeOutcome::Unchanged);
        let replace = |field: &str| (format!("providerSpec.spec.{field}"), ChangeOutcome::NeedsReplacement);
        let base = [unchanged("availabilityZone"), unchanged("flavorName"), unchanged("region")];
        // Another size of the boot volume: never UNCHANGED (the volume keeps its size).
        let all = from_volume(serde_json::json!({"rootDiskSize": 20}), serde_json::json!({"rootDiskSize": 40}));
        assert_eq!(all, [&base[..], &[replace("rootDiskSize")]].concat());
        // The same size: nothing claimed about a volume that was not read.
        let all = from_volume(serde_json::json!({"rootDiskSize": 20}), serde_json::json!({"rootDiskSize": 20}));
        assert_eq!(all, base.to_vec());
        // Without a previous class nothing tells the size: not reported either.
        let mut plan = UpdatePlan::new("s", true);
        let server = Server { image: None, availability_zone: "nova".into(), ..Server::default() };
        compare_replacements(&mut plan, &spec(serde_json::json!({"rootDiskSize": 40})), None, &server, "RegionOne");
        assert!(!format!("{:?}", outcomes(plan)).contains("rootDiskSize"));

        let all = from_volume(
            serde_json::json!({"rootDiskSize": 20, "keyName": "a", "serverGroupID": "g1", "rootDiskType": "ssd",
                "useConfigDrive": false, "imageID": "i-1"}),
            serde_json::json!({"rootDiskSize": 20, "keyName": "b", "serverGroupID": "g2", "rootDiskType": "hdd",
                "useConfigDrive": true, "imageID": "i-2"}),
        );
        let expected = [
            &base[..],
            &[
                replace("imageID"),
                replace("keyName"),
                replace("rootDiskType"),
                replace("serverGroupID"),
                replace("useConfigDrive"),
            ],
        ]
        .concat();
        let mut sorted = all.clone();
        sorted.sort();
        let mut expected = expected;
        expected.sort();
        assert_eq!(sorted, expected);
    }

    #[test]
    fn lists_keep_their_order_and_drop_what_goes() {
        let plan = TagPlan::new(
            &as_set(&["b".into(), "a".into()]),
            &as_set(&["a".into(), "c".into()]),
            Some(&as_set(&["b".into()])),
        );
        assert_eq!(applied_list(&["b".into(), "a".into()], &plan), vec!["a".to_string(), "c".to_string()]);
        let spec = spec(serde_json::json!({}));
        assert!(!desired_metadata(&spec, "").contains_key(MACHINE_UID_KEY), "an empty uid is never written");
        assert_eq!(desired_metadata(&spec, "u").get(MACHINE_UID_KEY).map(String::as_str), Some("u"));
        let e = previous_class_error(DriverError::invalid_argument("providerSpec.spec.tags", "bad"));
        assert_eq!(e.field(), Some("previous_machine_class.providerSpec.spec.tags"));
    }
}
