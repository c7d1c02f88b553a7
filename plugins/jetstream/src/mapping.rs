//! Between Orrery properties and JetStream's JSON configs: property names
//! are JetStream's except where a [`Rename`] says otherwise, and durations
//! are whole seconds instead of nanoseconds.

use orrery_plugin_sdk::schema::{PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{from_properties, from_value, to_properties, to_value, PluginError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

/// A property whose JetStream JSON key differs, or whose unit does.
pub struct Rename {
    /// The Orrery property.
    pub property: &'static str,
    /// The key in JetStream's config.
    pub json: &'static str,
    /// Seconds in Orrery, nanoseconds in JetStream.
    pub seconds: bool,
}

/// A property renamed, same unit.
pub const fn renamed(property: &'static str, json: &'static str) -> Rename {
    Rename {
        property,
        json,
        seconds: false,
    }
}

/// A duration in seconds, nanoseconds in JetStream.
pub const fn seconds(property: &'static str, json: &'static str) -> Rename {
    Rename {
        property,
        json,
        seconds: true,
    }
}

/// The typed desired state of `T`; a property of the wrong kind is
/// `InvalidRequest`.
pub fn desired<T: DeserializeOwned>(properties: &PropertyMap) -> Result<T, PluginError> {
    from_properties(properties)
}

/// `desired` as JetStream JSON keys (unset properties absent).
pub fn to_json<T: Serialize>(
    desired: &T,
    renames: &[Rename],
) -> Result<Map<String, Value>, PluginError> {
    let properties = to_properties(desired)?;
    let mut out = Map::new();
    for (name, value) in properties {
        let json: Value = from_value(&value)?;
        match renames.iter().find(|r| r.property == name) {
            Some(r) if r.seconds => out.insert(r.json.into(), crate::api::nanos(&json)),
            Some(r) => out.insert(r.json.into(), json),
            None => out.insert(name, json),
        };
    }
    Ok(out)
}

/// The properties of `schema` found in a JetStream `config`, normalised
/// through `T` (keys JetStream adds that `T` does not know are dropped).
pub fn from_json<T: DeserializeOwned + Serialize>(
    schema: &ResourceSchema,
    config: &Value,
    renames: &[Rename],
) -> Result<PropertyMap, PluginError> {
    let mut picked = Map::new();
    for field in &schema.fields {
        let rename = renames.iter().find(|r| r.property == field.name);
        let key = rename.map_or(field.name.as_str(), |r| r.json);
        let Some(value) = config.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        let value = match rename {
            Some(r) if r.seconds => crate::api::secs(value),
            _ => value.clone(),
        };
        picked.insert(field.name.clone(), value);
    }
    if let Some(Value::Object(metadata)) = picked.get_mut("metadata") {
        // The server records its own `_nats.*` keys; they are not the author's.
        metadata.retain(|k, _| !k.starts_with("_nats."));
    }
    let typed: T = from_value(&to_value(&Value::Object(picked))?)?;
    to_properties(&typed)
}

/// The map of a JSON object (empty for anything else).
pub fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Schema fields the server defaults when the author leaves them out.
pub mod fields {
    use orrery_plugin_sdk::{field, FieldBuilder};

    /// The name an identity is made of: required, create-only.
    pub fn id(name: &str, what: &str) -> FieldBuilder {
        field::string(name).required().create_only().describe(what)
    }

    /// A string.
    pub fn text(name: &str, what: &str) -> FieldBuilder {
        field::string(name).provider_default().describe(what)
    }

    /// An integer.
    pub fn int(name: &str, what: &str) -> FieldBuilder {
        field::integer(name).provider_default().describe(what)
    }

    /// A list.
    pub fn list(name: &str, what: &str) -> FieldBuilder {
        field::list(name).provider_default().describe(what)
    }

    /// A map.
    pub fn map(name: &str, what: &str) -> FieldBuilder {
        field::map(name).provider_default().describe(what)
    }
}
