//! Names in the class turned into the ids the APIs take: flavor (`GET
//! /flavors/detail`, every page, once), security groups and networks by name
//! (`GET /security-groups?name=`, `GET /networks?name=`), images by name
//! (Glance `GET /v2/images?name=`, every time: an image name is re-pointed
//! when a new image version is uploaded). Every list follows its pages
//! (Neutron's `*_links`, Glance's `next`) with the kit's `PageTokens`.
//!
//! Flavor, security group and network ids do not change under their names in
//! practice, so they are kept for the life of the process, per credentials and
//! region; a create the cloud refuses as invalid forgets them
//! ([`Resolver::forget`]), so a renamed resource is looked up anew. One
//! lookup at a time per credentials and region: the creates that start
//! together wait for the first one's answer instead of each asking.

use std::collections::HashMap;

use machine_driver_api::{DriverError, KeyedCache};

use crate::clients::{Api, Call};
use crate::os::keystone::Service;
use crate::os::model::{FlavorsPage, ImagesPage, NetworksPage, SecurityGroupsPage};
use crate::spec::{ImageRef, NetworkRef};

/// Most cached (credentials, region) entries.
const MAX_ENTRIES: usize = 256;
/// Most security group (and network) names kept per credentials and region:
/// the names come from classes (a name that looks like a UUID is kept as
/// itself without Neutron knowing it), so the map is bounded; when full it
/// is emptied, and the names in use are looked up again once.
const MAX_NAMES: usize = 1024;

/// Ids by name of one credentials and region.
#[derive(Debug, Default)]
struct Names {
    flavors: std::sync::Mutex<Option<HashMap<String, String>>>,
    security_groups: std::sync::Mutex<HashMap<String, String>>,
    networks: std::sync::Mutex<HashMap<String, String>>,
    /// Held while a name missing from the maps is looked up.
    looking_up: tokio::sync::Mutex<()>,
}

/// The name caches of one driver.
#[derive(Debug)]
pub(crate) struct Resolver {
    by_scope: KeyedCache<([u8; 32], String), Names>,
}

impl Default for Resolver {
    fn default() -> Self {
        Self { by_scope: KeyedCache::new(MAX_ENTRIES) }
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Keeps `name` → `id` in `map`, which holds at most [`MAX_NAMES`].
fn remember(map: &std::sync::Mutex<HashMap<String, String>>, name: &str, id: &str) {
    let mut map = lock(map);
    if map.len() >= MAX_NAMES && !map.contains_key(name) {
        map.clear();
    }
    map.insert(name.to_string(), id.to_string());
}

impl Resolver {
    fn names(&self, fingerprint: [u8; 32], api: &Api<'_>) -> std::sync::Arc<Names> {
        self.by_scope.get_or_insert_with(&(fingerprint, api.region().to_string()), Names::default)
    }

    /// Forgets every id of these credentials and region.
    pub(crate) fn forget(&self, fingerprint: [u8; 32], region: &str) {
        self.by_scope.remove(&(fingerprint, region.to_string()));
    }

    /// The id of flavor `name`; RESOURCE_EXHAUSTED when Nova lists no flavor
    /// of that name to the project ([`flavor_not_offered`]).
    pub(crate) async fn flavor(&self, fingerprint: [u8; 32], api: &Api<'_>, name: &str) -> Result<String, DriverError> {
        let names = self.names(fingerprint, api);
        let cached = || lock(&names.flavors).as_ref().and_then(|f| f.get(name).cloned());
        if let Some(id) = cached() {
            return Ok(id);
        }
        let _one_lookup = names.looking_up.lock().await;
        if let Some(id) = cached() {
            return Ok(id);
        }
        let flavors = api
            .all_pages(Call::get(Service::Compute, "flavors.list", "/flavors/detail"), &[], |p: FlavorsPage| {
                (p.flavors, p.flavors_links)
            })
            .await?;
        let map: HashMap<String, String> = flavors.into_iter().map(|f| (f.name, f.id)).collect();
        let id = map.get(name).cloned();
        *lock(&names.flavors) = Some(map);
        id.ok_or_else(|| flavor_not_offered(name, api.region()))
    }

    /// The ids of the security groups `names` (a name Neutron does not know
    /// is taken as an id).
    pub(crate) async fn security_groups(
        &self,
        fingerprint: [u8; 32],
        api: &Api<'_>,
        wanted: &[String],
    ) -> Result<Vec<String>, DriverError> {
        let names = self.names(fingerprint, api);
        let mut out = Vec::with_capacity(wanted.len());
        let mut one_lookup = None;
        for (i, name) in wanted.iter().map(|n| n.trim()).enumerate() {
            if let Some(id) = lock(&names.security_groups).get(name).cloned() {
                out.push(id);
                continue;
            }
            if one_lookup.is_none() {
                one_lookup = Some(names.looking_up.lock().await);
                if let Some(id) = lock(&names.security_groups).get(name).cloned() {
                    out.push(id);
                    continue;
                }
            }
            let found = api
                .all_pages(
                    Call::get(Service::Network, "security_groups.list", "/security-groups"),
                    &[("name", name.to_string())],
                    |p: SecurityGroupsPage| (p.security_groups, p.security_groups_links),
                )
                .await?;
            let id = match found.as_slice() {
                [one] => one.id.clone(),
                [] if looks_like_uuid(name) => name.to_string(),
                [] => {
                    return Err(DriverError::invalid_argument(
                        format!("providerSpec.spec.securityGroups[{i}]"),
                        format!("security group {name:?} does not exist"),
                    ));
                }
                _ => {
                    return Err(DriverError::invalid_argument(
                        format!("providerSpec.spec.securityGroups[{i}]"),
                        format!("{} security groups are named {name:?}: name it by id", found.len()),
                    ));
                }
            };
            remember(&names.security_groups, name, &id);
            out.push(id);
        }
        Ok(out)
    }

    /// The id of a network given by id or name (`field` names it in errors).
    pub(crate) async fn network(
        &self,
        fingerprint: [u8; 32],
        api: &Api<'_>,
        network: &NetworkRef,
        field: &str,
    ) -> Result<String, DriverError> {
        if let Some(id) = network.id.as_deref().map(str::trim).filter(|i| !i.is_empty()) {
            return Ok(id.to_string());
        }
        let name = network.name.as_deref().unwrap_or_default().trim();
        let names = self.names(fingerprint, api);
        if let Some(id) = lock(&names.networks).get(name).cloned() {
            return Ok(id);
        }
        let _one_lookup = names.looking_up.lock().await;
        if let Some(id) = lock(&names.networks).get(name).cloned() {
            return Ok(id);
        }
        let found = api
            .all_pages(
                Call::get(Service::Network, "networks.list", "/networks"),
                &[("name", name.to_string())],
                |p: NetworksPage| (p.networks, p.networks_links),
            )
            .await?;
        let id = match found.as_slice() {
            [one] => one.id.clone(),
            [] => return Err(DriverError::invalid_argument(field, format!("network {name:?} does not exist"))),
            many => {
                return Err(DriverError::invalid_argument(
                    field,
                    format!("{} networks are named {name:?}: name it by id", many.len()),
                ));
            }
        };
        remember(&names.networks, name, &id);
        Ok(id)
    }
}

/// The answer for a flavor Nova does not offer the project in `region`:
/// RESOURCE_EXHAUSTED (reason `FlavorNotFound`), not INVALID_ARGUMENT. Flavors
/// differ between regions and zones (a class is written once for a worker pool
/// that may span several), so a missing flavor is "this machine cannot be
/// placed here", and only RESOURCE_EXHAUSTED makes the cluster autoscaler back
/// off this pool and try another one. As the Go provider does:
/// gardener/machine-controller-manager-provider-openstack v0.27.1
/// `pkg/driver/executor/errors.go` (`ErrFlavorNotFound`: "needs to be treated
/// as ResourceExhausted to allow fallback to other flavors"), returned by
/// `deployServer` in `pkg/driver/executor/executor.go` and mapped in
/// `pkg/driver/utils.go` `mapErrorToCode`. The message still names the field.
pub(crate) fn flavor_not_offered(name: &str, region: &str) -> DriverError {
    DriverError::new(
        machine_driver_api::ErrorKind::ResourceExhausted,
        crate::errors::FLAVOR_NOT_FOUND,
        format!(
            "providerSpec.spec.flavorName: flavor {name:?} is not offered to the project in region {region:?} \
             (Nova lists no flavor of that name)"
        ),
    )
}

/// The image id of the class (1 Glance call for an `imageName`; exactly one
/// image of that name must be visible).
pub(crate) async fn image_id(api: &Api<'_>, image: ImageRef<'_>) -> Result<String, DriverError> {
    let name = match image {
        ImageRef::Id(id) => return Ok(id.to_string()),
        ImageRef::Name(name) => name,
    };
    let images = api
        .all_pages_by(
            Call::get(Service::Image, "images.list", "/images"),
            &[("name", name.to_string()), ("status", "active".to_string())],
            |p: ImagesPage| (p.images, p.next),
        )
        .await?;
    let mut found: Vec<_> = images.into_iter().filter(|i| i.name == name).collect();
    match found.len() {
        1 => Ok(found.swap_remove(0).id),
        0 => Err(DriverError::invalid_argument(
            "providerSpec.spec.imageName",
            format!("no image named {name:?} is visible to the project (a shared image must be accepted: ShareImage)"),
        )),
        n => Err(DriverError::invalid_argument(
            "providerSpec.spec.imageName",
            format!("{n} images are named {name:?}: give imageID"),
        )),
    }
}

/// True for a UUID (8-4-4-4-12 hex digits).
pub(crate) fn looks_like_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts.iter().zip([8, 4, 4, 4, 12]).all(|(p, n)| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_names_are_bounded() {
        let map = std::sync::Mutex::new(HashMap::new());
        for i in 0..3 * MAX_NAMES {
            remember(&map, &format!("sg-{i}"), "id");
        }
        assert!(lock(&map).len() <= MAX_NAMES);
        assert_eq!(lock(&map).get(&format!("sg-{}", 3 * MAX_NAMES - 1)).map(String::as_str), Some("id"));
    }

    #[test]
    fn a_flavor_the_region_does_not_offer_is_resource_exhausted_naming_the_field() {
        let e = flavor_not_offered("g1.gpu", "RegionTwo");
        assert_eq!(e.kind(), machine_driver_api::ErrorKind::ResourceExhausted);
        assert!(e.message().contains("providerSpec.spec.flavorName"), "{}", e.message());
        assert!(e.message().contains("\"g1.gpu\"") && e.message().contains("RegionTwo"), "{}", e.message());
    }

    #[test]
    fn uuids() {
        assert!(looks_like_uuid("e4d5f6a7-b8c9-4d0e-9f2a-3b4c5d6e7f80"));
        assert!(!looks_like_uuid("shoot--dev--conf"));
    }
}
