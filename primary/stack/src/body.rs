//! Evaluating what a document and a module have in common — parameters,
//! variables, modules, resources, outputs — into declarations. A module's
//! body is evaluated once per instance, its resources addressed under the
//! module's path (`module.db["eu"].role`).

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use orrery_schema::Value;

use super::eval::{self, EvalError, FileReader, Known, ModuleOutputs, StackOutputs};
use super::modules::{self, ModuleDoc, ModuleUse, ModuleUseDoc, Origin};
use super::params::{self, Inputs, ParameterDoc, Supplied};
use super::{
    instances, key_line, label_lines, variables, yaml, Expr, Limits, OutputDecl, OutputDoc,
    Problem, ResourceDecl, ResourceDoc, StackError, TargetDecl, TargetDoc, MAX_INSTANCES,
};

/// What every body of one document shares: the declarations made so far
/// and the bounds on making them.
pub(super) struct Ctx<'i> {
    /// The document's name, as messages give it.
    pub document: &'i str,
    pub stack_dir: &'i str,
    pub limits: &'i Limits,
    /// Reads a file by its path relative to the stack's directory.
    pub files: FileReader<'i>,
    /// Reads other stacks' recorded outputs.
    pub stacks: Option<StackOutputs<'i>>,
    pub targets: Vec<TargetDecl>,
    pub resources: Vec<ResourceDecl>,
    module_instances: usize,
    /// Module files already read and parsed, by path.
    cache: HashMap<String, Rc<ModuleFile>>,
    /// What the document's expressions may still make.
    pub budget: &'i eval::Budget,
}

impl<'i> Ctx<'i> {
    pub fn new(
        document: &'i str,
        stack_dir: &'i str,
        limits: &'i Limits,
        files: FileReader<'i>,
        stacks: Option<StackOutputs<'i>>,
        budget: &'i eval::Budget,
    ) -> Self {
        Ctx {
            budget,
            stacks,
            document,
            stack_dir,
            limits,
            files,
            targets: Vec::new(),
            resources: Vec::new(),
            module_instances: 0,
            cache: HashMap::new(),
        }
    }
}

/// A module's file, read, parsed and its lines found once per document
/// however many times it is used.
pub(super) struct ModuleFile {
    text: String,
    doc: ModuleDoc,
    lines: Rc<Lines>,
}

/// Where a file's declarations are, by name.
pub(super) struct Lines {
    /// Each resource's `label:` line.
    labels: HashMap<String, usize>,
    /// Each module use's `name:` line.
    uses: BTreeMap<String, usize>,
}

impl Lines {
    pub fn of(text: &str) -> Rc<Lines> {
        Rc::new(Lines {
            labels: label_lines(text),
            uses: modules::use_lines(text),
        })
    }
}

/// What a body holds.
pub(super) struct Body<'d> {
    pub parameters: &'d BTreeMap<String, ParameterDoc>,
    pub variables: &'d BTreeMap<String, Value>,
    pub targets: &'d [TargetDoc],
    pub modules: &'d [ModuleUseDoc],
    pub resources: &'d [ResourceDoc],
    pub outputs: &'d BTreeMap<String, OutputDoc>,
}

/// Where a body is: its file and text, and for a module the path to it.
pub(super) struct Place<'p> {
    /// The file, for messages.
    pub source: String,
    pub text: &'p str,
    /// Where its declarations are.
    pub lines: Rc<Lines>,
    /// The file's path relative to the stack's directory.
    pub path: String,
    /// Before each of its resources' labels: `module.db["eu"].`.
    pub prefix: String,
    /// The uses of modules that led here, outermost first.
    pub uses: Vec<ModuleUse>,
    /// The files of those uses, the document's first: a module using one
    /// of them uses itself.
    pub chain: Vec<String>,
}

/// Where a body's parameters take their values.
pub(super) enum Values<'v> {
    /// The document's: given by the caller.
    Given(&'v Inputs<'v>),
    /// A module's: its `with:`, computed where it is used.
    With(BTreeMap<String, Known>),
}

/// What a body gives back.
pub(super) struct Evaluated {
    pub parameters: BTreeMap<String, Known>,
    pub supplied: bool,
    pub outputs: BTreeMap<String, OutputDecl>,
}

/// Evaluates `body` at `place`, adding its targets and resources to `ctx`.
pub(super) fn evaluate(
    ctx: &mut Ctx<'_>,
    body: Body<'_>,
    place: &Place<'_>,
    values: Values<'_>,
) -> Result<Evaluated, StackError> {
    let source = place.source.as_str();
    let text = place.text;
    let line_of = |label: &str| place.lines.labels.get(label).copied();
    let at = |line: Option<usize>, resource: Option<String>, problem| StackError {
        file: source.to_owned(),
        line,
        position: None,
        resource,
        problem,
    };
    let (parameters, supplied) =
        resolve_parameters(body.parameters, &values, ctx.files).map_err(|e| {
            at(
                key_line(text, "parameters", &e.name),
                None,
                Problem::Parameter {
                    name: e.name,
                    message: e.message,
                },
            )
        })?;
    // `file()` in a module reads relative to the module's file.
    let base = ctx.files;
    let dir = modules::dir_of(&place.path).to_owned();
    let files = move |path: &str| -> Result<String, String> {
        if dir.is_empty() {
            return base(path);
        }
        let full = modules::join(&dir, path)
            .ok_or_else(|| "the path must stay inside the stack's directory".to_owned())?;
        base(&full)
    };
    let parts = EnvParts {
        params: &parameters,
        stack_dir: ctx.stack_dir,
        files: &files,
        stacks: ctx.stacks,
        prefix: &place.prefix,
        budget: ctx.budget,
    };
    let mut outputs_of: ModuleOutputs = BTreeMap::new();
    let no_vars = BTreeMap::new();
    let vars = {
        let env = parts.env(&no_vars, &outputs_of);
        variables::compute(body.variables, &env).map_err(|(name, error)| {
            at(
                key_line(text, "variables", &name),
                None,
                Problem::Expression {
                    at: format!("variable `{name}`"),
                    error,
                },
            )
        })?
    };
    let too_many = |what: &str, max: usize| {
        at(
            None,
            None,
            Problem::Expression {
                at: "`for_each`, `count`".to_owned(),
                error: EvalError::Limit(format!("the document expands to more than {max} {what}")),
            },
        )
    };
    {
        let env = parts.env(&vars, &outputs_of);
        for t in body.targets {
            let fail = |what: &str, error| {
                at(
                    None,
                    None,
                    Problem::Expression {
                        at: format!("target `{}`: {what}", t.name),
                        error,
                    },
                )
            };
            let copies = instances::expand(t.for_each.as_ref(), None, &env)
                .map_err(|(key, error)| fail(&format!("`{key}`"), error))?;
            for copy in copies {
                let env = env.instance(copy.each.as_ref().map(|(k, v)| (k, v)), None);
                let name = instances::text_field(&t.name, "name", &env)
                    .map_err(|error| fail("`name`", error))?;
                let config =
                    super::target_config(&name, &t.config, &env).map_err(|p| at(None, None, p))?;
                ctx.targets.push(TargetDecl {
                    name,
                    plugin: t.plugin.clone(),
                    config,
                });
                if ctx.targets.len() > MAX_INSTANCES {
                    return Err(too_many("targets", MAX_INSTANCES));
                }
            }
        }
    }
    // Modules in document order: one may use the outputs of those before it.
    for m in body.modules {
        let line = place.lines.uses.get(&m.name).copied();
        let fail = |what: String, error| {
            at(
                line,
                None,
                Problem::Expression {
                    at: format!("module `{}`: {what}", m.name),
                    error,
                },
            )
        };
        let path = modules::resolve_source(modules::dir_of(&place.path), &m.source)
            .map_err(|e| fail("`source`".into(), EvalError::File(e)))?;
        if let Some(first) = place.chain.iter().position(|p| *p == path) {
            let mut circle = place.chain[first..].to_vec();
            circle.push(path.clone());
            return Err(fail(
                "`source`".into(),
                EvalError::File(format!("the module uses itself: {}", circle.join(" -> "))),
            ));
        }
        if place.uses.len() >= modules::MAX_MODULE_DEPTH {
            return Err(fail(
                "`source`".into(),
                EvalError::Limit(format!(
                    "modules nest more than {} deep",
                    modules::MAX_MODULE_DEPTH
                )),
            ));
        }
        let module_file = module_file_name(ctx.document, &path);
        let loaded = load(ctx, &path).map_err(|e| match e {
            Loaded::Read(message) => fail("`source`".into(), EvalError::File(message)),
            Loaded::Invalid(e) => {
                let e = StackError {
                    file: module_file.clone(),
                    ..e
                };
                in_module(&place.source, line, &m.name, e)
            }
        })?;
        let (module_text, doc) = (&loaded.text, &loaded.doc);
        let copies = {
            let env = parts.env(&vars, &outputs_of);
            let copies = instances::expand(m.for_each.as_ref(), m.count.as_ref(), &env)
                .map_err(|(key, error)| fail(format!("`{key}`"), error))?;
            let mut wanted = Vec::with_capacity(copies.len());
            for copy in copies {
                let env = env.instance(copy.each.as_ref().map(|(k, v)| (k, v)), copy.count);
                let address = format!("{}{}", m.name, copy.suffix);
                let fail = |what: &str, error| {
                    at(
                        line,
                        None,
                        Problem::Expression {
                            at: format!("module `{address}`: {what}"),
                            error,
                        },
                    )
                };
                if !instances::enabled(m.enabled.as_ref(), &env)
                    .map_err(|e| fail("`enabled`", e))?
                {
                    continue;
                }
                let mut with = BTreeMap::new();
                for (k, v) in &m.with_values {
                    env.secret.set(false);
                    let expr = Expr::from_value(v.clone(), &env)
                        .map_err(|e| fail(&format!("`with` `{k}`"), e))?;
                    let secret = env.secret.get();
                    // A resource's property goes in as it is, known at
                    // apply time (`Known::pending`).
                    let known = match expr {
                        Expr::Literal(value) => Known::new(value, secret),
                        pending => Known {
                            value: Value::Null,
                            secret,
                            pending: Some(Box::new(pending)),
                        },
                    };
                    with.insert(k.clone(), known);
                }
                wanted.push((address, with));
            }
            wanted
        };
        for (address, with) in copies {
            ctx.module_instances += 1;
            if ctx.module_instances > modules::MAX_MODULE_INSTANCES {
                return Err(too_many("module instances", modules::MAX_MODULE_INSTANCES));
            }
            let mut uses = place.uses.clone();
            uses.push(ModuleUse {
                file: place.source.clone(),
                line,
                module: address.clone(),
            });
            let mut chain = place.chain.clone();
            chain.push(path.clone());
            let inner = Place {
                source: module_file.clone(),
                text: module_text,
                lines: loaded.lines.clone(),
                path: path.clone(),
                prefix: format!("{}module.{address}.", place.prefix),
                uses,
                chain,
            };
            let evaluated = evaluate(
                ctx,
                Body {
                    parameters: &doc.parameters,
                    variables: &doc.variables,
                    targets: &[],
                    modules: &doc.modules,
                    resources: &doc.resources,
                    outputs: &doc.outputs,
                },
                &inner,
                Values::With(with),
            )
            .map_err(|e| in_module(&place.source, line, &address, e))?;
            outputs_of.insert(address, evaluated.outputs);
        }
    }
    let env = parts.env(&vars, &outputs_of);
    let origin = (!place.uses.is_empty()).then(|| {
        Arc::new(Origin {
            file: place.source.clone(),
            uses: place.uses.clone(),
        })
    });
    for r in body.resources {
        let line = line_of(&r.label);
        let copies = instances::expand(r.for_each.as_ref(), r.count.as_ref(), &env).map_err(
            |(key, error)| {
                at(
                    line,
                    Some(format!("{}{}", place.prefix, r.label)),
                    Problem::Expression {
                        at: format!("`{key}`"),
                        error,
                    },
                )
            },
        )?;
        for copy in copies {
            let env = env.instance(copy.each.as_ref().map(|(k, v)| (k, v)), copy.count);
            let label = [place.prefix.as_str(), &r.label, &copy.suffix].concat();
            let fail = |what: String, error| {
                at(
                    line,
                    Some(label.clone()),
                    Problem::Expression { at: what, error },
                )
            };
            if !instances::enabled(r.enabled.as_ref(), &env)
                .map_err(|e| fail("`enabled`".into(), e))?
            {
                continue;
            }
            let target = instances::text_field(&r.target, "target", &env)
                .map_err(|e| fail("`target`".into(), e))?;
            let mut properties = BTreeMap::new();
            let mut secret = BTreeSet::new();
            for (k, v) in &r.properties {
                env.secret.set(false);
                let expr = Expr::from_value(v.clone(), &env)
                    .map_err(|e| fail(format!("property `{k}`"), e))?;
                if env.secret.get() {
                    secret.insert(k.clone());
                }
                properties.insert(k.clone(), expr);
            }
            let mut depends_on = Vec::with_capacity(r.depends_on.len());
            for d in &r.depends_on {
                let d = instances::text_field(d, "depends_on", &env)
                    .map_err(|e| fail("`depends_on`".into(), e))?;
                depends_on.push(format!("{}{d}", place.prefix));
            }
            let import = r
                .import
                .as_deref()
                .map(|id| instances::text_field(id, "import", &env))
                .transpose()
                .map_err(|e| fail("`import`".into(), e))?;
            ctx.resources.push(ResourceDecl {
                line,
                label,
                resource_type: r.resource_type.clone(),
                target,
                properties,
                secret,
                depends_on,
                protect: r.protect,
                ignore_changes: r.ignore_changes.clone(),
                import,
                origin: origin.clone(),
            });
            if ctx.resources.len() > MAX_INSTANCES {
                return Err(too_many("resources", MAX_INSTANCES));
            }
        }
    }
    let mut outputs = BTreeMap::new();
    for (name, o) in body.outputs {
        env.secret.set(false);
        let value = Expr::from_value(o.value.clone(), &env).map_err(|error| {
            at(
                key_line(text, "outputs", name),
                None,
                Problem::Expression {
                    at: format!("output `{name}`"),
                    error,
                },
            )
        })?;
        let secret = o.secret || env.secret.get();
        outputs.insert(name.clone(), OutputDecl { value, secret });
    }
    Ok(Evaluated {
        parameters,
        supplied,
        outputs,
    })
}

/// What every environment of one body shares.
struct EnvParts<'a> {
    params: &'a BTreeMap<String, Known>,
    stack_dir: &'a str,
    files: FileReader<'a>,
    stacks: Option<StackOutputs<'a>>,
    prefix: &'a str,
    budget: &'a eval::Budget,
}

impl EnvParts<'_> {
    fn env<'b>(
        &'b self,
        vars: &'b BTreeMap<String, Known>,
        modules: &'b ModuleOutputs,
    ) -> eval::Env<'b> {
        eval::Env {
            params: self.params,
            vars,
            each: None,
            count: None,
            stack_dir: self.stack_dir,
            files: self.files,
            modules,
            stacks: self.stacks,
            prefix: self.prefix,
            secret: Cell::new(false),
            budget: self.budget,
        }
    }
}

/// `error`, which happened inside the module `module` used on `line` of
/// `file`.
fn in_module(file: &str, line: Option<usize>, module: &str, error: StackError) -> StackError {
    modules::wrap_uses(
        &[ModuleUse {
            file: file.to_owned(),
            line,
            module: module.to_owned(),
        }],
        error,
    )
}

/// How the module at `path` (relative to the stack's directory) is named
/// in messages: beside the document as the document is named.
fn module_file_name(document: &str, path: &str) -> String {
    match modules::dir_of(document) {
        "" => path.to_owned(),
        dir => format!("{dir}/{path}"),
    }
}

enum Loaded {
    Read(String),
    Invalid(StackError),
}

/// The module file at `path`, read and parsed once per document.
fn load(ctx: &mut Ctx<'_>, path: &str) -> Result<Rc<ModuleFile>, Loaded> {
    if let Some(done) = ctx.cache.get(path) {
        return Ok(done.clone());
    }
    let text = (ctx.files)(path).map_err(|e| Loaded::Read(format!("`{path}`: {e}")))?;
    let invalid = |line, problem| {
        Loaded::Invalid(StackError {
            file: String::new(),
            line,
            position: None,
            resource: None,
            problem,
        })
    };
    let doc: ModuleDoc = yaml::read(&text, ctx.limits).map_err(|e| invalid(e.line, e.problem))?;
    let lines = Lines::of(&text);
    let done = Rc::new(ModuleFile { text, doc, lines });
    ctx.cache.insert(path.to_owned(), done.clone());
    Ok(done)
}

/// The values of a body's parameters, and whether the caller gave any.
fn resolve_parameters(
    declared: &BTreeMap<String, ParameterDoc>,
    values: &Values<'_>,
    files: FileReader<'_>,
) -> Result<(BTreeMap<String, Known>, bool), params::ParamError> {
    match values {
        Values::Given(inputs) => params::resolve(declared, inputs),
        Values::With(with) => {
            // A pending value is checked by the plugin's schema once known;
            // the parameter must exist all the same.
            let pending: Vec<&String> = with
                .iter()
                .filter(|(_, k)| k.pending.is_some())
                .map(|(n, _)| n)
                .collect();
            if let Some(name) = pending.iter().find(|n| !declared.contains_key(**n)) {
                return Err(params::ParamError {
                    name: (*name).clone(),
                    message: "a value was given, but the document declares no such parameter"
                        .into(),
                });
            }
            let mut declared = declared.clone();
            declared.retain(|n, _| !pending.contains(&n));
            let declared = &declared;
            let inputs = Inputs {
                vars: with
                    .iter()
                    .filter(|(_, k)| k.pending.is_none())
                    .map(|(k, v)| (k.clone(), Supplied::Value(v.value.clone())))
                    .collect(),
                env: BTreeMap::new(),
                files,
                stacks: None,
            };
            let (mut out, _) = params::resolve(declared, &inputs).map_err(|e| {
                // A secret passed in stays unseen, even by a module that
                // did not declare the parameter secret.
                if with.get(&e.name).is_some_and(|k| k.secret) {
                    params::ParamError {
                        message: "the value given (a secret, not shown) is not accepted".into(),
                        name: e.name,
                    }
                } else {
                    e
                }
            })?;
            for (name, known) in &mut out {
                if with.get(name).is_some_and(|k| k.secret) {
                    known.secret = true;
                }
            }
            for name in pending {
                out.insert(name.clone(), with[name].clone());
            }
            Ok((out, false))
        }
    }
}
