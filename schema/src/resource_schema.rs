//! The resource schema model: the fields of each resource type and their hints.

use serde::{Deserialize, Serialize};

use crate::open_enum::open_enum;

open_enum! {
    /// How a reference through this field orders operations.
    #[derive(Default)]
    pub enum EdgeKind {
        /// An ordinary dependency: create the referenced resource first, delete it last.
        Default = "default" [default],
        /// This resource attaches to the referenced one (a volume to an
        /// instance): the attachment is removed before the referenced
        /// resource is replaced or deleted, and when it is replaced the
        /// attachment is made again to the new one (replaced too, delete
        /// before create) after it exists.
        AttachesTo = "attachesTo",
        /// The value is used when the request is sent, not needed to plan:
        /// a create or update still waits for the referenced resource to be
        /// applied (its value may be unknown until then), but the old
        /// resource of a create-before-delete replacement does not wait for
        /// this one to move off it.
        RuntimeDependency = "runtimeDependency",
    }
}

open_enum! {
    /// How a change to a field is applied.
    #[derive(Default)]
    pub enum UpdateMethod {
        /// The field is updated in place by an `update` request.
        InPlace = "inPlace" [default],
        /// The resource is replaced: the old one deleted, then a new one created.
        DeleteBeforeCreate = "deleteBeforeCreate",
        /// The resource is replaced: a new one created, then the old one deleted.
        CreateBeforeDelete = "createBeforeDelete",
    }
}

open_enum! {
    /// The shape of a field's value.
    #[derive(Default)]
    pub enum FieldType {
        /// A UTF-8 string.
        String = "string",
        /// An integer.
        Integer = "integer",
        /// A number (integer or float).
        Number = "number",
        /// A boolean.
        Boolean = "boolean",
        /// A list of values.
        List = "list",
        /// A map with string keys.
        Map = "map",
        /// Raw bytes.
        Bytes = "bytes",
        /// Any value.
        Any = "any" [default],
    }
}

/// What the runtime needs to know about a field to plan and protect it.
///
/// On the wire, `edge_kind = attachesTo` is also written as the deprecated
/// boolean `attaches_to: true` so that older peers understand it, and a
/// schema from an older peer that carries only `attaches_to` decodes with
/// `edge_kind = attachesTo`. Future deprecations follow the same pattern:
/// read both, write both, fold into the new field.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldHint {
    /// Set at creation only; changing it replaces the resource.
    pub create_only: bool,
    /// Sent to the plugin but never returned by it (a password).
    pub write_only: bool,
    /// Computed by the provider; never set by the user.
    pub read_only: bool,
    /// Must be present in every desired state.
    pub required: bool,
    /// Must be present when creating.
    pub required_on_create: bool,
    /// A secret: never logged, stored only as a keyed hash.
    pub opaque: bool,
    /// The provider fills in a default when the field is absent; an absent
    /// desired value is therefore not a change.
    pub provider_default: bool,
    /// How a change to this field is applied.
    pub update_method: UpdateMethod,
    /// How a reference through this field orders operations.
    pub edge_kind: EdgeKind,
}

impl FieldHint {
    /// Whether the field's values are secrets: write-only or opaque. Such
    /// values are never stored in clear (only their HMAC), never shown in a
    /// plan, a log line or an answer. This is the one definition.
    pub fn is_secret(&self) -> bool {
        self.write_only || self.opaque
    }

    /// The update method after applying `create_only`: a create-only field
    /// without an explicit method is replaced delete-before-create.
    pub fn effective_update_method(&self) -> UpdateMethod {
        if self.create_only && self.update_method == UpdateMethod::InPlace {
            UpdateMethod::DeleteBeforeCreate
        } else {
            self.update_method.clone()
        }
    }

    /// Whether a change to the field replaces the resource.
    pub fn forces_replacement(&self) -> bool {
        self.effective_update_method() != UpdateMethod::InPlace
    }
}

/// The wire shape of [`FieldHint`], which still carries the deprecated field.
#[derive(Serialize, Deserialize, Default)]
#[serde(default)]
struct FieldHintWire {
    create_only: bool,
    write_only: bool,
    read_only: bool,
    required: bool,
    required_on_create: bool,
    opaque: bool,
    provider_default: bool,
    update_method: UpdateMethod,
    #[serde(skip_serializing_if = "Option::is_none")]
    edge_kind: Option<EdgeKind>,
    /// Deprecated: release 0 peers wrote only this boolean.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    attaches_to: bool,
}

impl From<FieldHintWire> for FieldHint {
    fn from(w: FieldHintWire) -> Self {
        let edge_kind = match (w.edge_kind, w.attaches_to) {
            (Some(kind), _) => kind,
            (None, true) => EdgeKind::AttachesTo,
            (None, false) => EdgeKind::Default,
        };
        FieldHint {
            create_only: w.create_only,
            write_only: w.write_only,
            read_only: w.read_only,
            required: w.required,
            required_on_create: w.required_on_create,
            opaque: w.opaque,
            provider_default: w.provider_default,
            update_method: w.update_method,
            edge_kind,
        }
    }
}

impl From<&FieldHint> for FieldHintWire {
    fn from(h: &FieldHint) -> Self {
        FieldHintWire {
            create_only: h.create_only,
            write_only: h.write_only,
            read_only: h.read_only,
            required: h.required,
            required_on_create: h.required_on_create,
            opaque: h.opaque,
            provider_default: h.provider_default,
            update_method: h.update_method.clone(),
            attaches_to: h.edge_kind == EdgeKind::AttachesTo,
            edge_kind: Some(h.edge_kind.clone()),
        }
    }
}

impl Serialize for FieldHint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        FieldHintWire::from(self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for FieldHint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        FieldHintWire::deserialize(d).map(FieldHint::from)
    }
}

/// One field of a resource type.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FieldSchema {
    /// The property name.
    pub name: String,
    /// The shape of its value.
    #[serde(rename = "type")]
    pub field_type: FieldType,
    /// What it means, for humans and generated docs.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// How the runtime treats it.
    pub hints: FieldHint,
}

/// The schema of one resource type.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResourceSchema {
    /// The type name, unique within the plugin, e.g. `Local::Fs::File`.
    pub type_name: String,
    /// What it is, for humans.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Fields that together identify a resource naturally (a path, a bucket
    /// name). Creating a second resource with the same values yields
    /// `AlreadyExists`. Empty when the provider assigns identity.
    pub identifier: Vec<String>,
    /// Every field.
    pub fields: Vec<FieldSchema>,
    /// Whether `list` is supported, so discovery can find unmanaged resources.
    pub discoverable: bool,
    /// Operations that must not run more than a few at once (e.g. grants in
    /// one database, which PostgreSQL fails with `tuple concurrently
    /// updated`). Absent: only the rate limit applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<ConcurrencyKey>,
    /// The resource lives inside another one and is listed per parent (the
    /// schemas of a database, the consumers of a stream). Absent: listed
    /// per target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentScope>,
}

/// Serialises operations under a key computed from each resource's
/// properties.
///
/// Operations of one plugin namespace on one target whose keys expand to
/// the same text run at most `limit` at once, across resource types: a
/// `Grant` and a `DefaultPrivileges` that both declare
/// `database:{database}` share the slots of their database. The key is held
/// from an operation's start until it succeeds, fails or backs off to retry
/// (an operation answering `InProgress` keeps it while it is polled).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConcurrencyKey {
    /// A template: literal text with `{property}` placeholders filled from
    /// the resource's properties (desired ones for create and update,
    /// recorded ones for delete), e.g. `database:{database}`. A placeholder
    /// naming an absent property expands to the empty string; `{{` and `}}`
    /// stand for literal braces.
    pub key: String,
    /// Most operations in flight under one expanded key; 0 is taken as 1.
    pub limit: u32,
}

/// Where a child resource type is listed: once per resource of a parent
/// type.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ParentScope {
    /// The parent's resource type, of the same plugin, e.g.
    /// `Postgres::Database`.
    pub resource_type: String,
    /// Properties of the child that take their value from the parent's: child
    /// property → parent property, e.g. `database` → `name`. Discovery fills
    /// them in on the children it lists when the plugin leaves them out.
    pub properties: std::collections::BTreeMap<String, String>,
}

impl ResourceSchema {
    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&FieldSchema> {
        self.fields.iter().find(|f| f.name == name)
    }
}

impl ConcurrencyKey {
    /// The key for a resource whose properties are looked up by `property`
    /// (which returns the property's text, or `None` when it is absent).
    pub fn expand(&self, property: impl Fn(&str) -> Option<String>) -> String {
        let mut out = String::with_capacity(self.key.len());
        let mut rest = self.key.as_str();
        while let Some(i) = rest.find(['{', '}']) {
            out.push_str(&rest[..i]);
            let tail = &rest[i..];
            if tail.starts_with("{{") || tail.starts_with("}}") {
                out.push_str(&tail[..1]);
                rest = &tail[2..];
            } else if let (true, Some(end)) = (tail.starts_with('{'), tail.find('}')) {
                out.push_str(&property(&tail[1..end]).unwrap_or_default());
                rest = &tail[end + 1..];
            } else {
                // A lone brace is literal text.
                out.push_str(&tail[..1]);
                rest = &tail[1..];
            }
        }
        out.push_str(rest);
        out
    }

    /// The limit, with 0 taken as 1.
    pub fn effective_limit(&self) -> u32 {
        self.limit.max(1)
    }
}
