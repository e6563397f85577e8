//! GetVolumeIDs: Cinder volumes in PersistentVolume specs, as the Go provider reports them.

use serde_json::Value;

/// CSI driver name of Cinder's CSI plugin.
pub(crate) const CINDER_CSI_DRIVER: &str = "cinder.csi.openstack.org";

/// Volume ids found in PersistentVolumeSpec JSON values, in input order: the
/// in-tree `cinder.volumeID` and the CSI `cinder.csi.openstack.org`
/// `volumeHandle`. Specs of other volume types are skipped.
pub(crate) fn volume_ids(pv_specs: &[Value]) -> Vec<String> {
    pv_specs.iter().filter_map(volume_id).collect()
}

fn volume_id(spec: &Value) -> Option<String> {
    let spec = spec.get("spec").filter(|s| s.is_object()).unwrap_or(spec);
    let non_empty = |v: Option<&Value>| v.and_then(Value::as_str).filter(|s| !s.trim().is_empty()).map(str::to_string);
    if let Some(cinder) = spec.get("cinder") {
        return non_empty(cinder.get("volumeID"));
    }
    let csi = spec.get("csi")?;
    if csi.get("driver").and_then(Value::as_str) != Some(CINDER_CSI_DRIVER) {
        return None;
    }
    non_empty(csi.get("volumeHandle"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn in_tree_csi_and_foreign_volumes() {
        let specs = vec![
            json!({"cinder": {"volumeID": "v-1", "fsType": "ext4"}}),
            json!({"csi": {"driver": "cinder.csi.openstack.org", "volumeHandle": "v-2"}}),
            json!({"csi": {"driver": "manila.csi.openstack.org", "volumeHandle": "share"}}),
            json!({"spec": {"csi": {"driver": "cinder.csi.openstack.org", "volumeHandle": "v-3"}}}),
            json!({"cinder": {"volumeID": " "}}),
            json!({"nfs": {"server": "x", "path": "/"}}),
        ];
        assert_eq!(volume_ids(&specs), vec!["v-1", "v-2", "v-3"]);
    }
}
