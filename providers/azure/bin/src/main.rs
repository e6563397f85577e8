//! `machine-driver-azure`: the Azure machine driver sidecar (flags: `--help`;
//! see providers/azure/README.md).

machine_driver_server::provider_main!(machine_driver_azure::AzureDriver, fake_arm, "Azure Resource Manager");
