//! `machine-driver-gcp`: the GCP Compute Engine machine driver sidecar (flags: `--help`;
//! see providers/gcp/README.md).

machine_driver_server::provider_main!(machine_driver_gcp::GcpDriver, fake_gce, "Compute Engine");
