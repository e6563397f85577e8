//! What DescribeVolumes shows for the IOPS and throughput of volumes launched
//! without them: EC2's defaults (EBS User Guide, "Amazon EBS General Purpose
//! SSD volumes": gp3 3000 IOPS and 125 MiB/s; gp2 3 IOPS per GiB, at least 100
//! and at most 16000, no throughput), also after a ModifyVolume to gp2.

mod support;

use std::time::Duration;

use aws_sdk_ec2::types::{BlockDeviceMapping, EbsBlockDevice, InstanceType, VolumeType};
use support::{CLUSTER_KEY, SUBNET, ec2, fake, interface, run_one};

fn disk(device: &str, size: i32, kind: VolumeType) -> BlockDeviceMapping {
    let ebs = EbsBlockDevice::builder().volume_size(size).volume_type(kind).build();
    BlockDeviceMapping::builder().device_name(device).ebs(ebs).build()
}

/// (device, type, iops, throughput) of each volume of `instance`.
async fn volumes(client: &aws_sdk_ec2::Client, instance: &str) -> Vec<(String, String, Option<i32>, Option<i32>)> {
    let out = client.describe_volumes().send().await.expect("describe volumes");
    let mut found: Vec<_> = out
        .volumes()
        .iter()
        .filter(|v| v.attachments().iter().any(|a| a.instance_id() == Some(instance)))
        .map(|v| {
            let device = v.attachments()[0].device().unwrap_or_default().to_owned();
            (device, v.volume_type().map(|t| t.as_str().to_owned()).unwrap_or_default(), v.iops(), v.throughput())
        })
        .collect();
    found.sort();
    found
}

#[tokio::test]
async fn volumes_launched_without_iops_or_throughput_show_ec2s_defaults() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let out = run_one(&client, interface(SUBNET))
        .block_device_mappings(disk("/dev/xvda", 50, VolumeType::Gp3))
        .block_device_mappings(disk("/dev/sdf", 10, VolumeType::Gp2))
        .block_device_mappings(disk("/dev/sdg", 1000, VolumeType::Gp2))
        .block_device_mappings(disk("/dev/sdh", 6000, VolumeType::Gp2))
        .block_device_mappings(disk("/dev/sdi", 500, VolumeType::St1))
        .send()
        .await
        .expect("run");
    let id = out.instances()[0].instance_id().expect("id").to_owned();
    let shown = volumes(&client, &id).await;
    let want = |d: &str, t: &str, i: Option<i32>, th: Option<i32>| (d.to_owned(), t.to_owned(), i, th);
    assert_eq!(
        shown,
        vec![
            want("/dev/sdf", "gp2", Some(100), None),
            want("/dev/sdg", "gp2", Some(3000), None),
            want("/dev/sdh", "gp2", Some(16000), None),
            want("/dev/sdi", "st1", None, None),
            want("/dev/xvda", "gp3", Some(3000), Some(125)),
        ]
    );

    // The image's own root volume (no mapping) is a default gp3 too.
    let plain = client
        .run_instances()
        .image_id(fake_ec2::PUBLIC_IMAGE)
        .instance_type(InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .expect("run");
    let plain = plain.instances()[0].instance_id().expect("id").to_owned();
    assert_eq!(volumes(&client, &plain).await, vec![want("/dev/xvda", "gp3", Some(3000), Some(125))]);

    // gp3 → gp2 takes the gp2 baseline of its size.
    let out = client.describe_volumes().send().await.expect("describe");
    let root = out
        .volumes()
        .iter()
        .find(|v| v.attachments().iter().any(|a| a.instance_id() == Some(plain.as_str())))
        .and_then(|v| v.volume_id())
        .expect("root volume")
        .to_owned();
    let modified =
        client.modify_volume().volume_id(&root).volume_type(VolumeType::Gp2).size(40).send().await.expect("modify");
    let target = modified.volume_modification().expect("modification");
    assert_eq!((target.target_iops(), target.target_throughput()), (Some(120), None));
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(volumes(&client, &plain).await, vec![want("/dev/xvda", "gp2", Some(120), None)]);
}
