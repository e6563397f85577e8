//! The layout rules of `ARCHITECTURE.md` that the compiler does not check,
//! each a function over a file's text answering the offending lines, so
//! that a unit test can break each rule on purpose. `tests/tidy.rs` applies
//! them to the checkout.

/// The files every provider has (paths under `providers/<cloud>/`): the same
/// file name for the same idea in every provider.
pub const TEMPLATE: &[&str] = &[
    "README.md",
    "Cargo.toml",
    "bin/Cargo.toml",
    "examples/conformance.json",
    "examples/machine-class.json",
    "examples/secret.json",
    "src/lib.rs",
    "src/config.rs",
    "src/driver.rs",
    "src/clients.rs",
    "src/credentials.rs",
    "src/errors.rs",
    "src/spec.rs",
    "src/ownership.rs",
    "src/create.rs",
    "src/status.rs",
    "src/delete.rs",
    "src/list.rs",
    "src/lookup.rs",
    "src/volumes.rs",
    "src/update.rs",
    "src/share_image.rs",
    "tests/ownership.rs",
    "tests/update.rs",
    "tests/spec_mutations.rs",
];

/// One offending line: its number (from 1) and its text, trimmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offence {
    /// The line's number, from 1.
    pub line: usize,
    /// The line, trimmed.
    pub text: String,
}

/// The lines of `source` that are code: comments dropped (line comments and
/// doc comments; block comments are not used in this project), and nothing
/// from the first `#[cfg(test)]` on (test modules close each file).
fn code_lines(source: &str) -> impl Iterator<Item = (usize, &str)> {
    source
        .lines()
        .enumerate()
        .take_while(|(_, line)| line.trim() != "#[cfg(test)]")
        .map(|(i, line)| (i + 1, line.split("//").next().unwrap_or_default()))
        .filter(|(_, code)| !code.trim().is_empty())
}

fn offences<'a>(source: &'a str, bad: impl Fn(&str) -> bool + 'a) -> Vec<Offence> {
    code_lines(source)
        .filter(|(_, code)| bad(code))
        .map(|(line, code)| Offence { line, text: code.trim().into() })
        .collect()
}

/// `wire_types`: lines of kit or provider code that name `tonic` or `prost`.
pub fn wire_types(source: &str) -> Vec<Offence> {
    offences(source, |code| {
        code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).any(|word| word == "tonic" || word == "prost")
    })
}

/// `failure_decisions`: lines of provider code outside `errors.rs` that decide
/// on a failure's HTTP status or message text.
pub fn failure_decisions(source: &str) -> Vec<Offence> {
    const DECISIONS: [&str; 5] =
        ["http_status ==", "http_status !=", "matches!(c.http_status", "matches!(f.http_status", ".message.contains("];
    offences(source, |code| {
        let code: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
        DECISIONS.iter().any(|d| code.contains(d)) || code.contains(".message().contains(")
    })
}

/// `template_files`: the [`TEMPLATE`] files `exists` says are missing.
pub fn template_files(exists: impl Fn(&str) -> bool) -> Vec<&'static str> {
    TEMPLATE.iter().copied().filter(|f| !exists(f)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_types_are_found_in_code_not_in_comments_or_tests() {
        let source =
            "use tonic::Status;\n// tonic is the server's\nfn a() {}\n#[cfg(test)]\nmod tests { use prost; }\n";
        assert_eq!(wire_types(source), vec![Offence { line: 1, text: "use tonic::Status;".into() }]);
        assert!(wire_types("let tonically = 1; // prost\n").is_empty(), "whole words only");
        assert_eq!(wire_types("fn f(m: prost::Message) {}\n").len(), 1);
    }

    #[test]
    fn failure_decisions_outside_errors_rs_are_found() {
        let source = "if f.http_status == Some(412) {\n    x\n}\nif f.is_precondition_failed() {}\n";
        assert_eq!(failure_decisions(source).len(), 1);
        assert_eq!(failure_decisions("Err(f) if f.message.contains(\"tags\") => {}\n").len(), 1);
        assert_eq!(failure_decisions("matches!(c.http_status, Some(403 | 404))\n").len(), 1);
        assert!(failure_decisions("#[cfg(test)]\nassert!(e.message().contains(\"x\"));\n").is_empty());
        assert!(
            failure_decisions("let s = a.status == 202;\n").is_empty(),
            "a success status is not a failure decision"
        );
    }

    #[test]
    fn missing_template_files_are_named() {
        assert_eq!(template_files(|f| f != "src/update.rs"), vec!["src/update.rs"]);
        assert!(template_files(|_| true).is_empty());
    }
}
