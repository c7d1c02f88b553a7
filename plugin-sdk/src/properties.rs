//! Typed properties: convert between a plugin's own serde types and the
//! generic [`PropertyMap`] on the wire.

use orrery_schema::{ErrorCode, PropertyMap, ResourceSchema, Value};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::result::PluginError;

/// Reads properties into a typed struct. Missing required fields or values
/// of the wrong kind become an `InvalidRequest` error naming the field and
/// what was expected, never the value (which may be a secret: a write-only
/// or opaque field's error message would otherwise be recorded and served).
///
/// # Errors
///
/// An `InvalidRequest` [`PluginError`] naming the problem: a required field
/// missing, a value of the wrong kind.
pub fn from_properties<T: DeserializeOwned>(properties: &PropertyMap) -> Result<T, PluginError> {
    from_value(&Value::Map(properties.clone()))
}

/// Reads any value into a typed one; errors are `InvalidRequest`, naming
/// where in the value the problem is, never the offending value.
///
/// # Errors
///
/// An `InvalidRequest` [`PluginError`] when the value is not a `T`.
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, PluginError> {
    let bytes = orrery_schema::encode(value)
        .map_err(|e| PluginError::invalid(format!("invalid properties: {e}")))?;
    let mut rest = bytes.as_slice();
    let mut de = rmp_serde::Deserializer::new(&mut rest);
    serde_path_to_error::deserialize::<_, T>(&mut de).map_err(|e| {
        // MessagePack's own errors name neither the expected type nor
        // (always) the value; serde's standard ones, which a JSON value
        // gives, name both: take its path and message, the value left out.
        let json = serde_json::to_value(value)
            .ok()
            .and_then(|v| serde_path_to_error::deserialize::<_, T>(v).err());
        let (path, problem) = match &json {
            Some(j) => (j.path().to_string(), without_values(&j.inner().to_string())),
            None => (e.path().to_string(), without_values(&e.inner().to_string())),
        };
        if path == "." || path.is_empty() {
            PluginError::invalid(format!("invalid properties: {problem}"))
        } else {
            PluginError::invalid(format!("invalid properties: field `{path}`: {problem}"))
        }
    })
}

/// A deserialization error's message with the offending value left out:
/// serde's `invalid type: string "hunter2", expected u32` becomes
/// `invalid type: string, expected u32`. Messages of other shapes (custom
/// errors may quote the value) become a bare `invalid value`.
fn without_values(message: &str) -> String {
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix) {
            let (unexpected, expected) = match rest.rfind(", expected ") {
                Some(i) => (&rest[..i], &rest[i + ", expected ".len()..]),
                None => (rest, "another value"),
            };
            let kind = unexpected
                .split(['"', '`'])
                .next()
                .unwrap_or_default()
                .trim();
            return format!("{prefix}{kind}, expected {expected}");
        }
    }
    if message.starts_with("wrong msgpack marker") {
        return "invalid type".to_owned();
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let expected = rest
            .split_once(", expected ")
            .map_or("a known variant", |(_, e)| e);
        return format!("unknown variant, expected {expected}");
    }
    let keep = [
        "missing field `",
        "unknown field `",
        "duplicate field `",
        "invalid length ",
    ];
    if keep.iter().any(|p| message.starts_with(p)) {
        return message.to_owned();
    }
    "invalid value".to_owned()
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

/// `NotUpdatable` when `desired` changes a field `schema` marks create-only
/// from what `current` holds; `why` says why it cannot change (`"AWS has
/// no call for it"`). A field `desired` leaves out is not a change.
///
/// # Errors
///
/// A `NotUpdatable` [`PluginError`] naming `what` and the first such
/// field, never its values.
pub fn check_create_only(
    schema: &ResourceSchema,
    what: &str,
    desired: &PropertyMap,
    current: &PropertyMap,
    why: &str,
) -> Result<(), PluginError> {
    for field in schema.fields.iter().filter(|f| f.hints.create_only) {
        let Some(want) = desired.get(&field.name) else {
            continue;
        };
        if current.get(&field.name) != Some(want) {
            return Err(PluginError::new(
                ErrorCode::NotUpdatable,
                format!(
                    "{what}: `{}` cannot change once created ({why}); replace the resource",
                    field.name
                ),
            ));
        }
    }
    Ok(())
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

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Login {
        user: String,
        password: u32,
        nested: Option<Inner>,
        mode: Option<Mode>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        token: Vec<u8>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Mode {
        Fast,
    }

    #[test]
    fn type_errors_name_the_field_and_the_expected_type_never_the_value() {
        let cases = [
            ("password", Value::from("hunter2-secret")),
            ("user", Value::Int(424_242)),
            ("user", Value::Float(12.75)),
            ("user", Value::Bool(true)),
            ("mode", Value::from("hunter2-variant")),
        ];
        for (field, value) in cases {
            let mut props = PropertyMap::new();
            props.insert("user".into(), Value::from("u"));
            props.insert("password".into(), Value::Int(1));
            props.insert(field.into(), value.clone());
            let err = from_properties::<Login>(&props).unwrap_err();
            assert_eq!(err.code, orrery_schema::ErrorCode::InvalidRequest);
            assert!(
                err.message.contains(&format!("field `{field}`")),
                "names the field: {}",
                err.message
            );
            assert!(err.message.contains("expected"), "{}", err.message);
            for shown in ["hunter2", "424242", "12.75", "true"] {
                assert!(
                    !err.message.contains(shown),
                    "echoes {shown}: {}",
                    err.message
                );
            }
        }
        let mut props = PropertyMap::new();
        props.insert("user".into(), Value::from("u"));
        props.insert("password".into(), Value::Int(1));
        let mut inner = PropertyMap::new();
        inner.insert("token".into(), Value::from("hunter2-inner"));
        props.insert("nested".into(), Value::Map(inner));
        let err = from_properties::<Login>(&props).unwrap_err();
        assert!(
            err.message.contains("field `nested.token`"),
            "{}",
            err.message
        );
        assert!(!err.message.contains("hunter2"), "{}", err.message);
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
