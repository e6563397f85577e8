//! The `main` of every provider binary: flags, preflight checks, telemetry,
//! the embedded fake (when asked for), the provider, and the server, in that
//! order. A binary is one line: [`provider_main!`](crate::provider_main).

use std::any::Any;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::ExitCode;

use clap::{Args, Command, FromArgMatches};
use machine_driver_api::{CloudOptions, Provider};

use crate::config::ServerArgs;
use crate::error::ServeError;

/// A fake cloud started in this process for `--embedded-fake` (demos, the
/// README's first command, the benchmark): its API URL, admin URL, and the
/// handle that keeps it running.
pub struct StartedFake {
    /// Base URL of the fake's cloud API (the provider's endpoint).
    pub url: String,
    /// Base URL of the fake's admin API.
    pub admin_url: String,
    /// Keeps the fake running while the process lives.
    pub handle: Box<dyn Any + Send>,
}

/// Starting a fake cloud in-process on a listen address.
pub type StartFake = fn(SocketAddr) -> Pin<Box<dyn Future<Output = io::Result<StartedFake>> + Send>>;

/// How a binary starts its cloud's fake: the service name for the warning
/// (`EC2`), and the start function taking the listen address.
#[derive(Clone, Copy)]
pub struct EmbeddedFake {
    /// The faked service, as the warning names it.
    pub service: &'static str,
    /// Starts the fake on the address.
    pub start: StartFake,
}

impl std::fmt::Debug for EmbeddedFake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedFake").field("service", &self.service).finish_non_exhaustive()
    }
}

/// Defines `main` for the provider binary of `$driver` (a
/// [`Provider`]); `$fake` is the crate of its fake cloud, started in-process
/// by `--embedded-fake` when the binary is built with the `embedded-fake`
/// cargo feature, and `$service` the faked service's name.
#[macro_export]
macro_rules! provider_main {
    ($driver:ty, $fake:ident, $service:literal) => {
        fn main() -> ::std::process::ExitCode {
            #[cfg(feature = "embedded-fake")]
            let fake = Some($crate::EmbeddedFake {
                service: $service,
                start: |addr| {
                    Box::pin(async move {
                        let fake = $fake::start(addr).await?;
                        Ok($crate::StartedFake {
                            url: fake.url().to_string(),
                            admin_url: fake.admin_url().to_string(),
                            handle: Box::new(fake),
                        })
                    })
                },
            });
            #[cfg(not(feature = "embedded-fake"))]
            let fake = None;
            $crate::provider_main::<$driver>(fake)
        }
    };
}

/// Runs the binary of provider `P`: parses the flags (named and described by
/// `P`), and serves until SIGTERM/SIGINT. Exit code 2 for bad flags, 1 for
/// other failures.
pub fn provider_main<P: Provider>(fake: Option<EmbeddedFake>) -> ExitCode {
    let command = ServerArgs::augment_args(
        Command::new(P::BINARY).about(P::ABOUT).version(env!("CARGO_PKG_VERSION")).bin_name(P::BINARY),
    );
    let args = match ServerArgs::from_arg_matches(&command.get_matches()) {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{}: cannot start the async runtime: {e}", P::BINARY);
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run::<P>(args, fake))
}

/// The sequence behind [`provider_main`], for a runtime that already runs.
pub async fn run<P: Provider>(args: ServerArgs, fake: Option<EmbeddedFake>) -> ExitCode {
    let fail = |e: ServeError| {
        eprintln!("{}: {e}", P::BINARY);
        ExitCode::from(e.exit_code())
    };
    // Every flag is checked before anything starts.
    let preflight = match crate::Preflight::check(&args) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let options = CloudOptions {
        endpoint: args.cloud.cloud_endpoint.clone(),
        rate_limit: args.cloud.cloud_rate_limit,
        burst: args.cloud.cloud_burst,
    };
    let mut options = match options.checked() {
        Ok(o) => o,
        Err(e) => return fail(ServeError::Config(e.message().to_string())),
    };
    if args.cloud.embedded_fake && fake.is_none() {
        return fail(ServeError::Config(format!(
            "--embedded-fake needs a binary built with the `embedded-fake` cargo feature ({} was built without it)",
            P::BINARY
        )));
    }
    let telemetry = match crate::telemetry::init(&args, P::SECRET_LOGGING_TARGETS) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let _fake = match fake.filter(|_| args.cloud.embedded_fake) {
        None => None,
        Some(fake) => match (fake.start)(args.cloud.embedded_fake_listen).await {
            Ok(started) => {
                tracing::warn!(
                    url = %started.url,
                    admin = %started.admin_url,
                    "EMBEDDED FAKE {}: no real cloud is called; machines are simulated in this process and vanish with it",
                    fake.service
                );
                options.endpoint = Some(started.url.clone());
                Some(started.handle)
            }
            Err(e) => {
                let e = ServeError::Provider(format!(
                    "could not start the embedded fake {} on {}: {e}",
                    fake.service, args.cloud.embedded_fake_listen
                ));
                tracing::error!("{e}");
                return fail(e);
            }
        },
    };
    let driver = match P::connect(options).await {
        Ok(d) => d,
        Err(e) => {
            let e = ServeError::Provider(e.message().to_string());
            tracing::error!("{e}");
            return fail(e);
        }
    };
    let result =
        crate::serve_checked(preflight, args, driver, crate::shutdown_signal(), Some(telemetry.prometheus.clone()))
            .await;
    drop(telemetry);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            fail(e)
        }
    }
}
