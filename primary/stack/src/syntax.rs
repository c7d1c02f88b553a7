//! The expression language inside `${…}`: tokens and a precedence-climbing
//! parser into [`Ast`]. Nesting is bounded ([`MAX_NESTING`]), so hostile
//! text cannot exhaust the stack.

use orrery_schema::Value;

use super::eval::EvalError;
use super::expr::{Expr, Reference};

/// Deepest nesting of parentheses, calls, lists and operators in one
/// expression.
pub const MAX_NESTING: usize = 64;

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Ast {
    /// A literal, or a value already known when the document was parsed.
    Const(Value),
    /// `param.NAME`.
    Param(String),
    /// `var.NAME`.
    Var(String),
    /// `each.key` or `each.value` (`true` for the key).
    Each(bool),
    /// `count.index`.
    CountIndex,
    /// `stack_dir`.
    StackDir,
    /// `label.property`: a resource's recorded property.
    Ref(Reference),
    /// `label[key].property`: an instance's recorded property; the key is
    /// computed when the document is parsed, making it a [`Ast::Ref`].
    InstanceRef(String, Box<Ast>, String),
    /// `x.name`: a map's entry.
    Attr(Box<Ast>, String),
    /// `x[i]`: a list's item or a map's entry.
    Index(Box<Ast>, Box<Ast>),
    /// `[a, b]`.
    List(Vec<Ast>),
    /// `name(args)`.
    Call(String, Vec<Ast>),
    /// `!x`, `-x`.
    Unary(Op, Box<Ast>),
    /// `a OP b`.
    Binary(Op, Box<Ast>, Box<Ast>),
    /// `cond ? a : b`.
    Cond(Box<Ast>, Box<Ast>, Box<Ast>),
    /// `module.NAME.outputs.OUTPUT` or `module.NAME[key].outputs.OUTPUT`:
    /// a module's output, replaced by its value (or [`Ast::Embedded`])
    /// when the document is parsed.
    ModuleOutput(String, Option<Box<Ast>>, String),
    /// `stacks.NAME.outputs.OUTPUT`: another stack's recorded output,
    /// read when the document is parsed.
    StackOutput(String, String),
    /// A module's output that references the module's resources, kept
    /// whole to be finished at plan time.
    Embedded(Box<Expr>),
}

/// Operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `!`
    Not,
    /// unary or binary `-`
    Minus,
    /// `+`
    Plus,
    /// `*`
    Times,
    /// `/`
    Divide,
    /// `%`
    Rem,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `&&`
    And,
    /// `||`
    Or,
}

impl Ast {
    /// Every resource reference inside.
    pub fn references(&self, out: &mut Vec<Reference>) {
        match self {
            Ast::Ref(r) => out.push(r.clone()),
            // Never left once parsed: folding makes it a `Ref`, a constant
            // or what a module's output or parameter holds.
            Ast::InstanceRef(..) | Ast::ModuleOutput(..) | Ast::Param(_) => {}
            Ast::Embedded(e) => e.references(out),
            Ast::Attr(a, _) | Ast::Unary(_, a) => a.references(out),
            Ast::Index(a, b) | Ast::Binary(_, a, b) => {
                a.references(out);
                b.references(out);
            }
            Ast::Cond(a, b, c) => {
                a.references(out);
                b.references(out);
                c.references(out);
            }
            Ast::List(items) | Ast::Call(_, items) => items.iter().for_each(|e| e.references(out)),
            Ast::Const(_)
            | Ast::Var(_)
            | Ast::Each(_)
            | Ast::CountIndex
            | Ast::StackDir
            | Ast::StackOutput(..) => {}
        }
    }

    /// Whether a resource reference is inside.
    pub fn has_references(&self) -> bool {
        match self {
            // What a module's output, or a module's parameter (given a
            // resource's property), holds is only known once folded.
            Ast::Ref(_)
            | Ast::InstanceRef(..)
            | Ast::ModuleOutput(..)
            | Ast::Param(_)
            | Ast::Embedded(_) => true,
            Ast::Attr(a, _) | Ast::Unary(_, a) => a.has_references(),
            Ast::Index(a, b) | Ast::Binary(_, a, b) => a.has_references() || b.has_references(),
            Ast::Cond(a, b, c) => a.has_references() || b.has_references() || c.has_references(),
            Ast::List(items) | Ast::Call(_, items) => items.iter().any(Ast::has_references),
            Ast::Const(_)
            | Ast::Var(_)
            | Ast::Each(_)
            | Ast::CountIndex
            | Ast::StackDir
            | Ast::StackOutput(..) => false,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(Value),
    Str(String),
    Ident(String),
    Punct(&'static str),
}

const PUNCTS: &[&str] = &[
    "==", "!=", "<=", ">=", "&&", "||", "(", ")", "[", "]", ",", ".", "?", ":", "<", ">", "!", "+",
    "-", "*", "/", "%", "}",
];

struct Lexer<'a> {
    text: &'a str,
    pos: usize,
}

impl Lexer<'_> {
    fn skip_space(&mut self) {
        let rest = &self.text[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    /// The next token and where it starts; `None` at the end.
    fn next(&mut self) -> Result<Option<(Tok, usize)>, EvalError> {
        self.skip_space();
        let start = self.pos;
        let rest = &self.text[start..];
        let Some(c) = rest.chars().next() else {
            return Ok(None);
        };
        if c.is_ascii_digit() {
            let len = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
                .unwrap_or(rest.len());
            let digits = rest[..len].replace('_', "");
            self.pos += len;
            let num = if digits.contains('.') {
                digits.parse::<f64>().map(Value::Float).ok()
            } else {
                digits.parse::<i64>().map(Value::Int).ok()
            };
            return num
                .map(|n| Some((Tok::Num(n), start)))
                .ok_or_else(|| EvalError::Syntax(format!("bad number `{digits}`")));
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let bytes = rest.as_bytes();
            let mut len = 0;
            while len < bytes.len() {
                let b = bytes[len];
                let word = b.is_ascii_alphanumeric() || b == b'_';
                // `-` joins a label (`config-dir`) only between word characters.
                let dash = b == b'-'
                    && bytes
                        .get(len + 1)
                        .is_some_and(|n| n.is_ascii_alphanumeric() || *n == b'_');
                if !(word || dash) {
                    break;
                }
                len += 1;
            }
            self.pos += len;
            return Ok(Some((Tok::Ident(rest[..len].to_owned()), start)));
        }
        if c == '"' || c == '\'' {
            let mut out = String::new();
            let mut chars = rest.char_indices().skip(1);
            while let Some((i, ch)) = chars.next() {
                match ch {
                    _ if ch == c => {
                        self.pos += i + 1;
                        return Ok(Some((Tok::Str(out), start)));
                    }
                    '\\' => match chars.next().map(|(_, e)| e) {
                        Some('n') => out.push('\n'),
                        Some('t') => out.push('\t'),
                        Some(e @ ('\\' | '"' | '\'')) => out.push(e),
                        other => {
                            return Err(EvalError::Syntax(format!(
                                "unknown escape `\\{}` in a string",
                                other.map(String::from).unwrap_or_default()
                            )))
                        }
                    },
                    _ => out.push(ch),
                }
            }
            return Err(EvalError::Syntax("unclosed string".into()));
        }
        for p in PUNCTS {
            if rest.starts_with(p) {
                self.pos += p.len();
                return Ok(Some((Tok::Punct(p), start)));
            }
        }
        Err(EvalError::Syntax(format!("unexpected `{c}`")))
    }
}

struct Parser<'a> {
    lexer: Lexer<'a>,
    peeked: Option<Option<(Tok, usize)>>,
    depth: usize,
}

/// Parses the expression that starts `text` (just after `${`) up to its
/// closing `}`; returns it and the length of text consumed, `}` included.
pub fn parse_embedded(text: &str) -> Result<(Ast, usize), EvalError> {
    let mut p = Parser {
        lexer: Lexer { text, pos: 0 },
        peeked: None,
        depth: 0,
    };
    let ast = p.expr()?;
    match p.next()? {
        Some((Tok::Punct("}"), _)) => Ok((ast, p.lexer.pos)),
        Some((t, _)) => Err(EvalError::Syntax(format!(
            "expected `}}` after the expression, found {}",
            describe(&t)
        ))),
        None => Err(EvalError::Syntax("unclosed `${`".into())),
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Num(_) => "a number".into(),
        Tok::Str(_) => "a string".into(),
        Tok::Ident(i) => format!("`{i}`"),
        Tok::Punct(p) => format!("`{p}`"),
    }
}

impl Parser<'_> {
    fn peek(&mut self) -> Result<Option<&Tok>, EvalError> {
        if self.peeked.is_none() {
            self.peeked = Some(self.lexer.next()?);
        }
        Ok(self
            .peeked
            .as_ref()
            .and_then(|t| t.as_ref().map(|(t, _)| t)))
    }

    fn next(&mut self) -> Result<Option<(Tok, usize)>, EvalError> {
        match self.peeked.take() {
            Some(t) => Ok(t),
            None => self.lexer.next(),
        }
    }

    fn eat(&mut self, p: &str) -> Result<bool, EvalError> {
        if matches!(self.peek()?, Some(Tok::Punct(q)) if *q == p) {
            self.next()?;
            return Ok(true);
        }
        Ok(false)
    }

    fn expect(&mut self, p: &str) -> Result<(), EvalError> {
        match self.next()? {
            Some((Tok::Punct(q), _)) if q == p => Ok(()),
            Some((t, _)) => Err(EvalError::Syntax(format!(
                "expected `{p}`, found {}",
                describe(&t)
            ))),
            None => Err(EvalError::Syntax(format!("expected `{p}`, found the end"))),
        }
    }

    fn ident(&mut self) -> Result<String, EvalError> {
        match self.next()? {
            Some((Tok::Ident(i), _)) => Ok(i),
            Some((t, _)) => Err(EvalError::Syntax(format!(
                "expected a name, found {}",
                describe(&t)
            ))),
            None => Err(EvalError::Syntax("expected a name, found the end".into())),
        }
    }

    fn nest(&mut self) -> Result<(), EvalError> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(EvalError::Limit(format!(
                "the expression is nested more than {MAX_NESTING} deep"
            )));
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<Ast, EvalError> {
        self.nest()?;
        let cond = self.binary(0)?;
        let out = if self.eat("?")? {
            let a = self.expr()?;
            self.expect(":")?;
            let b = self.expr()?;
            Ast::Cond(Box::new(cond), Box::new(a), Box::new(b))
        } else {
            cond
        };
        self.depth -= 1;
        Ok(out)
    }

    /// Binary operators, loosest first.
    fn binary(&mut self, level: usize) -> Result<Ast, EvalError> {
        const LEVELS: &[&[(&str, Op)]] = &[
            &[("||", Op::Or)],
            &[("&&", Op::And)],
            &[
                ("==", Op::Eq),
                ("!=", Op::Ne),
                ("<=", Op::Le),
                (">=", Op::Ge),
                ("<", Op::Lt),
                (">", Op::Gt),
            ],
            &[("+", Op::Plus), ("-", Op::Minus)],
            &[("*", Op::Times), ("/", Op::Divide), ("%", Op::Rem)],
        ];
        let Some(ops) = LEVELS.get(level) else {
            return self.unary();
        };
        let mut left = self.binary(level + 1)?;
        loop {
            let op = match self.peek()? {
                Some(Tok::Punct(p)) => ops.iter().find(|(s, _)| s == p).map(|(_, op)| *op),
                _ => None,
            };
            let Some(op) = op else { return Ok(left) };
            self.next()?;
            self.nest()?;
            let right = self.binary(level + 1)?;
            self.depth -= 1;
            left = Ast::Binary(op, Box::new(left), Box::new(right));
        }
    }

    fn unary(&mut self) -> Result<Ast, EvalError> {
        for (p, op) in [("!", Op::Not), ("-", Op::Minus)] {
            if self.eat(p)? {
                self.nest()?;
                let inner = self.unary()?;
                self.depth -= 1;
                return Ok(Ast::Unary(op, Box::new(inner)));
            }
        }
        let mut base = self.primary()?;
        loop {
            if self.eat(".")? {
                base = Ast::Attr(Box::new(base), self.ident()?);
            } else if self.eat("[")? {
                let index = self.expr()?;
                self.expect("]")?;
                base = Ast::Index(Box::new(base), Box::new(index));
            } else {
                return Ok(base);
            }
        }
    }

    fn list(&mut self, close: &str) -> Result<Vec<Ast>, EvalError> {
        let mut items = Vec::new();
        if self.eat(close)? {
            return Ok(items);
        }
        loop {
            items.push(self.expr()?);
            if self.eat(close)? {
                return Ok(items);
            }
            self.expect(",")?;
        }
    }

    fn primary(&mut self) -> Result<Ast, EvalError> {
        let Some((tok, _)) = self.next()? else {
            return Err(EvalError::Syntax("expected a value, found the end".into()));
        };
        Ok(match tok {
            Tok::Num(n) => Ast::Const(n),
            Tok::Str(s) => Ast::Const(Value::String(s)),
            Tok::Punct("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                e
            }
            Tok::Punct("[") => {
                self.nest()?;
                let items = self.list("]")?;
                self.depth -= 1;
                Ast::List(items)
            }
            Tok::Ident(name) => match name.as_str() {
                "true" => Ast::Const(Value::Bool(true)),
                "false" => Ast::Const(Value::Bool(false)),
                "null" => Ast::Const(Value::Null),
                "stack_dir" => Ast::StackDir,
                "stacks" if self.eat(".")? => {
                    let name = self.ident()?;
                    self.expect(".")?;
                    let outputs = self.ident()?;
                    if outputs != "outputs" {
                        return Err(EvalError::Unknown(format!(
                            "`stacks.{name}.{outputs}`: another stack is read through its outputs: `stacks.{name}.outputs.NAME`"
                        )));
                    }
                    self.expect(".")?;
                    Ast::StackOutput(name, self.ident()?)
                }
                "module" if self.eat(".")? => {
                    let name = self.ident()?;
                    let key = if self.eat("[")? {
                        let key = self.expr()?;
                        self.expect("]")?;
                        Some(Box::new(key))
                    } else {
                        None
                    };
                    self.expect(".")?;
                    let outputs = self.ident()?;
                    if outputs != "outputs" {
                        return Err(EvalError::Unknown(format!(
                            "`module.{name}.{outputs}`: a module is read through its outputs: `module.{name}.outputs.NAME`"
                        )));
                    }
                    self.expect(".")?;
                    Ast::ModuleOutput(name, key, self.ident()?)
                }
                _ if self.eat("(")? => {
                    self.nest()?;
                    let args = self.list(")")?;
                    self.depth -= 1;
                    Ast::Call(name, args)
                }
                "param" | "var" | "each" | "count" => {
                    self.expect(".")?;
                    let field = self.ident()?;
                    match (name.as_str(), field.as_str()) {
                        ("param", _) => Ast::Param(field),
                        ("var", _) => Ast::Var(field),
                        ("each", "key") => Ast::Each(true),
                        ("each", "value") => Ast::Each(false),
                        ("count", "index") => Ast::CountIndex,
                        _ => {
                            return Err(EvalError::Unknown(format!(
                                "`{name}.{field}`: only `each.key`, `each.value` and `count.index` exist"
                            )))
                        }
                    }
                }
                _ if self.eat("[")? => {
                    let key = self.expr()?;
                    self.expect("]")?;
                    self.expect(".")?;
                    Ast::InstanceRef(name, Box::new(key), self.ident()?)
                }
                _ => {
                    if !self.eat(".")? {
                        return Err(EvalError::Unknown(format!(
                            "`{name}` is not a known name: write `param.NAME`, `var.NAME`, `each.key`, `each.value`, `count.index`, `stack_dir` or `LABEL.PROPERTY`"
                        )));
                    }
                    Ast::Ref(Reference {
                        resource: name,
                        property: self.ident()?,
                    })
                }
            },
            other => {
                return Err(EvalError::Syntax(format!(
                    "expected a value, found {}",
                    describe(&other)
                )))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Ast, EvalError> {
        parse_embedded(&format!("{text}}}")).map(|(a, _)| a)
    }

    #[test]
    fn precedence_and_postfix() {
        let a = parse("1 + 2 * 3 == 7 ? x-y.path[0] : upper('a}')").unwrap();
        let Ast::Cond(c, t, e) = a else { panic!() };
        assert!(matches!(*c, Ast::Binary(Op::Eq, _, _)));
        assert!(
            matches!(&*t, Ast::Index(r, _) if matches!(&**r, Ast::Ref(r) if r.resource == "x-y"))
        );
        assert_eq!(
            *e,
            Ast::Call("upper".into(), vec![Ast::Const(Value::from("a}"))])
        );
    }

    #[test]
    fn the_closing_brace_ends_the_expression() {
        let (_, used) = parse_embedded("param.a }/rest").unwrap();
        assert_eq!(used, 9);
    }

    #[test]
    fn hostile_nesting_is_a_typed_error() {
        let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(matches!(parse(&deep), Err(EvalError::Limit(_))));
        let deep = "!".repeat(10_000) + "true";
        assert!(matches!(parse(&deep), Err(EvalError::Limit(_))));
        let deep = "[".repeat(10_000);
        assert!(matches!(parse(&deep), Err(EvalError::Limit(_))));
    }

    #[test]
    fn syntax_errors_say_what_was_expected() {
        assert_eq!(
            parse("f(1,").unwrap_err().to_string(),
            "expected a value, found `}`"
        );
        assert_eq!(
            parse_embedded("param.a").unwrap_err().to_string(),
            "unclosed `${`"
        );
        assert!(parse("nope")
            .unwrap_err()
            .to_string()
            .contains("`nope` is not a known name"));
    }
}
