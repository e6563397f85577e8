//! The registry: every scenario with its fixed name, in run order.

mod absent;
mod bad_input;
mod cloud_state;
mod compat;
mod create;
mod faults;
mod identity;
mod initialize;
mod leak;
mod lifecycle;
mod list;
mod migration;
mod ownership;
mod registry;
mod share_image;
mod spot;
mod status;
mod update;
mod volume_ids;

use machine_driver_proto::v1::Capability;

use crate::scenario::Scenario;

pub(crate) use leak::expect_no_leftovers;

/// Name of the final leak check; the runner always runs it last and honours only `--skip` for it.
pub const LEAK_CHECK: &str = "fake/leak-check";

const fn scenario(
    name: &'static str,
    short: &'static str,
    capabilities: &'static [Capability],
    needs_fake_admin: bool,
    run: crate::scenario::ScenarioFn,
) -> Scenario {
    Scenario { name, short, capabilities, needs_fake_admin, run }
}

/// Every scenario, in run order. Names are fixed: CI filters and dashboards rely on them.
pub fn all() -> Vec<Scenario> {
    use Capability::{
        GetVolumeIds, InitializeMachine, ListMachines, RegistryConfig, RevokeImageShare, ShareImage, UpdateMachine,
    };
    vec![
        scenario("identity/probe", "ident", &[], false, identity::probe),
        scenario("identity/health-serving", "health", &[], false, identity::health),
        scenario("lifecycle/full", "life", &[], false, lifecycle::full),
        scenario("lifecycle/cloud-call-budget", "budget", &[], true, lifecycle::call_budget),
        scenario("create/idempotent-repeated", "crrep", &[], false, create::repeated),
        scenario("create/idempotent-concurrent", "crcon", &[], false, create::concurrent),
        scenario("create/idempotent-across-restart", "crrst", &[], true, create::across_restart),
        scenario(
            "create/relaunch-after-terminated-launch",
            "relnch",
            &[],
            true,
            create::relaunch_after_terminated_launch,
        ),
        scenario("status/absent-not-found", "stabs", &[], false, absent::status_not_found),
        scenario("status/concurrent-polls-own-answers", "stcon", &[], false, status::concurrent_polls),
        scenario("delete/absent-ok", "delabs", &[], false, absent::delete_ok),
        scenario("delete/by-provider-id-alone", "delpid", &[], false, absent::delete_by_provider_id),
        scenario("list/shows-created-until-deleted", "list", &[ListMachines], false, list::shows_until_deleted),
        scenario("initialize/convergent", "init", &[InitializeMachine], false, initialize::convergent),
        scenario("initialize/unimplemented-without-capability", "noinit", &[], false, initialize::unimplemented),
        scenario(
            "initialize/post-creation-state",
            "initst",
            &[InitializeMachine],
            true,
            cloud_state::post_creation_state,
        ),
        scenario("share-image/idempotent", "shr", &[ShareImage], false, share_image::idempotent),
        scenario("share-image/visible-needs-no-owner", "shrvis", &[ShareImage], false, share_image::visible),
        scenario("share-image/off-allow-list-refused", "shrdeny", &[ShareImage], false, share_image::not_allowed),
        scenario(
            "share-image/shared-image-launches",
            "shrrun",
            &[ShareImage],
            true,
            share_image::shared_image_launches,
        ),
        scenario(
            "share-image/revoke-takes-access-back",
            "shrrev",
            &[ShareImage, RevokeImageShare],
            false,
            share_image::revoke_takes_access_back,
        ),
        scenario("volume-ids/foreign-specs-skipped", "vol", &[GetVolumeIds], false, volume_ids::foreign_skipped),
        scenario("volume-ids/malformed-refused", "volbad", &[GetVolumeIds], false, volume_ids::malformed_refused),
        scenario("registry/mirror-in-user-data", "mirror", &[RegistryConfig], true, registry::mirror_in_user_data),
        scenario(
            "registry/invalid-mirror-refused",
            "mirrbad",
            &[RegistryConfig],
            false,
            registry::invalid_mirror_refused,
        ),
        scenario("bad-input/invalid-spec-values", "badval", &[], false, bad_input::invalid_values),
        scenario("compat/go-json-leniency", "compat", &[], false, compat::go_json_leniency),
        scenario("compat/gardener-classes", "gardener", &[], false, compat::gardener_classes),
        scenario("bad-input/malformed-spec-json", "badjson", &[], false, bad_input::malformed_json),
        scenario("bad-input/missing-secret-keys", "badsec", &[], false, bad_input::missing_secret_keys),
        scenario("bad-input/missing-machine-uid", "baduid", &[], false, bad_input::missing_uid),
        scenario("ownership/status-by-name-foreign", "ownst", &[], true, ownership::status_by_name_foreign),
        scenario("ownership/delete-by-name-foreign", "owndel", &[], true, ownership::delete_by_name_foreign),
        scenario(
            "ownership/delete-by-provider-id-foreign",
            "owndpid",
            &[],
            true,
            ownership::delete_by_provider_id_foreign,
        ),
        scenario("ownership/list-omits-foreign", "ownlist", &[ListMachines], true, ownership::list_omits_foreign),
        scenario("ownership/create-beside-foreign", "owncr", &[], true, ownership::create_beside_foreign),
        scenario("ownership/go-made-adopted", "owngo", &[], true, ownership::go_made_adopted),
        scenario("migration/status-by-provider-id", "migpid", &[], true, migration::status_by_provider_id),
        scenario("migration/status-by-name", "migname", &[], true, migration::status_by_name),
        scenario("migration/initialize", "miginit", &[], true, migration::initialize),
        scenario("migration/listed", "miglist", &[ListMachines], true, migration::listed),
        scenario("migration/delete-leaves-nothing", "migdel", &[], true, migration::delete_leaves_nothing),
        scenario("migration/rollback-markers", "migroll", &[], true, migration::rollback_markers),
        scenario("fake/throttle-on-create-unavailable", "thr", &[], true, faults::throttle),
        scenario("fake/capacity-on-create-resource-exhausted", "cap", &[], true, faults::capacity),
        scenario("fake/placement-on-create-resource-exhausted", "place", &[], true, faults::placement),
        scenario("fake/eventual-consistency", "evc", &[], true, faults::eventual_consistency),
        scenario("status/failed-vm-reported", "failvm", &[], true, cloud_state::failed_vm_reported),
        scenario("spot/reclaimed-is-reported", "spotrec", &[], true, spot::reclaimed_is_reported),
        scenario("spot/on-demand-not-reclaimed", "spotod", &[], true, spot::on_demand_not_reclaimed),
        scenario("update/tags-applied", "updtag", &[UpdateMachine], true, update::tags_applied),
        scenario("update/validate-only-changes-nothing", "upddry", &[UpdateMachine], true, update::validate_only),
        scenario("update/disk-changed", "upddisk", &[UpdateMachine], true, update::disk_changed),
        scenario("update/replacement-refused", "updrepl", &[UpdateMachine], true, update::replacement_refused),
        scenario("update/lost-answer-retried", "updlost", &[UpdateMachine], true, update::lost_answer_retried),
        scenario("update/foreign-vm-untouched", "updown", &[UpdateMachine], true, update::foreign_vm_untouched),
        scenario("fake/not-visible-after-restart", "nvrst", &[], true, faults::not_visible_after_restart),
        scenario("fake/lost-create-response-retried", "lost", &[], true, faults::lost_response),
        scenario("fake/create-fails-after-effect-repeatedly", "lostall", &[], true, faults::lost_every_response),
        scenario(LEAK_CHECK, "leak", &[], true, leak::leak_check),
    ]
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn names_and_shorts_are_unique_and_well_formed() {
        let all = all();
        let names: HashSet<_> = all.iter().map(|s| s.name).collect();
        let shorts: HashSet<_> = all.iter().map(|s| s.short).collect();
        assert_eq!(names.len(), all.len(), "duplicate scenario name");
        assert_eq!(shorts.len(), all.len(), "duplicate short tag");
        for s in &all {
            assert!(s.name.contains('/') && !s.name.contains(' '), "{}", s.name);
            // Machine names must be valid DNS labels on every cloud (GCE: [a-z]([-a-z0-9]*[a-z0-9])?, <= 63).
            assert!(s.short.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()), "{}", s.short);
            assert!(s.short.len() <= 8, "{}", s.short);
        }
    }

    #[test]
    fn leak_check_runs_last() {
        assert_eq!(all().last().map(|s| s.name), Some(LEAK_CHECK));
    }
}
