//! Marketplace images with a purchase plan, as the Go provider handles them
//! (gardener/machine-controller-manager-provider-azure,
//! pkg/azure/provider/helpers/driver.go `ProcessVMImageConfiguration` and
//! `checkAndAcceptAgreementIfNotAccepted`; its comment: done "for ease of
//! consumption of garden-linux image"):
//!
//! 1. a class with a `urn` and without `skipMarketplaceAgreement` GETs the
//!    image version (`virtualMachineImages.get`); when it has a `plan`,
//! 2. the subscription's agreement for the plan is read
//!    (`Microsoft.MarketplaceOrdering/offerTypes/virtualmachine/publishers/{p}/offers/{o}/plans/{plan}/agreements/current`,
//!    `marketplaceAgreements.get`) and, when its terms are not accepted,
//!    PUT back with `accepted: true` (`marketplaceAgreements.create`), and
//! 3. the VM PUT carries `plan{name, product, publisher}` (ARM fails a VM of
//!    such an image without it: `VMMarketplaceInvalidInput`).
//!
//! Fewer calls than Go (which makes 1-3 of them on every create): an image's
//! plan (or that it has none) is remembered per cloud, subscription (what a
//! subscription may see of the marketplace is its own), location and URN,
//! and an accepted agreement per subscription and plan (both bounded, least
//! recently used dropped). A URN with a version number names one image
//! version, which never changes: its plan is remembered for the process's
//! life. A URN with version `latest` names whichever version is newest, which
//! moves when the publisher publishes one: its plan is remembered for
//! [`LATEST_PLAN_TTL`] (1 h), then read again. That is at most one
//! `virtualMachineImages.get` an hour per subscription, location and URN, where
//! reading it on each create costs one per create (the autoscaler's bursts
//! make tens a minute); and it stays correct because a purchase plan belongs
//! to the offer's SKU (`plan.name` is the SKU's plan, the same for its
//! versions), so a new version with another plan (or none) is a change the
//! driver follows within the hour. A VM PUT that ARM refuses
//! because the terms are not accepted (`ResourcePurchaseValidationFailed`,
//! `MarketplacePurchaseEligibilityFailed`: someone cancelled them since)
//! forgets the agreement and the create accepts the terms again once.
//!
//! An identity that may not accept the terms gets ARM's 403; the driver
//! answers PERMISSION_DENIED naming the action it lacks
//! ([`AGREEMENT_WRITE_ACTION`]) and the two ways out (grant it, or accept
//! the terms once by hand).

use std::sync::Arc;
use std::time::{Duration, Instant};

use machine_driver_api::{CallFailure, DriverError, ErrorKind, KeyedCache};
use serde::Deserialize;
use serde_json::Value;

use crate::clients::Api;
use crate::naming::VmRef;

/// `api-version` of `virtualMachineImages.get` (the Compute package in use).
const COMPUTE_API_VERSION: &str = "2024-07-01";
/// `api-version` of the marketplace agreements (armmarketplaceordering's).
const AGREEMENTS_API_VERSION: &str = "2021-01-01";
/// The RBAC action that accepting the terms needs.
pub(crate) const AGREEMENT_WRITE_ACTION: &str =
    "Microsoft.MarketplaceOrdering/offertypes/publishers/offers/plans/agreements/write";
/// Most remembered image plans and accepted agreements.
const MAX_REMEMBERED: usize = 1024;
/// How long the plan of a `latest` URN is remembered (the version it names moves).
pub(crate) const LATEST_PLAN_TTL: Duration = Duration::from_secs(3600);

/// A marketplace image's purchase plan (`plan` of the image version; `product` is the offer).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct Plan {
    /// The plan id.
    pub(crate) name: String,
    /// The offer.
    pub(crate) product: String,
    /// The publisher.
    pub(crate) publisher: String,
}

/// A URN's parts (`publisher:offer:sku:version`), validated by the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Urn {
    /// Publisher.
    pub(crate) publisher: String,
    /// Offer.
    pub(crate) offer: String,
    /// SKU.
    pub(crate) sku: String,
    /// Version (`latest` allowed, as ARM takes it).
    pub(crate) version: String,
}

impl Urn {
    /// The parts of `urn`, `None` unless it has exactly four non-empty ones.
    pub(crate) fn parse(urn: &str) -> Option<Self> {
        match urn.trim().split(':').collect::<Vec<_>>()[..] {
            [p, o, s, v] if [p, o, s, v].iter().all(|x| !x.is_empty()) => {
                Some(Self { publisher: p.into(), offer: o.into(), sku: s.into(), version: v.into() })
            }
            _ => None,
        }
    }
}

/// Cloud, subscription, location, publisher, offer, sku, version (lowercase).
type ImageKey = (String, String, String, String, String, String, String);
/// Cloud, subscription, publisher, product, plan (lowercase).
type AgreementKey = (String, String, String, String, String);

/// What this process knows of marketplace images and agreements.
#[derive(Debug)]
pub(crate) struct Marketplace {
    /// Each image's plan.
    plans: KeyedCache<ImageKey, KnownPlan>,
    /// Agreements known accepted.
    accepted: KeyedCache<AgreementKey, ()>,
}

impl Default for Marketplace {
    fn default() -> Self {
        Self { plans: KeyedCache::new(MAX_REMEMBERED), accepted: KeyedCache::new(MAX_REMEMBERED) }
    }
}

/// An image's plan as read, and until when it holds.
#[derive(Debug)]
struct KnownPlan {
    /// The plan (`None`: the image has none).
    plan: Option<Plan>,
    /// Until when it holds (`None`: for good; a pinned version never changes).
    until: Option<Instant>,
}

/// The image version as `virtualMachineImages.get` answers it (what is read of it).
#[derive(Debug, Deserialize)]
struct ImageAnswer {
    #[serde(default)]
    properties: ImageProperties,
}

#[derive(Debug, Default, Deserialize)]
struct ImageProperties {
    #[serde(default)]
    plan: Option<Plan>,
}

fn image_key(cloud: &str, vm: &VmRef, urn: &Urn) -> ImageKey {
    (
        cloud.to_ascii_lowercase(),
        vm.subscription.to_ascii_lowercase(),
        vm.location.to_ascii_lowercase(),
        urn.publisher.to_ascii_lowercase(),
        urn.offer.to_ascii_lowercase(),
        urn.sku.to_ascii_lowercase(),
        urn.version.to_ascii_lowercase(),
    )
}

fn agreement_key(api: &Api<'_>, subscription: &str, plan: &Plan) -> AgreementKey {
    (
        api.cloud().to_ascii_lowercase(),
        subscription.to_ascii_lowercase(),
        plan.publisher.to_ascii_lowercase(),
        plan.product.to_ascii_lowercase(),
        plan.name.to_ascii_lowercase(),
    )
}

impl Marketplace {
    /// The remembered plan of the image `key`, when it still holds at `now`.
    fn known_plan(&self, key: &ImageKey, now: Instant) -> Option<Option<Plan>> {
        let known = self.plans.get(key)?;
        if known.until.is_some_and(|until| now >= until) {
            self.plans.remove(key);
            return None;
        }
        Some(known.plan.clone())
    }

    /// Remembers the plan of the image `key` (version `version`) read at `now`.
    fn remember_plan(&self, key: ImageKey, version: &str, plan: Option<Plan>, now: Instant) {
        let until = version.eq_ignore_ascii_case("latest").then(|| now + LATEST_PLAN_TTL);
        self.plans.insert(key, Arc::new(KnownPlan { plan, until }));
    }

    /// The plan of the URN image `urn` in `vm`'s subscription and location:
    /// remembered (see the module docs for how long), else one
    /// `virtualMachineImages.get`. A missing image is INVALID_ARGUMENT naming
    /// `field` (the class names an image the location does not have).
    pub(crate) async fn plan_of(
        &self,
        api: &Api<'_>,
        vm: &VmRef,
        urn: &Urn,
        field: &str,
    ) -> Result<Option<Plan>, DriverError> {
        let key = image_key(api.cloud(), vm, urn);
        if let Some(known) = self.known_plan(&key, Instant::now()) {
            return Ok(known);
        }
        let url = api.arm_url(
            &[
                "subscriptions",
                &vm.subscription,
                "providers",
                "Microsoft.Compute",
                "locations",
                &vm.location,
                "publishers",
                &urn.publisher,
                "artifacttypes",
                "vmimage",
                "offers",
                &urn.offer,
                "skus",
                &urn.sku,
                "versions",
                &urn.version,
            ],
            COMPUTE_API_VERSION,
        );
        let answer = match api.get_raw("compute", "virtualMachineImages.get", &url).await {
            Ok(answer) => answer,
            Err(CallFailure::Cloud(_, f)) if f.is_not_found() => {
                return Err(DriverError::invalid_argument(
                    field.to_string(),
                    format!(
                        "marketplace image {}:{}:{}:{} does not exist in location {}",
                        urn.publisher, urn.offer, urn.sku, urn.version, vm.location
                    ),
                ));
            }
            Err(e) => return Err(e.into()),
        };
        let image: ImageAnswer = serde_json::from_slice(&answer.body).map_err(|_| {
            DriverError::internal("compute virtualMachineImages.get answered a body that is not an image")
        })?;
        let plan = image.properties.plan;
        self.remember_plan(key, &urn.version, plan.clone(), Instant::now());
        Ok(plan)
    }

    /// Makes sure the subscription has accepted `plan`'s terms: nothing when
    /// this process knows them accepted; else one `marketplaceAgreements.get`
    /// and, when not accepted, one `marketplaceAgreements.create` with
    /// `accepted: true` (the answer of the GET sent back, as the Go provider's
    /// `AcceptAgreement`).
    pub(crate) async fn ensure_accepted(
        &self,
        api: &Api<'_>,
        subscription: &str,
        plan: &Plan,
    ) -> Result<(), DriverError> {
        let key = agreement_key(api, subscription, plan);
        if self.accepted.get(&key).is_some() {
            return Ok(());
        }
        let url = api.arm_url(
            &[
                "subscriptions",
                subscription,
                "providers",
                "Microsoft.MarketplaceOrdering",
                "offerTypes",
                "virtualmachine",
                "publishers",
                &plan.publisher,
                "offers",
                &plan.product,
                "plans",
                &plan.name,
                "agreements",
                "current",
            ],
            AGREEMENTS_API_VERSION,
        );
        let which = format!("publisher {} offer {} plan {}", plan.publisher, plan.product, plan.name);
        let answer =
            api.get_raw("marketplaceordering", "marketplaceAgreements.get", &url).await.map_err(|e| match e {
                CallFailure::Cloud(_, f) if f.is_not_found() => DriverError::new(
                    ErrorKind::FailedPrecondition,
                    crate::errors::MARKETPLACE_AGREEMENT_NOT_FOUND,
                    format!("the marketplace has no agreement for the image's purchase plan ({which})"),
                ),
                other => other.into(),
            })?;
        let mut agreement: Value = serde_json::from_slice(&answer.body).map_err(|_| {
            DriverError::internal(
                "marketplaceordering marketplaceAgreements.get answered a body that is not an agreement",
            )
        })?;
        if agreement.pointer("/properties/accepted").and_then(Value::as_bool) == Some(true) {
            self.accepted.insert(key, Arc::new(()));
            return Ok(());
        }
        let Some(properties) = agreement.get_mut("properties").and_then(Value::as_object_mut) else {
            return Err(DriverError::internal(
                "marketplaceordering marketplaceAgreements.get answered an agreement without properties",
            ));
        };
        properties.insert("accepted".into(), Value::Bool(true));
        let body = serde_json::to_vec(&agreement)
            .map_err(|_| DriverError::internal("building the marketplace agreement request failed"))?;
        match api.put_raw("marketplaceordering", "marketplaceAgreements.create", &url, &body, &[]).await {
            Ok(_) => {
                tracing::info!(%subscription, plan = %which, "accepted the marketplace terms of the image's plan");
                self.accepted.insert(key, Arc::new(()));
                Ok(())
            }
            Err(CallFailure::Cloud(_, f)) if f.is_forbidden() => Err(DriverError::new(
                ErrorKind::PermissionDenied,
                crate::errors::MARKETPLACE_TERMS_NOT_ACCEPTED,
                format!(
                    "the marketplace terms of the image's purchase plan ({which}) are not accepted in subscription \
                     {subscription}, and the identity may not accept them: it lacks the permission \
                     {AGREEMENT_WRITE_ACTION}. Grant it, or accept the terms once \
                     (az vm image terms accept --publisher {} --offer {} --plan {} --subscription {subscription})",
                    plan.publisher, plan.product, plan.name
                ),
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// Forgets that `plan`'s terms are accepted in `subscription` (ARM said they are not).
    pub(crate) fn forget_accepted(&self, api: &Api<'_>, subscription: &str, plan: &Plan) {
        self.accepted.remove(&agreement_key(api, subscription, plan));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urns_split_into_four_parts() {
        let urn = Urn::parse(" sap:gardenlinux:greatest:1443.3.0 ").unwrap();
        assert_eq!((urn.publisher.as_str(), urn.version.as_str()), ("sap", "1443.3.0"));
        assert!(Urn::parse("sap:gardenlinux:greatest").is_none());
        assert!(Urn::parse("sap::greatest:1").is_none());
    }

    #[test]
    fn an_image_answer_yields_its_plan() {
        let with: ImageAnswer = serde_json::from_value(serde_json::json!({
            "name": "1443.3.0", "properties": {"plan": {"name": "greatest", "product": "gardenlinux", "publisher": "sap"}}
        }))
        .unwrap();
        assert_eq!(
            with.properties.plan,
            Some(Plan { name: "greatest".into(), product: "gardenlinux".into(), publisher: "sap".into() })
        );
        let without: ImageAnswer =
            serde_json::from_value(serde_json::json!({"properties": {"osDiskImage": {}}})).unwrap();
        assert_eq!(without.properties.plan, None);
    }

    fn vm(subscription: &str) -> VmRef {
        VmRef {
            subscription: subscription.into(),
            resource_group: "rg".into(),
            location: "westeurope".into(),
            name: "m".into(),
        }
    }

    fn plan() -> Plan {
        Plan { name: "greatest".into(), product: "gardenlinux".into(), publisher: "sap".into() }
    }

    /// A pinned version's plan holds for good; `latest`'s for an hour, then it is read again.
    #[test]
    fn the_plan_of_latest_is_read_again_after_an_hour() {
        let market = Marketplace::default();
        let t0 = Instant::now();
        let pinned = Urn::parse("sap:gardenlinux:greatest:1443.3.0").unwrap();
        let latest = Urn::parse("sap:gardenlinux:greatest:Latest").unwrap();
        let (pinned_key, latest_key) =
            (image_key("public", &vm("s-1"), &pinned), image_key("public", &vm("s-1"), &latest));
        market.remember_plan(pinned_key.clone(), &pinned.version, Some(plan()), t0);
        market.remember_plan(latest_key.clone(), &latest.version, Some(plan()), t0);
        let a_minute_short = t0 + LATEST_PLAN_TTL - Duration::from_secs(60);
        assert_eq!(market.known_plan(&latest_key, a_minute_short), Some(Some(plan())));
        assert_eq!(market.known_plan(&latest_key, t0 + LATEST_PLAN_TTL), None, "latest has moved on, maybe");
        assert_eq!(market.known_plan(&latest_key, t0), None, "and is forgotten until read again");
        let a_day_later = t0 + Duration::from_secs(86_400);
        assert_eq!(market.known_plan(&pinned_key, a_day_later), Some(Some(plan())), "a version never changes");
    }

    /// What one subscription read is not another's.
    #[test]
    fn plans_are_remembered_per_subscription() {
        let market = Marketplace::default();
        let now = Instant::now();
        let urn = Urn::parse("sap:gardenlinux:greatest:1443.3.0").unwrap();
        market.remember_plan(image_key("public", &vm("s-1"), &urn), &urn.version, Some(plan()), now);
        assert_eq!(market.known_plan(&image_key("public", &vm("S-1"), &urn), now), Some(Some(plan())));
        assert_eq!(market.known_plan(&image_key("public", &vm("s-2"), &urn), now), None);
        assert_eq!(market.known_plan(&image_key("china", &vm("s-1"), &urn), now), None);
    }
}
