//! `machine-driver-alicloud`: the Alibaba Cloud ECS machine driver sidecar
//! (flags: `--help`; see providers/alicloud/README.md).

machine_driver_server::provider_main!(machine_driver_alicloud::AlicloudDriver, fake_ecs, "ECS");
