//! Registry mirror configuration reaches the VM's user data; bad configuration
//! is refused before anything is created.

use std::io::Read;

use base64::Engine;
use futures::future::BoxFuture;
use machine_driver_proto::v1::{RegistryConfig, RegistryEndpoint};
use tonic::Code;

use crate::context::Ctx;
use crate::outcome::StepResult;
use crate::status_details::describe;
use crate::{ensure, fail};

/// Path of the mirror's containerd hosts file on the node.
const HOSTS_TOML: &str = "/etc/containerd/certs.d/_default/hosts.toml";
const MIRROR: &str = "https://mirror.conformance.example/v2-proxy";

fn mirror(url: &str) -> RegistryConfig {
    RegistryConfig { mirror: Some(RegistryEndpoint { url: url.to_string(), ..Default::default() }), registries: vec![] }
}

/// A class with a mirror creates a VM whose user data (read back from the fake
/// cloud) carries the containerd hosts file and keeps the original user data.
pub(crate) fn mirror_in_user_data(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let fake = ctx.fake()?.clone();
        let mut m = ctx.new_machine();
        let mut class = ctx.class();
        class.registry_config = Some(mirror(MIRROR));
        let resp = match ctx.create_with(&m, class, ctx.secret()).await {
            Ok(r) => r,
            Err(s) => fail!("CreateMachine with a registry mirror: {}", describe(&s)),
        };
        m.provider_id = resp.provider_id;
        let instances = fake.live_named(&m.name).await.map_err(crate::outcome::Stop::Fail)?;
        ensure!(instances.len() == 1, "expected one live instance named {}, found {}", m.name, instances.len());
        let Some(encoded) = instances[0].user_data() else {
            fail!("the fake shows no user data on the instance");
        };
        let raw = match base64::engine::general_purpose::STANDARD.decode(encoded.trim()) {
            Ok(r) => r,
            Err(e) => fail!("user data in the fake's inventory is not base64: {e}"),
        };
        let text = if raw.starts_with(&[0x1f, 0x8b]) {
            let mut s = String::new();
            if let Err(e) = flate2::read::GzDecoder::new(raw.as_slice()).read_to_string(&mut s) {
                fail!("gzip user data does not decompress: {e}");
            }
            s
        } else {
            String::from_utf8_lossy(&raw).into_owned()
        };
        ensure!(text.contains(HOSTS_TOML), "user data lacks {HOSTS_TOML}");
        // The file contents are base64 inside write_files; the bootstrap crate's
        // golden tests check them. Here: the file is delivered, the original kept.
        if let Some(original) = ctx.settings.secret.get("userData") {
            for line in original.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
                ensure!(text.contains(line.trim()), "original user data line {line:?} is missing after the merge");
            }
        }
        ctx.must_delete(&m).await?;
        Ok(())
    })
}

/// A mirror with an unsupported scheme is INVALID_ARGUMENT naming the registry
/// configuration, and no VM is created.
pub(crate) fn invalid_mirror_refused(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let m = ctx.new_machine();
        let mut class = ctx.class();
        class.registry_config = Some(mirror("ftp://mirror.conformance.example"));
        match ctx.create_with(&m, class, ctx.secret()).await {
            Ok(r) => fail!("CreateMachine with an ftp:// mirror succeeded ({})", r.provider_id),
            Err(s) if s.code() == Code::InvalidArgument => {
                let field = crate::status_details::error_field(&s).unwrap_or_default();
                ensure!(
                    field.contains("registry_config"),
                    "error names field {field:?}, expected the registry configuration: {}",
                    describe(&s)
                );
            }
            Err(s) => fail!("expected INVALID_ARGUMENT, got {}", describe(&s)),
        }
        if ctx.fake.is_some() {
            ctx.expect_none_live(&m).await?;
        }
        Ok(())
    })
}
