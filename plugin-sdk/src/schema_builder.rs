//! Declare a resource type's schema next to its Rust type.
//!
//! ```
//! use orrery_plugin_sdk::{field, resource};
//! let schema = resource("Local::Fs::Directory")
//!     .describe("A directory under the target's root")
//!     .identifier(["path"])
//!     .field(field::string("path").required().create_only())
//!     .field(field::integer("mode").provider_default())
//!     .build();
//! assert_eq!(schema.identifier, vec!["path".to_string()]);
//! ```

use orrery_schema::{
    ConcurrencyKey, EdgeKind, FieldHint, FieldSchema, FieldType, ParentScope, ResourceSchema,
    UpdateMethod,
};

/// Starts the schema of a resource type.
pub fn resource(type_name: &str) -> ResourceBuilder {
    ResourceBuilder(ResourceSchema {
        type_name: type_name.to_owned(),
        discoverable: true,
        ..Default::default()
    })
}

/// Builds a [`ResourceSchema`].
#[derive(Clone, Debug)]
pub struct ResourceBuilder(ResourceSchema);

impl ResourceBuilder {
    /// Sets the description.
    pub fn describe(mut self, description: &str) -> Self {
        self.0.description = description.to_owned();
        self
    }

    /// Names the fields that identify a resource naturally.
    pub fn identifier<const N: usize>(mut self, fields: [&str; N]) -> Self {
        self.0.identifier = fields.iter().map(|f| (*f).to_owned()).collect();
        self
    }

    /// Adds a field.
    pub fn field(mut self, field: FieldBuilder) -> Self {
        self.0.fields.push(field.0);
        self
    }

    /// Runs at most `limit` operations at once per expansion of `key`, a
    /// template such as `database:{database}` filled from each resource's
    /// properties (see [`ConcurrencyKey`]). Types of one plugin sharing a
    /// template share its slots.
    pub fn concurrency_key(mut self, key: &str, limit: u32) -> Self {
        self.0.concurrency = Some(ConcurrencyKey {
            key: key.to_owned(),
            limit,
        });
        self
    }

    /// Lists the type once per resource of `parent_type` (its
    /// `ListRequest::parent` names the parent); each pair maps a child
    /// property to the parent property it comes from, e.g.
    /// `[("database", "name")]`.
    pub fn parent<const N: usize>(
        mut self,
        parent_type: &str,
        properties: [(&str, &str); N],
    ) -> Self {
        self.0.parent = Some(ParentScope {
            resource_type: parent_type.to_owned(),
            properties: properties
                .iter()
                .map(|(child, parent)| ((*child).to_owned(), (*parent).to_owned()))
                .collect(),
        });
        self
    }

    /// Marks the type as not listable, so discovery skips it.
    pub fn not_discoverable(mut self) -> Self {
        self.0.discoverable = false;
        self
    }

    /// The finished schema.
    pub fn build(self) -> ResourceSchema {
        self.0
    }
}

/// Builds a [`FieldSchema`]; start with one of the functions in [`field`].
#[derive(Clone, Debug)]
pub struct FieldBuilder(FieldSchema);

/// Field constructors, one per [`FieldType`].
pub mod field {
    use super::*;

    fn of(name: &str, field_type: FieldType) -> FieldBuilder {
        FieldBuilder(FieldSchema {
            name: name.to_owned(),
            field_type,
            ..Default::default()
        })
    }

    /// A string field.
    pub fn string(name: &str) -> FieldBuilder {
        of(name, FieldType::String)
    }
    /// An integer field.
    pub fn integer(name: &str) -> FieldBuilder {
        of(name, FieldType::Integer)
    }
    /// A number field.
    pub fn number(name: &str) -> FieldBuilder {
        of(name, FieldType::Number)
    }
    /// A boolean field.
    pub fn boolean(name: &str) -> FieldBuilder {
        of(name, FieldType::Boolean)
    }
    /// A list field.
    pub fn list(name: &str) -> FieldBuilder {
        of(name, FieldType::List)
    }
    /// A map field.
    pub fn map(name: &str) -> FieldBuilder {
        of(name, FieldType::Map)
    }
    /// A bytes field.
    pub fn bytes(name: &str) -> FieldBuilder {
        of(name, FieldType::Bytes)
    }
    /// A field of any type.
    pub fn any(name: &str) -> FieldBuilder {
        of(name, FieldType::Any)
    }
}

impl FieldBuilder {
    fn hint(mut self, f: impl FnOnce(&mut FieldHint)) -> Self {
        f(&mut self.0.hints);
        self
    }

    /// Sets the description.
    pub fn describe(mut self, description: &str) -> Self {
        self.0.description = description.to_owned();
        self
    }
    /// Must be present in every desired state.
    pub fn required(self) -> Self {
        self.hint(|h| h.required = true)
    }
    /// Must be present when creating.
    pub fn required_on_create(self) -> Self {
        self.hint(|h| h.required_on_create = true)
    }
    /// Set at creation only; a change replaces the resource.
    pub fn create_only(self) -> Self {
        self.hint(|h| h.create_only = true)
    }
    /// Accepted but never returned.
    pub fn write_only(self) -> Self {
        self.hint(|h| h.write_only = true)
    }
    /// Computed by the provider.
    pub fn read_only(self) -> Self {
        self.hint(|h| h.read_only = true)
    }
    /// A secret: never logged or stored in clear.
    pub fn opaque(self) -> Self {
        self.hint(|h| h.opaque = true)
    }
    /// The provider fills in a default when absent.
    pub fn provider_default(self) -> Self {
        self.hint(|h| h.provider_default = true)
    }
    /// How a change is applied.
    pub fn update_method(self, method: UpdateMethod) -> Self {
        self.hint(|h| h.update_method = method)
    }
    /// How a reference through this field orders operations.
    pub fn edge_kind(self, kind: EdgeKind) -> Self {
        self.hint(|h| h.edge_kind = kind)
    }
    /// The finished field, e.g. for [`crate::ResourcePlugin::target_config`].
    pub fn build(self) -> FieldSchema {
        self.0
    }
}
