//! GetVolumeIDs: Alibaba Cloud disks in PersistentVolume specs, as the Go provider reports them.

use serde_json::Value;

/// CSI driver name of the Alibaba Cloud disk CSI plugin.
pub(crate) const DISK_CSI_DRIVER: &str = "diskplugin.csi.alibabacloud.com";

/// Disk ids found in PersistentVolumeSpec JSON values, in input order:
/// FlexVolume `options.volumeId` and the CSI `diskplugin.csi.alibabacloud.com`
/// `volumeHandle`. Specs of other volume types are skipped.
pub(crate) fn volume_ids(pv_specs: &[Value]) -> Vec<String> {
    pv_specs.iter().filter_map(volume_id).collect()
}

fn volume_id(spec: &Value) -> Option<String> {
    let spec = spec.get("spec").filter(|s| s.is_object()).unwrap_or(spec);
    let non_empty = |v: Option<&Value>| v.and_then(Value::as_str).filter(|s| !s.trim().is_empty()).map(str::to_string);
    if let Some(flex) = spec.get("flexVolume") {
        return non_empty(flex.pointer("/options/volumeId"));
    }
    let csi = spec.get("csi")?;
    if csi.get("driver").and_then(Value::as_str) != Some(DISK_CSI_DRIVER) {
        return None;
    }
    non_empty(csi.get("volumeHandle"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flex_csi_and_foreign_volumes() {
        let specs = vec![
            json!({"flexVolume": {"driver": "alicloud/disk", "options": {"volumeId": "d-1"}}}),
            json!({"csi": {"driver": "diskplugin.csi.alibabacloud.com", "volumeHandle": "d-2"}}),
            json!({"csi": {"driver": "nasplugin.csi.alibabacloud.com", "volumeHandle": "nas"}}),
            json!({"spec": {"csi": {"driver": "diskplugin.csi.alibabacloud.com", "volumeHandle": "d-3"}}}),
            json!({"nfs": {"server": "x", "path": "/"}}),
        ];
        assert_eq!(volume_ids(&specs), vec!["d-1", "d-2", "d-3"]);
    }
}
