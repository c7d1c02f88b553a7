//! Property expressions: literal values, references to other resources'
//! outputs (`${label.property}`) and expressions over them (`syntax.rs`),
//! inside strings.

use std::collections::BTreeMap;

use orrery_schema::{PropertyMap, Value};

use super::eval::{eval, fold, Env, EvalError};
use super::functions::as_text;
use super::syntax::{parse_embedded, Ast};

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
    /// An expression that references a resource, converted to text.
    Expr(Ast),
}

/// A property value as written in a stack: literals, references, and
/// containers of them. Everything but resource references is computed
/// when the document is parsed.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A value with no reference in it.
    Literal(Value),
    /// Exactly `${label.property}`: the referenced value, of any type.
    Ref(Reference),
    /// Exactly `${…}` of an expression that references a resource (such
    /// as `${upper(app.path)}`): its value, of any type.
    Computed(Ast),
    /// A string with references inside: the parts joined as text.
    Template(Vec<Part>),
    /// A list with references somewhere inside.
    List(Vec<Expr>),
    /// A map with references somewhere inside.
    Map(BTreeMap<String, Expr>),
}

impl Expr {
    /// Parses a value from a document, computing its `${…}` expressions in
    /// `env` but for resource references, which are kept.
    pub fn from_value(value: Value, env: &Env<'_>) -> Result<Expr, EvalError> {
        Ok(match value {
            Value::String(s) => parse_template(&s, env)?,
            Value::List(items) => {
                let exprs = items
                    .into_iter()
                    .map(|v| Expr::from_value(v, env))
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
                    .map(|(k, v)| Ok((k, Expr::from_value(v, env)?)))
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
            Expr::Computed(ast) => ast.references(out),
            Expr::Template(parts) => {
                for p in parts {
                    match p {
                        Part::Ref(r) => out.push(r.clone()),
                        Part::Expr(ast) => ast.references(out),
                        Part::Text(_) => {}
                    }
                }
            }
            Expr::List(items) => items.iter().for_each(|e| e.references(out)),
            Expr::Map(map) => map.values().for_each(|e| e.references(out)),
        }
    }

    /// [`Expr::resolve`], borrowing a literal rather than copying it: what
    /// a planner that only compares wants.
    pub fn resolve_ref(
        &self,
        outputs: &dyn Fn(&Reference) -> Option<Value>,
    ) -> Option<std::borrow::Cow<'_, Value>> {
        match self {
            Expr::Literal(v) => Some(std::borrow::Cow::Borrowed(v)),
            other => other.resolve(outputs).map(std::borrow::Cow::Owned),
        }
    }

    /// The value, with references looked up in `outputs`; `None` when a
    /// referenced value is not known yet, or an expression over it fails.
    pub fn resolve(&self, outputs: &dyn Fn(&Reference) -> Option<Value>) -> Option<Value> {
        Some(match self {
            Expr::Literal(v) => v.clone(),
            Expr::Ref(r) => outputs(r)?,
            Expr::Computed(ast) => eval(ast, outputs).ok()?,
            Expr::Template(parts) => {
                let mut s = String::new();
                for part in parts {
                    match part {
                        Part::Text(t) => s.push_str(t),
                        Part::Ref(r) => s.push_str(&as_text(&outputs(r)?)),
                        Part::Expr(ast) => s.push_str(&as_text(&eval(ast, outputs).ok()?)),
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

/// A string's `${…}` expressions, computed where they can be. `$${` is a
/// literal `${`.
fn parse_template(s: &str, env: &Env<'_>) -> Result<Expr, EvalError> {
    if !s.contains("${") {
        return Ok(Expr::Literal(Value::String(s.to_owned())));
    }
    let mut parts: Vec<Part> = Vec::new();
    let mut text = String::new();
    let mut rest = s;
    let mut whole: Option<Ast> = None;
    while let Some(start) = rest.find("${") {
        if rest[..start].ends_with('$') {
            text.push_str(&rest[..start - 1]);
            text.push_str("${");
            rest = &rest[start + 2..];
            continue;
        }
        text.push_str(&rest[..start]);
        // A secret reference stays text: it is resolved at request time
        // by the host that runs the plugin, so no value is ever planned,
        // recorded or sent (orrery_bus::held_targets).
        if let Some(len) = secret_reference(&rest[start..]) {
            text.push_str(&rest[start..start + len]);
            rest = &rest[start + len..];
            continue;
        }
        let (ast, used) = parse_embedded(&rest[start + 2..])?;
        let ast = fold(&ast, env)?;
        let is_whole = start == 0 && parts.is_empty() && text.is_empty();
        rest = &rest[start + 2 + used..];
        if is_whole && rest.is_empty() {
            whole = Some(ast);
            break;
        }
        match ast {
            Ast::Const(v) => text.push_str(&as_text(&v)),
            other => {
                if !text.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut text)));
                }
                parts.push(match other {
                    Ast::Ref(r) => Part::Ref(r),
                    other => Part::Expr(other),
                });
            }
        }
    }
    if let Some(ast) = whole {
        return Ok(match ast {
            Ast::Const(v) => Expr::Literal(v),
            Ast::Ref(r) => Expr::Ref(r),
            other => Expr::Computed(other),
        });
    }
    text.push_str(rest);
    if !text.is_empty() {
        parts.push(Part::Text(text));
    }
    Ok(match parts.as_slice() {
        [Part::Text(t)] => Expr::Literal(Value::String(t.clone())),
        [] => Expr::Literal(Value::String(String::new())),
        _ => Expr::Template(parts),
    })
}

/// The length of the `${env:NAME}` or `${file:PATH}` at the start of `s`.
fn secret_reference(s: &str) -> Option<usize> {
    if !(s.starts_with("${env:") || s.starts_with("${file:")) {
        return None;
    }
    s.find('}').map(|end| end + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::Known;
    use std::cell::Cell;

    fn with_env<T>(f: impl FnOnce(&Env<'_>) -> T) -> T {
        let params = BTreeMap::from([
            ("n".to_owned(), Known::new(Value::Int(3), false)),
            ("pw".to_owned(), Known::new(Value::from("hunter2"), true)),
        ]);
        let vars = BTreeMap::new();
        let files = |p: &str| -> Result<String, String> {
            if p == "motd.txt" {
                Ok("hi".into())
            } else {
                Err("no such file".into())
            }
        };
        let env = Env {
            params: &params,
            vars: &vars,
            each: None,
            count: None,
            stack_dir: "/srv",
            files: &files,
            modules: &Default::default(),
            stacks: None,
            prefix: "",
            secret: Cell::new(false),
            budget: &Default::default(),
        };
        f(&env)
    }

    fn parse(s: &str) -> Result<Expr, EvalError> {
        with_env(|env| Expr::from_value(Value::from(s), env))
    }

    #[test]
    fn whole_string_reference_keeps_the_type() {
        let e = parse("${dir.mode}").unwrap();
        assert_eq!(
            e,
            Expr::Ref(Reference {
                resource: "dir".into(),
                property: "mode".into()
            })
        );
        assert_eq!(e.resolve(&|_| Some(Value::Int(493))), Some(Value::Int(493)));
        assert_eq!(
            parse("${param.n * 2}").unwrap(),
            Expr::Literal(Value::Int(6))
        );
        assert_eq!(
            parse("${range(2)}").unwrap(),
            Expr::Literal(Value::List(vec![Value::Int(0), Value::Int(1)]))
        );
    }

    #[test]
    fn secret_references_stay_text_for_the_host_to_resolve() {
        with_env(|env| {
            let parse = |s: &str| parse_template(s, env).unwrap();
            assert_eq!(
                parse("${file:pg-password}"),
                Expr::Literal(Value::from("${file:pg-password}"))
            );
            assert_eq!(
                parse("postgres://u:${env:PW}@h/${param.n}"),
                Expr::Literal(Value::from("postgres://u:${env:PW}@h/3"))
            );
        });
    }

    #[test]
    fn templates_join_text_and_variables() {
        let e = parse("${stack_dir}/${dir.path}/x").unwrap();
        assert_eq!(
            e.resolve(&|_| Some(Value::from("app"))),
            Some(Value::from("/srv/app/x"))
        );
        assert_eq!(
            e.resolve(&|_| None),
            None,
            "unknown until the reference is known"
        );
        assert_eq!(
            parse("n=${param.n}, $${kept}").unwrap(),
            Expr::Literal(Value::from("n=3, ${kept}"))
        );
        assert_eq!(
            parse("${file(\"motd.txt\")}!").unwrap(),
            Expr::Literal(Value::from("hi!"))
        );
    }

    #[test]
    fn expressions_over_references_are_finished_when_resolved() {
        let e = parse("${upper(dir.path)}").unwrap();
        assert!(matches!(e, Expr::Computed(_)));
        let mut refs = Vec::new();
        e.references(&mut refs);
        assert_eq!(refs.len(), 1);
        assert_eq!(
            e.resolve(&|_| Some(Value::from("ab"))),
            Some(Value::from("AB"))
        );
        let e = parse("x-${dir.n + param.n}").unwrap();
        assert_eq!(
            e.resolve(&|_| Some(Value::Int(1))),
            Some(Value::from("x-4"))
        );
    }

    #[test]
    fn secrets_taint_what_they_touch() {
        with_env(|env| {
            Expr::from_value(Value::from("${param.n}"), env).unwrap();
            assert!(!env.secret.get());
            Expr::from_value(Value::from("pw=${upper(param.pw)}"), env).unwrap();
            assert!(env.secret.get());
        });
    }

    #[test]
    fn bad_templates_are_errors() {
        assert!(parse("${nope}").is_err());
        assert!(parse("${a.b").is_err());
        assert_eq!(
            parse("${param.zz}").unwrap_err().to_string(),
            "`param.zz`: the document declares no parameter `zz`"
        );
        assert_eq!(
            parse("${file(\"x\")}").unwrap_err().to_string(),
            "`file(\"x\")`: no such file"
        );
        assert!(matches!(parse("${nofn(1)}"), Err(EvalError::Unknown(_))));
    }
}
