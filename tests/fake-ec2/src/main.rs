//! `fake-ec2 --listen 127.0.0.1:PORT`: the fake EC2 as a standalone server.

use std::net::SocketAddr;

use clap::Parser;

/// Command line of the fake EC2 server.
#[derive(Debug, Parser)]
#[command(about = "A stateful fake of the EC2 Query API with the fake admin API on /_admin")]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:4566", env = "FAKE_EC2_LISTEN")]
    listen: SocketAddr,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    let args = Args::parse();
    let handle = fake_ec2::start(args.listen).await?;
    tracing::info!(url = %handle.url(), admin = %handle.admin_url(), "fake-ec2 listening");
    println!("fake-ec2 listening on {} (admin: {})", handle.url(), handle.admin_url());
    tokio::select! {
        () = handle.wait() => {}
        signal = tokio::signal::ctrl_c() => signal?,
    }
    Ok(())
}
