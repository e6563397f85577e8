//! `machine-driver-aws`: the AWS EC2 machine driver sidecar (flags: `--help`;
//! see providers/aws/README.md).

machine_driver_server::provider_main!(machine_driver_aws::AwsDriver, fake_ec2, "EC2");
