#![doc = include_str!("../README.md")]
#![allow(missing_docs, unreachable_pub, clippy::doc_lazy_continuation, clippy::large_enum_variant)]

/// `machinedriver.v1`: messages, the `MachineDriverService` and `IdentityService`
/// clients and servers.
pub mod v1 {
    tonic::include_proto!("machinedriver.v1");
}

/// Encoded `FileDescriptorSet` of the contract (with its imports), for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("machinedriver_descriptor");

/// Name of the custom field option that marks secret fields.
pub const SECRET_OPTION: &str = "machinedriver.v1.secret";

#[cfg(test)]
mod tests {
    use prost::Message;

    #[test]
    fn descriptor_set_decodes_and_names_both_services() {
        let set = prost_types::FileDescriptorSet::decode(super::FILE_DESCRIPTOR_SET).expect("descriptor set decodes");
        let services: Vec<String> = set
            .file
            .iter()
            .filter(|f| f.package() == "machinedriver.v1")
            .flat_map(|f| f.service.iter().map(|s| s.name().to_string()))
            .collect();
        assert!(services.contains(&"MachineDriverService".to_string()), "{services:?}");
        assert!(services.contains(&"IdentityService".to_string()), "{services:?}");
    }

    #[test]
    fn secret_fields_carry_the_secret_option() {
        let set = prost_types::FileDescriptorSet::decode(super::FILE_DESCRIPTOR_SET).expect("descriptor set decodes");
        let driver =
            set.file.iter().find(|f| f.name() == "machinedriver/v1/driver.proto").expect("driver.proto present");
        let create =
            driver.message_type.iter().find(|m| m.name() == "CreateMachineRequest").expect("CreateMachineRequest");
        let secret = create.field.iter().find(|f| f.name() == "secret").expect("secret field");
        // prost_types drops unknown extensions, but the options message is present
        // only when an option is set on the field.
        assert!(secret.options.is_some(), "secret field must carry the secret option");
        let machine = create.field.iter().find(|f| f.name() == "machine").expect("machine field");
        assert!(machine.options.is_none());
    }
}
