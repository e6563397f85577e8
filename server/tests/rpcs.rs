//! Every RPC through the real server over a real Unix socket, with the error
//! mapping, validation before provider code, and deadline propagation.

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use machine_driver_proto::v1 as pb;
use machine_driver_proto::v1::identity_service_client::IdentityServiceClient;
use support::*;
use tonic::Code;
use tonic_types::StatusExt;

#[tokio::test]
async fn every_rpc_answers() {
    let mut srv = start("rpcs", |_| {}).await;
    let mut c = client(&srv.socket).await;

    let created = c.create_machine(create("m1")).await.expect("create").into_inner();
    assert_eq!(created.provider_id, "test:///uid-m1");
    assert_eq!(created.addresses[0].r#type, pb::AddressType::InternalIp as i32);

    let status = c.get_machine_status(status("m1")).await.expect("status").into_inner();
    let init = status.initialization.expect("initialization state");
    assert!(!init.initialized);
    assert_eq!(init.pending_steps, vec!["disable-source-dest-check"]);

    let (machine, machine_class, secret) = parts("m1");
    let i = c
        .initialize_machine(pb::InitializeMachineRequest { machine, machine_class, secret })
        .await
        .expect("init")
        .into_inner();
    assert_eq!(i.applied_steps, vec!["disable-source-dest-check"]);

    let (machine, machine_class, secret) = parts("m1");
    let d = c
        .delete_machine(pb::DeleteMachineRequest { machine, machine_class, secret })
        .await
        .expect("delete")
        .into_inner();
    assert_eq!(d.last_known_state, "deleted");

    let (_, machine_class, secret) = parts("m1");
    let l = c.list_machines(pb::ListMachinesRequest { machine_class, secret }).await.expect("list").into_inner();
    assert_eq!(l.machines.get("test:///a").map(String::as_str), Some("a"));

    let v = c
        .get_volume_i_ds(pb::GetVolumeIDsRequest {
            pv_specs_json: vec![r#"{"csi":{"driver":"x","volumeHandle":"vol-1"}}"#.into()],
        })
        .await
        .expect("volumes")
        .into_inner();
    assert_eq!(v.volume_ids, vec!["vol-1"]);

    let (_, _, secret) = parts("x");
    let s = c
        .share_image(pb::ShareImageRequest {
            image: "img-allowed".into(),
            consumer_secret: secret,
            consumer_account: "222".into(),
            ..Default::default()
        })
        .await
        .expect("share")
        .into_inner();
    assert_eq!((s.image_id.as_str(), s.granted_now, s.consumer_account.as_str()), ("img-allowed", false, "222"));

    let mut id = IdentityServiceClient::new(channel(&srv.socket).await);
    let info = id.get_plugin_info(pb::GetPluginInfoRequest {}).await.expect("info").into_inner();
    assert_eq!(info.provider, "test");
    let caps = id.get_plugin_capabilities(pb::GetPluginCapabilitiesRequest {}).await.expect("caps").into_inner();
    assert!(caps.capabilities.contains(&(pb::Capability::ShareImage as i32)));
    assert_eq!(caps.max_user_data_bytes, 1024);
    assert!(id.probe(pb::ProbeRequest {}).await.expect("probe").into_inner().ready);

    let mut health = tonic_health::pb::health_client::HealthClient::new(channel(&srv.socket).await);
    let h = health
        .check(tonic_health::pb::HealthCheckRequest { service: "machinedriver.v1.MachineDriverService".into() })
        .await
        .expect("health")
        .into_inner();
    assert_eq!(h.status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);
    srv.stop();
}

#[tokio::test]
async fn driver_errors_map_to_codes_with_details() {
    let mut srv = start("errors", |_| {}).await;
    let mut c = client(&srv.socket).await;
    let cases = [
        ("err-invalid", Code::InvalidArgument),
        ("err-notfound", Code::NotFound),
        ("err-exists", Code::AlreadyExists),
        ("err-duplicate", Code::OutOfRange),
        ("err-throttle", Code::Unavailable),
        ("err-capacity", Code::ResourceExhausted),
        ("err-auth", Code::Unauthenticated),
        ("err-denied", Code::PermissionDenied),
        ("err-precondition", Code::FailedPrecondition),
        ("err-internal", Code::Internal),
    ];
    for (name, code) in cases {
        let err = c.get_machine_status(status(name)).await.expect_err(name);
        assert_eq!(err.code(), code, "{name}: {err:?}");
        let details = err.get_error_details();
        let info = details.error_info().unwrap_or_else(|| panic!("{name}: ErrorInfo missing"));
        assert_eq!(info.domain, "machinedriver");
        assert!(!info.reason.is_empty());
        match name {
            "err-throttle" => {
                assert_eq!(info.reason, "RequestLimitExceeded");
                assert_eq!(details.retry_info().and_then(|r| r.retry_delay), Some(Duration::from_secs(5)));
            }
            "err-invalid" => {
                assert_eq!(info.metadata.get("field").map(String::as_str), Some("providerSpec.machineType"));
                assert_eq!(
                    details.bad_request().expect("BadRequest").field_violations[0].field,
                    "providerSpec.machineType"
                );
            }
            _ => {}
        }
    }
    srv.stop();
}

#[tokio::test]
async fn bad_requests_are_rejected_before_provider_code() {
    let mut srv = start("validation", |_| {}).await;
    let mut c = client(&srv.socket).await;

    let mut no_uid = create("m");
    no_uid.machine.as_mut().expect("machine").uid.clear();
    let mut no_name = create("m");
    no_name.machine.as_mut().expect("machine").name.clear();
    let mut malformed = create("m");
    malformed.machine_class.as_mut().expect("class").provider_spec = r#"{"machineType":"#.to_string();
    let mut not_object = create("m");
    not_object.machine_class.as_mut().expect("class").provider_spec = "[1,2]".to_string();
    let mut no_secret = create("m");
    no_secret.secret = None;
    let mut no_class = create("m");
    no_class.machine_class = None;

    let cases = [
        (no_uid, "machine.uid"),
        (no_name, "machine.name"),
        (malformed, "providerSpec"),
        (not_object, "providerSpec"),
        (no_secret, "secret.accessKeyID"),
        (no_class, "machine_class"),
    ];
    for (req, field) in cases {
        let err = c.create_machine(req).await.expect_err(field);
        assert_eq!(err.code(), Code::InvalidArgument, "{field}");
        let info = err.get_error_details().error_info().expect("ErrorInfo").clone();
        assert_eq!(info.metadata.get("field").map(String::as_str), Some(field));
        assert!(err.message().starts_with(field), "message names the field: {}", err.message());
    }

    // Too large user data is refused before the provider runs.
    let mut big = create("m");
    big.secret.as_mut().expect("secret").data.insert("userData".into(), vec![b'a'; 2048]);
    let err = c.create_machine(big).await.expect_err("too big");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("2048"), "{}", err.message());

    // Share-image allow-list is enforced by the server.
    let (_, _, secret) = parts("x");
    let err = c
        .share_image(pb::ShareImageRequest { image: "img-other".into(), consumer_secret: secret, ..Default::default() })
        .await
        .expect_err("not allowed");
    assert_eq!(err.code(), Code::PermissionDenied);
    assert_eq!(err.get_error_details().error_info().expect("info").reason, "IMAGE_NOT_ALLOWED");

    let err = c.get_volume_i_ds(pb::GetVolumeIDsRequest { pv_specs_json: vec!["{".into()] }).await.expect_err("bad pv");
    assert_eq!(err.code(), Code::InvalidArgument);

    assert_eq!(srv.driver.seen.calls.load(Ordering::SeqCst), 0, "provider code must not run for bad requests");

    // Delete by provider_id alone is valid (orphan collection).
    let (_, machine_class, secret) = parts("m");
    c.delete_machine(pb::DeleteMachineRequest {
        machine: Some(pb::Machine { provider_id: "test:///orphan".into(), ..Default::default() }),
        machine_class,
        secret,
    })
    .await
    .expect("delete by provider id");
    srv.stop();
}

#[tokio::test]
async fn caller_deadline_reaches_provider_and_is_enforced() {
    let mut srv = start("deadline", |_| {}).await;
    let mut c = client(&srv.socket).await;

    let mut req = tonic::Request::new(status("fast"));
    req.set_timeout(Duration::from_millis(1500));
    c.get_machine_status(req).await.expect("fast call");
    let seen = srv.driver.seen.last_remaining.lock().await.expect("remaining recorded");
    assert!(seen <= Duration::from_millis(1350) && seen > Duration::from_millis(1000), "provider saw {seen:?}");

    // Without grpc-timeout the server default (10 s in tests) applies.
    c.get_machine_status(status("fast")).await.expect("fast call");
    let seen = srv.driver.seen.last_remaining.lock().await.expect("remaining recorded");
    assert!(seen > Duration::from_secs(9), "default deadline, provider saw {seen:?}");

    let mut req = tonic::Request::new(status("slow-2000"));
    req.set_timeout(Duration::from_millis(200));
    let started = std::time::Instant::now();
    let err = c.get_machine_status(req).await.expect_err("slow call");
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert!(started.elapsed() < Duration::from_millis(1500));
    srv.stop();
}

#[tokio::test]
async fn registry_config_is_merged_before_the_provider_sees_user_data() {
    let mut srv = start("mirrors", |a| a.share_image_allow_list.clear()).await;
    let mut c = client(&srv.socket).await;
    let original = "#cloud-config\nruncmd:\n- echo hello\n";

    // Nothing configured: byte-identical pass-through.
    let mut req = create("plain");
    req.secret.as_mut().expect("secret").data.insert("userData".into(), original.as_bytes().to_vec());
    c.create_machine(req).await.expect("create");
    assert_eq!(srv.driver.seen.last_user_data.lock().await.as_slice(), original.as_bytes());

    // A class with a mirror: the provider receives the merged cloud-config.
    let mut req = create("mirrored");
    req.secret.as_mut().expect("secret").data.insert("userData".into(), original.as_bytes().to_vec());
    req.machine_class.as_mut().expect("class").registry_config = Some(pb::RegistryConfig {
        mirror: Some(pb::RegistryEndpoint { url: "https://mirror.example.com".into(), ..Default::default() }),
        registries: vec![],
    });
    c.create_machine(req).await.expect("create");
    // The merged cloud-config exceeds the test cloud's 1024-byte limit, so it arrives gzipped.
    let raw = srv.driver.seen.last_user_data.lock().await.clone();
    assert!(raw.len() <= 1024, "{} bytes", raw.len());
    assert_eq!(&raw[..2], &[0x1f, 0x8b], "gzip magic");
    let mut merged = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(raw.as_slice()), &mut merged).expect("gunzip");
    assert!(merged.contains("/etc/containerd/certs.d/_default/hosts.toml"), "{merged}");
    assert!(merged.contains("echo hello"), "original content kept: {merged}");

    // Unknown format with configuration present is refused, never launched broken.
    let mut req = create("binary");
    req.secret.as_mut().expect("secret").data.insert("userData".into(), vec![0x00, 0x01, 0x02, 0x03]);
    req.machine_class.as_mut().expect("class").registry_config = Some(pb::RegistryConfig {
        mirror: Some(pb::RegistryEndpoint { url: "https://mirror.example.com".into(), ..Default::default() }),
        registries: vec![],
    });
    let err = c.create_machine(req).await.expect_err("unknown format");
    assert_eq!(err.code(), Code::InvalidArgument);
    srv.stop();
}

#[tokio::test]
async fn machine_names_that_are_not_dns1123_subdomains_are_refused_on_every_rpc() {
    let mut srv = start("names", |_| {}).await;
    let mut c = client(&srv.socket).await;
    let long = "a".repeat(254);
    for name in ["*", "m-?", "../x", "M-1", "m 1", "a..b", "-m", "m/../../x", long.as_str()] {
        let with = |name: &str| {
            let (mut machine, machine_class, secret) = parts(name);
            if let Some(m) = machine.as_mut() {
                m.provider_id = "test:///i-1".into();
            }
            (machine, machine_class, secret)
        };
        let (machine, machine_class, secret) = with(name);
        let create = c.create_machine(pb::CreateMachineRequest { machine, machine_class, secret }).await;
        let (machine, machine_class, secret) = with(name);
        let init = c.initialize_machine(pb::InitializeMachineRequest { machine, machine_class, secret }).await;
        let (machine, machine_class, secret) = with(name);
        let status = c.get_machine_status(pb::GetMachineStatusRequest { machine, machine_class, secret }).await;
        let (machine, machine_class, secret) = with(name);
        let delete = c.delete_machine(pb::DeleteMachineRequest { machine, machine_class, secret }).await;
        let answers = [
            ("CreateMachine", create.map(|_| ())),
            ("InitializeMachine", init.map(|_| ())),
            ("GetMachineStatus", status.map(|_| ())),
            ("DeleteMachine", delete.map(|_| ())),
        ];
        for (rpc, answer) in answers {
            let err = answer.expect_err(&format!("{rpc} accepted machine name {name:?}"));
            assert_eq!(err.code(), Code::InvalidArgument, "{rpc} {name:?}: {err:?}");
            let info = err.get_error_details().error_info().expect("ErrorInfo").clone();
            assert_eq!(info.metadata.get("field").map(String::as_str), Some("machine.name"), "{rpc} {name:?}");
        }
    }
    assert_eq!(srv.driver.seen.calls.load(Ordering::SeqCst), 0, "provider code ran for a refused name");

    // The same RPCs with a DNS-1123 name (dots included) reach the provider.
    let (machine, machine_class, secret) = parts("shoot--x--y-worker-z1.a-1");
    c.get_machine_status(pb::GetMachineStatusRequest { machine, machine_class, secret }).await.expect("valid name");
    assert_eq!(srv.driver.seen.calls.load(Ordering::SeqCst), 1);
    srv.stop();
}

fn update(name: &str, spec: &str, previous: Option<&str>, validate_only: bool) -> pb::UpdateMachineRequest {
    let (mut machine, mut machine_class, secret) = parts(name);
    if let Some(m) = machine.as_mut() {
        m.provider_id = "test:///x".into();
    }
    if let Some(c) = machine_class.as_mut() {
        c.provider_spec = spec.into();
    }
    let previous_machine_class =
        previous.map(|p| pb::MachineClass { name: "old".into(), provider_spec: p.into(), ..Default::default() });
    pb::UpdateMachineRequest { machine, machine_class, secret, validate_only, previous_machine_class }
}

#[tokio::test]
async fn update_machine_answers_per_field_and_refuses_replacement_only_changes() {
    let mut srv = start("update", |_| {}).await;
    let mut c = client(&srv.socket).await;
    let mut id = IdentityServiceClient::new(channel(&srv.socket).await);
    let caps = id.get_plugin_capabilities(pb::GetPluginCapabilitiesRequest {}).await.expect("caps").into_inner();
    assert!(caps.capabilities.contains(&(pb::Capability::UpdateMachine as i32)));

    let u = c
        .update_machine(update("m1", r#"{"tags":{"team":"b"},"machineType":"m2"}"#, None, true))
        .await
        .expect("a tag change beside a replacement is answered")
        .into_inner();
    let got: Vec<_> = u.changes.iter().map(|f| (f.field.as_str(), f.outcome, f.detail.as_str())).collect();
    assert_eq!(
        got,
        [
            ("providerSpec.machineType", pb::FieldChangeOutcome::NeedsReplacement as i32, "\"m1\" -> \"m2\""),
            ("providerSpec.tags", pb::FieldChangeOutcome::Applied as i32, "set team on the VM"),
        ]
    );

    let removed = c
        .update_machine(update("m1", r#"{"tags":{}}"#, Some(r#"{"tags":{"team":"a"}}"#), false))
        .await
        .expect("removal")
        .into_inner();
    assert_eq!(
        removed.changes.iter().find(|f| f.field == "providerSpec.tags").map(|f| f.detail.as_str()),
        Some("removed team on the VM")
    );

    let only = c.update_machine(update("m1", r#"{"tags":{"team":"a"},"machineType":"m2"}"#, None, false)).await;
    let status = only.expect_err("only a replacement differs");
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert_eq!(status.get_details_error_info().map(|i| i.reason).as_deref(), Some("NEEDS_REPLACEMENT"));
    assert!(status.message().contains("providerSpec.machineType"), "{}", status.message());

    let mut no_id = update("m1", r#"{"tags":{}}"#, None, false);
    if let Some(m) = no_id.machine.as_mut() {
        m.provider_id.clear();
    }
    let calls = srv.driver.seen.calls.load(Ordering::SeqCst);
    let refused = c.update_machine(no_id).await.expect_err("no provider id");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("machine.provider_id"), "{}", refused.message());
    let bad_previous = c.update_machine(update("m1", r#"{"tags":{}}"#, Some("[1]"), false)).await;
    let refused = bad_previous.expect_err("previous class not an object");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().starts_with("previous_machine_class.providerSpec: must be"), "{}", refused.message());
    assert_eq!(srv.driver.seen.calls.load(Ordering::SeqCst), calls, "refused before provider code");
    srv.stop();
}

/// RevokeImageShare and ListImageShares need the image owner's credentials:
/// the server answers FAILED_PRECONDITION OWNER_CREDENTIALS_REQUIRED without
/// them (absent, or without a key) before provider code runs, and hands the
/// driver a request whose owner secret is present by type.
#[tokio::test]
async fn revoke_and_list_shares_without_owner_credentials_are_refused_by_the_server() {
    let mut srv = start("owner", |_| {}).await;
    let mut c = client(&srv.socket).await;
    let owner = || parts("x").2;
    let empty = || Some(pb::SecretData::default());
    let revoke = |owner_secret| pb::RevokeImageShareRequest {
        image: "img-allowed".into(),
        owner_secret,
        consumer_secret: parts("x").2,
        consumer_account: "222".into(),
        ..Default::default()
    };
    let list =
        |owner_secret| pb::ListImageSharesRequest { image: "img-allowed".into(), owner_secret, ..Default::default() };
    let refused = |err: tonic::Status| {
        assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
        assert_eq!(err.get_error_details().error_info().expect("info").reason, "OWNER_CREDENTIALS_REQUIRED");
    };
    for owner_secret in [None, empty()] {
        refused(c.revoke_image_share(revoke(owner_secret.clone())).await.expect_err("revoke without owner"));
        refused(c.list_image_shares(list(owner_secret)).await.expect_err("list without owner"));
    }
    // Owner keys the driver does not accept: INVALID_ARGUMENT naming them.
    let wrong = Some(pb::SecretData { data: [("other".to_string(), b"x".to_vec())].into_iter().collect() });
    let err = c.revoke_image_share(revoke(wrong)).await.expect_err("wrong owner keys");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().starts_with("owner_secret"), "{}", err.message());
    assert_eq!(srv.driver.seen.calls.load(Ordering::SeqCst), 0, "provider code must not run without owner credentials");

    let r = c.revoke_image_share(revoke(owner())).await.expect("revoke").into_inner();
    assert_eq!((r.revoked_now, r.consumer_account.as_str()), (true, "222"), "the owner's keys reach the driver");
    let l = c.list_image_shares(list(owner())).await.expect("list").into_inner();
    assert_eq!((l.consumer_accounts, l.public), (vec!["img-allowed".to_string()], true));
    srv.stop();
}
