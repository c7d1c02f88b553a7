//! `import:` adopts an existing resource instead of creating it (as
//! Terraform's `import` blocks do). Which declared resources are adopted
//! is decided here; the read of each identifier is the service's (an I/O
//! edge, the read `orrery import` makes); the record read is then planned
//! against like any record, so the usual diff says whether the document
//! changes the adopted resource.

use orrery_schema::PropertyMap;

use crate::record::StoredResource;
use orrery_stack::{Catalog, Graph, Stack};

/// A declared resource to adopt: the stack has no record of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// Its index in the stack's resources.
    pub index: usize,
    /// Its label.
    pub label: String,
    /// The plugin's identifier to read (its `import:`).
    pub native_id: String,
}

/// The resources of `stack` that declare `import:` and of which `stored`
/// (the stack's records) has no managed record. A recorded resource is
/// already adopted: its `import:` is then ignored.
pub fn wanted(stack: &Stack, stored: &[StoredResource]) -> Vec<Wanted> {
    stack
        .resources
        .iter()
        .enumerate()
        .filter_map(|(index, r)| {
            let native_id = r.import.as_ref()?;
            let recorded = stored.iter().any(|s| s.managed && s.label == r.label);
            (!recorded).then(|| Wanted {
                index,
                label: r.label.clone(),
                native_id: native_id.clone(),
            })
        })
        .collect()
}

/// The record of `wanted` as its plugin read it (`native_id` and
/// `properties` from the answer): managed by the stack under its label,
/// depending on what the document makes it depend on, without any value
/// that must never be stored (write-only, opaque, or from a secret
/// parameter).
pub fn record(
    stack: &Stack,
    graph: &Graph,
    catalog: &Catalog,
    wanted: &Wanted,
    native_id: Option<String>,
    mut properties: PropertyMap,
) -> StoredResource {
    let decl = &stack.resources[wanted.index];
    let plugin = stack
        .target(&decl.target)
        .map(|t| t.plugin.clone())
        .unwrap_or_default();
    let schema = catalog.schema(&plugin, &decl.resource_type);
    properties.retain(|k, _| !decl.is_secret_field(schema, k));
    StoredResource {
        stack: stack.name.clone(),
        label: decl.label.clone(),
        resource_type: decl.resource_type.clone(),
        target: decl.target.clone(),
        plugin,
        native_id: native_id.unwrap_or_else(|| wanted.native_id.clone()),
        properties,
        deps: graph.deps[wanted.index]
            .iter()
            .map(|(d, _)| stack.resources[*d].label.clone())
            .collect(),
        managed: true,
        ..StoredResource::default()
    }
}
