//! `POST /_admin/instances` on Compute Engine: a `RUNNING` instance inserted by
//! someone else, built through the same path as `instances.insert` (so GCE's
//! name, label and network tag rules apply): exactly the requested labels
//! (`tags`) and network tags (`network_tags`, GCE's `tags.items`), a boot disk
//! from the public image, one interface with an external address, no metadata.
//!
//! `metadata` become the instance's `metadata.items`; `attached` disks replace
//! the default boot disk, each as an `initializeParams` disk of the insert
//! (the first must boot, from the public image): `name` is its `diskName`
//! (GCE's default: the instance's name for the boot disk), `tags` its labels,
//! `size_gb` its `diskSizeGb`, `delete_with_vm` its `autoDelete` (GCE's
//! default: false). Other kinds are refused.
//!
//! Scope keys: `project` and `zone` (both required: GCE has no default
//! project or zone), `network` (default `default`).

use std::time::{Duration, Instant};

use fake_cloud_support::{AttachedKind, PlantError, PlantRequest, Planted, PlantedAttached};
use serde_json::{Value, json};

use crate::build::{self, Target};
use crate::caller::Caller;
use crate::model::instance::InstanceRequest;
use crate::state::lifecycle::Lifecycle;
use crate::state::{InstanceRecord, Store};
use crate::urls;

/// The scope keys GCE planting knows.
const SCOPE_KEYS: &[&str] = &["project", "zone", "network"];

/// Plants the instance described by `request` into `store`.
pub(crate) fn plant(store: &Store, request: &PlantRequest) -> Result<Planted, PlantError> {
    request.check_scope_keys(SCOPE_KEYS)?;
    let project = request.scope_required("project")?;
    let zone = request.scope_required("zone")?;
    let network = request.scope_or("network", "default");
    urls::check_zone(&zone).map_err(|e| PlantError::Invalid(format!("scope.zone: {}", e.message)))?;
    if !urls::valid_name(&project) || !urls::valid_name(&network) {
        return Err(PlantError::Invalid(format!(
            "scope.project {project:?} or scope.network {network:?} is not a name"
        )));
    }
    request.check_attached("GCE", &[AttachedKind::Disk], &[])?;
    let disks: Vec<Value> = if request.attached.is_empty() {
        vec![json!({
            "boot": true,
            "autoDelete": true,
            "initializeParams": {"sourceImage": crate::PUBLIC_IMAGE, "diskSizeGb": "10"},
        })]
    } else {
        request
            .attached
            .iter()
            .map(|disk| {
                let mut params = json!({"labels": disk.tags});
                if disk.boot {
                    params["sourceImage"] = json!(crate::PUBLIC_IMAGE);
                }
                if !disk.name.is_empty() {
                    params["diskName"] = json!(disk.name);
                }
                if let Some(size) = disk.size_gb {
                    params["diskSizeGb"] = json!(size.to_string());
                }
                let mut attached = json!({"boot": disk.boot, "initializeParams": params});
                if let Some(auto_delete) = disk.delete_with_vm {
                    attached["autoDelete"] = json!(auto_delete);
                }
                attached
            })
            .collect()
    };
    let metadata: Vec<Value> =
        request.metadata.iter().map(|(key, value)| json!({"key": key, "value": value})).collect();
    let body = json!({
        "name": request.name,
        "machineType": format!("zones/{zone}/machineTypes/n1-standard-2"),
        "labels": request.tags,
        "tags": {"items": request.network_tags},
        "metadata": {"items": metadata},
        "disks": disks,
        "networkInterfaces": [{
            "network": format!("global/networks/{network}"),
            "accessConfigs": [{"type": "ONE_TO_ONE_NAT", "name": "External NAT"}],
        }],
    });
    let instance_request: InstanceRequest =
        serde_json::from_value(body).map_err(|e| PlantError::Invalid(format!("instance body: {e}")))?;
    let now = Instant::now();
    let mut state = store.lock_at(now);
    let key = (project.clone(), zone.clone(), request.name.clone());
    if state.instances.contains_key(&key) {
        return Err(PlantError::Conflict(format!(
            "The resource 'projects/{project}/zones/{zone}/instances/{}' already exists",
            request.name
        )));
    }
    // Nobody in particular: the public image is usable by allUsers.
    let caller = Caller::default();
    let target = Target { project: &project, zone: &zone, caller: &caller };
    let mut instance =
        build::instance(instance_request, &target, &mut state).map_err(|e| PlantError::Invalid(e.message))?;
    state.store_disks_of(&mut instance);
    let attached = if request.attached.is_empty() {
        Vec::new()
    } else {
        instance
            .disks
            .iter()
            .map(|disk| PlantedAttached {
                kind: AttachedKind::Disk,
                id: disk.source.clone(),
                name: disk.source.rsplit('/').next().unwrap_or_default().to_owned(),
            })
            .collect()
    };
    let planted = Planted::new(
        instance.id.clone(),
        instance.name.clone(),
        [("project", project), ("zone", zone), ("network", network)],
    )
    .with_attached(attached);
    let lifecycle = Lifecycle::Booting { created: now, boot: Duration::ZERO };
    state.instances.insert(key, InstanceRecord { resource: instance, lifecycle, visible_at: now });
    Ok(planted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(name: &str, network_tags: &[&str]) -> PlantRequest {
        PlantRequest {
            name: name.into(),
            tags: [("name".to_owned(), "worker-a".to_owned())].into(),
            network_tags: network_tags.iter().map(|t| (*t).to_owned()).collect(),
            scope: [("project", "demo-project"), ("zone", "europe-west1-b")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn plants_metadata_and_the_described_disks() {
        use fake_cloud_support::PlantAttached;
        let store = Store::new();
        let mut req = request("m-5", &["kubernetes-io-cluster-x"]);
        req.metadata = [("block-project-ssh-keys".to_owned(), "TRUE".to_owned())].into();
        let mut boot = PlantAttached::new(AttachedKind::Disk, "");
        boot.boot = true;
        boot.delete_with_vm = Some(true);
        boot.size_gb = Some(50);
        boot.tags = [("name".to_owned(), "worker-a".to_owned())].into();
        let data = PlantAttached::new(AttachedKind::Disk, "m-5-data");
        req.attached = vec![boot, data];
        let planted = plant(&store, &req).unwrap();
        let names: Vec<&str> = planted.attached.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["m-5", "m-5-data"], "the boot disk takes the instance's name, as GCE names it");
        let state = store.lock_at(Instant::now());
        let key = ("demo-project".to_owned(), "europe-west1-b".to_owned(), "m-5".to_owned());
        let instance = &state.instances[&key].resource;
        assert_eq!(instance.metadata.items.len(), 1);
        assert_eq!(instance.metadata.items[0].key, "block-project-ssh-keys");
        assert_eq!((instance.disks[0].auto_delete, instance.disks[0].disk_size_gb.as_deref()), (true, Some("50")));
        assert!(!instance.disks[1].auto_delete, "GCE's default");
        drop(state);
        let mut late_boot = request("m-6", &[]);
        late_boot.attached = vec![PlantAttached::new(AttachedKind::Disk, "d")];
        assert!(plant(&store, &late_boot).is_err(), "the first disk must boot");
        let mut nic = request("m-7", &[]);
        nic.attached = vec![PlantAttached::new(AttachedKind::Nic, "n")];
        assert!(plant(&store, &nic).is_err());
    }

    #[test]
    fn plants_a_running_instance_with_exactly_the_labels_and_network_tags() {
        let store = Store::new();
        let planted = plant(&store, &request("m-1", &["kubernetes-io-cluster-x"])).unwrap();
        let now = Instant::now();
        let state = store.lock_at(now);
        let key = ("demo-project".to_owned(), "europe-west1-b".to_owned(), "m-1".to_owned());
        let record = &state.instances[&key];
        assert_eq!(record.render(now).unwrap().status, "RUNNING");
        assert_eq!(record.resource.id, planted.id);
        assert_eq!(record.resource.labels.keys().collect::<Vec<_>>(), ["name"]);
        assert_eq!(record.resource.tags.items, ["kubernetes-io-cluster-x"]);
        assert!(record.resource.metadata.items.is_empty());
        assert_eq!(planted.scope["network"], "default");
    }

    #[test]
    fn refuses_what_gce_would_not_hold() {
        let store = Store::new();
        plant(&store, &request("m-1", &[])).unwrap();
        assert!(matches!(plant(&store, &request("m-1", &[])), Err(PlantError::Conflict(_))));
        assert!(matches!(plant(&store, &request("M_1", &[])), Err(PlantError::Invalid(_))));
        assert!(matches!(plant(&store, &request("m-2", &["Not A Tag"])), Err(PlantError::Invalid(_))));
        let mut bad_label = request("m-3", &[]);
        bad_label.tags.insert("kubernetes.io/cluster".into(), "1".into());
        assert!(matches!(plant(&store, &bad_label), Err(PlantError::Invalid(_))));
        let mut no_zone = request("m-4", &[]);
        no_zone.scope.remove("zone");
        assert_eq!(plant(&store, &no_zone), Err(PlantError::Invalid("scope.zone is required".into())));
        assert_eq!(store.lock_at(Instant::now()).instances.len(), 1);
    }
}
