//! ARM list paging: `{"value": [...], "nextLink": "<absolute URL with $skiptoken>"}`.
//! Lists are sorted by a key (lowercase name or id); the skip token is the last key returned.
//!
//! Only the items of the page asked for are rendered: a list of 10,000 VMs
//! read 50 a page renders 50 VMs per call, not 10,000.

use serde_json::{Value, json};

use fake_cloud_support::wire::encode_component;

/// One page of `items` (sorted here by their key) after `skiptoken`, each
/// item of the page rendered by `render`, with the `nextLink` to the next page.
///
/// `link_base` is the absolute URL of the list without query; `extra` are the query
/// parameters to carry into the next link (e.g. `$filter`), `api_version` is added.
pub(crate) fn page<T>(
    mut items: Vec<(String, T)>,
    skiptoken: Option<&str>,
    size: usize,
    link_base: &str,
    extra: &[(&str, &str)],
    api_version: &str,
    mut render: impl FnMut(T) -> Value,
) -> Value {
    let size = size.max(1);
    items.sort_by(|a, b| a.0.cmp(&b.0));
    let start = skiptoken.map_or(0, |after| items.partition_point(|(key, _)| key.as_str() <= after));
    let more = items.len() > start + size;
    let mut value = Vec::new();
    let mut last = None;
    for (key, item) in items.into_iter().skip(start).take(size) {
        value.push(render(item));
        last = Some(key);
    }
    let mut body = json!({ "value": value });
    if more && let Some(last) = last {
        let mut query = format!("api-version={}", encode_component(api_version));
        for (name, v) in extra {
            query.push_str(&format!("&{}={}", encode_component(name), encode_component(v)));
        }
        query.push_str(&format!("&%24skiptoken={}", encode_component(&last)));
        body["nextLink"] = json!(format!("{link_base}?{query}"));
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_the_skiptoken() {
        let items: Vec<(String, Value)> = ["a", "b", "c"].iter().map(|k| ((*k).to_owned(), json!(k))).collect();
        let first = page(items.clone(), None, 2, "http://h/x", &[("$filter", "tagName eq 'k'")], "1", |v| v);
        assert_eq!(first["value"], json!(["a", "b"]));
        let link = first["nextLink"].as_str().expect("next");
        assert!(link.starts_with("http://h/x?api-version=1&%24filter=tagName%20eq%20%27k%27&%24skiptoken=b"), "{link}");
        let second = page(items, Some("b"), 2, "http://h/x", &[], "1", |v| v);
        assert_eq!(second["value"], json!(["c"]));
        assert!(second.get("nextLink").is_none());
    }

    #[test]
    fn only_the_page_asked_for_is_rendered_and_pages_are_the_same_as_rendering_all() {
        // Unsorted input: the page sorts by key.
        let keys: Vec<String> = (0..25).rev().map(|i| format!("k{i:02}")).collect();
        let mut rendered = 0;
        let mut token: Option<String> = None;
        let mut seen = Vec::new();
        loop {
            let items: Vec<(String, usize)> = keys.iter().map(|k| (k.clone(), k[1..].parse().unwrap_or(0))).collect();
            let body = page(items, token.as_deref(), 10, "http://h/x", &[], "1", |n| {
                rendered += 1;
                json!(n)
            });
            let values = body["value"].as_array().expect("values").clone();
            assert!(values.len() <= 10);
            seen.extend(values.into_iter().map(|v| v.as_u64().unwrap_or(999)));
            match body.get("nextLink").and_then(Value::as_str) {
                Some(link) => token = Some(link.rsplit("skiptoken=").next().unwrap_or("").to_owned()),
                None => break,
            }
        }
        assert_eq!(rendered, 25, "every item rendered once over all pages");
        assert_eq!(seen, (0..25).collect::<Vec<u64>>());
        // A token between keys, and one past the end.
        let items: Vec<(String, u8)> = vec![("b".into(), 2), ("d".into(), 4)];
        assert_eq!(page(items.clone(), Some("c"), 5, "h", &[], "1", |n| json!(n))["value"], json!([4]));
        assert_eq!(page(items, Some("z"), 5, "h", &[], "1", |n| json!(n))["value"], json!([]));
    }
}
