//! Privileges as the catalogs' ACLs hold them, shared by grants and
//! default privileges.

use orrery_plugin_sdk::PluginError;
use tokio_postgres::Row;

/// The privileges `object_type` can have, as `aclexplode` names them.
pub fn allowed(object_type: &str) -> Option<&'static [&'static str]> {
    Some(match object_type {
        "database" => &["CONNECT", "CREATE", "TEMPORARY"],
        "schema" => &["CREATE", "USAGE"],
        "table" => &[
            "DELETE",
            "INSERT",
            "REFERENCES",
            "SELECT",
            "TRIGGER",
            "TRUNCATE",
            "UPDATE",
        ],
        "sequence" => &["SELECT", "UPDATE", "USAGE"],
        "function" => &["EXECUTE"],
        "type" => &["USAGE"],
        _ => return None,
    })
}

/// `privileges` upper-cased, checked against `object_type`, sorted.
pub fn checked(
    what: &str,
    object_type: &str,
    privileges: &[String],
) -> Result<Vec<String>, PluginError> {
    let allowed = allowed(object_type).ok_or_else(|| {
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
