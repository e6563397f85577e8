//! [`run_fake`]: the `main` of every fake cloud's binary.

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use crate::handle::FakeHandle;

/// Runs a fake cloud as a process: `--listen ADDR` (default `default_listen`;
/// environment `FAKE_LISTEN`), logs per `RUST_LOG`, prints
/// `NAME listening on URL (admin: URL/_admin)`, serves until Ctrl-C.
pub async fn run_fake<F, Fut>(
    name: &'static str,
    about: &'static str,
    default_listen: &'static str,
    start: F,
) -> io::Result<()>
where
    F: FnOnce(SocketAddr) -> Fut,
    Fut: Future<Output = io::Result<FakeHandle>>,
{
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    let command = clap::Command::new(name).about(about).arg(
        clap::Arg::new("listen")
            .long("listen")
            .env("FAKE_LISTEN")
            .default_value(default_listen)
            .value_parser(clap::value_parser!(SocketAddr))
            .help("Address to listen on"),
    );
    let matches = command.get_matches();
    let listen = *matches.get_one::<SocketAddr>("listen").ok_or_else(|| io::Error::other("--listen is required"))?;
    let fake = start(listen).await?;
    tracing::info!(url = %fake.url(), admin = %fake.admin_url(), "{name} listening");
    println!("{name} listening on {} (admin: {})", fake.url(), fake.admin_url());
    tokio::select! {
        () = fake.wait() => {}
        signal = tokio::signal::ctrl_c() => signal?,
    }
    Ok(())
}
