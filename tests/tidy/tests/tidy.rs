//! The rules of `src/lib.rs` applied to the checkout.

use std::fs;
use std::path::{Path, PathBuf};

use machine_driver_tidy::{
    CLOUD_NAMING_DEBT, Offence, cloud_names, failure_decisions, status_built, template_files, wire_types,
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    files(dir, &["rs"], |_| false)
}

/// Every file under `dir` with one of `extensions`, not descending into
/// hidden folders, `target` folders or those `skip` names.
fn files(dir: &Path, extensions: &[&str], skip: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" && !skip(&path) {
                    todo.push(path);
                }
            } else if path.extension().and_then(|e| e.to_str()).is_some_and(|e| extensions.contains(&e)) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `path` relative to the checkout, with `/` separators.
fn relative(path: &Path) -> String {
    let rel = path.strip_prefix(root()).unwrap_or(path);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
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

#[test]
fn only_server_status_rs_builds_a_status() {
    let mut dirs = vec![root().join("server/src"), root().join("driver-api/src"), root().join("bootstrap/src")];
    for p in providers() {
        dirs.extend([p.join("src"), p.join("bin")]);
    }
    let found = dirs
        .iter()
        .flat_map(|d| rust_files(d))
        .filter(|f| relative(f) != "server/src/status.rs" && !test_only(f))
        .map(|f| {
            let offences = status_built(&fs::read_to_string(&f).expect("readable"));
            (f, offences)
        })
        .collect();
    report("status_built", found);
}

/// The files `cloud_names` reads: Rust, Go, shell and Python sources outside
/// `providers/` and `tests/fake-*/` (generated `*.pb.go` excepted: their
/// comments are `proto/`'s).
fn shared_sources() -> Vec<PathBuf> {
    let skip = |dir: &Path| {
        let rel = relative(dir);
        rel == "providers" || rel.strip_prefix("tests/").is_some_and(|t| t.starts_with("fake-"))
    };
    files(&root(), &["rs", "go", "sh", "py"], skip)
        .into_iter()
        .filter(|f| !f.to_string_lossy().ends_with(".pb.go"))
        .collect()
}

#[test]
fn nothing_shared_names_a_cloud_beyond_the_debt_list() {
    let sources = shared_sources();
    let debt: Vec<&str> = CLOUD_NAMING_DEBT.iter().map(|(p, _)| *p).collect();
    let found = sources
        .iter()
        .filter(|f| !debt.contains(&relative(f).as_str()))
        .map(|f| {
            let offences = cloud_names(&fs::read_to_string(f).expect("readable"));
            (f.clone(), offences)
        })
        .collect();
    report("cloud_names", found);
    let paid: Vec<&str> = debt
        .iter()
        .copied()
        .filter(|d| {
            !sources
                .iter()
                .any(|f| relative(f) == *d && !cloud_names(&fs::read_to_string(f).expect("readable")).is_empty())
        })
        .collect();
    assert!(
        paid.is_empty(),
        "cloud_names: no longer name a cloud, take them off CLOUD_NAMING_DEBT and ARCHITECTURE.md: {paid:?}"
    );
}

#[test]
fn architecture_md_lists_the_cloud_naming_debt() {
    let doc = fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let intro = "Files outside `providers/` and `tests/fake-*/` that name a cloud";
    let start = doc.find(intro).unwrap_or_else(|| panic!("ARCHITECTURE.md has no paragraph starting {intro:?}"));
    let listed: Vec<&str> = doc[start..]
        .lines()
        .skip_while(|l| !l.starts_with("- `"))
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.strip_prefix("- `").and_then(|l| l.split('`').next()))
        .collect();
    let mut want: Vec<&str> = CLOUD_NAMING_DEBT.iter().map(|(p, _)| *p).collect();
    let mut got = listed.clone();
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, want, "ARCHITECTURE.md's list of files that name a cloud is CLOUD_NAMING_DEBT");
}
