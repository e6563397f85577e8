//! In-place changes over plain HTTP: instances.setLabels / setTags and
//! disks.get / setLabels / resize / update, with GCE's fingerprints (a stale
//! or missing one is 412 `conditionNotMet` and changes nothing), Operations,
//! call counting, and the disks an insert makes going with their instance.

mod common;

use fake_cloud_support::OpClass;
use std::time::Duration;

use common::{Fake, instance_body, uuid};
use reqwest::StatusCode;
use serde_json::{Value, json};

impl Fake {
    async fn post_json(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(self.http.post(self.zonal(path)).json(&body)).await
    }
}

/// An instance `name` with a boot disk labelled `{"name": "a"}` and a hyperdisk data disk.
async fn booted(fake: &Fake, name: &str) -> Value {
    let mut body = instance_body(name, json!({"team": "a"}));
    body["disks"][0]["initializeParams"]["labels"] = json!({"name": "a"});
    let data = json!({
        "autoDelete": false,
        "initializeParams": {"diskSizeGb": "100", "diskType": "zones/us-central1-a/diskTypes/hyperdisk-balanced",
            "provisionedIops": "3000", "provisionedThroughput": "140"}
    });
    body["disks"].as_array_mut().into_iter().for_each(|d| d.push(data.clone()));
    let (status, op) = fake.insert(&body, Some(&uuid())).await;
    assert_eq!(status, StatusCode::OK, "{op}");
    fake.wait_done(op["name"].as_str().unwrap_or_default()).await;
    fake.get_instance(name).await.1
}

#[tokio::test]
async fn instance_labels_and_tags_need_the_current_fingerprint() {
    let fake = Fake::start().await;
    let vm = booted(&fake, "upd-1").await;
    let stale = vm["labelFingerprint"].clone();

    let (status, err) = fake.post_json("instances/upd-1/setLabels", json!({"labels": {"team": "b"}})).await;
    assert_eq!(status, StatusCode::PRECONDITION_FAILED, "no fingerprint: {err}");
    assert_eq!(err["error"]["errors"][0]["reason"], "conditionNotMet");

    let (status, op) = fake
        .post_json("instances/upd-1/setLabels", json!({"labels": {"team": "b", "new": "z"}, "labelFingerprint": stale}))
        .await;
    assert_eq!(status, StatusCode::OK, "{op}");
    assert_eq!((op["operationType"].as_str(), op["status"].as_str()), (Some("setLabels"), Some("RUNNING")));
    assert_eq!(fake.wait_done(op["name"].as_str().unwrap_or_default()).await["status"], "DONE");
    let after = fake.get_instance("upd-1").await.1;
    assert_eq!(after["labels"], json!({"team": "b", "new": "z"}), "the whole set is replaced");
    assert_ne!(after["labelFingerprint"], stale, "a new fingerprint");

    let (status, err) =
        fake.post_json("instances/upd-1/setLabels", json!({"labels": {}, "labelFingerprint": stale})).await;
    assert_eq!(
        (status, err["error"]["errors"][0]["reason"].as_str()),
        (StatusCode::PRECONDITION_FAILED, Some("conditionNotMet"))
    );
    assert_eq!(fake.get_instance("upd-1").await.1["labels"], json!({"team": "b", "new": "z"}), "unchanged");

    let fp = after["tags"]["fingerprint"].clone();
    let (status, op) =
        fake.post_json("instances/upd-1/setTags", json!({"items": ["node", "web"], "fingerprint": fp})).await;
    assert_eq!(status, StatusCode::OK, "{op}");
    assert_eq!(op["operationType"], "setTags");
    let (status, err) = fake.post_json("instances/upd-1/setTags", json!({"items": ["x"], "fingerprint": fp})).await;
    assert_eq!(status, StatusCode::PRECONDITION_FAILED);
    assert_eq!(err["error"]["message"], "Supplied fingerprint does not match current fingerprint.");
    let tags = &fake.get_instance("upd-1").await.1["tags"];
    assert_eq!(tags["items"], json!(["node", "web"]));
    let (status, _) = fake
        .post_json("instances/upd-1/setTags", json!({"items": ["Not A Tag"], "fingerprint": tags["fingerprint"]}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) =
        fake.post_json("instances/nope/setTags", json!({"items": [], "fingerprint": "AAAAAAAAAAA="})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let calls = fake.calls().await;
    assert_eq!(calls.of("instances.setLabels"), 3, "{calls:?}");
    assert_eq!(calls.of("instances.setTags"), 4, "{calls:?}");
}

#[tokio::test]
async fn disks_made_by_the_insert_are_read_relabelled_grown_and_tuned() {
    let fake = Fake::start().await;
    let vm = booted(&fake, "upd-2").await;
    assert_eq!(vm["disks"][1]["deviceName"], "persistent-disk-1", "GCE's default device name");
    let (status, boot) = fake.get(fake.zonal("disks/upd-2")).await;
    assert_eq!(status, StatusCode::OK, "{boot}");
    assert_eq!((boot["kind"].as_str(), boot["sizeGb"].as_str()), (Some("compute#disk"), Some("20")));
    assert_eq!(boot["labels"], json!({"name": "a"}));
    assert!(boot["type"].as_str().is_some_and(|t| t.ends_with("/diskTypes/pd-standard")), "{boot}");
    assert!(boot["sourceImage"].as_str().is_some_and(|i| i.ends_with("/global/images/debian-12")), "{boot}");
    assert_eq!(boot["users"][0], vm["selfLink"]);

    let (status, err) =
        fake.post_json("disks/upd-2/setLabels", json!({"labels": {}, "labelFingerprint": "AAAAAAAAAAA="})).await;
    assert_eq!(
        (status, err["error"]["errors"][0]["reason"].as_str()),
        (StatusCode::PRECONDITION_FAILED, Some("conditionNotMet"))
    );
    let (status, op) = fake
        .post_json(
            "disks/upd-2/setLabels",
            json!({"labels": {"name": "b"}, "labelFingerprint": boot["labelFingerprint"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{op}");
    assert!(op["targetLink"].as_str().is_some_and(|t| t.ends_with("/disks/upd-2")));

    let (status, err) = fake.post_json("disks/upd-2/resize", json!({"sizeGb": "20"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "not larger: {err}");
    let (status, op) = fake.post_json("disks/upd-2/resize", json!({"sizeGb": "60"})).await;
    assert_eq!((status, op["operationType"].as_str()), (StatusCode::OK, Some("resize")), "{op}");
    let boot = fake.get(fake.zonal("disks/upd-2")).await.1;
    assert_eq!((boot["sizeGb"].as_str(), &boot["labels"]), (Some("60"), &json!({"name": "b"})));
    assert_eq!(fake.get_instance("upd-2").await.1["disks"][0]["diskSizeGb"], "60", "the instance shows it too");

    let data = vm["disks"][1]["source"].as_str().unwrap_or_default().rsplit('/').next().unwrap_or_default().to_string();
    let update = |query: &'static [(&'static str, &'static str)], body: Value| {
        fake.send(fake.http.patch(fake.zonal(&format!("disks/{data}"))).query(query).json(&body))
    };
    let (status, op) = update(&[("paths", "provisionedIops")], json!({"provisionedIops": "5000"})).await;
    assert_eq!((status, op["operationType"].as_str()), (StatusCode::OK, Some("update")), "{op}");
    let (status, _) = update(&[("paths", "sizeGb")], json!({"sizeGb": "500"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "only the provisioned performance is updated");
    let (status, _) = update(&[], json!({"provisionedIops": "6000"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "paths are required");
    let (status, _) = fake
        .send(
            fake.http
                .patch(fake.zonal("disks/upd-2"))
                .query(&[("paths", "provisionedIops")])
                .json(&json!({"provisionedIops": "5000"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a pd-standard disk has no provisioned performance to change");
    let disk = fake.get(fake.zonal(&format!("disks/{data}"))).await.1;
    assert_eq!((disk["provisionedIops"].as_str(), disk["provisionedThroughput"].as_str()), (Some("5000"), Some("140")));

    let inventory = fake.inventory().await;
    let disks = &inventory.iter().find(|i| i["name"] == "upd-2").map(|i| i["disks"].clone()).unwrap_or_default();
    assert_eq!(disks[0]["labels"], json!({"name": "b"}), "the inventory shows the disks: {disks}");

    let calls = fake.calls().await;
    for (op, n) in [("disks.get", 3), ("disks.setLabels", 2), ("disks.resize", 2), ("disks.update", 4)] {
        assert_eq!(calls.of(op), n, "{op}: {calls:?}");
    }
    assert_eq!(calls.of_class(OpClass::Write), 8, "{calls:?}");

    // The autoDelete boot disk goes with the instance; the data disk stays, without users.
    let (_, op) = fake.delete("upd-2", None).await;
    fake.wait_done(op["name"].as_str().unwrap_or_default()).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(fake.get(fake.zonal("disks/upd-2")).await.0, StatusCode::NOT_FOUND);
    let (status, kept) = fake.get(fake.zonal(&format!("disks/{data}"))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(kept.get("users").is_none(), "{kept}");
}
