//! GetVolumeIDs: Azure disks in PersistentVolume specs, as the Go provider reports them.

use serde_json::Value;

/// CSI driver name of the Azure disk CSI driver.
pub(crate) const DISK_CSI_DRIVER: &str = "disk.csi.azure.com";

/// Volume ids found in PersistentVolumeSpec JSON values, in input order:
/// in-tree `azureDisk.diskName`, and the CSI `disk.csi.azure.com`
/// `volumeHandle` (the disk's ARM id, whole, as the Go provider reports it).
/// Specs of other volume types are skipped.
pub(crate) fn volume_ids(pv_specs: &[Value]) -> Vec<String> {
    pv_specs.iter().filter_map(volume_id).collect()
}

fn volume_id(spec: &Value) -> Option<String> {
    // Accept a whole PersistentVolume too.
    let spec = spec.get("spec").filter(|s| s.is_object()).unwrap_or(spec);
    if let Some(disk) = spec.get("azureDisk") {
        return disk.get("diskName").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    }
    let csi = spec.get("csi")?;
    if csi.get("driver").and_then(Value::as_str) != Some(DISK_CSI_DRIVER) {
        return None;
    }
    csi.get("volumeHandle").and_then(Value::as_str).filter(|s| !s.trim().is_empty()).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn in_tree_csi_and_foreign_volumes() {
        let handle = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/pvc-1";
        let specs = vec![
            json!({"azureDisk": {"diskName": "disk-a", "diskURI": "/subscriptions/s/x"}}),
            json!({"csi": {"driver": "disk.csi.azure.com", "volumeHandle": handle}}),
            json!({"csi": {"driver": "file.csi.azure.com", "volumeHandle": "share"}}),
            json!({"nfs": {"server": "x", "path": "/"}}),
            json!({"spec": {"csi": {"driver": "disk.csi.azure.com", "volumeHandle": "h2"}}}),
            json!({"csi": {"driver": "disk.csi.azure.com", "volumeHandle": " "}}),
        ];
        assert_eq!(volume_ids(&specs), vec!["disk-a", handle, "h2"]);
    }
}
