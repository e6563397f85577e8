//! `MaxResults` / `NextToken` pagination.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::errors::Ec2Error;
use crate::query::Params;

/// One page of results and the token of the next one.
#[derive(Debug)]
pub(crate) struct Page<T> {
    pub(crate) items: Vec<T>,
    pub(crate) next_token: Option<String>,
}

/// Cuts `items` to the page selected by `MaxResults` (bounded by `min..=1000`) and `NextToken`.
/// Tokens are bound to the operation (`scope`); a foreign or garbled token is refused.
pub(crate) fn paginate<T>(items: Vec<T>, params: &Params, scope: &str, min: i64) -> Result<Page<T>, Ec2Error> {
    let max = params.int("MaxResults")?;
    if let Some(max) = max
        && !(min..=1000).contains(&max)
    {
        return Err(Ec2Error::client(
            "InvalidParameterValue",
            format!("Value ( {max} ) for parameter maxResults is invalid. Expecting a value between {min} and 1000."),
        ));
    }
    let start = match params.get("NextToken").filter(|t| !t.is_empty()) {
        None => 0,
        Some(token) => decode(token, scope)
            .ok_or_else(|| Ec2Error::client("InvalidParameterValue", "Unable to parse pagination token"))?,
    };
    let total = items.len();
    let Some(max) = max else {
        return Ok(Page { items: items.into_iter().skip(start).collect(), next_token: None });
    };
    let end = start.saturating_add(usize::try_from(max).unwrap_or(usize::MAX)).min(total);
    let next_token = (end < total).then(|| encode(end, scope));
    Ok(Page { items: items.into_iter().skip(start).take(end.saturating_sub(start)).collect(), next_token })
}

fn encode(offset: usize, scope: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{scope}:{offset}"))
}

fn decode(token: &str, scope: &str) -> Option<usize> {
    let text = String::from_utf8(URL_SAFE_NO_PAD.decode(token).ok()?).ok()?;
    text.strip_prefix(scope)?.strip_prefix(':')?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_through_everything_once() {
        let items: Vec<u32> = (0..12).collect();
        let mut seen = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut pairs = vec![("MaxResults".to_owned(), "5".to_owned())];
            if let Some(t) = &token {
                pairs.push(("NextToken".to_owned(), t.clone()));
            }
            let page = paginate(items.clone(), &Params::from_pairs(pairs), "di", 5).expect("page");
            assert!(page.items.len() <= 5);
            seen.extend(page.items);
            token = page.next_token;
            if token.is_none() {
                break;
            }
        }
        assert_eq!(seen, items);
    }

    #[test]
    fn bounds_and_bad_tokens() {
        assert!(paginate(vec![1], &Params::from_pairs([("MaxResults", "4")]), "di", 5).is_err());
        assert!(paginate(vec![1], &Params::from_pairs([("MaxResults", "1001")]), "di", 5).is_err());
        assert!(paginate(vec![1], &Params::from_pairs([("NextToken", "garbage!")]), "di", 5).is_err());
        let foreign = encode(1, "dni");
        assert!(paginate(vec![1], &Params::from_pairs([("NextToken", foreign.as_str())]), "di", 5).is_err());
        let all = paginate(vec![1, 2], &Params::default(), "di", 5).expect("page");
        assert_eq!((all.items, all.next_token), (vec![1, 2], None));
    }
}
