//! From a plan to operations with dependencies: the tasks the scheduler runs.

use std::collections::HashMap;

use orrery_schema::EdgeKind;

use crate::plan::{Action, Plan};
use crate::record::StoredResource;
use crate::scheduler::{Group, Task};
use orrery_schema::Value;
use orrery_stack::{Catalog, Expr, Graph, Stack};

/// What one task does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// Create the declared resource.
    Create,
    /// Update the declared resource in place.
    Update,
    /// Delete the stored resource. `replaced` when a new resource of the
    /// same label takes its place (so the record is kept).
    Delete {
        /// Part of a create-before-delete replacement.
        keep_record: bool,
    },
}

impl OpKind {
    /// The operation's name in records.
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Create => "create",
            OpKind::Update => "update",
            OpKind::Delete { .. } => "delete",
        }
    }
}

/// One task of a command.
#[derive(Clone, Debug)]
pub struct Op {
    /// The resource's label.
    pub label: String,
    /// What to do.
    pub kind: OpKind,
    /// Index in the stack's resources, for create/update.
    pub index: Option<usize>,
    /// The stored record, for update/delete.
    pub stored: Option<StoredResource>,
    /// The plugin serving the target.
    pub plugin: String,
    /// The target's name.
    pub target: String,
    /// The resource type.
    pub resource_type: String,
}

/// Builds the operations of `plan` and their dependencies: creates and
/// updates after what they reference; deletes before what they referenced,
/// and after the updates of resources that referenced them and the
/// dependents of a create-before-delete replacement have moved off the old
/// resource (each where that closes no cycle).
pub fn build(
    stack: Option<(&Stack, &Graph)>,
    catalog: &Catalog,
    plan: &Plan,
    stored: &[StoredResource],
) -> (Vec<Op>, Vec<Task>) {
    let stored_by_label: HashMap<&str, &StoredResource> =
        stored.iter().map(|s| (s.label.as_str(), s)).collect();
    let mut ops: Vec<Op> = Vec::new();
    let mut deps: Vec<Vec<usize>> = Vec::new();
    // The op producing a label's new state, and the op deleting its old one.
    let mut producer: HashMap<String, usize> = HashMap::new();
    let mut deleter: HashMap<String, usize> = HashMap::new();
    let plugin_of = |target: &str, fallback: &str| -> String {
        stack
            .and_then(|(s, _)| s.target(target))
            .map(|t| t.plugin.clone())
            .unwrap_or_else(|| fallback.to_owned())
    };
    let push = |op: Op, ops: &mut Vec<Op>, deps: &mut Vec<Vec<usize>>| {
        ops.push(op);
        deps.push(Vec::new());
        ops.len() - 1
    };
    for change in &plan.changes {
        let old = stored_by_label.get(change.label.as_str()).copied();
        let base = |kind: OpKind| Op {
            label: change.label.clone(),
            kind,
            index: change.index,
            stored: old.cloned(),
            plugin: plugin_of(&change.target, old.map_or("", |s| s.plugin.as_str())),
            target: change.target.clone(),
            resource_type: change.resource_type.clone(),
        };
        let old_op = |kind: OpKind, s: &StoredResource| Op {
            label: s.label.clone(),
            kind,
            index: None,
            stored: Some(s.clone()),
            plugin: s.plugin.clone(),
            target: s.target.clone(),
            resource_type: s.resource_type.clone(),
        };
        match change.action {
            Action::NoOp => {}
            Action::Create => {
                let i = push(base(OpKind::Create), &mut ops, &mut deps);
                producer.insert(change.label.clone(), i);
            }
            Action::Update => {
                let i = push(base(OpKind::Update), &mut ops, &mut deps);
                producer.insert(change.label.clone(), i);
            }
            Action::Replace {
                create_before_delete,
            } => {
                let create = push(base(OpKind::Create), &mut ops, &mut deps);
                producer.insert(change.label.clone(), create);
                // The planner replaces only stored resources.
                let Some(s) = old else { continue };
                let delete = push(
                    old_op(
                        OpKind::Delete {
                            keep_record: create_before_delete,
                        },
                        s,
                    ),
                    &mut ops,
                    &mut deps,
                );
                if create_before_delete {
                    deps[delete].push(create);
                } else {
                    deps[create].push(delete);
                }
                deleter.insert(change.label.clone(), delete);
            }
            Action::Delete => {
                let Some(s) = old else { continue };
                let i = push(
                    old_op(OpKind::Delete { keep_record: false }, s),
                    &mut ops,
                    &mut deps,
                );
                deleter.insert(change.label.clone(), i);
            }
        }
    }
    // Creates and updates wait for what they reference.
    if let Some((stack, graph)) = stack {
        for (i, op) in ops.iter().enumerate() {
            if matches!(op.kind, OpKind::Delete { .. }) {
                continue;
            }
            let Some(index) = op.index else { continue };
            // Runtime dependencies too: the value is resolved when the
            // request is sent, so what it references must be applied.
            for (dep, _) in &graph.deps[index] {
                if let Some(&p) = producer.get(&stack.resources[*dep].label) {
                    deps[i].push(p);
                }
            }
        }
    }
    // An attachment is removed before what it attaches to is replaced:
    // the new resource is created only once the old attachment is gone
    // (the planner replaces the attachment too).
    if let Some((stack, _)) = stack {
        for op in &ops {
            let (OpKind::Create, Some(index)) = (&op.kind, op.index) else {
                continue;
            };
            let Some(&detach) = deleter.get(&op.label) else {
                continue;
            };
            let decl = &stack.resources[index];
            let Some(schema) = catalog.schema(&op.plugin, &op.resource_type) else {
                continue;
            };
            for (_, attached_to) in crate::plan::attachments(schema, decl) {
                let (Some(&create), Some(_)) =
                    (producer.get(&attached_to), deleter.get(&attached_to))
                else {
                    continue;
                };
                if ops[create].kind == OpKind::Create
                    && !deps[create].contains(&detach)
                    && !waits_for(&deps, detach, create)
                {
                    deps[create].push(detach);
                }
            }
        }
    }
    // A resource is deleted only after everything that referenced it is.
    for s in stored {
        let Some(&dependent_delete) = deleter.get(&s.label) else {
            continue;
        };
        for referenced in &s.deps {
            if let Some(&d) = deleter.get(referenced) {
                if d != dependent_delete && !deps[d].contains(&dependent_delete) {
                    deps[d].push(dependent_delete);
                }
            }
        }
    }
    // The old resource of a create-before-delete replacement goes only once
    // what references it has moved to the new one (unless the stored
    // dependencies run the other way: then that edge would close a cycle).
    if let Some((stack, graph)) = stack {
        for (i, op) in ops.iter().enumerate() {
            if matches!(op.kind, OpKind::Delete { .. }) {
                continue;
            }
            let Some(index) = op.index else { continue };
            for (dep, kind) in &graph.deps[index] {
                if *kind == EdgeKind::RuntimeDependency {
                    continue;
                }
                let Some(&d) = deleter.get(&stack.resources[*dep].label) else {
                    continue;
                };
                if ops[d].kind == (OpKind::Delete { keep_record: true })
                    && !deps[d].contains(&i)
                    && !waits_for(&deps, i, d)
                {
                    deps[d].push(i);
                }
            }
        }
    }
    // A resource is deleted only after the update of a resource whose
    // record referenced it (which stops referencing it), where that closes
    // no cycle (a delete-before-create replacement of what it references).
    for s in stored {
        let Some(&update) = producer.get(&s.label) else {
            continue;
        };
        if ops[update].kind != OpKind::Update {
            continue;
        }
        for referenced in &s.deps {
            if let Some(&d) = deleter.get(referenced) {
                if !deps[d].contains(&update) && !waits_for(&deps, update, d) {
                    deps[d].push(update);
                }
            }
        }
    }
    let tasks = ops
        .iter()
        .zip(deps)
        .map(|(op, deps)| {
            let bucket = bucket(catalog, &op.plugin, &op.target);
            Task {
                deps,
                group: group(stack.map(|(s, _)| s), catalog, op, &bucket),
                bucket,
            }
        })
        .collect();
    (ops, tasks)
}

/// The concurrency group of `op`, from its type's
/// [`orrery_schema::ConcurrencyKey`]: expanded with the desired properties
/// for a create or update, the recorded ones for a delete, and scoped to the
/// op's bucket (plugin namespace and target).
fn group(stack: Option<&Stack>, catalog: &Catalog, op: &Op, bucket: &str) -> Option<Group> {
    let key = catalog
        .plugin(&op.plugin)?
        .resource(&op.resource_type)?
        .concurrency
        .as_ref()?;
    let declared = op
        .index
        .filter(|_| !matches!(op.kind, OpKind::Delete { .. }))
        .and_then(|i| stack.and_then(|s| s.resources.get(i)));
    let expanded = key.expand(|property| match (declared, stack) {
        (Some(decl), Some(stack)) => decl.properties.get(property).map(|e| key_text(stack, e)),
        _ => op
            .stored
            .as_ref()
            .and_then(|s| s.properties.get(property))
            .map(value_text),
    });
    Some(Group {
        key: format!("{bucket}#{expanded}"),
        limit: key.effective_limit(),
    })
}

/// A property's text in a concurrency key: a literal, or the literal a
/// `${label.property}` reference points at. Other values (known only after
/// apply) key by the expression itself, so resources referencing the same
/// value share a group.
fn key_text(stack: &Stack, expr: &Expr) -> String {
    let pointed = match expr {
        Expr::Ref(r) => stack
            .resource(&r.resource)
            .and_then(|d| d.properties.get(&r.property)),
        _ => None,
    };
    match orrery_stack::literal(pointed.unwrap_or(expr)) {
        Some(value) => value_text(value),
        None => format!("{expr:?}"),
    }
}

fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

/// Whether task `from` waits, directly or not, for task `to`.
fn waits_for(deps: &[Vec<usize>], from: usize, to: usize) -> bool {
    let mut seen = vec![false; deps.len()];
    let mut stack = vec![from];
    while let Some(i) = stack.pop() {
        if i == to {
            return true;
        }
        if !std::mem::replace(&mut seen[i], true) {
            stack.extend(deps[i].iter().copied());
        }
    }
    false
}

/// The rate-limit key of a plugin namespace on a target.
pub fn bucket(catalog: &Catalog, plugin: &str, target: &str) -> String {
    let namespace = catalog
        .plugin(plugin)
        .map_or(plugin, |a| a.namespace.as_str());
    format!("{namespace}/{target}")
}

/// The rate limit of bucket `key` (see [`bucket`]) of `plugin`: the
/// operator's override, else what the plugin announces. Commands, resuming
/// and discovery all pace by this.
pub fn bucket_limit(
    catalog: &Catalog,
    overrides: &std::collections::HashMap<String, crate::scheduler::BucketLimit>,
    plugin: &str,
    key: &str,
) -> crate::scheduler::BucketLimit {
    overrides.get(key).copied().unwrap_or_else(|| {
        let rl = catalog
            .plugin(plugin)
            .map(|a| a.rate_limit.clone())
            .unwrap_or_default();
        crate::scheduler::BucketLimit {
            rate_per_sec: rl.requests_per_second,
            burst: rl.burst.max(1),
        }
    })
}

#[cfg(test)]
mod tests;
