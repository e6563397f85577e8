//! ARM list paging: `{"value": [...], "nextLink": "<absolute URL with $skiptoken>"}`.
//! Lists are sorted by a key (lowercase name or id); the skip token is the last key returned.

use serde_json::{Value, json};

use crate::wire::encode;

/// One page of `items` (sorted by their key) after `skiptoken`, with the `nextLink` to the next page.
///
/// `link_base` is the absolute URL of the list without query; `extra` are the query
/// parameters to carry into the next link (e.g. `$filter`), `api_version` is added.
pub(crate) fn page(
    items: Vec<(String, Value)>,
    skiptoken: Option<&str>,
    size: usize,
    link_base: &str,
    extra: &[(&str, &str)],
    api_version: &str,
) -> Value {
    let size = size.max(1);
    let mut rest = items.into_iter().filter(|(key, _)| skiptoken.is_none_or(|after| key.as_str() > after)).peekable();
    let mut value = Vec::new();
    let mut last = None;
    while value.len() < size {
        let Some((key, item)) = rest.next() else { break };
        value.push(item);
        last = Some(key);
    }
    let mut body = json!({ "value": value });
    if rest.peek().is_some()
        && let Some(last) = last
    {
        let mut query = format!("api-version={}", encode(api_version));
        for (name, v) in extra {
            query.push_str(&format!("&{}={}", encode(name), encode(v)));
        }
        query.push_str(&format!("&%24skiptoken={}", encode(&last)));
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
        let first = page(items.clone(), None, 2, "http://h/x", &[("$filter", "tagName eq 'k'")], "1");
        assert_eq!(first["value"], json!(["a", "b"]));
        let link = first["nextLink"].as_str().expect("next");
        assert!(link.starts_with("http://h/x?api-version=1&%24filter=tagName%20eq%20%27k%27&%24skiptoken=b"), "{link}");
        let second = page(items, Some("b"), 2, "http://h/x", &[], "1");
        assert_eq!(second["value"], json!(["c"]));
        assert!(second.get("nextLink").is_none());
    }
}
