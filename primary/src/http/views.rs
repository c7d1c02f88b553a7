//! How things look in JSON answers.

use orrery_bus::plugin_host::PluginHost;
use orrery_schema::PropertyMap;
use serde_json::{json, Value};

use crate::discovery::Drift;
use crate::stack::{StackError, TargetDecl};
use crate::state::StoredResource;

/// One stack error: where, which resource, what.
pub fn stack_error(e: &StackError) -> Value {
    // The problem alone: the display of the error without its location.
    let bare = StackError {
        file: String::new(),
        line: None,
        position: None,
        resource: None,
        problem: e.problem.clone(),
    }
    .to_string();
    let message = bare.strip_prefix(": ").unwrap_or(&bare);
    json!({"file": e.file, "line": e.line, "column": e.column(), "resource": e.resource, "message": message,
        "text": e.to_string()})
}

/// A recorded resource; `drift` describes what drift sync found (changed
/// fields, or deleted) until an apply writes the resource again.
pub fn resource(r: &StoredResource) -> Value {
    json!({"stack": r.stack, "label": r.label, "type": r.resource_type, "target": r.target,
        "plugin": r.plugin, "native_id": r.native_id, "managed": r.managed, "version": r.version,
        "deps": r.deps, "properties": properties(&r.properties),
        "drift": Drift::of(r).map(|d| d.describe())})
}

fn properties(p: &PropertyMap) -> Value {
    serde_json::to_value(p).unwrap_or(Value::Null)
}

/// A recorded target, secret-looking values redacted at any depth (by key
/// name, and URL passwords).
pub fn target(stack: &str, t: &TargetDecl) -> Value {
    let config = orrery_core::plan::redact_config(&t.config);
    json!({"stack": stack, "name": t.name, "plugin": t.plugin, "config": properties(&config)})
}

/// A running plugin: its announcement and its status.
pub fn plugin(host: &PluginHost) -> Value {
    let a = host.announcement();
    let types: Vec<&str> = a.resources.iter().map(|r| r.type_name.as_str()).collect();
    let capabilities: Vec<&str> = a.capabilities.iter().map(|c| c.as_str()).collect();
    json!({
        "name": a.name,
        "version": a.version,
        "namespace": a.namespace,
        "protocol": a.protocol,
        "sdk": a.sdk,
        "capabilities": capabilities,
        "rate_limit": serde_json::to_value(&a.rate_limit).unwrap_or(Value::Null),
        "resource_types": types,
        "status": serde_json::to_value(host.status()).unwrap_or(Value::Null),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::Problem;
    use orrery_core::plan::REDACTED;
    use orrery_schema::Value as PropertyValue;

    #[test]
    fn stack_error_message_is_the_problem_alone() {
        let e = StackError {
            file: "stack.yaml".into(),
            line: Some(12),
            position: None,
            resource: Some("web".into()),
            problem: Problem::MissingRequired("path".into()),
        };
        let v = stack_error(&e);
        assert_eq!(v["message"], "missing required field `path`");
        assert_eq!(v["file"], "stack.yaml");
        assert_eq!(v["line"], 12);
        assert_eq!(v["resource"], "web");
        assert_eq!(
            v["text"],
            "stack.yaml:12: resource `web`: missing required field `path`"
        );
    }

    #[test]
    fn secret_looking_target_config_is_redacted() {
        let t = TargetDecl {
            name: "home".into(),
            plugin: "local".into(),
            config: PropertyMap::from([
                ("root".into(), PropertyValue::String("/srv".into())),
                ("api_key".into(), PropertyValue::String("hunter2".into())),
                ("Password".into(), PropertyValue::String("hunter2".into())),
            ]),
        };
        let v = target("s", &t);
        assert_eq!(v["config"]["root"], "/srv");
        assert_eq!(v["config"]["api_key"], REDACTED);
        assert_eq!(v["config"]["Password"], REDACTED);
    }

    #[test]
    fn nested_and_url_secrets_in_target_config_are_redacted() {
        let map = |pairs: &[(&str, PropertyValue)]| {
            PropertyValue::Map(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.clone()))
                    .collect(),
            )
        };
        let s = |t: &str| PropertyValue::String(t.into());
        let PropertyValue::Map(config) = map(&[
            ("nested", map(&[("password", s("s1"))])),
            (
                "aws",
                map(&[("secret_access_key", s("s2")), ("region", s("eu"))]),
            ),
            ("passphrase", s("s3")),
            ("dsn", s("postgres://u:s4@h/db")),
            (
                "hosts",
                PropertyValue::List(vec![map(&[("auth", s("s5"))])]),
            ),
        ]) else {
            unreachable!("built as a map")
        };
        let v = target(
            "s",
            &TargetDecl {
                name: "db".into(),
                plugin: "p".into(),
                config,
            },
        );
        let text = v.to_string();
        for secret in ["s1", "s2", "s3", "s4", "s5"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert_eq!(v["config"]["nested"]["password"], REDACTED);
        assert_eq!(v["config"]["aws"]["region"], "eu");
        assert_eq!(v["config"]["dsn"], "postgres://u:***@h/db");
        assert_eq!(v["config"]["hosts"][0]["auth"], REDACTED);
    }
}
