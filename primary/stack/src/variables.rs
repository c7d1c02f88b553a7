//! `variables:`: named values computed from parameters, other variables
//! and functions before anything is planned, in the order they need each
//! other; a circle is an error.

use std::cell::Cell;
use std::collections::BTreeMap;

use orrery_schema::Value;

use super::eval::{Env, EvalError, Known};
use super::expr::Expr;
use super::syntax::{parse_embedded, Ast};

/// Every variable's value. `base` gives the parameters, `stack_dir` and
/// the file reader; its variables are ignored.
pub(super) fn compute(
    declared: &BTreeMap<String, Value>,
    base: &Env<'_>,
) -> Result<BTreeMap<String, Known>, (String, EvalError)> {
    let mut done = BTreeMap::new();
    let mut visiting: Vec<String> = Vec::new();
    for name in declared.keys() {
        visit(name, declared, base, &mut done, &mut visiting)?;
    }
    Ok(done)
}

fn visit(
    name: &str,
    declared: &BTreeMap<String, Value>,
    base: &Env<'_>,
    done: &mut BTreeMap<String, Known>,
    visiting: &mut Vec<String>,
) -> Result<(), (String, EvalError)> {
    if done.contains_key(name) {
        return Ok(());
    }
    if let Some(at) = visiting.iter().position(|v| v == name) {
        let mut cycle = visiting[at..].to_vec();
        cycle.push(name.to_owned());
        return Err((name.to_owned(), EvalError::Cycle(cycle)));
    }
    // An unknown `var.NAME` is reported when the value is evaluated.
    let Some(value) = declared.get(name) else {
        return Ok(());
    };
    visiting.push(name.to_owned());
    let mut needs = Vec::new();
    uses(value, &mut needs);
    for n in needs {
        visit(&n, declared, base, done, visiting)?;
    }
    visiting.pop();
    let env = Env {
        params: base.params,
        vars: done,
        each: None,
        count: None,
        stack_dir: base.stack_dir,
        files: base.files,
        modules: base.modules,
        stacks: base.stacks,
        prefix: base.prefix,
        secret: Cell::new(false),
        budget: base.budget,
    };
    let fail = |e| (name.to_owned(), e);
    let value =
        match Expr::from_value(value.clone(), &env).map_err(fail)? {
            Expr::Literal(v) => v,
            _ => return Err(fail(EvalError::Type(
                "a variable cannot reference a resource: variables are computed before planning"
                    .into(),
            ))),
        };
    let secret = env.secret.get();
    done.insert(name.to_owned(), Known::new(value, secret));
    Ok(())
}

/// The variables `value`'s expressions name.
fn uses(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some(start) = rest.find("${") {
                match parse_embedded(&rest[start + 2..]) {
                    Ok((ast, used)) => {
                        vars_of(&ast, out);
                        rest = &rest[start + 2 + used..];
                    }
                    Err(_) => return,
                }
            }
        }
        Value::List(items) => items.iter().for_each(|v| uses(v, out)),
        Value::Map(m) => m.values().for_each(|v| uses(v, out)),
        _ => {}
    }
}

fn vars_of(ast: &Ast, out: &mut Vec<String>) {
    match ast {
        Ast::Var(n) => out.push(n.clone()),
        Ast::Attr(a, _) | Ast::Unary(_, a) | Ast::InstanceRef(_, a, _) => vars_of(a, out),
        Ast::ModuleOutput(_, Some(a), _) => vars_of(a, out),
        Ast::Index(a, b) | Ast::Binary(_, a, b) => {
            vars_of(a, out);
            vars_of(b, out);
        }
        Ast::Cond(a, b, c) => {
            vars_of(a, out);
            vars_of(b, out);
            vars_of(c, out);
        }
        Ast::List(items) | Ast::Call(_, items) => items.iter().for_each(|a| vars_of(a, out)),
        Ast::Const(_)
        | Ast::Param(_)
        | Ast::Each(_)
        | Ast::CountIndex
        | Ast::StackDir
        | Ast::Ref(_)
        | Ast::ModuleOutput(_, None, _)
        | Ast::StackOutput(..)
        | Ast::Embedded(_) => {}
    }
}
