//! `marketplaceAgreements.get` and `.create`: a subscription's agreement to the terms of a
//! marketplace image's purchase plan, at
//! `/subscriptions/S/providers/Microsoft.MarketplaceOrdering/offerTypes/virtualmachine/publishers/P/offers/O/plans/N/agreements/current`
//! (api-version 2021-01-01, `AgreementTerms`; the shapes of the Azure SDK for Go's
//! armmarketplaceordering v1.2.0 examples). The plans are those of the seeded marketplace
//! images ([`crate::state::seed::MARKETPLACE`]); `product` is the offer.
//!
//! - GET: the terms, `accepted` as the subscription left them (false at start).
//! - PUT: `properties.accepted` (required, a boolean) becomes the subscription's answer;
//!   the identity needs `Microsoft.MarketplaceOrdering/offertypes/publishers/offers/plans/agreements/write`
//!   (`POST /_admin/azure/marketplace {"mayAcceptTerms": false}` withdraws it: 403
//!   `AuthorizationFailed` naming that action and the agreement's scope).
//! - An offer type other than `virtualmachine`, or a plan no seeded image has: 404 `NotFound`
//!   (the wording is this fake's).

use std::time::{Instant, SystemTime};

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::{Ctx, Req, respond};
use crate::api::routes::action_of;
use crate::error::ArmError;
use crate::state::seed::purchase_plan;
use crate::state::{Agreement, agreement_key};
use crate::wire::{path, timestamp};

/// The terms' signature (opaque; the same for every subscription here).
const SIGNATURE: &str = "FAKEARMTERMSSIGNATURE2021";

/// `GET` or `PUT` of an agreement.
#[allow(clippy::too_many_arguments)]
pub(crate) fn agreement(
    ctx: &Ctx,
    req: &Req,
    put: bool,
    sub: &str,
    offer_type: &str,
    publisher: &str,
    offer: &str,
    plan: &str,
) -> Result<Response, ArmError> {
    let Some(known) =
        purchase_plan(publisher, offer, plan).filter(|_| offer_type.eq_ignore_ascii_case("virtualmachine"))
    else {
        return Err(ArmError::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("Offer with PublisherId: '{publisher}', OfferId: '{offer}', PlanId: '{plan}' was not found."),
        ));
    };
    let scope = format!(
        "/subscriptions/{sub}/providers/Microsoft.MarketplaceOrdering/offerTypes/{offer_type}/publishers/{}/offers/{}/plans/{}/agreements/current",
        known.publisher, known.product, known.name
    );
    let key = agreement_key(sub, known.publisher, known.product, known.name);
    let now = Instant::now();
    let mut st = ctx.store.lock_at(now);
    if put {
        let body = req.json_body()?;
        let accepted = path(&body, &["properties", "accepted"])
            .and_then(Value::as_bool)
            .ok_or_else(|| ArmError::required("properties.accepted"))?;
        if !st.may_accept_terms {
            return Err(ArmError::authorization_failed(
                &req.caller.client_id,
                action_of("marketplaceAgreements.create"),
                &scope,
            ));
        }
        st.agreements.insert(key.clone(), Agreement { accepted, retrieved: timestamp(SystemTime::now()) });
    }
    let agreement = st.agreements.get(&key).cloned();
    let (accepted, retrieved) =
        agreement.map_or_else(|| (false, timestamp(SystemTime::now())), |a| (a.accepted, a.retrieved));
    Ok(respond(
        StatusCode::OK,
        Some(json!({
            "id": scope,
            "name": known.name,
            "type": "Microsoft.MarketplaceOrdering/offertypes",
            "properties": {
                "publisher": known.publisher,
                "product": known.product,
                "plan": known.name,
                "licenseTextLink": format!("https://mpcprodsa.blob.core.windows.net/legalterms/3E5ED_legalterms_{}.txt", known.product.to_ascii_uppercase()),
                "privacyPolicyLink": "https://gardenlinux.io/privacy",
                "marketplaceTermsLink": "https://mpcprodsa.blob.core.windows.net/marketplaceterms/3EDEF_marketplaceterms_VIRTUALMACHINE.txt",
                "retrieveDatetime": retrieved,
                "signature": SIGNATURE,
                "accepted": accepted,
            },
        })),
        &[],
    ))
}
