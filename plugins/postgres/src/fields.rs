//! Field declarations the types share, so that each schema reads as a
//! list of its fields.

use orrery_plugin_sdk::{field, FieldBuilder};

/// An identifying string: required, and fixed once the resource exists.
pub fn key(name: &str) -> FieldBuilder {
    field::string(name).required().create_only()
}

/// `builder`, described, which the server fills in when the author leaves
/// it out (a role's flags, a database's owner, an extension's version).
pub fn defaulted(builder: FieldBuilder, what: &str) -> FieldBuilder {
    builder.provider_default().describe(what)
}

/// The owning role (a database's, a schema's).
pub fn owner() -> FieldBuilder {
    defaulted(field::string("owner"), "Owning role")
}

/// A connection limit (a role's, a database's).
pub fn connection_limit() -> FieldBuilder {
    defaulted(field::integer("connection_limit"), "-1: none")
}

/// The privileges a grant or default privileges hold.
pub fn privileges() -> FieldBuilder {
    field::list("privileges").required()
}

/// Whether the grantee may grant them on.
pub fn grant_option() -> FieldBuilder {
    field::boolean("with_grant_option").provider_default()
}
