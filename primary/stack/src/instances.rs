//! Many from one: `for_each` (over a list or a map), `count` and
//! `enabled` make a declaration into zero or more instances, each with its
//! own `each` or `count.index` and its own address (`label["key"]`,
//! `label[2]`).

use std::collections::BTreeSet;

use orrery_schema::Value;

use super::eval::{type_name, Env, EvalError, MAX_ITEMS};
use super::expr::Expr;
use super::functions::as_text;

/// Most resources (or targets) a document may expand to.
pub const MAX_INSTANCES: usize = 200_000;

/// One copy of a declaration.
pub(super) struct Instance {
    /// `each.key` and `each.value`.
    pub each: Option<(Value, Value)>,
    /// `count.index`.
    pub count: Option<i64>,
    /// What follows the label in the instance's address: `["key"]`, `[2]`,
    /// or nothing for a single declaration.
    pub suffix: String,
}

/// The address of instance `key` of `label`: `label["key"]` for a string,
/// `label[N]` for an integer (`count`).
pub fn address(label: &str, key: &Value) -> Result<String, EvalError> {
    match key {
        Value::String(s) => Ok(format!("{label}[{s:?}]")),
        Value::Int(i) => Ok(format!("{label}[{i}]")),
        other => Err(EvalError::Type(format!(
            "an instance is addressed by a string (`for_each`) or an integer (`count`), not {}",
            type_name(other)
        ))),
    }
}

fn known(value: &Value, what: &str, env: &Env<'_>) -> Result<Value, EvalError> {
    match Expr::from_value(value.clone(), env)? {
        Expr::Literal(v) => Ok(v),
        _ => Err(EvalError::Type(format!(
            "`{what}` must be known before planning: it cannot reference a resource"
        ))),
    }
}

/// The instances `for_each` or `count` make (one when neither is given).
pub(super) fn expand(
    for_each: Option<&Value>,
    count: Option<&Value>,
    env: &Env<'_>,
) -> Result<Vec<Instance>, (&'static str, EvalError)> {
    match (for_each, count) {
        (Some(_), Some(_)) => Err((
            "for_each",
            EvalError::Type("`for_each` and `count` cannot be used together".into()),
        )),
        (None, None) => Ok(vec![Instance {
            each: None,
            count: None,
            suffix: String::new(),
        }]),
        (None, Some(count)) => {
            let fail = |e| ("count", e);
            let n = match known(count, "count", env).map_err(fail)? {
                Value::Int(n) if n >= 0 => n,
                other => {
                    return Err(fail(EvalError::Type(format!(
                        "`count` must be a whole number of at least 0, not {}",
                        if matches!(other, Value::Int(_)) {
                            "a negative one".to_owned()
                        } else {
                            type_name(&other).to_owned()
                        }
                    ))))
                }
            };
            if n as u64 > MAX_ITEMS as u64 {
                return Err(fail(EvalError::Limit(format!(
                    "`count` is more than {MAX_ITEMS}"
                ))));
            }
            Ok((0..n)
                .map(|i| Instance {
                    each: None,
                    count: Some(i),
                    suffix: format!("[{i}]"),
                })
                .collect())
        }
        (Some(for_each), None) => {
            let fail = |e| ("for_each", e);
            let pairs: Vec<(String, Value)> = match known(for_each, "for_each", env)
                .map_err(fail)?
            {
                Value::Map(m) => m.into_iter().collect(),
                Value::List(items) => {
                    let mut seen = BTreeSet::new();
                    let mut pairs = Vec::with_capacity(items.len());
                    for item in items {
                        let key = match &item {
                            Value::String(_) | Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Bool(_) => as_text(&item),
                            other => {
                                return Err(fail(EvalError::Type(format!(
                                    "`for_each` over a list needs strings or numbers (they are the keys), not {}; use a map",
                                    type_name(other)
                                ))))
                            }
                        };
                        if !seen.insert(key.clone()) {
                            return Err(fail(EvalError::Type(format!(
                                "`for_each`: the list holds `{key}` more than once"
                            ))));
                        }
                        pairs.push((key, item));
                    }
                    pairs
                }
                other => {
                    return Err(fail(EvalError::Type(format!(
                        "`for_each` must be a list or a map, not {}",
                        type_name(&other)
                    ))))
                }
            };
            Ok(pairs
                .into_iter()
                .map(|(k, v)| Instance {
                    suffix: format!("[{k:?}]"),
                    each: Some((Value::String(k), v)),
                    count: None,
                })
                .collect())
        }
    }
}

/// Whether the instance is wanted: `enabled` is true (or absent).
pub(super) fn enabled(enabled: Option<&Value>, env: &Env<'_>) -> Result<bool, EvalError> {
    match enabled {
        None => Ok(true),
        Some(v) => match known(v, "enabled", env)? {
            Value::Bool(b) => Ok(b),
            other => Err(EvalError::Type(format!(
                "`enabled` must be a bool, not {}",
                type_name(&other)
            ))),
        },
    }
}

/// A string field (a resource's `target`, `import` or `depends_on`, a
/// target's `name`), its expressions computed. These are names, shown in
/// plans and recorded in clear, so a secret parameter may not go into one.
pub(super) fn text_field(value: &str, what: &str, env: &Env<'_>) -> Result<String, EvalError> {
    let outer = env.secret.replace(false);
    let value = known(&Value::String(value.to_owned()), what, env);
    if env.secret.replace(outer) {
        return Err(EvalError::Type(format!(
            "`{what}` cannot use a secret parameter: it is shown and recorded in clear"
        )));
    }
    match value? {
        Value::String(s) => Ok(s),
        other => Err(EvalError::Type(format!(
            "`{what}` must be a string, not {}",
            type_name(&other)
        ))),
    }
}
