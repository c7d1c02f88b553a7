//! The verdict: one line per check, readable by a person or as JSON.

use serde::Serialize;

/// The outcome of one check.
#[derive(Clone, Debug, Serialize)]
pub struct CheckResult {
    /// The check's name, e.g. `read_after_create`.
    pub check: String,
    /// The resource type, when the check is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    /// Whether it passed.
    pub passed: bool,
    /// What differed, for a failure; what was seen, for a pass.
    pub detail: String,
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
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        !self.checks.is_empty() && self.checks.iter().all(|c| c.passed)
    }

    /// The failed checks.
    pub fn failures(&self) -> impl Iterator<Item = &CheckResult> {
        self.checks.iter().filter(|c| !c.passed)
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
        let passed = result.is_ok();
        self.checks.push(CheckResult {
            check: check.to_owned(),
            resource_type: resource_type.map(str::to_owned),
            passed,
            detail: result.unwrap_or_else(|e| e),
        });
        passed
    }

    /// A human-readable report.
    pub fn to_text(&self) -> String {
        let mut out = format!("conformance of {}\n", self.plugin);
        for c in &self.checks {
            let mark = if c.passed { "ok  " } else { "FAIL" };
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
        }
        let failed = self.failures().count();
        out.push_str(&format!(
            "{} checks, {} passed, {} failed\n",
            self.checks.len(),
            self.checks.len() - failed,
            failed
        ));
        out
    }

    /// The report as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}
