//! What the suite says about an announcement: problems that fail
//! `announcement_valid`, and warnings about values this release does not
//! know, which the host accepts (every wire enum is open) and so must the
//! suite.
//!
//! Every finding starts with the path of the offending field, spelled as on
//! the wire, with resource types and fields named rather than numbered:
//! `resources[Local::Fs::File].fields.mode.hints.update_method`.

use std::collections::BTreeSet;

use orrery_schema::{Announcement, EdgeKind, FieldType, MatchOp, UpdateMethod, PROTOCOL_MAJOR};

/// The findings about one announcement.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Findings {
    /// Contract violations: the check fails.
    pub(crate) problems: Vec<String>,
    /// Values this release does not know, with how the host reads them.
    pub(crate) warnings: Vec<String>,
}

/// Checks `a`. Unknown enum values are warnings, never problems: the
/// protocol says a receiver MUST accept a name it does not know, and the
/// host reads each in the most cautious way, which the warning says.
pub(crate) fn check(a: &Announcement) -> Findings {
    let mut f = Findings::default();
    if a.protocol != PROTOCOL_MAJOR {
        f.problems.push(format!(
            "protocol: {} but the host speaks {PROTOCOL_MAJOR}",
            a.protocol
        ));
    }
    for (what, value) in [
        ("name", &a.name),
        ("version", &a.version),
        ("namespace", &a.namespace),
    ] {
        if value.trim().is_empty() {
            f.problems.push(format!("{what}: empty"));
        }
    }
    for (i, capability) in a.capabilities.iter().enumerate() {
        if !capability.is_known() {
            f.warnings.push(format!(
                "capabilities[{i}]: unknown capability `{capability}`; the host ignores it"
            ));
        }
    }
    let rl = &a.rate_limit;
    if !rl.requests_per_second.is_finite() || rl.requests_per_second < 0.0 {
        f.problems.push(format!(
            "rate_limit.requests_per_second: {} (must be a finite number, 0 or more)",
            rl.requests_per_second
        ));
    }
    if rl.requests_per_second > 0.0 && rl.burst == 0 {
        f.problems.push(format!(
            "rate_limit.burst: 0 with requests_per_second {} admits no request",
            rl.requests_per_second
        ));
    }
    if a.resources.is_empty() {
        f.problems.push("resources: no resource types".into());
    }
    let mut types = BTreeSet::new();
    for (i, r) in a.resources.iter().enumerate() {
        let at = if r.type_name.is_empty() {
            format!("resources[#{i}]")
        } else {
            format!("resources[{}]", r.type_name)
        };
        if r.type_name.is_empty() {
            f.problems.push(format!("{at}.type_name: empty"));
        } else if !types.insert(r.type_name.as_str()) {
            f.problems.push(format!("{at}.type_name: announced twice"));
        }
        let prefix = format!("{}::", a.namespace);
        if !r.type_name.is_empty() && !r.type_name.starts_with(&prefix) {
            f.problems.push(format!(
                "{at}.type_name: outside namespace `{}` (must start with `{prefix}`)",
                a.namespace
            ));
        }
        let mut fields = BTreeSet::new();
        for (j, field) in r.fields.iter().enumerate() {
            let at = if field.name.is_empty() {
                format!("{at}.fields[#{j}]")
            } else {
                format!("{at}.fields.{}", field.name)
            };
            if !fields.insert(field.name.as_str()) {
                f.problems.push(format!("{at}: declared twice"));
            }
            let h = &field.hints;
            if h.read_only {
                let clashes: Vec<&str> = [
                    ("required", h.required),
                    ("required_on_create", h.required_on_create),
                    ("write_only", h.write_only),
                ]
                .into_iter()
                .filter(|(_, set)| *set)
                .map(|(name, _)| name)
                .collect();
                if !clashes.is_empty() {
                    f.problems.push(format!(
                        "{at}.hints: read_only together with {}",
                        clashes.join(" and ")
                    ));
                }
            }
            if let FieldType::Unknown(name) = &field.field_type {
                f.warnings.push(format!(
                    "{at}.type: unknown field type `{name}`; the host treats it as `any`"
                ));
            }
            if let UpdateMethod::Unknown(name) = &h.update_method {
                f.warnings.push(format!(
                    "{at}.hints.update_method: unknown update method `{name}`; the host \
                     replaces the resource (delete, then create) when the field changes"
                ));
            }
            if let EdgeKind::Unknown(name) = &h.edge_kind {
                f.warnings.push(format!(
                    "{at}.hints.edge_kind: unknown edge kind `{name}`; the host orders a \
                     reference through it as an ordinary dependency (`default`)"
                ));
            }
        }
        for (k, id) in r.identifier.iter().enumerate() {
            if r.field(id).is_none() {
                f.problems.push(format!(
                    "{at}.identifier[{k}]: `{id}` is not one of the type's fields"
                ));
            }
        }
    }
    for (i, filter) in a.discovery_filters.iter().enumerate() {
        let at = format!("discovery_filters[{i}]");
        if a.resource(&filter.resource_type).is_none() {
            f.problems.push(format!(
                "{at}.resource_type: `{}` is not an announced type",
                filter.resource_type
            ));
        }
        for (j, condition) in filter.exclude_when.iter().enumerate() {
            if let MatchOp::Unknown(name) = &condition.op {
                f.warnings.push(format!(
                    "{at}.exclude_when[{j}].op: unknown match operator `{name}`; the host \
                     never counts the condition as holding, so the filter excludes nothing"
                ));
            }
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use orrery_schema::{
        Capability, Condition, DiscoveryFilter, FieldSchema, RateLimit, ResourceSchema,
    };

    use super::*;

    fn field(name: &str) -> FieldSchema {
        FieldSchema {
            name: name.into(),
            field_type: FieldType::String,
            ..Default::default()
        }
    }

    fn valid() -> Announcement {
        Announcement {
            name: "local".into(),
            version: "0.1.0".into(),
            namespace: "Local".into(),
            resources: vec![ResourceSchema {
                type_name: "Local::Fs::File".into(),
                identifier: vec!["path".into()],
                fields: vec![field("path"), field("mode")],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_valid_announcement_has_no_findings() {
        assert_eq!(check(&valid()), Findings::default());
    }

    #[test]
    fn unknown_enum_values_are_warnings_naming_the_field_never_problems() {
        let mut a = valid();
        a.capabilities = vec![Capability::Ping, Capability::Unknown("teleport".into())];
        let mode = &mut a.resources[0].fields[1];
        mode.field_type = FieldType::Unknown("octal".into());
        mode.hints.update_method = UpdateMethod::Unknown("patch".into());
        mode.hints.edge_kind = EdgeKind::Unknown("weakReference".into());
        a.discovery_filters = vec![DiscoveryFilter {
            resource_type: "Local::Fs::File".into(),
            exclude_when: vec![Condition {
                property: "path".into(),
                op: MatchOp::Unknown("glob".into()),
                ..Default::default()
            }],
        }];
        let f = check(&a);
        assert_eq!(f.problems, Vec::<String>::new());
        assert_eq!(
            f.warnings.len(),
            5,
            "one warning per unknown value: {:?}",
            f.warnings
        );
        for w in &f.warnings {
            assert!(!w.contains("hint value"), "{w}");
        }
        assert!(f.warnings[0].starts_with("capabilities[1]: unknown capability `teleport`"));
        assert!(f.warnings[1].starts_with(
            "resources[Local::Fs::File].fields.mode.type: unknown field type `octal`"
        ));
        assert!(f.warnings[1].contains("`any`"));
        assert!(f.warnings[2].starts_with(
            "resources[Local::Fs::File].fields.mode.hints.update_method: unknown update method `patch`"
        ));
        assert!(f.warnings[3].starts_with(
            "resources[Local::Fs::File].fields.mode.hints.edge_kind: unknown edge kind `weakReference`"
        ));
        assert!(f.warnings[4]
            .starts_with("discovery_filters[0].exclude_when[0].op: unknown match operator `glob`"));
    }

    #[test]
    fn problems_name_the_offending_field() {
        let mut a = valid();
        a.version = " ".into();
        a.rate_limit = RateLimit {
            requests_per_second: 5.0,
            burst: 0,
            max_in_flight: 1,
        };
        let file = &mut a.resources[0];
        file.identifier.push("inode".into());
        file.fields[1].hints.read_only = true;
        file.fields[1].hints.write_only = true;
        file.fields[1].hints.required = true;
        file.fields.push(field("path"));
        let mut other = a.resources[0].clone();
        other.type_name = "Remote::Thing".into();
        a.resources.push(other);
        a.resources.push(a.resources[0].clone());
        a.discovery_filters = vec![DiscoveryFilter {
            resource_type: "Local::Fs::Nope".into(),
            ..Default::default()
        }];
        let f = check(&a);
        let expected = [
            "version: empty",
            "rate_limit.burst: 0 with requests_per_second 5 admits no request",
            "resources[Local::Fs::File].fields.mode.hints: read_only together with required and write_only",
            "resources[Local::Fs::File].fields.path: declared twice",
            "resources[Local::Fs::File].identifier[1]: `inode` is not one of the type's fields",
            "resources[Remote::Thing].type_name: outside namespace `Local` (must start with `Local::`)",
            "resources[Local::Fs::File].type_name: announced twice",
            "discovery_filters[0].resource_type: `Local::Fs::Nope` is not an announced type",
        ];
        for e in expected {
            assert!(
                f.problems.iter().any(|p| p == e),
                "missing `{e}` in {:#?}",
                f.problems
            );
        }
        assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    }
}
