//! The verdict: one line per check, readable by a person or as JSON.
//!
//! A line is `ok`, `WARN` or `FAIL`. A warning never fails a run: it marks
//! what the host accepts but a person should know about (a value this
//! release does not know, read in the most cautious way).

use serde::Serialize;

/// How a check ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// It passed.
    Pass,
    /// It passed, with warnings.
    Warn,
    /// It failed.
    Fail,
}

/// The outcome of one check.
#[derive(Clone, Debug, Serialize)]
pub struct CheckResult {
    /// The check's name, e.g. `read_after_create`.
    pub check: String,
    /// The resource type, when the check is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    /// Whether it passed (a check with warnings passed).
    pub passed: bool,
    /// What differed, for a failure; what was seen, for a pass.
    pub detail: String,
    /// What the host accepts but a person should know, one per finding.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl CheckResult {
    /// Pass, warn or fail.
    pub fn outcome(&self) -> Outcome {
        match (self.passed, self.warnings.is_empty()) {
            (false, _) => Outcome::Fail,
            (true, true) => Outcome::Pass,
            (true, false) => Outcome::Warn,
        }
    }
}

/// Every check's outcome.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// The plugin's name and version, as announced.
    pub plugin: String,
    /// The checks, in the order they ran.
    pub checks: Vec<CheckResult>,
}

impl Report {
    /// Whether every check passed (warnings allowed).
    pub fn passed(&self) -> bool {
        !self.checks.is_empty() && self.checks.iter().all(|c| c.passed)
    }

    /// The failed checks.
    pub fn failures(&self) -> impl Iterator<Item = &CheckResult> {
        self.checks.iter().filter(|c| !c.passed)
    }

    /// The checks that passed with warnings.
    pub fn warnings(&self) -> impl Iterator<Item = &CheckResult> {
        self.checks.iter().filter(|c| c.outcome() == Outcome::Warn)
    }

    /// Whether the named check failed (for any resource type).
    pub fn failed(&self, check: &str) -> bool {
        self.failures().any(|c| c.check == check)
    }

    pub(crate) fn record(
        &mut self,
        check: &str,
        resource_type: Option<&str>,
        result: Result<String, String>,
    ) -> bool {
        self.record_with_warnings(check, resource_type, result, Vec::new())
    }

    pub(crate) fn record_with_warnings(
        &mut self,
        check: &str,
        resource_type: Option<&str>,
        result: Result<String, String>,
        warnings: Vec<String>,
    ) -> bool {
        let passed = result.is_ok();
        self.checks.push(CheckResult {
            check: check.to_owned(),
            resource_type: resource_type.map(str::to_owned),
            passed,
            detail: result.unwrap_or_else(|e| e),
            warnings,
        });
        passed
    }

    /// A human-readable report: one line per check (`ok`, `WARN` or
    /// `FAIL`), each warning on a line of its own under its check.
    pub fn to_text(&self) -> String {
        let mut out = format!("conformance of {}\n", self.plugin);
        for c in &self.checks {
            let mark = match c.outcome() {
                Outcome::Pass => "ok  ",
                Outcome::Warn => "WARN",
                Outcome::Fail => "FAIL",
            };
            let ty = c
                .resource_type
                .as_deref()
                .map(|t| format!(" [{t}]"))
                .unwrap_or_default();
            out.push_str(&format!("{mark} {}{ty}", c.check));
            if !c.passed || !c.detail.is_empty() {
                out.push_str(&format!(": {}", c.detail));
            }
            out.push('\n');
            for w in &c.warnings {
                out.push_str(&format!("     warning: {w}\n"));
            }
        }
        let failed = self.failures().count();
        let warned = self.warnings().count();
        out.push_str(&format!(
            "{} checks, {} passed, {} failed",
            self.checks.len(),
            self.checks.len() - failed,
            failed
        ));
        if warned > 0 {
            out.push_str(&format!(", {warned} with warnings"));
        }
        out.push('\n');
        out
    }

    /// The report as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_its_own_line_kind_and_does_not_fail_the_run() {
        let mut report = Report {
            plugin: "p 1".into(),
            ..Default::default()
        };
        report.record("handshake", None, Ok(String::new()));
        report.record_with_warnings(
            "announcement_valid",
            None,
            Ok("1 resource types".into()),
            vec!["resources[A::B].fields.x.type: unknown field type `t`".into()],
        );
        assert!(report.passed());
        assert_eq!(report.warnings().count(), 1);
        assert_eq!(report.checks[1].outcome(), Outcome::Warn);
        let text = report.to_text();
        assert!(text.contains("ok   handshake\n"), "{text}");
        assert!(
            text.contains(
                "WARN announcement_valid: 1 resource types\n     warning: resources[A::B].fields.x.type: unknown field type `t`\n"
            ),
            "{text}"
        );
        assert!(
            text.ends_with("2 checks, 2 passed, 0 failed, 1 with warnings\n"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(json["checks"][1]["passed"], true);
        assert_eq!(json["checks"][1]["warnings"].as_array().unwrap().len(), 1);
        assert!(json["checks"][0].get("warnings").is_none());

        report.record("create", Some("A::B"), Err("boom".into()));
        assert!(!report.passed());
        assert!(report.to_text().contains("FAIL create [A::B]: boom\n"));
    }
}
