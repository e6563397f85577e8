//! Zone operations: records created by insert/start/delete, rendered with
//! their status (`RUNNING` until their instance reaches the awaited state,
//! then `DONE`, with `error` when the insert or start failed for lack of
//! capacity), and the system operation GCE records when it preempts a Spot VM.

use std::time::{Duration, Instant, SystemTime};

use crate::clock;
use crate::model::instance::Instance;
use crate::model::operation::{Operation, OperationError, OperationErrors};
use crate::urls;

/// The kind of a zone operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpType {
    /// `instances.insert`.
    Insert,
    /// `instances.delete`.
    Delete,
    /// `instances.start`.
    Start,
    /// `instances.setLabels` or `disks.setLabels`.
    SetLabels,
    /// `instances.setTags`.
    SetTags,
    /// `disks.resize`.
    Resize,
    /// `disks.update`.
    Update,
    /// GCE preempted a Spot VM (no API call: GCE's own operation, by `system`,
    /// as `gcloud compute operations list --filter=operationType=compute.instances.preempted` shows it).
    Preempted,
}

impl OpType {
    fn word(self) -> &'static str {
        match self {
            Self::Insert => "insert",
            Self::Delete => "delete",
            Self::Start => "start",
            Self::SetLabels => "setLabels",
            Self::SetTags => "setTags",
            Self::Resize => "resize",
            Self::Update => "update",
            Self::Preempted => "compute.instances.preempted",
        }
    }
}

/// One zone operation.
#[derive(Debug, Clone)]
pub(crate) struct OperationRecord {
    /// Numeric id.
    pub(crate) id: String,
    /// `operation-<ms>-<hex>-<hex>-<hex>`.
    pub(crate) name: String,
    /// Owning project.
    pub(crate) project: String,
    /// Owning zone.
    pub(crate) zone: String,
    /// insert or delete.
    pub(crate) op_type: OpType,
    /// Full URL of the instance.
    pub(crate) target_link: String,
    /// Numeric id of the instance.
    pub(crate) target_id: String,
    /// The caller, as GCE reports it in `user`.
    pub(crate) user: String,
    /// When the operation was created (monotonic and wall clock).
    pub(crate) inserted: Instant,
    /// Wall-clock creation time.
    pub(crate) inserted_wall: SystemTime,
    /// When the operation becomes DONE.
    pub(crate) done_at: Instant,
    /// Set when the operation ends in an error.
    pub(crate) failure: Option<OperationErrors>,
    /// The `requestId` it was created with (GCE's `clientOperationId`).
    pub(crate) request_id: Option<String>,
    /// GCE's `statusMessage` (`Instance was preempted.` on a preemption).
    pub(crate) status_message: Option<String>,
}

/// Everything needed to create an operation record.
pub(crate) struct NewOperation<'a> {
    /// Owning project.
    pub(crate) project: &'a str,
    /// Owning zone.
    pub(crate) zone: &'a str,
    /// insert or delete.
    pub(crate) op_type: OpType,
    /// Full URL of the instance.
    pub(crate) target_link: &'a str,
    /// Numeric id of the instance.
    pub(crate) target_id: &'a str,
    /// The caller principal's email, or `anonymous`.
    pub(crate) user: &'a str,
    /// Creation instant.
    pub(crate) now: Instant,
    /// When it becomes DONE.
    pub(crate) done_at: Instant,
    /// Set when the operation will end in an error.
    pub(crate) failure: Option<OperationErrors>,
    /// The `requestId` of the call, if any.
    pub(crate) request_id: Option<&'a str>,
}

impl OperationRecord {
    /// Creates a record with a fresh GCE-style name and id.
    pub(crate) fn new(spec: NewOperation<'_>) -> Self {
        let wall = SystemTime::now();
        let name = format!(
            "operation-{}-{:013x}-{:08x}-{:08x}",
            clock::epoch_millis(wall),
            rand::random::<u64>() & 0x000f_ffff_ffff_ffff,
            rand::random::<u32>(),
            rand::random::<u32>()
        );
        Self {
            id: super::new_id(),
            name,
            project: spec.project.to_string(),
            zone: spec.zone.to_string(),
            op_type: spec.op_type,
            target_link: spec.target_link.to_string(),
            target_id: spec.target_id.to_string(),
            user: spec.user.to_string(),
            inserted: spec.now,
            inserted_wall: wall,
            done_at: spec.done_at,
            failure: spec.failure,
            request_id: spec.request_id.map(str::to_string),
            status_message: None,
        }
    }

    /// Whether the operation is DONE at `now`.
    pub(crate) fn is_done(&self, now: Instant) -> bool {
        now >= self.done_at
    }

    /// The resource as GCE returns it at `now`.
    pub(crate) fn render(&self, now: Instant) -> Operation {
        let done = self.is_done(now);
        let wall_at = |at: Instant| self.inserted_wall + at.saturating_duration_since(self.inserted);
        let total = self.done_at.saturating_duration_since(self.inserted);
        let progress = if done {
            100
        } else if total.is_zero() {
            0
        } else {
            let elapsed = now.saturating_duration_since(self.inserted);
            i32::try_from(elapsed.as_millis() * 100 / total.as_millis()).unwrap_or(0).min(99)
        };
        let failed = done && self.failure.is_some();
        let path = format!("projects/{}/zones/{}/operations/{}", self.project, self.zone, self.name);
        Operation {
            kind: "compute#operation",
            id: self.id.clone(),
            name: self.name.clone(),
            client_operation_id: self.request_id.clone(),
            zone: urls::full(&format!("projects/{}/zones/{}", self.project, self.zone)),
            operation_type: self.op_type.word(),
            target_link: self.target_link.clone(),
            target_id: self.target_id.clone(),
            status: if done { "DONE" } else { "RUNNING" },
            user: self.user.clone(),
            progress,
            status_message: self.status_message.clone(),
            insert_time: clock::rfc3339(self.inserted_wall),
            start_time: clock::rfc3339(self.inserted_wall + Duration::from_millis(1)),
            end_time: done.then(|| clock::rfc3339(wall_at(self.done_at))),
            self_link: urls::full(&path),
            error: if failed { self.failure.clone() } else { None },
            http_error_status_code: failed.then_some(503),
            http_error_message: failed.then_some("SERVICE UNAVAILABLE"),
        }
    }
}

/// The operation error of an insert that found no capacity in its zone.
pub(crate) fn stockout(project: &str, zone: &str) -> OperationErrors {
    OperationErrors {
        errors: vec![OperationError {
            code: "ZONE_RESOURCE_POOL_EXHAUSTED".to_string(),
            message: format!(
                "The zone 'projects/{project}/zones/{zone}' does not have enough resources available to fulfill the request.  Try a different zone, or try again later."
            ),
        }],
    }
}

/// The operation error of an insert the zone cannot place: the machine type
/// (with its accelerators) is currently not available there. GCE reports it
/// as `ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS`, naming the hardware
/// configuration and the zone (Compute Engine, "Troubleshooting resource
/// availability errors").
pub(crate) fn not_placeable(zone: &str, instance: &Instance) -> OperationErrors {
    let machine_type = instance.machine_type.rsplit('/').next().unwrap_or_default();
    let accelerators = instance
        .other
        .get("guestAccelerators")
        .and_then(|a| a.get(0))
        .map(|a| {
            let count = a.get("acceleratorCount").and_then(serde_json::Value::as_i64).unwrap_or(1);
            let kind = a.get("acceleratorType").and_then(serde_json::Value::as_str).unwrap_or_default();
            format!(" with {count} {} accelerator(s)", kind.rsplit('/').next().unwrap_or_default())
        })
        .unwrap_or_default();
    OperationErrors {
        errors: vec![OperationError {
            code: "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS".to_string(),
            message: format!(
                "A {machine_type} VM instance{accelerators} is currently unavailable in the {zone} zone. Alternatively, you can try your request again with a different VM hardware configuration or at a later time. For more information, see the troubleshooting documentation."
            ),
        }],
    }
}
