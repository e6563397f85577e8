//! Parsing a class's providerSpec into a provider's typed spec.

use serde::de::DeserializeOwned;

use crate::error::DriverError;

/// Parses raw providerSpec JSON into `T`, naming the offending field on error
/// (e.g. `providerSpec.blockDevices[0].ebs.volumeSize: invalid type ...`).
///
/// Use `#[serde(deny_unknown_fields)]` on `T` so that unknown fields are refused.
pub fn parse_provider_spec<T: DeserializeOwned>(raw: &[u8]) -> Result<T, DriverError> {
    let de = &mut serde_json::Deserializer::from_slice(raw);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field =
            if path == "." || path.is_empty() { "providerSpec".to_string() } else { format!("providerSpec.{path}") };
        // serde_json appends " at line L column C"; positions are noise in a Machine status.
        let inner = e.into_inner().to_string();
        let problem = match inner.rfind(" at line ") {
            Some(i) => inner[..i].to_string(),
            None => inner,
        };
        DriverError::invalid_argument(field, problem)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Spec {
        machine_type: String,
        disks: Vec<Disk>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Disk {
        size_gb: u32,
    }

    #[test]
    fn names_nested_field_of_a_type_error() {
        let err = parse_provider_spec::<Spec>(br#"{"machineType":"m","disks":[{"sizeGb":"big"}]}"#).unwrap_err();
        assert_eq!(err.field(), Some("providerSpec.disks[0].sizeGb"));
        assert!(!err.message().contains("line"), "{}", err.message());
    }

    #[test]
    fn names_unknown_field() {
        let err = parse_provider_spec::<Spec>(br#"{"machineType":"m","disks":[],"bogus":1}"#).unwrap_err();
        assert!(err.message().contains("unknown field `bogus`"), "{}", err.message());
    }

    #[test]
    fn names_missing_field() {
        let err = parse_provider_spec::<Spec>(br#"{"disks":[]}"#).unwrap_err();
        assert!(err.message().contains("missing field `machineType`"), "{}", err.message());
    }
}
