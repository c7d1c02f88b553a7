//! Validation against announced schemas, and the dependency graph.

use std::collections::{BTreeMap, HashMap};

use orrery_schema::{Announcement, EdgeKind, ResourceSchema};

use super::{Problem, Stack, StackError};

/// The announced schemas, by plugin name.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    plugins: BTreeMap<String, Announcement>,
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Catalog::default()
    }

    /// Adds (or replaces) a plugin's announcement.
    pub fn insert(&mut self, announcement: Announcement) {
        self.plugins.insert(announcement.name.clone(), announcement);
    }

    /// A plugin's announcement.
    pub fn plugin(&self, name: &str) -> Option<&Announcement> {
        self.plugins.get(name)
    }

    /// Every plugin's announcement, by name.
    pub fn plugins(&self) -> impl Iterator<Item = &Announcement> {
        self.plugins.values()
    }

    /// The schema of `resource_type` as announced by `plugin`.
    pub fn schema(&self, plugin: &str, resource_type: &str) -> Option<&ResourceSchema> {
        self.plugins.get(plugin)?.resource(resource_type)
    }
}

/// Resources in dependency order, and each one's dependencies.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// Resource indices, every resource after those it depends on.
    pub order: Vec<usize>,
    /// For each resource, the resources it references and through which kind of edge.
    pub deps: Vec<Vec<(usize, EdgeKind)>>,
}

/// Checks a stack against the catalog and builds its graph. Every problem
/// found is reported, not just the first.
pub fn validate(stack: &Stack, catalog: &Catalog) -> Result<Graph, Vec<StackError>> {
    let mut errors = Vec::new();
    let err = |resource: Option<&super::ResourceDecl>, problem| {
        StackError::of_resource(stack, resource, problem)
    };
    let mut targets = HashMap::new();
    for t in &stack.targets {
        if targets.insert(t.name.as_str(), t).is_some() {
            errors.push(err(None, Problem::DuplicateTarget(t.name.clone())));
        }
        if t.name.is_empty()
            || !t
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            errors.push(err(None, Problem::BadTargetName(t.name.clone())));
        }
        if catalog.plugin(&t.plugin).is_none() {
            errors.push(err(None, Problem::UnknownPlugin(t.plugin.clone())));
        }
    }
    let mut index = HashMap::new();
    for (i, r) in stack.resources.iter().enumerate() {
        if index.insert(r.label.as_str(), i).is_some() {
            errors.push(err(Some(r), Problem::DuplicateLabel));
        }
    }
    let schema_of = |i: usize| -> Option<&ResourceSchema> {
        let r = &stack.resources[i];
        let target = targets.get(r.target.as_str())?;
        catalog.schema(&target.plugin, &r.resource_type)
    };

    let mut deps = vec![Vec::new(); stack.resources.len()];
    for (i, r) in stack.resources.iter().enumerate() {
        let Some(target) = targets.get(r.target.as_str()) else {
            errors.push(err(Some(r), Problem::UnknownTarget(r.target.clone())));
            continue;
        };
        if catalog.plugin(&target.plugin).is_none() {
            continue; // reported once, on the target
        }
        let Some(schema) = schema_of(i) else {
            errors.push(err(
                Some(r),
                Problem::UnknownType {
                    resource_type: r.resource_type.clone(),
                    plugin: target.plugin.clone(),
                },
            ));
            continue;
        };
        for field in &schema.fields {
            let h = &field.hints;
            if (h.required || h.required_on_create) && !r.properties.contains_key(&field.name) {
                errors.push(err(Some(r), Problem::MissingRequired(field.name.clone())));
            }
        }
        for (name, expr) in &r.properties {
            let Some(field) = schema.field(name) else {
                errors.push(err(
                    Some(r),
                    Problem::UnknownField {
                        field: name.clone(),
                        resource_type: r.resource_type.clone(),
                    },
                ));
                continue;
            };
            let mut refs = Vec::new();
            expr.references(&mut refs);
            for reference in refs {
                let Some(&j) = index.get(reference.resource.as_str()) else {
                    errors.push(err(
                        Some(r),
                        Problem::UnknownResource(reference.resource.clone()),
                    ));
                    continue;
                };
                if let Some(other) = schema_of(j) {
                    if other.field(&reference.property).is_none() {
                        errors.push(err(
                            Some(r),
                            Problem::UnknownProperty {
                                resource: reference.resource.clone(),
                                property: reference.property.clone(),
                            },
                        ));
                        continue;
                    }
                }
                // One edge per referenced resource; a runtime-only
                // reference does not weaken one that orders operations.
                let kind = &field.hints.edge_kind;
                match deps[i].iter_mut().find(|(d, _)| *d == j) {
                    None => deps[i].push((j, kind.clone())),
                    Some((_, k)) if *k == EdgeKind::RuntimeDependency => *k = kind.clone(),
                    Some(_) => {}
                }
            }
        }
    }
    // `depends_on`: a label, or a declaration's label standing for all its
    // instances (`web` for `web["a"]`, `web["b"]`).
    let mut by_base: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, r) in stack.resources.iter().enumerate() {
        if let Some(base) = declaration(&r.label) {
            by_base.entry(base).or_default().push(i);
        }
    }
    for (i, r) in stack.resources.iter().enumerate() {
        for d in &r.depends_on {
            let found: Vec<usize> = match index.get(d.as_str()) {
                Some(&j) => vec![j],
                None => by_base.get(d.as_str()).cloned().unwrap_or_default(),
            };
            if found.is_empty() {
                errors.push(err(
                    Some(r),
                    Problem::Expression {
                        at: "`depends_on`".into(),
                        error: super::EvalError::Unknown(format!(
                            "`{d}` is not a resource of the stack"
                        )),
                    },
                ));
            }
            for j in found {
                if !deps[i].iter().any(|(k, _)| *k == j) {
                    deps[i].push((j, EdgeKind::Default));
                }
            }
        }
    }
    for (name, output) in &stack.outputs {
        let mut refs = Vec::new();
        output.value.references(&mut refs);
        for reference in refs {
            let problem = match index.get(reference.resource.as_str()) {
                None => Problem::UnknownResource(reference.resource.clone()),
                Some(&j) => match schema_of(j) {
                    Some(s) if s.field(&reference.property).is_none() => Problem::UnknownProperty {
                        resource: reference.resource.clone(),
                        property: reference.property.clone(),
                    },
                    _ => continue,
                },
            };
            errors.push(StackError {
                file: stack.source.clone(),
                line: None,
                position: None,
                resource: None,
                problem: Problem::Expression {
                    at: format!("output `{name}`"),
                    error: super::EvalError::Unknown(problem_text(problem)),
                },
            });
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    match topological_order(&deps) {
        Ok(order) => Ok(Graph { order, deps }),
        Err(cycle) => {
            let members: Vec<String> = cycle
                .iter()
                .map(|&i| stack.resources[i].label.clone())
                .collect();
            Err(vec![err(
                Some(&stack.resources[cycle[0]]),
                Problem::Cycle(members),
            )])
        }
    }
}

/// The label of the `for_each`/`count` declaration an instance's address
/// comes from (`web` for `web["a"]`, `module.db["eu"].web` for
/// `module.db["eu"].web[0]`): its last `["key"]` or `[N]` taken off.
fn declaration(label: &str) -> Option<&str> {
    if label.ends_with("\"]") {
        // Quotes inside a key are escaped, so `["` only starts one.
        return label.rfind("[\"").map(|i| &label[..i]);
    }
    let body = label.strip_suffix(']')?;
    let (base, n) = body.rsplit_once('[')?;
    n.bytes().all(|b| b.is_ascii_digit()).then_some(base)
}

/// What a problem says, without where.
fn problem_text(problem: Problem) -> String {
    let text = StackError {
        file: String::new(),
        line: None,
        position: None,
        resource: None,
        problem,
    }
    .to_string();
    text.strip_prefix(": ").unwrap_or(&text).to_owned()
}

/// Kahn's algorithm; on a cycle, returns one cycle's members in order
/// (first member repeated at the end).
fn topological_order(deps: &[Vec<(usize, EdgeKind)>]) -> Result<Vec<usize>, Vec<usize>> {
    let n = deps.len();
    let mut indegree: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut dependents = vec![Vec::new(); n];
    for (i, ds) in deps.iter().enumerate() {
        for (d, _) in ds {
            dependents[*d].push(i);
        }
    }
    let mut ready: std::collections::VecDeque<usize> =
        (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_front() {
        order.push(i);
        for &j in &dependents[i] {
            indegree[j] -= 1;
            if indegree[j] == 0 {
                ready.push_back(j);
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Walk dependencies from a node left over until one repeats.
    let start = (0..n).find(|&i| indegree[i] > 0).unwrap_or(0);
    let mut seen = HashMap::new();
    let mut path = Vec::new();
    let mut node = start;
    loop {
        if let Some(&at) = seen.get(&node) {
            let mut cycle: Vec<usize> = path[at..].to_vec();
            cycle.reverse();
            cycle.push(cycle[0]);
            return Err(cycle);
        }
        seen.insert(node, path.len());
        path.push(node);
        node = match deps[node].iter().find(|(d, _)| indegree[*d] > 0) {
            Some((d, _)) => *d,
            None => return Err(path),
        };
    }
}
