//! The functions expressions may call. Each is deterministic and bounded:
//! results are held to [`MAX_STRING_BYTES`] and [`MAX_ITEMS`].

use base64::Engine as _;
use orrery_schema::{PropertyMap, Value};

use super::eval::{
    number, type_name, EvalError, FileReader, MAX_FILE_BYTES, MAX_ITEMS, MAX_STRING_BYTES,
};

/// Every function, with how many arguments it takes (least, most).
pub const FUNCTIONS: &[(&str, usize, usize)] = &[
    ("format", 1, usize::MAX),
    ("join", 2, 2),
    ("split", 2, 2),
    ("upper", 1, 1),
    ("lower", 1, 1),
    ("replace", 3, 3),
    ("concat", 0, usize::MAX),
    ("merge", 0, usize::MAX),
    ("lookup", 2, 3),
    ("keys", 1, 1),
    ("values", 1, 1),
    ("length", 1, 1),
    ("range", 1, 3),
    ("tostring", 1, 1),
    ("jsonencode", 1, 1),
    ("jsondecode", 1, 1),
    ("base64encode", 1, 1),
    ("base64decode", 1, 1),
    ("file", 1, 1),
];

/// An error unless `name` is a function.
pub fn check_name(name: &str) -> Result<(), EvalError> {
    if FUNCTIONS.iter().any(|(n, _, _)| *n == name) {
        return Ok(());
    }
    Err(EvalError::Unknown(format!("unknown function `{name}`")))
}

/// An error if a string of `len` bytes would be too long.
pub fn bounded_text(len: usize) -> Result<(), EvalError> {
    if len > MAX_STRING_BYTES {
        return Err(EvalError::Limit(format!(
            "a string of more than {MAX_STRING_BYTES} bytes"
        )));
    }
    Ok(())
}

fn bounded_items(len: usize) -> Result<(), EvalError> {
    if len > MAX_ITEMS {
        return Err(EvalError::Limit(format!(
            "a list or map of more than {MAX_ITEMS} items"
        )));
    }
    Ok(())
}

fn text(v: String) -> Result<Value, EvalError> {
    bounded_text(v.len())?;
    Ok(Value::String(v))
}

/// A value as text inside a string: strings as they are, numbers and
/// booleans written out, null as nothing, lists and maps as JSON.
pub fn as_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// Calls function `name`. `files` is `None` at apply time, where `file()`
/// is not allowed (its path must be known when parsing).
pub fn call(
    name: &str,
    args: Vec<Value>,
    files: Option<FileReader<'_>>,
) -> Result<Value, EvalError> {
    let &(_, least, most) = FUNCTIONS
        .iter()
        .find(|(n, _, _)| *n == name)
        .ok_or_else(|| EvalError::Unknown(format!("unknown function `{name}`")))?;
    if args.len() < least || args.len() > most {
        let takes = match (least, most) {
            (l, m) if l == m => format!("{l}"),
            (l, usize::MAX) => format!("at least {l}"),
            (l, m) => format!("{l} to {m}"),
        };
        return Err(EvalError::Type(format!(
            "`{name}` takes {takes} arguments, not {}",
            args.len()
        )));
    }
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let string = |i: usize| -> Result<String, EvalError> {
        match arg(i) {
            Value::String(s) => Ok(s),
            other => Err(EvalError::Type(format!(
                "`{name}` argument {} must be a string, not {}",
                i + 1,
                type_name(&other)
            ))),
        }
    };
    let list = |i: usize| -> Result<Vec<Value>, EvalError> {
        match arg(i) {
            Value::List(l) => Ok(l),
            other => Err(EvalError::Type(format!(
                "`{name}` argument {} must be a list, not {}",
                i + 1,
                type_name(&other)
            ))),
        }
    };
    let map = |i: usize| -> Result<PropertyMap, EvalError> {
        match arg(i) {
            Value::Map(m) => Ok(m),
            other => Err(EvalError::Type(format!(
                "`{name}` argument {} must be a map, not {}",
                i + 1,
                type_name(&other)
            ))),
        }
    };
    match name {
        "format" => format(&string(0)?, &args[1..]),
        "join" => {
            let sep = string(0)?;
            let parts: Vec<String> = list(1)?.iter().map(as_text).collect();
            text(parts.join(&sep))
        }
        "split" => {
            let (sep, s) = (string(0)?, string(1)?);
            if sep.is_empty() {
                return Err(EvalError::Type(
                    "`split` needs a non-empty separator".into(),
                ));
            }
            let parts: Vec<Value> = s.split(&sep).map(Value::from).collect();
            bounded_items(parts.len())?;
            Ok(Value::List(parts))
        }
        "upper" => text(string(0)?.to_uppercase()),
        "lower" => text(string(0)?.to_lowercase()),
        "replace" => {
            let (s, from, to) = (string(0)?, string(1)?, string(2)?);
            if from.is_empty() {
                return Err(EvalError::Type(
                    "`replace` needs a non-empty substring".into(),
                ));
            }
            // Bound before building: each match may grow the text.
            let grows = to.len().saturating_sub(from.len());
            bounded_text(s.len() + s.matches(&from).count().saturating_mul(grows))?;
            text(s.replace(&from, &to))
        }
        "concat" => {
            let mut out = Vec::new();
            for i in 0..args.len() {
                out.extend(list(i)?);
                bounded_items(out.len())?;
            }
            Ok(Value::List(out))
        }
        "merge" => {
            let mut out = PropertyMap::new();
            for i in 0..args.len() {
                out.extend(map(i)?);
                bounded_items(out.len())?;
            }
            Ok(Value::Map(out))
        }
        "lookup" => {
            let (m, key) = (map(0)?, string(1)?);
            match m.get(&key) {
                Some(v) => Ok(v.clone()),
                None if args.len() == 3 => Ok(arg(2)),
                // Not the key: it may be computed from a secret or
                // another stack's output (issue #43).
                None => Err(EvalError::Type(
                    "`lookup`: the map has no such key (give a default as the third argument)"
                        .into(),
                )),
            }
        }
        "keys" => Ok(Value::List(
            map(0)?.into_keys().map(Value::String).collect(),
        )),
        "values" => Ok(Value::List(map(0)?.into_values().collect())),
        "length" => match arg(0) {
            Value::String(s) => Ok(Value::Int(s.chars().count() as i64)),
            Value::List(l) => Ok(Value::Int(l.len() as i64)),
            Value::Map(m) => Ok(Value::Int(m.len() as i64)),
            other => Err(EvalError::Type(format!(
                "`length` needs a string, list or map, not {}",
                type_name(&other)
            ))),
        },
        "range" => range(&args),
        "tostring" => text(as_text(&arg(0))),
        "jsonencode" => text(
            serde_json::to_string(&arg(0))
                .map_err(|e| EvalError::Type(format!("`jsonencode`: {e}")))?,
        ),
        "jsondecode" => serde_json::from_str::<Value>(&string(0)?)
            .map_err(|e| EvalError::Type(format!("`jsondecode`: {e}"))),
        "base64encode" => {
            let s = string(0)?;
            bounded_text(s.len() / 3 * 4 + 4)?;
            text(base64::engine::general_purpose::STANDARD.encode(s))
        }
        "base64decode" => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(string(0)?)
                // Not the decoder's message: it quotes the offending byte.
                .map_err(|_| EvalError::Type("`base64decode`: the text is not base64".into()))?;
            String::from_utf8(bytes)
                .map(Value::String)
                .map_err(|_| EvalError::Type("`base64decode`: the result is not UTF-8".into()))
        }
        "file" => {
            let path = string(0)?;
            let read = files.ok_or_else(|| {
                EvalError::Type("`file()` takes a path known before planning".into())
            })?;
            let content =
                read(&path).map_err(|e| EvalError::File(format!("`file({path:?})`: {e}")))?;
            if content.len() > MAX_FILE_BYTES {
                return Err(EvalError::Limit(format!(
                    "`file({path:?})`: the file is more than {MAX_FILE_BYTES} bytes"
                )));
            }
            Ok(Value::String(content))
        }
        _ => Err(EvalError::Unknown(format!("unknown function `{name}`"))),
    }
}

/// `format("%s-%d", a, n)`: `%s` any value as text, `%d` an integer,
/// `%%` a percent sign.
fn format(spec: &str, args: &[Value]) -> Result<Value, EvalError> {
    let mut out = String::new();
    let mut next = args.iter();
    let mut chars = spec.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some(verb @ ('s' | 'd')) => {
                let v = next
                    .next()
                    .ok_or_else(|| EvalError::Type("`format`: more verbs than arguments".into()))?;
                if verb == 'd' && !matches!(v, Value::Int(_) | Value::UInt(_)) {
                    return Err(EvalError::Type(format!(
                        "`format`: `%d` needs an integer, not {}",
                        type_name(v)
                    )));
                }
                out.push_str(&as_text(v));
                bounded_text(out.len())?;
            }
            // Not the character: a computed format may hold a secret.
            _ => {
                return Err(EvalError::Type(
                    "`format`: an unknown verb after `%` (use %s, %d or %%)".into(),
                ))
            }
        }
    }
    if next.next().is_some() {
        return Err(EvalError::Type(
            "`format`: more arguments than verbs".into(),
        ));
    }
    text(out)
}

/// `range(end)`, `range(start, end)`, `range(start, end, step)`: integers
/// from `start` (0) up to, not including, `end`.
fn range(args: &[Value]) -> Result<Value, EvalError> {
    let int = |v: &Value| match v {
        Value::Int(i) => Ok(*i),
        other => Err(EvalError::Type(format!(
            "`range` needs integers, not {}",
            if number(other).is_some() {
                "a fraction"
            } else {
                type_name(other)
            }
        ))),
    };
    let (start, end, step) = match args {
        [end] => (0, int(end)?, 1),
        [start, end] => (int(start)?, int(end)?, 1),
        [start, end, step] => (int(start)?, int(end)?, int(step)?),
        _ => return Err(EvalError::Type("`range` takes 1 to 3 arguments".into())),
    };
    if step == 0 {
        return Err(EvalError::Type("`range`: the step cannot be 0".into()));
    }
    let len = if (step > 0 && end > start) || (step < 0 && end < start) {
        (end as i128 - start as i128)
            .unsigned_abs()
            .div_ceil(step.unsigned_abs() as u128)
    } else {
        0
    };
    bounded_items(usize::try_from(len).unwrap_or(usize::MAX))?;
    Ok(Value::List(
        (0..len as i64)
            .map(|i| Value::Int(start + i * step))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call0(name: &str, args: Vec<Value>) -> Result<Value, EvalError> {
        call(name, args, None)
    }

    fn s(v: &str) -> Value {
        Value::from(v)
    }

    #[test]
    fn strings() {
        assert_eq!(
            call0("format", vec![s("%s-%d%%"), s("a"), Value::Int(3)]),
            Ok(s("a-3%"))
        );
        assert_eq!(
            call0(
                "join",
                vec![s(","), Value::List(vec![s("a"), Value::Int(1)])]
            ),
            Ok(s("a,1"))
        );
        assert_eq!(
            call0("split", vec![s(","), s("a,b")]),
            Ok(Value::List(vec![s("a"), s("b")]))
        );
        assert_eq!(call0("upper", vec![s("ab")]), Ok(s("AB")));
        assert_eq!(
            call0("replace", vec![s("a.b.c"), s("."), s("/")]),
            Ok(s("a/b/c"))
        );
        assert_eq!(
            call0(
                "base64decode",
                vec![call0("base64encode", vec![s("hé")]).unwrap()]
            ),
            Ok(s("hé"))
        );
        assert_eq!(
            call0("jsonencode", vec![Value::List(vec![Value::Int(1), s("x")])]),
            Ok(s("[1,\"x\"]"))
        );
        assert_eq!(
            call0("jsondecode", vec![s("{\"a\": [true]}")]).unwrap(),
            Value::Map(PropertyMap::from([(
                "a".into(),
                Value::List(vec![Value::Bool(true)])
            )]))
        );
    }

    #[test]
    fn collections() {
        let m = |k: &str, v: i64| Value::Map(PropertyMap::from([(k.into(), Value::Int(v))]));
        assert_eq!(call0("merge", vec![m("a", 1), m("a", 2)]), Ok(m("a", 2)));
        assert_eq!(
            call0("lookup", vec![m("a", 1), s("b"), Value::Int(9)]),
            Ok(Value::Int(9))
        );
        assert_eq!(
            call0("keys", vec![m("a", 1)]),
            Ok(Value::List(vec![s("a")]))
        );
        assert_eq!(call0("length", vec![s("hé")]), Ok(Value::Int(2)));
        assert_eq!(
            call0("range", vec![Value::Int(1), Value::Int(7), Value::Int(3)]),
            Ok(Value::List(vec![Value::Int(1), Value::Int(4)]))
        );
        assert_eq!(
            call0("range", vec![Value::Int(3), Value::Int(0), Value::Int(-2)]),
            Ok(Value::List(vec![Value::Int(3), Value::Int(1)]))
        );
    }

    #[test]
    fn hostile_arguments_are_typed_errors_within_the_limits() {
        assert!(matches!(
            call0("range", vec![Value::Int(i64::MAX)]),
            Err(EvalError::Limit(_))
        ));
        assert!(matches!(
            call0("range", vec![Value::Int(i64::MIN), Value::Int(i64::MAX)]),
            Err(EvalError::Limit(_))
        ));
        let big = s(&"a".repeat(1 << 19));
        assert!(matches!(
            call0("replace", vec![big, s("a"), s("aaaa")]),
            Err(EvalError::Limit(_))
        ));
        assert!(matches!(
            call0("range", vec![Value::Int(0), Value::Int(1), Value::Int(0)]),
            Err(EvalError::Type(_))
        ));
        assert_eq!(
            call0("upper", vec![Value::Int(1)]).unwrap_err().to_string(),
            "`upper` argument 1 must be a string, not a number"
        );
        assert_eq!(
            call0("join", vec![s(",")]).unwrap_err().to_string(),
            "`join` takes 2 arguments, not 1"
        );
        assert!(matches!(
            call0("file", vec![s("x")]),
            Err(EvalError::Type(_))
        ));
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(matches!(
            call0("jsondecode", vec![s(&deep)]),
            Err(EvalError::Type(_))
        ));
    }
}
