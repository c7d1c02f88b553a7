//! Evaluating expressions: everything but resource references is known
//! when the document is parsed (parameters, variables, `each`, `count`,
//! functions), so [`fold`] computes it then; what references a resource
//! is finished by [`eval`] at plan and apply time, once the resource's
//! recorded properties are known. No clock, no environment, no I/O but
//! `file()`, which calls the reader the caller gives.

use std::cell::Cell;
use std::collections::BTreeMap;

use orrery_schema::Value;

use super::expr::Reference;
use super::functions;
use super::syntax::{Ast, Op};

/// Largest string an expression may produce, in bytes.
pub const MAX_STRING_BYTES: usize = 1 << 20;
/// Most items of a list or map an expression may produce.
pub const MAX_ITEMS: usize = 100_000;
/// Largest file `file()` reads, in bytes.
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// Most bytes of values one document's expressions may make, all told
/// (each value counted each time it is made or copied: a 1 MiB parameter
/// referenced a thousand times is a thousand MiB). The per-value limits
/// above do not bound a document that copies a large value many times.
pub const MAX_EVALUATED_BYTES: u64 = 256 << 20;

/// What one document's evaluation has made so far, held to
/// [`MAX_EVALUATED_BYTES`]. Shared by every environment of the document
/// (its modules' included), so that no number of instances, list items
/// or references gets past it.
#[derive(Debug, Default)]
pub struct Budget {
    made: Cell<u64>,
}

impl Budget {
    /// Counts `value` as made; an error once the total passes the budget.
    pub fn charge(&self, value: &Value) -> Result<(), EvalError> {
        let made = self.made.get().saturating_add(weight(value));
        self.made.set(made);
        if made > MAX_EVALUATED_BYTES {
            return Err(EvalError::Limit(format!(
                "the document's expressions make more than {} MiB of values",
                MAX_EVALUATED_BYTES >> 20
            )));
        }
        Ok(())
    }
}

/// About how many bytes `value` takes: its text, and a word for every
/// other item.
fn weight(value: &Value) -> u64 {
    const WORD: u64 = 8;
    match value {
        Value::String(s) => WORD + s.len() as u64,
        Value::Bytes(b) => WORD + b.len() as u64,
        Value::List(items) => WORD + items.iter().map(weight).sum::<u64>(),
        Value::Map(map) => {
            WORD + map
                .iter()
                .map(|(k, v)| WORD + k.len() as u64 + weight(v))
                .sum::<u64>()
        }
        _ => WORD,
    }
}

/// Why an expression has no value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// Not an expression.
    #[error("{0}")]
    Syntax(String),
    /// A name, parameter, variable or function that does not exist.
    #[error("{0}")]
    Unknown(String),
    /// A value of the wrong type, or out of range.
    #[error("{0}")]
    Type(String),
    /// Past one of the evaluation limits.
    #[error("{0}")]
    Limit(String),
    /// Variables that need each other.
    #[error("variables need each other in a circle: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
    /// `file()` could not read its file.
    #[error("{0}")]
    File(String),
    /// A referenced resource property is not known yet (at plan time: the
    /// resource is not applied yet).
    #[error("a referenced value is not known until apply")]
    Pending,
}

/// A parameter's or variable's value, and whether a secret went into it.
#[derive(Clone, PartialEq)]
pub struct Known {
    /// The value.
    pub value: Value,
    /// Whether it is, or was computed from, a secret parameter.
    pub secret: bool,
    /// A module's parameter given a resource's property (`with:`): known
    /// only at apply time, so it may go into properties and outputs but
    /// nothing evaluated before planning (`value` is then null).
    pub pending: Option<Box<super::Expr>>,
}

impl Known {
    /// A value known before planning.
    pub fn new(value: Value, secret: bool) -> Known {
        Known {
            value,
            secret,
            pending: None,
        }
    }
}

impl std::fmt::Debug for Known {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.secret {
            f.write_str("Known(<secret>)")
        } else {
            write!(f, "Known({:?})", self.value)
        }
    }
}

/// Reads a file named by `file()`, relative to the document; the caller's
/// business (the core does no I/O).
pub type FileReader<'a> = &'a dyn Fn(&str) -> Result<String, String>;

/// Reads another stack's recorded outputs, by the stack's name (`None`:
/// it recorded none), as the store keeps them: `{value}`, `{secret:
/// true}` or `{unknown: true}` per output. The caller's business: the
/// core does no I/O.
pub type StackOutputs<'a> = &'a dyn Fn(&str) -> Option<orrery_schema::PropertyMap>;

/// The outputs of the modules a document (or module) uses, by the
/// module's address in it (`db`, `db["eu"]`).
pub type ModuleOutputs = BTreeMap<String, BTreeMap<String, super::OutputDecl>>;

/// What names mean while the document is parsed.
pub struct Env<'a> {
    /// Parameters, with their values.
    pub params: &'a BTreeMap<String, Known>,
    /// Variables computed so far.
    pub vars: &'a BTreeMap<String, Known>,
    /// `each.key` and `each.value`, inside a `for_each` resource.
    pub each: Option<(&'a Value, &'a Value)>,
    /// `count.index`, inside a `count` resource.
    pub count: Option<i64>,
    /// `stack_dir`.
    pub stack_dir: &'a str,
    /// Reads `file()`'s files.
    pub files: FileReader<'a>,
    /// The outputs of the modules used so far.
    pub modules: &'a ModuleOutputs,
    /// Other stacks' recorded outputs (`${stacks.NAME.outputs.X}`);
    /// `None` where they cannot be read.
    pub stacks: Option<StackOutputs<'a>>,
    /// What goes before a resource's label inside a module
    /// (`module.db["eu"].`): references are to the module's own resources.
    pub prefix: &'a str,
    /// Set when a secret value was used.
    pub secret: Cell<bool>,
    /// What the document's evaluation may still make.
    pub budget: &'a Budget,
}

impl<'a> Env<'a> {
    /// This environment for one instance of a `for_each` or `count`
    /// declaration.
    pub fn instance<'b>(
        &'b self,
        each: Option<(&'b Value, &'b Value)>,
        count: Option<i64>,
    ) -> Env<'b>
    where
        'a: 'b,
    {
        Env {
            params: self.params,
            vars: self.vars,
            each,
            count,
            stack_dir: self.stack_dir,
            files: self.files,
            modules: self.modules,
            stacks: self.stacks,
            prefix: self.prefix,
            secret: Cell::new(false),
            budget: self.budget,
        }
    }

    /// `module.NAME[key].outputs.OUTPUT`: the value when it is known, or
    /// the output's expression over the module's resources.
    /// `param.NAME` folded: its value, or the expression a module's user
    /// passed when that references a resource.
    fn param_ast(&self, name: &str) -> Result<Ast, EvalError> {
        match self.params.get(name) {
            Some(Known {
                pending: Some(expr),
                secret,
                ..
            }) => {
                if *secret {
                    self.secret.set(true);
                }
                Ok(Ast::Embedded(expr.clone()))
            }
            _ => eval_in(&Ast::Param(name.to_owned()), &Scope::Parse(self)).map(Ast::Const),
        }
    }

    fn module_output(&self, name: &str, key: Option<&Ast>, output: &str) -> Result<Ast, EvalError> {
        let address = match key {
            Some(key) => super::instances::address(name, &eval_in(key, &Scope::Parse(self))?)?,
            None => name.to_owned(),
        };
        let outputs = self.modules.get(&address).ok_or_else(|| {
            EvalError::Unknown(format!(
                "`module.{address}`: no module `{address}` is used before this point"
            ))
        })?;
        let decl = outputs.get(output).ok_or_else(|| {
            EvalError::Unknown(format!(
                "`module.{address}.outputs.{output}`: the module has no output `{output}`"
            ))
        })?;
        if decl.secret {
            self.secret.set(true);
        }
        Ok(match &decl.value {
            super::Expr::Literal(v) => Ast::Const(v.clone()),
            other => Ast::Embedded(Box::new(other.clone())),
        })
    }
}

/// What evaluation reads names from: the parse-time environment, or
/// (at plan and apply time) resource properties.
enum Scope<'a, 'b> {
    Parse(&'b Env<'a>),
    Resolve(&'b dyn Fn(&Reference) -> Option<Value>),
}

/// `ast` with everything that does not reference a resource computed:
/// a [`Ast::Const`] when nothing does.
pub fn fold(ast: &Ast, env: &Env<'_>) -> Result<Ast, EvalError> {
    if !ast.has_references() {
        return eval_in(ast, &Scope::Parse(env)).map(Ast::Const);
    }
    let f = |a: &Ast| fold(a, env).map(Box::new);
    let out = match ast {
        Ast::Ref(r) => Ast::Ref(Reference {
            resource: format!("{}{}", env.prefix, r.resource),
            property: r.property.clone(),
        }),
        Ast::InstanceRef(label, key, property) => {
            let key = eval_in(key, &Scope::Parse(env))?;
            Ast::Ref(Reference {
                resource: format!("{}{}", env.prefix, super::instances::address(label, &key)?),
                property: property.clone(),
            })
        }
        Ast::Attr(a, name) => Ast::Attr(f(a)?, name.clone()),
        Ast::Index(a, b) => Ast::Index(f(a)?, f(b)?),
        Ast::Unary(op, a) => Ast::Unary(*op, f(a)?),
        Ast::Binary(op, a, b) => Ast::Binary(*op, f(a)?, f(b)?),
        Ast::Cond(a, b, c) => Ast::Cond(f(a)?, f(b)?, f(c)?),
        Ast::List(items) => Ast::List(
            items
                .iter()
                .map(|a| fold(a, env))
                .collect::<Result<_, _>>()?,
        ),
        Ast::Call(name, args) => {
            functions::check_name(name)?;
            let args: Vec<Ast> = args
                .iter()
                .map(|a| fold(a, env))
                .collect::<Result<_, _>>()?;
            if name == "file" && args.iter().any(Ast::has_references) {
                return Err(EvalError::Type(
                    "`file()` takes a path known before planning, not a resource's property".into(),
                ));
            }
            Ast::Call(name.clone(), args)
        }
        Ast::ModuleOutput(name, key, output) => env.module_output(name, key.as_deref(), output)?,
        Ast::Param(name) => env.param_ast(name)?,
        // Without references inside: folded whole above.
        Ast::Const(_)
        | Ast::Var(_)
        | Ast::Each(_)
        | Ast::CountIndex
        | Ast::StackDir
        | Ast::StackOutput(..)
        | Ast::Embedded(_) => ast.clone(),
    };
    // A module's output may turn out to be known: then so is the whole.
    if out.has_references() {
        Ok(out)
    } else {
        eval_in(&out, &Scope::Parse(env)).map(Ast::Const)
    }
}

/// The value of a folded `ast`, its references looked up in `outputs`.
pub fn eval(ast: &Ast, outputs: &dyn Fn(&Reference) -> Option<Value>) -> Result<Value, EvalError> {
    eval_in(ast, &Scope::Resolve(outputs))
}

/// The value of `ast` in `scope`; at parse time counted against the
/// document's [`Budget`].
fn eval_in(ast: &Ast, scope: &Scope<'_, '_>) -> Result<Value, EvalError> {
    let value = eval_node(ast, scope)?;
    if let Scope::Parse(env) = scope {
        env.budget.charge(&value)?;
    }
    Ok(value)
}

fn eval_node(ast: &Ast, scope: &Scope<'_, '_>) -> Result<Value, EvalError> {
    let env = |what: &str| match scope {
        Scope::Parse(env) => Ok(*env),
        Scope::Resolve(_) => Err(EvalError::Unknown(format!(
            "{what} is not known at apply time"
        ))),
    };
    Ok(match ast {
        Ast::Const(v) => v.clone(),
        Ast::Param(name) => {
            let env = env("a parameter")?;
            let known = env.params.get(name).ok_or_else(|| {
                EvalError::Unknown(format!(
                    "`param.{name}`: the document declares no parameter `{name}`"
                ))
            })?;
            if known.pending.is_some() {
                return Err(EvalError::Type(format!(
                    "`param.{name}` is a resource's property passed to the module, so it is not known before planning"
                )));
            }
            if known.secret {
                env.secret.set(true);
            }
            known.value.clone()
        }
        Ast::Var(name) => {
            let env = env("a variable")?;
            let known = env.vars.get(name).ok_or_else(|| {
                EvalError::Unknown(format!(
                    "`var.{name}`: the document declares no variable `{name}`"
                ))
            })?;
            if known.secret {
                env.secret.set(true);
            }
            known.value.clone()
        }
        Ast::Each(key) => {
            let (k, v) = env("`each`")?.each.ok_or_else(|| {
                EvalError::Unknown("`each` is only known in a resource with `for_each`".into())
            })?;
            if *key {
                k.clone()
            } else {
                v.clone()
            }
        }
        Ast::CountIndex => Value::Int(env("`count`")?.count.ok_or_else(|| {
            EvalError::Unknown("`count.index` is only known in a resource with `count`".into())
        })?),
        Ast::StackDir => Value::String(env("`stack_dir`")?.stack_dir.to_owned()),
        Ast::InstanceRef(label, _, property) => {
            return Err(EvalError::Unknown(format!(
                "`{label}[…].{property}`: a resource's property is not known here"
            )))
        }
        Ast::Ref(r) => match scope {
            Scope::Resolve(outputs) => outputs(r).ok_or(EvalError::Pending)?,
            Scope::Parse(_) => {
                return Err(EvalError::Unknown(format!(
                    "`{}.{}`: a resource's property is not known here",
                    r.resource, r.property
                )))
            }
        },
        Ast::ModuleOutput(name, key, output) => match scope {
            Scope::Parse(env) => match env.module_output(name, key.as_deref(), output)? {
                Ast::Const(v) => v,
                _ => {
                    return Err(EvalError::Type(format!(
                        "`module.{name}….outputs.{output}` depends on the module's resources, so it is not known before planning"
                    )))
                }
            },
            Scope::Resolve(_) => return Err(EvalError::Unknown(format!(
                "`module.{name}….outputs.{output}` is not known at apply time"
            ))),
        },
        Ast::StackOutput(name, output) => match scope {
            Scope::Parse(env) => stack_output(env, name, output)?,
            Scope::Resolve(_) => {
                return Err(EvalError::Unknown(format!(
                    "`stacks.{name}.outputs.{output}` is not known at apply time"
                )))
            }
        },
        Ast::Embedded(e) => match scope {
            Scope::Resolve(outputs) => e.resolve(outputs).ok_or(EvalError::Pending)?,
            Scope::Parse(_) => {
                return Err(EvalError::Type(
                    "a module's output that depends on its resources is not known before planning"
                        .into(),
                ))
            }
        },
        Ast::Attr(a, name) => match eval_in(a, scope)? {
            Value::Map(mut m) => m
                .remove(name)
                .ok_or_else(|| EvalError::Type(format!("the map has no key `{name}`")))?,
            other => {
                return Err(EvalError::Type(format!(
                    "`.{name}` needs a map, not {}",
                    type_name(&other)
                )))
            }
        },
        Ast::Index(a, i) => index(eval_in(a, scope)?, eval_in(i, scope)?)?,
        Ast::List(items) => Value::List(
            items
                .iter()
                .map(|a| eval_in(a, scope))
                .collect::<Result<_, _>>()?,
        ),
        Ast::Call(name, args) => {
            let files = match scope {
                Scope::Parse(env) => Some(env.files),
                Scope::Resolve(_) => None,
            };
            let args = args
                .iter()
                .map(|a| eval_in(a, scope))
                .collect::<Result<Vec<_>, _>>()?;
            functions::call(name, args, files)?
        }
        Ast::Unary(Op::Not, a) => Value::Bool(!truth(&eval_in(a, scope)?)?),
        Ast::Unary(_, a) => match eval_in(a, scope)? {
            Value::Int(i) => Value::Int(i.checked_neg().ok_or_else(overflow)?),
            Value::Float(f) => Value::Float(-f),
            other => {
                return Err(EvalError::Type(format!(
                    "`-` needs a number, not {}",
                    type_name(&other)
                )))
            }
        },
        Ast::Cond(c, a, b) => {
            if truth(&eval_in(c, scope)?)? {
                eval_in(a, scope)?
            } else {
                eval_in(b, scope)?
            }
        }
        Ast::Binary(Op::And, a, b) => {
            Value::Bool(truth(&eval_in(a, scope)?)? && truth(&eval_in(b, scope)?)?)
        }
        Ast::Binary(Op::Or, a, b) => {
            Value::Bool(truth(&eval_in(a, scope)?)? || truth(&eval_in(b, scope)?)?)
        }
        Ast::Binary(op, a, b) => binary(*op, eval_in(a, scope)?, eval_in(b, scope)?)?,
    })
}

/// `stacks.NAME.outputs.OUTPUT`: the value stack `name` recorded.
fn stack_output(env: &Env<'_>, name: &str, output: &str) -> Result<Value, EvalError> {
    let at = format!("`stacks.{name}.outputs.{output}`");
    let read = env.stacks.ok_or_else(|| {
        EvalError::Unknown(format!(
            "{at}: other stacks' outputs cannot be read here (only by plan and apply)"
        ))
    })?;
    let outputs = read(name).ok_or_else(|| {
        EvalError::Unknown(format!(
            "{at}: stack `{name}` has recorded no outputs (apply it first)"
        ))
    })?;
    let entry = outputs.get(output).ok_or_else(|| {
        EvalError::Unknown(format!("{at}: stack `{name}` has no output `{output}`"))
    })?;
    let Value::Map(entry) = entry else {
        return Err(EvalError::Unknown(format!(
            "{at}: its record is not an output"
        )));
    };
    if let Some(v) = entry.get("value") {
        return Ok(v.clone());
    }
    if entry.contains_key("secret") {
        return Err(EvalError::Type(format!(
            "{at}: the output is secret: its value is never stored, so another stack cannot read it"
        )));
    }
    Err(EvalError::Unknown(format!(
        "{at}: the output is unknown (a resource it needs failed in stack `{name}`'s last apply)"
    )))
}

fn overflow() -> EvalError {
    EvalError::Type("the number is out of range".into())
}

/// The name of a value's type, for messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Int(_) | Value::UInt(_) | Value::Float(_) => "a number",
        Value::String(_) => "a string",
        Value::Bytes(_) => "bytes",
        Value::List(_) => "a list",
        Value::Map(_) => "a map",
    }
}

fn truth(v: &Value) -> Result<bool, EvalError> {
    match v {
        Value::Bool(b) => Ok(*b),
        other => Err(EvalError::Type(format!(
            "a condition must be a bool, not {}",
            type_name(other)
        ))),
    }
}

/// A number as a float, if it is one.
pub fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::UInt(u) => Some(*u as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    }
}

fn index(base: Value, i: Value) -> Result<Value, EvalError> {
    match (base, i) {
        (Value::List(items), Value::Int(i)) => {
            let len = items.len();
            usize::try_from(i)
                .ok()
                .and_then(|i| items.into_iter().nth(i))
                .ok_or_else(|| {
                    EvalError::Type(format!("index {i} is outside the list of {len} items"))
                })
        }
        (Value::Map(mut m), Value::String(k)) => m
            .remove(&k)
            // Not the key: it may be computed from a secret or another
            // stack's output (issue #43).
            .ok_or_else(|| EvalError::Type("the map has no such key".into())),
        (base, i) => Err(EvalError::Type(format!(
            "cannot index {} with {}",
            type_name(&base),
            type_name(&i)
        ))),
    }
}

fn binary(op: Op, a: Value, b: Value) -> Result<Value, EvalError> {
    use std::cmp::Ordering;
    let order = |a: &Value, b: &Value| -> Result<Ordering, EvalError> {
        match (a, b) {
            (Value::String(x), Value::String(y)) => Ok(x.cmp(y)),
            _ => match (number(a), number(b)) {
                (Some(x), Some(y)) => x.partial_cmp(&y).ok_or_else(overflow),
                _ => Err(EvalError::Type(format!(
                    "cannot compare {} with {}",
                    type_name(a),
                    type_name(b)
                ))),
            },
        }
    };
    let equal = |a: &Value, b: &Value| match (number(a), number(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    };
    Ok(match op {
        Op::Eq => Value::Bool(equal(&a, &b)),
        Op::Ne => Value::Bool(!equal(&a, &b)),
        Op::Lt => Value::Bool(order(&a, &b)? == Ordering::Less),
        Op::Le => Value::Bool(order(&a, &b)? != Ordering::Greater),
        Op::Gt => Value::Bool(order(&a, &b)? == Ordering::Greater),
        Op::Ge => Value::Bool(order(&a, &b)? != Ordering::Less),
        Op::Plus => match (a, b) {
            (Value::String(x), Value::String(y)) => {
                functions::bounded_text(x.len() + y.len())?;
                Value::String(x + &y)
            }
            (a, b) => arithmetic(op, &a, &b)?,
        },
        _ => arithmetic(op, &a, &b)?,
    })
}

fn arithmetic(op: Op, a: &Value, b: &Value) -> Result<Value, EvalError> {
    if let (Value::Int(x), Value::Int(y)) = (a, b) {
        let (x, y) = (*x, *y);
        let r = match op {
            Op::Plus => x.checked_add(y),
            Op::Minus => x.checked_sub(y),
            Op::Times => x.checked_mul(y),
            Op::Divide | Op::Rem if y == 0 => {
                return Err(EvalError::Type("division by zero".into()))
            }
            Op::Divide => x.checked_div(y),
            _ => x.checked_rem(y),
        };
        return r.map(Value::Int).ok_or_else(overflow);
    }
    match (number(a), number(b)) {
        (Some(x), Some(y)) => {
            let r = match op {
                Op::Plus => x + y,
                Op::Minus => x - y,
                Op::Times => x * y,
                Op::Divide => x / y,
                _ => x % y,
            };
            if r.is_finite() {
                Ok(Value::Float(r))
            } else {
                Err(overflow())
            }
        }
        _ => Err(EvalError::Type(format!(
            "arithmetic needs numbers, not {} and {}",
            type_name(a),
            type_name(b)
        ))),
    }
}
