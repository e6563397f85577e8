//! `Filter.N.Name` / `Filter.N.Value.M` filters with EC2's `*` and `?`
//! wildcards, and its backslash escapes (`\*`, `\?`, `\\` match the literal
//! character: "a value of `\*amazon\?\\` searches for the literal string
//! `*amazon?\`", EC2 API reference, Filter).

use crate::errors::Ec2Error;
use crate::model::Tags;
use crate::query::Params;

/// One filter: a name and the values any of which may match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Filter {
    pub(crate) name: String,
    pub(crate) values: Vec<String>,
}

/// Reads the `Filter.N` members of a request.
pub(crate) fn parse_filters(params: &Params) -> Result<Vec<Filter>, Ec2Error> {
    params
        .members("Filter")
        .into_iter()
        .map(|member| {
            let name = member.required("Name").map_err(|_| Ec2Error::missing_parameter("Filter.Name"))?.to_owned();
            Ok(Filter { name, values: member.list("Value") })
        })
        .collect()
}

/// EC2 wildcard match: `*` any run of characters, `?` exactly one.
///
/// Without wildcards it is a plain comparison, and ASCII is matched byte by
/// byte: a DescribeInstances of 200 ids over 10,000 instances makes two
/// million of these, which allocating per call made the fake, not the
/// driver, the bottleneck of the bench's 10,000-machine fleet.
pub(crate) fn glob(pattern: &str, text: &str) -> bool {
    if pattern.contains('\\') {
        return escaped_glob(pattern, text);
    }
    if !pattern.contains(['*', '?']) {
        return pattern == text;
    }
    if pattern.is_ascii() && text.is_ascii() {
        return wildcard(pattern.as_bytes(), text.as_bytes());
    }
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    wildcard(&p, &t)
}

/// One symbol of a pattern: a wildcard or a character to match.
trait Symbol<T> {
    /// `*`: any run of characters.
    fn is_any(&self) -> bool;
    /// `?`: exactly one character.
    fn is_one(&self) -> bool;
    /// Matches the text character `t` literally.
    fn is(&self, t: &T) -> bool;
}

impl<T: Copy + PartialEq + From<u8>> Symbol<T> for T {
    fn is_any(&self) -> bool {
        *self == T::from(b'*')
    }
    fn is_one(&self) -> bool {
        *self == T::from(b'?')
    }
    fn is(&self, t: &T) -> bool {
        self == t
    }
}

/// A symbol of a pattern holding backslash escapes.
#[derive(Clone, Copy, PartialEq)]
enum Escaped {
    Any,
    One,
    Lit(char),
}

impl Symbol<char> for Escaped {
    fn is_any(&self) -> bool {
        *self == Escaped::Any
    }
    fn is_one(&self) -> bool {
        *self == Escaped::One
    }
    fn is(&self, t: &char) -> bool {
        *self == Escaped::Lit(*t)
    }
}

/// [`glob`] of a pattern holding backslashes: `\` takes the next character
/// literally (a trailing one stands for itself).
fn escaped_glob(pattern: &str, text: &str) -> bool {
    let mut p = Vec::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        p.push(match c {
            '\\' => Escaped::Lit(chars.next().unwrap_or('\\')),
            '*' => Escaped::Any,
            '?' => Escaped::One,
            c => Escaped::Lit(c),
        });
    }
    let t: Vec<char> = text.chars().collect();
    wildcard(&p, &t)
}

/// The wildcard match of pattern symbols `p` on text `t` (bytes or chars).
fn wildcard<T, P: Symbol<T>>(p: &[P], t: &[T]) -> bool {
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi].is_one() || p[pi].is(&t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi].is_any() {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(Symbol::is_any)
}

/// Values of the tag filters `tag:KEY`, `tag-key`, `tag-value`; `None` for other names.
pub(crate) fn tag_values(name: &str, tags: &Tags) -> Option<Vec<String>> {
    if let Some(key) = name.strip_prefix("tag:") {
        return Some(tags.get(key).cloned().into_iter().collect());
    }
    match name {
        "tag-key" => Some(tags.keys().cloned().collect()),
        "tag-value" => Some(tags.values().cloned().collect()),
        _ => None,
    }
}

/// Whether a resource passes every filter; `attribute` gives a filter's resource values
/// (`None` = unknown filter name → `InvalidParameterValue`, as EC2 answers).
pub(crate) fn matches_all(
    filters: &[Filter],
    mut attribute: impl FnMut(&str) -> Option<Vec<String>>,
) -> Result<bool, Ec2Error> {
    for filter in filters {
        let values = attribute(&filter.name).ok_or_else(|| {
            Ec2Error::client("InvalidParameterValue", format!("The filter '{}' is invalid", filter.name))
        })?;
        let hit = filter.values.iter().any(|pattern| values.iter().any(|value| glob(pattern, value)));
        if !hit {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(glob("shoot--*", "shoot--dev-worker"));
        assert!(glob("a?c", "abc"));
        assert!(!glob("a?c", "ac"));
        assert!(glob("*", ""));
        assert!(!glob("abc", "abcd"));
        assert!(glob("*-z*", "x-y-z1"));
        assert!(glob("i-0abc", "i-0abc") && !glob("i-0abc", "i-0abd"), "no wildcard: equality");
        assert!(glob("?t?", "été") && glob("é*", "été") && !glob("?", "ét"), "non-ASCII: one char per ?");
    }

    #[test]
    fn backslash_escapes_match_the_literal_character() {
        assert!(glob(r"\*amazon\?\\", r"*amazon?\"), "the API reference's example");
        assert!(!glob(r"\*", "m-1"), "an escaped star is no wildcard");
        assert!(glob(r"\*", "*") && !glob(r"m-\?", "m-1") && glob(r"m-\?", "m-?"));
        assert!(glob(r"a\*b*", "a*bcd") && !glob(r"a\*b*", "axbcd"));
    }

    #[test]
    fn unknown_filter_is_an_error_and_all_must_match() {
        let filters = vec![
            Filter { name: "tag:role".into(), values: vec!["node".into()] },
            Filter { name: "instance-state-name".into(), values: vec!["pending".into(), "running".into()] },
        ];
        let tags: Tags = [("role".to_owned(), "node".to_owned())].into();
        let attr = |name: &str| {
            tag_values(name, &tags).or_else(|| (name == "instance-state-name").then(|| vec!["running".to_owned()]))
        };
        assert_eq!(matches_all(&filters, attr).ok(), Some(true));
        let other: Tags = Tags::new();
        let attr = |name: &str| {
            tag_values(name, &other).or_else(|| (name == "instance-state-name").then(|| vec!["running".to_owned()]))
        };
        assert_eq!(matches_all(&filters, attr).ok(), Some(false));
        let bogus = vec![Filter { name: "bogus".into(), values: vec![] }];
        assert!(matches_all(&bogus, |_| None).is_err());
    }
}
