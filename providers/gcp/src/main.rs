//! `machine-driver-gcp`: serves the GCP machine driver over gRPC.

use clap::Parser;
use machine_driver_gcp::{GcpDriver, GcpOptions};

/// Command line of the GCP machine driver.
#[derive(Parser)]
#[command(
    name = "machine-driver-gcp",
    version,
    about = "Gardener machine driver for GCP Compute Engine (gRPC over a Unix socket)"
)]
struct Cli {
    #[command(flatten)]
    server: machine_driver_server::ServerArgs,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    machine_driver_server::run(cli.server, |cloud| async move {
        GcpDriver::new(GcpOptions {
            cloud_endpoint: cloud.cloud_endpoint,
            rate_limit: cloud.cloud_rate_limit,
            burst: cloud.cloud_burst,
            embedded_fake: cloud.embedded_fake.then_some(cloud.embedded_fake_listen),
        })
        .await
    })
    .await
}
