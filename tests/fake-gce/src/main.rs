//! `fake-gce --listen 127.0.0.1:PORT`: serves the fake Compute Engine API for manual use.

use std::net::SocketAddr;

use clap::Parser;

/// Command line of the fake.
#[derive(Debug, Parser)]
#[command(about = "A fake Compute Engine API with the shared fake admin API under /_admin")]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8089")]
    listen: SocketAddr,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    let args = Args::parse();
    let fake = fake_gce::start(args.listen).await?;
    tracing::info!(url = %fake.url(), admin = %fake.admin_url(), "fake-gce listening");
    println!("fake-gce listening on {} (admin API at {})", fake.url(), fake.admin_url());
    fake.wait().await;
    Ok(())
}
