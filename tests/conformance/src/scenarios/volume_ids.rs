//! GetVolumeIDs: generic properties that need no cloud-specific input.

use futures::future::BoxFuture;
use machine_driver_proto::v1::GetVolumeIDsRequest;
use tonic::Code;

use crate::context::Ctx;
use crate::outcome::StepResult;
use crate::status_details::describe;
use crate::{ensure, fail};

/// PersistentVolume specs of other drivers (NFS, another CSI driver) yield no volume id.
pub(crate) fn foreign_skipped(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let specs = vec![
            r#"{"nfs":{"server":"10.0.0.1","path":"/export"},"capacity":{"storage":"1Gi"}}"#.to_string(),
            r#"{"csi":{"driver":"conformance.example.com","volumeHandle":"vol-conformance"}}"#.to_string(),
        ];
        let req = GetVolumeIDsRequest { pv_specs_json: specs };
        match ctx.conn.driver.clone().get_volume_i_ds(ctx.req(req)).await {
            Ok(r) => {
                let ids = r.into_inner().volume_ids;
                ensure!(ids.is_empty(), "GetVolumeIDs returned {ids:?} for volumes of other drivers");
                Ok(())
            }
            Err(s) => fail!("GetVolumeIDs: {}", describe(&s)),
        }
    })
}

/// A spec that is not JSON is INVALID_ARGUMENT.
pub(crate) fn malformed_refused(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let req = GetVolumeIDsRequest { pv_specs_json: vec!["{\"csi\": ".to_string()] };
        match ctx.conn.driver.clone().get_volume_i_ds(ctx.req(req)).await {
            Err(s) if s.code() == Code::InvalidArgument => Ok(()),
            Err(s) => fail!("expected INVALID_ARGUMENT, got {}", describe(&s)),
            Ok(_) => fail!("expected INVALID_ARGUMENT for a spec that is not JSON, got OK"),
        }
    })
}
