//! The rules of `src/lib.rs` applied to the checkout.

use std::fs;
use std::path::{Path, PathBuf};

use machine_driver_tidy::{Offence, failure_decisions, template_files, wire_types};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The providers: every folder of `providers/`.
fn providers() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(root().join("providers"))
        .expect("providers/")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    assert!(out.len() >= 5, "found {} providers", out.len());
    out
}

/// Whether `path` is a test-only module (`#[cfg(test)] mod name;` in its crate's lib.rs).
fn test_only(path: &Path) -> bool {
    let (Some(dir), Some(stem)) = (path.parent(), path.file_stem().and_then(|s| s.to_str())) else { return false };
    let Ok(lib) = fs::read_to_string(dir.join("lib.rs")) else { return false };
    let lines: Vec<&str> = lib.lines().map(str::trim).collect();
    lines.windows(2).any(|w| w[0] == "#[cfg(test)]" && w[1] == format!("mod {stem};"))
}

fn report(rule: &str, found: Vec<(PathBuf, Vec<Offence>)>) {
    let found: Vec<String> = found
        .into_iter()
        .flat_map(|(path, offences)| {
            let shown = path.strip_prefix(root()).unwrap_or(&path).display().to_string();
            offences.into_iter().map(move |o| format!("{shown}:{}: {}", o.line, o.text))
        })
        .collect();
    assert!(found.is_empty(), "{rule} (tests/tidy/README.md):\n{}", found.join("\n"));
}

#[test]
fn no_wire_types_in_the_kit_or_a_provider() {
    let mut dirs = vec![root().join("driver-api/src")];
    dirs.extend(providers().into_iter().map(|p| p.join("src")));
    let found = dirs
        .iter()
        .flat_map(|d| rust_files(d))
        .map(|f| {
            let offences = wire_types(&fs::read_to_string(&f).expect("readable"));
            (f, offences)
        })
        .collect();
    report("wire_types", found);
}

#[test]
fn failure_decisions_live_in_errors_rs() {
    let found = providers()
        .iter()
        .flat_map(|p| rust_files(&p.join("src")))
        .filter(|f| f.file_name().is_some_and(|n| n != "errors.rs") && !test_only(f))
        .map(|f| {
            let offences = failure_decisions(&fs::read_to_string(&f).expect("readable"));
            (f, offences)
        })
        .collect();
    report("failure_decisions", found);
}

#[test]
fn every_provider_has_the_template_files() {
    let missing: Vec<String> = providers()
        .iter()
        .flat_map(|p| template_files(|f| p.join(f).is_file()).into_iter().map(move |f| format!("{}/{f}", p.display())))
        .collect();
    assert!(missing.is_empty(), "template_files (tests/tidy/README.md): missing {missing:?}");
}
