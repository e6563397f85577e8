//! No accepted providerSpec key is silently dropped: every key the spec type
//! accepts (found by walking the type, `spec_walk`) is a row of the README's
//! "Provider spec fields" table, and changing it changes the RunInstances
//! parameters (which also carry `RegionId`, the endpoint's region), or the row
//! says `ignored` and changing it changes nothing.

use std::collections::BTreeSet;

use machine_driver_api::{CreateMachine, Machine, MachineClass, SecretBytes};
use serde_json::{Value, json};

use crate::create::run_instances_params;
use crate::spec::AlicloudProviderSpec;
use machine_driver_api::spec_walk::{field_paths, readme_table};

const README: &str = include_str!("../README.md");
const TABLE: &str = "Provider spec fields";

/// Sets one key of a class: `false` its "before" value (with its context),
/// `true` its "after" value. Nothing else differs.
type Mutation = fn(&mut Value, bool);

fn pick(on: bool, before: Value, after: Value) -> Value {
    if on { after } else { before }
}

fn base() -> Value {
    let mut v = crate::spec::tests_support::example();
    v["privateIPAddress"] = json!("10.250.0.20");
    v
}

fn mutations() -> Vec<(&'static str, Mutation)> {
    vec![
        ("imageID", |v, on| v["imageID"] = pick(on, json!("m-gw8fakeallowed000001"), json!("m-gw8fakeallowed000002"))),
        ("instanceType", |v, on| v["instanceType"] = pick(on, json!("ecs.g7.large"), json!("ecs.g7.xlarge"))),
        ("region", |v, on| {
            v["region"] = pick(on, json!("eu-central-1"), json!("cn-beijing"));
            v["zoneID"] = pick(on, json!("eu-central-1a"), json!("cn-beijing-a"));
        }),
        ("zoneID", |v, on| v["zoneID"] = pick(on, json!("eu-central-1a"), json!("eu-central-1b"))),
        ("securityGroupID", |v, on| v["securityGroupID"] = pick(on, json!("sg-1"), json!("sg-2"))),
        ("vSwitchID", |v, on| v["vSwitchID"] = pick(on, json!("vsw-1"), json!("vsw-2"))),
        ("privateIPAddress", |v, on| v["privateIPAddress"] = pick(on, json!("10.250.0.20"), json!("10.250.0.21"))),
        ("systemDisk.category", |v, on| {
            v["systemDisk"]["category"] = pick(on, json!("cloud_essd"), json!("cloud_ssd"))
        }),
        ("systemDisk.size", |v, on| v["systemDisk"]["size"] = pick(on, json!(50), json!(60))),
        ("dataDisks[].name", |v, on| v["dataDisks"][0]["name"] = pick(on, json!("a"), json!("b"))),
        ("dataDisks[].category", |v, on| {
            v["dataDisks"][0]["category"] = pick(on, json!("cloud_essd"), json!("cloud_ssd"))
        }),
        ("dataDisks[].description", |v, on| v["dataDisks"][0]["description"] = pick(on, json!("a"), json!("b"))),
        ("dataDisks[].encrypted", |v, on| v["dataDisks"][0]["encrypted"] = json!(on)),
        ("dataDisks[].deleteWithInstance", |v, on| v["dataDisks"][0]["deleteWithInstance"] = json!(!on)),
        ("dataDisks[].size", |v, on| v["dataDisks"][0]["size"] = pick(on, json!(64), json!(100))),
        ("instanceChargeType", |v, on| v["instanceChargeType"] = pick(on, json!("PostPaid"), json!("PrePaid"))),
        ("internetChargeType", |v, on| {
            v["internetChargeType"] = pick(on, json!("PayByTraffic"), json!("PayByBandwidth"))
        }),
        ("internetMaxBandwidthIn", |v, on| v["internetMaxBandwidthIn"] = pick(on, json!(5), json!(10))),
        ("internetMaxBandwidthOut", |v, on| v["internetMaxBandwidthOut"] = pick(on, json!(5), json!(0))),
        ("spotStrategy", |v, on| v["spotStrategy"] = pick(on, json!("NoSpot"), json!("SpotAsPriceGo"))),
        ("spotPriceLimit", |v, on| {
            v["spotStrategy"] = json!("SpotWithPriceLimit");
            v["spotPriceLimit"] = pick(on, json!(0.5), json!(0.75));
        }),
        ("spotDuration", |v, on| {
            v["spotStrategy"] = json!("SpotAsPriceGo");
            v["spotDuration"] = pick(on, json!(1), json!(0));
        }),
        ("IoOptimized", |v, on| v["IoOptimized"] = pick(on, json!("optimized"), json!("none"))),
        ("tags", |v, on| v["tags"]["team"] = pick(on, json!("a"), json!("b"))),
        ("keyPairName", |v, on| v["keyPairName"] = pick(on, json!("key-a"), json!("key-b"))),
    ]
}

fn ignored_mutations() -> Vec<(&'static str, Mutation)> {
    vec![("apiVersion", |v, on| v["apiVersion"] = pick(on, json!("mcm.gardener.cloud/v1alpha1"), json!("v2")))]
}

/// The RunInstances parameters of a class (they carry `RegionId`, the endpoint's region).
fn reached(v: &Value) -> String {
    let (spec, _) = AlicloudProviderSpec::parse(&serde_json::to_vec(v).unwrap()).unwrap_or_else(|e| panic!("{e}: {v}"));
    let req = CreateMachine {
        machine: Machine { name: "m-1".into(), uid: "uid-1".into(), ..Default::default() },
        class: MachineClass::default(),
        secret: Default::default(),
        user_data: SecretBytes(b"#!/bin/sh".to_vec()),
    };
    format!("{:?}", run_instances_params(&spec, &req).0)
}

#[test]
fn the_readme_field_table_is_the_spec_type() {
    let accepted = field_paths::<AlicloudProviderSpec>().expect("the spec type walks");
    let rows = readme_table(README, TABLE).unwrap_or_else(|e| panic!("{e}"));
    let named: Vec<&String> = rows.iter().flat_map(|r| &r.paths).collect();
    let listed: BTreeSet<String> = named.iter().map(|k| (*k).clone()).collect();
    assert_eq!(named.len(), listed.len(), "a key is listed twice in the README's {TABLE:?} table");
    let missing: Vec<_> = accepted.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&accepted).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "README table: missing {missing:?}, not in the spec type {stale:?}"
    );
}

#[test]
fn every_accepted_key_reaches_run_instances_or_is_listed_as_ignored() {
    let rows = readme_table(README, TABLE).unwrap_or_else(|e| panic!("{e}"));
    let ignored: BTreeSet<&str> = rows
        .iter()
        .filter(|r| r.cells.get(1).is_some_and(|c| c.starts_with("ignored")))
        .flat_map(|r| r.paths.iter().map(String::as_str))
        .collect();
    let mutations = mutations();
    let changed: BTreeSet<&str> = mutations.iter().map(|(k, _)| *k).collect();
    for key in &field_paths::<AlicloudProviderSpec>().expect("the spec type walks") {
        assert!(
            changed.contains(key.as_str()) != ignored.contains(key.as_str()),
            "{key}: needs exactly one of a mutation here (it is applied) or `ignored` in the README table"
        );
    }
    let ignored_changed: BTreeSet<&str> = ignored_mutations().iter().map(|(k, _)| *k).collect();
    assert_eq!(ignored_changed, ignored, "every key listed as ignored has a change showing it reaches nothing");
    let state = |mutate: Mutation, on: bool| {
        let mut v = base();
        mutate(&mut v, on);
        reached(&v)
    };
    for (key, mutate) in mutations {
        let cells = &rows
            .iter()
            .find(|r| r.paths.iter().any(|p| p == key))
            .unwrap_or_else(|| panic!("{key} not in the README"))
            .cells;
        assert!(cells.get(1).is_some_and(|c| c.contains("RunInstances")), "{key}: the README says {cells:?}");
        assert_ne!(
            state(mutate, false),
            state(mutate, true),
            "{key} changed and RunInstances did not: silently dropped"
        );
    }
    for (key, mutate) in ignored_mutations() {
        assert_eq!(state(mutate, false), state(mutate, true), "{key} is listed as ignored but reaches RunInstances");
    }
}
