//! `fake-gce --listen 127.0.0.1:PORT`: the fake Compute Engine API as a standalone server.

#[tokio::main]
async fn main() -> std::io::Result<()> {
    fake_cloud_support::run_fake(
        "fake-gce",
        "A fake Compute Engine API with the shared fake admin API under /_admin",
        "127.0.0.1:8089",
        fake_gce::start,
    )
    .await
}
