//! The Alicloud machine class providerSpec, as the Go provider
//! (gardener/machine-controller-manager-provider-alicloud) and the Gardener
//! Alicloud extension write it, read as leniently as Go reads it, with the
//! validation the Go provider never had (its validation is an empty stub):
//! INVALID_ARGUMENT naming the field.

use std::collections::BTreeMap;

use machine_driver_api::{ClusterMarkers, DriverError, parse_provider_spec};
use serde::Deserialize;
use serde::de::IgnoredAny;

/// Tag key prefix naming the cluster (`kubernetes.io/cluster/<name>`): the cluster marker.
pub(crate) const CLUSTER_TAG: &str = "kubernetes.io/cluster/";
/// Tag key prefix naming the role (`kubernetes.io/role/<role>`): the role marker.
pub(crate) const ROLE_TAG: &str = "kubernetes.io/role/";
/// The field named when the class lacks a marker.
const TAGS_FIELD: &str = "providerSpec.tags";
/// Most tags an ECS resource holds ("Tag limits"; RunInstances and TagResources
/// take 20 `Tag.N`).
pub(crate) const MAX_INSTANCE_TAGS: usize = 20;
/// Most tags ECS takes on an instance, less the machine uid tag.
const MAX_SPEC_TAGS: usize = MAX_INSTANCE_TAGS - 1;
/// RunInstances `SpotStrategy` values.
const SPOT_STRATEGIES: &[&str] = &["NoSpot", "SpotWithPriceLimit", "SpotAsPriceGo"];

/// The providerSpec of an Alicloud machine class.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AlicloudProviderSpec {
    /// Written by the Gardener extension; ignored.
    #[serde(default, rename = "apiVersion")]
    pub(crate) _api_version: Option<IgnoredAny>,
    /// Image id (`m-...` or a public image name).
    #[serde(rename = "imageID", default)]
    pub(crate) image_id: String,
    /// Instance type (`ecs.g7.large`).
    #[serde(default)]
    pub(crate) instance_type: String,
    /// Region (`eu-central-1`).
    #[serde(default)]
    pub(crate) region: String,
    /// Zone (`eu-central-1a`).
    #[serde(rename = "zoneID", default)]
    pub(crate) zone_id: String,
    /// Security group.
    #[serde(rename = "securityGroupID", default)]
    pub(crate) security_group_id: String,
    /// VSwitch (subnet).
    #[serde(rename = "vSwitchID", default)]
    pub(crate) v_switch_id: String,
    /// A fixed private IP.
    #[serde(rename = "privateIPAddress", default)]
    pub(crate) private_ip_address: Option<String>,
    /// System disk.
    #[serde(default)]
    pub(crate) system_disk: Option<SystemDisk>,
    /// Data disks.
    #[serde(default)]
    pub(crate) data_disks: Vec<DataDisk>,
    /// `PostPaid` or `PrePaid`.
    #[serde(default)]
    pub(crate) instance_charge_type: Option<String>,
    /// `PayByTraffic` or `PayByBandwidth`.
    #[serde(default)]
    pub(crate) internet_charge_type: Option<String>,
    /// Inbound bandwidth (Mbit/s).
    #[serde(default)]
    pub(crate) internet_max_bandwidth_in: Option<i64>,
    /// Outbound bandwidth (Mbit/s); > 0 gives a public IP.
    #[serde(default)]
    pub(crate) internet_max_bandwidth_out: Option<i64>,
    /// `NoSpot`, `SpotAsPriceGo`, `SpotWithPriceLimit`.
    #[serde(default)]
    pub(crate) spot_strategy: Option<String>,
    /// The hourly price limit of a `SpotWithPriceLimit` instance (RunInstances
    /// `SpotPriceLimit`: at most 3 decimals). Not in the Go provider.
    #[serde(default)]
    pub(crate) spot_price_limit: Option<f64>,
    /// The protection hours of a spot instance, 0 or 1 (RunInstances
    /// `SpotDuration`; ECS's default 1). Not in the Go provider.
    #[serde(default)]
    pub(crate) spot_duration: Option<i64>,
    /// `optimized` or `none` (capital `I` in the Go provider's JSON).
    #[serde(rename = "IoOptimized", default)]
    pub(crate) io_optimized: Option<String>,
    /// Instance tags; must hold the cluster and role keys.
    #[serde(default)]
    pub(crate) tags: BTreeMap<String, String>,
    /// SSH key pair.
    #[serde(default)]
    pub(crate) key_pair_name: Option<String>,
}

/// `systemDisk`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SystemDisk {
    /// `cloud_efficiency`, `cloud_ssd`, `cloud_essd`, ...
    #[serde(default)]
    pub(crate) category: Option<String>,
    /// Size in GiB.
    #[serde(default)]
    pub(crate) size: Option<i64>,
}

/// One data disk.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct DataDisk {
    /// Part of the disk's name (`<machine>-<name>-data-disk`).
    #[serde(default)]
    pub(crate) name: String,
    /// Disk category.
    #[serde(default)]
    pub(crate) category: Option<String>,
    /// Description.
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// Encrypted.
    #[serde(default)]
    pub(crate) encrypted: bool,
    /// Deleted with the instance (default true; not sent for ephemeral SSDs).
    #[serde(default)]
    pub(crate) delete_with_instance: Option<bool>,
    /// Size in GiB.
    #[serde(default)]
    pub(crate) size: i64,
}

impl AlicloudProviderSpec {
    /// Parses and validates raw providerSpec JSON, with the class's ownership
    /// markers (built once, here); errors name the field.
    pub(crate) fn parse(raw: &[u8]) -> Result<(Self, ClusterMarkers), DriverError> {
        let spec: Self = parse_provider_spec(raw)?;
        let markers = spec.validate()?;
        Ok((spec, markers))
    }

    /// The class's ownership markers alone, for the paths that address an
    /// instance by providerID (status, delete): they need no other field, and a
    /// class edited into an invalid image or zone must not stop them. A class
    /// without both markers is INVALID_ARGUMENT here too: without them nothing
    /// can be proven this cluster's.
    pub(crate) fn markers_of(raw: &[u8]) -> Result<ClusterMarkers, DriverError> {
        parse_provider_spec::<Self>(raw)?.markers()
    }

    /// The cluster and role markers: exactly one tag key starting with
    /// `kubernetes.io/cluster/` and one with `kubernetes.io/role/` (the kit's rule).
    fn markers(&self) -> Result<ClusterMarkers, DriverError> {
        ClusterMarkers::from_keys(self.tags.keys().map(String::as_str), CLUSTER_TAG, ROLE_TAG, TAGS_FIELD)
    }

    fn validate(&self) -> Result<ClusterMarkers, DriverError> {
        let bad =
            |field: &str, problem: &str| Err(DriverError::invalid_argument(format!("providerSpec.{field}"), problem));
        for (field, value) in [
            ("imageID", &self.image_id),
            ("instanceType", &self.instance_type),
            ("region", &self.region),
            ("zoneID", &self.zone_id),
            ("securityGroupID", &self.security_group_id),
            ("vSwitchID", &self.v_switch_id),
        ] {
            if value.trim().is_empty() {
                return bad(field, "is required");
            }
        }
        if !crate::naming::is_region(&self.region) {
            return bad("region", &format!("{:?} is not a region id (eu-central-1)", self.region));
        }
        if self.tags.keys().any(|k| k == crate::naming::MACHINE_UID_TAG) {
            return bad("tags", &format!("{} is set by the driver", crate::naming::MACHINE_UID_TAG));
        }
        if !self.zone_id.starts_with(&self.region) {
            return bad("zoneID", &format!("{:?} is not a zone of region {:?}", self.zone_id, self.region));
        }
        let markers = self.markers()?;
        for (key, value) in &self.tags {
            if let Some(problem) = tag_problem(key, value) {
                return bad("tags", &format!("{key:?}: {problem}"));
            }
        }
        if self.tags.len() > MAX_SPEC_TAGS {
            return bad(
                "tags",
                &format!("at most {MAX_SPEC_TAGS} tags (ECS takes 20; the driver adds the machine uid)"),
            );
        }
        // No minimum of our own (as the Go provider): ECS refuses a size below the
        // category's minimum itself, and Gardener passes the user's volume size.
        if let Some(size) = self.system_disk.as_ref().and_then(|d| d.size)
            && size <= 0
        {
            return bad("systemDisk.size", "must be greater than 0");
        }
        for (i, d) in self.data_disks.iter().enumerate() {
            if d.size <= 0 {
                return bad(&format!("dataDisks[{i}].size"), "must be greater than 0");
            }
        }
        for (field, value) in [
            ("internetMaxBandwidthIn", self.internet_max_bandwidth_in),
            ("internetMaxBandwidthOut", self.internet_max_bandwidth_out),
        ] {
            if value.is_some_and(|v| v < 0) {
                return bad(field, "must not be negative");
            }
        }
        self.validate_spot()?;
        Ok(markers)
    }

    /// Whether the class launches spot instances (`SpotWithPriceLimit` or `SpotAsPriceGo`).
    pub(crate) fn is_spot(&self) -> bool {
        self.spot_strategy.as_deref().is_some_and(|s| !s.is_empty() && s != "NoSpot")
    }

    /// The spot fields, by the RunInstances reference: `SpotStrategy` NoSpot,
    /// SpotWithPriceLimit or SpotAsPriceGo, only for a `PostPaid` instance
    /// (ECS: `InvalidSpotPrepaid`); `SpotPriceLimit` > 0 with at most 3 decimals
    /// (`InvalidSpotPriceLimit`), used by ECS only with SpotWithPriceLimit;
    /// `SpotDuration` 0 or 1 (`InvalidSpotDuration`), used only with a spot
    /// strategy. A limit or duration ECS would ignore is refused here rather
    /// than silently dropped. SpotWithPriceLimit without a limit is sent as the
    /// Go provider sends it (ECS decides the limit).
    fn validate_spot(&self) -> Result<(), DriverError> {
        let bad =
            |field: &str, problem: &str| Err(DriverError::invalid_argument(format!("providerSpec.{field}"), problem));
        let strategy = self.spot_strategy.as_deref().filter(|s| !s.is_empty());
        if let Some(s) = strategy
            && !SPOT_STRATEGIES.contains(&s)
        {
            return bad("spotStrategy", &format!("{s:?} must be one of {}", SPOT_STRATEGIES.join(", ")));
        }
        let spot = strategy.is_some_and(|s| s != "NoSpot");
        if spot && self.instance_charge_type.as_deref() == Some("PrePaid") {
            return bad(
                "spotStrategy",
                "a spot instance must be PostPaid (ECS refuses spot with instanceChargeType PrePaid)",
            );
        }
        if let Some(limit) = self.spot_price_limit {
            if strategy != Some("SpotWithPriceLimit") {
                return bad(
                    "spotPriceLimit",
                    "is used only with spotStrategy SpotWithPriceLimit (ECS ignores it otherwise)",
                );
            }
            if !(limit.is_finite() && limit > 0.0) {
                return bad("spotPriceLimit", "must be a positive hourly price");
            }
            let thousandths = limit * 1000.0;
            if (thousandths - thousandths.round()).abs() > 1e-6 * thousandths.abs().max(1.0) {
                return bad("spotPriceLimit", "has at most 3 decimals (ECS's precision)");
            }
        }
        if let Some(hours) = self.spot_duration {
            if !spot {
                return bad("spotDuration", "is used only with spotStrategy SpotWithPriceLimit or SpotAsPriceGo");
            }
            if !(0..=1).contains(&hours) {
                return bad("spotDuration", "must be 0 or 1 (hours the spot instance is protected from reclaim)");
            }
        }
        Ok(())
    }
}

/// What ECS refuses in a tag (RunInstances and TagResources `Tag.N.Key`: 1 to 128
/// characters, not starting with `aliyun` or `acs:`, without `http://` or
/// `https://`; `Tag.N.Value`: up to 128 characters, not starting with `acs:`,
/// without `http://` or `https://`), checked before any call.
fn tag_problem(key: &str, value: &str) -> Option<&'static str> {
    let (k, v) = (key.to_ascii_lowercase(), value.to_ascii_lowercase());
    let url = |s: &str| s.contains("http://") || s.contains("https://");
    if key.is_empty() || key.chars().count() > 128 {
        Some("a tag key has 1 to 128 characters")
    } else if k.starts_with("aliyun") || k.starts_with("acs:") {
        Some("a tag key must not start with aliyun or acs: (ECS reserves them)")
    } else if value.chars().count() > 128 {
        Some("a tag value has at most 128 characters")
    } else if v.starts_with("acs:") {
        Some("a tag value must not start with acs:")
    } else if url(&k) || url(&v) {
        Some("ECS refuses http:// and https:// in tags")
    } else {
        None
    }
}

/// A class as the Gardener extension writes it, for the crate's tests.
#[cfg(test)]
pub(crate) mod tests_support {
    /// The example class, reduced.
    pub(crate) fn example() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "mcm.gardener.cloud/v1alpha1",
            "imageID": "m-gw8fakeallowed000001",
            "instanceType": "ecs.g7.large",
            "region": "eu-central-1",
            "zoneID": "eu-central-1a",
            "securityGroupID": "sg-gw8fake0000000000001",
            "vSwitchID": "vsw-gw8fake000000000001",
            "systemDisk": {"category": "cloud_essd", "size": 50},
            "dataDisks": [{"name": "containerd", "category": "cloud_essd", "size": 64, "deleteWithInstance": true}],
            "instanceChargeType": "PostPaid",
            "internetChargeType": "PayByTraffic",
            "internetMaxBandwidthIn": 5,
            "internetMaxBandwidthOut": 5,
            "spotStrategy": "NoSpot",
            "IoOptimized": "optimized",
            "tags": {"kubernetes.io/cluster/shoot--dev--conf": "1", "kubernetes.io/role/node": "1"},
            "keyPairName": "shoot--dev--conf-ssh-publickey"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::example;
    use super::*;

    fn parse(v: &serde_json::Value) -> Result<AlicloudProviderSpec, DriverError> {
        AlicloudProviderSpec::parse(&serde_json::to_vec(v).unwrap()).map(|(s, _)| s)
    }

    #[test]
    fn a_gardener_class_parses_including_io_optimized() {
        let s = parse(&example()).unwrap();
        assert_eq!(s.io_optimized.as_deref(), Some("optimized"));
        let markers = AlicloudProviderSpec::markers_of(&serde_json::to_vec(&example()).unwrap()).unwrap();
        assert_eq!(markers.cluster(), "kubernetes.io/cluster/shoot--dev--conf");
        assert_eq!(markers.role(), "kubernetes.io/role/node");
        assert_eq!(s.markers().unwrap(), markers);
    }

    #[test]
    fn bad_values_name_their_field() {
        let field = |patch: &dyn Fn(&mut serde_json::Value)| {
            let mut v = example();
            patch(&mut v);
            parse(&v).unwrap_err().field().map(str::to_string)
        };
        assert_eq!(field(&|v| v["imageID"] = "".into()).as_deref(), Some("providerSpec.imageID"));
        assert_eq!(field(&|v| v["zoneID"] = "cn-beijing-a".into()).as_deref(), Some("providerSpec.zoneID"));
        assert_eq!(field(&|v| v["tags"] = serde_json::json!({"a": "b"})).as_deref(), Some("providerSpec.tags"));
        for (k, v) in [("acs:x", "1"), ("aliyun-x", "1"), ("ok", "acs:x"), ("ok", "see https://x"), ("", "1")] {
            assert_eq!(field(&|s| s["tags"][k] = v.into()).as_deref(), Some("providerSpec.tags"), "{k:?}={v:?}");
        }
        assert_eq!(field(&|s| s["tags"]["k".repeat(129)] = "1".into()).as_deref(), Some("providerSpec.tags"));
        let fine = {
            let mut v = example();
            v["tags"]["team.example.com/owner"] = "".into();
            v
        };
        assert!(parse(&fine).is_ok(), "an empty value is a tag ECS takes");
        assert_eq!(field(&|v| v["dataDisks"][0]["size"] = 0.into()).as_deref(), Some("providerSpec.dataDisks[0].size"));
        assert_eq!(field(&|v| v["systemDisk"]["size"] = "big".into()).as_deref(), Some("providerSpec.systemDisk.size"));
    }

    #[test]
    fn markers_are_one_cluster_and_one_role_key_by_prefix() {
        let tags = |t: serde_json::Value| {
            let mut v = example();
            v["tags"] = t;
            serde_json::to_vec(&v).unwrap()
        };
        for bad in [
            serde_json::json!({"kubernetes.io/cluster/a": "1", "kubernetes.io/cluster/b": "1", "kubernetes.io/role/node": "1"}),
            serde_json::json!({"x/kubernetes.io/cluster/a": "1", "kubernetes.io/role/node": "1"}),
            serde_json::json!({"kubernetes.io/cluster/a": "1"}),
        ] {
            let raw = tags(bad);
            let e = AlicloudProviderSpec::markers_of(&raw).unwrap_err();
            assert_eq!(e.field(), Some("providerSpec.tags"));
            assert_eq!(AlicloudProviderSpec::parse(&raw).unwrap_err().field(), Some("providerSpec.tags"));
        }
        // The markers alone do not need the rest of the class to be valid.
        let mut v = example();
        v["imageID"] = "".into();
        assert!(AlicloudProviderSpec::markers_of(&serde_json::to_vec(&v).unwrap()).is_ok());
    }

    #[test]
    fn spot_fields_follow_the_run_instances_reference() {
        let spot = |patch: serde_json::Value| {
            let mut v = example();
            for (k, x) in patch.as_object().unwrap() {
                v[k] = x.clone();
            }
            parse(&v)
        };
        let s =
            spot(serde_json::json!({"spotStrategy": "SpotWithPriceLimit", "spotPriceLimit": 0.125, "spotDuration": 0}))
                .unwrap();
        assert_eq!((s.spot_price_limit, s.spot_duration), (Some(0.125), Some(0)));
        spot(serde_json::json!({"spotStrategy": "SpotAsPriceGo", "spotDuration": 1})).unwrap();
        spot(serde_json::json!({"spotStrategy": "SpotWithPriceLimit"})).unwrap();
        let cases = [
            (serde_json::json!({"spotStrategy": "Cheap"}), "providerSpec.spotStrategy"),
            (
                serde_json::json!({"spotStrategy": "SpotAsPriceGo", "instanceChargeType": "PrePaid"}),
                "providerSpec.spotStrategy",
            ),
            (
                serde_json::json!({"spotStrategy": "SpotAsPriceGo", "spotPriceLimit": 0.5}),
                "providerSpec.spotPriceLimit",
            ),
            (serde_json::json!({"spotStrategy": "NoSpot", "spotPriceLimit": 0.5}), "providerSpec.spotPriceLimit"),
            (
                serde_json::json!({"spotStrategy": "SpotWithPriceLimit", "spotPriceLimit": 0.1234}),
                "providerSpec.spotPriceLimit",
            ),
            (
                serde_json::json!({"spotStrategy": "SpotWithPriceLimit", "spotPriceLimit": 0}),
                "providerSpec.spotPriceLimit",
            ),
            (
                serde_json::json!({"spotStrategy": "SpotWithPriceLimit", "spotPriceLimit": "x"}),
                "providerSpec.spotPriceLimit",
            ),
            (serde_json::json!({"spotStrategy": "SpotAsPriceGo", "spotDuration": 2}), "providerSpec.spotDuration"),
            (serde_json::json!({"spotStrategy": "NoSpot", "spotDuration": 1}), "providerSpec.spotDuration"),
        ];
        for (patch, field) in cases {
            let err = spot(patch.clone()).unwrap_err();
            assert_eq!(err.field(), Some(field), "{patch}: {err}");
        }
    }

    #[test]
    fn nulls_and_unknown_fields_are_accepted() {
        let mut v = example();
        v["privateIPAddress"] = serde_json::Value::Null;
        v["internetMaxBandwidthIn"] = serde_json::Value::Null;
        v["someFutureField"] = serde_json::json!({"x": 1});
        parse(&v).unwrap();
    }
}
