//! A JSON Schema (draft-07, the draft yaml-language-server handles best)
//! of the stack document, for editors: every key the parser accepts, and
//! for each resource type the plugins announced its properties (types,
//! required, descriptions), chosen by the resource's `type:`. Wherever a
//! value may be computed, a string holding `${…}` is accepted too.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use orrery_schema::{FieldType, ResourceSchema};

use crate::{accepted_keys, Catalog};

/// A string holding an expression, the alternative to any typed value.
const EXPRESSION: &str = r"\$\{";

/// The schema of a stack document whose resources may be of the types
/// `catalog` holds.
pub fn stack_schema(catalog: &Catalog) -> Value {
    let keys = accepted_keys();
    let keys_of = |part: &str| {
        keys.iter()
            .find(|(p, _)| *p == part)
            .map_or(&[][..], |(_, k)| *k)
    };
    let object = |part: &str, required: &[&str], known: &dyn Fn(&str) -> Option<Value>| {
        let mut properties = Map::new();
        for key in keys_of(part) {
            // A key this generator does not know yet is still accepted.
            let schema =
                known(key).unwrap_or_else(|| json!({"description": "See docs/stacks.md."}));
            properties.insert((*key).to_owned(), schema);
        }
        json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        })
    };
    let plugins: Vec<String> = catalog.plugins().map(|a| a.name.clone()).collect();
    let mut types = BTreeSet::new();
    let mut typed = Vec::new();
    for schema in catalog.plugins().flat_map(|a| a.resources.iter()) {
        // The first plugin announcing a type name describes it.
        if types.insert(schema.type_name.clone()) {
            typed.push(typed_resource(schema));
        }
    }
    let document = object("document", &["stack"], &|key| {
        Some(match key {
            "stack" => {
                json!({"type": "string", "description": "The stack's name: its identity in the state store."})
            }
            "parameters" => {
                json!({"type": "object", "description": "Values given to the document (`--var`, `--var-file`, `ORRERY_VAR_<name>`).", "additionalProperties": {"$ref": "#/definitions/parameter"}})
            }
            "variables" => {
                json!({"type": "object", "description": "Named computed values (`${var.NAME}`)."})
            }
            "outputs" => {
                json!({"type": "object", "description": "Values recorded with the stack after an apply.", "additionalProperties": {"$ref": "#/definitions/output"}})
            }
            "targets" => {
                json!({"type": "array", "description": "Where resources live: a plugin and its configuration.", "items": {"$ref": "#/definitions/target"}})
            }
            "resources" => {
                json!({"type": "array", "description": "The resources the stack declares.", "items": {"$ref": "#/definitions/resource"}})
            }
            "modules" => {
                json!({"type": "array", "description": "Module files used, each with its parameters' values.", "items": {"$ref": "#/definitions/module_use"}})
            }
            "moved" => {
                json!({"type": "array", "description": "Resources re-addressed without a plugin call.", "items": {"$ref": "#/definitions/moved"}})
            }
            _ => return None,
        })
    });
    let module_use = object("module_use", &["name", "source"], &|key| {
        Some(match key {
            "name" => {
                json!({"type": "string", "description": "Unique name; resources inside are addressed `module.NAME[key].label`."})
            }
            "source" => {
                json!({"type": "string", "description": "The module file, relative to the using file and inside the stack's directory."})
            }
            "with" => {
                json!({"type": "object", "description": "Values of the module's parameters."})
            }
            "for_each" => or_expression(
                json!({"type": ["array", "object"], "description": "One instance per item, addressed `NAME[\"key\"]`."}),
            ),
            "count" => or_expression(
                json!({"type": "integer", "minimum": 0, "description": "This many instances."}),
            ),
            "enabled" => or_expression(
                json!({"type": "boolean", "description": "Whether the module is used at all."}),
            ),
            _ => return None,
        })
    });
    let module = object("module", &[], &|key| {
        Some(match key {
            "parameters" => {
                json!({"type": "object", "additionalProperties": {"$ref": "#/definitions/parameter"}})
            }
            "variables" => json!({"type": "object"}),
            "modules" => json!({"type": "array", "items": {"$ref": "#/definitions/module_use"}}),
            "resources" => json!({"type": "array", "items": {"$ref": "#/definitions/resource"}}),
            "outputs" => {
                json!({"type": "object", "additionalProperties": {"$ref": "#/definitions/output"}})
            }
            _ => return None,
        })
    });
    let moved = object("moved", &["from", "to"], &|key| {
        Some(match key {
            "from" => json!({"type": "string", "description": "The recorded address."}),
            "to" => json!({"type": "string", "description": "The address it now has."}),
            _ => return None,
        })
    });
    let target = object("target", &["name", "plugin"], &|key| {
        Some(match key {
            "name" => {
                json!({"type": "string", "description": "Unique name; letters, digits, `-` or `_`."})
            }
            "plugin" => with_known(
                json!({"type": "string", "description": "The plugin serving it: its announced name."}),
                &plugins,
            ),
            "config" => {
                json!({"type": "object", "description": "The plugin's configuration for this target."})
            }
            "for_each" => or_expression(
                json!({"type": ["array", "object"], "description": "One target per item (`${each.key}`, `${each.value}`)."}),
            ),
            _ => return None,
        })
    });
    let mut resource = object("resource", &["label", "type", "target"], &|key| {
        Some(match key {
            "label" => json!({"type": "string", "description": "Unique label within the stack."}),
            "type" => with_known(
                json!({"type": "string", "description": "The resource type, as the target's plugin announces it."}),
                &types.iter().cloned().collect::<Vec<_>>(),
            ),
            "target" => {
                json!({"type": "string", "description": "The name of the target it lives on."})
            }
            "properties" => json!({"type": "object", "description": "Desired properties."}),
            "for_each" => or_expression(
                json!({"type": ["array", "object"], "description": "One instance per item, addressed `label[\"key\"]`."}),
            ),
            "count" => or_expression(
                json!({"type": "integer", "minimum": 0, "description": "This many instances (`${count.index}`)."}),
            ),
            "enabled" => or_expression(
                json!({"type": "boolean", "description": "Whether the resource is declared at all."}),
            ),
            "depends_on" => {
                json!({"type": "array", "items": {"type": "string"}, "description": "Labels it depends on besides its references."})
            }
            "protect" => {
                json!({"type": "boolean", "description": "Refuse a delete or replace unless the command allows it."})
            }
            "ignore_changes" => {
                json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true, "description": "Fields whose changes are not planned once it exists."})
            }
            "import" => {
                json!({"type": "string", "description": "The plugin's identifier of an existing resource to adopt (read and recorded) instead of creating one, while the stack has no record of it."})
            }
            _ => return None,
        })
    });
    if !typed.is_empty() {
        resource["allOf"] = Value::Array(typed);
    }
    let parameter = object("parameter", &[], &|key| {
        Some(match key {
            "type" => {
                json!({"enum": ["string", "number", "bool", "list", "map", "secret"], "description": "The value's type (default: string)."})
            }
            "default" => json!({"description": "The value when none is given."}),
            "description" => json!({"type": "string"}),
            "allowed" => json!({"type": "array", "description": "The only values accepted."}),
            "pattern" => {
                json!({"type": "string", "description": "A regular expression a string value must match whole."})
            }
            "min" | "max" => json!({"type": "number"}),
            _ => return None,
        })
    });
    let output = object("output", &["value"], &|key| {
        Some(match key {
            "value" => {
                json!({"description": "Its value: from resources, parameters, expressions."})
            }
            "secret" => {
                json!({"type": "boolean", "description": "Shown masked; its value never stored."})
            }
            "description" => json!({"type": "string"}),
            _ => return None,
        })
    });
    let mut out = document;
    let out_map = out.as_object_mut().expect("an object");
    let mut head = Map::new();
    head.insert(
        "$schema".into(),
        json!("http://json-schema.org/draft-07/schema#"),
    );
    head.insert("title".into(), json!("Orrery stack document"));
    head.insert(
        "description".into(),
        json!("Generated by `orrery schema` from the parser's keys and the plugins' announced resource types; see docs/stacks.md."),
    );
    head.append(out_map);
    head.insert(
        "definitions".into(),
        json!({"target": target, "resource": resource, "parameter": parameter, "output": output,
            "module_use": module_use, "module": module, "moved": moved}),
    );
    Value::Object(head)
}

/// `schema`, or a string holding an expression.
fn or_expression(schema: Value) -> Value {
    let description = schema.get("description").cloned();
    let mut out = json!({"anyOf": [schema, {"type": "string", "pattern": EXPRESSION}]});
    if let Some(d) = description {
        out["description"] = d;
    }
    out
}

/// A string offered from `known` (for completion), any other string still
/// accepted: a plugin not cached may announce more.
fn with_known(schema: Value, known: &[String]) -> Value {
    if known.is_empty() {
        return schema;
    }
    let description = schema.get("description").cloned();
    let mut out = json!({"anyOf": [{"enum": known}, schema]});
    if let Some(d) = description {
        out["description"] = d;
    }
    out
}

/// `if type is T then properties follow T's schema`.
fn typed_resource(schema: &ResourceSchema) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for field in &schema.fields {
        // Read-only fields are the plugin's to report, never to set.
        if field.hints.read_only {
            continue;
        }
        let mut f = match field.field_type {
            FieldType::String | FieldType::Bytes => json!({"type": "string"}),
            FieldType::Integer => or_expression(json!({"type": "integer"})),
            FieldType::Number => or_expression(json!({"type": "number"})),
            FieldType::Boolean => or_expression(json!({"type": "boolean"})),
            FieldType::List => or_expression(json!({"type": "array"})),
            FieldType::Map => or_expression(json!({"type": "object"})),
            _ => json!({}),
        };
        if !field.description.is_empty() {
            f["description"] = json!(field.description);
        }
        if field.hints.required || field.hints.required_on_create {
            required.push(field.name.clone());
        }
        properties.insert(field.name.clone(), f);
    }
    let mut props = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    if !schema.description.is_empty() {
        props["description"] = json!(schema.description);
    }
    let mut then = json!({"properties": {"properties": props}});
    if !required.is_empty() {
        then["required"] = json!(["properties"]);
    }
    json!({
        "if": {"properties": {"type": {"const": schema.type_name}}, "required": ["type"]},
        "then": then,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use orrery_schema::{Announcement, FieldHint, FieldSchema};

    fn catalog() -> Catalog {
        let mut c = Catalog::new();
        c.insert(Announcement {
            name: "local".into(),
            resources: vec![ResourceSchema {
                type_name: "Local::Fs::Directory".into(),
                fields: vec![
                    FieldSchema {
                        name: "path".into(),
                        field_type: FieldType::String,
                        description: "Where.".into(),
                        hints: FieldHint {
                            required: true,
                            ..FieldHint::default()
                        },
                    },
                    FieldSchema {
                        name: "mode".into(),
                        field_type: FieldType::Integer,
                        description: String::new(),
                        hints: FieldHint::default(),
                    },
                    FieldSchema {
                        name: "size".into(),
                        field_type: FieldType::Integer,
                        description: String::new(),
                        hints: FieldHint {
                            read_only: true,
                            ..FieldHint::default()
                        },
                    },
                ],
                ..ResourceSchema::default()
            }],
            ..Announcement::default()
        });
        c
    }

    #[test]
    fn every_key_the_parser_accepts_is_in_the_schema() {
        let s = stack_schema(&Catalog::new());
        for (part, keys) in accepted_keys() {
            let props = match part {
                "document" => &s["properties"],
                other => &s["definitions"][other]["properties"],
            };
            for key in keys {
                assert!(props.get(key).is_some(), "{part}.{key} missing");
            }
        }
        assert!(s["definitions"]["resource"].get("allOf").is_none());
    }

    #[test]
    fn a_type_brings_its_writable_properties_required_and_typed() {
        let s = stack_schema(&catalog());
        let rule = &s["definitions"]["resource"]["allOf"][0];
        assert_eq!(
            rule["if"]["properties"]["type"]["const"],
            "Local::Fs::Directory"
        );
        let props = &rule["then"]["properties"]["properties"];
        assert_eq!(props["required"], json!(["path"]));
        assert_eq!(props["additionalProperties"], false);
        assert_eq!(props["properties"]["path"]["description"], "Where.");
        assert_eq!(
            props["properties"]["mode"]["anyOf"][1]["pattern"],
            EXPRESSION
        );
        assert!(props["properties"].get("size").is_none(), "read-only");
        assert_eq!(
            s["definitions"]["target"]["properties"]["plugin"]["anyOf"][0]["enum"],
            json!(["local"])
        );
    }
}
