//! The one reader of ARM's paged lists (`{"value": [...], "nextLink": ...}`):
//! every page, `nextLink` followed with the kit's [`PageTokens`] (a page cap,
//! and a `nextLink` handed out twice stops the read) and on ARM's host only
//! (the token goes nowhere else), a missing resource group read as an empty
//! list. Used by the coalesced status reads ([`crate::lookup`]) and
//! ListMachines ([`crate::list`]).

use machine_driver_api::{CallFailure, DriverError, PageTokens};

use crate::clients::Api;

/// Most pages one list follows: a guard against a nextLink loop, far beyond
/// any resource group (10,000 VMs are 10 pages of a generic resource list at
/// `$top=1000`, 200 of a Compute VM list).
const MAX_PAGES: usize = 5000;

/// One page of an ARM list.
#[derive(serde::Deserialize)]
#[serde(bound(deserialize = "T: serde::de::DeserializeOwned"))]
pub(crate) struct Page<T> {
    #[serde(default = "Vec::new")]
    pub(crate) value: Vec<T>,
    #[serde(rename = "nextLink", default)]
    pub(crate) next_link: Option<String>,
}

/// Every item of the ARM list at `url` (every page, `nextLink` followed);
/// none when the resource group does not exist. `service` and `operation`
/// name the list in errors and in the call counters.
pub(crate) async fn list_all<T: serde::de::DeserializeOwned>(
    api: &Api<'_>,
    service: &'static str,
    operation: &'static str,
    mut url: azure_core::Url,
) -> Result<Vec<T>, DriverError> {
    let mut items = Vec::new();
    let mut pages = PageTokens::with_cap(operation, MAX_PAGES);
    loop {
        let page = match api.get_raw(service, operation, &url).await {
            Ok(p) => p,
            // The group does not exist: nothing in it. A later page that is not
            // found leaves the list incomplete: an error, never a shorter list.
            Err(CallFailure::Cloud(_, f)) if f.is_not_found() && pages.pages() == 0 => return Ok(items),
            Err(e) => return Err(e.into()),
        };
        let page: Page<T> = serde_json::from_slice(&page.body)
            .map_err(|_| DriverError::internal(format!("{service} {operation} answered a body that is not a list")))?;
        items.extend(page.value);
        let Some(next) = pages.next(page.next_link.as_deref())? else { return Ok(items) };
        url = azure_core::Url::parse(&next).map_err(|_| {
            DriverError::internal(format!("{service} {operation} answered a nextLink that is not a URL"))
        })?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_read_their_items_and_next_link() {
        let page: Page<serde_json::Value> =
            serde_json::from_str(r#"{"value": [{"name": "a"}], "nextLink": "https://x/next"}"#).expect("page");
        assert_eq!(page.value.len(), 1);
        assert_eq!(page.next_link.as_deref(), Some("https://x/next"));
        let last: Page<serde_json::Value> = serde_json::from_str(r#"{}"#).expect("empty page");
        assert!(last.value.is_empty() && last.next_link.is_none());
    }
}
