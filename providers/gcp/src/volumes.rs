//! GetVolumeIDs: GCE persistent disk names in PersistentVolume specs.

use serde_json::Value;

/// CSI driver name of the GCE persistent disk CSI driver.
pub(crate) const PD_CSI_DRIVER: &str = "pd.csi.storage.gke.io";

/// Disk names found in PersistentVolumeSpec JSON values, in input order:
/// in-tree `gcePersistentDisk.pdName`, and the CSI `pd.csi.storage.gke.io`
/// `volumeHandle` (`projects/P/zones/Z/disks/NAME` → `NAME`, as the Go provider
/// reports). Specs of other volume types are skipped.
pub(crate) fn volume_ids(pv_specs: &[Value]) -> Vec<String> {
    pv_specs.iter().filter_map(volume_id).collect()
}

fn volume_id(spec: &Value) -> Option<String> {
    // Accept a whole PersistentVolume too.
    let spec = spec.get("spec").filter(|s| s.is_object()).unwrap_or(spec);
    if let Some(name) = spec.pointer("/gcePersistentDisk/pdName").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        return Some(name.to_string());
    }
    let csi = spec.get("csi")?;
    if csi.get("driver").and_then(Value::as_str) != Some(PD_CSI_DRIVER) {
        return None;
    }
    let handle = csi.get("volumeHandle").and_then(Value::as_str)?;
    handle.rsplit('/').next().filter(|s| !s.is_empty()).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn in_tree_csi_and_foreign_volumes() {
        let specs = vec![
            json!({"gcePersistentDisk": {"pdName": "disk-a", "fsType": "ext4"}}),
            json!({"csi": {"driver": "pd.csi.storage.gke.io", "volumeHandle": "projects/p/zones/europe-west1-b/disks/disk-b"}}),
            json!({"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"}}),
            json!({"nfs": {"server": "x", "path": "/"}}),
            json!({"spec": {"csi": {"driver": "pd.csi.storage.gke.io", "volumeHandle": "disk-c"}}}),
            json!({"csi": {"driver": "pd.csi.storage.gke.io", "volumeHandle": "projects/p/zones/z/disks/"}}),
        ];
        assert_eq!(volume_ids(&specs), vec!["disk-a", "disk-b", "disk-c"]);
    }
}
