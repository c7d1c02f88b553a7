//! Recorded resources back into a stack document (`orrery extract`, the
//! pure part): writable properties only, references `${label.field}`
//! reconstructed where a value is (or starts with `VALUE/`) another
//! resource's identifier, labels made valid and unique, and every secret
//! (write-only or opaque fields, targets' secret-looking config) left as
//! a parameter of type secret, never in the document. A recorded label
//! written otherwise gets a `moved:` entry, so the document applied as
//! the same stack keeps the records.

use std::collections::{BTreeMap, BTreeSet};

use orrery_schema::{PropertyMap, Value};
use serde::Serialize;

use crate::record::StoredResource;
use orrery_stack::{Catalog, TargetDecl};

/// Why no document could be written.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    /// The document could not be serialised.
    #[error("cannot write the document: {0}")]
    Yaml(String),
}

#[derive(Serialize)]
struct Document {
    stack: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    parameters: BTreeMap<String, Parameter>,
    targets: Vec<Target>,
    resources: Vec<Resource>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    moved: Vec<Moved>,
}

/// A recorded label the document writes otherwise (an instance's
/// `web["a"]` as `web__a`): applied as the same stack, the record is
/// re-addressed, with no plugin call, rather than deleted and created.
#[derive(Serialize)]
struct Moved {
    from: String,
    to: String,
}

#[derive(Serialize)]
struct Parameter {
    #[serde(rename = "type")]
    kind: &'static str,
    description: String,
}

#[derive(Serialize)]
struct Target {
    name: String,
    plugin: String,
    #[serde(skip_serializing_if = "PropertyMap::is_empty")]
    config: PropertyMap,
}

#[derive(Serialize)]
struct Resource {
    label: String,
    #[serde(rename = "type")]
    resource_type: String,
    target: String,
    /// A discovered resource's identifier: applying the document adopts
    /// it rather than creating another.
    #[serde(skip_serializing_if = "Option::is_none")]
    import: Option<String>,
    properties: PropertyMap,
}

/// A label the parser and the expression language accept: letters,
/// digits, `-` and `_`, starting with a letter.
fn clean_label(raw: &str) -> String {
    let mut out: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    out = out.trim_matches(['_', '-']).to_owned();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic()) {
        out.insert(0, 'r');
        if out.len() > 1 {
            out.insert(1, '_');
        }
    }
    out
}

/// The document of `resources` on `targets`, as stack `stack`.
pub fn extract(
    stack: &str,
    targets: &[TargetDecl],
    resources: &[StoredResource],
    catalog: &Catalog,
) -> Result<String, ExtractError> {
    let mut parameters = BTreeMap::new();
    let mut secret = |name: String, what: String| {
        parameters.insert(
            name.clone(),
            Parameter {
                kind: "secret",
                description: what,
            },
        );
        Value::String(format!("${{param.{name}}}"))
    };
    let mut out_targets = Vec::new();
    for t in targets {
        let mut config = PropertyMap::new();
        for (k, v) in &t.config {
            let is_secret = crate::plan::secret_looking_key(k)
                || catalog
                    .plugin(&t.plugin)
                    .and_then(|a| a.target_field(k))
                    .is_some_and(|f| f.hints.is_secret());
            let v = if is_secret {
                secret(
                    clean_label(&format!("{}_{k}", t.name)).replace('-', "_"),
                    format!("target `{}`: config `{k}`", t.name),
                )
            } else {
                v.clone()
            };
            config.insert(k.clone(), v);
        }
        out_targets.push(Target {
            name: t.name.clone(),
            plugin: t.plugin.clone(),
            config,
        });
    }
    // Labels: the recorded one made valid, else the type's last part and
    // the identifier; unique by a suffix, in a deterministic order.
    let mut order: Vec<&StoredResource> = resources.iter().collect();
    order.sort_by(|a, b| (&a.label, &a.native_id).cmp(&(&b.label, &b.native_id)));
    let mut used = BTreeSet::new();
    let mut labels = Vec::new();
    for r in &order {
        // A discovered resource's recorded label is its key, not a name.
        let base = if r.label.is_empty() || crate::discovery::is_discovered(r) {
            let kind = r.resource_type.rsplit("::").next().unwrap_or("resource");
            clean_label(&format!("{}-{}", kind.to_lowercase(), r.native_id))
        } else {
            clean_label(&r.label)
        };
        let mut label = base.clone();
        let mut n = 2;
        while !used.insert(label.clone()) {
            label = format!("{base}-{n}");
            n += 1;
        }
        labels.push(label);
    }
    // What each resource may be referenced by: its identifier's values.
    let schema_of = |r: &StoredResource| catalog.schema(&r.plugin, &r.resource_type);
    let ids: Vec<Vec<(String, String)>> = order
        .iter()
        .map(|r| {
            schema_of(r)
                .map(|s| {
                    s.identifier
                        .iter()
                        .filter_map(|f| match r.properties.get(f) {
                            Some(Value::String(v)) if !v.is_empty() => Some((f.clone(), v.clone())),
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect();
    let moved = order
        .iter()
        .zip(&labels)
        .filter(|(r, label)| {
            !r.label.is_empty() && !crate::discovery::is_discovered(r) && r.label != **label
        })
        .map(|(r, label)| Moved {
            from: r.label.clone(),
            to: label.clone(),
        })
        .collect();
    let mut out_resources = Vec::new();
    for (i, r) in order.iter().enumerate() {
        let schema = schema_of(r);
        let mut properties = PropertyMap::new();
        for (k, v) in &r.properties {
            let field = schema.and_then(|s| s.field(k));
            if field.is_some_and(|f| f.hints.read_only) {
                continue;
            }
            properties.insert(k.clone(), reference(v, i, r, &order, &labels, &ids));
        }
        for f in schema.map(|s| s.fields.as_slice()).unwrap_or_default() {
            // Only the secrets it was given (their hashes are recorded).
            if f.hints.is_secret() && r.secret_hashes.contains_key(&f.name) {
                let name = format!("{}_{}", labels[i], f.name).replace('-', "_");
                let value = secret(name, format!("resource `{}`: `{}`", labels[i], f.name));
                properties.insert(f.name.clone(), value);
            }
        }
        out_resources.push(Resource {
            label: labels[i].clone(),
            resource_type: r.resource_type.clone(),
            target: r.target.clone(),
            import: crate::discovery::is_discovered(r).then(|| r.native_id.clone()),
            properties,
        });
    }
    let doc = Document {
        stack: stack.to_owned(),
        parameters,
        targets: out_targets,
        resources: out_resources,
        moved,
    };
    serde_norway::to_string(&doc).map_err(|e| ExtractError::Yaml(e.to_string()))
}

/// `v`, or a reference to another resource whose identifier it is or
/// starts with (`VALUE/…`): the longest such identifier, of a resource the
/// recorded one depended on, or (none recorded) one earlier in the order,
/// so that references never form a cycle.
fn reference(
    v: &Value,
    i: usize,
    r: &StoredResource,
    order: &[&StoredResource],
    labels: &[String],
    ids: &[Vec<(String, String)>],
) -> Value {
    let Value::String(text) = v else {
        return v.clone();
    };
    let mut best: Option<(usize, &str, &str)> = None;
    for (j, other) in order.iter().enumerate() {
        let allowed = if r.deps.is_empty() {
            j < i
        } else {
            r.deps.contains(&other.label)
        };
        if j == i || !allowed {
            continue;
        }
        for (field, id) in &ids[j] {
            let fits = text == id
                || text
                    .strip_prefix(id.as_str())
                    .is_some_and(|rest| rest.starts_with('/'));
            if fits && best.is_none_or(|(_, _, b)| id.len() > b.len()) {
                best = Some((j, field, id));
            }
        }
    }
    match best {
        Some((j, field, id)) => {
            Value::String(format!("${{{}.{field}}}{}", labels[j], &text[id.len()..]))
        }
        None => v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orrery_schema::{Announcement, FieldHint, FieldSchema, FieldType, ResourceSchema};

    fn catalog() -> Catalog {
        let field = |name: &str, hints| FieldSchema {
            name: name.into(),
            field_type: FieldType::String,
            description: String::new(),
            hints,
        };
        let mut c = Catalog::new();
        c.insert(Announcement {
            name: "local".into(),
            resources: vec![ResourceSchema {
                type_name: "Local::Fs::File".into(),
                identifier: vec!["path".into()],
                fields: vec![
                    field("path", FieldHint::default()),
                    field("content", FieldHint::default()),
                    field(
                        "size",
                        FieldHint {
                            read_only: true,
                            ..FieldHint::default()
                        },
                    ),
                    field(
                        "token",
                        FieldHint {
                            write_only: true,
                            ..FieldHint::default()
                        },
                    ),
                ],
                ..ResourceSchema::default()
            }],
            ..Announcement::default()
        });
        c
    }

    fn file(label: &str, path: &str, deps: &[&str]) -> StoredResource {
        StoredResource {
            stack: "s".into(),
            label: label.into(),
            resource_type: "Local::Fs::File".into(),
            target: "home".into(),
            plugin: "local".into(),
            native_id: path.into(),
            properties: PropertyMap::from([
                ("path".into(), Value::from(path)),
                ("size".into(), Value::Int(3)),
            ]),
            deps: deps.iter().map(|d| (*d).to_owned()).collect(),
            ..StoredResource::default()
        }
    }

    #[test]
    fn references_labels_and_secrets() {
        let targets = [TargetDecl {
            name: "home".into(),
            plugin: "local".into(),
            config: PropertyMap::from([
                ("root".into(), Value::from("/srv")),
                ("api_token".into(), Value::from("hunter2")),
            ]),
        }];
        let resources = [
            file("app", "app", &[]),
            StoredResource {
                secret_hashes: BTreeMap::from([("token".into(), "h".into())]),
                ..file("readme", "app/README", &["app"])
            },
            file("", "other/x", &[]),
            file("", "other/x", &[]),
        ];
        let text = extract("s", &targets, &resources, &catalog()).unwrap();
        assert!(!text.contains("hunter2"), "{text}");
        let doc: serde_json::Value = orrery_stack::yaml::read(&text, &Default::default()).unwrap();
        assert_eq!(doc["parameters"]["home_api_token"]["type"], "secret");
        assert_eq!(
            doc["targets"][0]["config"]["api_token"],
            "${param.home_api_token}"
        );
        let labels: Vec<&str> = doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["label"].as_str().unwrap())
            .collect();
        assert_eq!(labels, ["file-other_x", "file-other_x-2", "app", "readme"]);
        let readme = &doc["resources"][3]["properties"];
        assert_eq!(readme["path"], "${app.path}/README");
        assert!(readme.get("size").is_none(), "read-only left out");
        assert_eq!(readme["token"], "${param.readme_token}");
        assert_eq!(doc["parameters"]["readme_token"]["type"], "secret");
        // A secret field it was not given stays out.
        assert!(doc["resources"][2]["properties"].get("token").is_none());
        // Deterministic.
        assert_eq!(
            text,
            extract("s", &targets, &resources, &catalog()).unwrap()
        );
    }

    #[test]
    fn discovered_resources_are_imported() {
        let discovered = StoredResource {
            stack: crate::discovery::UNMANAGED_STACK.into(),
            label: "home/Local::Fs::File/found.txt".into(),
            managed: false,
            ..file("", "found.txt", &[])
        };
        let managed = StoredResource {
            managed: true,
            ..file("kept", "kept.txt", &[])
        };
        let text = extract("s", &[], &[discovered, managed], &catalog()).unwrap();
        let doc: serde_json::Value = orrery_stack::yaml::read(&text, &Default::default()).unwrap();
        assert_eq!(doc["resources"][0]["label"], "file-found_txt");
        assert_eq!(doc["resources"][0]["import"], "found.txt");
        assert!(doc["resources"][1].get("import").is_none(), "{text}");
    }

    #[test]
    fn instance_labels_are_moved_to_the_labels_written() {
        let resources = [
            StoredResource {
                managed: true,
                ..file("web[\"a\"]", "a", &[])
            },
            StoredResource {
                managed: true,
                ..file("plain", "p", &[])
            },
        ];
        let text = extract("s", &[], &resources, &catalog()).unwrap();
        let doc: serde_json::Value = orrery_stack::yaml::read(&text, &Default::default()).unwrap();
        assert_eq!(
            doc["moved"],
            serde_json::json!([{"from": "web[\"a\"]", "to": "web__a"}]),
            "{text}"
        );
        // It parses as a document, its move to a declared resource.
        let stack = orrery_stack::parse("x.yaml", &text, "/").unwrap();
        assert_eq!(stack.moved[0].to, "web__a");
        assert!(stack.resource("web__a").is_some());
    }

    #[test]
    fn labels_are_made_valid() {
        assert_eq!(clean_label("web[\"a\"]"), "web__a");
        assert_eq!(clean_label("9lives"), "r_9lives");
        assert_eq!(clean_label(""), "r");
    }
}
