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
    /// name and provider_id (update: the VM must exist).
    NameAndProviderId,
}

/// Longest Kubernetes object name (a DNS-1123 subdomain).
const MAX_NAME_LEN: usize = 253;

/// Whether `name` is a DNS-1123 subdomain, by Kubernetes' `IsDNS1123Subdomain`:
/// at most 253 characters, lowercase alphanumerics, `-` and `.`, made of
/// dot-separated labels that each start and end with an alphanumeric. Every
/// Machine name the machine-controller sends is one, and nothing else reaches
/// a provider: `*` and `?` are wildcards in EC2 filters, `/` and `..` walk
/// request paths.
pub(crate) fn is_dns1123_subdomain(name: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.split('.').all(|label| {
            let b = label.as_bytes();
            matches!((b.first(), b.last()), (Some(&f), Some(&l)) if alnum(f) && alnum(l))
                && b.iter().all(|&c| alnum(c) || c == b'-')
        })
}

/// Refuses a name that is not a DNS-1123 subdomain, naming `field`; the
/// message shows the name only when it is short and printable.
fn check_dns1123_subdomain(field: &str, name: &str) -> Result<(), DriverError> {
    if is_dns1123_subdomain(name) {
        return Ok(());
    }
    let shown = if name.len() <= 64 && name.chars().all(|c| c.is_ascii_graphic() || c == ' ') {
        format!("{name:?} ")
    } else {
        format!("({} bytes) ", name.len())
    };
    Err(DriverError::invalid_argument(
        field,
        format!(
            "{shown}is not a DNS-1123 subdomain (at most {MAX_NAME_LEN} characters: lowercase letters, digits, \
             '-' and '.', each dot-separated part starting and ending with a letter or digit)"
        ),
    ))
}

/// Refuses a Kubernetes name that is clearly unsafe to pass on: longer than
/// 253 bytes, or holding a control character, whitespace, a path separator or
/// a wildcard. Kept loose on purpose (neither the namespace nor the class name
/// reaches a cloud request): every name Gardener writes passes. Empty passes.
fn check_plain_name(field: &str, name: &str) -> Result<(), DriverError> {
    let unsafe_char = |c: char| c.is_control() || c.is_whitespace() || matches!(c, '/' | '\\' | '*' | '?');
    if name.len() > MAX_NAME_LEN {
        return Err(DriverError::invalid_argument(field, format!("is longer than {MAX_NAME_LEN} bytes")));
    }
    if name.chars().any(unsafe_char) {
        return Err(DriverError::invalid_argument(
            field,
            "holds a control character, whitespace, '/', '\\', '*' or '?' (not a Kubernetes name)",
        ));
    }
    Ok(())
}

/// Checks and converts a request's machine. A machine name must be a DNS-1123
/// subdomain ([`is_dns1123_subdomain`]); it may be empty (blank) only where
/// the RPC allows no name (delete by provider_id), and is then passed on empty.
pub(crate) fn machine(m: Option<pb::Machine>, needs: MachineNeeds) -> Result<api::Machine, DriverError> {
    let mut m = m.ok_or_else(|| DriverError::invalid_argument("machine", "is required"))?;
    let has_name = !m.name.trim().is_empty();
    match needs {
        MachineNeeds::NameAndUid | MachineNeeds::Name | MachineNeeds::NameAndProviderId if !has_name => {
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
    if has_name {
        check_dns1123_subdomain("machine.name", &m.name)?;
    } else {
        m.name.clear();
    }
    check_plain_name("machine.namespace", &m.namespace)?;
    if needs == MachineNeeds::NameAndProviderId && m.provider_id.trim().is_empty() {
        return Err(DriverError::invalid_argument(
            "machine.provider_id",
            "is required (only an existing VM is updated)",
        ));
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

/// Checks and converts UpdateMachine's optional previous class (absent, or
/// with an empty provider_spec, is none); a refusal names
/// `previous_machine_class...`.
pub(crate) fn previous_machine_class(c: Option<pb::MachineClass>) -> Result<Option<api::MachineClass>, DriverError> {
    let Some(c) = c.filter(|c| !c.provider_spec.trim().is_empty()) else {
        return Ok(None);
    };
    match machine_class(Some(c)) {
        Ok((class, _)) => Ok(Some(class)),
        Err(e) => {
            let field = e.field().unwrap_or("provider_spec");
            let problem = e.message().strip_prefix(&format!("{field}: ")).unwrap_or(e.message());
            Err(DriverError::invalid_argument(format!("previous_machine_class.{field}"), problem))
        }
    }
}

/// One UpdateMachine field outcome on the wire.
pub(crate) fn field_change(c: api::FieldChange) -> pb::FieldChange {
    let outcome = match c.outcome {
        api::ChangeOutcome::Applied => pb::FieldChangeOutcome::Applied,
        api::ChangeOutcome::Unchanged => pb::FieldChangeOutcome::Unchanged,
        api::ChangeOutcome::NeedsReplacement => pb::FieldChangeOutcome::NeedsReplacement,
    };
    pb::FieldChange { field: c.field, outcome: outcome as i32, detail: c.detail }
}

/// Checks and converts a machine class: provider_spec must be a JSON object.
pub(crate) fn machine_class(
    c: Option<pb::MachineClass>,
) -> Result<(api::MachineClass, Option<pb::RegistryConfig>), DriverError> {
    let c = c.ok_or_else(|| DriverError::invalid_argument("machine_class", "is required"))?;
    check_plain_name("machine_class.name", &c.name)?;
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

/// The owner's credentials of a share request, present by type: `None` when
/// not given (absent or without a key), else checked like [`secret`] (field
/// `owner_secret`). The callers answer OWNER_CREDENTIALS_REQUIRED where an
/// RPC needs them.
pub(crate) fn owner_secret(
    s: Option<pb::SecretData>,
    required: &api::SecretKeys,
) -> Result<Option<api::OwnerSecret>, DriverError> {
    match s {
        Some(s) if !s.data.is_empty() => Ok(api::OwnerSecret::new(secret(Some(s), "owner_secret", required)?)),
        _ => Ok(None),
    }
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
    fn machine_names_are_dns1123_subdomains() {
        let longest = format!("{}.{}", "a".repeat(200), "b".repeat(52));
        assert_eq!(longest.len(), 253);
        for good in ["m", "m-1", "0", "shoot--garden--x-worker-z1-5d6f7-abcde", "a.b-c.d", longest.as_str()] {
            assert!(is_dns1123_subdomain(good), "{good:?}");
        }
        let too_long = format!("{longest}c");
        for bad in [
            "*",
            "m-?",
            "../x",
            "M-1",
            "",
            "-a",
            "a-",
            "a..b",
            ".a",
            "a.",
            "a_b",
            "m 1",
            "m\n",
            "a/b",
            "ä",
            too_long.as_str(),
        ] {
            assert!(!is_dns1123_subdomain(bad), "{bad:?}");
        }
        for needs in [MachineNeeds::NameAndUid, MachineNeeds::Name, MachineNeeds::NameOrProviderId] {
            for bad in ["*", "m-?", "../x", "M-1", " m", "m\u{0}"] {
                let m =
                    pb::Machine { name: bad.into(), uid: "u".into(), provider_id: "p".into(), ..Default::default() };
                let err = machine(Some(m), needs).unwrap_err();
                assert_eq!(err.field(), Some("machine.name"), "{bad:?} {needs:?}");
                assert_eq!(err.kind(), api::ErrorKind::InvalidArgument);
            }
        }
        // Delete by provider_id alone: a blank name is passed on empty.
        let m = pb::Machine { name: "  ".into(), provider_id: "p".into(), ..Default::default() };
        assert_eq!(machine(Some(m), MachineNeeds::NameOrProviderId).unwrap().name, "");
        let long_garbage = pb::Machine { name: "\u{1b}[31m".repeat(100), uid: "u".into(), ..Default::default() };
        let err = machine(Some(long_garbage), MachineNeeds::Name).unwrap_err();
        assert!(!err.message().contains('\u{1b}'), "control characters are not echoed: {}", err.message());
    }

    #[test]
    fn namespace_and_class_name_refuse_only_unsafe_characters() {
        let with_ns = |ns: &str| pb::Machine { name: "m".into(), namespace: ns.into(), ..Default::default() };
        for ok in ["", "shoot--garden--x", "machine-controller"] {
            assert!(machine(Some(with_ns(ok)), MachineNeeds::Name).is_ok(), "{ok:?}");
        }
        for bad in ["a/b", "*", "a b", "x\n", &"n".repeat(254)] {
            let err = machine(Some(with_ns(bad)), MachineNeeds::Name).unwrap_err();
            assert_eq!(err.field(), Some("machine.namespace"), "{bad:?}");
        }
        let class =
            |name: &str| Some(pb::MachineClass { name: name.into(), provider_spec: "{}".into(), ..Default::default() });
        for ok in ["", "shoot--garden--x-worker-z1-5d6f7", "class", "aws-demo"] {
            assert!(machine_class(class(ok)).is_ok(), "{ok:?}");
        }
        for bad in ["../c", "c?", "c\t"] {
            assert_eq!(machine_class(class(bad)).unwrap_err().field(), Some("machine_class.name"), "{bad:?}");
        }
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
