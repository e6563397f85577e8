//! Identity, capabilities, probe and gRPC health.

use futures::future::BoxFuture;
use machine_driver_proto::v1::{Capability, GetPluginCapabilitiesRequest, GetPluginInfoRequest, ProbeRequest};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;

use crate::context::Ctx;
use crate::outcome::StepResult;
use crate::status_details::describe;
use crate::{ensure, fail};

/// Whether `name` is DNS-like: lower-case labels of `[a-z0-9-]` separated by dots, at most 63 chars.
fn dns_like(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.split('.').all(|l| {
            !l.is_empty()
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
}

/// GetPluginInfo names the plugin, GetPluginCapabilities lists only known values, Probe is ready.
pub(crate) fn probe(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut identity = ctx.conn.identity.clone();
        let info = match identity.get_plugin_info(ctx.req(GetPluginInfoRequest {})).await {
            Ok(r) => r.into_inner(),
            Err(s) => fail!("GetPluginInfo: {}", describe(&s)),
        };
        ensure!(dns_like(&info.name), "plugin name {:?} is not DNS-like (<= 63 chars)", info.name);
        ensure!(!info.vendor_version.is_empty(), "GetPluginInfo: empty vendor_version");
        ensure!(!info.provider.is_empty(), "GetPluginInfo: empty provider");
        let caps = match identity.get_plugin_capabilities(ctx.req(GetPluginCapabilitiesRequest {})).await {
            Ok(r) => r.into_inner(),
            Err(s) => fail!("GetPluginCapabilities: {}", describe(&s)),
        };
        for raw in &caps.capabilities {
            match Capability::try_from(*raw) {
                Ok(Capability::Unspecified) | Err(_) => fail!("GetPluginCapabilities lists invalid value {raw}"),
                Ok(_) => {}
            }
        }
        ensure!(caps.max_user_data_bytes > 0, "GetPluginCapabilities: max_user_data_bytes is 0");
        for _ in 0..ctx.settings.repeat {
            match identity.probe(ctx.req(ProbeRequest {})).await {
                Ok(r) => ensure!(r.into_inner().ready, "Probe answered ready = false"),
                Err(s) => fail!("Probe: {}", describe(&s)),
            }
        }
        Ok(())
    })
}

/// The fully qualified name of the driver service, as health checks name it.
const DRIVER_SERVICE: &str = "machinedriver.v1.MachineDriverService";

/// `grpc.health.v1.Health/Check` of the whole server answers SERVING; so does the driver
/// service's own entry when the server registers one (NOT_FOUND = not registered, allowed).
pub(crate) fn health(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut health = ctx.conn.health.clone();
        let resp = match health.check(ctx.req(HealthCheckRequest { service: String::new() })).await {
            Ok(r) => r.into_inner(),
            Err(s) => fail!("grpc.health.v1.Health/Check: {}", describe(&s)),
        };
        ensure!(
            resp.status == ServingStatus::Serving as i32,
            "grpc.health.v1.Health/Check answered status {} (expected SERVING)",
            resp.status
        );
        match health.check(ctx.req(HealthCheckRequest { service: DRIVER_SERVICE.to_string() })).await {
            Ok(r) => ensure!(
                r.get_ref().status == ServingStatus::Serving as i32,
                "Health/Check of {DRIVER_SERVICE} answered status {} (expected SERVING)",
                r.get_ref().status
            ),
            Err(s) if s.code() == tonic::Code::NotFound => {}
            Err(s) => fail!("Health/Check of {DRIVER_SERVICE}: {}", describe(&s)),
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_like_names() {
        assert!(dns_like("aws.machine-driver.gardener.cloud"));
        assert!(!dns_like("AWS"));
        assert!(!dns_like("a..b"));
        assert!(!dns_like(&"a".repeat(64)));
    }
}
