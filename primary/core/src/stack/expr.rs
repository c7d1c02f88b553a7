//! Property expressions: literal values and references to other resources'
//! outputs, written `${label.property}` inside strings.

use std::collections::BTreeMap;

use orrery_schema::{PropertyMap, Value};

/// A reference to another resource's output property.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reference {
    /// The referenced resource's label.
    pub resource: String,
    /// The property of its outputs.
    pub property: String,
}

/// One piece of a string template.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    /// Literal text.
    Text(String),
    /// A referenced value, converted to text.
    Ref(Reference),
}

/// A property value as written in a stack: literals, references, and
/// containers of them.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A value with no reference in it.
    Literal(Value),
    /// Exactly `${label.property}`: the referenced value, of any type.
    Ref(Reference),
    /// A string with references inside: the parts joined as text.
    Template(Vec<Part>),
    /// A list with references somewhere inside.
    List(Vec<Expr>),
    /// A map with references somewhere inside.
    Map(BTreeMap<String, Expr>),
}

/// Why a string is not a valid template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError(pub String);

impl Expr {
    /// Parses a value from a document, finding references in its strings.
    /// `vars` are built-in variables such as `stack_dir`, substituted at once.
    pub fn from_value(
        value: Value,
        vars: &BTreeMap<String, String>,
    ) -> Result<Expr, TemplateError> {
        Ok(match value {
            Value::String(s) => parse_template(&s, vars)?,
            Value::List(items) => {
                let exprs = items
                    .into_iter()
                    .map(|v| Expr::from_value(v, vars))
                    .collect::<Result<Vec<_>, _>>()?;
                if exprs.iter().all(|e| matches!(e, Expr::Literal(_))) {
                    Expr::Literal(Value::List(
                        exprs.into_iter().map(Expr::into_literal).collect(),
                    ))
                } else {
                    Expr::List(exprs)
                }
            }
            Value::Map(map) => {
                let exprs = map
                    .into_iter()
                    .map(|(k, v)| Ok((k, Expr::from_value(v, vars)?)))
                    .collect::<Result<BTreeMap<_, _>, _>>()?;
                if exprs.values().all(|e| matches!(e, Expr::Literal(_))) {
                    Expr::Literal(Value::Map(
                        exprs
                            .into_iter()
                            .map(|(k, e)| (k, e.into_literal()))
                            .collect(),
                    ))
                } else {
                    Expr::Map(exprs)
                }
            }
            other => Expr::Literal(other),
        })
    }

    fn into_literal(self) -> Value {
        match self {
            Expr::Literal(v) => v,
            _ => Value::Null,
        }
    }

    /// Every reference inside.
    pub fn references(&self, out: &mut Vec<Reference>) {
        match self {
            Expr::Literal(_) => {}
            Expr::Ref(r) => out.push(r.clone()),
            Expr::Template(parts) => out.extend(parts.iter().filter_map(|p| match p {
                Part::Ref(r) => Some(r.clone()),
                Part::Text(_) => None,
            })),
            Expr::List(items) => items.iter().for_each(|e| e.references(out)),
            Expr::Map(map) => map.values().for_each(|e| e.references(out)),
        }
    }

    /// The value, with references looked up in `outputs`; `None` when a
    /// referenced value is not known yet.
    pub fn resolve(&self, outputs: &dyn Fn(&Reference) -> Option<Value>) -> Option<Value> {
        Some(match self {
            Expr::Literal(v) => v.clone(),
            Expr::Ref(r) => outputs(r)?,
            Expr::Template(parts) => {
                let mut s = String::new();
                for part in parts {
                    match part {
                        Part::Text(t) => s.push_str(t),
                        Part::Ref(r) => s.push_str(&as_text(&outputs(r)?)),
                    }
                }
                Value::String(s)
            }
            Expr::List(items) => Value::List(
                items
                    .iter()
                    .map(|e| e.resolve(outputs))
                    .collect::<Option<_>>()?,
            ),
            Expr::Map(map) => Value::Map(
                map.iter()
                    .map(|(k, e)| Some((k.clone(), e.resolve(outputs)?)))
                    .collect::<Option<PropertyMap>>()?,
            ),
        })
    }
}

fn as_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        other => format!("{other:?}"),
    }
}

fn parse_template(s: &str, vars: &BTreeMap<String, String>) -> Result<Expr, TemplateError> {
    if !s.contains("${") {
        return Ok(Expr::Literal(Value::String(s.to_owned())));
    }
    let mut parts = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        if start > 0 {
            parts.push(Part::Text(rest[..start].to_owned()));
        }
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| TemplateError(format!("unclosed `${{` in {s:?}")))?;
        let inner = after[..end].trim();
        match inner.split_once('.') {
            Some((resource, property)) if !resource.is_empty() && !property.is_empty() => {
                parts.push(Part::Ref(Reference {
                    resource: resource.to_owned(),
                    property: property.to_owned(),
                }));
            }
            _ => match vars.get(inner) {
                Some(v) => parts.push(Part::Text(v.clone())),
                None => {
                    return Err(TemplateError(format!(
                        "`${{{inner}}}` is neither a reference `${{resource.property}}` nor a known variable ({})",
                        vars.keys().cloned().collect::<Vec<_>>().join(", ")
                    )))
                }
            },
        }
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Text(rest.to_owned()));
    }
    // Merge adjacent text (variables substituted into text).
    let mut merged: Vec<Part> = Vec::new();
    for part in parts {
        match (merged.last_mut(), part) {
            (Some(Part::Text(a)), Part::Text(b)) => a.push_str(&b),
            (_, part) => merged.push(part),
        }
    }
    Ok(match merged.as_slice() {
        [Part::Ref(r)] => Expr::Ref(r.clone()),
        [Part::Text(t)] => Expr::Literal(Value::String(t.clone())),
        [] => Expr::Literal(Value::String(String::new())),
        _ => Expr::Template(merged),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> BTreeMap<String, String> {
        BTreeMap::from([("stack_dir".to_owned(), "/srv".to_owned())])
    }

    #[test]
    fn whole_string_reference_keeps_the_type() {
        let e = Expr::from_value(Value::from("${dir.mode}"), &vars()).unwrap();
        assert_eq!(
            e,
            Expr::Ref(Reference {
                resource: "dir".into(),
                property: "mode".into()
            })
        );
        assert_eq!(e.resolve(&|_| Some(Value::Int(493))), Some(Value::Int(493)));
    }

    #[test]
    fn templates_join_text_and_variables() {
        let e = Expr::from_value(Value::from("${stack_dir}/${dir.path}/x"), &vars()).unwrap();
        assert_eq!(
            e.resolve(&|_| Some(Value::from("app"))),
            Some(Value::from("/srv/app/x"))
        );
        assert_eq!(
            e.resolve(&|_| None),
            None,
            "unknown until the reference is known"
        );
    }

    #[test]
    fn bad_templates_are_errors() {
        assert!(Expr::from_value(Value::from("${nope}"), &vars()).is_err());
        assert!(Expr::from_value(Value::from("${a.b"), &vars()).is_err());
    }
}
