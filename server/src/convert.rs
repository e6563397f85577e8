//! Wire (prost) ↔ domain conversion and request validation, done before any
//! provider code runs. Every rejection is INVALID_ARGUMENT naming the field.

use machine_driver_api as api;
use machine_driver_api::DriverError;
use machine_driver_proto::v1 as pb;

/// What an RPC requires of its `machine` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MachineNeeds {
    /// name and uid (CreateMachine).
    NameAndUid,
    /// name (status, initialize).
    Name,
    /// name or provider_id (delete; the orphan collector sends only provider_id).
    NameOrProviderId,
}

/// Checks and converts a request's machine.
pub(crate) fn machine(m: Option<pb::Machine>, needs: MachineNeeds) -> Result<api::Machine, DriverError> {
    let m = m.ok_or_else(|| DriverError::invalid_argument("machine", "is required"))?;
    let has_name = !m.name.trim().is_empty();
    match needs {
        MachineNeeds::NameAndUid | MachineNeeds::Name if !has_name => {
            return Err(DriverError::invalid_argument("machine.name", "is required"));
        }
        MachineNeeds::NameOrProviderId if !has_name && m.provider_id.trim().is_empty() => {
            return Err(DriverError::invalid_argument(
                "machine.name",
                "either machine.name or machine.provider_id is required",
            ));
        }
        _ => {}
    }
    if needs == MachineNeeds::NameAndUid && m.uid.trim().is_empty() {
        return Err(DriverError::invalid_argument("machine.uid", "is required (it keys create idempotency)"));
    }
    Ok(api::Machine {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        labels: m.labels.into_iter().collect(),
        provider_id: non_empty(m.provider_id),
        node_name: non_empty(m.node_name),
        last_known_state: m.last_known_state,
        created_at: m.creation_time.and_then(|t| std::time::SystemTime::try_from(t).ok()),
        annotations: m.annotations.into_iter().collect(),
        node_template: m
            .node_template_spec
            .map(|t| api::NodeTemplateSpec {
                labels: t.labels.into_iter().collect(),
                annotations: t.annotations.into_iter().collect(),
                taints: t
                    .taints
                    .into_iter()
                    .map(|t| api::Taint { key: t.key, value: t.value, effect: t.effect })
                    .collect(),
            })
            .unwrap_or_default(),
    })
}

/// Checks and converts a machine class: provider_spec must be a JSON object.
pub(crate) fn machine_class(
    c: Option<pb::MachineClass>,
) -> Result<(api::MachineClass, Option<pb::RegistryConfig>), DriverError> {
    let c = c.ok_or_else(|| DriverError::invalid_argument("machine_class", "is required"))?;
    if c.provider_spec.trim().is_empty() {
        return Err(DriverError::invalid_argument("providerSpec", "is required"));
    }
    match serde_json::from_str::<serde_json::Value>(&c.provider_spec) {
        Ok(serde_json::Value::Object(_)) => {}
        Ok(_) => return Err(DriverError::invalid_argument("providerSpec", "must be a JSON object")),
        Err(e) => {
            return Err(DriverError::invalid_argument(
                "providerSpec",
                format!("is not valid JSON ({} at line {} column {})", classify(&e), e.line(), e.column()),
            ));
        }
    }
    let class = api::MachineClass {
        name: c.name,
        provider: c.provider,
        provider_spec: c.provider_spec.into_bytes(),
        node_template: c.node_template.map(|t| api::NodeTemplate {
            capacity: t.capacity.into_iter().collect(),
            instance_type: t.instance_type,
            region: t.region,
            zone: t.zone,
        }),
    };
    Ok((class, c.registry_config))
}

fn classify(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Eof => "unexpected end",
        serde_json::error::Category::Syntax => "syntax error",
        serde_json::error::Category::Data => "invalid data",
        serde_json::error::Category::Io => "read error",
    }
}

/// Checks and converts secret data: every required setting (one of its aliases) present.
pub(crate) fn secret(
    s: Option<pb::SecretData>,
    field: &str,
    required: &api::SecretKeys,
) -> Result<api::SecretData, DriverError> {
    let data = api::SecretData::new(s.map(|s| s.data.into_iter().collect()).unwrap_or_default());
    required.check(&data, field)?;
    Ok(data)
}

/// Domain address → wire address.
pub(crate) fn address(a: api::Address) -> pb::Address {
    let t = match a.kind {
        api::AddressType::InternalIp => pb::AddressType::InternalIp,
        api::AddressType::ExternalIp => pb::AddressType::ExternalIp,
        api::AddressType::InternalDns => pb::AddressType::InternalDns,
        api::AddressType::ExternalDns => pb::AddressType::ExternalDns,
        api::AddressType::Hostname => pb::AddressType::Hostname,
    };
    pb::Address { r#type: t as i32, address: a.address }
}

/// `s` without surrounding whitespace; `None` when nothing is left.
fn non_empty(s: String) -> Option<String> {
    let trimmed = s.trim();
    if trimmed.is_empty() {
        None
    } else if trimmed.len() == s.len() {
        Some(s)
    } else {
        Some(trimmed.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_requirements_name_the_field() {
        let err = machine(Some(pb::Machine { name: "m".into(), ..Default::default() }), MachineNeeds::NameAndUid)
            .unwrap_err();
        assert_eq!(err.field(), Some("machine.uid"));
        let err = machine(None, MachineNeeds::Name).unwrap_err();
        assert_eq!(err.field(), Some("machine"));
        let ok = machine(
            Some(pb::Machine { provider_id: "aws:///r/i-1".into(), ..Default::default() }),
            MachineNeeds::NameOrProviderId,
        )
        .unwrap();
        assert_eq!(ok.provider_id.as_deref(), Some("aws:///r/i-1"));
        let padded = pb::Machine { name: "m".into(), provider_id: " gce://p/z/m \n".into(), ..Default::default() };
        let trimmed = machine(Some(padded), MachineNeeds::Name).unwrap();
        assert_eq!(trimmed.provider_id.as_deref(), Some("gce://p/z/m"), "trimmed once, here");
        let blank = pb::Machine { name: "m".into(), provider_id: "  ".into(), ..Default::default() };
        assert_eq!(machine(Some(blank), MachineNeeds::Name).unwrap().provider_id, None);
    }

    #[test]
    fn provider_spec_must_be_a_json_object() {
        let class = |spec: &str| Some(pb::MachineClass { provider_spec: spec.to_string(), ..Default::default() });
        assert!(machine_class(class(r#"{"a":1}"#)).is_ok());
        for bad in ["", "[1]", "{\"a\":", "nope"] {
            let err = machine_class(class(bad)).unwrap_err();
            assert_eq!(err.field(), Some("providerSpec"), "{bad}");
        }
    }

    #[test]
    fn missing_secret_key_is_named_without_values() {
        let s = pb::SecretData { data: [("accessKeyID".to_string(), b"AKID".to_vec())].into_iter().collect() };
        let req = api::SecretKeys::all_of(&[
            &["providerAccessKeyId", "accessKeyID"],
            &["providerSecretAccessKey", "secretAccessKey"],
        ]);
        let err = secret(Some(s), "secret", &req).unwrap_err();
        assert_eq!(err.field(), Some("secret.providerSecretAccessKey"));
        assert!(!err.message().contains("AKID"));
    }
}
