//! Privileges as the catalogs' ACLs hold them, shared by grants and
//! default privileges: the statements, the names, reading `aclexplode`.

use orrery_plugin_sdk::PluginError;
use tokio_postgres::Row;

/// `[prefix ]GRANT privileges ON on TO to[ WITH GRANT OPTION]`; with
/// `replace`, after revoking all `to` held there, in one transaction (an
/// update never leaves the grantee with neither the old set nor the new).
pub fn grant_sql(
    prefix: &str,
    (privileges, on, to): (&str, &str, &str),
    grant_option: Option<bool>,
    replace: bool,
) -> String {
    let option = if grant_option == Some(true) {
        " WITH GRANT OPTION"
    } else {
        ""
    };
    let grant = format!("{prefix}GRANT {privileges} ON {on} TO {to}{option}");
    if replace {
        format!("BEGIN; {prefix}REVOKE ALL ON {on} FROM {to}; {grant}; COMMIT")
    } else {
        grant
    }
}

/// A kind of object privileges are held on, as grants and default
/// privileges name it (`object_type`) and as PostgreSQL does.
pub struct Kind {
    /// Its `object_type`.
    pub name: &'static str,
    /// What `GRANT ... ON` calls it (`ALTER DEFAULT PRIVILEGES` the plural).
    pub keyword: &'static str,
    /// The privileges it can have, as `aclexplode` names them.
    pub privileges: &'static [&'static str],
    /// `acldefault`'s letter for it.
    pub acldefault: &'static str,
    /// `pg_default_acl.defaclobjtype`, for the kinds default privileges cover.
    pub defaults: Option<&'static str>,
}

const KINDS: [Kind; 6] = [
    Kind {
        name: "database",
        keyword: "DATABASE",
        privileges: &["CONNECT", "CREATE", "TEMPORARY"],
        acldefault: "d",
        defaults: None,
    },
    Kind {
        name: "schema",
        keyword: "SCHEMA",
        privileges: &["CREATE", "USAGE"],
        acldefault: "n",
        defaults: None,
    },
    Kind {
        name: "table",
        keyword: "TABLE",
        privileges: &[
            "DELETE",
            "INSERT",
            "REFERENCES",
            "SELECT",
            "TRIGGER",
            "TRUNCATE",
            "UPDATE",
        ],
        acldefault: "r",
        defaults: Some("r"),
    },
    Kind {
        name: "sequence",
        keyword: "SEQUENCE",
        privileges: &["SELECT", "UPDATE", "USAGE"],
        acldefault: "s",
        defaults: Some("S"),
    },
    Kind {
        name: "function",
        keyword: "FUNCTION",
        privileges: &["EXECUTE"],
        acldefault: "f",
        defaults: Some("f"),
    },
    Kind {
        name: "type",
        keyword: "TYPE",
        privileges: &["USAGE"],
        acldefault: "T",
        defaults: Some("T"),
    },
];

/// The kind `object_type` names.
pub fn kind(object_type: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.name == object_type)
}

/// `privileges` upper-cased, checked against `object_type`, sorted.
pub fn checked(
    what: &str,
    object_type: &str,
    privileges: &[String],
) -> Result<Vec<String>, PluginError> {
    let allowed = kind(object_type).map(|k| k.privileges).ok_or_else(|| {
        PluginError::invalid(format!("{what}: unknown object_type `{object_type}`"))
    })?;
    let mut out = Vec::new();
    for p in privileges {
        let p = p.to_ascii_uppercase();
        if !allowed.contains(&p.as_str()) {
            return Err(PluginError::invalid(format!(
                "{what}: `{p}` is not a privilege of a {object_type} (one of {})",
                allowed.join(", ")
            )));
        }
        out.push(p);
    }
    if out.is_empty() {
        return Err(PluginError::invalid(format!("{what}: privileges is empty")));
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// SQL for the grantee's oid, from the role name in parameter `$n`
/// (`PUBLIC` is oid 0 in ACLs).
pub fn grantee_oid(n: usize) -> String {
    format!(
        "(SELECT CASE WHEN lower(${n}::text) = 'public' THEN 0::oid ELSE (SELECT oid FROM pg_roles WHERE rolname = ${n}) END)"
    )
}

/// (privilege, grantable) rows of `aclexplode`: the privileges held and
/// whether every one of them is grantable.
pub fn held(rows: &[Row]) -> (Vec<String>, bool) {
    let mut privileges: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    let grantable = rows.iter().all(|r| r.get::<_, bool>(1));
    privileges.sort();
    privileges.dedup();
    (privileges, grantable)
}

/// The catalog's privileges, or the author's spelling of the same set.
pub fn echo(recorded: Option<Vec<String>>, catalog: Vec<String>) -> Vec<String> {
    match recorded {
        Some(want) => {
            let mut upper: Vec<String> = want.iter().map(|p| p.to_ascii_uppercase()).collect();
            upper.sort();
            upper.dedup();
            if upper == catalog {
                want
            } else {
                catalog
            }
        }
        None => catalog,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_check_privileges_and_say_how_postgresql_names_them() {
        let usage = checked("w", "sequence", &["usage".into(), "USAGE".into()]).unwrap();
        assert_eq!(usage, ["USAGE"]);
        let wrong = checked("w", "schema", &["SELECT".into()]).unwrap_err();
        assert!(
            wrong.message.contains("not a privilege of a schema"),
            "{wrong}"
        );
        assert!(checked("w", "rule", &["SELECT".into()]).is_err());
        let sequence = kind("sequence").unwrap();
        assert_eq!(
            (sequence.keyword, sequence.acldefault, sequence.defaults),
            ("SEQUENCE", "s", Some("S"))
        );
        assert_eq!(kind("database").unwrap().defaults, None);
    }
}
