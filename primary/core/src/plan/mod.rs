//! The planner: desired state against stored state, into changes. Pure.
//!
//! Values that depend on a resource being created or replaced are not known
//! until it is; a field whose desired value is unknown counts as changed
//! ("known after apply"). Write-only and opaque fields are compared through
//! keyed hashes only: their values are never stored or shown.
//!
//! A resource attached (`edge_kind: attachesTo`) to one that is replaced is
//! replaced too, delete before create: the attachment is removed before
//! the resource it attaches to goes, and made again to the new one.

pub mod import;
pub mod moved;
mod secrets;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use orrery_schema::{EdgeKind, ResourceSchema, UpdateMethod, Value};

use crate::record::StoredResource;
use orrery_stack::{Catalog, Graph, Reference, Stack};

pub use secrets::{
    config_has_secrets, declares_secrets, redact_config, redact_url, secret_looking_key,
    secrets_of, storable_config, storable_targets, SecretHasher, Secrets, REDACTED,
};

/// Whether resources missing from the document are deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// The document is the whole truth: resources of the stack it no longer
    /// declares are deleted.
    #[default]
    Reconcile,
    /// The document adds and changes; it never deletes.
    Patch,
}

/// What happens to one resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// It does not exist yet.
    Create,
    /// Changed fields are updated in place.
    Update,
    /// A create-only field changed: a new resource replaces the old one.
    Replace {
        /// Create the new one before deleting the old one.
        create_before_delete: bool,
    },
    /// It is no longer declared (reconcile mode), or the stack is destroyed.
    Delete,
    /// Nothing changes.
    NoOp,
}

impl Action {
    /// A short name for output.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Replace { .. } => "replace",
            Action::Delete => "delete",
            Action::NoOp => "no-op",
        }
    }
}

/// One planned change.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// The resource's label.
    pub label: String,
    /// Its type.
    pub resource_type: String,
    /// Its target.
    pub target: String,
    /// What happens.
    pub action: Action,
    /// Fields that differ (for update and replace), sorted.
    pub fields: Vec<String>,
    /// Each field's value before and after, what a reviewer reads: the
    /// differing fields of an update or replace, every desired field of a
    /// create, every recorded field of a delete. Secrets are never shown.
    pub diffs: Vec<FieldDiff>,
    /// Index in the stack's resources (absent for deletes of undeclared resources).
    pub index: Option<usize>,
}

/// A value as a plan shows it.
#[derive(Clone, Debug, PartialEq)]
pub enum Shown {
    /// No value (the field is absent on that side).
    Absent,
    /// This value.
    Value(Value),
    /// A write-only or opaque value: never shown.
    Sensitive,
    /// Depends on a resource not applied yet.
    KnownAfterApply,
}

/// One field of a change, before and after.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldDiff {
    /// The field.
    pub field: String,
    /// Its recorded value.
    pub before: Shown,
    /// Its desired value.
    pub after: Shown,
    /// Whether this field's change replaces the resource (a create-only field).
    pub forces_replacement: bool,
}

/// Every change, creates and updates in dependency order, then deletes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// The changes, including no-ops.
    pub changes: Vec<Change>,
    /// Records re-addressed (`moved:`) before anything else, in order,
    /// with no plugin call; the changes are planned against the moved
    /// records.
    pub moved: Vec<moved::Move>,
    /// Records of existing resources adopted (`import:`), read from their
    /// plugins while planning and written after the moves, with no create;
    /// the changes are planned against them.
    pub imported: Vec<StoredResource>,
    /// `protect:` marks to record (label, protected) where the document
    /// and the records differ, with no plugin call: a record keeps its
    /// mark after its entry leaves the document.
    pub protect: Vec<(String, bool)>,
    /// The stack's outputs whose recorded value differs from what the
    /// document gives them now, by name: recorded after the operations,
    /// with no plugin call. A change of its own: a stack whose resources
    /// do not change but whose outputs do still has something to apply.
    pub outputs: Vec<OutputChange>,
    /// A digest of what it was made against (the document and the stack's
    /// records, as whoever planned says): with the plan itself it makes the
    /// plan's content hash, by which an apply checks that it carries out
    /// exactly the plan that was confirmed. Empty when nobody said.
    pub basis: String,
    /// What the document's secrets are, where whoever planned says: which
    /// parameters are secret, a keyed digest of their values, and where the
    /// document's own text holds a secret. A saved plan keeps none of them
    /// in clear (`orrery plan --out`).
    pub secrets: Secrets,
}

/// One output of the stack, as recorded and as it will be recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputChange {
    /// The output's name.
    pub name: String,
    /// What is recorded ([`Shown::Absent`]: none).
    pub before: Shown,
    /// What will be ([`Shown::Absent`]: the document no longer has it;
    /// [`Shown::KnownAfterApply`]: a resource it reads changes first).
    pub after: Shown,
}

impl Plan {
    /// Whether anything changes.
    pub fn has_changes(&self) -> bool {
        !self.moved.is_empty()
            || !self.imported.is_empty()
            || !self.protect.is_empty()
            || !self.outputs.is_empty()
            || self.changes.iter().any(|c| c.action != Action::NoOp)
    }

    /// How many changes of each kind: create, update, replace, delete, no-op.
    pub fn counts(&self) -> [usize; 5] {
        let mut n = [0; 5];
        for c in &self.changes {
            let i = match c.action {
                Action::Create => 0,
                Action::Update => 1,
                Action::Replace { .. } => 2,
                Action::Delete => 3,
                Action::NoOp => 4,
            };
            n[i] += 1;
        }
        n
    }
}

/// Plans `stack` (validated into `graph`) against the stack's `stored`
/// resources.
pub fn plan(
    stack: &Stack,
    graph: &Graph,
    catalog: &Catalog,
    stored: &[StoredResource],
    mode: Mode,
    hasher: &SecretHasher,
) -> Plan {
    plan_replacing(stack, graph, catalog, stored, mode, hasher, &[])
}

/// [`plan`], with the recorded resources labelled in `replace` replaced
/// even where nothing about them changed (`--replace`): delete before
/// create, unless a changed field asks for create before delete. They are
/// forced here, in dependency order, rather than after planning, so that
/// what attaches to them (`attachesTo`) is replaced with them, as when a
/// changed field replaces them.
pub fn plan_replacing(
    stack: &Stack,
    graph: &Graph,
    catalog: &Catalog,
    stored: &[StoredResource],
    mode: Mode,
    hasher: &SecretHasher,
    replace: &[String],
) -> Plan {
    let stored_by_label: HashMap<&str, &StoredResource> = stored
        .iter()
        .filter(|s| s.managed)
        .map(|s| (s.label.as_str(), s))
        .collect();
    let mut changes = Vec::with_capacity(stack.resources.len());
    // Per label: which output properties are unknown until apply (None = all).
    let mut unknown_outputs: HashMap<&str, Option<HashSet<String>>> = HashMap::new();
    let mut replaced: HashSet<&str> = HashSet::new();
    let mut replaced_dbc: HashSet<&str> = HashSet::new();
    for &i in &graph.order {
        let r = &stack.resources[i];
        let plugin = stack
            .target(&r.target)
            .map(|t| t.plugin.as_str())
            .unwrap_or("");
        let Some(schema) = catalog.schema(plugin, &r.resource_type) else {
            continue;
        };
        let existing = stored_by_label.get(r.label.as_str()).copied();
        let outputs = |reference: &Reference| -> Option<Value> {
            match unknown_outputs.get(reference.resource.as_str()) {
                Some(None) => return None,
                Some(Some(fields)) if fields.contains(&reference.property) => return None,
                _ => {}
            }
            stored_by_label
                .get(reference.resource.as_str())?
                .properties
                .get(&reference.property)
                .cloned()
        };
        let (mut action, mut fields, mut diffs) = match existing {
            None => (Action::Create, Vec::new(), created(schema, r, &outputs)),
            Some(s) if s.resource_type != r.resource_type || s.target != r.target => (
                Action::Replace {
                    create_before_delete: false,
                },
                vec!["type/target".to_owned()],
                created(schema, r, &outputs),
            ),
            Some(s) => diff(schema, r, s, &outputs, hasher),
        };
        if existing.is_some()
            && replace.contains(&r.label)
            && !matches!(action, Action::Replace { .. })
        {
            action = Action::Replace {
                create_before_delete: false,
            };
        }
        let moved = attached_to_replaced(schema, r, &replaced);
        if existing.is_some() && !moved.is_empty() && !matches!(action, Action::Replace { .. }) {
            action = Action::Replace {
                create_before_delete: false,
            };
            for field in moved {
                match diffs.iter_mut().find(|d| d.field == field) {
                    Some(d) => d.forces_replacement = true,
                    None => diffs.push(FieldDiff {
                        field: field.clone(),
                        before: Shown::KnownAfterApply,
                        after: Shown::KnownAfterApply,
                        forces_replacement: true,
                    }),
                }
                if !fields.contains(&field) {
                    fields.push(field);
                }
            }
            fields.sort();
            diffs.sort_by(|a, b| a.field.cmp(&b.field));
        }
        // Create-before-delete cannot depend on a delete-before-create
        // replacement its old record referenced: the new resource would
        // wait for the new dependency, which waits for the old dependency's
        // delete, which waits for this old resource's delete, which waits
        // for the new resource. Delete before create is always possible.
        if action
            == (Action::Replace {
                create_before_delete: true,
            })
            && existing.is_some_and(|s| {
                graph.deps[i].iter().any(|(j, kind)| {
                    let label = stack.resources[*j].label.as_str();
                    *kind != EdgeKind::RuntimeDependency
                        && replaced_dbc.contains(label)
                        && s.deps.iter().any(|d| d == label)
                })
            })
        {
            action = Action::Replace {
                create_before_delete: false,
            };
        }
        if let Action::Replace {
            create_before_delete,
        } = action
        {
            replaced.insert(r.label.as_str());
            if !create_before_delete {
                replaced_dbc.insert(r.label.as_str());
            }
        }
        match &action {
            Action::NoOp => {}
            Action::Create | Action::Replace { .. } => {
                unknown_outputs.insert(r.label.as_str(), None);
            }
            Action::Update => {
                // Outputs of changed fields, and read-only ones the provider
                // may recompute, are unknown until the update answers.
                let mut unknown: HashSet<String> = fields.iter().cloned().collect();
                unknown.extend(
                    schema
                        .fields
                        .iter()
                        .filter(|f| f.hints.read_only)
                        .map(|f| f.name.clone()),
                );
                unknown_outputs.insert(r.label.as_str(), Some(unknown));
            }
            Action::Delete => {}
        }
        changes.push(Change {
            label: r.label.clone(),
            resource_type: r.resource_type.clone(),
            target: r.target.clone(),
            action,
            fields,
            diffs,
            index: Some(i),
        });
    }
    if mode == Mode::Reconcile {
        let declared: HashSet<&str> = stack.resources.iter().map(|r| r.label.as_str()).collect();
        let mut gone: Vec<&StoredResource> = stored
            .iter()
            .filter(|s| s.managed && !declared.contains(s.label.as_str()))
            .collect();
        gone.sort_by(|a, b| a.label.cmp(&b.label));
        changes.extend(gone.into_iter().map(deleted));
    }
    Plan {
        changes,
        ..Plan::default()
    }
}

/// The `attachesTo` fields of `r` that reference a resource planned
/// (earlier, in dependency order) for replacement.
fn attached_to_replaced(
    schema: &ResourceSchema,
    r: &orrery_stack::ResourceDecl,
    replaced: &HashSet<&str>,
) -> Vec<String> {
    attachments(schema, r)
        .filter(|(_, label)| replaced.contains(label.as_str()))
        .map(|(field, _)| field.to_owned())
        .collect()
}

/// Each `attachesTo` field of `r` with a label it references.
pub(crate) fn attachments<'a>(
    schema: &'a ResourceSchema,
    r: &'a orrery_stack::ResourceDecl,
) -> impl Iterator<Item = (&'a str, String)> + 'a {
    schema
        .fields
        .iter()
        .filter(|f| f.hints.edge_kind == EdgeKind::AttachesTo)
        .flat_map(move |f| {
            let mut refs = Vec::new();
            if let Some(e) = r.properties.get(&f.name) {
                e.references(&mut refs);
            }
            refs.into_iter()
                .map(move |reference| (f.name.as_str(), reference.resource))
        })
}

/// Plans the deletion of every managed resource of a stack.
pub fn plan_destroy(stored: &[StoredResource]) -> Plan {
    let mut changes: Vec<Change> = stored.iter().filter(|s| s.managed).map(deleted).collect();
    changes.sort_by(|a, b| a.label.cmp(&b.label));
    Plan {
        changes,
        ..Plan::default()
    }
}

/// The delete of a recorded resource, its recorded fields shown (secrets
/// are never recorded, only their hashes).
fn deleted(s: &StoredResource) -> Change {
    let mut diffs: Vec<FieldDiff> = s
        .properties
        .iter()
        .map(|(field, value)| FieldDiff {
            field: field.clone(),
            before: Shown::Value(value.clone()),
            after: Shown::Absent,
            forces_replacement: false,
        })
        .collect();
    diffs.extend(s.secret_hashes.keys().map(|field| FieldDiff {
        field: field.clone(),
        before: Shown::Sensitive,
        after: Shown::Absent,
        forces_replacement: false,
    }));
    diffs.sort_by(|a, b| a.field.cmp(&b.field));
    Change {
        label: s.label.clone(),
        resource_type: s.resource_type.clone(),
        target: s.target.clone(),
        action: Action::Delete,
        fields: Vec::new(),
        diffs,
        index: None,
    }
}

/// How a desired value shows: masked when secret, unknown until applied.
fn shown(secret: bool, desired: Option<Option<Value>>) -> Shown {
    match desired {
        None => Shown::Absent,
        Some(_) if secret => Shown::Sensitive,
        Some(None) => Shown::KnownAfterApply,
        Some(Some(v)) => Shown::Value(v),
    }
}

/// Every desired field of a resource to create, in field order.
fn created(
    schema: &ResourceSchema,
    r: &orrery_stack::ResourceDecl,
    outputs: &dyn Fn(&Reference) -> Option<Value>,
) -> Vec<FieldDiff> {
    schema
        .fields
        .iter()
        .filter_map(|field| {
            let desired = r.properties.get(&field.name).map(|e| e.resolve(outputs))?;
            Some(FieldDiff {
                field: field.name.clone(),
                before: Shown::Absent,
                after: shown(r.is_secret(field), Some(desired)),
                forces_replacement: false,
            })
        })
        .collect()
}

fn diff(
    schema: &ResourceSchema,
    r: &orrery_stack::ResourceDecl,
    stored: &StoredResource,
    outputs: &dyn Fn(&Reference) -> Option<Value>,
    hasher: &SecretHasher,
) -> (Action, Vec<String>, Vec<FieldDiff>) {
    let mut changed = Vec::new();
    let mut diffs = Vec::new();
    let mut replace: Option<UpdateMethod> = None;
    for field in &schema.fields {
        let h = &field.hints;
        if h.read_only {
            continue;
        }
        // Once it exists, an ignored field keeps what was recorded.
        if r.ignore_changes.contains(&field.name) {
            continue;
        }
        let secret = r.is_secret(field);
        // Compared by reference: a no-change plan copies no value.
        let desired = r
            .properties
            .get(&field.name)
            .map(|e| e.resolve_ref(outputs));
        let differs = match &desired {
            // Not known until a dependency is applied: assume it changes.
            Some(None) => true,
            Some(Some(value)) if secret => {
                stored.secret_hashes.get(&field.name) != Some(&hasher.hash(&field.name, value))
            }
            Some(Some(value)) => stored.properties.get(&field.name) != Some(value.as_ref()),
            None if secret => stored.secret_hashes.contains_key(&field.name),
            None => !h.provider_default && stored.properties.contains_key(&field.name),
        };
        if differs {
            changed.push(field.name.clone());
            let before = if secret {
                if stored.secret_hashes.contains_key(&field.name) {
                    Shown::Sensitive
                } else {
                    Shown::Absent
                }
            } else {
                stored
                    .properties
                    .get(&field.name)
                    .map_or(Shown::Absent, |v| Shown::Value(v.clone()))
            };
            diffs.push(FieldDiff {
                field: field.name.clone(),
                before,
                after: shown(secret, desired.map(|d| d.map(|v| v.into_owned()))),
                forces_replacement: h.forces_replacement(),
            });
            if h.forces_replacement() {
                let method = h.effective_update_method();
                // Delete-before-create wins: it is the one that is always possible.
                if replace.as_ref() != Some(&UpdateMethod::DeleteBeforeCreate) {
                    replace = Some(method);
                }
            }
        }
    }
    changed.sort();
    diffs.sort_by(|a, b| a.field.cmp(&b.field));
    let action = match (changed.is_empty(), replace) {
        (true, _) => Action::NoOp,
        (false, Some(method)) => Action::Replace {
            create_before_delete: method == UpdateMethod::CreateBeforeDelete,
        },
        (false, None) => Action::Update,
    };
    (action, changed, diffs)
}

/// The labels of protected resources `plan` deletes or replaces.
pub fn protected_changes(plan: &Plan, protected: &BTreeSet<String>) -> Vec<String> {
    plan.changes
        .iter()
        .filter(|c| matches!(c.action, Action::Delete | Action::Replace { .. }))
        .filter(|c| protected.contains(&c.label))
        .map(|c| c.label.clone())
        .collect()
}

/// The `protect:` marks `stack` changes: (label, protected) for each
/// declared resource whose mark differs from the records' (`recorded`:
/// the labels marked protected). A resource not recorded yet is marked
/// once created.
pub fn protect_marks(stack: &Stack, recorded: &BTreeSet<String>) -> Vec<(String, bool)> {
    stack
        .resources
        .iter()
        .filter(|r| r.protect != recorded.contains(&r.label))
        .map(|r| (r.label.clone(), r.protect))
        .collect()
}

/// Fields of `schema` whose values must never be stored or shown.
pub fn secret_fields(schema: &ResourceSchema) -> BTreeMap<String, ()> {
    schema
        .fields
        .iter()
        .filter(|f| f.hints.is_secret())
        .map(|f| (f.name.clone(), ()))
        .collect()
}

#[cfg(test)]
mod tests;
