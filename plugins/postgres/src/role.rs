//! `Postgres::Role`: a role of the cluster, its attributes and memberships.

use orrery_plugin_sdk::field::{self, any, boolean, string};
use orrery_plugin_sdk::schema::{ListRequest, PropertyMap, ResourceSchema, Value};
use orrery_plugin_sdk::{deleted, done, from_properties, resource, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use serde::{Deserialize, Serialize};
use tokio_postgres::GenericClient;

use crate::catalog::{self, record};
use crate::fields::{connection_limit, defaulted, key};
use crate::sql::{ident, Clauses};
use crate::{page, Cx};

pub const TYPE: &str = "Postgres::Role";

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Role {
    name: String,
    login: Option<bool>,
    superuser: Option<bool>,
    createdb: Option<bool>,
    createrole: Option<bool>,
    inherit: Option<bool>,
    replication: Option<bool>,
    connection_limit: Option<i32>,
    valid_until: Option<String>,
    member_of: Option<Vec<String>>,
    #[serde(skip_serializing)]
    password: Option<String>,
    /// Not in the catalogs: changing it sends `password` again.
    password_version: Option<Value>,
    drop_owned: Option<bool>,
    reassign_owned_to: Option<String>,
}

pub fn schema() -> ResourceSchema {
    let flag = |name: &str, what: &str| defaulted(boolean(name), what);
    resource(TYPE)
        .describe("A role (user or group) of the cluster")
        .identifier(["name"])
        .field(key("name"))
        .field(flag("login", "May log in (default false)"))
        .field(flag("superuser", "Bypasses every check"))
        .field(flag("createdb", "May create databases"))
        .field(flag("createrole", "May create roles"))
        .field(flag(
            "inherit",
            "Inherits its roles' privileges (default true)",
        ))
        .field(flag("replication", "May stream replication"))
        .field(connection_limit())
        .field(string("valid_until").describe("Password expiry, a timestamp or `infinity`"))
        .field(defaulted(
            field::list("member_of"),
            "Roles it is a member of",
        ))
        .field(string("password").write_only().opaque())
        .field(any("password_version").describe("Change it to set `password` again"))
        .field(boolean("drop_owned").describe("On delete, drop what it owns in every database"))
        .field(
            string("reassign_owned_to")
                .describe("On delete, give what it owns to this role, in every database"),
        )
        .build()
}

/// `head` and the `WITH ...` options of CREATE/ALTER ROLE for the fields given.
fn options(head: Clauses, r: &Role) -> Result<Clauses, PluginError> {
    head.flag("LOGIN", r.login)
        .flag("SUPERUSER", r.superuser)
        .flag("CREATEDB", r.createdb)
        .flag("CREATEROLE", r.createrole)
        .flag("INHERIT", r.inherit)
        .flag("REPLICATION", r.replication)
        .number("CONNECTION LIMIT", r.connection_limit)
        .literal("VALID UNTIL", r.valid_until.as_ref())?
        .literal("PASSWORD", r.password.as_deref().map(verifier).as_ref())
}

/// What `PASSWORD` sends for `password`: its SCRAM-SHA-256 verifier,
/// computed here (random salt, 4096 iterations), so that the statement —
/// which the server logs when it fails and shows in `pg_stat_activity` —
/// never holds the password. A value that already is a verifier (SCRAM or
/// MD5) is sent as given, as PostgreSQL itself would store it.
fn verifier(password: &str) -> String {
    let md5 = password.len() == 35
        && password.starts_with("md5")
        && password[3..].bytes().all(|b| b.is_ascii_hexdigit());
    if md5 || password.starts_with("SCRAM-SHA-256$") {
        password.to_owned()
    } else {
        postgres_protocol::password::scram_sha_256(password.as_bytes())
    }
}

pub async fn create(cx: &Cx<'_>, properties: &PropertyMap) -> OpResult {
    let desired: Role = from_properties(properties)?;
    let what = crate::named(TYPE, &desired.name);
    let head = Clauses::new(format!("CREATE ROLE {} WITH", ident(&desired.name)?));
    let sql = options(head, &desired)?.idents("IN ROLE", desired.member_of.as_ref())?;
    cx.exec_admin(&what, &sql.sql()).await?;
    read(cx, &desired.name, properties).await
}

const SELECT: &str = "SELECT r.rolname AS name, r.rolcanlogin AS login, r.rolsuper AS superuser,
    r.rolcreatedb AS createdb, r.rolcreaterole AS createrole, r.rolinherit AS inherit,
    r.rolreplication AS replication, r.rolconnlimit AS connection_limit,
    r.rolvaliduntil::text AS valid_until,
    array(SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
          WHERE m.member = r.oid ORDER BY 1) AS member_of
    FROM pg_roles r";

/// The role `name` as the catalogs hold it, read through `client`.
async fn current(client: &impl GenericClient, what: &str, name: &str) -> Result<Role, PluginError> {
    let sql = format!("{SELECT} WHERE r.rolname = $1");
    record(&catalog::one(client, (what, " does not exist"), &sql, &[&name]).await?)
}

pub async fn read(cx: &Cx<'_>, name: &str, recorded: &PropertyMap) -> OpResult {
    let what = crate::named(TYPE, name);
    let conn = cx.admin(&what).await?;
    let mut role = current(&**conn, &what, name).await?;
    // What is not in the catalogs, or is spelled another way there, comes
    // back as recorded when it means the same.
    let recorded: Role = from_properties(recorded).unwrap_or_default();
    if let (Some(want), Some(have)) = (&recorded.valid_until, &role.valid_until) {
        let sql = "SELECT $1::text::timestamptz = $2::text::timestamptz";
        let same = catalog::one(&**conn, (&what, ""), sql, &[want, have]).await?;
        if same.get(0) {
            role.valid_until = recorded.valid_until;
        }
    }
    role.member_of = crate::same_set(recorded.member_of, role.member_of);
    role.password_version = recorded.password_version;
    role.drop_owned = recorded.drop_owned;
    role.reassign_owned_to = recorded.reassign_owned_to;
    done(name, to_properties(&role)?)
}

pub async fn update(cx: &Cx<'_>, name: &str, properties: &PropertyMap) -> OpResult {
    let desired: Role = from_properties(properties)?;
    crate::same_identity("name", name, &desired.name)?;
    let what = crate::named(TYPE, name);
    let mut conn = cx.admin(&what).await?;
    let tx = conn.transaction().await.map_err(cx.err(&what))?;
    let role = ident(name)?;
    let opts = options(Clauses::default(), &desired)?.sql();
    if !opts.is_empty() {
        catalog::execute(&*tx, &what, &format!("ALTER ROLE {role} WITH{opts}")).await?;
    }
    if let Some(want) = &desired.member_of {
        let have = current(&*tx, &what, name).await?;
        let have = have.member_of.unwrap_or_default();
        let mut sql = Vec::new();
        for g in want.iter().filter(|g| !have.contains(g)) {
            sql.push(format!("GRANT {} TO {role}", ident(g)?));
        }
        for g in have.iter().filter(|g| !want.contains(g)) {
            sql.push(format!("REVOKE {} FROM {role}", ident(g)?));
        }
        // Nothing to change is an empty query, which does nothing.
        catalog::execute(&*tx, &what, &sql.join("; ")).await?;
    }
    tx.commit().await.map_err(cx.err(&what))?;
    drop(conn);
    read(cx, name, properties).await
}

pub async fn delete(cx: &Cx<'_>, name: &str, recorded: &PropertyMap) -> OpResult {
    let what = crate::named(TYPE, name);
    let options: Role = from_properties(recorded).unwrap_or_default();
    let role = ident(name)?;
    read(cx, name, recorded).await?;
    if options.drop_owned == Some(true) || options.reassign_owned_to.is_some() {
        for database in crate::databases(cx, &what).await? {
            if let Some(to) = &options.reassign_owned_to {
                let sql = format!("REASSIGN OWNED BY {role} TO {}", ident(to)?);
                cx.exec_unless_gone(&database, &what, &sql).await?;
            }
            if options.drop_owned == Some(true) {
                cx.exec_unless_gone(&database, &what, &format!("DROP OWNED BY {role}"))
                    .await?;
            }
        }
    }
    cx.exec_admin(&what, &format!("DROP ROLE {role}")).await?;
    deleted(name)
}

pub async fn list(cx: &Cx<'_>, request: &ListRequest) -> Result<ListPage, PluginError> {
    let query = (SELECT, "r.rolname !~ '^pg_'", "r.rolname");
    page::keyset(cx, request, query, |r: &Role| r.name.clone()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_sent_as_scram_verifiers() {
        let v = verifier("s3cret-Value");
        assert!(v.starts_with("SCRAM-SHA-256$4096:"), "{v}");
        assert!(!v.contains("s3cret-Value"));
        assert_ne!(v, verifier("s3cret-Value"), "a salt of its own each time");
        assert_eq!(verifier(&v), v);
        let md5 = format!("md5{}", "0123456789abcdef".repeat(2));
        assert_eq!(verifier(&md5), md5);
        let sql = options(
            Clauses::default(),
            &Role {
                password: Some("it's-a-secret".into()),
                ..Role::default()
            },
        )
        .unwrap()
        .sql();
        assert!(sql.starts_with(" PASSWORD 'SCRAM-SHA-256$"), "{sql}");
        assert!(!sql.contains("secret"), "{sql}");
    }
}
