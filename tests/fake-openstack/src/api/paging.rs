//! `limit`/`marker` paging shared by Nova, Neutron, Glance and Cinder lists.

use super::Call;
use fake_cloud_support::wire::encode_component;

/// One page of an ordered list.
#[derive(Debug)]
pub(crate) struct Page<T> {
    /// The items of this page.
    pub(crate) items: Vec<T>,
    /// The marker of the next page (the last id) when the page is full (as the services do,
    /// a full last page still links to an empty next page).
    pub(crate) next_marker: Option<String>,
    /// The effective limit.
    pub(crate) limit: usize,
}

/// Why a page could not be cut.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PageError {
    /// `limit` is not a non-negative number.
    BadLimit(String),
    /// `marker` names no item of the list.
    UnknownMarker(String),
}

/// Cuts the page after `marker` (if given) of at most `limit` items (default and
/// maximum `max`); `id` yields an item's id.
pub(crate) fn page<T>(items: Vec<T>, call: &Call, max: usize, id: impl Fn(&T) -> &str) -> Result<Page<T>, PageError> {
    let limit = match call.param("limit") {
        None | Some("") => max,
        Some(text) => text.parse::<usize>().map_err(|_| PageError::BadLimit(text.to_owned()))?.min(max),
    };
    let start = match call.param("marker") {
        None | Some("") => 0,
        Some(marker) => {
            items
                .iter()
                .position(|item| id(item) == marker)
                .ok_or_else(|| PageError::UnknownMarker(marker.to_owned()))?
                + 1
        }
    };
    let items: Vec<T> = items.into_iter().skip(start).take(limit).collect();
    let full = limit > 0 && items.len() == limit;
    let next_marker = if full { items.last().map(|item| id(item).to_owned()) } else { None };
    Ok(Page { items, next_marker, limit })
}

/// The query string of the next page: every other parameter kept, then `limit` and `marker`.
pub(crate) fn next_query(call: &Call, limit: usize, marker: &str) -> String {
    let mut parts: Vec<String> = call
        .query
        .iter()
        .filter(|(k, _)| k != "limit" && k != "marker")
        .map(|(k, v)| format!("{}={}", encode_component(k), encode_component(v)))
        .collect();
    parts.insert(0, format!("limit={limit}"));
    parts.insert(1, format!("marker={}", encode_component(marker)));
    parts.join("&")
}
