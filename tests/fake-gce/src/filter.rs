//! The `filter` query parameter of `instances.list`, in the subset the driver
//! uses: comparisons `FIELD = VALUE` / `FIELD != VALUE` (value quoted or bare,
//! spaces around the operator optional), optionally in parentheses, joined by
//! `AND` or plain whitespace. Fields: `name`, `status`, `id`, `labels.KEY`.
//! Anything else (`OR`, regex `eq`, unknown fields) is a 400 `invalid`, as an
//! unparseable filter is on the real API.

use std::collections::BTreeMap;

use crate::error::GceError;

/// A field a filter term compares.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Field {
    Name,
    Status,
    Id,
    Label(String),
}

/// One comparison of a filter.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    field: Field,
    negated: bool,
    value: String,
}

/// A parsed filter: all terms must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Filter {
    terms: Vec<Term>,
}

/// The values of an instance a filter can look at.
pub(crate) struct Subject<'a> {
    /// Instance name.
    pub(crate) name: &'a str,
    /// Current status word.
    pub(crate) status: &'a str,
    /// Numeric id as a string.
    pub(crate) id: &'a str,
    /// Labels.
    pub(crate) labels: &'a BTreeMap<String, String>,
}

impl Filter {
    /// Parses a filter; an empty string matches everything.
    pub(crate) fn parse(text: &str) -> Result<Self, GceError> {
        let invalid = || GceError::invalid_field("filter", text, "Invalid list filter expression.");
        let mut terms = Vec::new();
        let mut rest = text.trim();
        while !rest.is_empty() {
            let (term, after) = parse_term(rest).ok_or_else(invalid)?;
            terms.push(term);
            rest = after.trim_start();
            if let Some(after_and) = rest.strip_prefix("AND") {
                if !after_and.starts_with([' ', '(']) {
                    return Err(invalid());
                }
                rest = after_and.trim_start();
                if rest.is_empty() {
                    return Err(invalid());
                }
            }
        }
        Ok(Self { terms })
    }

    /// Whether the subject satisfies every term.
    pub(crate) fn matches(&self, subject: &Subject<'_>) -> bool {
        self.terms.iter().all(|term| {
            let actual = match &term.field {
                Field::Name => Some(subject.name),
                Field::Status => Some(subject.status),
                Field::Id => Some(subject.id),
                Field::Label(key) => subject.labels.get(key).map(String::as_str),
            };
            let equal = actual == Some(term.value.as_str());
            equal != term.negated
        })
    }
}

/// Parses one term (with optional parentheses) off the front of `text`.
fn parse_term(text: &str) -> Option<(Term, &str)> {
    if let Some(inner) = text.strip_prefix('(') {
        let (term, rest) = parse_comparison(inner.trim_start())?;
        let rest = rest.trim_start().strip_prefix(')')?;
        return Some((term, rest));
    }
    parse_comparison(text)
}

/// Parses `FIELD OP VALUE` off the front of `text`.
fn parse_comparison(text: &str) -> Option<(Term, &str)> {
    let field_end = text.find(|c: char| c == '=' || c == '!' || c.is_whitespace())?;
    let field = match &text[..field_end] {
        "name" => Field::Name,
        "status" => Field::Status,
        "id" => Field::Id,
        other => {
            let key = other.strip_prefix("labels.")?;
            let key_ok = !key.is_empty()
                && key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
            if !key_ok {
                return None;
            }
            Field::Label(key.to_string())
        }
    };
    let rest = text[field_end..].trim_start();
    let (negated, rest) =
        if let Some(r) = rest.strip_prefix("!=") { (true, r) } else { (false, rest.strip_prefix('=')?) };
    let rest = rest.trim_start();
    let (value, rest) = if let Some(quoted) = rest.strip_prefix('"') {
        let close = quoted.find('"')?;
        (quoted[..close].to_string(), &quoted[close + 1..])
    } else {
        let end = rest.find(|c: char| c.is_whitespace() || c == ')').unwrap_or(rest.len());
        if end == 0 {
            return None;
        }
        (rest[..end].to_string(), &rest[end..])
    };
    if !(rest.is_empty() || rest.starts_with([' ', ')', '\t'])) {
        return None;
    }
    Some((Term { field, negated, value }, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject_matches(filter: &str, name: &str, labels: &[(&str, &str)]) -> bool {
        let labels: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let f = Filter::parse(filter).expect("filter parses");
        f.matches(&Subject { name, status: "RUNNING", id: "1", labels: &labels })
    }

    #[test]
    fn label_and_name_forms() {
        let l = [("role", "node"), ("cluster", "c-1")];
        assert!(subject_matches("labels.role=node", "vm", &l));
        assert!(subject_matches("labels.role = \"node\"", "vm", &l));
        assert!(subject_matches("labels.role = \"node\" AND labels.cluster = \"c-1\"", "vm", &l));
        assert!(subject_matches("(labels.role = \"node\") (labels.cluster = \"c-1\")", "vm", &l));
        assert!(!subject_matches("labels.role = \"node\" labels.cluster = \"c-2\"", "vm", &l));
        assert!(subject_matches("name = \"vm\"", "vm", &l));
        assert!(!subject_matches("name = vm2", "vm", &l));
        assert!(subject_matches("labels.other != x", "vm", &l));
        assert!(subject_matches("", "vm", &l));
    }

    #[test]
    fn rejects_unknown_syntax() {
        for bad in [
            "labels.a = b OR labels.c = d",
            "name eq vm.*",
            "zone = x",
            "labels.a =",
            "labels.a = \"b",
            "labels.a=b AND",
        ] {
            let err = Filter::parse(bad).expect_err(bad);
            assert_eq!(err.reason, "invalid", "{bad}");
        }
    }
}
