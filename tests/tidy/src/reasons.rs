//! `literal_reasons`: no call site spells a driver error's reason as a string
//! literal. A reason the kit, the server or more than one provider answers is
//! a constant of `machine_driver_api::reasons`; a reason one provider alone
//! answers is a constant of that provider's `errors.rs` (issue 31's reason
//! catalogue). The rule reads the reason argument of the calls that take one:
//! `DriverError::new(kind, reason, ..)`, `DriverError::unavailable(reason, ..)`,
//! `AbsentVm::unavailable(reason, ..)` (`.unavailable(`), GCP's
//! `.explained(reason, ..)`, and a `reason: "..."` field (AWS's `Problem`).

use crate::Offence;

/// The calls whose first argument is a reason.
const FIRST_ARGUMENT: [&str; 3] = ["DriverError::unavailable(", ".unavailable(", ".explained("];

/// The call whose second argument is a reason.
const SECOND_ARGUMENT: &str = "DriverError::new(";

/// The code of `source` with comments blanked (line comments and doc
/// comments; block comments are not used in this project), and nothing from
/// the first `#[cfg(test)]` on (test modules close each file): one string, so
/// that a call spread over lines reads as one.
fn code(source: &str) -> String {
    let mut out = String::new();
    for line in source.lines() {
        if line.trim() == "#[cfg(test)]" {
            break;
        }
        out.push_str(strip_comment(line));
        out.push('\n');
    }
    out
}

/// `line` up to a `//` that is not inside a string literal.
fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if in_string => i += 1,
            b'"' => in_string = !in_string,
            b'/' if !in_string && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
        i += 1;
    }
    line
}

/// The text after the first top-level comma of `args` (the second
/// argument on), `None` when the call closes first.
fn after_first_argument(args: &str) -> Option<&str> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in args.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => return None,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => return Some(&args[i + 1..]),
            _ => {}
        }
    }
    None
}

/// The lines of `source` where a reason argument is a string literal.
pub fn literal_reasons(source: &str) -> Vec<Offence> {
    let code = code(source);
    let mut at: Vec<usize> = Vec::new();
    let mut check = |rest: &str| {
        if rest.trim_start().starts_with('"') {
            let literal = code.len() - rest.trim_start().len();
            at.push(literal);
        }
    };
    for call in FIRST_ARGUMENT {
        for (i, _) in code.match_indices(call) {
            check(&code[i + call.len()..]);
        }
    }
    for (i, _) in code.match_indices(SECOND_ARGUMENT) {
        if let Some(rest) = after_first_argument(&code[i + SECOND_ARGUMENT.len()..]) {
            check(rest);
        }
    }
    for (i, _) in code.match_indices("reason:") {
        let word_start = i == 0 || !code.as_bytes()[i - 1].is_ascii_alphanumeric() && code.as_bytes()[i - 1] != b'_';
        if word_start {
            check(&code[i + "reason:".len()..]);
        }
    }
    at.sort_unstable();
    at.dedup();
    let lines: Vec<&str> = source.lines().collect();
    at.into_iter()
        .map(|offset| {
            let line = code[..offset].matches('\n').count();
            Offence { line: line + 1, text: lines.get(line).map(|l| l.trim()).unwrap_or_default().into() }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::{Path, PathBuf};

    use super::*;

    #[test]
    fn literal_reasons_are_found_in_every_call_form() {
        let source = "fn a() -> DriverError {\n    DriverError::new(\n        ErrorKind::Internal,\n        \"OOPS\",\n        format!(\"x, {y}\"),\n    )\n}\n";
        assert_eq!(literal_reasons(source), vec![Offence { line: 4, text: "\"OOPS\",".into() }]);
        assert_eq!(literal_reasons("DriverError::unavailable(\"BUSY\", m, RETRY_SOON)\n").len(), 1);
        assert_eq!(literal_reasons("AbsentVm::new(m, w).unavailable(\"GONE\", m)\n").len(), 1);
        assert_eq!(literal_reasons("f.explained(\n    \"WHY\",\n    m)\n")[0].line, 2);
        assert_eq!(literal_reasons("Problem::Transport { reason: \"TIMEOUT\", what: \"x\" }\n").len(), 1);
        assert_eq!(
            literal_reasons("DriverError::new(kind_of(\"a\", b), \"R\", m)\n").len(),
            1,
            "a comma inside the first argument does not end it"
        );
    }

    #[test]
    fn named_reasons_comments_and_tests_pass() {
        assert!(
            literal_reasons("DriverError::new(ErrorKind::Internal, reasons::INTERNAL, \"a message\")\n").is_empty()
        );
        assert!(literal_reasons("DriverError::unavailable(crate::errors::BUSY, \"m\", RETRY_SOON)\n").is_empty());
        assert!(literal_reasons("// DriverError::unavailable(\"BUSY\", m, d)\nlet r = e.reason();\n").is_empty());
        assert!(literal_reasons("let u = \"http://x\"; // DriverError::new(k, \"R\", m)\n").is_empty());
        assert!(
            literal_reasons("fn a() {}\n#[cfg(test)]\nmod tests { DriverError::unavailable(\"X\", m, d); }\n")
                .is_empty()
        );
        assert!(literal_reasons("let my_reason: &str = \"X\";\n").is_empty(), "whole words only");
    }

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// Every `.rs` file under `dir`.
    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn no_literal_reason_in_the_kit_the_server_or_a_provider() {
        let mut files = Vec::new();
        rust_files(&root().join("driver-api/src"), &mut files);
        rust_files(&root().join("server/src"), &mut files);
        for provider in fs::read_dir(root().join("providers")).expect("providers/") {
            let src = provider.expect("a directory entry").path().join("src");
            if src.is_dir() {
                rust_files(&src, &mut files);
            }
        }
        files.sort();
        assert!(files.len() > 50, "found {} files", files.len());
        let mut found = Vec::new();
        for f in files {
            let shown = f.strip_prefix(root()).unwrap_or(&f).display().to_string();
            for o in literal_reasons(&fs::read_to_string(&f).expect("readable")) {
                found.push(format!("{shown}:{}: {}", o.line, o.text));
            }
        }
        assert!(found.is_empty(), "literal_reasons (tests/tidy/README.md):\n{}", found.join("\n"));
    }
}
