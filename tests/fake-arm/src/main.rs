//! `fake-arm --listen 127.0.0.1:PORT`: the fake Azure Resource Manager (and AAD token endpoint) as a standalone server.

#[tokio::main]
async fn main() -> std::io::Result<()> {
    fake_cloud_support::run_fake(
        "fake-arm",
        "A fake Azure Resource Manager (plus AAD token endpoint) with the shared fake admin API under /_admin",
        "127.0.0.1:8090",
        fake_arm::start,
    )
    .await
}
