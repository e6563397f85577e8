//! `fake-openstack --listen 127.0.0.1:PORT`: the fake OpenStack cloud as a standalone server.

#[tokio::main]
async fn main() -> std::io::Result<()> {
    fake_cloud_support::run_fake(
        "fake-openstack",
        "A fake OpenStack cloud (Keystone v3, Nova, Neutron, Glance, Cinder) with the shared fake admin API under /_admin",
        "127.0.0.1:8092",
        fake_openstack::start,
    )
    .await
}
