//! Privileges as the catalogs' ACLs hold them, shared by grants and
//! default privileges.

use std::collections::BTreeMap;
use std::future::Future;

use orrery_plugin_sdk::schema::{ErrorCode, ListRequest, ListedResource};
use orrery_plugin_sdk::{to_properties, ListPage, OpResult, PluginError};
use serde::Serialize;
use tokio_postgres::Row;

use crate::{page, Cx};

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

/// Creates a privilege resource: privileges already held there are
/// `AlreadyExists` (an author imports them as `native_id`); otherwise
/// `apply`, then `read` what is held now.
pub async fn create_unless_held<R: Future<Output = OpResult>>(
    what: &str,
    native_id: &str,
    read: impl Fn() -> R,
    apply: impl Future<Output = Result<(), PluginError>>,
) -> OpResult {
    match read().await {
        Ok(_) => Err(PluginError::new(
            ErrorCode::AlreadyExists,
            format!("{what}: already held; import it as `{native_id}`"),
        )),
        Err(e) if e.code == ErrorCode::NotFound => {
            apply.await?;
            read().await
        }
        Err(e) => Err(e),
    }
}

/// A resource that holds privileges (a grant, default privileges), as
/// listing gathers them row by row.
pub trait Holding: Serialize {
    /// Its native id: the rows of one resource share it.
    fn native_id(&self) -> String;
    /// Its privileges and grant option, to gather into.
    fn holding(&mut self) -> (&mut Vec<String>, &mut Option<bool>);
}

/// [`Holding`] for a type with `privileges` and `with_grant_option` fields
/// and an inherent `native_id`.
macro_rules! holding {
    ($t:ty) => {
        impl $crate::acl::Holding for $t {
            fn native_id(&self) -> String {
                <$t>::native_id(self)
            }
            fn holding(&mut self) -> (&mut Vec<String>, &mut Option<bool>) {
                (&mut self.privileges, &mut self.with_grant_option)
            }
        }
    };
}
pub(crate) use holding;

/// Lists a privilege catalog in every database `request` covers: `sql`
/// yields one row per privilege held (its name and grantability in columns
/// `at` and `at + 1`), `of_row` makes the resource a row belongs to (grant
/// option `Some(true)`, no privileges yet), and rows of one native id are
/// gathered into one resource.
pub async fn list_holding<T: Holding>(
    cx: &Cx<'_>,
    request: &ListRequest,
    sql: &str,
    at: usize,
    of_row: impl Fn(&str, &Row) -> T,
) -> Result<ListPage, PluginError> {
    let mut found: BTreeMap<String, T> = BTreeMap::new();
    for database in crate::databases_listed(cx, request).await? {
        let ty = &request.resource_type;
        let what = format!("listing {ty} in database `{database}`");
        let Some(rows) = cx.list_rows(&database, &what, sql).await? else {
            continue;
        };
        for row in rows {
            let resource = of_row(&database, &row);
            let entry = found.entry(resource.native_id()).or_insert(resource);
            let (privileges, grant_option) = entry.holding();
            privileges.push(row.get(at));
            *grant_option = Some(*grant_option == Some(true) && row.get::<_, bool>(at + 1));
        }
    }
    let all = found
        .into_iter()
        .map(|(native_id, mut resource)| {
            resource.holding().0.sort();
            Ok(ListedResource {
                native_id,
                properties: to_properties(&resource)?,
            })
        })
        .collect::<Result<Vec<_>, PluginError>>()?;
    let token = request.page_token.as_deref();
    Ok(page::of_all(all, request.page_size, token))
}

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
