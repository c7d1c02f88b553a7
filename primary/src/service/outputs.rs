//! A stack's outputs: computed from its recorded resources after an
//! apply, stored with the stack, read by `orrery output` and the HTTP API.
//! A secret output is stored as `{secret: true}`, its value never kept.

use orrery_schema::{PropertyMap, Value};

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
