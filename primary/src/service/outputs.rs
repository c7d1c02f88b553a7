//! A stack's outputs: computed from its recorded resources after an
//! apply, stored with the stack, read by `orrery output` and the HTTP API.
//! A secret output is stored as `{secret: true}`, its value never kept.

use std::collections::{BTreeSet, HashSet};

use orrery_schema::{PropertyMap, Value};

use crate::plan::{Action, OutputChange, Plan, Shown};
use crate::stack::{Reference, Stack};
use crate::state::StoredResource;

/// Each output as stored: `{value}`, `{secret: true}`, or `{unknown:
/// true}` when a value it needs is not recorded (a failed resource).
pub fn compute(stack: &Stack, stored: &[StoredResource]) -> PropertyMap {
    let lookup = |r: &Reference| {
        stored
            .iter()
            .find(|s| s.label == r.resource)
            .and_then(|s| s.properties.get(&r.property))
            .cloned()
    };
    stack
        .outputs
        .iter()
        .map(|(name, o)| {
            let entry = if o.secret {
                ("secret", Value::Bool(true))
            } else {
                match o.value.resolve(&lookup) {
                    Some(v) => ("value", v),
                    None => ("unknown", Value::Bool(true)),
                }
            };
            (
                name.clone(),
                Value::Map(PropertyMap::from([(entry.0.to_owned(), entry.1)])),
            )
        })
        .collect()
}

/// The outputs an apply of `plan` changes: those whose value computed
/// from the records now (`stored`) differs from the one `recorded`, and
/// those added or removed. An output reading a resource the plan changes
/// is shown as known after apply; one whose value only such a change
/// would alter is not listed (the apply records it anyway).
pub fn changes(
    stack: &Stack,
    stored: &[StoredResource],
    recorded: Option<&PropertyMap>,
    plan: &Plan,
) -> Vec<OutputChange> {
    let desired = compute(stack, stored);
    let empty = PropertyMap::new();
    let recorded = recorded.unwrap_or(&empty);
    let changing: HashSet<&str> = plan
        .changes
        .iter()
        .filter(|c| c.action != Action::NoOp)
        .map(|c| c.label.as_str())
        .collect();
    let reads_a_change = |name: &str| {
        stack.outputs.get(name).is_some_and(|o| {
            let mut refs = Vec::new();
            o.value.references(&mut refs);
            refs.iter().any(|r| changing.contains(r.resource.as_str()))
        })
    };
    let names: BTreeSet<&String> = desired.keys().chain(recorded.keys()).collect();
    names
        .into_iter()
        .filter_map(|name| {
            let (before, after) = (recorded.get(name), desired.get(name));
            if before == after {
                return None;
            }
            let after = match after {
                Some(_) if reads_a_change(name) => Shown::KnownAfterApply,
                other => shown(other),
            };
            Some(OutputChange {
                name: name.clone(),
                before: shown(before),
                after,
            })
        })
        .collect()
}

/// How an output as stored shows in a plan.
fn shown(stored: Option<&Value>) -> Shown {
    let Some(stored) = stored else {
        return Shown::Absent;
    };
    match stored {
        Value::Map(m) if m.contains_key("secret") => Shown::Sensitive,
        Value::Map(m) => match m.get("value") {
            Some(v) => Shown::Value(v.clone()),
            None => Shown::KnownAfterApply,
        },
        _ => Shown::KnownAfterApply,
    }
}

/// An output as JSON: its value, or `{"secret": true}` / `{"unknown": true}`.
pub fn to_json(stored: &Value) -> serde_json::Value {
    match stored {
        Value::Map(m) => match m.get("value") {
            Some(v) => serde_json::to_value(v).unwrap_or_default(),
            None => serde_json::to_value(m).unwrap_or_default(),
        },
        other => serde_json::to_value(other).unwrap_or_default(),
    }
}

/// An output as stored, from its JSON ([`to_json`]'s inverse): `{"secret":
/// true}` and `{"unknown": true}` are those markers, anything else a value.
pub fn from_json(json: &serde_json::Value) -> Value {
    let marker = |key: &str| {
        json.as_object()
            .is_some_and(|m| m.len() == 1 && m.get(key) == Some(&serde_json::Value::Bool(true)))
    };
    let entry = if marker("secret") {
        ("secret", Value::Bool(true))
    } else if marker("unknown") {
        ("unknown", Value::Bool(true))
    } else {
        (
            "value",
            serde_json::from_value(json.clone()).unwrap_or(Value::Null),
        )
    };
    Value::Map(PropertyMap::from([(entry.0.to_owned(), entry.1)]))
}

/// An output as text: the value (strings bare, others as JSON), or
/// `(sensitive)` / `(unknown)`.
pub fn to_text(stored: &Value) -> String {
    match stored {
        Value::Map(m) if m.contains_key("secret") => "(sensitive)".to_owned(),
        Value::Map(m) => match m.get("value") {
            Some(Value::String(s)) => s.clone(),
            Some(v) => serde_json::to_string(v).unwrap_or_default(),
            None => "(unknown)".to_owned(),
        },
        _ => "(unknown)".to_owned(),
    }
}
