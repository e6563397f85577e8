//! What the driver tests against `fake-gce` share: the generic provider
//! fixture (`machine-driver-provider-fixture`) on `fake-gce` with this
//! provider's examples, and GCP's own driver constructor.

#![allow(dead_code, unreachable_pub)] // each test binary uses a part of it

use fake_cloud_support::InventoryInstance;
use machine_driver_gcp::GcpDriver;
use machine_driver_provider_fixture::Fixture;

machine_driver_provider_fixture::fake_cloud! {
    /// A running fake Compute Engine with the example class and secret.
    pub struct FakeCloud(GcpDriver);
}

impl FakeCloud {
    /// Starts the fake on a free port.
    pub async fn start() -> Self {
        Self(Fixture::start("GCP", concat!(env!("CARGO_MANIFEST_DIR"), "/examples"), fake_gce::start).await)
    }

    /// A driver on this fake with a client-side limit of `rate_limit`/s (0 = off) and `burst`.
    pub async fn driver(&self, rate_limit: f64, burst: u32) -> GcpDriver {
        self.0.connect(rate_limit, burst).await
    }

    /// Every instance the fake holds, live or not.
    pub async fn inventory(&self) -> Vec<InventoryInstance> {
        self.0.instances().await
    }
}
