//! GetVolumeIDs: EBS volume ids in PersistentVolume specs.

use serde_json::Value;

/// The CSI driver name of EBS.
pub(crate) const EBS_CSI_DRIVER: &str = "ebs.csi.aws.com";

/// `vol-...` from an in-tree volume id (`aws://<zone>/vol-...` or `vol-...`).
fn ebs_volume_id(raw: &str) -> Option<String> {
    let id = match raw.strip_prefix("aws://") {
        Some(rest) => rest.rsplit('/').next().unwrap_or(""),
        None => raw,
    };
    (!id.is_empty()).then(|| id.to_string())
}

/// The EBS volume ids among `pv_specs`: in-tree `awsElasticBlockStore.volumeID`
/// and CSI `ebs.csi.aws.com` volume handles; other volumes are skipped.
pub(crate) fn volume_ids(pv_specs: &[Value]) -> Vec<String> {
    pv_specs
        .iter()
        .filter_map(|spec| {
            if let Some(id) = spec.pointer("/awsElasticBlockStore/volumeID").and_then(Value::as_str) {
                return ebs_volume_id(id);
            }
            let csi = spec.get("csi")?;
            (csi.get("driver").and_then(Value::as_str) == Some(EBS_CSI_DRIVER))
                .then(|| csi.get("volumeHandle").and_then(Value::as_str).map(str::to_string))
                .flatten()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn in_tree_and_csi_ids_others_skipped() {
        let specs = [
            json!({"awsElasticBlockStore": {"volumeID": "aws://eu-west-1a/vol-111"}}),
            json!({"awsElasticBlockStore": {"volumeID": "vol-222"}}),
            json!({"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-333"}}),
            json!({"csi": {"driver": "efs.csi.aws.com", "volumeHandle": "fs-1"}}),
            json!({"gcePersistentDisk": {"pdName": "disk"}}),
            json!({"awsElasticBlockStore": {"volumeID": "aws://eu-west-1a/"}}),
        ];
        assert_eq!(volume_ids(&specs), vec!["vol-111", "vol-222", "vol-333"]);
    }
}
