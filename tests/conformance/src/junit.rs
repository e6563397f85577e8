//! JUnit XML output (`--junit FILE`) for CI systems.

use std::fmt::Write as _;

use crate::outcome::{Outcome, ScenarioReport};
use crate::report::Summary;

/// Renders `reports` as one JUnit `<testsuite>` named `suite`.
pub fn junit_xml(suite: &str, reports: &[ScenarioReport]) -> String {
    let summary = Summary::of(reports);
    let total_secs: f64 = reports.iter().map(|r| r.duration.as_secs_f64()).sum();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites><testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3}\">",
        escape(suite),
        reports.len(),
        summary.failed,
        summary.skipped,
        total_secs
    );
    for r in reports {
        let _ = write!(
            xml,
            "  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            escape(suite),
            escape(&r.name),
            r.duration.as_secs_f64()
        );
        match &r.outcome {
            Outcome::Pass => xml.push_str("/>\n"),
            Outcome::Fail(why) => {
                let _ = writeln!(xml, "><failure message=\"{0}\">{0}</failure></testcase>", escape(why));
            }
            Outcome::Skip(why) => {
                let _ = writeln!(xml, "><skipped message=\"{}\"/></testcase>", escape(why));
            }
        }
    }
    xml.push_str("</testsuite></testsuites>\n");
    xml
}

/// Escapes text for XML attributes and content; drops characters XML 1.0 cannot carry.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            c if (c as u32) < 0x20 && c != '\t' && c != '\r' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn renders_counts_failures_and_skips_escaped() {
        let reports = vec![
            ScenarioReport {
                name: "identity/probe".into(),
                outcome: Outcome::Pass,
                duration: Duration::from_millis(5),
            },
            ScenarioReport {
                name: "bad-input/x".into(),
                outcome: Outcome::Fail("code <UNKNOWN> & \"q\"".into()),
                duration: Duration::from_millis(7),
            },
            ScenarioReport { name: "share".into(), outcome: Outcome::Skip("no cap".into()), duration: Duration::ZERO },
        ];
        let xml = junit_xml("aws", &reports);
        assert!(xml.contains("tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\""), "{xml}");
        assert!(xml.contains("<testcase classname=\"aws\" name=\"identity/probe\" time=\"0.005\"/>"), "{xml}");
        assert!(xml.contains("<failure message=\"code &lt;UNKNOWN&gt; &amp; &quot;q&quot;\">"), "{xml}");
        assert!(xml.contains("<skipped message=\"no cap\"/>"), "{xml}");
        assert!(!xml.contains("<UNKNOWN>"), "{xml}");
        assert!(xml.trim_end().ends_with("</testsuites>"));
    }

    #[test]
    fn escape_drops_control_characters() {
        assert_eq!(escape("a\u{1}b\nc"), "ab&#10;c");
    }
}
