//! Plans and reports as JSON: one shape, emitted by `--output json` and by
//! the HTTP API alike (documented in `docs/http-api.md`).

use serde::Serialize;

use crate::apply::Report;
use crate::discovery::DriftReport;
use crate::plan::{FieldDiff, Mode, Plan, Shown};

/// A plan: its changes and their counts.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PlanView {
    /// The stack planned.
    pub stack: String,
    /// `reconcile` or `patch`; absent for a destroy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<&'static str>,
    /// Records re-addressed by `moved:` (no plugin call), made before
    /// the changes; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub moved: Vec<MovedView>,
    /// Existing resources adopted by `import:` (read, then recorded, with
    /// no create), made after the moves; their changes (usually `no_op`)
    /// are planned against what was read. Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub imported: Vec<ImportedView>,
    /// `protect:` marks recorded with the resources (no plugin call):
    /// `{"label", "protected"}`, where the document changes one. Absent
    /// when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub protect: Vec<ProtectView>,
    /// Every resource's change, no-ops included.
    pub changes: Vec<ChangeView>,
    /// The stack's outputs the apply records anew (no plugin call):
    /// added, changed or removed. Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<OutputView>,
    /// The changes counted by action.
    pub summary: SummaryView,
    /// Whether anything would change.
    pub has_changes: bool,
    /// The plan's content hash (hex SHA-256): of what it was made against
    /// (the document, the selection, the stack's records) and of the plan
    /// itself. An apply given it (`confirmed_plan`) runs only the plan with
    /// this hash (`docs/http-api.md`).
    pub plan_hash: String,
    /// The document's secrets, never their values: `parameters` (the
    /// names of its `type: secret` parameters), `hash` (a keyed hash of
    /// their values, under the store's secret key) and `in_text` (where
    /// the document itself gives a secret, which a saved plan would keep in
    /// clear). Absent when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secrets: Option<SecretsView>,
    /// What `--refresh` (`"refresh": true`) read before planning: the
    /// drift sync's report (as `orrery drift --output json` prints it),
    /// whose drift the changes above restore. Absent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refresh: Option<DriftReport>,
}

/// One output of the stack recorded anew. `before`/`after` are its values
/// (absent when it has none on that side); a secret one is never shown
/// (`sensitive`); `known_after_apply` marks a value read from a resource
/// the apply changes first.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct OutputView {
    /// The output's name.
    pub name: String,
    /// Its recorded value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<serde_json::Value>,
    /// Its value once applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<serde_json::Value>,
    /// A secret output on either side (its value is never shown).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
    /// The new value depends on a resource not applied yet.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub known_after_apply: bool,
    /// The document no longer has it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
}

/// Why a saved plan does not run while the stack's interrupted command
/// `id` goes on: that command finishes first, then the stack is planned
/// again.
pub fn interrupted_first(id: &str) -> String {
    format!("the stack's interrupted command {id} goes on first (apply the document, or let a primary resume it)")
}

/// A document's secrets as a plan shows them ([`PlanView::secrets`]).
#[derive(Clone, Debug, Default, serde::Deserialize, Serialize, PartialEq)]
pub struct SecretsView {
    /// The names of its `type: secret` parameters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<String>,
    /// A keyed hash of their values (empty without any).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hash: String,
    /// Where the document itself gives a secret, e.g. "resource `db`:
    /// field `password`".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_text: Vec<String>,
}

/// A plan as someone confirmed it: its hash and its changes as shown
/// (`confirmed_plan` of an apply request; `docs/http-api.md`).
#[derive(Clone, Debug, Default, serde::Deserialize, Serialize, PartialEq)]
pub struct ConfirmedPlan {
    /// Its [`PlanView::plan_hash`].
    pub plan_hash: String,
    /// Its changes, no-ops left out or not.
    #[serde(default)]
    pub changes: Vec<ConfirmedChange>,
    /// Its `moved`, as shown (absent: none).
    #[serde(default)]
    pub moved: serde_json::Value,
    /// Its `imported`, as shown (absent: none).
    #[serde(default)]
    pub imported: serde_json::Value,
    /// Its `protect`, as shown (absent: none).
    #[serde(default)]
    pub protect: serde_json::Value,
    /// Its `outputs`, as shown (absent: none).
    #[serde(default)]
    pub outputs: serde_json::Value,
    /// Its `secrets`, as shown (absent: none).
    #[serde(default)]
    pub secrets: Option<SecretsView>,
    /// Run only this very plan (a saved plan, `orrery apply FILE`): any
    /// other hash refuses, even a plan that does less.
    #[serde(default)]
    pub exact: bool,
}

/// One change of a confirmed plan.
#[derive(Clone, Debug, Default, serde::Deserialize, Serialize, PartialEq)]
pub struct ConfirmedChange {
    /// The resource's label.
    pub label: String,
    /// `create`, `update`, `replace`, `delete` or `no-op`.
    pub action: String,
    /// The fields that differ.
    #[serde(default)]
    pub fields: Vec<String>,
}

/// One record re-addressed: from the address it was recorded at to the
/// one the document gives it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MovedView {
    /// The recorded address.
    pub from: String,
    /// The new one.
    pub to: String,
}

/// One existing resource adopted.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ImportedView {
    /// Its label in the stack.
    pub label: String,
    /// Its type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// The plugin's identifier of it.
    pub id: String,
}

/// One `protect:` mark recorded.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ProtectView {
    /// The resource's label.
    pub label: String,
    /// Whether it is protected from now on.
    pub protected: bool,
}

/// One resource's planned change.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ChangeView {
    /// The resource's label.
    pub label: String,
    /// Its type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// Its target.
    pub target: String,
    /// `create`, `update`, `replace`, `delete` or `no_op`.
    pub action: &'static str,
    /// The fields that differ (updates and replaces).
    pub fields: Vec<String>,
    /// Each field before and after: the differing ones of an update or
    /// replace, every desired one of a create, every recorded one of a
    /// delete.
    pub diffs: Vec<FieldDiffView>,
}

/// One field of a change. `before`/`after` are the values (absent when the
/// field is absent on that side); a secret is never shown: `sensitive` is
/// true and the value is absent; `known_after_apply` marks a value that
/// depends on a resource not applied yet.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FieldDiffView {
    /// The field.
    pub field: String,
    /// Its recorded value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<serde_json::Value>,
    /// Its desired value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<serde_json::Value>,
    /// A write-only or opaque value on either side (never shown).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
    /// The new value depends on a resource not applied yet.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub known_after_apply: bool,
    /// Changing this field replaces the resource.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub forces_replacement: bool,
}

fn json_of(shown: &Shown) -> Option<serde_json::Value> {
    match shown {
        Shown::Value(v) => serde_json::to_value(v).ok(),
        _ => None,
    }
}

impl FieldDiffView {
    /// The view of `d`.
    pub fn new(d: &FieldDiff) -> FieldDiffView {
        FieldDiffView {
            field: d.field.clone(),
            before: json_of(&d.before),
            after: json_of(&d.after),
            sensitive: matches!(d.before, Shown::Sensitive) || matches!(d.after, Shown::Sensitive),
            known_after_apply: matches!(d.after, Shown::KnownAfterApply),
            forces_replacement: d.forces_replacement,
        }
    }
}

/// A plan's changes counted by action.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub struct SummaryView {
    /// Resources to create.
    pub create: usize,
    /// Resources to update in place.
    pub update: usize,
    /// Resources to replace.
    pub replace: usize,
    /// Resources to delete.
    pub delete: usize,
    /// Resources left as they are.
    pub no_op: usize,
}

impl PlanView {
    /// The view of `plan` for `stack` (`mode` absent for a destroy).
    pub fn new(stack: &str, mode: Option<Mode>, plan: &Plan) -> PlanView {
        let mut view = PlanView {
            stack: stack.to_owned(),
            mode: mode.map(mode_name),
            moved: plan
                .moved
                .iter()
                .map(|m| MovedView {
                    from: m.from.clone(),
                    to: m.to.clone(),
                })
                .collect(),
            imported: plan
                .imported
                .iter()
                .map(|r| ImportedView {
                    label: r.label.clone(),
                    resource_type: r.resource_type.clone(),
                    id: r.native_id.clone(),
                })
                .collect(),
            protect: plan
                .protect
                .iter()
                .map(|(label, protected)| ProtectView {
                    label: label.clone(),
                    protected: *protected,
                })
                .collect(),
            changes: plan
                .changes
                .iter()
                .map(|c| ChangeView {
                    label: c.label.clone(),
                    resource_type: c.resource_type.clone(),
                    target: c.target.clone(),
                    action: c.action.name(),
                    fields: c.fields.clone(),
                    diffs: c.diffs.iter().map(FieldDiffView::new).collect(),
                })
                .collect(),
            outputs: plan
                .outputs
                .iter()
                .map(|o| OutputView {
                    name: o.name.clone(),
                    before: json_of(&o.before),
                    after: json_of(&o.after),
                    sensitive: matches!(o.before, Shown::Sensitive)
                        || matches!(o.after, Shown::Sensitive),
                    known_after_apply: matches!(o.after, Shown::KnownAfterApply),
                    removed: matches!(o.after, Shown::Absent),
                })
                .collect(),
            summary: SummaryView::of(plan),
            has_changes: plan.has_changes(),
            plan_hash: String::new(),
            secrets: {
                let s = &plan.secrets;
                let none = s.parameters.is_empty() && s.digest.is_empty() && s.in_text.is_empty();
                (!none).then(|| SecretsView {
                    parameters: s.parameters.clone(),
                    hash: s.digest.clone(),
                    in_text: s.in_text.clone(),
                })
            },
            refresh: None,
        };
        view.plan_hash = view.content_hash(&plan.basis);
        view
    }

    /// The hash of `basis` (what the plan was made against) and of this
    /// view's plan: everything it shows but the hash and what a refresh
    /// read (the refresh's effect is in the records `basis` covers).
    fn content_hash(&self, basis: &str) -> String {
        use sha2::{Digest, Sha256};
        let shown = PlanView {
            plan_hash: String::new(),
            refresh: None,
            ..self.clone()
        };
        let mut hash = Sha256::new();
        hash.update(basis.as_bytes());
        hash.update([0]);
        hash.update(serde_json::to_vec(&shown).unwrap_or_default());
        hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// What this plan, made since, would do that `confirmed` (the plan
    /// someone confirmed, as its hash and parts were shown) did not show,
    /// for a person to read: each resource whose planned action or fields
    /// are not the confirmed ones, and each other part (moves, imports,
    /// protect marks, outputs) that differs. Empty when it does nothing
    /// unconfirmed: its hash is the confirmed one, or it is the confirmed
    /// plan less changes made meanwhile (a create settled from an
    /// interrupted command, say), which runs.
    pub fn differences(&self, confirmed: &ConfirmedPlan) -> Vec<String> {
        if confirmed.plan_hash == self.plan_hash {
            return Vec::new();
        }
        let planned = |changes: &mut dyn Iterator<Item = (String, String, Vec<String>)>| {
            changes
                .filter(|(_, action, _)| action != "no-op")
                .map(|(label, action, fields)| (label, (action, fields)))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let before = planned(
            &mut confirmed
                .changes
                .iter()
                .map(|c| (c.label.clone(), c.action.clone(), c.fields.clone())),
        );
        let after = planned(
            &mut self
                .changes
                .iter()
                .map(|c| (c.label.clone(), c.action.to_owned(), c.fields.clone())),
        );
        let say = |c: Option<&(String, Vec<String>)>| match c {
            None => "nothing".to_owned(),
            Some((action, fields)) if fields.is_empty() => action.clone(),
            Some((action, fields)) => format!("{action} ({})", fields.join(", ")),
        };
        let mut out: Vec<String> = after
            .iter()
            .filter(|(label, change)| before.get(*label) != Some(*change))
            .map(|(label, change)| {
                format!(
                    "`{label}`: confirmed {}, now {}",
                    say(before.get(label)),
                    say(Some(change))
                )
            })
            .collect();
        let parts = [
            ("moves", serde_json::to_value(&self.moved), &confirmed.moved),
            (
                "imports",
                serde_json::to_value(&self.imported),
                &confirmed.imported,
            ),
            (
                "protect marks",
                serde_json::to_value(&self.protect),
                &confirmed.protect,
            ),
            (
                "outputs to record",
                serde_json::to_value(&self.outputs),
                &confirmed.outputs,
            ),
        ];
        for (part, now, shown) in parts {
            let now = now.unwrap_or_default();
            let nothing = now.as_array().is_none_or(Vec::is_empty);
            let shown_nothing = shown.as_array().is_none_or(Vec::is_empty);
            if !nothing && (now != *shown || shown_nothing) {
                out.push(format!("the {part} are not the confirmed ones"));
            }
        }
        out
    }

    /// Why this plan, made since, is not the `confirmed` one, one line
    /// each: [`PlanView::differences`], and for a plan confirmed `exact`
    /// (a saved plan) any other hash at all: a secret parameter given
    /// another value, changes the confirmed plan made and this one no
    /// longer does, or else the records it was made against. Empty when it
    /// may run.
    pub fn stale_reasons(&self, confirmed: &ConfirmedPlan) -> Vec<String> {
        let mut out = self.differences(confirmed);
        if !confirmed.exact || confirmed.plan_hash == self.plan_hash {
            return out;
        }
        let hash = |s: &Option<SecretsView>| s.as_ref().map(|s| s.hash.clone());
        if hash(&confirmed.secrets) != hash(&self.secrets) {
            out.push("a secret parameter's value is not the one the plan was made with".into());
        }
        let now: std::collections::BTreeSet<&str> = self
            .changes
            .iter()
            .filter(|c| c.action != "no-op")
            .map(|c| c.label.as_str())
            .collect();
        for c in &confirmed.changes {
            if c.action != "no-op" && !now.contains(c.label.as_str()) {
                out.push(format!(
                    "`{}`: confirmed {}, now nothing",
                    c.label, c.action
                ));
            }
        }
        if out.is_empty() {
            out.push(
                "the plan made now is not the saved one: its values, or the stack's records it was made against, differ"
                    .into(),
            );
        }
        out
    }

    /// This view with the report of the refresh made before planning.
    pub fn with_refresh(mut self, refresh: Option<DriftReport>) -> PlanView {
        self.refresh = refresh;
        self
    }
}

impl SummaryView {
    /// The counts of `plan`.
    pub fn of(plan: &Plan) -> SummaryView {
        let [create, update, replace, delete, no_op] = plan.counts();
        SummaryView {
            create,
            update,
            replace,
            delete,
            no_op,
        }
    }
}

/// The name of a mode, as documents, requests and views spell it.
pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Patch => "patch",
        _ => "reconcile",
    }
}

/// The mode a name spells, if any.
pub fn parse_mode(name: &str) -> Option<Mode> {
    match name {
        "reconcile" => Some(Mode::Reconcile),
        "patch" => Some(Mode::Patch),
        _ => None,
    }
}

/// What a command did.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ReportView {
    /// The command.
    pub command_id: String,
    /// Whether every operation succeeded.
    pub ok: bool,
    /// Operations that succeeded.
    pub succeeded: usize,
    /// Operations that failed.
    pub failed: Vec<FailureView>,
    /// Labels not attempted because a dependency failed.
    pub dependency_failed: Vec<String>,
    /// Labels not started because the command was canceled.
    pub canceled: Vec<String>,
    /// Labels of operations in flight when a forced cancel stopped waiting
    /// for them (recorded without an outcome; the next apply settles them).
    /// Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unsettled: Vec<String>,
    /// Requests retried.
    pub retries: u64,
    /// Requests sent to plugins (operations, retries, status polls).
    pub requests: u64,
    /// Wall time in milliseconds.
    pub elapsed_ms: u64,
}

/// One failed operation.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct FailureView {
    /// The resource.
    pub label: String,
    /// `create`, `update`, `delete`…
    pub operation: String,
    /// The error code.
    pub code: String,
    /// The plugin's message.
    pub message: String,
}

impl ReportView {
    /// The view of `report`.
    pub fn new(report: &Report) -> ReportView {
        ReportView {
            command_id: report.command_id.clone(),
            ok: report.ok(),
            succeeded: report.succeeded,
            failed: report
                .failed
                .iter()
                .map(|(label, operation, code, message)| FailureView {
                    label: label.clone(),
                    operation: operation.clone(),
                    code: code.clone(),
                    message: message.clone(),
                })
                .collect(),
            dependency_failed: report.dependency_failed.clone(),
            canceled: report.canceled.clone(),
            unsettled: report.unsettled.clone(),
            retries: report.retries,
            requests: report.requests,
            elapsed_ms: report.elapsed_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A view of `changes` (label, action) made against `basis`.
    fn planned(basis: &str, changes: &[(&str, &'static str)]) -> PlanView {
        let mut view = PlanView::new("s", Some(Mode::Reconcile), &Plan::default());
        view.changes = changes
            .iter()
            .map(|(label, action)| ChangeView {
                label: (*label).to_owned(),
                resource_type: "T".into(),
                target: "t".into(),
                action,
                fields: Vec::new(),
                diffs: Vec::new(),
            })
            .collect();
        view.plan_hash = view.content_hash(basis);
        view
    }

    fn confirm(view: &PlanView, exact: bool) -> ConfirmedPlan {
        let json = serde_json::to_value(view).unwrap();
        ConfirmedPlan {
            plan_hash: view.plan_hash.clone(),
            changes: serde_json::from_value(json["changes"].clone()).unwrap(),
            exact,
            ..ConfirmedPlan::default()
        }
    }

    #[test]
    fn an_exact_confirmation_refuses_any_other_hash_naming_why() {
        let saved = planned("before", &[("a", "create"), ("b", "create")]);
        // The same plan: it runs, exact or not.
        assert!(saved.stale_reasons(&confirm(&saved, true)).is_empty());
        // It does less since (`b` was created meanwhile): an interactive
        // confirmation runs it, a saved plan does not.
        let less = planned("after", &[("a", "create"), ("b", "no-op")]);
        assert!(less.stale_reasons(&confirm(&saved, false)).is_empty());
        assert_eq!(
            less.stale_reasons(&confirm(&saved, true)),
            ["`b`: confirmed create, now nothing"]
        );
        // The same changes against other records or values: still refused.
        let other = planned("after", &[("a", "create"), ("b", "create")]);
        let why = other.stale_reasons(&confirm(&saved, true));
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(why[0].contains("is not the saved one"), "{why:?}");
        // Another secret value is named as such.
        let mut secret = saved.clone();
        secret.secrets = Some(SecretsView {
            parameters: vec!["pw".into()],
            hash: "1".into(),
            in_text: Vec::new(),
        });
        let mut given = confirm(&secret, true);
        given.secrets = Some(SecretsView {
            hash: "2".into(),
            ..secret.secrets.clone().unwrap()
        });
        given.plan_hash = "another".into();
        assert_eq!(
            secret.stale_reasons(&given),
            ["a secret parameter's value is not the one the plan was made with"]
        );
    }

    #[test]
    fn modes_round_trip_by_name() {
        for mode in [Mode::Reconcile, Mode::Patch] {
            assert_eq!(parse_mode(mode_name(mode)), Some(mode));
        }
        assert_eq!(parse_mode("merge"), None);
    }

    #[test]
    fn a_report_view_names_each_failure_field() {
        let report = Report {
            command_id: "c1".into(),
            succeeded: 2,
            failed: vec![(
                "a".into(),
                "create".into(),
                "Throttling".into(),
                "slow".into(),
            )],
            ..Report::default()
        };
        let v = serde_json::to_value(ReportView::new(&report)).unwrap();
        assert_eq!(v["ok"], false);
        assert_eq!(v["command_id"], "c1");
        assert_eq!(v["failed"][0]["label"], "a");
        assert_eq!(v["failed"][0]["operation"], "create");
        assert_eq!(v["failed"][0]["code"], "Throttling");
        assert_eq!(v["failed"][0]["message"], "slow");
    }
}
