//! Small fixtures shared by the unit tests. Test-only.

use orrery_schema::{Announcement, ResourceSchema};

use crate::{Catalog, Graph, Stack};

/// The namespace of the fixture plugin `p`.
pub(crate) const NAMESPACE: &str = "P";

/// A catalog holding one plugin `p` (namespace `P`) announcing `resources`.
pub(crate) fn catalog(resources: Vec<ResourceSchema>) -> Catalog {
    let mut c = Catalog::new();
    c.insert(Announcement {
        name: "p".into(),
        namespace: NAMESPACE.into(),
        resources,
        ..Default::default()
    });
    c
}

/// Validates `stack`, panicking with the messages if it is invalid.
pub(crate) fn graph(stack: &Stack, catalog: &Catalog) -> Graph {
    match crate::validate(stack, catalog) {
        Ok(g) => g,
        Err(errors) => panic!(
            "invalid fixture: {:?}",
            errors.iter().map(ToString::to_string).collect::<Vec<_>>()
        ),
    }
}
