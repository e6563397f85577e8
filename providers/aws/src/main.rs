//! `machine-driver-aws`: the AWS machine driver sidecar.

use std::process::ExitCode;

use clap::Parser;
use machine_driver_aws::{AwsConfig, AwsDriver};
use machine_driver_server::CloudArgs;

/// Machine driver for AWS EC2, serving the machine-controller-manager over gRPC.
#[derive(Debug, Parser)]
#[command(
    name = "machine-driver-aws",
    version,
    about = "Machine driver sidecar for AWS EC2 (gRPC over a Unix socket)."
)]
struct Cli {
    #[command(flatten)]
    server: machine_driver_server::ServerArgs,
}

fn config_from(cloud: &CloudArgs, endpoint: Option<String>) -> AwsConfig {
    AwsConfig { rate_limit: cloud.cloud_rate_limit, burst: cloud.cloud_burst, ..AwsConfig::default() }
        .with_endpoints(endpoint, |k| std::env::var(k).ok())
}

#[cfg(feature = "embedded-fake")]
async fn make_driver(cloud: CloudArgs) -> Result<AwsDriver, String> {
    if !cloud.embedded_fake {
        return AwsDriver::new(config_from(&cloud, cloud.cloud_endpoint.clone())).await;
    }
    let fake = fake_ec2::start(cloud.embedded_fake_listen)
        .await
        .map_err(|e| format!("could not start the embedded fake EC2 on {}: {e}", cloud.embedded_fake_listen))?;
    tracing::warn!(
        url = %fake.url(),
        admin = %fake.admin_url(),
        "EMBEDDED FAKE EC2: no real AWS account is used; machines are simulated in this process and vanish with it"
    );
    let driver = AwsDriver::new(config_from(&cloud, Some(fake.url().to_string()))).await?;
    Ok(driver.keep_alive(fake))
}

#[cfg(not(feature = "embedded-fake"))]
async fn make_driver(cloud: CloudArgs) -> Result<AwsDriver, String> {
    if cloud.embedded_fake {
        return Err("--embedded-fake needs a binary built with the `embedded-fake` cargo feature \
                    (cargo run -p machine-driver-aws --features embedded-fake -- --embedded-fake ...)"
            .to_string());
    }
    AwsDriver::new(config_from(&cloud, cloud.cloud_endpoint.clone())).await
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    machine_driver_server::run(cli.server, make_driver).await
}
