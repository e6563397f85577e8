//! The `filter` query parameter of `instances.list` and `zoneOperations.list`, in the two forms the real
//! API documents (which "cannot be mixed in one request"):
//!
//! - **Comparisons** (AIP-160 subset): `FIELD = VALUE` / `FIELD != VALUE`
//!   (value double-quoted or bare, spaces around the operator optional),
//!   optionally in parentheses, joined by `AND` or plain whitespace.
//! - **Regular expressions**: `FIELD eq LITERAL` / `FIELD ne LITERAL`, the
//!   literal bare, 'single-' or "double-quoted", interpreted as an RE2 regular
//!   expression (the `regex` crate) that must match the entire field. Either
//!   one un-parenthesized term, or several parenthesized ones side by side
//!   (all must hold). `AND` is not documented for this form and is refused.
//!
//! Fields: `name`, `status`, `id`, `labels.KEY`. Anything else (`OR`, a mix of
//! both forms, an invalid regular expression, unknown fields) is a 400
//! `invalid`, as an unparseable filter is on the real API.

use std::collections::BTreeMap;

use regex::Regex;

use crate::error::GceError;

/// A field a filter term compares.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Field {
    Name,
    Status,
    Id,
    Label(String),
}

/// What a term checks its field against.
#[derive(Debug, Clone)]
enum Test {
    /// `=` / `!=`: exact equality.
    Equals(String),
    /// `eq` / `ne`: an anchored regular expression.
    Matches(Regex),
}

/// One comparison of a filter.
#[derive(Debug, Clone)]
struct Term {
    field: Field,
    negated: bool,
    test: Test,
    parenthesized: bool,
}

/// A parsed filter: all terms must hold.
#[derive(Debug, Clone, Default)]
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
        let mut joined_by_and = false;
        let mut rest = text.trim();
        while !rest.is_empty() {
            let (term, after) = parse_term(rest).ok_or_else(invalid)?;
            terms.push(term);
            rest = after.trim_start();
            if let Some(after_and) = rest.strip_prefix("AND") {
                if !after_and.starts_with([' ', '(']) {
                    return Err(invalid());
                }
                joined_by_and = true;
                rest = after_and.trim_start();
                if rest.is_empty() {
                    return Err(invalid());
                }
            }
        }
        let patterns = terms.iter().filter(|t| matches!(t.test, Test::Matches(_))).count();
        if patterns > 0 {
            let mixed = patterns != terms.len();
            let loose = terms.len() > 1 && !terms.iter().all(|t| t.parenthesized);
            if mixed || loose || joined_by_and {
                return Err(invalid());
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
            let holds = match (&term.test, actual) {
                (_, None) => false,
                (Test::Equals(value), Some(actual)) => actual == value,
                (Test::Matches(re), Some(actual)) => re.is_match(actual),
            };
            holds != term.negated
        })
    }
}

/// Parses one term (with optional parentheses) off the front of `text`.
fn parse_term(text: &str) -> Option<(Term, &str)> {
    if let Some(inner) = text.strip_prefix('(') {
        let (mut term, rest) = parse_comparison(inner.trim_start(), true)?;
        let rest = rest.trim_start().strip_prefix(')')?;
        term.parenthesized = true;
        return Some((term, rest));
    }
    parse_comparison(text, false)
}

/// Parses `FIELD OP VALUE` off the front of `text`.
fn parse_comparison(text: &str, in_parens: bool) -> Option<(Term, &str)> {
    let field_end = text.find(|c: char| c == '=' || c == '!' || c.is_whitespace())?;
    let field = parse_field(&text[..field_end])?;
    let rest = text[field_end..].trim_start();
    let pattern_op = |op: &str| rest.strip_prefix(op).filter(|r| r.starts_with(char::is_whitespace));
    let (negated, test, rest) = if let Some(r) = pattern_op("eq") {
        let (literal, r) = parse_literal(r.trim_start(), in_parens)?;
        (false, Test::Matches(anchored(literal)?), r)
    } else if let Some(r) = pattern_op("ne") {
        let (literal, r) = parse_literal(r.trim_start(), in_parens)?;
        (true, Test::Matches(anchored(literal)?), r)
    } else {
        let (negated, r) =
            if let Some(r) = rest.strip_prefix("!=") { (true, r) } else { (false, rest.strip_prefix('=')?) };
        let (value, r) = parse_value(r.trim_start())?;
        (negated, Test::Equals(value.to_string()), r)
    };
    if !(rest.is_empty() || rest.starts_with([' ', ')', '\t'])) {
        return None;
    }
    Some((Term { field, negated, test, parenthesized: false }, rest))
}

fn parse_field(text: &str) -> Option<Field> {
    Some(match text {
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
    })
}

/// The value of a `=`/`!=` comparison: double-quoted, or bare up to whitespace or `)`.
fn parse_value(text: &str) -> Option<(&str, &str)> {
    if let Some(quoted) = text.strip_prefix('"') {
        let close = quoted.find('"')?;
        return Some((&quoted[..close], &quoted[close + 1..]));
    }
    let end = text.find(|c: char| c.is_whitespace() || c == ')').unwrap_or(text.len());
    (end > 0).then(|| (&text[..end], &text[end..]))
}

/// The literal of an `eq`/`ne` term: quoted (`'...'` or `"..."`), or bare up to
/// whitespace. A bare literal may itself contain parentheses, so inside a
/// parenthesized term its last `)` closes the term unless a `)` follows after
/// whitespace.
fn parse_literal(text: &str, in_parens: bool) -> Option<(&str, &str)> {
    if let Some(quote) = text.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let quoted = &text[1..];
        let close = quoted.find(quote)?;
        return Some((&quoted[..close], &quoted[close + 1..]));
    }
    let end = text.find(char::is_whitespace).unwrap_or(text.len());
    let (run, after) = text.split_at(end);
    if in_parens && !after.trim_start().starts_with(')') {
        let literal = run.strip_suffix(')')?;
        return (!literal.is_empty()).then(|| (literal, &text[literal.len()..]));
    }
    (!run.is_empty()).then_some((run, after))
}

/// `literal` as a regular expression that must match the whole field.
fn anchored(literal: &str) -> Option<Regex> {
    Regex::new(&format!("^(?:{literal})$")).ok()
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
    fn regex_forms_match_the_whole_field() {
        let l = [("role", "node")];
        for form in ["name eq vm-.*", "name eq 'vm-.*'", "name eq \"vm-.*\"", "(name eq vm-.*)"] {
            assert!(subject_matches(form, "vm-1", &l), "{form}");
            assert!(!subject_matches(form, "xvm-1", &l), "{form}: must match from the start");
        }
        assert!(!subject_matches("name eq vm", "vm-1", &l), "a prefix is not a match");
        assert!(!subject_matches("name eq vm-1|x", "vm-12", &l), "alternation is anchored as a whole");
        assert!(subject_matches("name eq \"vm-(?:1|22|3)\"", "vm-22", &l));
        assert!(!subject_matches("name eq \"vm-(?:1|22|3)\"", "vm-2", &l));
        assert!(subject_matches("name ne vm-.*", "other", &l));
        assert!(!subject_matches("name ne vm-.*", "vm-1", &l));
        assert!(subject_matches("(name eq vm-.*) (labels.role eq no.e)", "vm-1", &l));
        assert!(!subject_matches("(name eq vm-.*) (labels.role ne no.e)", "vm-1", &l));
        assert!(!subject_matches("labels.absent eq .*", "vm-1", &l), "a missing label matches no pattern");
        assert!(subject_matches("(name eq (a|vm-1))", "vm-1", &l), "bare literal with parentheses");
        assert!(subject_matches("(name eq (a|vm-1) )", "vm-1", &l));
        assert!(subject_matches("status eq RUN.*", "vm", &l));
        assert!(!subject_matches("name eq VM-1", "vm-1", &l), "case-sensitive");
    }

    #[test]
    fn rejects_unknown_syntax() {
        for bad in [
            "labels.a = b OR labels.c = d",
            "name eq",
            "name eq (unclosed",
            "name eq \"vm-(\"",
            "name eq 'open",
            "name eq vm-1 name eq vm-2",
            "(name eq vm-1) AND (name eq vm-2)",
            "(name eq vm-1) (labels.a = b)",
            "name = vm AND name eq vm",
            "name eqvm",
            "zone = x",
            "zone eq x",
            "labels.a =",
            "labels.a = \"b",
            "labels.a=b AND",
        ] {
            let err = Filter::parse(bad).expect_err(bad);
            assert_eq!(err.reason, "invalid", "{bad}");
        }
    }
}
