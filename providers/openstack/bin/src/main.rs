//! `machine-driver-openstack`: the OpenStack machine driver sidecar
//! (flags: `--help`; see providers/openstack/README.md).

machine_driver_server::provider_main!(machine_driver_openstack::OpenStackDriver, fake_openstack, "OpenStack");
