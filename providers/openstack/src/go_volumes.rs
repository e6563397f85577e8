//! The boot volumes the Go provider made, deleted with their machine.
//!
//! For a class with `rootDiskType` the Go provider boots from a volume it
//! makes itself (gardener/machine-controller-manager-provider-openstack
//! v0.27.1 `pkg/driver/executor/executor.go`: `addBlockDeviceOpts` →
//! `ensureVolume`, a Cinder volume named after the machine with the class's
//! tags as metadata, attached as `source_type: volume` with
//! `delete_on_termination: false`), so Nova keeps it after the server; its
//! `DeleteMachine` waits for the server to be gone and deletes the volume by
//! name (`deleteVolume`). This driver boots from a volume Nova makes and
//! deletes with the server, so it has no such volume of its own; for a
//! machine the Go provider made (its server carries no machine uid) it does
//! what the Go provider would: once Nova no longer shows the server, the
//! volumes named after the machine that carry both of the class's markers
//! in their metadata and are attached to nothing else are deleted. A volume
//! of another name (a CSI volume attached to the node: `pvc-…`), or without
//! the markers, is never touched. A cloud without Cinder in its catalog has
//! no such volume.
//!
//! Cost, only for a Go-made machine of a `rootDiskType` class (or one whose
//! server Nova no longer shows): a `GET /servers/{id}` every 0.5 s until the
//! server is gone (the Go provider polls every 10 s), `GET
//! /volumes/detail?name=<machine>` and a `DELETE /volumes/{id}`.

use std::time::Duration;

use machine_driver_api::{ClusterMarkers, DriverError, Machine, MarkedVm};

use crate::clients::{Api, Call, Verb};
use crate::driver::OpenStackDriver;
use crate::errors::RETRY_SOON;
use crate::lookup::get_server;
use crate::naming::answered_id;
use crate::os::keystone::Service;
use crate::os::model::{Volume, VolumesPage};

/// How often a deleted server is read until Nova no longer shows it.
const GONE_POLL: Duration = Duration::from_millis(500);

/// A volume's markers: its metadata keys (the Go provider sets the class's
/// tags there); its name is its machine's; it carries no uid.
impl MarkedVm for Volume {
    fn has_marker(&self, key: &str) -> bool {
        self.metadata.contains_key(key)
    }

    fn machine_uid(&self) -> Option<&str> {
        None
    }

    fn machine_name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

impl OpenStackDriver {
    /// Deletes the Go-made boot volumes of machine `name` (see the module
    /// docs), once the servers `deleted` (deleted by this call, made by the Go
    /// provider) are gone; true when one was deleted. UNAVAILABLE while a
    /// server is still shown (within half the call's time) or a volume of the
    /// machine is still attached: the retry deletes it.
    pub(crate) async fn delete_go_volumes(
        &self,
        api: &Api<'_>,
        markers: &ClusterMarkers,
        machine: &Machine,
        name: &str,
        deleted: &[String],
    ) -> Result<bool, DriverError> {
        let started = tokio::time::Instant::now();
        let budget = api.context().remaining() / 2;
        for id in deleted {
            while get_server(api, id).await?.is_some() {
                if started.elapsed() + GONE_POLL > budget {
                    return Err(still_there(name, &format!("its server {id} is still being deleted")));
                }
                tokio::time::sleep(GONE_POLL).await;
            }
        }
        let call = Call::get(Service::BlockStorage, "volumes.list", "/volumes/detail");
        let volumes = match api
            .all_pages(call, &[("name", name.to_string())], |p: VolumesPage| (p.volumes, p.volumes_links))
            .await
        {
            Ok(v) => v,
            // No Cinder in the region's catalog: no volume either.
            Err(e) if e.reason() == "NoEndpoint" => return Ok(false),
            Err(e) => return Err(e),
        };
        let mut any = false;
        for volume in volumes {
            let attached_elsewhere = volume.attachments.iter().any(|a| !deleted.contains(&a.server_id));
            if volume.name.as_deref() != Some(name)
                || !markers.judge(&volume, machine).is_mine()
                || attached_elsewhere
                || volume.status.eq_ignore_ascii_case("deleting")
            {
                continue;
            }
            if !volume.attachments.is_empty() || volume.status.eq_ignore_ascii_case("in-use") {
                return Err(still_there(name, &format!("its volume {} is still attached", volume.id)));
            }
            let path = format!("/volumes/{}", answered_id("the id of a volume", &volume.id)?);
            match api.raw(Call::new(Service::BlockStorage, "volumes.delete", Verb::Delete, &path), &[], None).await {
                Ok(_) => {}
                Err(machine_driver_api::CallFailure::Cloud(_, f)) if f.is_not_found() => continue,
                Err(e) => return Err(e.into()),
            }
            tracing::info!(machine = name, volume = %volume.id, "deleted the boot volume the Go provider made");
            any = true;
        }
        Ok(any)
    }
}

/// UNAVAILABLE: the Go-made boot volume of machine `name` cannot be deleted yet (`why`).
fn still_there(name: &str, why: &str) -> DriverError {
    DriverError::unavailable(
        crate::errors::GO_VOLUME_PENDING,
        format!("the boot volume the Go provider made for machine {name} is deleted once free: {why}"),
        RETRY_SOON,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_volume_is_the_machines_by_its_name_and_both_markers() {
        let markers =
            crate::ownership::class_markers(["kubernetes.io-cluster-shoot--a", "kubernetes.io-role-node"]).unwrap();
        let machine = Machine { name: "m-1".into(), uid: "uid-1".into(), ..Default::default() };
        let volume = |name: &str, keys: &[&str]| Volume {
            name: Some(name.into()),
            metadata: keys.iter().map(|k| ((*k).to_string(), "1".to_string())).collect(),
            ..Default::default()
        };
        let both = ["kubernetes.io-cluster-shoot--a", "kubernetes.io-role-node"];
        assert!(markers.judge(&volume("m-1", &both), &machine).is_mine());
        assert!(!markers.judge(&volume("m-1", &both[..1]), &machine).is_mine(), "one marker");
        assert!(!markers.judge(&volume("pvc-1", &both), &machine).is_mine(), "another name");
    }
}
