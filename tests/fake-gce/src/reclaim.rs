//! The admin reclaim (`POST /_admin/instances/{id}/reclaim`): GCE preempts a
//! Spot VM, as Compute Engine documents it ("Spot VMs", "Preemption
//! process"; the `scheduling.instanceTerminationAction` reference): GCE
//! sends the guest a preemption notice and then
//!
//! - with `instanceTerminationAction: STOP` (the default for Spot VMs) stops
//!   the VM: it stays, `TERMINATED`, with `lastStopTimestamp` set, its disks
//!   and internal IP kept and its ephemeral external IP released ("Stop and
//!   start a VM"), until someone starts or deletes it;
//! - with `DELETE` deletes it: `instances.get` answers 404, its name is free,
//!   its `autoDelete` disks go with it (the inventory lists it `DELETED`);
//!
//! and in both cases records the zone operation `compute.instances.preempted`
//! (`user: system`, `statusMessage: Instance was preempted.`, DONE), which
//! `zoneOperations.list` shows ("Detect if a Spot VM was preempted":
//! `gcloud compute operations list --filter="operationType=compute.instances.preempted"`).
//!
//! A VM is Spot as the instance resource records what its insert asked
//! for: `scheduling.provisioningModel: SPOT`, or the legacy
//! `scheduling.preemptible: true` (preemptible VMs are always stopped).
//! Counts no call.

use std::time::{Instant, SystemTime};

use fake_cloud_support::Reclaim;
use serde_json::Value;

use crate::clock;
use crate::model::instance::Instance;
use crate::state::Store;
use crate::state::lifecycle::Lifecycle;
use crate::state::operations::{NewOperation, OpType, OperationRecord};

/// The `statusMessage` of GCE's preemption operation.
const PREEMPTED_MESSAGE: &str = "Instance was preempted.";

/// What GCE does when it preempts a Spot VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Stop it (`TERMINATED`).
    Stop,
    /// Delete it.
    Delete,
}

/// How the instance resource says it is a Spot VM (`None`: it is not): the
/// field and value the answer names.
fn spot_model(instance: &Instance) -> Option<&'static str> {
    let scheduling = &instance.scheduling;
    if scheduling.get("provisioningModel").and_then(Value::as_str) == Some("SPOT") {
        Some("scheduling.provisioningModel SPOT")
    } else if scheduling.get("preemptible") == Some(&Value::Bool(true)) {
        Some("scheduling.preemptible true")
    } else {
        None
    }
}

/// The instance's termination action (STOP when not set, GCE's default).
fn action(instance: &Instance) -> Action {
    match instance.scheduling.get("instanceTerminationAction").and_then(Value::as_str) {
        Some("DELETE") => Action::Delete,
        _ => Action::Stop,
    }
}

/// Preempts the live instance `id` (see the module doc).
pub(crate) fn reclaim(store: &Store, id: &str) -> Reclaim {
    let now = Instant::now();
    let mut state = store.lock_at(now);
    let Some((key, record)) = state.instances.iter_mut().find(|(_, record)| record.resource.id == id) else {
        return Reclaim::NotFound;
    };
    // Only a VM that runs (or boots) can be preempted: one stopped, being
    // deleted, or whose insert is failing holds no capacity to take back.
    if !matches!(record.lifecycle, Lifecycle::Booting { .. } | Lifecycle::Inserting { .. }) {
        return Reclaim::NotFound;
    }
    let Some(model) = spot_model(&record.resource) else {
        return Reclaim::NotSpot;
    };
    let (project, zone) = (key.0.clone(), key.1.clone());
    let action = action(&record.resource);
    let mut op = OperationRecord::new(NewOperation {
        project: &project,
        zone: &zone,
        op_type: OpType::Preempted,
        target_link: &record.resource.self_link,
        target_id: &record.resource.id,
        user: "system",
        now,
        done_at: now,
        failure: None,
        request_id: None,
    });
    op.status_message = Some(PREEMPTED_MESSAGE.to_string());
    let op_name = op.name.clone();
    let shown = match action {
        Action::Stop => {
            record.lifecycle = Lifecycle::Terminated;
            record.resource.other.insert("lastStopTimestamp".into(), clock::rfc3339(SystemTime::now()).into());
            for config in record.resource.network_interfaces.iter_mut().flat_map(|nic| nic.access_configs.iter_mut()) {
                if config.ephemeral {
                    config.nat_ip = None;
                }
            }
            format!("status TERMINATED ({model}, instanceTerminationAction STOP)")
        }
        Action::Delete => {
            record.lifecycle = Lifecycle::Deleting { until: now };
            format!("deleted ({model}, instanceTerminationAction DELETE)")
        }
    };
    state.operations.insert((project, zone, op_name.clone()), op);
    state.sweep(now);
    Reclaim::Reclaimed(format!("{shown}; zone operation {op_name} compute.instances.preempted"))
}
