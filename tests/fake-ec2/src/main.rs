//! `fake-ec2 --listen 127.0.0.1:PORT`: the fake EC2 as a standalone server.

#[tokio::main]
async fn main() -> std::io::Result<()> {
    fake_cloud_support::run_fake(
        "fake-ec2",
        "A stateful fake of the EC2 Query API with the fake admin API on /_admin",
        "127.0.0.1:4566",
        fake_ec2::start,
    )
    .await
}
