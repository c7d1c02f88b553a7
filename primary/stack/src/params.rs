//! `parameters:`: declared inputs of a document, their types and checks,
//! and the values callers supply (`--var`, `--var-file`, `ORRERY_VAR_*`,
//! the HTTP API's `vars`). Secret values never appear in a message.

use std::collections::BTreeMap;

use orrery_schema::Value;
use serde::Deserialize;

use super::eval::{number, type_name, FileReader, Known};
use super::limits::Limits;

/// Longest `pattern`, in bytes.
pub const MAX_PATTERN_BYTES: usize = 1024;
/// Most memory a compiled `pattern` may take.
const MAX_PATTERN_SIZE: usize = 1 << 20;

/// A parameter's type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Text.
    #[default]
    String,
    /// An integer or a fraction.
    Number,
    /// `true` or `false`.
    Bool,
    /// A list of values.
    List,
    /// A map of values.
    Map,
    /// Text that is never printed, stored in clear or recorded.
    Secret,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Number => "number",
            Kind::Bool => "bool",
            Kind::List => "list",
            Kind::Map => "map",
            Kind::Secret => "secret",
        }
    }
}

/// A parameter as declared.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ParameterDoc {
    #[serde(rename = "type", default)]
    kind: Kind,
    #[serde(default)]
    default: Option<Value>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    allowed: Option<Vec<Value>>,
    #[serde(default)]
    pattern: Option<String>,
    #[serde(default)]
    min: Option<f64>,
    #[serde(default)]
    max: Option<f64>,
}

/// A value a caller gives a parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum Supplied {
    /// Text, read as the parameter's type (`--var`, `ORRERY_VAR_*`): a
    /// number, `true`/`false`, or a YAML/JSON list or map.
    Text(String),
    /// A typed value (`--var-file`, the HTTP API's `vars`).
    Value(Value),
}

/// What the caller gives the parser besides the document.
pub struct Inputs<'a> {
    /// Values for parameters; one the document does not declare is an
    /// error.
    pub vars: BTreeMap<String, Supplied>,
    /// Values from the environment (`ORRERY_VAR_<name>`), below `vars`;
    /// those the document does not declare are ignored.
    pub env: BTreeMap<String, Supplied>,
    /// Reads `file()`'s files, by path relative to the document.
    pub files: FileReader<'a>,
    /// Reads other stacks' recorded outputs (`${stacks.NAME.outputs.X}`);
    /// `None` refuses them.
    pub stacks: Option<super::eval::StackOutputs<'a>>,
}

fn no_files(path: &str) -> Result<String, String> {
    Err(format!("cannot read `{path}`: no files can be read here"))
}

impl Default for Inputs<'_> {
    fn default() -> Self {
        Inputs {
            vars: BTreeMap::new(),
            env: BTreeMap::new(),
            files: &no_files,
            stacks: None,
        }
    }
}

/// A parameter's problem, for the caller to place.
pub(super) struct ParamError {
    pub name: String,
    pub message: String,
}

/// The value of every declared parameter, and whether any was supplied
/// rather than a default.
pub(super) fn resolve(
    declared: &BTreeMap<String, ParameterDoc>,
    inputs: &Inputs<'_>,
) -> Result<(BTreeMap<String, Known>, bool), ParamError> {
    if let Some(name) = inputs.vars.keys().find(|n| !declared.contains_key(*n)) {
        return Err(ParamError {
            name: name.clone(),
            message: "a value was given, but the document declares no such parameter".into(),
        });
    }
    let mut out = BTreeMap::new();
    let mut supplied_any = false;
    for (name, p) in declared {
        let err = |message: String| ParamError {
            name: name.clone(),
            message,
        };
        let value = match inputs.vars.get(name).or_else(|| inputs.env.get(name)) {
            Some(s) => {
                supplied_any = true;
                typed(p.kind, s.clone()).map_err(err)?
            }
            None => match &p.default {
                Some(v) => typed(p.kind, Supplied::Value(v.clone()))
                    .map_err(|m| err(format!("default: {m}")))?,
                None => return Err(err("has no default and no value was given".to_owned())),
            },
        };
        check(p, &value).map_err(err)?;
        out.insert(name.clone(), Known::new(value, p.kind == Kind::Secret));
    }
    Ok((out, supplied_any))
}

/// `supplied` as a value of `kind`.
fn typed(kind: Kind, supplied: Supplied) -> Result<Value, String> {
    let shown = |s: &str| {
        if kind == Kind::Secret {
            "the value".to_owned()
        } else {
            format!("`{s}`")
        }
    };
    match (kind, supplied) {
        (Kind::String | Kind::Secret, Supplied::Text(s)) => Ok(Value::String(s)),
        (Kind::Number, Supplied::Text(s)) => s
            .trim()
            .parse::<i64>()
            .map(Value::Int)
            .or_else(|_| {
                s.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .map(Value::Float)
                    .ok_or(())
            })
            .map_err(|_| format!("{} is not a number", shown(&s))),
        (Kind::Bool, Supplied::Text(s)) => match s.trim() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(format!("{} is not `true` or `false`", shown(&s))),
        },
        (Kind::List | Kind::Map, Supplied::Text(s)) => {
            let v: Value =
                super::yaml::read(&s, &Limits::default()).map_err(|e| match e.problem {
                    super::Problem::TooLarge(_) => {
                        format!("{} is not YAML or JSON within the limits", shown(&s))
                    }
                    _ => format!("{} is not YAML or JSON: {e}", shown(&s)),
                })?;
            typed(kind, Supplied::Value(v))
        }
        (
            Kind::String,
            Supplied::Value(
                v @ (Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Bool(_)),
            ),
        ) => Ok(Value::String(super::functions::as_text(&v))),
        (Kind::String | Kind::Secret, Supplied::Value(v @ Value::String(_)))
        | (Kind::Number, Supplied::Value(v @ (Value::Int(_) | Value::UInt(_) | Value::Float(_))))
        | (Kind::Bool, Supplied::Value(v @ Value::Bool(_)))
        | (Kind::List, Supplied::Value(v @ Value::List(_)))
        | (Kind::Map, Supplied::Value(v @ Value::Map(_))) => Ok(v),
        (kind, Supplied::Value(v)) => {
            Err(format!("must be a {}, not {}", kind.name(), type_name(&v)))
        }
    }
}

/// `allowed`, `pattern`, `min` and `max`.
fn check(p: &ParameterDoc, value: &Value) -> Result<(), String> {
    let secret = p.kind == Kind::Secret;
    let shown = || {
        if secret {
            "the value".to_owned()
        } else {
            format!("`{}`", super::functions::as_text(value))
        }
    };
    if let Some(allowed) = &p.allowed {
        let equal = |a: &Value| match (number(a), number(value)) {
            (Some(x), Some(y)) => x == y,
            _ => a == value,
        };
        if !allowed.iter().any(equal) {
            let list: Vec<String> = if secret {
                vec!["(secret)".into()]
            } else {
                allowed.iter().map(super::functions::as_text).collect()
            };
            return Err(format!(
                "{} is not one of the allowed values: {}",
                shown(),
                list.join(", ")
            ));
        }
    }
    if let Some(pattern) = &p.pattern {
        let Value::String(s) = value else {
            return Err(format!(
                "`pattern` applies to strings and secrets, not a {}",
                p.kind.name()
            ));
        };
        if pattern.len() > MAX_PATTERN_BYTES {
            return Err(format!(
                "the pattern is longer than {MAX_PATTERN_BYTES} bytes"
            ));
        }
        let re = regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
            .size_limit(MAX_PATTERN_SIZE)
            .dfa_size_limit(MAX_PATTERN_SIZE)
            .build()
            .map_err(|e| format!("bad pattern `{pattern}`: {e}"))?;
        if !re.is_match(s) {
            return Err(format!(
                "{} does not match the pattern `{pattern}`",
                shown()
            ));
        }
    }
    let measure = match value {
        Value::String(s) => Some((s.chars().count() as f64, "length ")),
        Value::List(l) => Some((l.len() as f64, "length ")),
        Value::Map(m) => Some((m.len() as f64, "length ")),
        v => number(v).map(|n| (n, "")),
    };
    if let Some((n, what)) = measure {
        let n_shown = if secret {
            "its length".to_owned()
        } else if what.is_empty() {
            shown()
        } else {
            format!("{what}{n}")
        };
        if let Some(min) = p.min.filter(|min| n < *min) {
            return Err(format!("{n_shown} is less than the minimum {min}"));
        }
        if let Some(max) = p.max.filter(|max| n > *max) {
            return Err(format!("{n_shown} is more than the maximum {max}"));
        }
    }
    Ok(())
}
