//! Any bytes as a CreateMachineRequest on the wire: the server's checks before
//! provider code (machine, class, secret, user data and the class's registry
//! configuration) never panic, and every refusal is INVALID_ARGUMENT naming a field.
#![no_main]

use libfuzzer_sys::fuzz_target;
use machine_driver_api::{ErrorKind, SecretKeys};

fuzz_target!(|data: &[u8]| {
    let required = SecretKeys::none()
        .or_form("static keys", &[&["accessKeyID", "providerAccessKeyId"], &["secretAccessKey"]])
        .or_form("workload identity", &[&["workloadIdentityTokenFile"], &["roleARN"]]);
    if let Err(e) = machine_driver_server::fuzzing::create_machine_request(data, &required, 16 * 1024) {
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{}", e.message());
        assert!(e.field().is_some_and(|f| !f.is_empty()), "refusal names no field: {}", e.message());
    }
});
