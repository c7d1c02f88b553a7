//! Small fixtures shared by the unit tests: a catalog of one plugin, stacks
//! built without parsing, stored records. Test-only.

use std::collections::BTreeMap;

use orrery_schema::{Announcement, PropertyMap, ResourceSchema, Value};

use crate::plan::{self, Mode, Plan, SecretHasher};
use crate::record::StoredResource;
use orrery_stack::{self as stack, Catalog, Expr, Graph, ResourceDecl, Stack, TargetDecl};

/// The plugin every fixture target uses.
pub(crate) const PLUGIN: &str = "p";
/// Its namespace (what rate-limit buckets are keyed by).
pub(crate) const NAMESPACE: &str = "P";

/// A catalog holding one plugin `p` (namespace `P`) announcing `resources`.
pub(crate) fn catalog(resources: Vec<ResourceSchema>) -> Catalog {
    let mut c = Catalog::new();
    c.insert(Announcement {
        name: PLUGIN.into(),
        namespace: NAMESPACE.into(),
        resources,
        ..Default::default()
    });
    c
}

/// A stack `s` with targets `t` (and `u`) on plugin `p`, built without
/// parsing. Properties are values; strings may hold `${label.property}`.
#[derive(Clone, Debug)]
pub(crate) struct StackBuilder(Stack);

pub(crate) fn stack() -> StackBuilder {
    let target = |name: &str| TargetDecl {
        name: name.into(),
        plugin: PLUGIN.into(),
        config: PropertyMap::new(),
    };
    StackBuilder(Stack {
        name: "s".into(),
        source: "s.yaml".into(),
        targets: vec![target("t"), target("u")],
        ..Stack::default()
    })
}

impl StackBuilder {
    /// Adds resource `label` of `resource_type` on target `t`.
    pub(crate) fn resource(
        self,
        label: &str,
        resource_type: &str,
        props: &[(&str, Value)],
    ) -> Self {
        self.resource_on(label, resource_type, "t", props)
    }

    /// Adds resource `label` of `resource_type` on `target`.
    pub(crate) fn resource_on(
        mut self,
        label: &str,
        resource_type: &str,
        target: &str,
        props: &[(&str, Value)],
    ) -> Self {
        let (params, vars) = (BTreeMap::new(), BTreeMap::new());
        let no_files = |_: &str| Err(String::new());
        let env = stack::eval::Env {
            params: &params,
            vars: &vars,
            each: None,
            count: None,
            stack_dir: "/",
            files: &no_files,
            modules: &Default::default(),
            stacks: None,
            prefix: "",
            secret: std::cell::Cell::new(false),
            budget: &Default::default(),
        };
        let properties = props
            .iter()
            .map(|(k, v)| {
                let expr = Expr::from_value(v.clone(), &env).expect("a valid template");
                ((*k).to_owned(), expr)
            })
            .collect();
        self.0.resources.push(ResourceDecl {
            label: label.into(),
            resource_type: resource_type.into(),
            target: target.into(),
            properties,
            line: None,
            secret: Default::default(),
            depends_on: Vec::new(),
            protect: false,
            ignore_changes: Default::default(),
            import: None,
            origin: None,
        });
        self
    }

    /// The stack.
    pub(crate) fn build(self) -> Stack {
        self.0
    }
}

/// Validates `stack`, panicking with the messages if it is invalid.
pub(crate) fn graph(stack: &Stack, catalog: &Catalog) -> Graph {
    match stack::validate(stack, catalog) {
        Ok(g) => g,
        Err(errors) => panic!(
            "invalid fixture: {:?}",
            errors.iter().map(ToString::to_string).collect::<Vec<_>>()
        ),
    }
}

/// The hasher the fixtures' secret hashes are made with.
pub(crate) fn hasher() -> SecretHasher {
    SecretHasher::new(b"test key".to_vec())
}

/// Plans `stack` against `stored` with the fixture hasher.
pub(crate) fn plan(
    stack: &Stack,
    catalog: &Catalog,
    stored: &[StoredResource],
    mode: Mode,
) -> Plan {
    let g = graph(stack, catalog);
    plan::plan(stack, &g, catalog, stored, mode, &hasher())
}

/// A managed record of stack `s`, on target `t`, of plugin `p`.
pub(crate) fn stored(label: &str, resource_type: &str, props: &[(&str, Value)]) -> StoredResource {
    StoredResource {
        stack: "s".into(),
        label: label.into(),
        resource_type: resource_type.into(),
        target: "t".into(),
        plugin: PLUGIN.into(),
        native_id: format!("id-{label}"),
        properties: props
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
        managed: true,
        version: 1,
        ..Default::default()
    }
}

/// Shorthand for a string value.
pub(crate) fn s(v: &str) -> Value {
    Value::from(v)
}
