//! The providerSpec check under random structured mutations of the seed
//! classes in `fuzz/corpus/provider_spec/` (`machine_driver_api::spec_mutations`):
//! no panic, every refusal INVALID_ARGUMENT naming a `providerSpec...` field.

use machine_driver_api::spec_mutations::{check_refusals, corpus_seeds, mutations};

#[test]
fn mutated_classes_are_accepted_or_refused_naming_the_field() {
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let seeds = corpus_seeds(&workspace, "openstack");
    for seed in &seeds {
        let raw = serde_json::to_vec(seed).expect("a seed serializes");
        machine_driver_openstack::check_provider_spec(&raw).expect("every seed class is accepted");
    }
    let seen =
        check_refusals("openstack", &mutations(&seeds, 20_000, 0x5eed), machine_driver_openstack::check_provider_spec);
    assert!(seen.accepted > 0 && seen.refused > 0, "{seen:?}: the inputs must reach both answers");
}
