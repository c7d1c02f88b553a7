//! Typed properties: convert between a plugin's own serde types and the
//! generic [`PropertyMap`] on the wire.

use orrery_schema::{PropertyMap, Value};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::result::PluginError;

/// Reads properties into a typed struct. Missing required fields or values
/// of the wrong kind become an `InvalidRequest` error naming the problem.
///
/// # Errors
///
/// An `InvalidRequest` [`PluginError`] naming the problem: a required field
/// missing, a value of the wrong kind.
pub fn from_properties<T: DeserializeOwned>(properties: &PropertyMap) -> Result<T, PluginError> {
    from_value(&Value::Map(properties.clone()))
}

/// Reads any value into a typed one; errors are `InvalidRequest`.
///
/// # Errors
///
/// An `InvalidRequest` [`PluginError`] when the value is not a `T`.
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, PluginError> {
    let bytes = orrery_schema::encode(value)
        .map_err(|e| PluginError::invalid(format!("invalid properties: {e}")))?;
    orrery_schema::decode(&bytes).map_err(|e| match e {
        orrery_schema::DecodeError::Malformed(inner) => {
            PluginError::invalid(format!("invalid properties: {inner}"))
        }
        other => PluginError::invalid(format!("invalid properties: {other}")),
    })
}

/// Writes a typed struct as properties. Fields serialized as `None` are
/// dropped, so absent stays absent.
///
/// # Errors
///
/// An `InternalFailure` [`PluginError`] when `value` does not serialize as a
/// map, or as [`to_value`].
pub fn to_properties<T: Serialize>(value: &T) -> Result<PropertyMap, PluginError> {
    match to_value(value)? {
        Value::Map(mut map) => {
            map.retain(|_, v| *v != Value::Null);
            Ok(map)
        }
        other => Err(PluginError::new(
            orrery_schema::ErrorCode::InternalFailure,
            format!(
                "properties must serialize as a map, not {}",
                other.kind_name()
            ),
        )),
    }
}

/// Writes any serde value as a [`Value`].
///
/// # Errors
///
/// An `InternalFailure` [`PluginError`] when `value` cannot be serialized or
/// is over the message limit.
pub fn to_value<T: Serialize>(value: &T) -> Result<Value, PluginError> {
    let bytes = orrery_schema::encode(value)
        .map_err(|e| PluginError::new(orrery_schema::ErrorCode::InternalFailure, e.to_string()))?;
    orrery_schema::decode(&bytes)
        .map_err(|e| PluginError::new(orrery_schema::ErrorCode::InternalFailure, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct File {
        path: String,
        mode: Option<u32>,
    }

    #[test]
    fn typed_properties_round_trip_and_drop_absent_fields() {
        let file = File {
            path: "a".into(),
            mode: None,
        };
        let props = to_properties(&file).unwrap();
        assert_eq!(props.len(), 1);
        assert_eq!(from_properties::<File>(&props).unwrap(), file);
    }

    #[test]
    fn wrong_kinds_are_invalid_requests() {
        let mut props = PropertyMap::new();
        props.insert("path".into(), Value::Int(3));
        let err = from_properties::<File>(&props).unwrap_err();
        assert_eq!(err.code, orrery_schema::ErrorCode::InvalidRequest);
        assert!(
            err.message.contains("invalid properties"),
            "{}",
            err.message
        );
    }
}
