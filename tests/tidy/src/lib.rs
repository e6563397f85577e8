//! The layout rules of `ARCHITECTURE.md` that the compiler does not check,
//! each a function over a file's text answering the offending lines, so
//! that a unit test can break each rule on purpose. `tests/tidy.rs` applies
//! them to the checkout.

pub mod reasons;

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

/// The associated functions that build a `tonic::Status` (tonic's and
/// `tonic_types::StatusExt`'s).
const STATUS_CONSTRUCTORS: &[&str] = &[
    "new",
    "with_details",
    "with_metadata",
    "with_details_and_metadata",
    "with_error_details",
    "with_error_details_vec",
    "with_error_details_and_metadata",
    "with_error_details_vec_and_metadata",
    "from_error",
    "from",
    "ok",
    "cancelled",
    "unknown",
    "invalid_argument",
    "deadline_exceeded",
    "not_found",
    "already_exists",
    "permission_denied",
    "resource_exhausted",
    "failed_precondition",
    "aborted",
    "out_of_range",
    "unimplemented",
    "internal",
    "unavailable",
    "data_loss",
    "unauthenticated",
];

/// `status_built`: lines of driver code (the server, the kit, a provider)
/// outside `server/src/status.rs` that build a `tonic::Status`
/// (`Status::new`, `Status::with_details`, `Status::invalid_argument`, …):
/// every answer's status is built by the one mapping from `DriverError`.
/// A bare `Status::` counts only in a file that imports tonic's `Status`.
pub fn status_built(source: &str) -> Vec<Offence> {
    let code: String = code_lines(source).map(|(_, code)| code).collect::<Vec<_>>().join(" ");
    let imports_status = code.match_indices("use tonic::").any(|(at, _)| {
        let statement = code[at..].split(';').next().unwrap_or_default();
        statement.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).any(|w| w == "Status")
    });
    offences(source, move |code| {
        let code: String = code.split_whitespace().collect();
        code.match_indices("Status::").any(|(at, _)| {
            let before = &code[..at];
            let after = &code[at + "Status::".len()..];
            let qualified = before.ends_with("tonic::");
            let bare = !before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':');
            let name = after.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next().unwrap_or_default();
            let constructor = STATUS_CONSTRUCTORS.contains(&name) && after[name.len()..].starts_with('(');
            constructor && (qualified || (bare && imports_status))
        })
    })
}

/// The clouds `cloud_names` looks for: the cloud names and the words of
/// their SDKs that do not contain them (`aws-sdk-*`, `azure_*` and the Azure
/// Go SDK contain theirs; `google-cloud-*` is [`cloud_names`]' one phrase).
pub const CLOUD_WORDS: &[&str] = &[
    "aws",
    "gcp",
    "azure",
    "alicloud",
    "openstack",
    "gophercloud",
    "openstacksdk",
    "boto3",
    "botocore",
    "alibabacloud",
    "aliyunsdkcore",
    "aliyunsdkecs",
];

/// Files outside `providers/<cloud>/` and `tests/fake-*/` that name a cloud
/// today, each with the reason (ARCHITECTURE.md, "Adding a cloud", lists the
/// same files as debt of issue 31). `tests/tidy.rs` fails on a file that
/// names a cloud and is not here, and on a file here that no longer does.
pub const CLOUD_NAMING_DEBT: &[(&str, &str)] = &[
    ("tests/tidy/src/lib.rs", "the rule's own word list and unit tests"),
    ("tests/tidy/src/reasons.rs", "the reasons rule's table of provider files"),
    // Shared tools that list clouds: a new cloud needs a line in each.
    ("scripts/canary-check.py", "the secret keys of each cloud's secret"),
    ("scripts/grpcurl-smoke.sh", "smoke-tests one driver, machine-driver-aws"),
    ("scripts/test.sh", "runs the Go providers' tests (OpenStack, Azure) by name"),
    ("bench/src/direct.rs", "the AWS and GCP direct-call baselines (their SDKs)"),
    ("bench/src/targets.rs", "per-cloud call bounds"),
    ("bench/src/workload.rs", "AWS subnet spread and per-cloud fake admin setup"),
    ("bench/src/report.rs", "unit tests name a cloud as the report's provider"),
    ("fuzz/fuzz_targets/fake_requests.rs", "one router per fake"),
    ("fuzz/fuzz_targets/provider_secret.rs", "links the SDK-free providers' secret checks"),
    ("fuzz/fuzz_targets/provider_spec.rs", "links the SDK-free providers' spec checks"),
    ("bootstrap/src/config.rs", "the user-data size limit of each cloud"),
    ("driver-api/src/secret_keys.rs", "unit tests use two clouds' secret keys as examples"),
    ("server/src/convert.rs", "unit tests use an AWS providerID as example"),
    ("server/src/telemetry.rs", "the azure_core log target a filter must keep quiet"),
    // The adapter and its Gardener pod test.
    ("adapter/cmd/gardener-pod-test/run.go", "Gardener's provider names; workload identity tested for AWS only"),
    ("adapter/cmd/gardener-pod-test/render.go", "cites the Gardener extension (AWS) it follows"),
    ("adapter/cmd/gardener-pod-test/render_test.go", "renders AWS and GCP deployments"),
    ("deploy/gardener-pod-test.sh", "AWS runs with workload identity"),
    ("adapter/cmd/machine-controller/hotupdate_test.go", "AWS providerIDs as test data"),
    ("adapter/cmd/machine-controller/reclaim_test.go", "AWS providerIDs as test data"),
    ("adapter/driver/convert.go", "cites the AWS placement annotation MCM carries"),
    ("adapter/driver/convert_test.go", "AWS machine, class and volume as test data"),
    ("adapter/hotupdate/hotupdate_test.go", "AWS providerIDs as test data"),
    ("adapter/mcmharness/harness.go", "cites the OpenStack Go provider's client-go"),
    ("adapter/metricsmerge/metricsmerge_test.go", "AWS metrics as test data"),
    ("adapter/reclaim/grpc_test.go", "AWS providerIDs as test data"),
    ("adapter/reclaim/reclaim_test.go", "AWS providerIDs as test data"),
    // The Go providers run against the fakes and the control plane.
    ("goproviders/doc.go", "names the two Go providers it runs"),
    ("goproviders/azure_test.go", "runs the Azure Go provider"),
    ("goproviders/openstack_test.go", "runs the OpenStack Go provider"),
    ("goproviders/fake_test.go", "cites OpenStack's port and volume behaviour"),
    ("goproviders/scenarios_test.go", "one row per Go provider"),
    ("controlplane/cluster/cluster_test.go", "renders deploy/overlays/aws"),
    ("controlplane/e2e/fleet_test.go", "Gardener's provider names per cloud"),
    // Comments citing the cloud whose behaviour they describe.
    ("driver-api/src/reasons.rs", "cites the reason AWS answered before the catalogue"),
    ("driver-api/src/coalesce.rs", "cites the AWS measurement behind the batch bar"),
    ("driver-api/src/machine.rs", "cites the AWS placement annotation"),
    ("driver-api/src/name_prefix.rs", "cites GCP's and OpenStack's name filters"),
    ("driver-api/src/ownership.rs", "cites OpenStack's substring match"),
    ("driver-api/src/recent_list.rs", "cites Azure's and OpenStack's list-only reads"),
    ("driver-api/src/spec_mutations.rs", "which specs are SDK-free (fuzzed) and which are not"),
    ("server/src/call.rs", "cites the AWS Go provider's counting"),
    ("server/src/config.rs", "cites the AWS endpoint variable and batch sizes"),
    // The conformance suite.
    ("tests/conformance/src/junit.rs", "unit tests use a cloud as classname"),
    ("tests/conformance/src/settings.rs", "cites each cloud's shape of the conformance inputs"),
    ("tests/conformance/src/scenarios/migration.rs", "cites the Go providers; Azure inventory as test data"),
    ("tests/conformance/src/scenarios/identity.rs", "unit tests of the plugin name"),
    ("tests/conformance/src/scenarios/spot.rs", "OpenStack has no Spot VMs"),
    ("tests/conformance/src/scenarios/cloud_state.rs", "cites Azure's allocation failure"),
    ("tests/conformance/src/scenarios/create.rs", "cites Azure's resource ids"),
    ("tests/conformance/src/scenarios/leak.rs", "cites Azure's NICs and disks"),
];

/// Whether `word` (one run of ASCII letters and digits) names `name` at a
/// word boundary: the whole word, or a camel-case part of it (`AwsSpec`,
/// `newAzureClient`, `GCPProject`; not `laws`, `openstacky`).
fn word_names(word: &str, name: &str) -> bool {
    let b = word.as_bytes();
    // A part starts after a lower-case letter or digit, or where an upper-case
    // run gives way to a capitalised word (`GCPProject`: `GCP`, `Project`).
    let lower = |k: usize| b.get(k).is_some_and(u8::is_ascii_lowercase);
    let boundary = |k: usize| {
        k == 0
            || k == b.len()
            || b[k].is_ascii_digit() != b[k - 1].is_ascii_digit()
            || (b[k].is_ascii_uppercase() && !b[k - 1].is_ascii_uppercase())
            || (b[k].is_ascii_uppercase() && lower(k + 1))
    };
    (0..b.len()).filter(|&i| boundary(i)).any(|i| {
        let j = i + name.len();
        j <= b.len() && word[i..j].eq_ignore_ascii_case(name) && boundary(j)
    })
}

/// `cloud_names`: lines (comments included) that name a cloud or its SDK:
/// a [`CLOUD_WORDS`] word, case-insensitive, as a whole word or camel-case
/// part, or the phrase `google` `cloud` (`google-cloud-compute-v1`,
/// `google.cloud`, `google_cloud_auth`).
pub fn cloud_names(source: &str) -> Vec<Offence> {
    source
        .lines()
        .enumerate()
        .filter(|(_, line)| {
            let words: Vec<&str> = line.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
            words.iter().any(|w| CLOUD_WORDS.iter().any(|name| word_names(w, name)))
                || words.windows(2).any(|w| w[0].eq_ignore_ascii_case("google") && w[1].eq_ignore_ascii_case("cloud"))
        })
        .map(|(i, line)| Offence { line: i + 1, text: line.trim().into() })
        .collect()
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
    #[test]
    fn status_built_outside_status_rs_is_found() {
        let source = "use tonic::{Response, Status};\nfn f() -> Result<Response<()>, Status> {\n    Err(Status::invalid_argument(\"x\"))\n}\n";
        assert_eq!(lines_of(status_built(source)), vec![3], "a built status, not the type in a signature");
        assert_eq!(status_built("let s = tonic::Status::new(Code::Internal, \"x\");\n").len(), 1);
        assert_eq!(status_built("use tonic::Status;\nlet s = Status::with_details(c, m, d);\n").len(), 1);
        assert_eq!(status_built("use tonic::{\n    Request,\n    Status,\n};\nlet s = Status::new(c, m);\n").len(), 1);
        assert_eq!(
            status_built("use tonic::Status;\nlet s = Status :: new(c, m);\n").len(),
            1,
            "spaces do not hide it"
        );
        assert!(status_built("let s = MachineStatus::new(1);\n").is_empty(), "another type named *Status");
        assert!(status_built("let s = Status::new(1);\n").is_empty(), "a Status that is not tonic's");
        assert!(
            status_built("use tonic::Status;\nlet c = Status::code(&s);\n").is_empty(),
            "a method, not a constructor"
        );
        assert!(status_built("use tonic::Status;\n// Status::new is the server's\n#[cfg(test)]\nmod t { fn f() { Status::new(c, m); } }\n").is_empty());
    }

    fn lines_of(offences: Vec<Offence>) -> Vec<usize> {
        offences.into_iter().map(|o| o.line).collect()
    }

    #[test]
    fn cloud_names_are_found_as_words_and_camel_case_parts() {
        for line in [
            "let p = \"aws\";",
            "// as the AWS provider does",
            "use machine_driver_openstack::check_secret;",
            "let s = AzureSpec::default();",
            "func newAlicloudClient() {}",
            "let id = \"gcp:///p/z/vm\";",
            "GCPProject string",
            "import boto3",
            "\"github.com/gophercloud/gophercloud/v2\"",
            "google-cloud-compute-v1 = \"1\"",
            "from google.cloud import compute_v1",
            "let c = azure_core::Error::new();",
            "aws-sdk-ec2",
            "OPENSTACK_AUTH_URL=x",
            "let aws2 = 1;",
        ] {
            assert_eq!(cloud_names(line).len(), 1, "{line}");
        }
        for line in [
            "let laws = 1;",
            "let openstacky = 1;",
            "import \"google.golang.org/grpc\"",
            "// Google's protobuf",
            "let gcpx = 1;",
            "let rawsocket = 1;",
            "let s = \"machine-driver-<cloud>\";",
        ] {
            assert!(cloud_names(line).is_empty(), "{line}");
        }
        assert_eq!(cloud_names("fn a() {}\n// Azure keeps NICs\n").first().map(|o| o.line), Some(2), "comments count");
    }

    #[test]
    fn the_debt_list_names_each_file_once() {
        let mut paths: Vec<&str> = CLOUD_NAMING_DEBT.iter().map(|(p, _)| *p).collect();
        paths.sort_unstable();
        let before = paths.len();
        paths.dedup();
        assert_eq!(paths.len(), before);
        assert!(CLOUD_NAMING_DEBT.iter().all(|(p, reason)| !reason.is_empty() && !p.starts_with("providers/")));
    }
}
