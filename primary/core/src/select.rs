//! Targeted runs: the part of a plan a `--target`/`--exclude` selection
//! covers, and the resources `--replace` forces to be replaced. Pure: the
//! same answer for the CLI and the HTTP API, in local and remote mode.

use std::collections::{BTreeMap, BTreeSet};

use crate::plan::{Action, Plan};
use crate::record::StoredResource;
use orrery_stack::{Graph, Stack};

/// What a targeted run asks for. Empty: the whole stack. Recorded with
/// an apply's document (as JSON), so that a resumed command runs the same
/// subset.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Selection {
    /// Only these resources and what they depend on (all when empty).
    pub target: Vec<String>,
    /// Not these resources nor what depends on them.
    pub exclude: Vec<String>,
    /// Replace these even if nothing about them changed.
    pub replace: Vec<String>,
}

/// Why a selection cannot be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectError {
    /// A label neither declared nor recorded.
    #[error("no resource `{0}` is declared in the stack or recorded for it")]
    UnknownLabel(String),
    /// `--replace` of a resource that does not exist yet.
    #[error("cannot replace `{0}`: it is not created yet")]
    NotCreated(String),
    /// `--replace` of a resource the plan deletes.
    #[error("cannot replace `{0}`: this run deletes it")]
    Deleted(String),
}

impl Selection {
    /// Whether it asks for anything but the whole stack as planned.
    pub fn is_empty(&self) -> bool {
        self.target.is_empty() && self.exclude.is_empty() && self.replace.is_empty()
    }
}

/// Each resource's dependencies by label: the declared ones from the
/// stack's graph, and for resources only recorded (about to be deleted)
/// what their records say.
pub fn dependencies(
    stack: Option<(&Stack, &Graph)>,
    stored: &[StoredResource],
) -> BTreeMap<String, BTreeSet<String>> {
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    if let Some((stack, graph)) = stack {
        for (i, r) in stack.resources.iter().enumerate() {
            let on = graph.deps.get(i).into_iter().flatten();
            deps.entry(r.label.clone())
                .or_default()
                .extend(on.map(|(d, _)| stack.resources[*d].label.clone()));
        }
    }
    for s in stored {
        if !deps.contains_key(&s.label) {
            deps.insert(s.label.clone(), s.deps.iter().cloned().collect());
        }
    }
    deps
}

/// The same edges the other way: each resource's dependents. A destroy
/// selects over these: destroying a resource destroys what depends on it
/// first, and keeping one keeps what it depends on.
pub fn reversed(deps: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> =
        deps.keys().map(|k| (k.clone(), BTreeSet::new())).collect();
    for (label, on) in deps {
        for d in on {
            out.entry(d.clone()).or_default().insert(label.clone());
        }
    }
    out
}

/// Everything reachable from `start` through `edges`, `start` included.
fn closure(start: &[String], edges: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut todo: Vec<String> = start.to_vec();
    while let Some(label) = todo.pop() {
        if seen.insert(label.clone()) {
            todo.extend(edges.get(&label).into_iter().flatten().cloned());
        }
    }
    seen
}

/// The labels `selection` covers: the targets and everything they depend
/// on (every label when there are no targets), less the excluded ones and
/// everything that depends on them.
pub fn selected(
    deps: &BTreeMap<String, BTreeSet<String>>,
    selection: &Selection,
) -> Result<BTreeSet<String>, SelectError> {
    let named = selection
        .target
        .iter()
        .chain(&selection.exclude)
        .chain(&selection.replace);
    if let Some(unknown) = named.into_iter().find(|l| !deps.contains_key(*l)) {
        return Err(SelectError::UnknownLabel(unknown.clone()));
    }
    let dependents = reversed(deps);
    let included = if selection.target.is_empty() {
        deps.keys().cloned().collect()
    } else {
        closure(&selection.target, deps)
    };
    let excluded = closure(&selection.exclude, &dependents);
    Ok(included.difference(&excluded).cloned().collect())
}

/// Makes `plan` that of `selection`: changes outside it are dropped, and
/// the resources to replace are replaced (deleted first, then created).
pub fn restrict(
    plan: &mut Plan,
    deps: &BTreeMap<String, BTreeSet<String>>,
    selection: &Selection,
) -> Result<(), SelectError> {
    if selection.is_empty() {
        return Ok(());
    }
    let keep = selected(deps, selection)?;
    for label in &selection.replace {
        let Some(change) = plan.changes.iter_mut().find(|c| &c.label == label) else {
            continue;
        };
        change.action = match change.action {
            Action::Create => return Err(SelectError::NotCreated(label.clone())),
            Action::Delete => return Err(SelectError::Deleted(label.clone())),
            Action::Replace {
                create_before_delete,
            } => Action::Replace {
                create_before_delete,
            },
            Action::Update | Action::NoOp => Action::Replace {
                create_before_delete: false,
            },
        };
    }
    plan.changes.retain(|c| keep.contains(&c.label));
    plan.imported.retain(|r| keep.contains(&r.label));
    Ok(())
}

#[cfg(test)]
mod tests;
