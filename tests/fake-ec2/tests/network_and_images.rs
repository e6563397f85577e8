//! Network interface changes, image/snapshot permission grants and STS through the real SDKs.

mod support;

use aws_sdk_ec2::types::{
    AttributeBooleanValue, CreateVolumePermission, CreateVolumePermissionModifications, Filter, ImageAttributeName,
    InstanceNetworkInterfaceSpecification, InstanceType, LaunchPermission, LaunchPermissionModifications,
    SnapshotAttributeName,
};
use fake_ec2::{CLUSTER_ACCOUNT, OWNER_ACCOUNT, PRIVATE_IMAGE, PRIVATE_SNAPSHOT, PUBLIC_IMAGE};
use support::{CLUSTER_KEY, OWNER_KEY, code, ec2, fake, interface, inventory_instance, run_one, sts};

#[tokio::test]
async fn network_interfaces_can_be_described_and_modified() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let out = client
        .run_instances()
        .image_id(PUBLIC_IMAGE)
        .instance_type(InstanceType::P4d24xlarge)
        .min_count(1)
        .max_count(1)
        .network_interfaces(
            InstanceNetworkInterfaceSpecification::builder()
                .device_index(0)
                .subnet_id("subnet-0aaaaaaaaaaaaaaa1")
                .ipv6_prefix_count(1)
                .build(),
        )
        .network_interfaces(
            InstanceNetworkInterfaceSpecification::builder()
                .device_index(1)
                .network_card_index(1)
                .subnet_id("subnet-0aaaaaaaaaaaaaaa1")
                .interface_type("efa")
                .ipv6_address_count(2)
                .build(),
        )
        .send()
        .await
        .expect("run");
    let instance = &out.instances()[0];
    let id = instance.instance_id().expect("id").to_owned();
    assert_eq!(instance.network_interfaces().len(), 2);
    assert_eq!(instance.network_interfaces()[0].ipv6_prefixes().len(), 1);
    assert_eq!(instance.network_interfaces()[1].interface_type(), Some("efa"));
    assert_eq!(instance.network_interfaces()[1].ipv6_addresses().len(), 2);

    let enis = client
        .describe_network_interfaces()
        .filters(Filter::builder().name("attachment.instance-id").values(&id).build())
        .send()
        .await
        .expect("describe enis");
    assert_eq!(enis.network_interfaces().len(), 2);
    let primary = enis
        .network_interfaces()
        .iter()
        .find(|e| e.attachment().and_then(|a| a.device_index()) == Some(0))
        .expect("primary");
    let eni_id = primary.network_interface_id().expect("eni id").to_owned();
    assert_eq!(primary.attachment().and_then(|a| a.instance_id()), Some(id.as_str()));
    assert_eq!(primary.source_dest_check(), Some(true));

    client
        .modify_network_interface_attribute()
        .network_interface_id(&eni_id)
        .source_dest_check(AttributeBooleanValue::builder().value(false).build())
        .send()
        .await
        .expect("modify");
    let assigned = client
        .assign_ipv6_addresses()
        .network_interface_id(&eni_id)
        .ipv6_prefix_count(1)
        .ipv6_address_count(1)
        .send()
        .await
        .expect("assign");
    assert_eq!(assigned.assigned_ipv6_prefixes().len(), 1);
    assert_eq!(assigned.assigned_ipv6_addresses().len(), 1);
    assert!(assigned.assigned_ipv6_prefixes()[0].ends_with("::/80"));

    let by_id = client.describe_network_interfaces().network_interface_ids(&eni_id).send().await.expect("by id");
    let eni = &by_id.network_interfaces()[0];
    assert_eq!(eni.source_dest_check(), Some(false));
    assert_eq!(eni.ipv6_prefixes().len(), 2);
    let inventory = inventory_instance(&handle, &id).await;
    assert_eq!(inventory["network_interfaces"][0]["source_dest_check"], false);

    let missing = client
        .describe_network_interfaces()
        .network_interface_ids("eni-0123456789abcdef0")
        .send()
        .await
        .expect_err("missing");
    assert_eq!(code(&missing), "InvalidNetworkInterfaceID.NotFound");
    let malformed = client
        .modify_network_interface_attribute()
        .network_interface_id("eni-nope")
        .source_dest_check(AttributeBooleanValue::builder().value(false).build())
        .send()
        .await
        .expect_err("malformed");
    assert_eq!(code(&malformed), "InvalidNetworkInterfaceID.Malformed");
}

#[tokio::test]
async fn an_interface_takes_one_attribute_per_call_and_its_groups_replace_the_set() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let out = run_one(&client, interface("subnet-0aaaaaaaaaaaaaaa1").groups("sg-0aaaaaaaaaaaaaaa1"))
        .send()
        .await
        .expect("run");
    let instance = &out.instances()[0];
    let id = instance.instance_id().expect("id").to_owned();
    let eni_id = instance.network_interfaces()[0].network_interface_id().expect("eni").to_owned();

    let both = client
        .modify_network_interface_attribute()
        .network_interface_id(&eni_id)
        .source_dest_check(AttributeBooleanValue::builder().value(false).build())
        .groups("sg-0bbbbbbbbbbbbbbb2")
        .send()
        .await
        .expect_err("two attributes");
    assert_eq!(code(&both), "InvalidParameterCombination");
    let unchanged = inventory_instance(&handle, &id).await;
    assert_eq!(unchanged["network_interfaces"][0]["source_dest_check"], true, "nothing applied");

    client
        .modify_network_interface_attribute()
        .network_interface_id(&eni_id)
        .groups("sg-0bbbbbbbbbbbbbbb2")
        .groups("sg-0ccccccccccccccc3")
        .send()
        .await
        .expect("groups");
    let described = client.describe_instances().instance_ids(&id).send().await.expect("describe");
    let i = &described.reservations()[0].instances()[0];
    let ids = |g: &[aws_sdk_ec2::types::GroupIdentifier]| -> Vec<String> {
        g.iter().filter_map(|g| g.group_id().map(str::to_owned)).collect()
    };
    let want = vec!["sg-0bbbbbbbbbbbbbbb2".to_owned(), "sg-0ccccccccccccccc3".to_owned()];
    assert_eq!(ids(i.network_interfaces()[0].groups()), want, "the set is replaced");
    assert_eq!(ids(i.security_groups()), want, "the primary interface's groups are the instance's");
    let eni = client.describe_network_interfaces().network_interface_ids(&eni_id).send().await.expect("eni");
    assert_eq!(ids(eni.network_interfaces()[0].groups()), want);

    let bad = client
        .modify_network_interface_attribute()
        .network_interface_id(&eni_id)
        .groups("default")
        .send()
        .await
        .expect_err("bad group");
    assert_eq!(code(&bad), "InvalidGroup.NotFound");
    let mut many = client.modify_network_interface_attribute().network_interface_id(&eni_id);
    for n in 1..=6 {
        many = many.groups(format!("sg-0aaaaaaaaaaaaaa{n:02}"));
    }
    let too_many = many.send().await.expect_err("six groups");
    assert_eq!(code(&too_many), "SecurityGroupsPerInterfaceLimitExceeded");
    let none = client.modify_network_interface_attribute().network_interface_id(&eni_id).send().await;
    assert_eq!(code(&none.expect_err("no attribute")), "MissingParameter");
}

#[tokio::test]
async fn image_and_snapshot_grants_control_visibility() {
    let handle = fake().await;
    let owner = ec2(&handle, OWNER_KEY);
    let cluster = ec2(&handle, CLUSTER_KEY);

    let hidden = cluster.describe_images().image_ids(PRIVATE_IMAGE).send().await.expect_err("not shared yet");
    assert_eq!(code(&hidden), "InvalidAMIID.NotFound");
    let mine = owner.describe_images().owners("self").send().await.expect("owner sees own");
    assert_eq!(mine.images().len(), 1);
    assert_eq!(mine.images()[0].image_id(), Some(PRIVATE_IMAGE));
    assert_eq!(mine.images()[0].public(), Some(false));
    let snapshot_id =
        mine.images()[0].block_device_mappings()[0].ebs().and_then(|e| e.snapshot_id()).expect("snapshot").to_owned();
    assert_eq!(snapshot_id, PRIVATE_SNAPSHOT);

    let denied = cluster
        .modify_image_attribute()
        .image_id(PUBLIC_IMAGE)
        .launch_permission(
            LaunchPermissionModifications::builder()
                .add(LaunchPermission::builder().user_id(CLUSTER_ACCOUNT).build())
                .build(),
        )
        .send()
        .await
        .expect_err("not owner");
    assert_eq!(code(&denied), "AuthFailure");

    owner
        .modify_image_attribute()
        .image_id(PRIVATE_IMAGE)
        .launch_permission(
            LaunchPermissionModifications::builder()
                .add(LaunchPermission::builder().user_id(CLUSTER_ACCOUNT).build())
                .build(),
        )
        .send()
        .await
        .expect("grant launch");
    owner
        .modify_snapshot_attribute()
        .snapshot_id(PRIVATE_SNAPSHOT)
        .create_volume_permission(
            CreateVolumePermissionModifications::builder()
                .add(CreateVolumePermission::builder().user_id(CLUSTER_ACCOUNT).build())
                .build(),
        )
        .send()
        .await
        .expect("grant snapshot");

    let attribute = owner
        .describe_image_attribute()
        .image_id(PRIVATE_IMAGE)
        .attribute(ImageAttributeName::LaunchPermission)
        .send()
        .await
        .expect("image attribute");
    assert_eq!(attribute.launch_permissions()[0].user_id(), Some(CLUSTER_ACCOUNT));
    let snapshot_attribute = owner
        .describe_snapshot_attribute()
        .snapshot_id(PRIVATE_SNAPSHOT)
        .attribute(SnapshotAttributeName::CreateVolumePermission)
        .send()
        .await
        .expect("snapshot attribute");
    assert_eq!(snapshot_attribute.create_volume_permissions()[0].user_id(), Some(CLUSTER_ACCOUNT));

    let shared = cluster.describe_images().image_ids(PRIVATE_IMAGE).send().await.expect("shared now");
    assert_eq!(shared.images()[0].owner_id(), Some(OWNER_ACCOUNT));
    let executable = cluster.describe_images().executable_users("self").send().await.expect("executable by self");
    assert_eq!(executable.images().len(), 1);
    let launched = cluster
        .run_instances()
        .image_id(PRIVATE_IMAGE)
        .instance_type(InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .expect("launch shared image");
    assert_eq!(launched.instances()[0].image_id(), Some(PRIVATE_IMAGE));
    let foreign_attr = cluster
        .describe_image_attribute()
        .image_id(PRIVATE_IMAGE)
        .attribute(ImageAttributeName::LaunchPermission)
        .send()
        .await
        .expect_err("only the owner reads permissions");
    assert_eq!(code(&foreign_attr), "AuthFailure");

    let inventory = support::admin_get(&handle, "/inventory").await;
    let image = inventory["images"]
        .as_array()
        .expect("images")
        .iter()
        .find(|i| i["id"] == PRIVATE_IMAGE)
        .cloned()
        .expect("image");
    assert_eq!(image["launch_permissions"], serde_json::json!([CLUSTER_ACCOUNT]));
    assert_eq!(image["create_volume_permissions"], serde_json::json!([CLUSTER_ACCOUNT]));

    let bad_user = owner
        .modify_image_attribute()
        .image_id(PRIVATE_IMAGE)
        .launch_permission(
            LaunchPermissionModifications::builder().add(LaunchPermission::builder().user_id("nope").build()).build(),
        )
        .send()
        .await
        .expect_err("bad user id");
    assert_eq!(code(&bad_user), "InvalidAMIAttributeItemValue");
}

#[tokio::test]
async fn get_caller_identity_reports_the_account_of_the_key() {
    let handle = fake().await;
    let owner = sts(&handle, OWNER_KEY).get_caller_identity().send().await.expect("owner");
    assert_eq!(owner.account(), Some(OWNER_ACCOUNT));
    assert!(owner.arn().is_some_and(|a| a.starts_with("arn:aws:iam::111111111111:")));
    let other = sts(&handle, "AKIDSOMETHINGELSE").get_caller_identity().send().await.expect("other");
    assert_eq!(other.account(), Some(CLUSTER_ACCOUNT));
}

#[tokio::test]
async fn create_tags_tags_instances() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let out = client.run_instances().image_id(PUBLIC_IMAGE).min_count(1).max_count(1).send().await.expect("run");
    let id = out.instances()[0].instance_id().expect("id").to_owned();
    client
        .create_tags()
        .resources(&id)
        .tags(aws_sdk_ec2::types::Tag::builder().key("Name").value("tagged-later").build())
        .send()
        .await
        .expect("tag");
    assert_eq!(inventory_instance(&handle, &id).await["name"], "tagged-later");
    let missing = client
        .create_tags()
        .resources("i-0123456789abcdef0")
        .tags(aws_sdk_ec2::types::Tag::builder().key("k").value("v").build())
        .send()
        .await
        .expect_err("missing");
    assert_eq!(code(&missing), "InvalidInstanceID.NotFound");
}
