//! `fake-ecs --listen 127.0.0.1:PORT`: the fake Alibaba Cloud ECS (and STS) as a standalone server.

#[tokio::main]
async fn main() -> std::io::Result<()> {
    fake_cloud_support::run_fake(
        "fake-ecs",
        "A fake Alibaba Cloud ECS (RPC 2014-05-26) plus STS GetCallerIdentity with the shared fake admin API under /_admin",
        "127.0.0.1:8091",
        fake_ecs::start,
    )
    .await
}
