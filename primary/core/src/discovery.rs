//! The pure part of discovery and drift sync: filters, labels, the managed
//! index, property comparison and drift markers. No I/O, no clock.

use std::collections::{BTreeMap, HashSet};

use orrery_schema::{
    Condition, DiscoveryFilter, ListedResource, MatchOp, ParentScope, PropertyMap, ResourceSchema,
    Value,
};

use crate::keys::ManagedKey;
use crate::record::StoredResource;
use orrery_stack::TargetDecl;

/// The `stack` of a discovered, unmanaged resource.
pub const UNMANAGED_STACK: &str = "";

/// The key in [`StoredResource::secret_hashes`] holding a drift marker. It
/// can never be a field name, so the planner never looks at it; the executor
/// rebuilds `secret_hashes` on every create and update, so the marker lives
/// exactly until the next apply writes the resource.
pub const DRIFT_KEY: &str = "@drift";

/// The label of an unmanaged resource: `<target>/<type>/<native id>`.
pub fn unmanaged_label(target: &str, resource_type: &str, native_id: &str) -> String {
    format!("{target}/{resource_type}/{native_id}")
}

/// Whether `condition` holds for `properties`. Unknown operators never hold
/// (so a newer plugin's filter never hides a resource from an older primary).
pub fn condition_holds(condition: &Condition, properties: &PropertyMap) -> bool {
    let value = properties.get(&condition.property);
    match &condition.op {
        MatchOp::Equals => value == Some(&condition.value),
        MatchOp::Prefix => match (value.and_then(Value::as_str), condition.value.as_str()) {
            (Some(v), Some(prefix)) => v.starts_with(prefix),
            _ => false,
        },
        MatchOp::Exists => value.is_some(),
        MatchOp::Unknown(_) => false,
    }
}

/// Whether a listed resource of `resource_type` is excluded by one of the
/// plugin's discovery filters: a filter for its type whose conditions all
/// hold. (A filter without conditions excludes its whole type.)
pub fn excluded(
    filters: &[DiscoveryFilter],
    resource_type: &str,
    properties: &PropertyMap,
) -> bool {
    filters
        .iter()
        .filter(|f| f.resource_type == resource_type)
        .any(|f| {
            f.exclude_when
                .iter()
                .all(|c| condition_holds(c, properties))
        })
}

/// The discoverable types of a plugin in the order discovery lists them:
/// every type after the parent type it is listed under
/// ([`ResourceSchema::parent`]), otherwise in announced order. A parent that
/// is not announced, not discoverable, or part of a cycle does not hold its
/// children back: they are listed per target, without a parent.
pub fn listing_order(resources: &[ResourceSchema]) -> Vec<&ResourceSchema> {
    let discoverable: Vec<&ResourceSchema> = resources.iter().filter(|r| r.discoverable).collect();
    let mut placed: HashSet<&str> = HashSet::new();
    let mut order = Vec::with_capacity(discoverable.len());
    // Each pass places every type whose parent is placed (or absent); a
    // pass that places nothing leaves only cycles, placed as they come.
    while order.len() < discoverable.len() {
        let before = order.len();
        for r in &discoverable {
            let waits = r.parent.as_ref().is_some_and(|p| {
                p.resource_type != r.type_name
                    && !placed.contains(p.resource_type.as_str())
                    && discoverable.iter().any(|d| d.type_name == p.resource_type)
            });
            if !waits && !placed.contains(r.type_name.as_str()) {
                placed.insert(&r.type_name);
                order.push(*r);
            }
        }
        if order.len() == before {
            for r in &discoverable {
                if placed.insert(&r.type_name) {
                    order.push(*r);
                }
            }
        }
    }
    order
}

/// Fills the properties a child takes from its parent
/// ([`ParentScope::properties`]) where the plugin left them out.
pub fn inherit_from_parent(
    scope: &ParentScope,
    parent: &ListedResource,
    properties: &mut PropertyMap,
) {
    for (child, from) in &scope.properties {
        if let Some(value) = parent.properties.get(from) {
            properties
                .entry(child.clone())
                .or_insert_with(|| value.clone());
        }
    }
}

/// Drops write-only and opaque fields (plugins should never return them).
pub fn strip_secrets(schema: Option<&ResourceSchema>, properties: &mut PropertyMap) {
    if let Some(schema) = schema {
        properties.retain(|k, _| !schema.field(k).is_some_and(|f| f.hints.is_secret()));
    }
}

/// What a field set from a secret records as its hash once its value has
/// moved out of band: no value hashes to it, so the next plan writes the
/// field again, and the next drift sync still knows the field is secret.
pub const MOVED_SECRET: &str = "moved out of band";

/// Takes out of `read` every field recorded by keyed hash only (set from a
/// secret: `recorded_hashes`, the drift marker aside), so that its value is
/// never recorded, and names those whose value read does not hash to the
/// one applied. A field the plugin does not read back is not compared.
pub fn secret_derived_changes(
    hash: impl Fn(&str, &Value) -> String,
    recorded_hashes: &BTreeMap<String, String>,
    read: &mut PropertyMap,
) -> Vec<String> {
    recorded_hashes
        .iter()
        .filter(|(field, _)| field.as_str() != DRIFT_KEY)
        .filter_map(|(field, recorded)| {
            let value = read.remove(field)?;
            (hash(field, &value) != *recorded).then(|| field.clone())
        })
        .collect()
}

/// Fields that differ between the recorded and the read properties,
/// ignoring write-only, opaque and read-only fields (a read-only field
/// follows the others; it is recorded, never reported as drift).
pub fn changed_fields(
    schema: Option<&ResourceSchema>,
    recorded: &PropertyMap,
    read: &PropertyMap,
) -> Vec<String> {
    let ignored = |k: &str| {
        schema
            .and_then(|s| s.field(k))
            .is_some_and(|f| f.hints.is_secret() || f.hints.read_only)
    };
    let keys: std::collections::BTreeSet<&String> = recorded.keys().chain(read.keys()).collect();
    keys.into_iter()
        .filter(|k| !ignored(k) && recorded.get(*k) != read.get(*k))
        .cloned()
        .collect()
}

/// A drift marker as recorded on a resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Drift {
    /// Changed out of band: these fields differ from what was applied.
    Changed(Vec<String>),
    /// Deleted out of band; the record is kept, unmanaged, so that the next
    /// apply plans a create.
    Deleted,
}

impl Drift {
    /// The stored form.
    pub fn encode(&self) -> String {
        match self {
            Drift::Changed(fields) => format!("changed:{}", fields.join(",")),
            Drift::Deleted => "deleted".to_owned(),
        }
    }

    /// Parses the stored form.
    pub fn decode(s: &str) -> Option<Drift> {
        match s.split_once(':') {
            Some(("changed", fields)) => Some(Drift::Changed(
                fields
                    .split(',')
                    .filter(|f| !f.is_empty())
                    .map(str::to_owned)
                    .collect(),
            )),
            _ if s == "deleted" => Some(Drift::Deleted),
            _ => None,
        }
    }

    /// The marker of a record, if it has drifted and no apply has written
    /// it since.
    pub fn of(resource: &StoredResource) -> Option<Drift> {
        resource
            .secret_hashes
            .get(DRIFT_KEY)
            .and_then(|s| Drift::decode(s))
    }

    /// For people: `changed (content, mode)` or `deleted`.
    pub fn describe(&self) -> String {
        match self {
            Drift::Changed(fields) => format!("changed ({})", fields.join(", ")),
            Drift::Deleted => "deleted".to_owned(),
        }
    }
}

/// Whether a record is a discovered, unmanaged resource (not a tombstone of
/// a managed resource deleted out of band).
pub fn is_discovered(r: &StoredResource) -> bool {
    !r.managed && r.stack == UNMANAGED_STACK
}

/// A target to discover, with the stacks that declare it identically.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetRef {
    /// Its declaration.
    pub decl: TargetDecl,
    /// The stacks declaring it (same name, plugin and config).
    pub stacks: Vec<String>,
}

/// Merges identical target declarations of several stacks.
pub fn merge_targets(
    per_stack: impl IntoIterator<Item = (String, Vec<TargetDecl>)>,
) -> Vec<TargetRef> {
    let mut out: Vec<TargetRef> = Vec::new();
    for (stack, decls) in per_stack {
        for decl in decls {
            match out.iter_mut().find(|t| t.decl == decl) {
                Some(t) if !t.stacks.contains(&stack) => t.stacks.push(stack.clone()),
                Some(_) => {}
                None => out.push(TargetRef {
                    decl,
                    stacks: vec![stack.clone()],
                }),
            }
        }
    }
    out
}

/// The native ids of one type on one target that a stack declaring that
/// target manages (the same target name in another stack may be another
/// target).
#[derive(Debug, Default)]
pub struct ManagedIds {
    ids: HashSet<String>,
}

impl ManagedIds {
    /// The ids of `keys` managed by one of `stacks`.
    pub fn new(keys: impl IntoIterator<Item = ManagedKey>, stacks: &[String]) -> Self {
        ManagedIds {
            ids: keys
                .into_iter()
                .filter(|k| stacks.contains(&k.stack))
                .map(|k| k.native_id)
                .collect(),
        }
    }

    /// Whether a declaring stack manages `native_id`.
    pub fn contains(&self, native_id: &str) -> bool {
        self.ids.contains(native_id)
    }
}

/// Secret hashes with a drift marker set (or cleared with `None`).
pub fn with_drift(
    mut hashes: BTreeMap<String, String>,
    drift: Option<&Drift>,
) -> BTreeMap<String, String> {
    match drift {
        Some(d) => {
            hashes.insert(DRIFT_KEY.to_owned(), d.encode());
        }
        None => {
            hashes.remove(DRIFT_KEY);
        }
    }
    hashes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, Value)]) -> PropertyMap {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    fn cond(property: &str, op: MatchOp, value: Value) -> Condition {
        Condition {
            property: property.into(),
            op,
            value,
        }
    }

    #[test]
    fn filters_exclude_only_when_every_condition_holds() {
        let filters = vec![DiscoveryFilter {
            resource_type: "T".into(),
            exclude_when: vec![
                cond("path", MatchOp::Prefix, ".".into()),
                cond("mode", MatchOp::Exists, Value::Null),
            ],
        }];
        let hidden = props(&[("path", ".git".into()), ("mode", Value::Int(493))]);
        assert!(excluded(&filters, "T", &hidden));
        assert!(
            !excluded(&filters, "U", &hidden),
            "other types are not filtered"
        );
        let no_mode = props(&[("path", ".git".into())]);
        assert!(!excluded(&filters, "T", &no_mode));
        let visible = props(&[("path", "www".into()), ("mode", Value::Int(493))]);
        assert!(!excluded(&filters, "T", &visible));
    }

    #[test]
    fn condition_operators() {
        let p = props(&[("a", "x".into()), ("n", Value::Int(1))]);
        assert!(condition_holds(&cond("a", MatchOp::Equals, "x".into()), &p));
        assert!(!condition_holds(
            &cond("a", MatchOp::Equals, "y".into()),
            &p
        ));
        assert!(condition_holds(
            &cond("n", MatchOp::Equals, Value::Int(1)),
            &p
        ));
        assert!(!condition_holds(
            &cond("n", MatchOp::Prefix, "1".into()),
            &p
        ));
        assert!(condition_holds(&cond("a", MatchOp::Prefix, "".into()), &p));
        assert!(!condition_holds(
            &cond("b", MatchOp::Exists, Value::Null),
            &p
        ));
        assert!(!condition_holds(
            &cond("a", MatchOp::Unknown("regex".into()), "x".into()),
            &p
        ));
    }

    #[test]
    fn changed_fields_ignore_read_only_and_secrets() {
        use orrery_plugin_sdk::{field, resource};
        let schema = resource("T")
            .field(field::string("path").required())
            .field(field::string("content"))
            .field(field::string("sha").read_only())
            .field(field::string("pw").write_only().opaque())
            .build();
        let recorded = props(&[
            ("path", "a".into()),
            ("content", "1".into()),
            ("sha", "x".into()),
        ]);
        let read = props(&[
            ("path", "a".into()),
            ("content", "2".into()),
            ("sha", "y".into()),
            ("pw", "leak".into()),
        ]);
        assert_eq!(changed_fields(Some(&schema), &recorded, &read), ["content"]);
        let mut stripped = read.clone();
        strip_secrets(Some(&schema), &mut stripped);
        assert!(!stripped.contains_key("pw"));
        let same_but_sha = props(&[
            ("path", "a".into()),
            ("content", "1".into()),
            ("sha", "z".into()),
        ]);
        assert!(changed_fields(Some(&schema), &recorded, &same_but_sha).is_empty());
    }

    #[test]
    fn drift_markers_round_trip() {
        for d in [
            Drift::Deleted,
            Drift::Changed(vec!["content".into(), "mode".into()]),
            Drift::Changed(vec![]),
        ] {
            assert_eq!(Drift::decode(&d.encode()), Some(d));
        }
        assert_eq!(Drift::decode("nonsense"), None);
        let hashes = with_drift(BTreeMap::new(), Some(&Drift::Deleted));
        let r = StoredResource {
            secret_hashes: hashes.clone(),
            ..Default::default()
        };
        assert_eq!(Drift::of(&r), Some(Drift::Deleted));
        assert!(with_drift(hashes, None).is_empty());
    }

    #[test]
    fn identical_targets_merge_and_index_by_declaring_stacks() {
        let t = |root: &str| TargetDecl {
            name: "home".into(),
            plugin: "local".into(),
            config: props(&[("root", root.into())]),
        };
        let merged = merge_targets([
            ("a".to_owned(), vec![t("/x")]),
            ("b".to_owned(), vec![t("/x")]),
            ("c".to_owned(), vec![t("/y")]),
        ]);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].stacks, ["a", "b"]);
        let keys = || {
            [
                ManagedKey {
                    stack: "c".into(),
                    native_id: "f".into(),
                },
                ManagedKey {
                    stack: "a".into(),
                    native_id: "g".into(),
                },
            ]
        };
        let of_y = ManagedIds::new(keys(), &merged[1].stacks);
        assert!(of_y.contains("f"));
        assert!(!of_y.contains("g"), "stack a declares the other target");
        // Same target name, other root: stack c's file is not managed there.
        let of_x = ManagedIds::new(keys(), &merged[0].stacks);
        assert!(!of_x.contains("f"));
        assert!(of_x.contains("g"));
    }

    fn schema(name: &str, parent: Option<&str>) -> ResourceSchema {
        ResourceSchema {
            type_name: name.into(),
            discoverable: true,
            parent: parent.map(|p| ParentScope {
                resource_type: p.into(),
                properties: [("database".to_owned(), "name".to_owned())].into(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn children_are_listed_after_their_parents() {
        let types = vec![
            schema("Grant", Some("Schema")),
            schema("Schema", Some("Database")),
            schema("Role", None),
            schema("Database", None),
            // Parent not announced: listed per target, in place.
            schema("Orphan", Some("Ghost")),
            // A cycle holds nothing back forever.
            schema("A", Some("B")),
            schema("B", Some("A")),
        ];
        let mut hidden = schema("Hidden", None);
        hidden.discoverable = false;
        let mut all = types.clone();
        all.push(hidden);
        let order: Vec<&str> = listing_order(&all)
            .iter()
            .map(|r| r.type_name.as_str())
            .collect();
        assert_eq!(
            order,
            ["Role", "Database", "Orphan", "Schema", "Grant", "A", "B"]
        );
    }

    #[test]
    fn children_inherit_what_they_leave_out_from_their_parent() {
        let scope = schema("Schema", Some("Database")).parent.unwrap();
        let parent = ListedResource {
            native_id: "app".into(),
            properties: props(&[("name", Value::from("app"))]),
        };
        let mut left_out = props(&[("name", Value::from("public"))]);
        inherit_from_parent(&scope, &parent, &mut left_out);
        assert_eq!(left_out.get("database"), Some(&Value::from("app")));
        // What the plugin says wins.
        let mut given = props(&[("database", Value::from("other"))]);
        inherit_from_parent(&scope, &parent, &mut given);
        assert_eq!(given.get("database"), Some(&Value::from("other")));
    }
}
